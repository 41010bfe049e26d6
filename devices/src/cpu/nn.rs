//! Fused neural-network kernels: softmax and log-softmax (and backward), fused
//! cross-entropy forward and backward, RMS and layer norm (and backward),
//! embedding gather / scatter-add, and the fused Adam/AdamW update.
//!
//! Row kernels subtract the row maximum before exponentiating (numerically
//! stable) and accumulate sums in f64.

use super::{pool, PAR_CHUNK, PAR_THRESHOLD};
use crate::backend::AdamConstants;
use crate::backend::{UnaryOp, CAUSAL_FILL};
use crate::math;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Runs `f(row, out_row, a_row, b_row)` for every `d`-element row of `out` (in
/// parallel when `par`), where `a_row` and `b_row` are the row's pieces of the
/// per-row side outputs or scratch `a` and `b` (`a.len() / rows` and
/// `b.len() / rows` elements each; pass [`no_side`] for none). `rows` is the
/// row count (needed when `d` is 0).
#[allow(clippy::too_many_arguments)]
fn map_rows_with<A, B, F>(
    out: &mut [f32],
    rows: usize,
    d: usize,
    par: bool,
    a: &mut [A],
    b: &mut [B],
    f: F,
) where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [f32], &mut [A], &mut [B]) + Sync + Send,
{
    if rows == 0 {
        return;
    }
    let (wa, wb) = (a.len() / rows, b.len() / rows);
    assert!(
        wa > 0 && wb > 0 && a.len() == rows * wa && b.len() == rows * wb,
        "map_rows: side outputs of {} and {} elements for {rows} rows",
        a.len(),
        b.len()
    );
    if d == 0 {
        for (r, (ar, br)) in a.chunks_mut(wa).zip(b.chunks_mut(wb)).enumerate() {
            f(r, &mut [], ar, br);
        }
    } else if par {
        out.par_chunks_mut(d)
            .zip(a.par_chunks_mut(wa))
            .zip(b.par_chunks_mut(wb))
            .with_min_len((PAR_CHUNK / d).max(1))
            .enumerate()
            .for_each(|(r, ((o, ar), br))| f(r, o, ar, br));
    } else {
        for (r, ((o, ar), br)) in out
            .chunks_mut(d)
            .zip(a.chunks_mut(wa))
            .zip(b.chunks_mut(wb))
            .enumerate()
        {
            f(r, o, ar, br);
        }
    }
}

/// No per-row side output for [`map_rows_with`]: one `()` per row (no memory).
fn no_side(rows: usize) -> Vec<()> {
    vec![(); rows]
}

/// Runs `f(row_index, out_row)` for every `d`-element row of `out` (in parallel
/// when `par`). `rows` is the row count (needed when `d` is 0).
fn map_rows<F>(out: &mut [f32], rows: usize, d: usize, par: bool, f: F)
where
    F: Fn(usize, &mut [f32]) + Sync + Send,
{
    map_rows_with(
        out,
        rows,
        d,
        par,
        &mut no_side(rows),
        &mut no_side(rows),
        |r, o, _, _| f(r, o),
    );
}

/// `(outer, n, inner)` of `shape` around `axis`.
pub(crate) fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    assert!(
        axis < shape.len(),
        "axis {axis} out of range for shape {shape:?}"
    );
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

/// Largest element, ignoring NaN (a NaN still poisons the sums that follow).
#[inline]
fn row_max(x: &[f32]) -> f32 {
    x.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

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
            let xr = &src[r * n..(r + 1) * n];
            let m = row_max(xr);
            let sum = exp_shifted_sum(0.0, xr, m, o);
            if log {
                let shift = m + (math::log(sum) as f32);
                for (d, &v) in o.iter_mut().zip(xr) {
                    *d = v - shift;
                }
            } else {
                let inv = (1.0 / sum) as f32;
                o.iter_mut().for_each(|d| *d *= inv);
            }
        });
    } else {
        map_rows_with(out, outer, n * inner, par, m, sum, |o, plane, m, sum| {
            let xp = &src[o * n * inner..(o + 1) * n * inner];
            m.fill(f32::NEG_INFINITY);
            for xr in xp.chunks(inner) {
                for (a, &v) in m.iter_mut().zip(xr) {
                    *a = a.max(v);
                }
            }
            sum.fill(0.0);
            for (orow, xr) in plane.chunks_mut(inner).zip(xp.chunks(inner)) {
                for (((d, &v), &mx), s) in orow.iter_mut().zip(xr).zip(m.iter()).zip(sum.iter_mut())
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
        let range = o * n * inner..(o + 1) * n * inner;
        let (yp, gp) = (&ys[range.clone()], &gs[range]);
        if inner == 1 {
            let dot: f64 = yp.iter().zip(gp).map(|(&a, &b)| a as f64 * b as f64).sum();
            let dot = dot as f32;
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
                for (((d, &yv), &gv), &s) in orow.iter_mut().zip(yr).zip(gr).zip(dot.iter()) {
                    *d = yv * (gv - s as f32);
                }
            }
        }
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

/// [`cross_entropy`] of `src` (`rows × v`) and `t` into `loss` (one element)
/// `dst[i] = e^(src[i] − m)`, then `start` plus the elements of `dst` in f64,
/// one at a time in index order (two passes, so that the first one
/// vectorises; the same bits as one).
fn exp_shifted_sum(start: f64, src: &[f32], m: f32, dst: &mut [f32]) -> f64 {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = math::expf(v - m);
    }
    sum_in_order(start, &dst[..src.len()])
}

/// `start` plus the elements of `x` in f64, one at a time in index order.
fn sum_in_order(start: f64, x: &[f32]) -> f64 {
    x.iter().fold(start, |s, &e| s + e as f64)
}

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
        let xr = &src[r * v..(r + 1) * v];
        let m = row_max(xr);
        let target = t[r] as usize;
        let sum: f64 = match grad {
            Some(g) => {
                let s = exp_shifted_sum(0.0, xr, m, g);
                let k = (1.0 / s) as f32 * scale;
                g.iter_mut().for_each(|d| *d *= k);
                g[target] -= scale;
                s
            }
            None => {
                let mut buf = [0.0f32; 256];
                xr.chunks(buf.len()).fold(0.0f64, |s, c| {
                    let b = &mut buf[..c.len()];
                    exp_shifted_sum(s, c, m, b)
                })
            }
        };
        m as f64 + math::log(sum) - xr[target] as f64
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

/// Rows of `table` `[V, d]` selected by integer-valued `ids` → `[ids.shape..., d]`.
pub(crate) fn gather_rows(table: &Tensor, ids: &Tensor) -> Tensor {
    assert_eq!(table.rank(), 2, "gather_rows: table must be [V, d]");
    let d = table.shape()[1];
    let mut out = pool::scratch(ids.numel() * d);
    gather_rows_into(table.host(), d, ids.host(), &mut out);
    let mut shape = ids.shape().to_vec();
    shape.push(d);
    out.into_tensor(shape)
}

/// [`gather_rows`] of `tab` (rows of `d`) by `idx` into `out`.
pub(crate) fn gather_rows_into(tab: &[f32], d: usize, idx: &[f32], out: &mut [f32]) {
    let par = out.len() >= PAR_THRESHOLD;
    map_rows(out, idx.len(), d, par, |i, o| {
        let r = idx[i] as usize;
        o.copy_from_slice(&tab[r * d..(r + 1) * d]);
    });
}

/// `[vocab, d]` zeros with `src` row i added to row `ids[i]`. Rows are summed in
/// index order whatever the thread count (each thread owns a range of output
/// rows and scans every id), so the result is deterministic.
pub(crate) fn scatter_add_rows(ids: &Tensor, src: &Tensor, vocab: usize) -> Tensor {
    let d = *src
        .shape()
        .last()
        .expect("scatter_add_rows: src must have rank >= 1");
    let mut out = pool::scratch(vocab * d);
    scatter_add_rows_into(ids.host(), src.host(), d, &mut out);
    out.into_tensor(vec![vocab, d])
}

/// [`scatter_add_rows`] of `s` (rows of `d`) by `idx` into `out` (`vocab × d`,
/// overwritten).
pub(crate) fn scatter_add_rows_into(idx: &[f32], s: &[f32], d: usize, out: &mut [f32]) {
    assert_eq!(
        s.len(),
        idx.len() * d,
        "scatter_add_rows: src is not [ids..., d]"
    );
    out.fill(0.0);
    if d == 0 || out.is_empty() {
        return;
    }
    let vocab = out.len() / d;
    let add_range = |first_row: usize, dst: &mut [f32]| {
        let last_row = first_row + dst.len() / d;
        for (i, &id) in idx.iter().enumerate() {
            let r = id as usize;
            if r >= first_row && r < last_row {
                let o = &mut dst[(r - first_row) * d..(r - first_row + 1) * d];
                for (a, &b) in o.iter_mut().zip(&s[i * d..(i + 1) * d]) {
                    *a += b;
                }
            }
        }
    };
    if s.len() >= PAR_THRESHOLD {
        let tasks = rayon::current_num_threads() * 4;
        let rows_per = vocab.div_ceil(tasks).max(1);
        out.par_chunks_mut(rows_per * d)
            .enumerate()
            .for_each(|(c, dst)| add_range(c * rows_per, dst));
    } else {
        add_range(0, out);
    }
}

/// `(rows, d)` of an array of `shape` normalised over its last axis (a scalar
/// is one row of 1).
pub(crate) fn rows_of(shape: &[usize]) -> (usize, usize) {
    match shape.last() {
        None => (1, 1),
        Some(&d) => (shape[..shape.len() - 1].iter().product(), d),
    }
}

/// y = x / √(mean(x²) + eps) over the last axis; returns (y, inv_rms `[rows]`).
pub(crate) fn rms_norm(x: &Tensor, eps: f32) -> (Tensor, Tensor) {
    let (rows, d) = rows_of(x.shape());
    let mut y = pool::scratch(x.numel());
    let mut inv = vec![0.0f32; rows];
    rms_norm_into(x.host(), (rows, d), eps, &mut y, &mut inv);
    (
        y.into_tensor(x.shape().to_vec()),
        Tensor::from_vec(vec![rows], inv),
    )
}

/// [`rms_norm`] of `src` (`rows × d`) into `y` and `inv` (`rows`).
pub(crate) fn rms_norm_into(
    src: &[f32],
    (rows, d): (usize, usize),
    eps: f32,
    y: &mut [f32],
    inv: &mut [f32],
) {
    let mut unit = no_side(rows);
    map_rows_with(
        y,
        rows,
        d,
        src.len() >= PAR_THRESHOLD,
        inv,
        &mut unit,
        |r, o, inv, _| {
            let xr = &src[r * d..(r + 1) * d];
            let ms = xr.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d.max(1) as f64;
            let k = (1.0 / (ms + eps as f64).sqrt()) as f32;
            for (a, &v) in o.iter_mut().zip(xr) {
                *a = v * k;
            }
            inv[0] = k;
        },
    );
}

/// Gradient of [`rms_norm`]: dx = r·dy − r³·x·Σ(dy·x)/d, r = inv_rms of the row.
pub(crate) fn rms_norm_backward(x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Tensor {
    let dims = rows_of(x.shape());
    let mut dx = pool::scratch(x.numel());
    rms_norm_backward_into(x.host(), inv_rms.host(), dy.host(), dims, &mut dx);
    dx.into_tensor(x.shape().to_vec())
}

/// [`rms_norm_backward`] on slices (`rows × d`) into `dx`.
pub(crate) fn rms_norm_backward_into(
    src: &[f32],
    inv: &[f32],
    g: &[f32],
    (rows, d): (usize, usize),
    dx: &mut [f32],
) {
    assert_eq!(inv.len(), rows, "rms_norm_backward: inv_rms is not [rows]");
    map_rows(dx, rows, d, src.len() >= PAR_THRESHOLD, |r, o| {
        let (xr, gr) = (&src[r * d..(r + 1) * d], &g[r * d..(r + 1) * d]);
        let ri = inv[r];
        let dot = xr
            .iter()
            .zip(gr)
            .map(|(&a, &b)| a as f64 * b as f64)
            .sum::<f64>();
        let k = (ri as f64).powi(3) * dot / d.max(1) as f64;
        let k = k as f32;
        for ((a, &xv), &gv) in o.iter_mut().zip(xr).zip(gr) {
            *a = ri * gv - k * xv;
        }
    });
}

/// y = (x − μ)/√(var + eps) over the last axis (biased variance, no affine);
/// returns (y, mean `[rows]`, inv_std `[rows]`).
pub(crate) fn layer_norm(x: &Tensor, eps: f32) -> (Tensor, Tensor, Tensor) {
    let (rows, d) = rows_of(x.shape());
    let mut y = pool::scratch(x.numel());
    let (mut mean, mut inv) = (vec![0.0f32; rows], vec![0.0f32; rows]);
    layer_norm_into(x.host(), (rows, d), eps, &mut y, &mut mean, &mut inv);
    (
        y.into_tensor(x.shape().to_vec()),
        Tensor::from_vec(vec![rows], mean),
        Tensor::from_vec(vec![rows], inv),
    )
}

/// [`layer_norm`] of `src` (`rows × d`) into `y`, `mean` and `inv` (`rows` each).
pub(crate) fn layer_norm_into(
    src: &[f32],
    (rows, d): (usize, usize),
    eps: f32,
    y: &mut [f32],
    mean: &mut [f32],
    inv: &mut [f32],
) {
    map_rows_with(
        y,
        rows,
        d,
        src.len() >= PAR_THRESHOLD,
        mean,
        inv,
        |r, o, mean, inv| {
            let xr = &src[r * d..(r + 1) * d];
            let n = d.max(1) as f64;
            let mu = xr.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = xr.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n;
            let s = 1.0 / (var + eps as f64).sqrt();
            for (a, &v) in o.iter_mut().zip(xr) {
                *a = ((v as f64 - mu) * s) as f32;
            }
            mean[0] = mu as f32;
            inv[0] = s as f32;
        },
    );
}

/// Gradient of [`layer_norm`]: dx = s·(dy − mean(dy) − x̂·mean(dy·x̂)),
/// x̂ = (x − μ)·s, s = inv_std of the row.
pub(crate) fn layer_norm_backward(
    x: &Tensor,
    mean: &Tensor,
    inv_std: &Tensor,
    dy: &Tensor,
) -> Tensor {
    let dims = rows_of(x.shape());
    let mut dx = pool::scratch(x.numel());
    layer_norm_backward_into(
        x.host(),
        mean.host(),
        inv_std.host(),
        dy.host(),
        dims,
        &mut dx,
    );
    dx.into_tensor(x.shape().to_vec())
}

/// [`layer_norm_backward`] on slices (`rows × d`) into `dx`.
pub(crate) fn layer_norm_backward_into(
    src: &[f32],
    mu: &[f32],
    inv: &[f32],
    g: &[f32],
    (rows, d): (usize, usize),
    dx: &mut [f32],
) {
    assert!(
        mu.len() == rows && inv.len() == rows,
        "layer_norm_backward: stats are not [rows]"
    );
    map_rows(dx, rows, d, src.len() >= PAR_THRESHOLD, |r, o| {
        let (xr, gr) = (&src[r * d..(r + 1) * d], &g[r * d..(r + 1) * d]);
        let (m, s) = (mu[r], inv[r]);
        let n = d.max(1) as f64;
        let (mut sg, mut sgx) = (0.0f64, 0.0f64);
        for (&xv, &gv) in xr.iter().zip(gr) {
            sg += gv as f64;
            sgx += gv as f64 * ((xv - m) * s) as f64;
        }
        let (mg, mgx) = ((sg / n) as f32, (sgx / n) as f32);
        for ((a, &xv), &gv) in o.iter_mut().zip(xr).zip(gr) {
            *a = s * (gv - mg - (xv - m) * s * mgx);
        }
    });
}

/// One fused Adam/AdamW step in place: m = b1·m + (1−b1)·g; v = b2·v + (1−b2)·g²;
/// p −= lr·((m/bc1)/(√(v/bc2) + eps) + wd·p).
pub(crate) fn adam_update(
    p: &mut Tensor,
    g: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
    h: AdamConstants,
) {
    let n = p.numel();
    assert!(
        g.numel() == n && m.numel() == n && v.numel() == n,
        "adam_update: p, g, m and v sizes differ"
    );
    adam_update_into(p.host_mut(), g.host(), m.host_mut(), v.host_mut(), h);
}

/// [`adam_update`] on slices of one length, in place.
pub(crate) fn adam_update_into(
    ps: &mut [f32],
    gs: &[f32],
    ms: &mut [f32],
    vs: &mut [f32],
    h: AdamConstants,
) {
    let n = ps.len();
    assert!(
        gs.len() == n && ms.len() == n && vs.len() == n,
        "adam_update: p, g, m and v sizes differ"
    );
    let (ib1, ib2) = (1.0 / h.bc1, 1.0 / h.bc2);
    let step = |pc: &mut [f32], mc: &mut [f32], vc: &mut [f32], gc: &[f32]| {
        for (((pp, mm), vv), &gg) in pc.iter_mut().zip(mc.iter_mut()).zip(vc.iter_mut()).zip(gc) {
            *mm = h.b1 * *mm + (1.0 - h.b1) * gg;
            *vv = h.b2 * *vv + (1.0 - h.b2) * gg * gg;
            let upd = (*mm * ib1) / ((*vv * ib2).sqrt() + h.eps) + h.wd * *pp;
            *pp -= h.lr * upd;
        }
    };
    if n >= PAR_THRESHOLD {
        ps.par_chunks_mut(PAR_CHUNK)
            .zip(ms.par_chunks_mut(PAR_CHUNK))
            .zip(vs.par_chunks_mut(PAR_CHUNK))
            .zip(gs.par_chunks(PAR_CHUNK))
            .for_each(|(((pc, mc), vc), gc)| step(pc, mc, vc, gc));
    } else {
        step(ps, ms, vs, gs);
    }
}

/// The dropout mask of [`Backend::dropout_mask`](crate::Backend::dropout_mask)
/// for `n` elements: element i is `1/(1-p)` (as f32) when
/// `(splitmix64(key + i·0x9E3779B97F4A7C15) >> 11)·2⁻⁵³ >= p`, else 0.
pub(crate) fn dropout_mask(shape: &[usize], key: u64, p: f64) -> Tensor {
    let mut out = pool::scratch(crate::tensor::numel_of(shape));
    dropout_mask_into(key, p, &mut out);
    out.into_tensor(shape.to_vec())
}

/// [`dropout_mask`] into `out`.
pub(crate) fn dropout_mask_into(key: u64, p: f64, out: &mut [f32]) {
    const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
    const TWO_POW_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;
    let splitmix64 = |z: u64| {
        let mut z = z.wrapping_add(GOLDEN_GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let scale = (1.0 / (1.0 - p)) as f32;
    super::for_chunks(out, PAR_CHUNK, out.len() >= PAR_THRESHOLD, |s, o| {
        for (i, d) in o.iter_mut().enumerate() {
            let bits =
                splitmix64(key.wrapping_add(((s + i) as u64).wrapping_mul(GOLDEN_GAMMA))) >> 11;
            *d = if bits as f64 * TWO_POW_MINUS_53 >= p {
                scale
            } else {
                0.0
            };
        }
    });
}

/// √(2/π), the GELU tanh-approximation constant (as in the element-wise kernels).
const GELU_C: f32 = 0.797_884_6;
/// The cubic coefficient of the GELU tanh approximation.
const GELU_KAPPA: f32 = 0.044_715;

/// Runs `body` with the scalar form of `op` as a closure, so each activation
/// gets its own monomorphised loop. The closures are those of the element-wise
/// `unary` kernel (a test compares every op bit for bit).
macro_rules! with_unary {
    ($op:expr, |$f:ident| $body:expr) => {{
        use super::elementwise::{gelu, sigmoid};
        use crate::backend::UnaryOp as U;
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
        }
    }};
}

/// Runs `body` with the derivative of `op` as a closure `(x, y, g) -> dx`:
/// the per-element operations of the composed backward (the backend's default
/// `unary_backward`), in the same order, so the results are the same bits.
macro_rules! with_unary_grad {
    ($op:expr, |$f:ident| $body:expr) => {{
        use super::elementwise::sigmoid;
        use crate::backend::UnaryOp as U;
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
    let par = xs.len() >= PAR_THRESHOLD;
    with_unary_grad!(op, |f| super::for_chunks(out, PAR_CHUNK, par, |s, o| {
        let e = s + o.len();
        for (((d, &xv), &yv), &gv) in o.iter_mut().zip(&xs[s..e]).zip(&ys[s..e]).zip(&gs[s..e]) {
            *d = f(xv, yv, gv);
        }
    }));
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

/// [`bias_act`] of rows `xs` (a multiple of `bs.len()` elements) into `out`.
pub(crate) fn bias_act_into(act: UnaryOp, xs: &[f32], bs: &[f32], out: &mut [f32]) {
    let n = bs.len();
    if n == 0 {
        return;
    }
    let par = xs.len() >= PAR_THRESHOLD;
    with_unary!(act, |f| super::for_chunks(
        out,
        super::row_chunk(n),
        par,
        |s, o| {
            let e = s + o.len();
            for (orow, xrow) in o.chunks_mut(n).zip(xs[s..e].chunks(n)) {
                for ((d, &xv), &bv) in orow.iter_mut().zip(xrow).zip(bs) {
                    *d = f(xv + bv);
                }
            }
        }
    ));
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
    let dbias = want_bias.then(|| super::layout::sum_to_shape(&dx, bias.shape()));
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
    let par = xs.len() >= PAR_THRESHOLD;
    with_unary_grad!(act, |f| super::for_chunks(
        dx,
        super::row_chunk(n),
        par,
        |s, o| {
            let e = s + o.len();
            let rows = o
                .chunks_mut(n)
                .zip(xs[s..e].chunks(n))
                .zip(ys[s..e].chunks(n))
                .zip(gs[s..e].chunks(n));
            for (((orow, xrow), yrow), grow) in rows {
                let it = orow.iter_mut().zip(xrow).zip(bs).zip(yrow).zip(grow);
                for ((((d, &xv), &bv), &yv), &gv) in it {
                    *d = f(xv + bv, yv, gv);
                }
            }
        }
    ));
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
        for d in o[..live].iter_mut() {
            *d = math::expf(*d - m);
        }
        let sum = sum_in_order(0.0, &o[..live]);
        o[live..].fill(0.0);
        let inv = (1.0 / sum) as f32;
        o.iter_mut().for_each(|d| *d *= inv);
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
        let (yr, gr) = (&ys[row * s..(row + 1) * s], &gs[row * s..(row + 1) * s]);
        let dot: f64 = yr.iter().zip(gr).map(|(&a, &b)| a as f64 * b as f64).sum();
        let dot = dot as f32;
        let kept = kept_columns(row, t, s, causal);
        for (j, ((d, &yv), &gv)) in o.iter_mut().zip(yr).zip(gr).enumerate() {
            let v = yv * (gv - dot);
            *d = if j < kept { v } else { v * 0.0 } / divisor;
        }
    });
}
