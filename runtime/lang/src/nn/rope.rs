//! Rotary position embedding (LANGUAGE §11.4): the half-split pairing
//! (x_i, x_{i+n/2}) rotated by t·θ_i, θ_i = base^(−2i/n), computed as
//! x·cos + (x·R)·sin with a constant rotation matrix R, so the gradient flows
//! through ordinary products.

use mlpl_devices::math;
use mlpl_devices::BinaryOp;

use super::apply::Forward;
use super::layers::{Rope, RopeScaling};
use crate::eval::ops;
use crate::value::Array;
use mlpl_diag::Diagnostic;

/// The frequencies θ_i, i < n/2, in float64: base^(−2i/n), rescaled as
/// `r.scaling` says.
pub fn frequencies(r: &Rope) -> Vec<f64> {
    let n = r.head_dim;
    (0..n / 2)
        .map(|i| {
            let theta = math::pow(r.base, -2.0 * i as f64 / n as f64);
            match r.scaling {
                RopeScaling::Plain => theta,
                RopeScaling::Llama3 {
                    factor,
                    low,
                    high,
                    original,
                } => {
                    let wavelen = 2.0 * std::f64::consts::PI / theta;
                    if wavelen < original / high {
                        theta
                    } else if wavelen > original / low {
                        theta / factor
                    } else {
                        let smooth = (original / wavelen - low) / (high - low);
                        (1.0 - smooth) * theta / factor + smooth * theta
                    }
                }
            }
        })
        .collect()
}

/// The cosine and sine tables `[T, n]` of positions `start..start + T` (angles
/// in float64, rounded once): column c uses θ_(c mod n/2).
pub fn tables(r: &Rope, start: usize, t: usize) -> (Vec<f64>, Vec<f64>) {
    let n = r.head_dim;
    let half = n / 2;
    let theta = frequencies(r);
    let mut cos = Vec::with_capacity(t * n);
    let mut sin = Vec::with_capacity(t * n);
    for pos in start..start + t {
        for c in 0..n {
            let phi = pos as f64 * theta[c % half.max(1)];
            cos.push(math::cos(phi));
            sin.push(math::sin(phi));
        }
    }
    (cos, sin)
}

/// The `[n, n]` matrix R with (x·R)_i = −x_{i+n/2} and (x·R)_{i+n/2} = x_i.
pub fn rotation(n: usize) -> Vec<f32> {
    let half = n / 2;
    let mut m = vec![0f32; n * n];
    for c in 0..half {
        m[(c + half) * n + c] = -1.0;
        m[c * n + c + half] = 1.0;
    }
    m
}

/// Rotates `x` `[…, T, n]` (rank ≥ 2, n = head_dim, checked by the caller).
pub fn rotate(f: &mut Forward<'_>, r: &Rope, x: &Array) -> Result<Array, Diagnostic> {
    rotate_from(f, r, x, 0)
}

/// Rotates `x` `[…, T, n]` as positions `start..start + T`.
pub fn rotate_from(
    f: &mut Forward<'_>,
    r: &Rope,
    x: &Array,
    start: usize,
) -> Result<Array, Diagnostic> {
    let s = x.shape().to_vec();
    let n = r.head_dim;
    let t = s[s.len() - 2];
    let (cos, sin) = tables(r, start, t);
    let cos = Array::from_f64(vec![t, n], &cos);
    let sin = Array::from_f64(vec![t, n], &sin);
    let rot = Array::from_vec(vec![n, n], rotation(n));
    let rows = x.numel() / n.max(1);
    let x2 = ops::reshape(f.it, x, vec![rows, n], f.span)?;
    let xr = f.mm(&x2, &rot)?;
    let xr = ops::reshape(f.it, &xr, s, f.span)?;
    let a = ops::arith(f.it, BinaryOp::Mul, x, &cos, f.span)?;
    let b = ops::arith(f.it, BinaryOp::Mul, &xr, &sin, f.span)?;
    ops::arith(f.it, BinaryOp::Add, &a, &b, f.span)
}
