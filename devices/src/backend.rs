//! The device abstraction: the [`Backend`] trait with the primitive kernels every
//! device implements, the operation enums it takes, its error type and its
//! counters.

use crate::tensor::Tensor;
use std::fmt;

/// Result of a device operation.
pub type Result<T> = std::result::Result<T, DeviceError>;

/// The kinds of device MLPL can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The host CPU (always available; the embedded default).
    Cpu,
    /// An NVIDIA GPU through CUDA (cargo feature `cuda`).
    Cuda,
    /// An Apple GPU through MLX (cargo feature `mlx`, macOS).
    Mlx,
}

impl DeviceKind {
    /// The device's name as written in MLPL (`device("cpu")`): `"cpu"`, `"cuda"` or `"mlx"`.
    pub fn name(&self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Mlx => "mlx",
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A device failure. Shape errors are not device errors: the runtime checks
/// shapes and reports language diagnostics before it calls a kernel.
#[derive(Debug, Clone)]
pub enum DeviceError {
    /// An allocation failed on `device` while running `op`.
    OutOfMemory {
        /// The device name (e.g. `"cuda:0"`).
        device: String,
        /// The operation that tried to allocate.
        op: String,
        /// How many bytes it asked for.
        requested_bytes: u64,
        /// Free bytes on the device at the time, when the driver reports it.
        free_bytes: Option<u64>,
    },
    /// Any other driver or backend failure.
    Backend {
        /// The device name.
        device: String,
        /// What the driver or backend said.
        message: String,
    },
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::OutOfMemory {
                device,
                op,
                requested_bytes,
                free_bytes,
            } => {
                write!(
                    f,
                    "out of memory on {device} in {op}: requested {requested_bytes} bytes"
                )?;
                if let Some(free) = free_bytes {
                    write!(f, ", {free} bytes free")?;
                }
                Ok(())
            }
            DeviceError::Backend { device, message } => write!(f, "{device}: {message}"),
        }
    }
}

impl std::error::Error for DeviceError {}

/// What a backend has done since its counters were last reset; telemetry
/// reports these in `device` events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// Host-to-device copies.
    pub uploads: u64,
    /// Device-to-host copies.
    pub downloads: u64,
    /// Bytes copied host to device.
    pub bytes_up: u64,
    /// Bytes copied device to host.
    pub bytes_down: u64,
    /// Kernel invocations (one per `Backend` kernel call on the CPU).
    pub kernel_launches: u64,
    /// Operations a device could not run and handed to the CPU (never silent).
    pub cpu_fallbacks: u64,
    /// Bytes of device memory currently held by tensors (0 on the CPU, which does not track it).
    pub memory_bytes: u64,
    /// Highest `memory_bytes` seen (0 on the CPU).
    pub peak_memory_bytes: u64,
}

/// Element-wise functions of one argument (LANGUAGE §10.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// −x.
    Neg,
    /// eˣ.
    Exp,
    /// Natural logarithm (`log(0) = -inf`, negative gives NaN).
    Log,
    /// Square root (negative gives NaN).
    Sqrt,
    /// |x|.
    Abs,
    /// 1 / (1 + e^(−x)).
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// max(x, 0).
    Relu,
    /// The tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    Gelu,
    /// x·sigmoid(x).
    Silu,
}

/// Element-wise functions of two broadcast arguments (LANGUAGE §10.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b.
    Add,
    /// a − b.
    Sub,
    /// a · b.
    Mul,
    /// a / b (IEEE: division by zero gives ±inf or NaN).
    Div,
    /// aᵇ (`powf`).
    Pow,
    /// 1.0 where a > b, else 0.0.
    Gt,
    /// 1.0 where a < b, else 0.0.
    Lt,
    /// 1.0 where |a − b| < 2⁻⁵² computed in f64, else 0.0.
    Eq,
    /// Element-wise maximum; NaN propagates (NumPy `maximum`).
    Max,
    /// Element-wise minimum; NaN propagates (NumPy `minimum`).
    Min,
}

/// Reductions along an axis or over everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (accumulated in f64; 0 when empty).
    Sum,
    /// Product (1 when empty).
    Prod,
    /// Sum / max(n, 1) (accumulated in f64).
    Mean,
    /// Maximum (−inf when empty; NaN propagates).
    Max,
}

/// The value a causal mask puts above the diagonal of attention scores
/// ([`Backend::masked_softmax`]): large enough that its softmax weight is
/// exactly 0 in f32, finite so that `0 · fill` stays 0.
pub const CAUSAL_FILL: f32 = -1e9;

/// The primitive kernels every device implements.
///
/// All inputs are assumed valid: the runtime checks shapes and reports language
/// diagnostics before calling. Errors are only device failures (out of memory,
/// driver errors); a kernel given invalid shapes may panic.
///
/// The trait is object safe; the runtime holds an `Arc<dyn Backend>`.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Which kind of device this is.
    fn kind(&self) -> DeviceKind;
    /// A snapshot of the counters.
    fn counters(&self) -> Counters;
    /// Resets every counter to zero.
    fn reset_counters(&self);
    /// The names of the operations that ran on the CPU because this device has no
    /// kernel for them (each name once) since the last call; the runtime reports
    /// them as W0503 (the `cpu_fallbacks` counter counts every fallback). The CPU
    /// itself never falls back.
    fn take_fallbacks(&self) -> Vec<&'static str> {
        Vec::new()
    }
    /// Copy host data to this device (identity on the CPU, still counted as 0 uploads there).
    fn upload(&self, t: &Tensor) -> Result<Tensor>;
    /// Copy a tensor to host memory (identity on the CPU, counted as 0 downloads there).
    fn download(&self, t: &Tensor) -> Result<Tensor>;
    /// Applies an element-wise function; the result has `x`'s shape.
    fn unary(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor>;
    /// NumPy-broadcasting binary op; the result has shape `broadcast_shapes(a, b)`.
    /// `Gt`/`Lt` give 1.0/0.0. `Eq` gives 1.0 where `|a-b| < 2^-52` computed in f64 (LANGUAGE §10.3).
    /// `Pow` is `powf`. `Max`/`Min` element-wise (NaN propagates).
    fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    /// `a: [..., m, k]`, `b: [..., k, n]`, both rank >= 2; leading batch axes broadcast (NumPy).
    /// Result `[batch..., m, n]`.
    fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    /// [`Backend::matmul`] of `a` and `b` with the last two axes of `a` swapped
    /// first when `transpose_a` is set, and likewise for `b`: the products of
    /// matmul's backward pass (`g·bᵀ`, `aᵀ·g`). The default permutes and then
    /// multiplies; a backend whose GEMM reads strided operands skips the copies.
    fn matmul_t(
        &self,
        a: &Tensor,
        b: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Tensor> {
        let swap = |x: &Tensor| {
            let r = x.rank();
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            self.permute(x, &perm)
        };
        let a = if transpose_a { swap(a)? } else { a.clone() };
        let b = if transpose_b { swap(b)? } else { b.clone() };
        self.matmul(&a, &b)
    }
    /// Reduce along `axis` (removed from the shape) or over everything (-> shape `[]`).
    /// Sum of empty = 0, Prod of empty = 1, Mean = sum / max(n,1), Max of empty = -inf
    /// (NaN propagates). Sum/Mean accumulate in f64.
    fn reduce(&self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Result<Tensor>;
    /// Index (as f32) of the first maximum along `axis`, or the row-major flat index over
    /// everything. NaN is treated as never greater.
    fn argmax(&self, x: &Tensor, axis: Option<usize>) -> Result<Tensor>;
    /// `exp(x - max) / sum exp(x - max)` along `axis`.
    fn softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor>;
    /// `x - max - log sum exp(x - max)` along `axis`.
    fn log_softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor>;
    /// `log Σ exp(x)` along `axis`, which is removed from the shape: the axis
    /// maximum plus the log of Σ exp(x − max), summed in f64 (the shift
    /// `log_softmax` subtracts, so `log_softmax(x) = x − logsumexp(x)`).
    fn logsumexp(&self, x: &Tensor, axis: usize) -> Result<Tensor>;
    /// Given `y = softmax(x)` along `axis` and `dy`, returns `dx = y * (dy - sum(dy*y, axis))`.
    fn softmax_backward(&self, y: &Tensor, dy: &Tensor, axis: usize) -> Result<Tensor>;
    /// `logits [N, V]`, `targets [N]` (integer-valued f32, validated by the caller). Fused:
    /// returns (loss scalar `[]` = `mean_r (logsumexp(l_r) - l_r[t_r])`,
    /// dlogits `[N, V]` = `(softmax - onehot) / N`). `want_grad = false` skips the
    /// gradient (returns `None`). Leading axes of a rank > 2 `logits` are flattened into rows.
    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        want_grad: bool,
    ) -> Result<(Tensor, Option<Tensor>)>;
    /// General axis permutation: result axis `i` is input axis `perm[i]`.
    fn permute(&self, x: &Tensor, perm: &[usize]) -> Result<Tensor>;
    /// Rows of `table [V, d]` selected by integer-valued `ids` (any shape, validated by the
    /// caller) -> `[ids.shape..., d]`.
    fn gather_rows(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor>;
    /// `out [vocab, d]` zeros, `out[ids[i]] += src[i]` (`src` is `[ids.numel(), d]` or
    /// `[ids.shape..., d]`). Rows are summed in index order (deterministic).
    fn scatter_add_rows(&self, ids: &Tensor, src: &Tensor, vocab: usize) -> Result<Tensor>;
    /// Sum a broadcast gradient `g` back down to `shape` (sum over stretched axes and missing leading axes).
    fn sum_to_shape(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor>;
    /// RMS norm over the last axis: `y = x / sqrt(mean(x^2) + eps)`. Returns `(y, inv_rms [rows])`.
    fn rms_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor)>;
    /// Gradient of [`Backend::rms_norm`] with respect to `x`, given the saved `inv_rms` and `dy`.
    fn rms_norm_backward(&self, x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Result<Tensor>;
    /// Layer norm over the last axis without affine: `y = (x-mu)/sqrt(var+eps)` (biased
    /// variance). Returns `(y, mean [rows], inv_std [rows])`.
    fn layer_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor, Tensor)>;
    /// Gradient of [`Backend::layer_norm`] with respect to `x`, given the saved `mean`, `inv_std` and `dy`.
    fn layer_norm_backward(
        &self,
        x: &Tensor,
        mean: &Tensor,
        inv_std: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor>;
    /// Gradient of [`Backend::unary`]: given the input `x`, the output
    /// `y = op(x)` and `dy`, returns `dx` (all of `x`'s shape). The default
    /// composes the derivative from element-wise kernels (the table in the
    /// runtime's autograd element-wise ops); a backend may fuse it into one pass
    /// with the same per-element operations in the same order.
    fn unary_backward(&self, op: UnaryOp, x: &Tensor, y: &Tensor, dy: &Tensor) -> Result<Tensor> {
        composed::unary_backward(self, op, x, y, dy)
    }
    /// `act(x + bias)`: `x` is `[.., n]` and `bias` has `n` elements (shape `[n]`
    /// or `[1, .., n]`), added to every row. The default runs `binary(Add)` then
    /// `unary(act)`; a fused kernel gives the same bits in one pass.
    fn bias_act(&self, x: &Tensor, bias: &Tensor, act: UnaryOp) -> Result<Tensor> {
        let pre = self.binary(BinaryOp::Add, x, bias)?;
        self.unary(act, &pre)
    }
    /// Gradients of [`Backend::bias_act`] given its inputs, its output `y` and
    /// `dy`: `dx` (`x`'s shape) and, when `want_bias`, `dbias` (`bias`'s shape,
    /// `dx` summed over the rows exactly as [`Backend::sum_to_shape`] sums).
    /// The default recomputes `x + bias` and composes
    /// [`Backend::unary_backward`] and `sum_to_shape`.
    fn bias_act_backward(
        &self,
        x: &Tensor,
        bias: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        act: UnaryOp,
        want_bias: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let pre = self.binary(BinaryOp::Add, x, bias)?;
        let dx = self.unary_backward(act, &pre, y, dy)?;
        let dbias = if want_bias {
            Some(self.sum_to_shape(&dx, bias.shape())?)
        } else {
            None
        };
        Ok((dx, dbias))
    }
    /// Attention probabilities from scores `x: [.., T, S]` (rank >= 2): softmax
    /// over the last axis of `x / divisor`, where, when `causal`, entries with
    /// column > row are first replaced by [`CAUSAL_FILL`]. The default composes
    /// `binary(Div)`, the mask (`x·(1 − m) + m·fill`) and `softmax`; a fused
    /// kernel computes the same bits in one pass per row.
    fn masked_softmax(&self, x: &Tensor, divisor: f32, causal: bool) -> Result<Tensor> {
        composed::masked_softmax(self, x, divisor, causal)
    }
    /// Gradient of [`Backend::masked_softmax`] with respect to its scores, given
    /// its output `y` and `dy`: `softmax_backward(y, dy)`, zero at the masked
    /// entries, divided by `divisor` (the default composes exactly that).
    fn masked_softmax_backward(
        &self,
        y: &Tensor,
        dy: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        composed::masked_softmax_backward(self, y, dy, divisor, causal)
    }
    /// The dropout mask of LANGUAGE §13.7 for an input of `shape`, made on this
    /// device: element i is `1/(1-p)` (as f32) when
    /// `(splitmix64(key + i·0x9E3779B97F4A7C15) >> 11)·2⁻⁵³ >= p`, else 0 (`key` is
    /// derived from the layer's seed and the step by the caller). `None` (the
    /// default) means the caller builds the mask in host memory.
    fn dropout_mask(&self, shape: &[usize], key: u64, p: f64) -> Result<Option<Tensor>> {
        let _ = (shape, key, p);
        Ok(None)
    }
    /// This backend's compiled form of a captured step, or `None` (the default)
    /// when it has none and the step is replayed call by call
    /// ([`crate::capture::BackendReplay`]).
    fn compile_step(
        &self,
        plan: &crate::capture::StepPlan,
    ) -> Option<Result<Box<dyn crate::capture::StepProgram>>> {
        let _ = plan;
        None
    }
    /// One fused Adam/AdamW step in place: `m = b1 m + (1-b1) g`; `v = b2 v + (1-b2) g^2`;
    /// `p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)` with the constants of
    /// [`AdamStep::constants`]. Copy-on-write: clones of `p`, `m`, `v` taken before the
    /// call keep their old values.
    fn adam_update(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        step: &AdamStep,
    ) -> Result<()>;
}

/// The hyper-parameters of one Adam/AdamW update of one parameter (LANGUAGE §12.5),
/// as the program gave them. `t` is the parameter's update count, this update
/// included (1 for the first), from which the bias corrections are computed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay.
    pub b1: f64,
    /// Second-moment decay.
    pub b2: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Decoupled weight decay (0 for Adam and for exempt parameters).
    pub wd: f64,
    /// The update count, this update included.
    pub t: u64,
}

/// The f32 constants an Adam kernel uses, computed from an [`AdamStep`] the same
/// way on every device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConstants {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub b1: f32,
    /// Second-moment decay.
    pub b2: f32,
    /// Added to the denominator.
    pub eps: f32,
    /// First-moment bias correction `1 - b1^t` (computed in f64).
    pub bc1: f32,
    /// Second-moment bias correction `1 - b2^t` (computed in f64).
    pub bc2: f32,
    /// Decoupled weight decay.
    pub wd: f32,
}

impl AdamStep {
    /// The kernel constants: every field rounded to f32, the bias corrections
    /// computed in f64 first.
    pub fn constants(&self) -> AdamConstants {
        let t = i32::try_from(self.t).unwrap_or(i32::MAX);
        AdamConstants {
            lr: self.lr as f32,
            b1: self.b1 as f32,
            b2: self.b2 as f32,
            eps: self.eps as f32,
            bc1: (1.0 - self.b1.powi(t)) as f32,
            bc2: (1.0 - self.b2.powi(t)) as f32,
            wd: self.wd as f32,
        }
    }
}

/// The default implementations of the fused methods, composed from the
/// primitive kernels (so every backend has them, with the exact per-element
/// operations a fused kernel must reproduce).
mod composed {
    use super::{Backend, BinaryOp, Result, UnaryOp, CAUSAL_FILL};
    use crate::tensor::Tensor;

    /// √(2/π), the GELU tanh-approximation constant.
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    /// The cubic coefficient of the GELU tanh approximation.
    const GELU_KAPPA: f32 = 0.044_715;

    /// The kernels of one backend with shorthand for constants.
    struct K<'a, B: ?Sized>(&'a B);

    impl<B: Backend + ?Sized> K<'_, B> {
        fn bin(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
            self.0.binary(op, a, b)
        }
        fn mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
            self.bin(BinaryOp::Mul, a, b)
        }
        fn c(&self, v: f32) -> Result<Tensor> {
            self.0.upload(&Tensor::scalar(v))
        }
        /// `x · c`.
        fn mul_s(&self, x: &Tensor, c: f32) -> Result<Tensor> {
            self.mul(x, &self.c(c)?)
        }
        /// `x + c`.
        fn add_s(&self, x: &Tensor, c: f32) -> Result<Tensor> {
            self.bin(BinaryOp::Add, x, &self.c(c)?)
        }
        /// `c − x`.
        fn rsub_s(&self, c: f32, x: &Tensor) -> Result<Tensor> {
            self.bin(BinaryOp::Sub, &self.c(c)?, x)
        }
    }

    /// `dx` of `y = op(x)` given `g`: the derivative table of the runtime's
    /// autograd element-wise ops, one kernel per step.
    pub(super) fn unary_backward<B: Backend + ?Sized>(
        be: &B,
        op: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        g: &Tensor,
    ) -> Result<Tensor> {
        let k = K(be);
        match op {
            UnaryOp::Neg => be.unary(UnaryOp::Neg, g),
            UnaryOp::Exp => k.mul(g, y),
            UnaryOp::Log => k.bin(BinaryOp::Div, g, x),
            UnaryOp::Sqrt => k.mul_s(&k.bin(BinaryOp::Div, g, y)?, 0.5),
            UnaryOp::Abs => {
                let zero = k.c(0.0)?;
                let sign = k.bin(
                    BinaryOp::Sub,
                    &k.bin(BinaryOp::Gt, x, &zero)?,
                    &k.bin(BinaryOp::Lt, x, &zero)?,
                )?;
                k.mul(g, &sign)
            }
            UnaryOp::Sigmoid => k.mul(g, &k.mul(y, &k.rsub_s(1.0, y)?)?),
            UnaryOp::Tanh => k.mul(g, &k.rsub_s(1.0, &k.mul(y, y)?)?),
            UnaryOp::Relu => k.mul(g, &k.bin(BinaryOp::Gt, x, &k.c(0.0)?)?),
            UnaryOp::Gelu => {
                let x2 = k.mul(x, x)?;
                // u = c·x·(1 + κx²); t = tanh u.
                let inner = k.mul(x, &k.add_s(&k.mul_s(&x2, GELU_KAPPA)?, 1.0)?)?;
                let t = be.unary(UnaryOp::Tanh, &k.mul_s(&inner, SQRT_2_OVER_PI)?)?;
                // du/dx = c·(1 + 3κx²).
                let du = k.mul_s(
                    &k.add_s(&k.mul_s(&x2, 3.0 * GELU_KAPPA)?, 1.0)?,
                    SQRT_2_OVER_PI,
                )?;
                let sech2 = k.rsub_s(1.0, &k.mul(&t, &t)?)?;
                let second = k.mul(&k.mul(x, &sech2)?, &du)?;
                let d = k.mul_s(&k.bin(BinaryOp::Add, &k.add_s(&t, 1.0)?, &second)?, 0.5)?;
                k.mul(g, &d)
            }
            UnaryOp::Silu => {
                let s = be.unary(UnaryOp::Sigmoid, x)?;
                let d = k.mul(&s, &k.add_s(&k.mul(x, &k.rsub_s(1.0, &s)?)?, 1.0)?)?;
                k.mul(g, &d)
            }
        }
    }

    /// The 0/1 causal mask `[T, S]` of scores of `shape` (1 where column > row),
    /// on `be`'s device.
    fn causal_mask<B: Backend + ?Sized>(be: &B, shape: &[usize]) -> Result<Tensor> {
        let r = shape.len();
        assert!(
            r >= 2,
            "masked_softmax: scores {shape:?} must have rank >= 2"
        );
        let (t, s) = (shape[r - 2], shape[r - 1]);
        let m: Vec<f32> = (0..t * s)
            .map(|i| if i % s > i / s { 1.0 } else { 0.0 })
            .collect();
        be.upload(&Tensor::from_vec(vec![t, s], m))
    }

    /// `softmax(x / divisor, masked)` composed: divide, mask, softmax.
    pub(super) fn masked_softmax<B: Backend + ?Sized>(
        be: &B,
        x: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        let k = K(be);
        let axis = x
            .rank()
            .checked_sub(1)
            .expect("masked_softmax: scalar scores");
        let mut v = k.bin(BinaryOp::Div, x, &k.c(divisor)?)?;
        if causal {
            let m = causal_mask(be, x.shape())?;
            let keep = k.rsub_s(1.0, &m)?;
            v = k.bin(
                BinaryOp::Add,
                &k.mul(&v, &keep)?,
                &k.mul_s(&m, CAUSAL_FILL)?,
            )?;
        }
        be.softmax(&v, axis)
    }

    /// The gradient of [`masked_softmax`] composed: softmax backward, times the
    /// kept-entry mask, divided by `divisor`.
    pub(super) fn masked_softmax_backward<B: Backend + ?Sized>(
        be: &B,
        y: &Tensor,
        dy: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        let k = K(be);
        let axis = y
            .rank()
            .checked_sub(1)
            .expect("masked_softmax: scalar scores");
        let mut d = be.softmax_backward(y, dy, axis)?;
        if causal {
            let keep = k.rsub_s(1.0, &causal_mask(be, y.shape())?)?;
            d = k.mul(&d, &keep)?;
        }
        k.bin(BinaryOp::Div, &d, &k.c(divisor)?)
    }
}
