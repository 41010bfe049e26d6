//! Shape rules of `sample` and `top_k` (LANGUAGE §10.7), next to their runtime
//! implementations in `sampling.rs`.

use super::site::CallSite;
use crate::check::abstract_value::{AbsValue, Dim};
use crate::check::ctx::ShapeCtx;
use crate::data::sampling::SamplingError;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// `sample(logits, temperature, seed)`: a scalar id; E0216 for empty logits,
/// E0401 for a negative temperature.
pub fn sample(c: &mut ShapeCtx) -> Rule {
    let logits = c.array_of_rank(0, 1, "a vector of logits `[V]`")?;
    let t = c.scalar(1)?;
    c.seed(2)?;
    let len = logits.and_then(|l| l.dims.map(|d| d[0].clone()));
    if len == Some(Dim::Known(0)) {
        return Err(c.error_of(0, code::E0216, SamplingError::Empty.to_string()));
    }
    if let (Some(t), Some(Dim::Known(_))) = (t, &len) {
        if t.is_nan() || t < 0.0 {
            let e = SamplingError::BadTemperature { temperature: t };
            return Err(c.error_of(1, code::E0401, e.to_string()));
        }
    }
    Ok(AbsValue::any_scalar())
}

/// `top_k(logits, k)`: same shape and names; E0401 unless 1 ≤ k ≤ V.
pub fn top_k(c: &mut ShapeCtx) -> Rule {
    let a = c.array_of_rank(0, 1, "a vector of logits `[V]`")?;
    let k = c.scalar(1)?;
    let Some(a) = a else {
        return Ok(AbsValue::any_array());
    };
    if let (Some(k), Some(n)) = (k, a.numel()) {
        super::site::check_top_k_of(c, 1, k, n)?;
    }
    Ok(AbsValue::Array(a.with_constant(None)))
}
