//! Rotary position embedding (LANGUAGE §11.4): the half-split pairing
//! (x_i, x_{i+n/2}) rotated by t·θ_i, θ_i = base^(−2i/n), computed as
//! x·cos + (x·R)·sin with a constant rotation matrix R, so the gradient flows
//! through ordinary products. A rope narrower than the heads it rotates
//! (partial rotary) rotates their first `head_dim` entries and passes the rest
//! through (cos 1, sin 0 there).

use mlpl_devices::math;
use mlpl_devices::BinaryOp;

use super::apply::Forward;
use super::layers::{Rope, RopeScaling};
use crate::eval::ops;
use crate::value::Array;
use mlpl_diag::Diagnostic;

/// YaRN's ramp bounds: the dimensions where `rotations` turns fit in
/// `original` positions, as `transformers`' `find_correction_range` computes.
fn yarn_range(
    n: usize,
    base: f64,
    original: f64,
    fast: f64,
    slow: f64,
    truncate: bool,
) -> (f64, f64) {
    let dim = n as f64;
    let at = |rot: f64| {
        dim * math::log(original / (rot * 2.0 * std::f64::consts::PI)) / (2.0 * math::log(base))
    };
    let (mut low, mut high) = (at(fast), at(slow));
    if truncate {
        low = low.floor();
        high = high.ceil();
    }
    (low.max(0.0), high.min(dim - 1.0))
}

/// The frequencies θ_i, i < n/2, in float64: base^(−2i/n), rescaled as
/// `r.scaling` says.
pub fn frequencies(r: &Rope) -> Vec<f64> {
    let n = r.head_dim;
    (0..n / 2)
        .map(|i| {
            let theta = math::pow(r.base, -2.0 * i as f64 / n as f64);
            match r.scaling {
                RopeScaling::Plain => theta,
                RopeScaling::Yarn {
                    factor,
                    original,
                    beta_fast,
                    beta_slow,
                    truncate,
                    ..
                } => {
                    let (low, mut high) =
                        yarn_range(n, r.base, original, beta_fast, beta_slow, truncate);
                    if low == high {
                        high += 0.001;
                    }
                    let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                    let extrapolated = 1.0 - ramp;
                    theta / factor * (1.0 - extrapolated) + theta * extrapolated
                }
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

/// The factor multiplying cos and sin (YaRN's attention factor, else 1).
pub fn attention_factor(r: &Rope) -> f64 {
    match r.scaling {
        RopeScaling::Yarn { attention, .. } => attention,
        _ => 1.0,
    }
}

/// The cosine and sine tables `[T, width]` of positions `start..start + T`
/// (angles in float64, rounded once): column c < n uses θ_(c mod n/2), scaled
/// by the attention factor; the columns from n = head_dim on pass through
/// (cos 1, sin 0).
pub fn tables(r: &Rope, start: usize, t: usize, width: usize) -> (Vec<f64>, Vec<f64>) {
    let n = r.head_dim;
    let half = n / 2;
    let theta = frequencies(r);
    let scale = attention_factor(r);
    let mut cos = Vec::with_capacity(t * width);
    let mut sin = Vec::with_capacity(t * width);
    for pos in start..start + t {
        for c in 0..width {
            if c < n {
                let phi = pos as f64 * theta[c % half.max(1)];
                cos.push(math::cos(phi) * scale);
                sin.push(math::sin(phi) * scale);
            } else {
                cos.push(1.0);
                sin.push(0.0);
            }
        }
    }
    (cos, sin)
}

/// The `[width, width]` matrix R with (x·R)_i = −x_{i+n/2} and
/// (x·R)_{i+n/2} = x_i for i < n/2, zero from column n on.
pub fn rotation(n: usize, width: usize) -> Vec<f32> {
    let half = n / 2;
    let mut m = vec![0f32; width * width];
    for c in 0..half {
        m[(c + half) * width + c] = -1.0;
        m[c * width + c + half] = 1.0;
    }
    m
}

/// Rotates `x` `[…, T, n]` (rank ≥ 2, n = head_dim, checked by the caller).
pub fn rotate(f: &mut Forward<'_>, r: &Rope, x: &Array) -> Result<Array, Diagnostic> {
    rotate_from(f, r, x, 0)
}

/// Rotates `x` `[…, T, w]` (w ≥ head_dim) as positions `start..start + T`:
/// its first head_dim entries, the rest passed through.
pub fn rotate_from(
    f: &mut Forward<'_>,
    r: &Rope,
    x: &Array,
    start: usize,
) -> Result<Array, Diagnostic> {
    let s = x.shape().to_vec();
    let n = r.head_dim;
    let w = s[s.len() - 1];
    let t = s[s.len() - 2];
    let (cos, sin) = tables(r, start, t, w);
    let cos = Array::from_f64(vec![t, w], &cos);
    let sin = Array::from_f64(vec![t, w], &sin);
    let rot = Array::from_vec(vec![w, w], rotation(n, w));
    let rows = x.numel() / w.max(1);
    let x2 = ops::reshape(f.it, x, vec![rows, w], f.span)?;
    let xr = f.mm(&x2, &rot)?;
    let xr = ops::reshape(f.it, &xr, s, f.span)?;
    let a = ops::arith(f.it, BinaryOp::Mul, x, &cos, f.span)?;
    let b = ops::arith(f.it, BinaryOp::Mul, &xr, &sin, f.span)?;
    ops::arith(f.it, BinaryOp::Add, &a, &b, f.span)
}
