//! Shared by the fused-kernel capture tests: a training step that goes
//! through every fused kernel.

use crate::cpu_program_support::{adam, tensor, StepFn};
use mlpl_devices::{Backend, Tensor, UnaryOp};

/// A step training `p [rows, n]`, a bias `[1, n]` and attention scores
/// `[2, heads, t, t]` with Adam through every fused kernel. State: the three
/// parameters and their Adam moments.
pub fn fused_step(rows: usize, n: usize, heads: usize, t: usize) -> (Vec<Tensor>, Box<StepFn>) {
    let dy = tensor(&[rows, n], 31, 1.0);
    let scores_dy = tensor(&[2, heads, t, t], 32, 1.0);
    let one_row = tensor(&[1, n], 33, 2.0);
    let flat_bias = tensor(&[n], 34, 0.5);
    let shapes = [vec![rows, n], vec![1, n], vec![2, heads, t, t]];
    let mut init: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| tensor(s, 40 + i as u64, 1.5))
        .collect();
    for s in &shapes {
        init.push(Tensor::zeros(s.clone()));
        init.push(Tensor::zeros(s.clone()));
    }
    let divisor = (3f64).sqrt() as f32;
    let step = move |b: &dyn Backend, it: u64, s: &[Tensor]| {
        let (p, bias, scores) = (&s[0], &s[1], &s[2]);
        let mut kept = Vec::new();
        let mut dp = None;
        for act in [
            UnaryOp::Relu,
            UnaryOp::Gelu,
            UnaryOp::Silu,
            UnaryOp::Tanh,
            UnaryOp::Sigmoid,
        ] {
            let y = b.bias_act(p, bias, act).unwrap();
            let (dx, db) = b.bias_act_backward(p, bias, &y, &dy, act, true).unwrap();
            kept.push(b.unary_backward(act, p, &y, &dy).unwrap());
            let (dx_only, none) = b.bias_act_backward(p, bias, &y, &dy, act, false).unwrap();
            assert!(none.is_none());
            kept.push(dx_only);
            kept.push(y);
            if act == UnaryOp::Gelu {
                dp = Some((dx, db.unwrap()));
            } else {
                kept.push(dx);
                kept.push(db.unwrap());
            }
        }
        // One row: the bias gradient is the row itself (a view of dx).
        let y1 = b.bias_act(&one_row, &flat_bias, UnaryOp::Relu).unwrap();
        let g1 = one_row.clone();
        let (d1, db1) = b
            .bias_act_backward(&one_row, &flat_bias, &y1, &g1, UnaryOp::Relu, true)
            .unwrap();
        kept.extend([y1, d1, db1.unwrap()]);
        let mut dscores = None;
        for causal in [false, true] {
            let probs = b.masked_softmax(scores, divisor, causal).unwrap();
            let ds = b
                .masked_softmax_backward(&probs, &scores_dy, divisor, causal)
                .unwrap();
            kept.push(probs);
            if causal {
                dscores = Some(ds);
            } else {
                kept.push(ds);
            }
        }
        let (dp, db) = dp.unwrap();
        let grads = [dp, db, dscores.unwrap()];
        let mut next = Vec::new();
        let mut moments = Vec::new();
        for (i, g) in grads.iter().enumerate() {
            let (mut w, mut m, mut v) = (s[i].clone(), s[3 + 2 * i].clone(), s[4 + 2 * i].clone());
            b.adam_update(&mut w, g, &mut m, &mut v, adam(it)).unwrap();
            next.push(w);
            moments.extend([m, v]);
        }
        next.extend(moments);
        (next, kept)
    };
    (init, Box::new(step))
}
