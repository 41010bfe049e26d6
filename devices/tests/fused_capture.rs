//! The fused kernels (`unary_backward`, `bias_act` and its backward,
//! `masked_softmax` and its backward) in a captured step: recorded as their own
//! calls, compiled into the CPU program, and run bit for bit like the eager
//! backend, below and above the parallel thresholds.

mod cpu_program_support;

use cpu_program_support::{adam, capture, tensor, StepFn};
use mlpl_devices::{Backend, CpuBackend, Tensor, UnaryOp};
use std::sync::Arc;

/// A step training `p [rows, n]`, a bias `[1, n]` and attention scores
/// `[2, heads, t, t]` with Adam through every fused kernel. State: the three
/// parameters and their Adam moments.
fn fused_step(rows: usize, n: usize, heads: usize, t: usize) -> (Vec<Tensor>, Box<StepFn>) {
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
            b.adam_update(&mut w, g, &mut m, &mut v, &adam(it)).unwrap();
            next.push(w);
            moments.extend([m, v]);
        }
        next.extend(moments);
        (next, kept)
    };
    (init, Box::new(step))
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.host()
        .iter()
        .map(|v| {
            if v.is_nan() {
                f32::NAN.to_bits()
            } else {
                v.to_bits()
            }
        })
        .collect()
}

/// Captures the step, then runs the program and the eager backend side by
/// side for `runs` iterations, comparing every state and kept value.
fn compare(rows: usize, n: usize, heads: usize, t: usize, runs: u64) {
    let (init, step) = fused_step(rows, n, heads, t);
    let mut c = capture(init, &*step);
    assert_eq!(c.program.kind(), "arena");
    for name in [
        "bias_act",
        "bias_act_backward",
        "unary_backward",
        "masked_softmax",
        "masked_softmax_backward",
    ] {
        assert!(c.ops.contains(&name), "no `{name}` call in {:?}", c.ops);
    }
    assert!(!c.ops.contains(&"softmax") && !c.ops.contains(&"unary"));
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let mut state = c.state.clone();
    for r in 0..runs {
        let it = 3 + r;
        let (next, kept) = step(&*cpu, it, &state);
        c.program.run().unwrap();
        for (what, ids, want) in [("state", &c.state_ids, &next), ("kept", &c.kept_ids, &kept)] {
            for (i, (id, t)) in ids.iter().zip(want.iter()).enumerate() {
                let got = c.program.tensor(*id).unwrap();
                assert!(
                    bits(&got) == bits(t),
                    "iteration {it}: {what} value {i} ({:?}) differs from eager",
                    t.shape()
                );
            }
        }
        state = next;
    }
}

#[test]
fn fused_kernels_replay_bit_for_bit() {
    compare(6, 5, 2, 4, 4);
}

#[test]
fn fused_kernels_above_the_parallel_thresholds_replay_bit_for_bit() {
    // 256 × 160 = 40,960-element activations; 2 × 8 × 48 × 48 = 36,864 scores.
    compare(256, 160, 8, 48, 2);
}
