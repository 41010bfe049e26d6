//! Element-wise kernels: unary functions and broadcasting binary operations.
//!
//! Binary operations take a fast path when the operands have the same shape,
//! when one is a single element, or when one broadcasts as a block of trailing
//! axes (`[.., n]` with `[n]`, `[B, T, d]` with `[T, d]`); everything else goes
//! through a strided walk over the coalesced broadcast shape. Work of at least
//! [`PAR_THRESHOLD`] elements is split across rayon threads; each chunk runs
//! compiled for the CPU's instruction-set level ([`vectorised`]), the same
//! operations per element on every level.

use super::isa::vectorised;
use super::pool;
use super::simd_act;
use super::simd_exp;
use super::{for_chunks, row_chunk, PAR_CHUNK, PAR_THRESHOLD};
use crate::backend::{BinaryOp, UnaryOp};
use crate::math;
use crate::shape::{broadcast_shapes, broadcast_strides, coalesce, offset_of};
use crate::tensor::{numel_of, Tensor};

/// √(2/π), the GELU tanh-approximation constant.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#[inline]
pub(crate) fn gelu(x: f32) -> f32 {
    // 0.5·(1 + tanh(z)) = sigmoid(2z): one exp instead of a (slower) tanh.
    let z = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    x / (1.0 + math::expf(-2.0 * z))
}

/// The exact GELU, 0.5·x·(1 + erf(x/√2)).
#[inline]
pub(crate) fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + math::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// 1 / (1 + e^(−x)).
#[inline]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + math::expf(-x))
}

/// Applies `op` to every element of `x`.
pub(crate) fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    let mut out = pool::scratch(x.numel());
    unary_into(op, x.host(), &mut out);
    out.into_tensor(x.shape().to_vec())
}

/// Applies `op` to every element of `src`, writing `out` (same length).
pub(crate) fn unary_into(op: UnaryOp, src: &[f32], out: &mut [f32]) {
    let wide = if is_arithmetic(op) {
        Wide::Yes
    } else {
        Wide::No
    };
    match op {
        UnaryOp::Neg => map_into(src, out, wide, |v| -v),
        UnaryOp::Exp => exp_into(src, out),
        UnaryOp::Log => map_into(src, out, wide, math::logf),
        UnaryOp::Sqrt => map_into(src, out, wide, f32::sqrt),
        UnaryOp::Abs => map_into(src, out, wide, f32::abs),
        UnaryOp::Sigmoid => act_into(op, src, out, sigmoid),
        UnaryOp::Tanh => act_into(op, src, out, math::tanhf),
        UnaryOp::Relu => map_into(src, out, wide, |v| if v > 0.0 { v } else { 0.0 }),
        UnaryOp::Gelu => act_into(op, src, out, gelu),
        UnaryOp::Silu => act_into(op, src, out, |v| v * sigmoid(v)),
        UnaryOp::Sin => map_into(src, out, wide, math::sinf),
        UnaryOp::Cos => map_into(src, out, wide, math::cosf),
        UnaryOp::Erf => map_into(src, out, wide, math::erff),
        UnaryOp::GeluErf => map_into(src, out, wide, gelu_erf),
    }
}

/// Whether `op` is plain arithmetic (no table look-ups or library calls), so
/// its loops are worth compiling for the CPU's level ([`vectorised`]).
pub(crate) fn is_arithmetic(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Neg | UnaryOp::Sqrt | UnaryOp::Abs | UnaryOp::Relu
    )
}

/// Whether a loop is compiled for the CPU's level ([`vectorised`]): yes for
/// plain arithmetic; no for the functions with table look-ups and branches
/// (exp, log, tanh, ...), which AVX2 and AVX-512 builds vectorise with gathers
/// that are slower than the baseline build's loop on some CPUs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wide {
    Yes,
    No,
}

/// Runs `f` compiled for the CPU's level when `wide` says so.
#[inline(always)]
fn maybe_vectorised(wide: Wide, f: impl FnOnce()) {
    match wide {
        Wide::Yes => vectorised(f),
        Wide::No => f(),
    }
}

/// `f` over `src` into `out`, in parallel for large inputs.
fn map_into<F: Fn(f32) -> f32 + Sync>(src: &[f32], out: &mut [f32], wide: Wide, f: F) {
    assert_eq!(src.len(), out.len(), "unary: output length differs");
    for_chunks(out, PAR_CHUNK, src.len() >= PAR_THRESHOLD, |start, o| {
        maybe_vectorised(
            wide,
            #[inline(always)]
            || {
                let len = o.len();
                for (d, &s) in o.iter_mut().zip(&src[start..start + len]) {
                    *d = f(s);
                }
            },
        )
    });
}

/// `f` (the scalar form of `op`) over `src` into `out`, 8 lanes at a time
/// on AVX2 and AVX-512 (the same bits: see `simd_act.rs`).
fn act_into<F: Fn(f32) -> f32 + Sync>(op: UnaryOp, src: &[f32], out: &mut [f32], f: F) {
    assert_eq!(src.len(), out.len(), "unary: output length differs");
    for_chunks(out, PAR_CHUNK, src.len() >= PAR_THRESHOLD, |start, o| {
        let s = &src[start..start + o.len()];
        if !simd_act::forward(op, s, None, o) {
            for (d, &v) in o.iter_mut().zip(s) {
                *d = f(v);
            }
        }
    });
}

/// `math::expf` of every element of `src` into `out`, 8 lanes at a time on
/// AVX2 and AVX-512 (the same bits: see `simd_exp.rs`).
fn exp_into(src: &[f32], out: &mut [f32]) {
    assert_eq!(src.len(), out.len(), "unary: output length differs");
    for_chunks(out, PAR_CHUNK, src.len() >= PAR_THRESHOLD, |start, o| {
        let len = o.len();
        // x − 0 is x for every float (−0 stays −0, NaN stays NaN).
        simd_exp::exp_shifted(&src[start..start + len], 0.0, o);
    });
}

/// 2⁻⁵², the absolute tolerance of `eq` (LANGUAGE §10.3).
const EQ_TOLERANCE: f64 = 1.0 / 4_503_599_627_370_496.0;

/// How the two operands of a binary operation are read to fill the output:
/// decided once from the shapes, so running it allocates nothing.
#[derive(Clone, Debug)]
pub(crate) enum Broadcast {
    /// Both have the output's element count (and so its layout).
    Same,
    /// `b` is one element.
    ScalarB,
    /// `a` is one element.
    ScalarA,
    /// `b` is a block of the output's trailing axes, repeated.
    BlockB,
    /// `a` is a block of the output's trailing axes, repeated.
    BlockA,
    /// Anything else: the coalesced output shape and each operand's strides.
    Strided {
        /// The coalesced iteration shape (rank ≥ 1).
        shape: Vec<usize>,
        /// The strides of `a` and of `b` over `shape`.
        strides: [Vec<usize>; 2],
    },
}

/// A binary operation's output shape and how its operands broadcast to it.
#[derive(Clone, Debug)]
pub(crate) struct BinaryPlan {
    /// The broadcast shape.
    pub(crate) out_shape: Vec<usize>,
    /// How the operands are read.
    pub(crate) broadcast: Broadcast,
}

impl BinaryPlan {
    /// The plan for operands of shapes `sa` and `sb`, or `None` when they do
    /// not broadcast.
    pub(crate) fn new(sa: &[usize], sb: &[usize]) -> Option<BinaryPlan> {
        let out_shape = broadcast_shapes(sa, sb)?;
        let n = numel_of(&out_shape);
        let (na, nb) = (numel_of(sa), numel_of(sb));
        let broadcast = if na == n && nb == n {
            // Same element count and broadcast-compatible: same layout.
            Broadcast::Same
        } else if nb == 1 && na == n {
            Broadcast::ScalarB
        } else if na == 1 && nb == n {
            Broadcast::ScalarA
        } else if na == n && is_trailing_block(sb, &out_shape) {
            Broadcast::BlockB
        } else if nb == n && is_trailing_block(sa, &out_shape) {
            Broadcast::BlockA
        } else {
            let strides = [
                broadcast_strides(sa, &out_shape),
                broadcast_strides(sb, &out_shape),
            ];
            let (shape, strides) = coalesce(&out_shape, &strides);
            let [s0, s1]: [Vec<usize>; 2] = strides
                .try_into()
                .unwrap_or_else(|_| unreachable!("coalesce keeps one stride vector per operand"));
            Broadcast::Strided {
                shape,
                strides: [s0, s1],
            }
        };
        Some(BinaryPlan {
            out_shape,
            broadcast,
        })
    }
}

/// `op` over `a` and `b` broadcast together (NumPy rules).
///
/// Panics when the shapes do not broadcast (the runtime checks first).
pub(crate) fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Tensor {
    let plan = BinaryPlan::new(a.shape(), b.shape()).unwrap_or_else(|| {
        panic!(
            "binary {:?}: shapes {:?} and {:?} do not broadcast",
            op,
            a.shape(),
            b.shape()
        )
    });
    let mut out = pool::scratch(numel_of(&plan.out_shape));
    binary_into(op, &plan, a.host(), b.host(), &mut out);
    out.into_tensor(plan.out_shape)
}

/// `op` over `xa` and `xb` read as `plan` says, into `out` (the output's
/// element count).
pub(crate) fn binary_into(
    op: BinaryOp,
    plan: &BinaryPlan,
    xa: &[f32],
    xb: &[f32],
    out: &mut [f32],
) {
    let p = &plan.broadcast;
    match op {
        BinaryOp::Add => zip_into(p, xa, xb, out, Wide::Yes, |x, y| x + y),
        BinaryOp::Sub => zip_into(p, xa, xb, out, Wide::Yes, |x, y| x - y),
        BinaryOp::Mul => zip_into(p, xa, xb, out, Wide::Yes, |x, y| x * y),
        BinaryOp::Div => zip_into(p, xa, xb, out, Wide::Yes, |x, y| x / y),
        BinaryOp::Pow => zip_into(p, xa, xb, out, Wide::No, math::powf),
        BinaryOp::Gt => zip_into(p, xa, xb, out, Wide::Yes, |x, y| (x > y) as u8 as f32),
        BinaryOp::Lt => zip_into(p, xa, xb, out, Wide::Yes, |x, y| (x < y) as u8 as f32),
        BinaryOp::Eq => zip_into(p, xa, xb, out, Wide::Yes, |x, y| {
            (((x as f64) - (y as f64)).abs() < EQ_TOLERANCE) as u8 as f32
        }),
        BinaryOp::Max => zip_into(p, xa, xb, out, Wide::Yes, |x, y| {
            if x > y || x.is_nan() {
                x
            } else {
                y
            }
        }),
        BinaryOp::Min => zip_into(p, xa, xb, out, Wide::Yes, |x, y| {
            if x < y || x.is_nan() {
                x
            } else {
                y
            }
        }),
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
fn zip_into<F>(plan: &Broadcast, xa: &[f32], xb: &[f32], out: &mut [f32], wide: Wide, f: F)
where
    F: Fn(f32, f32) -> f32 + Sync + Copy,
{
    let n = out.len();
    if n == 0 {
        return;
    }
    let par = n >= PAR_THRESHOLD;
    match plan {
        Broadcast::Same => for_chunks(out, PAR_CHUNK, par, |s, o| {
            maybe_vectorised(
                wide,
                #[inline(always)]
                || {
                    let (ca, cb) = (&xa[s..s + o.len()], &xb[s..s + o.len()]);
                    for ((d, &x), &y) in o.iter_mut().zip(ca).zip(cb) {
                        *d = f(x, y);
                    }
                },
            )
        }),
        Broadcast::ScalarB => {
            let y = xb[0];
            for_chunks(out, PAR_CHUNK, par, |s, o| {
                maybe_vectorised(
                    wide,
                    #[inline(always)]
                    || {
                        let len = o.len();
                        for (d, &x) in o.iter_mut().zip(&xa[s..s + len]) {
                            *d = f(x, y);
                        }
                    },
                )
            });
        }
        Broadcast::ScalarA => {
            let x = xa[0];
            for_chunks(out, PAR_CHUNK, par, |s, o| {
                maybe_vectorised(
                    wide,
                    #[inline(always)]
                    || {
                        let len = o.len();
                        for (d, &y) in o.iter_mut().zip(&xb[s..s + len]) {
                            *d = f(x, y);
                        }
                    },
                )
            });
        }
        Broadcast::BlockB => {
            let row = xb.len();
            for_chunks(out, row_chunk(row), par, |s, o| {
                maybe_vectorised(
                    wide,
                    #[inline(always)]
                    || {
                        let len = o.len();
                        for (orow, arow) in o.chunks_mut(row).zip(xa[s..s + len].chunks(row)) {
                            for ((d, &x), &y) in orow.iter_mut().zip(arow).zip(xb) {
                                *d = f(x, y);
                            }
                        }
                    },
                )
            });
        }
        Broadcast::BlockA => {
            let row = xa.len();
            for_chunks(out, row_chunk(row), par, |s, o| {
                maybe_vectorised(
                    wide,
                    #[inline(always)]
                    || {
                        let len = o.len();
                        for (orow, brow) in o.chunks_mut(row).zip(xb[s..s + len].chunks(row)) {
                            for ((d, &x), &y) in orow.iter_mut().zip(xa).zip(brow) {
                                *d = f(x, y);
                            }
                        }
                    },
                )
            });
        }
        Broadcast::Strided { shape, strides } => strided(xa, xb, shape, strides, out, wide, f),
    }
}

/// General broadcasting: walks the output row by row (rows along the last
/// coalesced axis), reading each operand through its broadcast strides.
fn strided<F>(
    xa: &[f32],
    xb: &[f32],
    shape: &[usize],
    strides: &[Vec<usize>; 2],
    out: &mut [f32],
    wide: Wide,
    f: F,
) where
    F: Fn(f32, f32) -> f32 + Sync + Copy,
{
    let r = shape.len();
    let row = shape[r - 1];
    let (ia, ib) = (strides[0][r - 1], strides[1][r - 1]);
    let outer = &shape[..r - 1];
    let (oa, ob) = (&strides[0][..r - 1], &strides[1][..r - 1]);
    for_chunks(out, row_chunk(row), out.len() >= PAR_THRESHOLD, |s, o| {
        maybe_vectorised(
            wide,
            #[inline(always)]
            || strided_rows(xa, xb, (row, ia, ib), outer, (oa, ob), s, o, f),
        )
    });
}

/// The rows of [`strided`] that start at output element `s`, into `o`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn strided_rows<F>(
    xa: &[f32],
    xb: &[f32],
    (row, ia, ib): (usize, usize, usize),
    outer: &[usize],
    (oa, ob): (&[usize], &[usize]),
    s: usize,
    o: &mut [f32],
    f: F,
) where
    F: Fn(f32, f32) -> f32,
{
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
}
