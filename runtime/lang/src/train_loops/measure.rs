//! The calibration suite `mlpl calibrate` runs on each device (a few seconds):
//! GEMMs at several shapes, the bandwidth of an element-wise kernel, each
//! transcendental function's cost per element at a few sizes, the cost of
//! one kernel call in a replayed step and in an interpreted one (from small
//! `train` loops whose kernels [`crate::step_cost::kernels`] lists, run as `mlpl run`
//! runs them), the baseline and the step buffers' memory, and a reference
//! loop's step time against the model's. Every figure is the median of
//! repetitions, with its 10th and 90th percentiles; the direct kernel timings
//! are interleaved (one of every shape per round). What is stored apart from
//! the timings (shapes, sizes, repetition counts) is fixed.

use std::collections::BTreeMap;
use std::sync::Arc;

use mlpl_devices::clock::Instant;
use mlpl_devices::{math, Tensor};
use mlpl_devices::{Backend, BinaryOp, UnaryOp};

use super::loops::train_loops;
use crate::estimate::calibration::{
    AttentionPoint, DeviceModel, GemmPoint, Measured, TranscendentalPoint, PLAIN_PRODUCTS,
};
use crate::step_cost::kernels::{attention_backward_one_pass, attention_fmas, Transcendental};
use crate::value::Array;

/// The square GEMM sizes measured.
pub const GEMM_SIZES: &[usize] = &[8, 16, 32, 64, 128, 256, 512, 1024];

/// The step-like GEMM shapes measured besides the squares: `(batch, m, k, n,
/// ta, tb)`, `batch` products `[m, k]·[k, n]`, the left operand stored
/// transposed when `ta` (a weight gradient `xᵀ·g`), the right one when `tb`
/// (an input gradient `g·Wᵀ`, attention's scores `q·kᵀ`). A wide layer on few
/// rows (its forward, weight gradient and input gradient), a token-major
/// layer `[tokens, d]·[d, 4d]` (the same three), a classifier head's two
/// gradients (10 classes: single-threaded products reading a transposed
/// operand in place ran at 1–5 GFLOP/s where squares of the same work ran at
/// 100), a layer on one row and on 32 rows (its forward, its weight
/// gradient, an outer product on one row, and its input gradient, which reads
/// a transposed weight at a third of the forward's speed on one row), and
/// attention's batches of small per-head products. Their throughput is far
/// from a square product's of the same work (docs/estimates.md), which the
/// model cannot derive.
pub const GEMM_SHAPES: &[(usize, usize, usize, usize, bool, bool)] = &[
    (1, 64, 2048, 2048, false, false),
    (1, 2048, 64, 2048, true, false),
    (1, 64, 2048, 1024, false, true),
    (1, 512, 256, 1024, false, false),
    (1, 256, 512, 1024, true, false),
    (1, 512, 1024, 256, false, true),
    (1, 256, 512, 10, true, false),
    (1, 512, 10, 256, false, true),
    (1, 1, 1024, 1024, false, false),
    (1, 1024, 1, 1024, true, false),
    (1, 1, 1024, 1024, false, true),
    (1, 1, 256, 256, false, true),
    (1, 256, 1, 256, true, false),
    (1, 32, 256, 256, false, true),
    (1, 256, 32, 256, true, false),
    (64, 32, 16, 32, false, true),
    (64, 32, 32, 16, false, false),
    (16, 128, 64, 128, false, true),
    (16, 128, 128, 64, false, false),
];
/// Repetitions of every timing.
pub const REPS: usize = 7;

/// Repetitions of every GEMM timing: more than [`REPS`], as a GEMM timing is
/// short (one call of a few milliseconds at the largest sizes), and two quiet
/// runs of the suite on one VM had given a 1024³ median of 269 and 155
/// GFLOP/s from 7 back-to-back timings.
pub const GEMM_REPS: usize = 15;

/// A kernel call to time, returning its result (downloaded to synchronize).
type Call<'a> = Box<dyn Fn() -> mlpl_devices::Result<Tensor> + 'a>;

/// Seconds per call of each of `jobs` (`inner` calls of `f` per timing),
/// `reps` timings each. The timings are taken in rounds, one of every job per
/// round, each after an untimed call of the same job (so its operands are as
/// warm as in back-to-back timings): a slow stretch of a shared machine then
/// costs every job one timing, not one job all of its, and the medians stay
/// put from one run of the suite to the next.
fn time_interleaved(
    b: &Arc<dyn Backend>,
    jobs: &[(usize, Call<'_>)],
    reps: usize,
) -> Result<Vec<Vec<f64>>, String> {
    let sync = |t: Tensor| b.download(&t).map(|_| ()).map_err(|e| e.to_string());
    let mut out = vec![Vec::with_capacity(reps); jobs.len()];
    for _ in 0..reps {
        for ((inner, f), samples) in jobs.iter().zip(out.iter_mut()) {
            sync(f().map_err(|e| e.to_string())?)?;
            let start = Instant::now();
            let mut last = None;
            for _ in 0..(*inner).max(1) {
                last = Some(f().map_err(|e| e.to_string())?);
            }
            if let Some(t) = last {
                sync(t)?;
            }
            samples.push(start.elapsed().as_secs_f64().max(1e-9) / (*inner).max(1) as f64);
        }
    }
    Ok(out)
}

/// Seconds per call of `f`, [`REPS`] timings of `inner` calls.
fn time_reps(
    b: &Arc<dyn Backend>,
    inner: usize,
    f: &dyn Fn() -> mlpl_devices::Result<Tensor>,
) -> Result<Vec<f64>, String> {
    let job: Call<'_> = Box::new(f);
    let mut out = time_interleaved(b, &[(inner, job)], REPS)?;
    Ok(out.pop().unwrap_or_default())
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

/// GEMM throughput at every size of [`GEMM_SIZES`] and every shape of
/// [`GEMM_SHAPES`], [`GEMM_REPS`] timings each, interleaved.
pub fn gemm_points(b: &Arc<dyn Backend>) -> Result<Vec<GemmPoint>, String> {
    let call = call_seconds(b)?;
    let squares = GEMM_SIZES.iter().map(|&s| (1, s, s, s, false, false));
    let shapes: Vec<_> = squares.chain(GEMM_SHAPES.iter().copied()).collect();
    let mut jobs: Vec<(usize, Call<'_>)> = Vec::new();
    for &(batch, m, k, n, ta, tb) in &shapes {
        let stored = |rows: usize, cols: usize, t: bool| {
            let mut shape = if batch > 1 { vec![batch] } else { vec![] };
            shape.extend(if t { [cols, rows] } else { [rows, cols] });
            shape
        };
        let x = filled(b, &stored(m, k, ta))?;
        let y = filled(b, &stored(k, n, tb))?;
        let flops = 2.0 * (batch * m * k * n) as f64;
        // About 2 ms of work per timing at 20 GFLOP/s.
        let inner = ((4e7 / flops) as usize).clamp(1, 2000);
        let b = b.clone();
        let f: Call<'_> = if ta || tb {
            Box::new(move || b.matmul_t(&x, &y, ta, tb))
        } else {
            Box::new(move || b.matmul(&x, &y))
        };
        jobs.push((inner, f));
    }
    let timings = time_interleaved(b, &jobs, GEMM_REPS)?;
    Ok(shapes
        .iter()
        .zip(timings)
        .map(|(&(batch, m, k, n, ta, tb), secs)| {
            let flops = 2.0 * (batch * m * k * n) as f64;
            let g: Vec<f64> = secs
                .iter()
                .map(|t| flops / (t - call).max(0.1 * t) / 1e9)
                .collect();
            GemmPoint {
                m: m as u64,
                k: k as u64,
                n: n as u64,
                batch: batch as u64,
                ta,
                tb,
                gflops: Measured::of(&g),
            }
        })
        .collect())
}

/// GB/s of `a + b` over 2¹⁶ elements (in cache) and over 2²³ (from memory),
/// three arrays moved.
pub fn bandwidths(b: &Arc<dyn Backend>) -> Result<(Measured, Measured), String> {
    let sizes = [(1usize << 16, 64), (1 << 23, 1)];
    let mut jobs: Vec<(usize, Call<'_>)> = Vec::new();
    for (n, inner) in sizes {
        let (x, y) = (filled(b, &[n])?, filled(b, &[n])?);
        let b = b.clone();
        jobs.push((inner, Box::new(move || b.binary(BinaryOp::Add, &x, &y))));
    }
    let timings = time_interleaved(b, &jobs, REPS)?;
    let gbs = |(n, _): (usize, usize), secs: &[f64]| {
        let g: Vec<f64> = secs.iter().map(|t| 12.0 * n as f64 / t / 1e9).collect();
        Measured::of(&g)
    };
    Ok((gbs(sizes[0], &timings[0]), gbs(sizes[1], &timings[1])))
}

/// The array sizes each transcendental function is timed at: half the CPU's
/// parallel threshold (one thread), the threshold (the smallest array its
/// pool splits: two chunks) and 2²⁰ elements (every thread of a larger
/// pool). A kernel's evaluations interpolate between them in log size.
pub const TRANSCENDENTAL_SIZES: [usize; 3] = [
    mlpl_devices::cpu::PAR_THRESHOLD / 2,
    mlpl_devices::cpu::PAR_THRESHOLD,
    1 << 20,
];

/// Seconds per element of each transcendental function
/// ([`Transcendental::ALL`]) at each of [`TRANSCENDENTAL_SIZES`], beyond
/// moving its bytes at the in-cache bandwidth `cache_gbs` (the model adds
/// those): the forward functions as `unary`, the backward ones as
/// `unary_backward`, on values in [−3, 3], timed interleaved. Also the
/// pooled figure of old caches ([`DeviceModel::transcendental_s`]): `tanh`
/// and `exp` at the smallest size.
pub fn transcendental_points(
    b: &Arc<dyn Backend>,
    cache_gbs: f64,
) -> Result<(Vec<TranscendentalPoint>, Measured), String> {
    let mut jobs: Vec<(usize, Call<'_>)> = Vec::new();
    let mut what = Vec::new();
    for &n in &TRANSCENDENTAL_SIZES {
        let data: Vec<f32> = (0..n).map(|i| ((i % 601) as f32 - 300.0) * 0.01).collect();
        let x = b
            .upload(&Array::from_vec(vec![n], data).tensor())
            .map_err(|e| e.to_string())?;
        let dy = filled(b, &[n])?;
        // About 2 ms of work per timing at 8 ns per element on one thread.
        let inner = ((1usize << 18) / n).max(1);
        for func in Transcendental::ALL {
            let (op, backward) = match func {
                Transcendental::Exp => (UnaryOp::Exp, false),
                Transcendental::Tanh => (UnaryOp::Tanh, false),
                Transcendental::Gelu => (UnaryOp::Gelu, false),
                Transcendental::GeluBackward => (UnaryOp::Gelu, true),
                Transcendental::Silu => (UnaryOp::Silu, false),
                Transcendental::SiluBackward => (UnaryOp::Silu, true),
            };
            let (b, x, dy) = (b.clone(), x.clone(), dy.clone());
            let f: Call<'_> = if backward {
                let y = b.unary(op, &x).map_err(|e| e.to_string())?;
                Box::new(move || b.unary_backward(op, &x, &y, &dy))
            } else {
                Box::new(move || b.unary(op, &x))
            };
            // Bytes moved: x read and the result written; the backward also
            // reads y and dy.
            let bytes = if backward { 16.0 } else { 8.0 } * n as f64;
            jobs.push((inner, f));
            what.push((func, n, bytes));
        }
    }
    let timings = time_interleaved(b, &jobs, REPS)?;
    let mut points = Vec::new();
    let mut pooled = Vec::new();
    for ((func, n, bytes), secs) in what.into_iter().zip(timings) {
        let moved = bytes / (cache_gbs.max(1e-3) * 1e9);
        let per: Vec<f64> = secs
            .iter()
            .map(|t| (t - moved).max(0.1 * t) / n as f64)
            .collect();
        if n == TRANSCENDENTAL_SIZES[0]
            && matches!(func, Transcendental::Exp | Transcendental::Tanh)
        {
            pooled.extend(per.iter().copied());
        }
        points.push(TranscendentalPoint {
            func: func.name().to_string(),
            elems: n as u64,
            seconds: Measured::of(&per),
        });
    }
    Ok((points, Measured::of(&pooled)))
}

/// The fused attention shapes timed, each causal, forward and backward:
/// `(batch, heads, positions, head width)`. Four head widths (a kernel's
/// rate is interpolated between them in log width): on a 2-core AVX-512 Xeon
/// the backward ran at 52–57 GFLOP/s of its counted work at width 16 and at
/// 21–25 from 32 to 128, whatever the positions (256 to 1024), so the rate is
/// a function of the width. 256 positions, the fewest for which the
/// attention layer calls the fused kernel.
pub const ATTENTION_SHAPES: [(usize, usize, usize, usize); 4] = [
    (2, 4, 256, 16),
    (2, 8, 256, 32),
    (2, 4, 256, 64),
    (2, 2, 256, 128),
];

/// The fused attention kernel's GFLOP/s of the model's counted work
/// ([`attention_fmas`]) at each of [`ATTENTION_SHAPES`], forward and
/// backward, [`REPS`] timings each, interleaved, less the cost of a
/// work-free call `call`.
pub fn attention_points(b: &Arc<dyn Backend>, call: f64) -> Result<Vec<AttentionPoint>, String> {
    let mut jobs: Vec<(usize, Call<'_>)> = Vec::new();
    let mut what = Vec::new();
    for &(batch, heads, t, d) in &ATTENTION_SHAPES {
        let spec = mlpl_devices::AttentionSpec {
            divisor: (d as f32).sqrt(),
            causal: true,
            window: None,
        };
        let shape = [batch, heads, t, d];
        // Small values, so that the softmax is not one-hot.
        let small = |seed: usize| -> Result<Tensor, String> {
            let n: usize = shape.iter().product();
            let data = (0..n)
                .map(|i| (((i * 7 + seed) % 97) as f32 - 48.0) * 0.002)
                .collect();
            b.upload(&Array::from_vec(shape.to_vec(), data).tensor())
                .map_err(|e| e.to_string())
        };
        let (q, k, v, dout) = (small(0)?, small(31)?, small(57)?, small(11)?);
        let sinks = b
            .upload(&Array::from_vec(vec![0], Vec::new()).tensor())
            .map_err(|e| e.to_string())?;
        let (out, lse) = b
            .attention(&q, &k, &v, &sinks, spec)
            .map_err(|e| e.to_string())?;
        let fwd: Call<'_> = {
            let (b, q, k, v, sinks) = (b.clone(), q.clone(), k.clone(), v.clone(), sinks.clone());
            Box::new(move || b.attention(&q, &k, &v, &sinks, spec).map(|r| r.0))
        };
        let bwd: Call<'_> = {
            let b = b.clone();
            Box::new(move || {
                b.attention_backward(&q, &k, &v, &out, &lse, &dout, spec)
                    .map(|r| r.0)
            })
        };
        for (backward, f) in [(false, fwd), (true, bwd)] {
            jobs.push((1, f));
            let one_pass = attention_backward_one_pass(batch, heads, heads, t, d);
            let fmas = (batch * heads) as f64
                * attention_fmas(t, t, d, true, None, backward.then_some(one_pass));
            what.push((backward, batch * heads, t, d, fmas));
        }
    }
    let timings = time_interleaved(b, &jobs, REPS)?;
    Ok(what
        .into_iter()
        .zip(timings)
        .map(|((backward, heads, t, d, fmas), secs)| {
            let g: Vec<f64> = secs
                .iter()
                .map(|s| 2.0 * fmas / (s - call).max(0.1 * s) / 1e9)
                .collect();
            AttentionPoint {
                backward,
                heads: heads as u64,
                t: t as u64,
                d: d as u64,
                causal: true,
                gflops: Measured::of(&g),
            }
        })
        .collect())
}

/// Rows of the row-wise kernels timed for [`row_seconds`]: short rows
/// ([`ROW_WIDTH`] elements) on one thread, so that the rows' setup is most
/// of the time.
pub const ROW_COUNT: usize = 2048;
/// Elements per row of those kernels.
pub const ROW_WIDTH: usize = 4;

/// Seconds per row of a row-wise kernel beyond its bytes (at the in-cache
/// bandwidth `cache_gbs`), its exponentials and logarithms (at `exp_s` each)
/// and a work-free call `call`: `cross_entropy` with its gradient and
/// `softmax`, each over [`ROW_COUNT`] rows of [`ROW_WIDTH`], [`REPS`] timings
/// each, interleaved; each timing is the mean of the two kernels'.
pub fn row_seconds(
    b: &Arc<dyn Backend>,
    cache_gbs: f64,
    exp_s: f64,
    call: f64,
) -> Result<Measured, String> {
    let (r, w) = (ROW_COUNT, ROW_WIDTH);
    let x = filled(b, &[r, w])?;
    let targets = b
        .upload(&Array::from_vec(vec![r], (0..r).map(|i| (i % w) as f32).collect()).tensor())
        .map_err(|e| e.to_string())?;
    let n = (r * w) as f64;
    // Bytes and evaluations the model already charges (kernels.rs): the
    // cross-entropy reads the logits and targets and writes the gradient, an
    // exponential per logit and a logarithm per row; the softmax reads and
    // writes the array, an exponential per element.
    let modelled = [
        (4.0 * (2.0 * n + r as f64 + 1.0), n + r as f64),
        (8.0 * n, n),
    ];
    let jobs: Vec<(usize, Call<'_>)> = vec![
        (64, {
            let (b, x, targets) = (b.clone(), x.clone(), targets.clone());
            Box::new(move || b.cross_entropy(&x, &targets, true).map(|r| r.0))
        }),
        (64, {
            let (b, x) = (b.clone(), x.clone());
            Box::new(move || b.softmax(&x, 1))
        }),
    ];
    let timings = time_interleaved(b, &jobs, REPS)?;
    let per: Vec<Vec<f64>> = timings
        .iter()
        .zip(modelled)
        .map(|(secs, (bytes, evals))| {
            let known = call + bytes / (cache_gbs.max(1e-3) * 1e9) + evals * exp_s;
            secs.iter()
                .map(|t| (t - known).max(0.0) / r as f64)
                .collect()
        })
        .collect();
    let mean: Vec<f64> = per[0]
        .iter()
        .zip(&per[1])
        .map(|(a, b)| 0.5 * (a + b))
        .collect();
    Ok(Measured::of(&mean))
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
/// milliseconds, whose measured step time scales the model's (`step_factor`,
/// `interp_byte_s`).
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

/// The parameter-heavy memory loop: a wide MLP on 8 rows, whose peak memory
/// is mostly parameters, gradients, optimizer state and their copies. Its
/// weight matrix (4096², 67 MB) is of the size where a 2 GB verdict is
/// decided. The parameter-sized buffers held at the peak fall with their size
/// (likely the allocator keeping freed buffers of a few MB resident and
/// returning those of tens of MB): fitted on a 1536-wide loop the factor said
/// 10.4, on a 3072-wide one 9.0, where 4096- to 6144-wide MLPs hold 6.6 to 7.3
/// (docs/benchmarks.md, "Third round" and "Fifth round"), and the 9.0 made two
/// 2 GB verdicts too cautious.
pub const PARAM_LOOP: &str = "X = randn(1, [8, 32])
y = argmax(randn(2, [8, 10]), 1)
model = chain(linear(32, 4096, 1), relu_layer(), linear(4096, 4096, 2), relu_layer(), linear(4096, 10, 3))
train 6 {
  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)
}
";

/// The activation-heavy memory loop: a one-block transformer LM whose
/// activations dwarf its parameters, larger than [`REFERENCE_LOOP`] for the
/// same reason (fitted on that loop, the activation factor was 0.83 where
/// this one gives 0.50, and the 16 × 128-token stress LM was over-estimated
/// 1.46×).
pub const ACTIVATION_LOOP: &str = "X = argmax(randn(1, [16, 128, 256]), 2)
Y = argmax(randn(2, [16, 128, 256]), 2)
model = chain(
  embed(256, 192, 0),
  residual(chain(rms_norm(192, 1), causal_attention(192, 2, 1))),
  residual(chain(rms_norm(192, 1), linear(192, 768, 2), relu_layer(), linear(768, 192, 3))),
  rms_norm(192, 1),
  linear(192, 256, 4),
)
train 4 {
  adam(cross_entropy(apply(model, X), Y), model, 0.001, 0.9, 0.999, 1e-8)
}
";

/// The loop whose timeline gives the kernel factors of small element-wise
/// kernels and skinny products (with [`REFERENCE_LOOP`]'s): an MLP of tanh and
/// gelu layers on 256 rows.
pub const KERNEL_LOOP: &str = "X = randn(1, [256, 16])
y = argmax(randn(2, [256, 4]), 1)
model = chain(linear(16, 64, 1), tanh_layer(), linear(64, 64, 2), gelu_layer(), linear(64, 4, 3))
train 120 {
  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)
}
";

/// What a timeline says about a loop's replayed steps.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTimes {
    /// Per kernel name: the median over the steps after the first three of
    /// its per-step seconds, and its calls per step.
    pub kernels: BTreeMap<String, (f64, f64)>,
    /// The median step's seconds.
    pub step: f64,
}

impl KernelTimes {
    /// The median step ÷ the sum of the kernels' medians, at least 1: 1 when
    /// every step takes the same time and runs only kernels; more with time
    /// between kernels, or when slow calls skew the steps (a loaded machine),
    /// which the medians of single kernels miss.
    pub fn skew(&self) -> f64 {
        let sum: f64 = self.kernels.values().map(|v| v.0).sum();
        if sum > 0.0 && self.step.is_finite() {
            (self.step / sum).max(1.0)
        } else {
            1.0
        }
    }
}

/// [`kernel_times`]' error when no replayed step has kernel rows: a device
/// whose captured step runs as one compiled graph (MLX) times no kernels.
pub const NO_REPLAYED_KERNELS: &str = "the timeline has no replayed steps";

/// The [`KernelTimes`] of a timeline (`mlpl run --timeline`, docs/traces.md).
pub fn kernel_times(trace: &str) -> Result<KernelTimes, String> {
    let doc: serde_json::Value = serde_json::from_str(trace).map_err(|e| e.to_string())?;
    let events = doc
        .get("traceEvents")
        .and_then(|e| e.as_array())
        .ok_or("the timeline has no traceEvents")?;
    let field = |e: &serde_json::Value, k: &str| e.get(k).and_then(|v| v.as_f64());
    let mut steps: Vec<(f64, f64)> = Vec::new();
    let mut kernels: Vec<(f64, f64, String)> = Vec::new();
    for e in events {
        let (Some(ts), Some(dur)) = (field(e, "ts"), field(e, "dur")) else {
            continue;
        };
        match e.get("cat").and_then(|c| c.as_str()) {
            Some("train_step") => steps.push((ts, ts + dur)),
            Some("kernel")
                if e.pointer("/args/replayed") == Some(&serde_json::Value::Bool(true)) =>
            {
                let name = e.get("name").and_then(|n| n.as_str()).unwrap_or("");
                kernels.push((ts, dur * 1e-6, name.to_string()));
            }
            _ => {}
        }
    }
    kernels.sort_by(|a, b| a.0.total_cmp(&b.0));
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut per: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut used = Vec::new();
    for w in steps.windows(2).skip(2) {
        // A step's kernels are those after the previous step's end: its first
        // kernel can start just before its own step event does.
        let ((_, start), (s0, end)) = (w[0], w[1]);
        let from = kernels.partition_point(|k| k.0 <= start);
        let to = kernels.partition_point(|k| k.0 <= end);
        if from == to {
            continue;
        }
        used.push((end - s0) * 1e-6);
        let mut step: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for k in &kernels[from..to] {
            let e = step.entry(k.2.as_str()).or_default();
            e.0 += k.1;
            e.1 += 1.0;
        }
        for (name, v) in step {
            per.entry(name.to_string()).or_default().push(v);
        }
    }
    if used.is_empty() {
        return Err(NO_REPLAYED_KERNELS.into());
    }
    let kernels = per
        .into_iter()
        .map(|(name, v)| {
            let secs: Vec<f64> = v.iter().map(|x| x.0).collect();
            let calls = v.iter().map(|x| x.1).fold(0.0, f64::max);
            (name, (Measured::of(&secs).median, calls))
        })
        .collect();
    Ok(KernelTimes {
        kernels,
        step: Measured::of(&used).median,
    })
}

/// One kernel name's work in a calibration loop's step: measured, and
/// modelled in the two parts of [`crate::step_cost::cost::kernel_work_parts`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelWork {
    /// Measured seconds per step, dispatch taken off.
    pub measured: f64,
    /// Modelled seconds per step that a kernel factor scales.
    pub scaled: f64,
    /// Modelled seconds per step of transcendental evaluations (not scaled).
    pub evals: f64,
}

impl KernelWork {
    /// The factor that makes the model match the measurement: the measured
    /// time less the evaluations' (at least a tenth of the measured time), ÷
    /// the scaled part.
    pub fn ratio(&self) -> f64 {
        (self.measured - self.evals).max(0.1 * self.measured) / self.scaled
    }
}

/// Measured and modelled work of each kernel of `src`'s first loop: its
/// timeline's [`kernel_times`] (each call's dispatch taken off, scaled by the
/// steps' [`KernelTimes::skew`]) and `model`'s without kernel factors.
pub fn kernel_ratios(
    src: &str,
    trace: &str,
    model: &DeviceModel,
) -> Result<BTreeMap<String, KernelWork>, String> {
    let times = kernel_times(trace)?;
    let skew = times.skew();
    let measured = times.kernels;
    let est = loop_estimate(src, model, true)?;
    let mut modelled: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for k in &est.kernels {
        let (scaled, evals) = crate::step_cost::cost::kernel_work_parts(model, k, |m| m.median);
        let e = modelled.entry(k.name).or_default();
        e.0 += scaled;
        e.1 += evals;
    }
    Ok(measured
        .into_iter()
        .filter_map(|(name, (secs, calls))| {
            let &(scaled, evals) = modelled.get(name.as_str())?;
            let work = skew * (secs - calls * model.dispatch_s.median).max(0.1 * secs);
            (scaled > 0.0).then_some((
                name,
                KernelWork {
                    measured: work,
                    scaled,
                    evals,
                },
            ))
        })
        .collect())
}

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

/// The GEMM tile of device kind `kind`: the CPU micro-kernel's, `[1, 1]`
/// (no padding modelled) elsewhere.
pub fn gemm_tile(kind: &str) -> [u64; 2] {
    if kind == "cpu" {
        let (mr, nr) = mlpl_devices::cpu::gemm_tile();
        [mr as u64, nr as u64]
    } else {
        [1, 1]
    }
}

/// Seconds per kernel of each step time in `steps` beyond `work` seconds of
/// modelled work, for a step of `kernels` kernels; at least a quarter of the
/// step's time per kernel, so a model that over-rates the work cannot make
/// dispatch free.
pub fn dispatch_per_kernel(steps: &[f64], work: f64, kernels: f64) -> Vec<f64> {
    let kernels = kernels.max(1.0);
    steps
        .iter()
        .map(|&t| (t - work).max(0.25 * t) / kernels)
        .collect()
}

/// Runs the suite on a device of kind `kind` (`backend` is its backend).
/// `run_loop(src, captured)` runs a calibration loop as the programs to
/// estimate will run (`mlpl run` in a child process) and reports a [`LoopRun`];
/// `trace_loop(src)` runs one captured with a timeline and returns its text.
pub fn calibrate(
    kind: &str,
    backend: Arc<dyn Backend>,
    run_loop: &dyn Fn(&str, bool) -> Result<LoopRun, String>,
    trace_loop: &dyn Fn(&str) -> Result<String, String>,
) -> Result<DeviceModel, String> {
    let gemm = gemm_points(&backend)?;
    let (cache_bandwidth_gbs, bandwidth_gbs) = bandwidths(&backend)?;
    let (transcendentals, transcendental_s) =
        transcendental_points(&backend, cache_bandwidth_gbs.median)?;
    let call = call_seconds(&backend)?;
    let attention = attention_points(&backend, call)?;
    let mut model = DeviceModel {
        attention,
        row_s: Measured::exact(0.0),
        transcendental_s,
        transcendentals,
        tile: gemm_tile(kind),
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
        kernel_factors: BTreeMap::new(),
        correction: Default::default(),
    };
    // Dispatch and interpretation per kernel, and the baseline, from a loop of
    // little work: what a step takes beyond its modelled work (the direct
    // timings above: a tiny product's GEMM point keeps some of its call's
    // cost), per kernel. Dividing the whole step by its kernels had counted
    // that work twice for every small loop (an 8-wide MLP on one row
    // estimated at 2.3× its step).
    let exp_s = model.transcendental_seconds("exp", ROW_COUNT as f64, |m| m.median);
    model.row_s = row_seconds(&backend, cache_bandwidth_gbs.median, exp_s, call)?;
    let tiny = loop_estimate(DISPATCH_LOOP, &model, true)?;
    let (kernels, work) = (tiny.totals.kernels, tiny.work_seconds);
    let (replayed, base_c) = run_loop(DISPATCH_LOOP, true)?;
    let (interpreted, _) = run_loop(DISPATCH_LOOP, false)?;
    let per_kernel = |s: &[f64]| dispatch_per_kernel(s, work, kernels);
    model.dispatch_s = Measured::of(&per_kernel(&replayed));
    let eager = Measured::of(&per_kernel(&interpreted));
    model.interp_s = Measured {
        median: (eager.median - model.dispatch_s.median).max(0.0),
        lo: (eager.lo - model.dispatch_s.lo).max(0.0),
        hi: (eager.hi - model.dispatch_s.hi).max(0.0),
    };
    let tiny = loop_estimate(DISPATCH_LOOP, &model, true)?;
    model.baseline_bytes = (base_c - (tiny.memory.total - tiny.memory.baseline)).max(0.0);
    // Each kernel's factor from the timelines of two loops (the geometric
    // mean of their ratios where both run it); the reference loop's overall
    // ratio is the factor of kernels neither runs.
    let mut ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for src in [REFERENCE_LOOP, KERNEL_LOOP] {
        let r = match trace_loop(src).and_then(|t| kernel_ratios(src, &t, &model)) {
            Ok(r) => r,
            // A compiled graph has no per-kernel rows: its kernels keep
            // factor 1 and the step factor 1.
            Err(e) if e == NO_REPLAYED_KERNELS => continue,
            Err(e) => return Err(e),
        };
        // Plain products take no factor (their shapes are calibrated).
        let r: BTreeMap<String, KernelWork> = r
            .into_iter()
            .filter(|(name, _)| !PLAIN_PRODUCTS.contains(&name.as_str()))
            .collect();
        if src == REFERENCE_LOOP {
            let all = r.values().fold(KernelWork::default(), |a, v| KernelWork {
                measured: a.measured + v.measured,
                scaled: a.scaled + v.scaled,
                evals: a.evals + v.evals,
            });
            if all.scaled > 0.0 {
                model.step_factor = all.ratio().clamp(0.2, 5.0);
            }
        }
        for (name, w) in r {
            ratios.entry(name).or_default().push(math::log(w.ratio()));
        }
    }
    model.kernel_factors = ratios
        .into_iter()
        .map(|(name, logs)| {
            let mean = logs.iter().sum::<f64>() / logs.len() as f64;
            (name, math::exp(mean).clamp(0.1, 50.0))
        })
        .collect();
    // Memory: the two memory loops give the factors of activation outputs
    // and of parameter-sized tensors (two equations, two unknowns).
    let (_, peak) = run_loop(ACTIVATION_LOOP, true)?;
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
    let (ya, aa, pa) = parts(ACTIVATION_LOOP, peak)?;
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
