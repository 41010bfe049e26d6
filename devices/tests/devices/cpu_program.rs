//! The CPU's compiled step program (`CpuProgram`, from `CpuBackend::compile_step`)
//! against the eager CPU backend: steps recorded through `capture::Recorder`,
//! planned and compiled, then run while the eager loop does the same
//! iterations; every state and compared value must have the same bits.

use crate::cpu_program_support;

use cpu_program_support::{capture, every_kernel, mlp, tensor, Captured, StepFn};
use mlpl_devices::capture::{self as cap, Recorder, ValueId};
use mlpl_devices::{Backend, BinaryOp, CpuBackend, Tensor};
use std::sync::Arc;

/// The bits of a tensor's elements.
fn bits(t: &Tensor) -> Vec<u32> {
    t.host().iter().map(|v| v.to_bits()).collect()
}

/// Runs the program `runs` times next to the eager loop and compares every
/// state and kept value after each run.
fn compare(init: Vec<Tensor>, step: &StepFn, runs: u64) -> Captured {
    let mut c = capture(init, step);
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let mut state = c.state.clone();
    for r in 0..runs {
        let it = 3 + r;
        let (next, kept) = step(&*cpu, it, &state);
        c.program.run().unwrap();
        for (what, ids, want) in [("state", &c.state_ids, &next), ("kept", &c.kept_ids, &kept)] {
            for (i, (id, t)) in ids.iter().zip(want.iter()).enumerate() {
                let got = c.program.tensor(*id).unwrap();
                assert_eq!(got.numel(), t.numel(), "{what} {i}: element count");
                assert!(
                    bits(&got) == bits(t),
                    "iteration {it}: {what} value {i} ({:?}) differs from eager",
                    t.shape()
                );
            }
        }
        state = next;
    }
    c
}

#[test]
fn a_small_mlp_step_is_bit_identical_to_eager() {
    let (init, step) = mlp(8, 6, 16, 5);
    let c = compare(init, &*step, 5);
    assert_eq!(c.program.kind(), "arena");
}

#[test]
fn an_mlp_step_above_the_parallel_thresholds_is_bit_identical_to_eager() {
    // 256 × 160 activations (40,960 elements) and products of 256·160·96
    // multiply-adds: element-wise, row and GEMM kernels all split across threads.
    let (init, step) = mlp(256, 96, 160, 200);
    compare(init, &*step, 3);
}

#[test]
fn every_kernel_is_bit_identical_to_eager() {
    let (init, step) = every_kernel(6, 8, true);
    let c = compare(init, &*step, 4);
    // Every kind of call is in the step (uploads and downloads are identities
    // on the CPU and are never recorded).
    for name in [
        "unary",
        "binary",
        "matmul",
        "matmul_t",
        "reduce",
        "argmax",
        "softmax",
        "log_softmax",
        "softmax_backward",
        "cross_entropy",
        "permute",
        "gather_rows",
        "scatter_add_rows",
        "sum_to_shape",
        "rms_norm",
        "rms_norm_backward",
        "layer_norm",
        "layer_norm_backward",
        "dropout_mask",
        "adam_update",
        "select",
        "slice_axis",
        "unslice_axis",
        "reshape",
    ] {
        assert!(c.ops.contains(&name), "the step has no `{name}` call");
    }
}

#[test]
fn every_kernel_above_the_parallel_thresholds_is_bit_identical_to_eager() {
    // 96 × 512 = 49,152 elements: over the 32K threshold of every kernel.
    let (init, step) = every_kernel(96, 512, true);
    compare(init, &*step, 2);
}

#[test]
fn runs_count_launches_and_kernel_time_and_read_kept_values_only() {
    let (init, step) = mlp(8, 6, 16, 5);
    let mut c = capture(init, &*step);
    let before = c.cpu.counters().kernel_launches;
    let scope = mlpl_devices::CounterScope::enter();
    for _ in 0..3 {
        c.program.run().unwrap();
    }
    let scoped = scope.counts().snapshot(mlpl_devices::DeviceKind::Cpu);
    drop(scope);
    let launched = c.cpu.counters().kernel_launches - before;
    assert_eq!(
        launched,
        3 * c.launches_per_step,
        "one launch per kernel, as eager"
    );
    assert_eq!(
        scoped.kernel_launches, launched,
        "counter scopes see the launches"
    );
    assert!(c.program.kernel_time() > std::time::Duration::ZERO);
    let loss = c.kept_ids[0];
    let t = c.program.tensor(loss).unwrap();
    assert_eq!(t.shape(), &[] as &[usize]);
    assert_eq!(
        c.program.first_element(loss).unwrap().to_bits(),
        t.host()[0].to_bits()
    );
    // A value that is neither kept nor an input cannot be read.
    let internal = (0..u32::MAX)
        .map(ValueId)
        .find(|v| {
            !c.kept_ids.contains(v) && !c.state_ids.contains(v) && c.program.tensor(*v).is_err()
        })
        .unwrap();
    let err = c.program.first_element(internal).unwrap_err().to_string();
    assert!(err.contains("not kept"), "{err}");
}

#[test]
fn a_fresh_program_refuses_reads_before_its_first_run() {
    let (init, step) = mlp(4, 3, 8, 3);
    let c = capture(init, &*step);
    let err = c
        .program
        .first_element(c.kept_ids[0])
        .unwrap_err()
        .to_string();
    assert!(err.contains("before the first run"), "{err}");
}

#[test]
fn a_plan_that_does_not_match_its_trace_is_an_error_not_a_panic() {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let x = tensor(&[4, 3], 1, 1.0);
    let record = |x: &Tensor| {
        let rec = Recorder::start(cpu.clone());
        let y = rec.unary(mlpl_devices::UnaryOp::Exp, x).unwrap();
        let z = rec.binary(BinaryOp::Add, &y, x).unwrap();
        let t = rec.finish();
        (t, z)
    };
    let (first, _) = record(&x);
    let (second, z) = record(&x);
    let keep = vec![second.find(&z).unwrap()];
    let mut plan = cap::plan(&first, second, keep).unwrap();
    plan.inputs[0].initial = Tensor::zeros(vec![5]);
    let err = cpu
        .compile_step(&plan)
        .expect("the CPU compiles steps")
        .err()
        .unwrap();
    assert!(err.to_string().contains("input value"), "{err}");
    let mut bad = plan.clone();
    bad.inputs[0].initial = Tensor::zeros(vec![4, 3]);
    bad.trace.calls[0].inputs.clear();
    let err = cpu.compile_step(&bad).unwrap().err().unwrap();
    assert!(
        err.to_string().contains("0 inputs where `unary` takes 1"),
        "{err}"
    );
    let mut swapped = plan.clone();
    swapped.inputs[0].initial = Tensor::zeros(vec![4, 3]);
    swapped.trace.calls.swap(0, 1);
    let err = cpu.compile_step(&swapped).unwrap().err().unwrap();
    assert!(
        err.to_string().contains("before any call computes it"),
        "{err}"
    );
    // A result recorded with a shape the kernel does not make.
    let mut reshaped = plan.clone();
    reshaped.inputs[0].initial = Tensor::zeros(vec![4, 3]);
    let z = reshaped.trace.calls[1].outputs[0];
    reshaped.trace.values[z.index()].shape = vec![5];
    let err = cpu.compile_step(&reshaped).unwrap().err().unwrap();
    assert!(
        err.to_string()
            .contains("call 2 (`binary`): outputs of [5] elements"),
        "{err}"
    );
}

#[test]
fn adam_copies_first_when_the_old_values_are_still_needed() {
    use cpu_program_support::adam;
    use mlpl_devices::UnaryOp;
    // `p` is read after its update and kept as it was; `q` is its own
    // gradient; `r` is updated in place.
    let init = vec![
        tensor(&[3, 4], 1, 1.0),
        Tensor::zeros(vec![3, 4]),
        Tensor::zeros(vec![3, 4]),
        tensor(&[5], 2, 1.0),
        Tensor::zeros(vec![5]),
        Tensor::zeros(vec![5]),
        tensor(&[2, 2], 3, 1.0),
        Tensor::zeros(vec![2, 2]),
        Tensor::zeros(vec![2, 2]),
    ];
    let step = |b: &dyn Backend, it: u64, s: &[Tensor]| {
        let g = b.unary(UnaryOp::Tanh, &s[0]).unwrap();
        let (mut p, mut m, mut v) = (s[0].clone(), s[1].clone(), s[2].clone());
        b.adam_update(&mut p, &g, &mut m, &mut v, adam(it)).unwrap();
        let after = b.binary(BinaryOp::Mul, &s[0], &p).unwrap();
        let (mut q, mut qm, mut qv) = (s[3].clone(), s[4].clone(), s[5].clone());
        b.adam_update(&mut q, &s[3], &mut qm, &mut qv, adam(it))
            .unwrap();
        let gr = b.unary(UnaryOp::Sigmoid, &s[6]).unwrap();
        let (mut r, mut rm, mut rv) = (s[6].clone(), s[7].clone(), s[8].clone());
        b.adam_update(&mut r, &gr, &mut rm, &mut rv, adam(it))
            .unwrap();
        (
            vec![p, m, v, q, qm, qv, r, rm, rv],
            vec![s[0].clone(), after],
        )
    };
    compare(init, &step, 4);
}
