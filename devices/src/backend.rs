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
    /// The dropout mask of LANGUAGE §13.7 for an input of `shape`, made on this
    /// device: element i is `1/(1-p)` (as f32) when
    /// `(splitmix64(key + i·0x9E3779B97F4A7C15) >> 11)·2⁻⁵³ >= p`, else 0 (`key` is
    /// derived from the layer's seed and the step by the caller). `None` (the
    /// default) means the caller builds the mask in host memory.
    fn dropout_mask(&self, shape: &[usize], key: u64, p: f64) -> Result<Option<Tensor>> {
        let _ = (shape, key, p);
        Ok(None)
    }
    /// One fused Adam/AdamW step in place: `m = b1 m + (1-b1) g`; `v = b2 v + (1-b2) g^2`;
    /// `p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)` (`bc1 = 1-b1^t`, `bc2 = 1-b2^t`
    /// given by the caller, computed in f64). Copy-on-write: clones of `p`, `m`, `v` taken
    /// before the call keep their old values.
    #[allow(clippy::too_many_arguments)]
    fn adam_update(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        lr: f32,
        b1: f32,
        b2: f32,
        eps: f32,
        bc1: f32,
        bc2: f32,
        wd: f32,
    ) -> Result<()>;
}
