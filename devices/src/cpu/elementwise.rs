//! Element-wise kernels: unary functions and broadcasting binary operations.
//!
//! Binary operations take a fast path when the operands have the same shape,
//! when one is a single element, or when one broadcasts as a block of trailing
//! axes (`[.., n]` with `[n]`, `[B, T, d]` with `[T, d]`); everything else goes
//! through a strided walk over the coalesced broadcast shape. Work of at least
//! [`PAR_THRESHOLD`] elements is split across rayon threads.

use super::pool::{self, Out};
use super::{for_chunks, row_chunk, PAR_CHUNK, PAR_THRESHOLD};
use crate::backend::{BinaryOp, UnaryOp};
use crate::shape::{broadcast_shapes, broadcast_strides, coalesce, offset_of};
use crate::tensor::Tensor;

/// √(2/π), the GELU tanh-approximation constant.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#[inline]
pub(crate) fn gelu(x: f32) -> f32 {
    // 0.5·(1 + tanh(z)) = sigmoid(2z): one exp instead of a (slower) tanh.
    let z = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    x / (1.0 + (-2.0 * z).exp())
}

/// 1 / (1 + e^(−x)).
#[inline]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Applies `op` to every element of `x`.
pub(crate) fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    let src = x.host();
    let data = match op {
        UnaryOp::Neg => map(src, |v| -v),
        UnaryOp::Exp => map(src, f32::exp),
        UnaryOp::Log => map(src, f32::ln),
        UnaryOp::Sqrt => map(src, f32::sqrt),
        UnaryOp::Abs => map(src, f32::abs),
        UnaryOp::Sigmoid => map(src, sigmoid),
        UnaryOp::Tanh => map(src, f32::tanh),
        UnaryOp::Relu => map(src, |v| if v > 0.0 { v } else { 0.0 }),
        UnaryOp::Gelu => map(src, gelu),
        UnaryOp::Silu => map(src, |v| v * sigmoid(v)),
    };
    data.into_tensor(x.shape().to_vec())
}

/// `f` over `src` into a new output buffer, in parallel for large inputs.
fn map<F: Fn(f32) -> f32 + Sync>(src: &[f32], f: F) -> Out {
    let mut out = pool::scratch(src.len());
    for_chunks(
        &mut out,
        PAR_CHUNK,
        src.len() >= PAR_THRESHOLD,
        |start, o| {
            let len = o.len();
            for (d, &s) in o.iter_mut().zip(&src[start..start + len]) {
                *d = f(s);
            }
        },
    );
    out
}

/// 2⁻⁵², the absolute tolerance of `eq` (LANGUAGE §10.3).
const EQ_TOLERANCE: f64 = 1.0 / 4_503_599_627_370_496.0;

/// `op` over `a` and `b` broadcast together (NumPy rules).
///
/// Panics when the shapes do not broadcast (the runtime checks first).
pub(crate) fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Tensor {
    let out_shape = broadcast_shapes(a.shape(), b.shape()).unwrap_or_else(|| {
        panic!(
            "binary {:?}: shapes {:?} and {:?} do not broadcast",
            op,
            a.shape(),
            b.shape()
        )
    });
    match op {
        BinaryOp::Add => zip_with(a, b, out_shape, |x, y| x + y),
        BinaryOp::Sub => zip_with(a, b, out_shape, |x, y| x - y),
        BinaryOp::Mul => zip_with(a, b, out_shape, |x, y| x * y),
        BinaryOp::Div => zip_with(a, b, out_shape, |x, y| x / y),
        BinaryOp::Pow => zip_with(a, b, out_shape, f32::powf),
        BinaryOp::Gt => zip_with(a, b, out_shape, |x, y| (x > y) as u8 as f32),
        BinaryOp::Lt => zip_with(a, b, out_shape, |x, y| (x < y) as u8 as f32),
        BinaryOp::Eq => zip_with(a, b, out_shape, |x, y| {
            (((x as f64) - (y as f64)).abs() < EQ_TOLERANCE) as u8 as f32
        }),
        BinaryOp::Max => zip_with(
            a,
            b,
            out_shape,
            |x, y| {
                if x > y || x.is_nan() {
                    x
                } else {
                    y
                }
            },
        ),
        BinaryOp::Min => zip_with(
            a,
            b,
            out_shape,
            |x, y| {
                if x < y || x.is_nan() {
                    x
                } else {
                    y
                }
            },
        ),
    }
}

/// The shape without its leading axes of size 1.
fn strip_leading_ones(shape: &[usize]) -> &[usize] {
    let lead = shape.iter().take_while(|&&d| d == 1).count();
    &shape[lead..]
}

/// Whether an operand of `shape` broadcasts to `out` as one block repeated over
/// the leading axes: its shape (less leading 1s) equals `out`'s trailing axes.
fn is_trailing_block(shape: &[usize], out: &[usize]) -> bool {
    let s = strip_leading_ones(shape);
    s.len() <= out.len() && s == &out[out.len() - s.len()..]
}

/// The broadcasting kernel shared by every binary op.
fn zip_with<F>(a: &Tensor, b: &Tensor, out_shape: Vec<usize>, f: F) -> Tensor
where
    F: Fn(f32, f32) -> f32 + Sync + Copy,
{
    let n: usize = out_shape.iter().product();
    let mut out = pool::scratch(n);
    if n == 0 {
        return out.into_tensor(out_shape);
    }
    let (xa, xb) = (a.host(), b.host());
    let par = n >= PAR_THRESHOLD;
    if xa.len() == n && xb.len() == n {
        // Same element count and broadcast-compatible: same layout.
        for_chunks(&mut out, PAR_CHUNK, par, |s, o| {
            let (ca, cb) = (&xa[s..s + o.len()], &xb[s..s + o.len()]);
            for ((d, &x), &y) in o.iter_mut().zip(ca).zip(cb) {
                *d = f(x, y);
            }
        });
    } else if xb.len() == 1 && xa.len() == n {
        let y = xb[0];
        for_chunks(&mut out, PAR_CHUNK, par, |s, o| {
            let len = o.len();
            for (d, &x) in o.iter_mut().zip(&xa[s..s + len]) {
                *d = f(x, y);
            }
        });
    } else if xa.len() == 1 && xb.len() == n {
        let x = xa[0];
        for_chunks(&mut out, PAR_CHUNK, par, |s, o| {
            let len = o.len();
            for (d, &y) in o.iter_mut().zip(&xb[s..s + len]) {
                *d = f(x, y);
            }
        });
    } else if xa.len() == n && is_trailing_block(b.shape(), &out_shape) {
        let row = xb.len();
        for_chunks(&mut out, row_chunk(row), par, |s, o| {
            let len = o.len();
            for (orow, arow) in o.chunks_mut(row).zip(xa[s..s + len].chunks(row)) {
                for ((d, &x), &y) in orow.iter_mut().zip(arow).zip(xb) {
                    *d = f(x, y);
                }
            }
        });
    } else if xb.len() == n && is_trailing_block(a.shape(), &out_shape) {
        let row = xa.len();
        for_chunks(&mut out, row_chunk(row), par, |s, o| {
            let len = o.len();
            for (orow, brow) in o.chunks_mut(row).zip(xb[s..s + len].chunks(row)) {
                for ((d, &x), &y) in orow.iter_mut().zip(xa).zip(brow) {
                    *d = f(x, y);
                }
            }
        });
    } else {
        strided(xa, xb, a.shape(), b.shape(), &out_shape, &mut out, f);
    }
    out.into_tensor(out_shape)
}

/// General broadcasting: walks the output row by row (rows along the last
/// coalesced axis), reading each operand through its broadcast strides.
fn strided<F>(
    xa: &[f32],
    xb: &[f32],
    sa: &[usize],
    sb: &[usize],
    out_shape: &[usize],
    out: &mut [f32],
    f: F,
) where
    F: Fn(f32, f32) -> f32 + Sync + Copy,
{
    let strides = [
        broadcast_strides(sa, out_shape),
        broadcast_strides(sb, out_shape),
    ];
    let (shape, strides) = coalesce(out_shape, &strides);
    let r = shape.len();
    let row = shape[r - 1];
    let (ia, ib) = (strides[0][r - 1], strides[1][r - 1]);
    let outer = &shape[..r - 1];
    let (oa, ob) = (&strides[0][..r - 1], &strides[1][..r - 1]);
    for_chunks(out, row_chunk(row), out.len() >= PAR_THRESHOLD, |s, o| {
        for (j, orow) in o.chunks_mut(row).enumerate() {
            let ri = s / row + j;
            let pa = offset_of(ri, outer, oa);
            let pb = offset_of(ri, outer, ob);
            match (ia, ib) {
                (1, 1) => {
                    let (ra, rb) = (&xa[pa..pa + row], &xb[pb..pb + row]);
                    for ((d, &x), &y) in orow.iter_mut().zip(ra).zip(rb) {
                        *d = f(x, y);
                    }
                }
                (1, 0) => {
                    let y = xb[pb];
                    for (d, &x) in orow.iter_mut().zip(&xa[pa..pa + row]) {
                        *d = f(x, y);
                    }
                }
                (0, 1) => {
                    let x = xa[pa];
                    for (d, &y) in orow.iter_mut().zip(&xb[pb..pb + row]) {
                        *d = f(x, y);
                    }
                }
                _ => {
                    for (i, d) in orow.iter_mut().enumerate() {
                        *d = f(xa[pa + i * ia], xb[pb + i * ib]);
                    }
                }
            }
        }
    });
}
