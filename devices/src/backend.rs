//! The device abstraction around the [`Backend`] trait (whose kernels are
//! declared in the kernel table, `kernels.rs`): the operation enums it takes,
//! its error type, its counters, and the composed defaults of its fused kernels.

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
    /// Evaluations of a lazy device's pending work (MLX: each `eval` of its
    /// graph, where a value must be read or a training step's state is
    /// settled); 0 on the CPU and CUDA, which run every kernel when called.
    pub evaluations: u64,
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
    /// sin x (radians).
    Sin,
    /// cos x (radians).
    Cos,
    /// The error function erf x = (2/√π)·∫₀ˣ e^(−t²) dt.
    Erf,
    /// The exact GELU 0.5·x·(1 + erf(x/√2)) (PyTorch's default `gelu`).
    GeluErf,
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

pub use crate::kernels::Backend;

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

/// Where a dropout mask's random bits come from (LANGUAGE §13.7): the layer's
/// stream (its seed, mixed) and a counter (the `train` loop's `step`). The
/// mask's key is `splitmix64(stream ^ counter)`. Replays of a captured step add
/// one to the counter per run, as the loop's `step` does, so a replayed step
/// makes the mask the eager step would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropoutKey {
    /// The layer's stream: `splitmix64(seed)`.
    pub stream: u64,
    /// The counter: the iteration's `step`.
    pub counter: u64,
}

impl DropoutKey {
    /// The key the mask's elements are drawn from:
    /// `splitmix64(stream ^ counter)` (LANGUAGE §13.3's mixing).
    pub fn key(&self) -> u64 {
        let z = (self.stream ^ self.counter).wrapping_add(crate::engram::GOLDEN_GAMMA);
        crate::engram::mix(z)
    }
}

/// The default implementations of the fused methods, composed from the
/// primitive kernels (so every backend has them, with the exact per-element
/// operations a fused kernel must reproduce).
pub(crate) mod composed {
    use super::{Backend, BinaryOp, Result, UnaryOp, CAUSAL_FILL};
    use crate::tensor::Tensor;

    /// √(2/π), the GELU tanh-approximation constant.
    pub(crate) const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    /// The cubic coefficient of the GELU tanh approximation.
    pub(crate) const GELU_KAPPA: f32 = 0.044_715;
    /// 1/√2, the argument scale of the exact GELU.
    pub(crate) const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
    /// 1/√(2π), the normal density's factor.
    pub(crate) const INV_SQRT_2PI: f32 = 0.398_942_3;
    /// 2/√π, the derivative of erf at 0.
    pub(crate) const TWO_OVER_SQRT_PI: f32 = std::f32::consts::FRAC_2_SQRT_PI;

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

    /// `matmul_t` composed: the transposed operands permuted, then multiplied.
    pub(crate) fn matmul_t<B: Backend + ?Sized>(
        be: &B,
        a: &Tensor,
        b: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Tensor> {
        let swap = |x: &Tensor| {
            let r = x.rank();
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            be.permute(x, &perm)
        };
        let a = if transpose_a { swap(a)? } else { a.clone() };
        let b = if transpose_b { swap(b)? } else { b.clone() };
        be.matmul(&a, &b)
    }

    /// `bias_act` composed: `binary(Add)` then `unary(act)`.
    pub(crate) fn bias_act<B: Backend + ?Sized>(
        be: &B,
        x: &Tensor,
        bias: &Tensor,
        act: UnaryOp,
    ) -> Result<Tensor> {
        let pre = be.binary(BinaryOp::Add, x, bias)?;
        be.unary(act, &pre)
    }

    /// `bias_act_backward` composed: `x + bias` recomputed, then
    /// `unary_backward` and, when wanted, `sum_to_shape`.
    pub(crate) fn bias_act_backward<B: Backend + ?Sized>(
        be: &B,
        x: &Tensor,
        bias: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        act: UnaryOp,
        want_bias: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let pre = be.binary(BinaryOp::Add, x, bias)?;
        let dx = be.unary_backward(act, &pre, y, dy)?;
        let dbias = if want_bias {
            Some(be.sum_to_shape(&dx, bias.shape())?)
        } else {
            None
        };
        Ok((dx, dbias))
    }

    /// `dx` of `y = op(x)` given `g`: the derivative table of the runtime's
    /// autograd element-wise ops, one kernel per step.
    pub(crate) fn unary_backward<B: Backend + ?Sized>(
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
            UnaryOp::Sin => k.mul(g, &be.unary(UnaryOp::Cos, x)?),
            UnaryOp::Cos => k.mul(g, &be.unary(UnaryOp::Neg, &be.unary(UnaryOp::Sin, x)?)?),
            UnaryOp::Erf => {
                // (2/√π)·e^(−x²).
                let e = be.unary(UnaryOp::Exp, &be.unary(UnaryOp::Neg, &k.mul(x, x)?)?)?;
                k.mul(g, &k.mul_s(&e, TWO_OVER_SQRT_PI)?)
            }
            UnaryOp::GeluErf => {
                // Φ(x) + x·φ(x): Φ = ½(1 + erf(x/√2)), φ = e^(−x²/2)/√(2π).
                let erf = be.unary(UnaryOp::Erf, &k.mul_s(x, FRAC_1_SQRT_2)?)?;
                let cdf = k.mul_s(&k.add_s(&erf, 1.0)?, 0.5)?;
                let e = be.unary(UnaryOp::Exp, &k.mul_s(&k.mul(x, x)?, -0.5)?)?;
                let pdf = k.mul_s(&e, INV_SQRT_2PI)?;
                let d = k.bin(BinaryOp::Add, &cdf, &k.mul(x, &pdf)?)?;
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
    pub(crate) fn masked_softmax<B: Backend + ?Sized>(
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
    pub(crate) fn masked_softmax_backward<B: Backend + ?Sized>(
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
