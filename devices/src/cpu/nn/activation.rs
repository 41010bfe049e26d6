//! Fused activations: the backward of every element-wise function, and
//! bias + activation forward and backward.

use crate::backend::composed::{FRAC_1_SQRT_2, INV_SQRT_2PI, TWO_OVER_SQRT_PI};
use crate::backend::UnaryOp;
use crate::cpu::elementwise::is_arithmetic;
use crate::cpu::isa::vectorised;
use crate::cpu::{for_chunks, pool, row_chunk, simd_act, PAR_CHUNK, PAR_THRESHOLD};
use crate::math;
use crate::tensor::Tensor;

/// √(2/π), the GELU tanh-approximation constant (as in the element-wise kernels).
pub(crate) const GELU_C: f32 = 0.797_884_6;
/// The cubic coefficient of the GELU tanh approximation.
pub(crate) const GELU_KAPPA: f32 = 0.044_715;

/// Runs `body` with the scalar form of `op` as a closure, so each activation
/// gets its own monomorphised loop. The closures are those of the element-wise
/// `unary` kernel (a test compares every op bit for bit).
macro_rules! with_unary {
    ($op:expr, |$f:ident| $body:expr) => {{
        use crate::backend::UnaryOp as U;
        use crate::cpu::elementwise::{gelu, gelu_erf, sigmoid};
        match $op {
            U::Neg => {
                let $f = |v: f32| -v;
                $body
            }
            U::Exp => {
                let $f = math::expf;
                $body
            }
            U::Log => {
                let $f = math::logf;
                $body
            }
            U::Sqrt => {
                let $f = f32::sqrt;
                $body
            }
            U::Abs => {
                let $f = f32::abs;
                $body
            }
            U::Sigmoid => {
                let $f = sigmoid;
                $body
            }
            U::Tanh => {
                let $f = math::tanhf;
                $body
            }
            U::Relu => {
                let $f = |v: f32| if v > 0.0 { v } else { 0.0 };
                $body
            }
            U::Gelu => {
                let $f = gelu;
                $body
            }
            U::Silu => {
                let $f = |v: f32| v * sigmoid(v);
                $body
            }
            U::Sin => {
                let $f = math::sinf;
                $body
            }
            U::Cos => {
                let $f = math::cosf;
                $body
            }
            U::Erf => {
                let $f = math::erff;
                $body
            }
            U::GeluErf => {
                let $f = gelu_erf;
                $body
            }
        }
    }};
}

/// Runs `body` with the derivative of `op` as a closure `(x, y, g) -> dx`:
/// the per-element operations of the composed backward (the backend's default
/// `unary_backward`), in the same order, so the results are the same bits.
macro_rules! with_unary_grad {
    ($op:expr, |$f:ident| $body:expr) => {{
        use crate::backend::UnaryOp as U;
        use crate::cpu::elementwise::sigmoid;
        match $op {
            U::Neg => {
                let $f = |_x: f32, _y: f32, g: f32| -g;
                $body
            }
            U::Exp => {
                let $f = |_x: f32, y: f32, g: f32| g * y;
                $body
            }
            U::Log => {
                let $f = |x: f32, _y: f32, g: f32| g / x;
                $body
            }
            U::Sqrt => {
                let $f = |_x: f32, y: f32, g: f32| (g / y) * 0.5;
                $body
            }
            U::Abs => {
                let $f = |x: f32, _y: f32, g: f32| {
                    g * (((x > 0.0) as u8 as f32) - ((x < 0.0) as u8 as f32))
                };
                $body
            }
            U::Sigmoid => {
                let $f = |_x: f32, y: f32, g: f32| g * (y * (1.0 - y));
                $body
            }
            U::Tanh => {
                let $f = |_x: f32, y: f32, g: f32| g * (1.0 - y * y);
                $body
            }
            U::Relu => {
                let $f = |x: f32, _y: f32, g: f32| g * ((x > 0.0) as u8 as f32);
                $body
            }
            U::Gelu => {
                let $f = |x: f32, _y: f32, g: f32| {
                    let x2 = x * x;
                    let t = math::tanhf((x * (x2 * GELU_KAPPA + 1.0)) * GELU_C);
                    let du = (x2 * (3.0 * GELU_KAPPA) + 1.0) * GELU_C;
                    let second = (x * (1.0 - t * t)) * du;
                    g * (((t + 1.0) + second) * 0.5)
                };
                $body
            }
            U::Silu => {
                let $f = |x: f32, _y: f32, g: f32| {
                    let s = sigmoid(x);
                    g * (s * (x * (1.0 - s) + 1.0))
                };
                $body
            }
            U::Sin => {
                let $f = |x: f32, _y: f32, g: f32| g * math::cosf(x);
                $body
            }
            U::Cos => {
                let $f = |x: f32, _y: f32, g: f32| g * -math::sinf(x);
                $body
            }
            U::Erf => {
                let $f = |x: f32, _y: f32, g: f32| g * (math::expf(-(x * x)) * TWO_OVER_SQRT_PI);
                $body
            }
            U::GeluErf => {
                let $f = |x: f32, _y: f32, g: f32| {
                    let cdf = (math::erff(x * FRAC_1_SQRT_2) + 1.0) * 0.5;
                    let pdf = math::expf((x * x) * -0.5) * INV_SQRT_2PI;
                    g * (cdf + x * pdf)
                };
                $body
            }
        }
    }};
}

/// `dx = op'(x)·dy` in one pass (see [`with_unary_grad`]); `x`, `y`, `dy` share a shape.
pub(crate) fn unary_backward(op: UnaryOp, x: &Tensor, y: &Tensor, dy: &Tensor) -> Tensor {
    assert!(
        x.shape() == y.shape() && x.shape() == dy.shape(),
        "unary_backward: x {:?}, y {:?} and dy {:?} differ",
        x.shape(),
        y.shape(),
        dy.shape()
    );
    let mut out = pool::scratch(x.numel());
    unary_backward_into(op, x.host(), y.host(), dy.host(), &mut out);
    out.into_tensor(x.shape().to_vec())
}

/// [`unary_backward`] on slices of one length into `out`.
pub(crate) fn unary_backward_into(
    op: UnaryOp,
    xs: &[f32],
    ys: &[f32],
    gs: &[f32],
    out: &mut [f32],
) {
    grad_into(op, xs, None, ys, gs, out, PAR_CHUNK);
}

/// Whether the derivative of `op` is plain arithmetic on `x`, `y` and `g`
/// (compiled for the CPU's level, [`vectorised`]).
fn grad_is_arithmetic(op: UnaryOp) -> bool {
    use UnaryOp as U;
    matches!(
        op,
        U::Neg | U::Exp | U::Log | U::Sqrt | U::Abs | U::Sigmoid | U::Tanh | U::Relu
    )
}

/// `out[i] = op'(x[i] + bias[i mod n], y[i], g[i])` (no bias: `x[i]`) over
/// pieces of `chunk` elements (whole bias rows): 8 lanes at a time where
/// `simd_act` has the derivative, else the scalar closure, compiled for the
/// CPU's level when it is plain arithmetic.
fn grad_into(
    op: UnaryOp,
    xs: &[f32],
    bias: Option<&[f32]>,
    ys: &[f32],
    gs: &[f32],
    out: &mut [f32],
    chunk: usize,
) {
    let par = xs.len() >= PAR_THRESHOLD;
    let wide = grad_is_arithmetic(op);
    with_unary_grad!(op, |f| for_chunks(out, chunk, par, |s, o| {
        let e = s + o.len();
        let (x, y, g) = (&xs[s..e], &ys[s..e], &gs[s..e]);
        if simd_act::backward(op, x, bias, g, o) {
            return;
        }
        if wide {
            vectorised(
                #[inline(always)]
                || grad_rows(f, x, bias, y, g, o),
            )
        } else {
            grad_rows(f, x, bias, y, g, o)
        }
    }));
}

/// The scalar loop of [`grad_into`].
#[inline(always)]
fn grad_rows(
    f: impl Fn(f32, f32, f32) -> f32,
    xs: &[f32],
    bias: Option<&[f32]>,
    ys: &[f32],
    gs: &[f32],
    out: &mut [f32],
) {
    match bias {
        None => {
            for (((d, &xv), &yv), &gv) in out.iter_mut().zip(xs).zip(ys).zip(gs) {
                *d = f(xv, yv, gv);
            }
        }
        Some(bs) => {
            let n = bs.len();
            let rows = out
                .chunks_mut(n)
                .zip(xs.chunks(n))
                .zip(ys.chunks(n))
                .zip(gs.chunks(n));
            for (((orow, xrow), yrow), grow) in rows {
                let it = orow.iter_mut().zip(xrow).zip(bs).zip(yrow).zip(grow);
                for ((((d, &xv), &bv), &yv), &gv) in it {
                    *d = f(xv + bv, yv, gv);
                }
            }
        }
    }
}

/// Checks that a bias of shape `b` is one row of an `x` of shape `x`: `x` is
/// `[.., n]` and the bias has `n` elements, with only leading axes of size 1
/// and no more axes than `x`.
fn check_bias(x: &[usize], b: &[usize]) {
    let n = x.last().copied();
    assert!(
        n.is_some()
            && b.len() <= x.len()
            && b.last().copied() == n
            && b[..b.len() - 1].iter().all(|&d| d == 1),
        "bias_act: bias {b:?} is not one row of x {x:?}"
    );
}

/// `act(x + bias)` with `bias` added to every row, in one pass: the same
/// per-element operations as `binary(Add)` followed by `unary(act)`.
pub(crate) fn bias_act(x: &Tensor, bias: &Tensor, act: UnaryOp) -> Tensor {
    check_bias(x.shape(), bias.shape());
    let mut out = pool::scratch(x.numel());
    bias_act_into(act, x.host(), bias.host(), &mut out);
    out.into_tensor(x.shape().to_vec())
}

/// [`bias_act`] of rows `xs` (a multiple of `bs.len()` elements) into `out`:
/// 8 lanes at a time where `simd_act` has the activation, else the scalar
/// closure, compiled for the CPU's level when it is plain arithmetic.
pub(crate) fn bias_act_into(act: UnaryOp, xs: &[f32], bs: &[f32], out: &mut [f32]) {
    let n = bs.len();
    if n == 0 {
        return;
    }
    let par = xs.len() >= PAR_THRESHOLD;
    let wide = is_arithmetic(act);
    with_unary!(act, |f| for_chunks(out, row_chunk(n), par, |s, o| {
        let e = s + o.len();
        if simd_act::forward(act, &xs[s..e], Some(bs), o) {
            return;
        }
        let x = &xs[s..e];
        if wide {
            vectorised(
                #[inline(always)]
                || bias_act_rows(f, x, bs, o),
            )
        } else {
            bias_act_rows(f, x, bs, o)
        }
    }));
}

/// The scalar loop of [`bias_act_into`]: `out = f(x + bias)` row by row.
#[inline(always)]
fn bias_act_rows(f: impl Fn(f32) -> f32, xs: &[f32], bs: &[f32], out: &mut [f32]) {
    for (orow, xrow) in out.chunks_mut(bs.len()).zip(xs.chunks(bs.len())) {
        for ((d, &xv), &bv) in orow.iter_mut().zip(xrow).zip(bs) {
            *d = f(xv + bv);
        }
    }
}

/// Gradients of [`bias_act`]: `dx = act'(x + bias)·dy` in one pass, and, when
/// `want_bias`, `dbias` = `dx` summed over the rows by `sum_to_shape` (the same
/// reduction, in the same order, as the unfused backward).
pub(crate) fn bias_act_backward(
    x: &Tensor,
    bias: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    act: UnaryOp,
    want_bias: bool,
) -> (Tensor, Option<Tensor>) {
    check_bias(x.shape(), bias.shape());
    assert!(
        x.shape() == y.shape() && x.shape() == dy.shape(),
        "bias_act_backward: x {:?}, y {:?} and dy {:?} differ",
        x.shape(),
        y.shape(),
        dy.shape()
    );
    let mut out = pool::scratch(x.numel());
    bias_act_backward_into(act, x.host(), bias.host(), y.host(), dy.host(), &mut out);
    let dx = out.into_tensor(x.shape().to_vec());
    let dbias = want_bias.then(|| crate::cpu::layout::sum_to_shape(&dx, bias.shape()));
    (dx, dbias)
}

/// `dx` of [`bias_act_backward`] on slices (rows of `bs.len()`) into `dx`; the
/// bias gradient is `dx` summed to the bias's shape (`sum_to_shape_into`).
pub(crate) fn bias_act_backward_into(
    act: UnaryOp,
    xs: &[f32],
    bs: &[f32],
    ys: &[f32],
    gs: &[f32],
    dx: &mut [f32],
) {
    let n = bs.len();
    if n == 0 {
        return;
    }
    grad_into(act, xs, Some(bs), ys, gs, dx, row_chunk(n));
}
