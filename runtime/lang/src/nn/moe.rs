//! Mixture of experts (LANGUAGE §11.5): a softmax router picks the top-k experts
//! per token (a constant choice), every expert is a SwiGLU block, and the outputs
//! are mixed by the gate weights. Experts are evaluated densely (all tokens
//! through all experts as one batched product) and masked by the constant
//! choice, so gradients reach the router and the chosen experts only.
//!
//! Each application also records the load-balancing loss
//! aux = E·Σ_e f_e·P_e in the layer (§12.7).
//!
//! GPT-OSS's form adds biases to the router and the experts, gates with the
//! softmax of the chosen experts' logits only, and uses its clamped gated
//! activation (docs/models.md).

use mlpl_devices::{BinaryOp, ReduceOp, UnaryOp};

use super::apply::Forward;
use super::layers::{Layer, Moe, MoeGate};
use crate::eval::ops;
use crate::value::Array;
use mlpl_diag::Diagnostic;

/// The chosen experts of each row of router probabilities `p` `[n, e]`: the k
/// largest, equal values taken lower index first. Returns the 0/1 mask `[n·e]`
/// and the number of tokens choosing each expert.
pub fn choose(p: &[f32], n: usize, e: usize, k: usize) -> (Vec<f32>, Vec<usize>) {
    let mut mask = vec![0f32; n * e];
    let mut counts = vec![0usize; e];
    for row in 0..n {
        let probs = &p[row * e..(row + 1) * e];
        let mut order: Vec<usize> = (0..e).collect();
        // A stable sort keeps lower indices first among equal values.
        order.sort_by(|&a, &b| {
            probs[b]
                .partial_cmp(&probs[a])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for &j in order.iter().take(k) {
            mask[row * e + j] = 1.0;
            counts[j] += 1;
        }
    }
    (mask, counts)
}

/// `x + b` when there is a bias `b` (broadcast), else `x`.
fn add(f: &mut Forward<'_>, x: &Array, b: Option<Array>) -> Result<Array, Diagnostic> {
    match b {
        Some(b) => ops::arith(f.it, BinaryOp::Add, x, &b, f.span),
        None => Ok(x.clone()),
    }
}

/// Applies a `moe` layer to `x` `[…, d]`.
pub fn forward(
    f: &mut Forward<'_>,
    layer: &Layer,
    m: &Moe,
    x: &Array,
) -> Result<Array, Diagnostic> {
    if x.rank() == 0 || x.shape()[x.rank() - 1] != m.d {
        return Err(f.wrong_input(layer, &format!("[…, {}]", m.d), x));
    }
    let (d, e, k, hid) = (m.d, m.experts, m.top_k, m.hidden);
    let id = m.id;
    let r = f.weight(&format!("__moe_R_{id}"), &[d, e])?;
    let wg = f.weight(&format!("__moe_Wg_{id}"), &[e, d, hid])?;
    let wu = f.weight(&format!("__moe_Wu_{id}"), &[e, d, hid])?;
    let wd = f.weight(&format!("__moe_Wd_{id}"), &[e, hid, d])?;
    let biases = if m.bias {
        Some([
            f.weight(&format!("__moe_bR_{id}"), &[1, e])?,
            f.weight(&format!("__moe_bg_{id}"), &[e, 1, hid])?,
            f.weight(&format!("__moe_bu_{id}"), &[e, 1, hid])?,
            f.weight(&format!("__moe_bd_{id}"), &[e, 1, d])?,
        ])
    } else {
        None
    };
    let bias = |i: usize| biases.as_ref().map(|b| b[i].clone());
    let (x2, lead, names) = f.rows(x)?;
    let n = x2.shape()[0];
    ops::check_size("moe", &[e, n, hid.max(d)], f.span)?;

    // Router: probabilities and the constant choice.
    let logits = f.mm(&x2, &r)?;
    let logits = add(f, &logits, bias(0))?;
    let p = ops::softmax(f.it, &logits, 1, false, f.span)?;
    let (chosen, counts) = choose(&p.to_f32(), n, e, k);
    let keep = Array::from_f64(
        vec![n, e],
        &chosen
            .iter()
            .map(|&c| if c == 1.0 { 0.0 } else { -1e30 })
            .collect::<Vec<f64>>(),
    );
    let chosen = Array::from_vec(vec![n, e], chosen);
    let pc = ops::arith(f.it, BinaryOp::Mul, &p, &chosen, f.span)?;
    let gates = if m.softmax_after {
        // softmax over the chosen logits only: the others masked out.
        let kept = ops::arith(f.it, BinaryOp::Add, &logits, &keep, f.span)?;
        ops::softmax(f.it, &kept, 1, false, f.span)?
    } else if k >= 2 {
        let total = ops::reduce(f.it, ReduceOp::Sum, &pc, Some(1), f.span)?;
        let total = ops::reshape(f.it, &total, vec![n, 1], f.span)?;
        ops::arith(f.it, BinaryOp::Div, &pc, &total, f.span)?
    } else {
        pc
    };

    // Experts, densely: [1, n, d] × [e, d, hidden] → [e, n, hidden] → [e, n, d].
    let x3 = ops::reshape(f.it, &x2, vec![1, n, d], f.span)?;
    let g = f.mm(&x3, &wg)?;
    let g = add(f, &g, bias(1))?;
    let u = f.mm(&x3, &wu)?;
    let u = add(f, &u, bias(2))?;
    let h = match m.gate {
        MoeGate::Silu => {
            let g = ops::unary(f.it, UnaryOp::Silu, &g, f.span)?;
            ops::arith(f.it, BinaryOp::Mul, &g, &u, f.span)?
        }
        MoeGate::Clamped { alpha, limit } => {
            // (clamp(u, −limit, limit) + 1) ⊙ g'·sigmoid(alpha·g'), g' = min(g, limit).
            let g = ops::clamp(f.it, &g, f64::NEG_INFINITY, limit, f.span)?;
            let u = ops::clamp(f.it, &u, -limit, limit, f.span)?;
            let ag = ops::arith(f.it, BinaryOp::Mul, &g, &Array::exact(alpha), f.span)?;
            let sg = ops::unary(f.it, UnaryOp::Sigmoid, &ag, f.span)?;
            let glu = ops::arith(f.it, BinaryOp::Mul, &g, &sg, f.span)?;
            let u1 = ops::arith(f.it, BinaryOp::Add, &u, &Array::exact(1.0), f.span)?;
            ops::arith(f.it, BinaryOp::Mul, &u1, &glu, f.span)?
        }
    };
    let y = f.mm(&h, &wd)?;
    let y = add(f, &y, bias(3))?;
    let gt = ops::permute(f.it, &gates, &[1, 0], f.span)?;
    let gt = ops::reshape(f.it, &gt, vec![e, n, 1], f.span)?;
    let y = ops::arith(f.it, BinaryOp::Mul, &y, &gt, f.span)?;
    let y = ops::reduce(f.it, ReduceOp::Sum, &y, Some(0), f.span)?;

    // Load balancing: aux = E·Σ_e f_e·P_e, f constant, P = mean over tokens of p.
    let scaled: Vec<f64> = counts
        .iter()
        .map(|&c| {
            if n == 0 || k == 0 {
                0.0
            } else {
                e as f64 * c as f64 / (n as f64 * k as f64)
            }
        })
        .collect();
    let scaled = Array::from_f64(vec![e], &scaled);
    let mean_p = ops::reduce(f.it, ReduceOp::Mean, &p, Some(0), f.span)?;
    let weighted = ops::arith(f.it, BinaryOp::Mul, &mean_p, &scaled, f.span)?;
    let aux = ops::reduce(f.it, ReduceOp::Sum, &weighted, None, f.span)?;
    f.it.moe_aux.insert(m.id, aux);

    f.unrows(&y, &lead, names)
}
