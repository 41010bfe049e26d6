//! Fused neural-network kernels: softmax and log-softmax (and backward), fused
//! cross-entropy forward and backward, RMS and layer norm (and backward),
//! embedding gather / scatter-add, and the fused Adam/AdamW update.
//!
//! Row kernels subtract the row maximum before exponentiating (numerically
//! stable) and accumulate sums in f64.

use super::{pool, PAR_CHUNK, PAR_THRESHOLD};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Runs `f(row_index, out_row)` for every `d`-element row of `out` (in parallel
/// when `par`), collecting what each call returns in row order. `rows` is the
/// row count (needed when `d` is 0).
fn map_rows<S, F>(out: &mut [f32], rows: usize, d: usize, par: bool, f: F) -> Vec<S>
where
    S: Send,
    F: Fn(usize, &mut [f32]) -> S + Sync + Send,
{
    if d == 0 {
        return (0..rows).map(|r| f(r, &mut [])).collect();
    }
    if par {
        out.par_chunks_mut(d)
            .with_min_len((PAR_CHUNK / d).max(1))
            .enumerate()
            .map(|(r, o)| f(r, o))
            .collect()
    } else {
        out.chunks_mut(d)
            .enumerate()
            .map(|(r, o)| f(r, o))
            .collect()
    }
}

/// `(outer, n, inner)` of `shape` around `axis`.
fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
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

/// Softmax (or log-softmax when `log`) of `x` along `axis`.
pub(crate) fn softmax(x: &Tensor, axis: usize, log: bool) -> Tensor {
    let (outer, n, inner) = split_at_axis(x.shape(), axis);
    let src = x.host();
    let mut out = pool::scratch(src.len());
    if src.is_empty() {
        return out.into_tensor(x.shape().to_vec());
    }
    let par = src.len() >= PAR_THRESHOLD;
    if inner == 1 {
        map_rows(&mut out, outer, n, par, |r, o| {
            let xr = &src[r * n..(r + 1) * n];
            let m = row_max(xr);
            let mut sum = 0.0f64;
            for (d, &v) in o.iter_mut().zip(xr) {
                let e = (v - m).exp();
                *d = e;
                sum += e as f64;
            }
            if log {
                let shift = m + (sum.ln() as f32);
                for (d, &v) in o.iter_mut().zip(xr) {
                    *d = v - shift;
                }
            } else {
                let inv = (1.0 / sum) as f32;
                o.iter_mut().for_each(|d| *d *= inv);
            }
        });
    } else {
        map_rows(&mut out, outer, n * inner, par, |o, plane| {
            let xp = &src[o * n * inner..(o + 1) * n * inner];
            let mut m = vec![f32::NEG_INFINITY; inner];
            for xr in xp.chunks(inner) {
                for (a, &v) in m.iter_mut().zip(xr) {
                    *a = a.max(v);
                }
            }
            let mut sum = vec![0.0f64; inner];
            for (orow, xr) in plane.chunks_mut(inner).zip(xp.chunks(inner)) {
                for (((d, &v), &mx), s) in orow.iter_mut().zip(xr).zip(&m).zip(sum.iter_mut()) {
                    let e = (v - mx).exp();
                    *d = e;
                    *s += e as f64;
                }
            }
            if log {
                let shift: Vec<f32> = m
                    .iter()
                    .zip(&sum)
                    .map(|(&mx, &s)| mx + s.ln() as f32)
                    .collect();
                for (orow, xr) in plane.chunks_mut(inner).zip(xp.chunks(inner)) {
                    for ((d, &v), &sh) in orow.iter_mut().zip(xr).zip(&shift) {
                        *d = v - sh;
                    }
                }
            } else {
                let inv: Vec<f32> = sum.iter().map(|&s| (1.0 / s) as f32).collect();
                for orow in plane.chunks_mut(inner) {
                    for (d, &iv) in orow.iter_mut().zip(&inv) {
                        *d *= iv;
                    }
                }
            }
        });
    }
    out.into_tensor(x.shape().to_vec())
}

/// dx = y · (dy − Σ(dy·y)) along `axis`, for y = softmax(x).
pub(crate) fn softmax_backward(y: &Tensor, dy: &Tensor, axis: usize) -> Tensor {
    assert_eq!(
        y.shape(),
        dy.shape(),
        "softmax_backward: y and dy shapes differ"
    );
    let (outer, n, inner) = split_at_axis(y.shape(), axis);
    let (ys, gs) = (y.host(), dy.host());
    let mut out = pool::scratch(ys.len());
    if ys.is_empty() {
        return out.into_tensor(y.shape().to_vec());
    }
    let par = ys.len() >= PAR_THRESHOLD;
    map_rows(&mut out, outer, n * inner, par, |o, plane| {
        let range = o * n * inner..(o + 1) * n * inner;
        let (yp, gp) = (&ys[range.clone()], &gs[range]);
        if inner == 1 {
            let dot: f64 = yp.iter().zip(gp).map(|(&a, &b)| a as f64 * b as f64).sum();
            let dot = dot as f32;
            for ((d, &yv), &gv) in plane.iter_mut().zip(yp).zip(gp) {
                *d = yv * (gv - dot);
            }
        } else {
            let mut dot = vec![0.0f64; inner];
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
                for (((d, &yv), &gv), &s) in orow.iter_mut().zip(yr).zip(gr).zip(&dot) {
                    *d = yv * (gv - s as f32);
                }
            }
        }
    });
    out.into_tensor(y.shape().to_vec())
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
    let shape = logits.shape();
    let v = *shape
        .last()
        .expect("cross_entropy: logits must have rank >= 1");
    let rows: usize = shape[..shape.len() - 1].iter().product();
    let t = targets.host();
    assert_eq!(
        t.len(),
        rows,
        "cross_entropy: {} targets for {rows} rows",
        t.len()
    );
    let src = logits.host();
    let scale = 1.0 / rows.max(1) as f32;
    let par = src.len() >= PAR_THRESHOLD;
    let row_loss = |r: usize, grad: Option<&mut [f32]>| -> f64 {
        let xr = &src[r * v..(r + 1) * v];
        let m = row_max(xr);
        let target = t[r] as usize;
        let sum: f64 = match grad {
            Some(g) => {
                let mut s = 0.0f64;
                for (d, &x) in g.iter_mut().zip(xr) {
                    let e = (x - m).exp();
                    *d = e;
                    s += e as f64;
                }
                let k = (1.0 / s) as f32 * scale;
                g.iter_mut().for_each(|d| *d *= k);
                g[target] -= scale;
                s
            }
            None => xr.iter().map(|&x| (x - m).exp() as f64).sum(),
        };
        m as f64 + sum.ln() - xr[target] as f64
    };
    let (losses, grad): (Vec<f64>, Option<Tensor>) = if want_grad {
        let mut g = pool::scratch(src.len());
        let l = map_rows(&mut g, rows, v, par, |r, o| row_loss(r, Some(o)));
        (l, Some(g.into_tensor(shape.to_vec())))
    } else if par {
        (
            (0..rows)
                .into_par_iter()
                .map(|r| row_loss(r, None))
                .collect(),
            None,
        )
    } else {
        ((0..rows).map(|r| row_loss(r, None)).collect(), None)
    };
    let loss = losses.iter().sum::<f64>() / rows.max(1) as f64;
    (Tensor::scalar(loss as f32), grad)
}

/// Rows of `table` `[V, d]` selected by integer-valued `ids` → `[ids.shape..., d]`.
pub(crate) fn gather_rows(table: &Tensor, ids: &Tensor) -> Tensor {
    assert_eq!(table.rank(), 2, "gather_rows: table must be [V, d]");
    let d = table.shape()[1];
    let tab = table.host();
    let idx = ids.host();
    let mut out = pool::scratch(idx.len() * d);
    let par = out.len() >= PAR_THRESHOLD;
    map_rows(&mut out, idx.len(), d, par, |i, o| {
        let r = idx[i] as usize;
        o.copy_from_slice(&tab[r * d..(r + 1) * d]);
    });
    let mut shape = ids.shape().to_vec();
    shape.push(d);
    out.into_tensor(shape)
}

/// `[vocab, d]` zeros with `src` row i added to row `ids[i]`. Rows are summed in
/// index order whatever the thread count (each thread owns a range of output
/// rows and scans every id), so the result is deterministic.
pub(crate) fn scatter_add_rows(ids: &Tensor, src: &Tensor, vocab: usize) -> Tensor {
    let idx = ids.host();
    let s = src.host();
    let d = *src
        .shape()
        .last()
        .expect("scatter_add_rows: src must have rank >= 1");
    assert_eq!(
        s.len(),
        idx.len() * d,
        "scatter_add_rows: src is not [ids..., d]"
    );
    let mut out = pool::zeroed(vocab * d);
    if d == 0 || vocab == 0 {
        return out.into_tensor(vec![vocab, d]);
    }
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
        add_range(0, &mut out);
    }
    out.into_tensor(vec![vocab, d])
}

/// `(rows, d)` of a tensor normalised over its last axis (a scalar is one row of 1).
fn rows_of(x: &Tensor) -> (usize, usize) {
    let shape = x.shape();
    match shape.last() {
        None => (1, 1),
        Some(&d) => (shape[..shape.len() - 1].iter().product(), d),
    }
}

/// y = x / √(mean(x²) + eps) over the last axis; returns (y, inv_rms `[rows]`).
pub(crate) fn rms_norm(x: &Tensor, eps: f32) -> (Tensor, Tensor) {
    let (rows, d) = rows_of(x);
    let src = x.host();
    let mut y = pool::scratch(src.len());
    let inv = map_rows(&mut y, rows, d, src.len() >= PAR_THRESHOLD, |r, o| {
        let xr = &src[r * d..(r + 1) * d];
        let ms = xr.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d.max(1) as f64;
        let inv = (1.0 / (ms + eps as f64).sqrt()) as f32;
        for (a, &v) in o.iter_mut().zip(xr) {
            *a = v * inv;
        }
        inv
    });
    (
        y.into_tensor(x.shape().to_vec()),
        Tensor::from_vec(vec![rows], inv),
    )
}

/// Gradient of [`rms_norm`]: dx = r·dy − r³·x·Σ(dy·x)/d, r = inv_rms of the row.
pub(crate) fn rms_norm_backward(x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Tensor {
    let (rows, d) = rows_of(x);
    let (src, g, inv) = (x.host(), dy.host(), inv_rms.host());
    assert_eq!(inv.len(), rows, "rms_norm_backward: inv_rms is not [rows]");
    let mut dx = pool::scratch(src.len());
    map_rows(&mut dx, rows, d, src.len() >= PAR_THRESHOLD, |r, o| {
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
    dx.into_tensor(x.shape().to_vec())
}

/// y = (x − μ)/√(var + eps) over the last axis (biased variance, no affine);
/// returns (y, mean `[rows]`, inv_std `[rows]`).
pub(crate) fn layer_norm(x: &Tensor, eps: f32) -> (Tensor, Tensor, Tensor) {
    let (rows, d) = rows_of(x);
    let src = x.host();
    let mut y = pool::scratch(src.len());
    let stats = map_rows(&mut y, rows, d, src.len() >= PAR_THRESHOLD, |r, o| {
        let xr = &src[r * d..(r + 1) * d];
        let n = d.max(1) as f64;
        let mu = xr.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = xr.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n;
        let inv = 1.0 / (var + eps as f64).sqrt();
        for (a, &v) in o.iter_mut().zip(xr) {
            *a = ((v as f64 - mu) * inv) as f32;
        }
        (mu as f32, inv as f32)
    });
    let (mean, inv): (Vec<f32>, Vec<f32>) = stats.into_iter().unzip();
    (
        y.into_tensor(x.shape().to_vec()),
        Tensor::from_vec(vec![rows], mean),
        Tensor::from_vec(vec![rows], inv),
    )
}

/// Gradient of [`layer_norm`]: dx = s·(dy − mean(dy) − x̂·mean(dy·x̂)),
/// x̂ = (x − μ)·s, s = inv_std of the row.
pub(crate) fn layer_norm_backward(
    x: &Tensor,
    mean: &Tensor,
    inv_std: &Tensor,
    dy: &Tensor,
) -> Tensor {
    let (rows, d) = rows_of(x);
    let (src, g, mu, inv) = (x.host(), dy.host(), mean.host(), inv_std.host());
    assert!(
        mu.len() == rows && inv.len() == rows,
        "layer_norm_backward: stats are not [rows]"
    );
    let mut dx = pool::scratch(src.len());
    map_rows(&mut dx, rows, d, src.len() >= PAR_THRESHOLD, |r, o| {
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
    dx.into_tensor(x.shape().to_vec())
}

/// Hyper-parameters of one Adam/AdamW step (see [`adam_update`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamParams {
    pub lr: f32,
    pub b1: f32,
    pub b2: f32,
    pub eps: f32,
    pub bc1: f32,
    pub bc2: f32,
    pub wd: f32,
}

/// One fused Adam/AdamW step in place: m = b1·m + (1−b1)·g; v = b2·v + (1−b2)·g²;
/// p −= lr·((m/bc1)/(√(v/bc2) + eps) + wd·p).
pub(crate) fn adam_update(
    p: &mut Tensor,
    g: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
    h: AdamParams,
) {
    let n = p.numel();
    assert!(
        g.numel() == n && m.numel() == n && v.numel() == n,
        "adam_update: p, g, m and v sizes differ"
    );
    let gs = g.host();
    let (ps, ms, vs) = (p.host_mut(), m.host_mut(), v.host_mut());
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
