//! Shape rules of the ML primitives (LANGUAGE §10.5), next to their runtime
//! implementations in `ml.rs`.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, Dim, MAX_CONST};
use crate::check::ctx::ShapeCtx;
use crate::check::dims;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

fn softmax_like(c: &mut ShapeCtx) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    if x.rank() == Some(0) {
        return Err(c.rank_error(0, &x, "of rank 1 or more"));
    }
    if c.has(1) {
        c.axis(1, &x)?;
    }
    let mut out = AbsArray {
        constant: None,
        origin: None,
        ..x.clone()
    }
    .unnamed();
    out.placed = x.placed;
    Ok(AbsValue::Array(out))
}

/// `softmax(x [, axis])`: same shape, names dropped; E0205 for a scalar.
pub fn softmax(c: &mut ShapeCtx) -> Rule {
    softmax_like(c)
}

/// `log_softmax(x [, axis])`: as `softmax`.
pub fn log_softmax(c: &mut ShapeCtx) -> Rule {
    softmax_like(c)
}

/// `one_hot(ids, k)`: `[N, k]`; E0402 for a constant id ≥ k.
pub fn one_hot(c: &mut ShapeCtx) -> Rule {
    let ids = c.array_of_rank(0, 1, "a vector of ids `[N]`")?;
    let k = c.count(1)?;
    let n = ids
        .as_ref()
        .and_then(|i| i.dims.as_ref().map(|d| d[0].clone()))
        .unwrap_or(Dim::Unknown);
    let kd = k.map_or(Dim::Unknown, Dim::Known);
    let mut data = None;
    if let (Some(ids), Some(k)) = (ids.as_ref().and_then(|i| i.constant.clone()), k) {
        let mut d = vec![0.0; ids.len().saturating_mul(k).min(MAX_CONST + 1)];
        for (r, &id) in ids.iter().enumerate() {
            let col = super::site::one_hot_column(c, r, id, k)?;
            let at = r.checked_mul(k).and_then(|x| x.checked_add(col));
            if let Some(slot) = at.and_then(|at| d.get_mut(at)) {
                *slot = 1.0;
            }
        }
        data = Some(d);
    }
    Ok(AbsValue::Array(
        AbsArray::of_dims(vec![n, kd]).with_constant(data),
    ))
}

/// The element count of an array as a size.
fn count(a: &AbsArray) -> Dim {
    a.dims.as_ref().map_or(Dim::Unknown, |d| dims::product(d))
}

/// `cross_entropy(logits, targets)`: a scalar; E0205 for logits not `[N, V]` or
/// `[B, T, V]`, E0214 when the target count differs from the rows, E0402 for a
/// constant target outside [0, V).
pub fn cross_entropy(c: &mut ShapeCtx) -> Rule {
    let logits = c.array(0)?;
    let targets = c.array(1)?;
    let Some(logits) = logits else {
        return Ok(AbsValue::any_scalar());
    };
    let Some(ld) = logits.dims.clone() else {
        return Ok(AbsValue::any_scalar());
    };
    if ld.len() != 2 && ld.len() != 3 {
        return Err(c.rank_error(0, &logits, "`[N, V]` or `[B, T, V]`"));
    }
    let Some(targets) = targets else {
        return Ok(AbsValue::any_scalar());
    };
    let rows = dims::product(&ld[..ld.len() - 1]);
    let n = count(&targets);
    if rows.provably_ne(&n) {
        return Err(super::site::target_count_error(
            c,
            &logits.shape_text(),
            &targets.shape_text(),
            &rows.text(),
        ));
    }
    if !rows.provably_eq(&n) {
        return Ok(AbsValue::any_scalar());
    }
    if let (Some(t), Some(v)) = (&targets.constant, ld[ld.len() - 1].known()) {
        for (r, &t) in t.iter().enumerate() {
            super::site::check_target(c, r, t, v)?;
        }
    }
    if let (Some(a), Some(b)) = (logits.placed, targets.placed) {
        if a != b {
            return Err(crate::errors::device_mismatch_error(
                "cross_entropy",
                ("left operand", a, c.arg_span(0)),
                ("right operand", b, c.arg_span(1)),
            ));
        }
    }
    Ok(AbsValue::any_scalar())
}

/// `sinusoidal_encoding(T, d)`: `[time=T, dim=d]`; E0401 for T < 0, d < 1 or a
/// non-integer.
pub fn sinusoidal_encoding(c: &mut ShapeCtx) -> Rule {
    let t = c.integer(0)?;
    let d = c.integer(1)?;
    super::site::check_encoding_sizes(c, t, d)?;
    let dim = |v: Option<i64>| v.map_or(Dim::Unknown, |v| Dim::Known(v as usize));
    Ok(AbsValue::Array(
        AbsArray::of_dims(vec![dim(t), dim(d)])
            .with_names(Some(vec![Some("time".into()), Some("dim".into())])),
    ))
}
