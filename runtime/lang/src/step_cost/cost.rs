//! Time and memory of one training step on one device: the step's kernels
//! ([`crate::step_cost::kernels`]) costed with the device's calibrated model
//! ([`DeviceModel`]), and the memory its run holds at its peak.

use mlpl_devices::math;
use std::collections::HashSet;

use crate::estimate::calibration::{DeviceModel, Measured};
use crate::nn::layers::Layer;
use crate::step_cost::kernels::{
    routes_on_host, step_kernels, totals, GemmLayout, Kernel, StepShape, Totals, Work,
};

/// A range `[lo, hi]` around a central value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// The low end.
    pub lo: f64,
    /// The central value.
    pub mid: f64,
    /// The high end.
    pub hi: f64,
}

impl Range {
    /// Every end times `k`.
    pub fn scale(self, k: f64) -> Range {
        Range {
            lo: self.lo * k,
            mid: self.mid * k,
            hi: self.hi * k,
        }
    }
}

/// The calibrated shapes nearest a product whose throughputs are averaged.
const NEAREST: usize = 4;

/// The squared distance [`gemm_gflops`] adds between a product and a
/// calibrated point of another [`GemmLayout`]: as far as a factor of e² in one
/// size, so that a product takes its own layout's points where any lie near.
const LAYOUT_DISTANCE2: f64 = 4.0;

/// GFLOP/s of `batch` products `[m, k]·[k, n]` (`m` and `n` padded to whole
/// tiles by the caller), from the calibrated shapes' percentile `pick`.
///
/// Throughput depends on the shape, not on the work alone: at the same work a
/// product of 64 rows, or of an inner size of 64 (a weight gradient over 64
/// tokens), or a batch of 64 small products, runs far from a square one. So
/// each calibrated point (squares, the step-like shapes of
/// `train_loops::measure::GEMM_SHAPES`) is a position in log rows, log inner
/// size, log columns and log batch, a point of another [`GemmLayout`] further by
/// [`LAYOUT_DISTANCE2`], and the product's throughput is the
/// weighted geometric mean of its [`NEAREST`] points' (weights 1 / distance²;
/// a point at the product's own shape is taken as is). Beyond the points it
/// is the nearest ones' (no extrapolation); below the smallest point's work
/// it falls with the square root of the work (the call's fixed costs).
///
/// The points are put in padded terms too: a calibrated `8³` product computes
/// whole `12 × 32` tiles, so its throughput over its padded work is
/// `(12·32)/(8·8)` times its measured one (without this, small products paid
/// for their padding twice).
pub fn gemm_gflops(
    model: &DeviceModel,
    batch: f64,
    m: f64,
    k: f64,
    n: f64,
    layout: GemmLayout,
    pick: fn(&Measured) -> f64,
) -> f64 {
    /// A calibrated point: its position (log padded rows, inner size, padded
    /// columns, batch), its extra squared distance for another layout, its
    /// padded work and its throughput over that work.
    struct Point {
        at: [f64; 4],
        apart: f64,
        work: f64,
        gflops: f64,
    }
    let pts: Vec<Point> = model
        .gemm
        .iter()
        .filter_map(|p| {
            let (m, k, n, b) = (
                p.m.max(1) as f64,
                p.k.max(1) as f64,
                p.n.max(1) as f64,
                p.batch.max(1) as f64,
            );
            let (pm, pn) = (padded(m, model.tile[0]), padded(n, model.tile[1]));
            let g = pick(&p.gflops) * pm * pn / (m * n);
            let at = [math::log(pm), math::log(k), math::log(pn), math::log(b)];
            let other = GemmLayout::of(p.ta, p.tb) != layout;
            (g > 0.0 && g.is_finite()).then_some(Point {
                at,
                apart: if other { LAYOUT_DISTANCE2 } else { 0.0 },
                work: b * pm * k * pn,
                gflops: g,
            })
        })
        .collect();
    // The least work calibrated (of the product's own layout among equals):
    // below it, what a call costs beyond its work dominates, whatever the
    // layout (taking the own layout's smallest, a 256² product, had charged a
    // 160-FLOP gradient 2.6 µs and put the sweep's smallest loops 2.5× over).
    let Some(smallest) = pts
        .iter()
        .min_by(|a, b| a.work.total_cmp(&b.work).then(a.apart.total_cmp(&b.apart)))
    else {
        return 1.0;
    };
    let b = batch.max(1.0);
    let w = (b * m * k * n).max(1.0);
    if w <= smallest.work {
        return smallest.gflops * math::pow(w / smallest.work, 0.5);
    }
    let q = [
        math::log(m.max(1.0)),
        math::log(k.max(1.0)),
        math::log(n.max(1.0)),
        math::log(b),
    ];
    let mut near: Vec<(f64, f64)> = pts
        .iter()
        .map(|p| {
            let d2: f64 = p.at.iter().zip(&q).map(|(a, b)| (a - b) * (a - b)).sum();
            (d2 + p.apart, p.gflops)
        })
        .collect();
    near.sort_by(|a, b| a.0.total_cmp(&b.0));
    if near[0].0 < 1e-12 {
        return near[0].1;
    }
    let (mut sw, mut sl) = (0.0, 0.0);
    for &(d2, g) in near.iter().take(NEAREST) {
        sw += 1.0 / d2;
        sl += math::log(g) / d2;
    }
    math::exp(sl / sw)
}

/// GB/s of a memory-bound kernel moving `bytes`: the in-cache bandwidth up to
/// 4 MB, the memory bandwidth from 64 MB, log-interpolated between.
pub fn bandwidth_gbs(model: &DeviceModel, bytes: f64, pick: fn(&Measured) -> f64) -> f64 {
    let (small, large) = (4e6f64, 64e6f64);
    let (c, m) = (pick(&model.cache_bandwidth_gbs), pick(&model.bandwidth_gbs));
    if bytes <= small {
        c
    } else if bytes >= large {
        m
    } else {
        let t = (math::log(bytes) - math::log(small)) / (math::log(large) - math::log(small));
        math::exp(math::log(c) + t * (math::log(m) - math::log(c)))
    }
}

/// `x` rounded up to a whole number of tiles of `tile` (at least one).
fn padded(x: f64, tile: u64) -> f64 {
    let t = tile.max(1) as f64;
    (x / t).ceil().max(1.0) * t
}

/// Seconds of one kernel call, from the model's percentile `pick`: the
/// dispatch cost plus [`kernel_time`].
pub fn kernel_seconds(model: &DeviceModel, k: &Kernel, pick: fn(&Measured) -> f64) -> f64 {
    pick(&model.dispatch_s) + kernel_time(model, k, pick)
}

/// Seconds of one kernel call's work: the part its calibrated factor scales
/// ([`DeviceModel::kernel_factor`]; 1 for plain products) times the factor,
/// plus its transcendental evaluations ([`kernel_work_parts`]); a
/// memory-bound kernel takes at least its bytes at the bandwidth for their
/// size. The factors are fitted on small, in-cache calibration loops, where
/// they measure a kernel's per-element work (`adam_update`'s square roots, a
/// broadcast's index arithmetic); a large array's traffic is bounded by the
/// memory bandwidth instead, and scaling that by the factor had made a 4096²
/// Adam update 2.5× too slow.
pub fn kernel_time(model: &DeviceModel, k: &Kernel, pick: fn(&Measured) -> f64) -> f64 {
    let (scaled, evals) = kernel_work_parts(model, k, pick);
    let t = model.kernel_factor(k.name) * scaled + evals;
    match k.work {
        Work::Memory { bytes } => t.max(bytes / (bandwidth_gbs(model, bytes, pick) * 1e9)),
        Work::Gemm { .. } | Work::Attention { .. } => t,
    }
}

/// Seconds of one kernel call's work before its calibrated factor:
/// [`kernel_work_parts`]' sum.
pub fn kernel_work_seconds(model: &DeviceModel, k: &Kernel, pick: fn(&Measured) -> f64) -> f64 {
    let (scaled, evals) = kernel_work_parts(model, k, pick);
    scaled + evals
}

/// One kernel call's work in two parts: what its kernel factor scales, and
/// its transcendental evaluations, which it does not.
///
/// The first: a GEMM computes whole tiles of the device's micro-kernel
/// ([`DeviceModel::tile`]: a product with 2 columns costs as many as one
/// with a full tile's), at the throughput of its shape ([`gemm_gflops`]); a
/// memory-bound kernel moves its bytes at the in-cache bandwidth (what its
/// factor is relative to; see [`kernel_time`]).
///
/// The second: each evaluation at the calibrated seconds of its function for
/// an array of the kernel's evaluations
/// ([`DeviceModel::transcendental_seconds`]: a large array runs on every
/// thread, a small one on one). Those are measured per function and size, so
/// a factor fitted on the calibration loops' small kernels (a relu's
/// broadcast add and a tanh's share the name `bias_act`) must not scale them:
/// it had charged a GELU over 500k elements 4.7× what it took. A model from a
/// cache without per-function figures (its one pooled figure, fitted with
/// the factors over it) keeps them in the scaled part, as it was fitted.
/// The unscaled part also holds a row-wise kernel's per-row setup
/// ([`row_seconds`]) and, when the device has calibrated it, the whole of a
/// fused attention call (its counted multiply-adds at the kernel's own
/// measured rate, [`DeviceModel::attention_gflops`]).
pub fn kernel_work_parts(
    model: &DeviceModel,
    k: &Kernel,
    pick: fn(&Measured) -> f64,
) -> (f64, f64) {
    let rows = row_seconds(model, k, pick);
    let work = match k.work {
        Work::Gemm {
            batch,
            m,
            k: inner,
            n,
            layout,
        } => {
            let (m, n) = (padded(m, model.tile[0]), padded(n, model.tile[1]));
            let g = gemm_gflops(model, batch, m, inner, n, layout, pick);
            2.0 * batch * m * inner * n / (g * 1e9)
        }
        Work::Attention {
            heads,
            t,
            s,
            d,
            fmas,
            backward,
        } => {
            if let Some(g) = model.attention_gflops(backward, d, pick) {
                // Calibrated on the kernel itself: its exponentials are in
                // the rate, and no factor fitted on other kernels scales it.
                return (0.0, 2.0 * fmas / (g * 1e9) + rows);
            }
            // Older caches: the counted work at the throughput of per-head
            // products (two of them forward, seven backward).
            let batch = heads * if backward { 7.0 } else { 2.0 };
            let (m, n) = (padded(t, model.tile[0]), padded(s, model.tile[1]));
            2.0 * fmas / (gemm_gflops(model, batch, m, d, n, GemmLayout::Plain, pick) * 1e9)
        }
        Work::Memory { bytes } => bytes / (pick(&model.cache_bandwidth_gbs) * 1e9),
    };
    if k.evals <= 0.0 {
        return (work, rows);
    }
    let evals = k.evals * model.transcendental_seconds(k.func.name(), k.evals, pick);
    if model.transcendentals.is_empty() {
        (work + evals, rows)
    } else {
        (work, evals + rows)
    }
}

/// Seconds of a row-wise kernel's per-row setup: its rows at the calibrated
/// [`DeviceModel::row_s`] (measured on one thread), spread over the CPU
/// pool's threads when the kernel is large enough to be split
/// ([`mlpl_devices::cpu::PAR_THRESHOLD`] elements). Not scaled by a kernel
/// factor: the factors are fitted to what it leaves of the measured time.
pub fn row_seconds(model: &DeviceModel, k: &Kernel, pick: fn(&Measured) -> f64) -> f64 {
    if k.rows <= 0.0 {
        return 0.0;
    }
    let elems = match k.work {
        // Reads and writes: about twice the array the rows are cut from.
        Work::Memory { bytes } => bytes / 8.0,
        _ => k.out_elems,
    };
    let threads = if elems >= mlpl_devices::cpu::PAR_THRESHOLD as f64 {
        pool_threads()
    } else {
        1.0
    };
    k.rows * pick(&model.row_s).max(0.0) / threads
}

/// Bytes the CPU's buffer pool holds before it first releases the buffers no
/// tensor holds ([`mlpl_devices::cpu::POOL_SWEEP_MIN_BYTES`]; after a release,
/// twice what it still holds). A step whose shapes change each step (a
/// mixture of experts' routed layout) reuses few of them, so its run holds
/// about that much: `moe_block`'s live step peak is 26 MB where its process
/// holds 100 MB beyond the baseline.
pub const POOL_SWEEP_BYTES: f64 = mlpl_devices::cpu::POOL_SWEEP_MIN_BYTES as f64;

/// Threads of the CPU backend's pool, as rayon sizes its global pool:
/// `RAYON_NUM_THREADS` when set to a positive number, else the CPUs this
/// process may use (1 where that is unknown).
fn pool_threads() -> f64 {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1) as f64
}

/// The estimate of one step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepEstimate {
    /// The step's kernels.
    pub kernels: Vec<Kernel>,
    /// Their sums.
    pub totals: Totals,
    /// Seconds per step (the low end with every measurement at its fast
    /// percentile, the high end at its slow one), corrected by past runs.
    pub seconds: Range,
    /// Seconds per step in kernels' work (GEMMs and memory traffic).
    pub work_seconds: f64,
    /// Seconds per step in kernel dispatch (and interpretation when not captured).
    pub overhead_seconds: f64,
    /// Memory at the peak, by part.
    pub memory: Memory,
}

/// Bytes a training run holds at its peak.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Memory {
    /// Weights: params · 4.
    pub weights: f64,
    /// Gradients of the trainable parameters.
    pub grads: f64,
    /// Optimizer state: slots · trainable · 4.
    pub optimizer: f64,
    /// Every tensor the tape keeps until backward (one forward's outputs).
    pub tape: f64,
    /// The step's buffers: its kernels' activation outputs scaled by the
    /// calibrated arena factor, and its parameter-sized tensors by the
    /// parameter factor (recorded steps, the capture arena, allocator slack);
    /// for a step whose shapes change each step, what the buffer pool holds
    /// beyond the tape ([`POOL_SWEEP_BYTES`]).
    pub arena: f64,
    /// The process: runtime, program and data.
    pub baseline: f64,
    /// The sum, corrected by past runs.
    pub total: f64,
}

/// Estimates one step of training `layer` (parameters in `frozen` not
/// updated) with the step shape `step`, captured or interpreted, on `model`.
pub fn estimate_step(
    layer: &Layer,
    frozen: &HashSet<String>,
    step: &StepShape,
    captured: bool,
    model: &DeviceModel,
) -> StepEstimate {
    let mut params = 0.0;
    let mut trainable = Vec::new();
    for spec in layer.param_specs() {
        let n: f64 = spec.shape.iter().map(|&d| d as f64).product();
        params += n;
        if !frozen.contains(&spec.name) {
            trainable.push(n);
        }
    }
    let kernels = step_kernels(layer, step, &trainable);
    let t = totals(&kernels);
    let time = |pick: fn(&Measured) -> f64| {
        let mut work = 0.0;
        for k in &kernels {
            work += kernel_seconds(model, k, pick) - pick(&model.dispatch_s);
        }
        let mut overhead = t.kernels * pick(&model.dispatch_s);
        if !captured {
            overhead += t.kernels * pick(&model.interp_s) + 4.0 * t.out_elems * model.interp_byte_s;
        }
        (work, overhead)
    };
    let (work, overhead) = time(|m| m.median);
    // Fast percentiles: high throughput (hi) and low costs (lo).
    let (wl, ol) = time(|m| m.lo);
    let (wh, oh) = time(|m| m.hi);
    let c = model.correction.time;
    let seconds = Range {
        lo: c * (wh.min(wl) + ol.min(oh)),
        mid: c * (work + overhead),
        hi: c * (wl.max(wh) + oh.max(ol)),
    };
    let tr: f64 = trainable.iter().sum();
    let fwd_out = forward_outputs(&kernels, step);
    let mut m = Memory {
        weights: 4.0 * params,
        grads: 4.0 * tr,
        optimizer: 4.0 * step.slots * tr,
        tape: 4.0 * fwd_out,
        // The first steps run interpreted in either mode (captured loops record
        // two), so the step's buffers count in both.
        arena: 4.0 * model.arena_factor * activation_outputs(t.out_elems, tr, step.slots)
            + 4.0 * model.param_factor * tr,
        baseline: model.baseline_bytes,
        total: 0.0,
    };
    if routes_on_host(layer) {
        // The step's shapes change every step, so its buffers are not the
        // last step's: the buffer pool keeps freed ones until it holds
        // `POOL_SWEEP_BYTES`, or twice what it held after its last release.
        let live = m.tape + m.arena;
        m.arena = POOL_SWEEP_BYTES.max(2.0 * live) - m.tape;
    }
    m.total = model.correction.memory
        * (m.weights + m.grads + m.optimizer + m.tape + m.arena + m.baseline);
    StepEstimate {
        totals: t,
        kernels,
        seconds,
        work_seconds: c * work,
        overhead_seconds: c * overhead,
        memory: m,
    }
}

/// Output elements of a step's kernels other than those of parameter size
/// (the optimizer's `slots + 1` updated tensors and the weight gradient of
/// every trainable parameter), which [`DeviceModel::param_factor`] counts.
pub fn activation_outputs(out_elems: f64, trainable: f64, slots: f64) -> f64 {
    (out_elems - (slots + 2.0) * trainable).max(0.0)
}

/// Output elements of the first forward pass and its loss (the kernels before
/// the first backward one).
fn forward_outputs(ks: &[Kernel], _step: &StepShape) -> f64 {
    ks.iter()
        .take_while(|k| k.name != "upload")
        .map(|k| k.out_elems)
        .sum()
}
