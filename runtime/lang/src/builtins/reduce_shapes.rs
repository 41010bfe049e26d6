//! Shape rules of the reductions (LANGUAGE §10.2), next to their runtime
//! implementations in `reduce.rs`.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, AxisName, Dim};
use crate::check::ctx::ShapeCtx;
use crate::check::dims::fold_axis;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// Which reduction, for constant folding.
#[derive(Clone, Copy)]
enum Op {
    Sum,
    Prod,
    Mean,
    Argmax,
    LogSumExp,
}

/// `op` over one lane; `last` when the lane runs along the last axis (no
/// later axis longer than 1), where the kernels sum rows in their lane order.
fn apply(op: Op, lane: &[f64], last: bool) -> f64 {
    match op {
        Op::Sum => lane.iter().sum(),
        Op::Prod => lane.iter().product(),
        Op::Mean => lane.iter().sum::<f64>() / lane.len().max(1) as f64,
        Op::Argmax => {
            let mut best = 0;
            for (i, &v) in lane.iter().enumerate() {
                if v > lane[best] {
                    best = i;
                }
            }
            best as f64
        }
        Op::LogSumExp => logsumexp_lane(lane, last),
    }
}

/// The logsumexp of one lane exactly as the CPU kernel computes it (float32
/// maximum and `expf`, the sum in float64: in the kernels' lane order along
/// the last axis, else in index order): the checker's constant and the
/// runtime's value agree bit for bit. A one-element lane is its element.
fn logsumexp_lane(lane: &[f64], last: bool) -> f64 {
    use mlpl_devices::{cpu::lane_sum::sum_map, math};
    if let [v] = lane {
        return *v;
    }
    let x: Vec<f32> = lane.iter().map(|&v| v as f32).collect();
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let term = |v: f32| math::expf(v - m) as f64;
    let s = if last {
        sum_map(&x, term)
    } else {
        x.iter().fold(0.0f64, |s, &v| s + term(v))
    };
    (m + math::log(s) as f32) as f64
}

/// The array without `axis` (or a scalar), with the constant folded.
fn reduced(op: Op, x: &AbsArray, axis: Option<usize>, has_axis: bool) -> AbsArray {
    let exact = x.rank() == Some(0);
    let round = |v: f64| if exact { v } else { v as f32 as f64 };
    let Some(dims) = &x.dims else {
        return if has_axis {
            AbsArray::unknown()
        } else {
            AbsArray::any_scalar()
        };
    };
    let mut out = match (has_axis, axis) {
        (false, _) => {
            let c = x.constant.as_ref().map(|c| vec![round(apply(op, c, true))]);
            AbsArray::any_scalar().with_constant(c)
        }
        (true, None) => {
            let mut a = AbsArray::of_dims(vec![Dim::Unknown; dims.len().saturating_sub(1)]);
            a.names = vec![AxisName::Unknown; dims.len().saturating_sub(1)];
            a
        }
        (true, Some(ax)) => {
            let mut d = dims.clone();
            d.remove(ax);
            let mut a = AbsArray::of_dims(d);
            let mut names = x.names.clone();
            if ax < names.len() {
                names.remove(ax);
            }
            a.names = names;
            a.origin = x.origin;
            let c = match (&x.constant, x.known_shape()) {
                (Some(c), Some(s)) => {
                    let last = s[ax + 1..].iter().all(|&n| n == 1);
                    fold_axis(c, &s, ax, |l| apply(op, l, last))
                        .map(|v| v.into_iter().map(round).collect())
                }
                _ => None,
            };
            a.with_constant(c)
        }
    };
    if matches!(op, Op::Argmax) && x.constant.is_none() {
        out.constant = None;
    }
    out.placed = x.placed;
    out
}

fn reduction(c: &mut ShapeCtx, op: Op) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    let has_axis = c.has(1);
    let axis = if has_axis { c.axis(1, &x)? } else { None };
    if matches!(op, Op::Argmax) {
        let empty = match axis {
            Some(ax) => x.dims.as_ref().is_some_and(|d| d[ax] == Dim::Known(0)),
            None if !has_axis => x.numel() == Some(0),
            None => false,
        };
        if empty {
            return Err(super::site::empty_argmax(c, &x.shape_text()));
        }
    }
    Ok(AbsValue::Array(reduced(op, &x, axis, has_axis)))
}

/// `reduce_add(x [, axis])` and `sum(x [, axis])`.
pub fn sum(c: &mut ShapeCtx) -> Rule {
    reduction(c, Op::Sum)
}

/// `reduce_mul(x [, axis])`.
pub fn prod(c: &mut ShapeCtx) -> Rule {
    reduction(c, Op::Prod)
}

/// `mean(x [, axis])`.
pub fn mean(c: &mut ShapeCtx) -> Rule {
    reduction(c, Op::Mean)
}

/// `argmax(x [, axis])`: E0216 for an empty array or axis.
pub fn argmax(c: &mut ShapeCtx) -> Rule {
    reduction(c, Op::Argmax)
}

/// `logsumexp(x [, axis])`: as `sum`, the axis and its name removed.
pub fn logsumexp(c: &mut ShapeCtx) -> Rule {
    reduction(c, Op::LogSumExp)
}

/// `argtop_k(v, k)`: `[k]`; E0205 unless `v` is a vector, E0401 unless 0 ≤ k ≤ N.
pub fn argtop_k(c: &mut ShapeCtx) -> Rule {
    let v = c.array_of_rank(0, 1, "a vector `[N]`")?;
    let k = c.scalar(1)?;
    let n = v.and_then(|v| v.dims.and_then(|d| d[0].known()));
    if let (Some(k), Some(n)) = (k, n) {
        if k.fract() != 0.0 || !(k >= 0.0 && k <= n as f64) {
            return Err(c.invalid(1, format!("k must be an integer in 0..={n}")));
        }
    }
    let len = match k {
        Some(k) if k >= 0.0 && k.fract() == 0.0 => Dim::Known(k as usize),
        _ => Dim::Unknown,
    };
    Ok(AbsValue::Array(AbsArray::of_dims(vec![len])))
}
