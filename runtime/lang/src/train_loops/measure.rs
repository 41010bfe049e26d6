//! The calibration suite `mlpl calibrate` runs on each device (a few seconds):
//! GEMMs at several shapes, the bandwidth of an element-wise kernel, the cost of
//! one kernel call in a replayed step and in an interpreted one (from small
//! `train` loops whose kernels [`crate::step_cost::kernels`] lists, run as `mlpl run`
//! runs them), the baseline and the step buffers' memory, and a reference
//! loop's step time against the model's. Every figure is the median of repetitions, with its 10th and
//! 90th percentiles. What is stored apart from the timings (shapes, repetition
//! counts) is fixed.

use std::sync::Arc;

use mlpl_devices::clock::Instant;
use mlpl_devices::Tensor;
use mlpl_devices::{Backend, BinaryOp};

use super::loops::train_loops;
use crate::estimate::calibration::{DeviceModel, GemmPoint, Measured};
use crate::value::Array;

/// The square GEMM sizes measured.
pub const GEMM_SIZES: &[usize] = &[8, 16, 32, 64, 128, 256, 512];
/// Repetitions of every timing.
pub const REPS: usize = 7;

/// Seconds of `f` (synchronized by downloading its result), `REPS` times after
/// one warm-up, each timing `inner` calls.
fn time_reps(
    b: &Arc<dyn Backend>,
    inner: usize,
    f: &dyn Fn() -> mlpl_devices::Result<Tensor>,
) -> Result<Vec<f64>, String> {
    let sync = |t: Tensor| b.download(&t).map(|_| ()).map_err(|e| e.to_string());
    sync(f().map_err(|e| e.to_string())?)?;
    let mut out = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let start = Instant::now();
        let mut last = None;
        for _ in 0..inner {
            last = Some(f().map_err(|e| e.to_string())?);
        }
        if let Some(t) = last {
            sync(t)?;
        }
        out.push(start.elapsed().as_secs_f64().max(1e-9) / inner as f64);
    }
    Ok(out)
}

fn filled(b: &Arc<dyn Backend>, shape: &[usize]) -> Result<Tensor, String> {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i % 97) as f32) * 0.01).collect();
    b.upload(&Array::from_vec(shape.to_vec(), data).tensor())
        .map_err(|e| e.to_string())
}

/// Seconds of one direct kernel call doing no work (`a + b` of one element):
/// what a call outside a replayed step costs beyond its work (allocating the
/// result), taken off the GEMM timings so that their throughput is the work's.
pub fn call_seconds(b: &Arc<dyn Backend>) -> Result<f64, String> {
    let x = filled(b, &[1])?;
    let secs = time_reps(b, 2000, &|| b.binary(BinaryOp::Add, &x, &x))?;
    Ok(Measured::of(&secs).median)
}

/// GEMM throughput at every size of [`GEMM_SIZES`].
pub fn gemm_points(b: &Arc<dyn Backend>) -> Result<Vec<GemmPoint>, String> {
    let call = call_seconds(b)?;
    let mut pts = Vec::new();
    for &s in GEMM_SIZES {
        let x = filled(b, &[s, s])?;
        let y = filled(b, &[s, s])?;
        let flops = 2.0 * (s * s * s) as f64;
        // About 2 ms of work per timing at 20 GFLOP/s.
        let inner = ((4e7 / flops) as usize).clamp(1, 2000);
        let secs = time_reps(b, inner, &|| b.matmul(&x, &y))?;
        let g: Vec<f64> = secs
            .iter()
            .map(|t| flops / (t - call).max(0.1 * t) / 1e9)
            .collect();
        pts.push(GemmPoint {
            m: s as u64,
            k: s as u64,
            n: s as u64,
            gflops: Measured::of(&g),
        });
    }
    Ok(pts)
}

/// GB/s of `a + b` over 2¹⁶ elements (in cache) and over 2²³ (from memory),
/// three arrays moved.
pub fn bandwidths(b: &Arc<dyn Backend>) -> Result<(Measured, Measured), String> {
    let mut out = Vec::new();
    for (n, inner) in [(1usize << 16, 64), (1 << 23, 1)] {
        let x = filled(b, &[n])?;
        let y = filled(b, &[n])?;
        let secs = time_reps(b, inner, &|| b.binary(BinaryOp::Add, &x, &y))?;
        let g: Vec<f64> = secs.iter().map(|t| 12.0 * n as f64 / t / 1e9).collect();
        out.push(Measured::of(&g));
    }
    Ok((out[0], out[1]))
}

/// The loop whose kernels time dispatch: a small MLP on 4 rows, where every
/// kernel's work is negligible. `mlpl calibrate` runs it as `mlpl run` does,
/// captured and with `--no-capture`.
pub const DISPATCH_LOOP: &str = "X = randn(1, [4, 8])
y = argmax(randn(2, [4, 4]), 1)
model = chain(linear(8, 8, 1), relu_layer(), linear(8, 8, 2), tanh_layer(), linear(8, 4, 3))
train 300 {
  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)
}
";

/// The reference loop: a one-block transformer LM step of a few
/// milliseconds, whose measured step time and peak memory scale the model's
/// (`step_factor`, `arena_factor`, `interp_byte_s`).
pub const REFERENCE_LOOP: &str = "X = argmax(randn(1, [16, 32, 256]), 2)
Y = argmax(randn(2, [16, 32, 256]), 2)
model = chain(
  embed(256, 128, 0),
  residual(chain(rms_norm(128, 1), causal_attention(128, 2, 1))),
  residual(chain(rms_norm(128, 1), linear(128, 512, 2), relu_layer(), linear(512, 128, 3))),
  rms_norm(128, 1),
  linear(128, 256, 4),
)
train 12 {
  adam(cross_entropy(apply(model, X), Y), model, 0.001, 0.9, 0.999, 1e-8)
}
";

/// The parameter-heavy reference loop: a wide MLP on 8 rows, whose peak
/// memory is mostly parameters, gradients, optimizer state and their copies.
pub const PARAM_LOOP: &str = "X = randn(1, [8, 32])
y = argmax(randn(2, [8, 10]), 1)
model = chain(linear(32, 1536, 1), relu_layer(), linear(1536, 1536, 2), relu_layer(), linear(1536, 10, 3))
train 6 {
  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)
}
";

/// The step estimate of the first `train` loop of `src` on `model`.
pub fn loop_estimate(
    src: &str,
    model: &DeviceModel,
    captured: bool,
) -> Result<crate::step_cost::cost::StepEstimate, String> {
    let (checked, facts) = crate::check::query::check_with_facts(src);
    let lp = train_loops(&checked.program, &facts)
        .into_iter()
        .next()
        .ok_or("the calibration loop has no estimable model")?;
    Ok(crate::step_cost::cost::estimate_step(
        &lp.model, &lp.frozen, &lp.step, captured, model,
    ))
}

/// How a calibration loop ran: seconds per step, one sample per repetition,
/// and the process's peak resident bytes (the smallest over the repetitions).
pub type LoopRun = (Vec<f64>, f64);

/// Peak resident bytes of this process (`/proc/self/status` VmHWM).
pub fn peak_resident_bytes() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// Runs the suite on a device (`backend` is its backend). `run_loop(src,
/// captured)` runs a calibration loop as the programs to estimate will run
/// (`mlpl run` in a child process) and reports a [`LoopRun`].
pub fn calibrate(
    backend: Arc<dyn Backend>,
    run_loop: &dyn Fn(&str, bool) -> Result<LoopRun, String>,
) -> Result<DeviceModel, String> {
    let gemm = gemm_points(&backend)?;
    let (cache_bandwidth_gbs, bandwidth_gbs) = bandwidths(&backend)?;
    let mut model = DeviceModel {
        dispatch_s: Measured::exact(0.0),
        interp_s: Measured::exact(0.0),
        interp_byte_s: 0.0,
        gemm,
        cache_bandwidth_gbs,
        bandwidth_gbs,
        baseline_bytes: 0.0,
        arena_factor: 1.0,
        param_factor: 0.0,
        step_factor: 1.0,
        correction: Default::default(),
    };
    // Dispatch and interpretation per kernel, and the baseline, from a loop of
    // negligible work.
    let tiny = loop_estimate(DISPATCH_LOOP, &model, true)?;
    let kernels = tiny.totals.kernels;
    let (replayed, base_c) = run_loop(DISPATCH_LOOP, true)?;
    let (interpreted, _) = run_loop(DISPATCH_LOOP, false)?;
    let per_kernel = |s: &[f64]| s.iter().map(|t| t / kernels).collect::<Vec<f64>>();
    model.dispatch_s = Measured::of(&per_kernel(&replayed));
    let eager = Measured::of(&per_kernel(&interpreted));
    model.interp_s = Measured {
        median: (eager.median - model.dispatch_s.median).max(0.0),
        lo: (eager.lo - model.dispatch_s.lo).max(0.0),
        hi: (eager.hi - model.dispatch_s.hi).max(0.0),
    };
    let tiny = loop_estimate(DISPATCH_LOOP, &model, true)?;
    model.baseline_bytes = (base_c - (tiny.memory.total - tiny.memory.baseline)).max(0.0);
    // The reference loop scales work time and step buffers.
    let (steps, peak) = run_loop(REFERENCE_LOOP, true)?;
    let est = loop_estimate(REFERENCE_LOOP, &model, true)?;
    let measured = Measured::of(&steps).median;
    if measured.is_finite() && est.seconds.mid > 0.0 {
        let work = (measured - est.overhead_seconds).max(0.25 * measured);
        model.step_factor = (work / est.work_seconds.max(1e-12)).clamp(0.2, 5.0);
    }
    // Memory: the two reference loops give the factors of activation outputs
    // and of parameter-sized tensors (two equations, two unknowns).
    let (_, peak_p) = run_loop(PARAM_LOOP, true)?;
    let parts = |src: &str, peak: f64| -> Result<(f64, f64, f64), String> {
        let e = loop_estimate(src, &model, true)?;
        let m = &e.memory;
        let (checked, facts) = crate::check::query::check_with_facts(src);
        let lp = train_loops(&checked.program, &facts)
            .into_iter()
            .next()
            .ok_or("no loop")?;
        let tr: f64 = lp
            .model
            .param_specs()
            .iter()
            .map(|p| p.shape.iter().map(|&d| d as f64).product::<f64>())
            .sum();
        let act = crate::step_cost::cost::activation_outputs(e.totals.out_elems, tr, lp.step.slots);
        let fixed = m.weights + m.grads + m.optimizer + m.tape + model.baseline_bytes;
        Ok((peak - fixed, 4.0 * act, 4.0 * tr))
    };
    let (ya, aa, pa) = parts(REFERENCE_LOOP, peak)?;
    let (yb, ab, pb) = parts(PARAM_LOOP, peak_p)?;
    let det = aa * pb - ab * pa;
    if det.abs() > 1e-9 * (aa * pb).abs() {
        model.arena_factor = ((ya * pb - yb * pa) / det).clamp(0.5, 8.0);
        model.param_factor = ((aa * yb - ab * ya) / det).clamp(0.0, 12.0);
    }
    let (eager_steps, _) = run_loop(REFERENCE_LOOP, false)?;
    let est = loop_estimate(REFERENCE_LOOP, &model, false)?;
    let eager = Measured::of(&eager_steps).median;
    let bytes = 4.0 * est.totals.out_elems;
    if eager.is_finite() && bytes > 0.0 {
        model.interp_byte_s = ((eager - est.seconds.mid) / bytes).max(0.0);
    }
    Ok(model)
}
