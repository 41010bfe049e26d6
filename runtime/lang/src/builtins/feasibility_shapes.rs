//! Shape rules of the feasibility builtins (LANGUAGE §10.17), next to their
//! runtime implementations in `feasibility.rs`.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, Dim};
use crate::check::ctx::ShapeCtx;
use crate::estimate::hypothetical;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// A finite positive scalar (E0205, E0401), as `feasibility::positive`.
fn positive(c: &ShapeCtx, i: usize) -> Result<Option<f64>, Diagnostic> {
    match c.scalar(i)? {
        Some(v) if !(v.is_finite() && v > 0.0) => Err(c.invalid(
            i,
            format!("`{}` must be a finite positive number", c.param_name(i)),
        )),
        v => Ok(v),
    }
}

/// `estimate_train(model, steps, batch, seq [, dtype_bytes])`: `[5]`; E0309 for a
/// model without parameters.
pub fn estimate_train(c: &mut ShapeCtx) -> Rule {
    let m = c.model(0)?;
    for i in 1..c.len() {
        positive(c, i)?;
    }
    if let Some(m) = m {
        if crate::nn::estimate::param_count(&m.0) == 0.0 {
            return Err(c
                .error_of(0, code::E0309, "nothing to train")
                .note("`estimate_train` needs a model with at least one parameter"));
        }
    }
    Ok(AbsValue::Array(AbsArray::of_shape(&[5])))
}

/// `estimate_hypothetical(name, steps, batch, seq [, dtype_bytes [, lora_rank]])`:
/// `[5]`; E0105 for an unknown architecture.
pub fn estimate_hypothetical(c: &mut ShapeCtx) -> Rule {
    if let Some(name) = c.string(0)? {
        if hypothetical::lookup(&name).is_none() {
            return Err(super::site::unknown_architecture(c, 0, &name));
        }
    }
    for i in 1..c.len() {
        positive(c, i)?;
    }
    Ok(AbsValue::Array(AbsArray::of_shape(&[5])))
}

/// `calibrate_device([size])`: a scalar.
pub fn calibrate_device(c: &mut ShapeCtx) -> Rule {
    if c.has(0) {
        if let Some(size) = positive(c, 0)? {
            if size.fract() != 0.0 || size > 16384.0 {
                return Err(c.invalid(0, "size must be an integer between 1 and 16384"));
            }
        }
    }
    Ok(AbsValue::any_scalar())
}

/// Whether `a` is provably not a `[n]` vector.
fn not_vector_of(a: &AbsArray, n: usize) -> bool {
    match &a.dims {
        Some(d) if d.len() != 1 => true,
        Some(d) => d[0].provably_ne(&Dim::Known(n)),
        None => false,
    }
}

/// `feasible(est, budget)`: a scalar; E0218 unless `est` is `[5]` and `budget`
/// is `[3]`.
pub fn feasible(c: &mut ShapeCtx) -> Rule {
    if let Some(est) = c.array(0)? {
        if not_vector_of(&est, 5) {
            return Err(c
                .error_of(0, code::E0218, format!("has shape {}", est.shape_text()))
                .note("estimate must be rank-1 [5]"));
        }
    }
    if let Some(budget) = c.array(1)? {
        if not_vector_of(&budget, 3) {
            return Err(c
                .error_of(1, code::E0218, format!("has shape {}", budget.shape_text()))
                .note("budget must be rank-1 [3] [vram, disk, wall]"));
        }
    }
    Ok(AbsValue::any_scalar())
}
