//! RMS norm and layer norm over the last axis, forward and backward. Row sums
//! are in f64, in the lane order of `cpu/lane_sum.rs`.

use super::{map_rows, map_rows_with, no_side};
use crate::cpu::isa::vectorised;
use crate::cpu::lane_sum::{sum_map, sum_map2};
use crate::cpu::{pool, PAR_THRESHOLD};
use crate::shape::rows_of;
use crate::tensor::Tensor;

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
            vectorised(
                #[inline(always)]
                || {
                    let xr = &src[r * d..(r + 1) * d];
                    let ms = sum_map(xr, |v| v as f64 * v as f64) / d.max(1) as f64;
                    let k = (1.0 / (ms + eps as f64).sqrt()) as f32;
                    for (a, &v) in o.iter_mut().zip(xr) {
                        *a = v * k;
                    }
                    inv[0] = k;
                },
            )
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
        vectorised(
            #[inline(always)]
            || {
                let (xr, gr) = (&src[r * d..(r + 1) * d], &g[r * d..(r + 1) * d]);
                let ri = inv[r];
                let dot = sum_map2(xr, gr, |a, b| a as f64 * b as f64);
                let k = (ri as f64).powi(3) * dot / d.max(1) as f64;
                let k = k as f32;
                for ((a, &xv), &gv) in o.iter_mut().zip(xr).zip(gr) {
                    *a = ri * gv - k * xv;
                }
            },
        )
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
            vectorised(
                #[inline(always)]
                || {
                    let xr = &src[r * d..(r + 1) * d];
                    let n = d.max(1) as f64;
                    let mu = sum_map(xr, |v| v as f64) / n;
                    let var = sum_map(xr, |v| (v as f64 - mu).powi(2)) / n;
                    let s = 1.0 / (var + eps as f64).sqrt();
                    for (a, &v) in o.iter_mut().zip(xr) {
                        *a = ((v as f64 - mu) * s) as f32;
                    }
                    mean[0] = mu as f32;
                    inv[0] = s as f32;
                },
            )
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
        vectorised(
            #[inline(always)]
            || {
                let (xr, gr) = (&src[r * d..(r + 1) * d], &g[r * d..(r + 1) * d]);
                let (m, s) = (mu[r], inv[r]);
                let n = d.max(1) as f64;
                let sg = sum_map(gr, |gv| gv as f64);
                let sgx = sum_map2(xr, gr, |xv, gv| gv as f64 * ((xv - m) * s) as f64);
                let (mg, mgx) = ((sg / n) as f32, (sgx / n) as f32);
                for ((a, &xv), &gv) in o.iter_mut().zip(xr).zip(gr) {
                    *a = s * (gv - mg - (xv - m) * s * mgx);
                }
            },
        )
    });
}
