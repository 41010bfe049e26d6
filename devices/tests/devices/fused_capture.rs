//! The fused kernels (`unary_backward`, `bias_act` and its backward,
//! `masked_softmax` and its backward) in a captured step: recorded as their own
//! calls, compiled into the CPU program, and run bit for bit like the eager
//! backend, below and above the parallel thresholds.

use crate::cpu_program_support;
use crate::fused_support;

use cpu_program_support::capture;
use fused_support::fused_step;
use mlpl_devices::{Backend, CpuBackend, Tensor};
use std::sync::Arc;

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
