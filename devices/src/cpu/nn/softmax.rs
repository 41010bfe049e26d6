//! Softmax-family row kernels: softmax and log-softmax (and backward), the
//! fused cross-entropy forward and backward, and the masked (attention) softmax.
//! Rows subtract their maximum before exponentiating and sum in f64 in the
//! lane order of `cpu/lane_sum.rs`; sums down a column (softmax over an axis
//! that is not the last) run in index order.

use super::{map_rows, map_rows_with, no_side, split_at_axis};
use crate::backend::CAUSAL_FILL;
use crate::cpu::isa::vectorised;
use crate::cpu::lane_sum::{row_max, sum_map, sum_map2, LaneSum};
use crate::cpu::simd_exp;
use crate::cpu::{pool, PAR_THRESHOLD};
use crate::math;
use crate::shape::reduced_shape;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// The scratch elements (f32, f64) the softmax kernels need for `(outer, n,
/// inner)`: per-column statistics when the axis is not the last one.
pub(crate) fn softmax_scratch_lens((outer, _, inner): (usize, usize, usize)) -> usize {
    if inner == 1 {
        0
    } else {
        outer * inner
    }
}

/// Softmax (or log-softmax when `log`) of `x` along `axis`.
pub(crate) fn softmax(x: &Tensor, axis: usize, log: bool) -> Tensor {
    let dims = split_at_axis(x.shape(), axis);
    let n = softmax_scratch_lens(dims);
    let (mut m, mut s) = (vec![0.0f32; n], vec![0.0f64; n]);
    let mut out = pool::scratch(x.numel());
    softmax_into(x.host(), dims, log, &mut out, &mut m, &mut s);
    out.into_tensor(x.shape().to_vec())
}

/// Softmax (or log-softmax) of `src` viewed as `(outer, n, inner)` along the
/// middle axis into `out`; `m` and `sum` are scratch of
/// [`softmax_scratch_lens`] elements.
pub(crate) fn softmax_into(
    src: &[f32],
    (outer, n, inner): (usize, usize, usize),
    log: bool,
    out: &mut [f32],
    m: &mut [f32],
    sum: &mut [f64],
) {
    if src.is_empty() {
        return;
    }
    let par = src.len() >= PAR_THRESHOLD;
    if inner == 1 {
        map_rows(out, outer, n, par, |r, o| {
            vectorised(
                #[inline(always)]
                || {
                    let xr = &src[r * n..(r + 1) * n];
                    let m = row_max(xr);
                    let mut sum = LaneSum::ZERO;
                    exp_shifted_sum(&mut sum, xr, m, o);
                    let sum = sum.total();
                    if log {
                        let shift = m + (math::log(sum) as f32);
                        for (d, &v) in o.iter_mut().zip(xr) {
                            *d = v - shift;
                        }
                    } else {
                        let inv = (1.0 / sum) as f32;
                        o.iter_mut().for_each(|d| *d *= inv);
                    }
                },
            )
        });
    } else {
        map_rows_with(out, outer, n * inner, par, m, sum, |o, plane, m, sum| {
            {
                let xp = &src[o * n * inner..(o + 1) * n * inner];
                m.fill(f32::NEG_INFINITY);
                for xr in xp.chunks(inner) {
                    for (a, &v) in m.iter_mut().zip(xr) {
                        *a = a.max(v);
                    }
                }
                sum.fill(0.0);
                for (orow, xr) in plane.chunks_mut(inner).zip(xp.chunks(inner)) {
                    for (((d, &v), &mx), s) in
                        orow.iter_mut().zip(xr).zip(m.iter()).zip(sum.iter_mut())
                    {
                        let e = math::expf(v - mx);
                        *d = e;
                        *s += e as f64;
                    }
                }
                if log {
                    // The shift of each column, kept where its maximum was.
                    for (mx, &s) in m.iter_mut().zip(sum.iter()) {
                        *mx += math::log(s) as f32;
                    }
                    for (orow, xr) in plane.chunks_mut(inner).zip(xp.chunks(inner)) {
                        for ((d, &v), &sh) in orow.iter_mut().zip(xr).zip(m.iter()) {
                            *d = v - sh;
                        }
                    }
                } else {
                    // The inverse sum of each column, kept where its maximum was.
                    for (iv, &s) in m.iter_mut().zip(sum.iter()) {
                        *iv = (1.0 / s) as f32;
                    }
                    for orow in plane.chunks_mut(inner) {
                        for (d, &iv) in orow.iter_mut().zip(m.iter()) {
                            *d *= iv;
                        }
                    }
                }
            }
        });
    }
}

/// log Σ e^x along `axis` (removed from the shape): the axis maximum plus the
/// log of Σ e^(x − max) summed in f64 in order, the same bits as the shift
/// `log_softmax` subtracts, so `log_softmax(x) = x − logsumexp(x)` exactly.
pub(crate) fn logsumexp(x: &Tensor, axis: usize) -> Tensor {
    let dims = split_at_axis(x.shape(), axis);
    let mut sum = vec![0.0f64; softmax_scratch_lens(dims)];
    let mut out = pool::scratch(dims.0 * dims.2);
    logsumexp_into(x.host(), dims, &mut out, &mut sum);
    out.into_tensor(reduced_shape(x.shape(), Some(axis)))
}

/// [`logsumexp`] of `src` viewed as `(outer, n, inner)` along the middle axis
/// into `out` (`outer × inner`); `sum` is scratch of [`softmax_scratch_lens`]
/// elements (the column sums when the axis is not the last one).
pub(crate) fn logsumexp_into(
    src: &[f32],
    (outer, n, inner): (usize, usize, usize),
    out: &mut [f32],
    sum: &mut [f64],
) {
    if out.is_empty() {
        return;
    }
    let par = src.len() >= PAR_THRESHOLD;
    if inner == 1 {
        map_rows(out, outer, 1, par, |r, o| {
            let xr = &src[r * n..(r + 1) * n];
            let m = row_max(xr);
            let s = sum_map(xr, |v| math::expf(v - m) as f64);
            o[0] = m + (math::log(s) as f32);
        });
    } else {
        let mut rows = no_side(outer);
        map_rows_with(out, outer, inner, par, &mut rows, sum, |o, m, _, sum| {
            {
                let xp = &src[o * n * inner..(o + 1) * n * inner];
                // `m` (the output row) holds each column's maximum until the end.
                m.fill(f32::NEG_INFINITY);
                for xr in xp.chunks(inner) {
                    for (a, &v) in m.iter_mut().zip(xr) {
                        *a = a.max(v);
                    }
                }
                sum.fill(0.0);
                for xr in xp.chunks(inner) {
                    for ((s, &v), &mx) in sum.iter_mut().zip(xr).zip(m.iter()) {
                        *s += math::expf(v - mx) as f64;
                    }
                }
                for (mx, &s) in m.iter_mut().zip(sum.iter()) {
                    *mx += math::log(s) as f32;
                }
            }
        });
    }
}

/// dx = y · (dy − Σ(dy·y)) along `axis`, for y = softmax(x).
pub(crate) fn softmax_backward(y: &Tensor, dy: &Tensor, axis: usize) -> Tensor {
    assert_eq!(
        y.shape(),
        dy.shape(),
        "softmax_backward: y and dy shapes differ"
    );
    let dims = split_at_axis(y.shape(), axis);
    let mut dot = vec![0.0f64; softmax_scratch_lens(dims)];
    let mut out = pool::scratch(y.numel());
    softmax_backward_into(y.host(), dy.host(), dims, &mut out, &mut dot);
    out.into_tensor(y.shape().to_vec())
}

/// [`softmax_backward`] of `ys` and `gs` viewed as `(outer, n, inner)` into
/// `out`; `dot` is scratch of [`softmax_scratch_lens`] elements.
pub(crate) fn softmax_backward_into(
    ys: &[f32],
    gs: &[f32],
    (outer, n, inner): (usize, usize, usize),
    out: &mut [f32],
    dot: &mut [f64],
) {
    if ys.is_empty() {
        return;
    }
    let par = ys.len() >= PAR_THRESHOLD;
    let mut unit = no_side(outer);
    let dot: &mut [f64] = if inner == 1 { &mut [] } else { dot };
    let plane = |o: usize, plane: &mut [f32], dot: &mut [f64]| {
        vectorised(
            #[inline(always)]
            || {
                let range = o * n * inner..(o + 1) * n * inner;
                let (yp, gp) = (&ys[range.clone()], &gs[range]);
                if inner == 1 {
                    let dot = sum_map2(yp, gp, |a, b| a as f64 * b as f64) as f32;
                    for ((d, &yv), &gv) in plane.iter_mut().zip(yp).zip(gp) {
                        *d = yv * (gv - dot);
                    }
                } else {
                    dot.fill(0.0);
                    for (yr, gr) in yp.chunks(inner).zip(gp.chunks(inner)) {
                        for ((s, &yv), &gv) in dot.iter_mut().zip(yr).zip(gr) {
                            *s += yv as f64 * gv as f64;
                        }
                    }
                    for ((orow, yr), gr) in plane
                        .chunks_mut(inner)
                        .zip(yp.chunks(inner))
                        .zip(gp.chunks(inner))
                    {
                        for (((d, &yv), &gv), &s) in orow.iter_mut().zip(yr).zip(gr).zip(dot.iter())
                        {
                            *d = yv * (gv - s as f32);
                        }
                    }
                }
            },
        )
    };
    if inner == 1 {
        map_rows(out, outer, n, par, |o, p| plane(o, p, &mut []));
    } else {
        map_rows_with(
            out,
            outer,
            n * inner,
            par,
            dot,
            &mut unit,
            |o, p, dot, _| plane(o, p, dot),
        );
    }
}

/// `(rows, v)` of cross-entropy logits of `shape`: the last axis is the class
/// axis, leading axes are rows.
pub(crate) fn cross_entropy_rows(shape: &[usize]) -> (usize, usize) {
    let v = *shape
        .last()
        .expect("cross_entropy: logits must have rank >= 1");
    (shape[..shape.len() - 1].iter().product(), v)
}

/// Fused cross-entropy over the last axis of `logits` (`[N, V]`; any leading
/// axes are flattened into rows) with integer-valued `targets` (N elements):
/// the mean over rows of logsumexp(row) − row[target], and, when `want_grad`,
/// d loss / d logits = (softmax − onehot) / N.
pub(crate) fn cross_entropy(
    logits: &Tensor,
    targets: &Tensor,
    want_grad: bool,
) -> (Tensor, Option<Tensor>) {
    let (rows, v) = cross_entropy_rows(logits.shape());
    let mut losses = vec![0.0f64; rows];
    let mut loss = [0.0f32];
    let grad = if want_grad {
        let mut g = pool::scratch(rows * v);
        cross_entropy_into(
            logits.host(),
            targets.host(),
            (rows, v),
            &mut loss,
            Some(&mut g),
            &mut losses,
        );
        Some(g.into_tensor(logits.shape().to_vec()))
    } else {
        cross_entropy_into(
            logits.host(),
            targets.host(),
            (rows, v),
            &mut loss,
            None,
            &mut losses,
        );
        None
    };
    (Tensor::scalar(loss[0]), grad)
}

/// `dst[i] = e^(src[i] − m)`, each added to `sum` (in f64, in the lane order).
#[inline(always)]
fn exp_shifted_sum(sum: &mut LaneSum, src: &[f32], m: f32, dst: &mut [f32]) {
    simd_exp::exp_shifted(src, m, dst);
    sum.add_map(&dst[..src.len()], |e| e as f64);
}

/// The elements of a row of `e^(x − m)` summed in f64 in the lane order.
#[inline(always)]
fn exp_sum(e: &[f32]) -> f64 {
    sum_map(e, |v| v as f64)
}

/// [`cross_entropy`] of `src` (`rows × v`) and `t` into `loss` (one element)
/// and, when given, `grad` (`rows × v`); `losses` is scratch of `rows` elements.
pub(crate) fn cross_entropy_into(
    src: &[f32],
    t: &[f32],
    (rows, v): (usize, usize),
    loss: &mut [f32],
    grad: Option<&mut [f32]>,
    losses: &mut [f64],
) {
    assert_eq!(
        t.len(),
        rows,
        "cross_entropy: {} targets for {rows} rows",
        t.len()
    );
    let scale = 1.0 / rows.max(1) as f32;
    let par = src.len() >= PAR_THRESHOLD;
    let row_loss = |r: usize, grad: Option<&mut [f32]>| -> f64 {
        vectorised(
            #[inline(always)]
            || {
                let xr = &src[r * v..(r + 1) * v];
                let m = row_max(xr);
                let target = t[r] as usize;
                let sum: f64 = match grad {
                    Some(g) => {
                        let mut s = LaneSum::ZERO;
                        exp_shifted_sum(&mut s, xr, m, g);
                        let s = s.total();
                        let k = (1.0 / s) as f32 * scale;
                        g.iter_mut().for_each(|d| *d *= k);
                        g[target] -= scale;
                        s
                    }
                    None => {
                        // Pieces of 256 (a multiple of the lanes): the same sum.
                        let (mut s, mut buf) = (LaneSum::ZERO, [0.0f32; 256]);
                        for c in xr.chunks(buf.len()) {
                            exp_shifted_sum(&mut s, c, m, &mut buf[..c.len()]);
                        }
                        s.total()
                    }
                };
                m as f64 + math::log(sum) - xr[target] as f64
            },
        )
    };
    match grad {
        Some(g) => {
            let mut unit = no_side(rows);
            map_rows_with(g, rows, v, par, losses, &mut unit, |r, o, l, _| {
                l[0] = row_loss(r, Some(o))
            });
        }
        None if par => losses
            .par_iter_mut()
            .enumerate()
            .for_each(|(r, l)| *l = row_loss(r, None)),
        None => losses
            .iter_mut()
            .enumerate()
            .for_each(|(r, l)| *l = row_loss(r, None)),
    }
    let total = losses.iter().sum::<f64>() / rows.max(1) as f64;
    loss[0] = total as f32;
}

/// `(rows, T, S)` of attention scores of `shape` (`[.., T, S]`; a vector is one
/// row with T = 1). Panics for a scalar, and for rank < 2 when `causal`.
pub(crate) fn score_dims(shape: &[usize], causal: bool) -> (usize, usize, usize) {
    let r = shape.len();
    assert!(
        r >= 1 && (!causal || r >= 2),
        "masked_softmax: scores {shape:?} have too low a rank"
    );
    let t = if r >= 2 { shape[r - 2] } else { 1 };
    (shape[..r - 1].iter().product(), t, shape[r - 1])
}

/// How many leading entries of row `row` of `(rows, T, S)` scores are kept:
/// all when not `causal`, else those with column <= the row's index in its plane.
#[inline]
fn kept_columns(row: usize, t: usize, s: usize, causal: bool) -> usize {
    if causal {
        (row % t + 1).min(s)
    } else {
        s
    }
}

/// Softmax over the last axis of `x / divisor` (`x: [.., T, S]`), with the
/// entries of column > row replaced by [`CAUSAL_FILL`] first when `causal`, in
/// one pass per row. Same bits as dividing, masking (`v·(1 − m) + m·fill`, so a
/// masked entry that is not finite gives NaN) and then [`softmax`]: the masked
/// entries take part in the row maximum; their exponentials, exactly 0
/// whenever `CAUSAL_FILL − max` underflows, are skipped then.
pub(crate) fn masked_softmax(x: &Tensor, divisor: f32, causal: bool) -> Tensor {
    let dims = score_dims(x.shape(), causal);
    let mut out = pool::scratch(x.numel());
    masked_softmax_into(x.host(), dims, divisor, causal, &mut out);
    out.into_tensor(x.shape().to_vec())
}

/// [`masked_softmax`] of `src` viewed as `(rows, T, S)` ([`score_dims`]) into `out`.
pub(crate) fn masked_softmax_into(
    src: &[f32],
    (rows, t, s): (usize, usize, usize),
    divisor: f32,
    causal: bool,
    out: &mut [f32],
) {
    if src.is_empty() {
        return;
    }
    map_rows(out, rows, s, src.len() >= PAR_THRESHOLD, |row, o| {
        vectorised(
            #[inline(always)]
            || {
                let xr = &src[row * s..(row + 1) * s];
                let kept = kept_columns(row, t, s, causal);
                for (d, &v) in o[..kept].iter_mut().zip(xr) {
                    *d = v / divisor;
                }
                // The composed mask `v·0 + fill` (NaN where v is not finite).
                let mut finite = true;
                for (d, &v) in o[kept..].iter_mut().zip(&xr[kept..]) {
                    *d = (v / divisor) * 0.0 + CAUSAL_FILL;
                    finite &= !d.is_nan();
                }
                let m = row_max(o);
                // exp(CAUSAL_FILL − m) is exactly 0 when the argument is below −200.
                let live = if finite && CAUSAL_FILL - m < -200.0 {
                    kept
                } else {
                    s
                };
                simd_exp::exp_shifted_in_place(&mut o[..live], m);
                let sum = exp_sum(&o[..live]);
                o[live..].fill(0.0);
                let inv = (1.0 / sum) as f32;
                o.iter_mut().for_each(|d| *d *= inv);
            },
        )
    });
}

/// Gradient of [`masked_softmax`]: `y·(dy − Σ dy·y)` over the last axis, times
/// 0 at the masked entries, divided by `divisor`; the same per-element
/// operations and sum order as the composed `softmax_backward`, mask and divide.
pub(crate) fn masked_softmax_backward(
    y: &Tensor,
    dy: &Tensor,
    divisor: f32,
    causal: bool,
) -> Tensor {
    assert_eq!(
        y.shape(),
        dy.shape(),
        "masked_softmax_backward: y and dy shapes differ"
    );
    let dims = score_dims(y.shape(), causal);
    let mut out = pool::scratch(y.numel());
    masked_softmax_backward_into(y.host(), dy.host(), dims, divisor, causal, &mut out);
    out.into_tensor(y.shape().to_vec())
}

/// [`masked_softmax_backward`] of `ys`, `gs` viewed as `(rows, T, S)` into `out`.
pub(crate) fn masked_softmax_backward_into(
    ys: &[f32],
    gs: &[f32],
    (rows, t, s): (usize, usize, usize),
    divisor: f32,
    causal: bool,
    out: &mut [f32],
) {
    if ys.is_empty() {
        return;
    }
    map_rows(out, rows, s, ys.len() >= PAR_THRESHOLD, |row, o| {
        vectorised(
            #[inline(always)]
            || {
                let (yr, gr) = (&ys[row * s..(row + 1) * s], &gs[row * s..(row + 1) * s]);
                let dot = sum_map2(yr, gr, |a, b| a as f64 * b as f64) as f32;
                let kept = kept_columns(row, t, s, causal);
                for (j, ((d, &yv), &gv)) in o.iter_mut().zip(yr).zip(gr).enumerate() {
                    let v = yv * (gv - dot);
                    *d = if j < kept { v } else { v * 0.0 } / divisor;
                }
            },
        )
    });
}
