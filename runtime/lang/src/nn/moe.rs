//! Mixture of experts (LANGUAGE §11.5): a softmax router picks the top-k experts
//! per token (a constant choice), every expert is a SwiGLU block, and the outputs
//! are mixed by the gate weights. Only the routed experts compute: each expert's
//! tokens are gathered ([`route`](super::route) lays them out in blocks of the
//! GEMM's `k` block, padded to the most tokens an expert gets in a block), the
//! experts' products run as one batched product over that layout, the outputs
//! are scaled by their gates and each token sums its `k` outputs. Gradients reach
//! the router through the gates, each expert from its own tokens only, and the
//! input through the gathers.
//!
//! The values, gradients and load-balancing loss are those of evaluating every
//! expert on every token and masking by the choice, bit for bit on the CPU: a
//! row's product does not depend on the other rows, a token's `k` outputs are
//! summed in f64 in increasing expert index as the dense sum over all experts
//! would, and the weight gradients add the blocks of tokens in the GEMM's order
//! (`autograd::ops::moe`). `runtime/lang/tests/lang/moe_routed.rs` checks this
//! against the dense form.
//!
//! Each application also records the load-balancing loss
//! aux = E·Σ_e f_e·P_e in the layer (§12.7).
//!
//! A loop over a model with a `moe` layer is not step-captured: the choice is
//! made on the host from the router's probabilities (a computed value read on
//! the host ends a capture), and the layout's size (the busiest expert's tokens
//! per block) changes from step to step, so the kernels' shapes do too.
//! Capturing it would take the top-k choice and the layout made by device
//! kernels into buffers of a fixed capacity: room for every token of a block in
//! every expert is the dense cost again, and a smaller capacity drops tokens,
//! which changes the results.
//!
//! GPT-OSS's form adds biases to the router and the experts, gates with the
//! softmax of the chosen experts' logits only, and uses its clamped gated
//! activation (docs/models.md).

use mlpl_devices::{BinaryOp, ReduceOp, UnaryOp};

use super::apply::Forward;
use super::layers::{Layer, Moe, MoeGate};
pub use super::route::choose;
use super::route::Routing;
use crate::errors::device_error;
use crate::eval::{loss, ops};
use crate::value::Array;
use mlpl_diag::{code, Diagnostic};

/// The op name of a `moe` layer's kernels in errors.
const OP: &str = "moe";

/// The most (token, expert) positions one application lays out: their indices
/// are integer-valued f32.
const MAX_POSITIONS: usize = 1 << 24;

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
    if n.div_ceil(mlpl_devices::cpu::KC) * mlpl_devices::cpu::KC * e > MAX_POSITIONS {
        return Err(Diagnostic::of(code::E0410)
            .at(
                f.span,
                format!("`{OP}` would route {n} tokens to {e} experts"),
            )
            .note("a `moe` layer lays out at most 2^24 (token, expert) positions per application")
            .help("apply the model to fewer tokens at once"));
    }

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
    let routing = Routing::new(&chosen, n, e, k);
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

    let experts = Experts {
        wg,
        wu,
        wd,
        biases: biases.map(|[_, bg, bu, bd]| [bg, bu, bd]),
    };
    let y = if n == 0 {
        // No token: `[0, d]`, still on the tape when the input is.
        ops::arith(f.it, BinaryOp::Mul, &x2, &Array::exact(0.0), f.span)?
    } else {
        experts.run(f, m, &x2, &gates, &routing)?
    };

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

/// The experts' parameters: `Wg`, `Wu` `[E, d, hidden]`, `Wd` `[E, hidden, d]`
/// and, in GPT-OSS's form, their biases `[E, 1, hidden]`, `[E, 1, hidden]`,
/// `[E, 1, d]`.
struct Experts {
    wg: Array,
    wu: Array,
    wd: Array,
    biases: Option<[Array; 3]>,
}

impl Experts {
    /// The gated sum of the chosen experts' outputs for the rows `x2` `[n, d]`
    /// (n ≥ 1) with `gates` `[n, E]`, on the tokens `routing` lays out.
    fn run(
        &self,
        f: &mut Forward<'_>,
        m: &Moe,
        x2: &Array,
        gates: &Array,
        routing: &Routing,
    ) -> Result<Array, Diagnostic> {
        let (n, d, e, k, hid) = (x2.shape()[0], m.d, m.experts, m.top_k, m.hidden);
        let (blocks, width) = (routing.blocks, routing.width);
        let layout = |cols: usize| vec![blocks, e, width, cols];
        ops::check_size(OP, &layout(hid.max(d)), f.span)?;
        let positions = routing.positions();
        let rows = Array::from_vec(vec![positions], routing.rows.clone());
        let slots = Array::from_vec(vec![k.min(e), n], routing.slots.clone());
        let bias = |i: usize| self.biases.as_ref().map(|b| b[i].clone());

        // One node whose gradient sums the gate and up products' (as the dense
        // form's reshaped input does), each token's copies summed by `dispatch`.
        let x = ops::reshape(f.it, x2, vec![n, d], f.span)?;
        let xg = dispatch(f, &x, &rows, &slots)?;
        let xg = ops::reshape(f.it, &xg, layout(d), f.span)?;
        let xu = dispatch(f, &x, &rows, &slots)?;
        let xu = ops::reshape(f.it, &xu, layout(d), f.span)?;
        let g = expert_matmul(f, &xg, &self.wg)?;
        let g = add(f, &g, bias(0))?;
        let u = expert_matmul(f, &xu, &self.wu)?;
        let u = add(f, &u, bias(1))?;
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
        let y = expert_matmul(f, &h, &self.wd)?;
        let y = add(f, &y, bias(2))?;

        // Scale by the gates, then each token sums its k outputs (in f64, in
        // increasing expert index: the dense sum over every expert's masked output).
        let flat = ops::reshape(f.it, gates, vec![n * e, 1], f.span)?;
        let gate_ids = Array::from_vec(vec![positions], routing.gates.clone());
        let gp = take_rows(f, &flat, &gate_ids)?;
        let gp = ops::reshape(f.it, &gp, layout(1), f.span)?;
        let y = ops::arith(f.it, BinaryOp::Mul, &y, &gp, f.span)?;
        let y = ops::reshape(f.it, &y, vec![positions, d], f.span)?;
        let copies = take_rows(f, &y, &slots)?;
        ops::reduce(f.it, ReduceOp::Sum, &copies, Some(0), f.span)
    }
}

/// Rows of `table` `[V, w]` selected by the constant integer-valued `ids`
/// (any shape, each in `[0, V)`) → `[ids…, w]`; differentiable in `table`.
fn take_rows(f: &mut Forward<'_>, table: &Array, ids: &Array) -> Result<Array, Diagnostic> {
    let (backend, placement) = ops::placement_for(f.it, OP, &[(table, f.span)])?;
    let ids = ids.tensor();
    let out = match loss::live(f.it, table) {
        Some(v) => loss::record(f.it, OP, f.span, |t| t.gather_rows(v, &ids))?,
        None => Array::from_tensor(
            backend
                .gather_rows(&table.tensor(), &ids)
                .map_err(|e| device_error(e, OP, f.span))?,
        ),
    };
    Ok(out.with_placement(placement))
}

/// The tokens `x` `[n, d]` at the positions of `rows`, whose gradient sums each
/// token's copies at `slots` ([`Tape::dispatch`](crate::autograd::Tape::dispatch)).
fn dispatch(
    f: &mut Forward<'_>,
    x: &Array,
    rows: &Array,
    slots: &Array,
) -> Result<Array, Diagnostic> {
    let (backend, placement) = ops::placement_for(f.it, OP, &[(x, f.span)])?;
    let (rows, slots) = (rows.tensor(), slots.tensor());
    let out = match loss::live(f.it, x) {
        Some(v) => loss::record(f.it, OP, f.span, |t| t.dispatch(v, &rows, &slots))?,
        None => Array::from_tensor(
            backend
                .gather_rows(&x.tensor(), &rows)
                .map_err(|e| device_error(e, OP, f.span))?,
        ),
    };
    Ok(out.with_placement(placement))
}

/// `x` `[C, E, m, a]` times each expert's weight `w` `[E, a, b]`
/// ([`Tape::expert_matmul`](crate::autograd::Tape::expert_matmul)).
fn expert_matmul(f: &mut Forward<'_>, x: &Array, w: &Array) -> Result<Array, Diagnostic> {
    let (backend, placement) = ops::placement_for(f.it, OP, &[(x, f.span), (w, f.span)])?;
    let out = if loss::any_live(f.it, &[x, w]) {
        let (vx, vw) = (loss::var_of(f.it, x), loss::var_of(f.it, w));
        loss::record(f.it, OP, f.span, |t| t.expert_matmul(vx, vw))?
    } else {
        Array::from_tensor(
            backend
                .matmul(&x.tensor(), &w.tensor())
                .map_err(|e| device_error(e, OP, f.span))?,
        )
    };
    Ok(out.with_placement(placement))
}
