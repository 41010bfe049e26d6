//! Shape rules of the feasibility builtins (LANGUAGE §10.17), next to their
//! runtime implementations in `feasibility.rs`.

use crate::check::abstract_value::{AbsArray, AbsValue, Dim};
use crate::check::ctx::ShapeCtx;
use crate::estimate::spec::{self, Spec};
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// A finite positive scalar (E0205, E0401), as `feasibility::positive`.
fn positive(c: &ShapeCtx, i: usize) -> Result<Option<f64>, Diagnostic> {
    let v = c.scalar(i)?;
    if let Some(v) = v {
        super::site::check_finite_positive(c, i, v)?;
    }
    Ok(v)
}

/// `estimate_train(model, steps, batch, seq [, dtype_bytes])`: `[5]`; E0309 for a
/// model without parameters.
pub fn estimate_train(c: &mut ShapeCtx) -> Rule {
    let m = c.model(0)?;
    for i in 1..c.len() {
        positive(c, i)?;
    }
    if let Some(m) = m {
        super::site::check_trainable(c, &m.0)?;
    }
    Ok(AbsValue::Array(AbsArray::of_shape(&[5])))
}

/// `estimate_hypothetical(arch, steps, batch, seq [, dtype_bytes [, lora_rank]])`:
/// `[5]`; E0105 for an unknown name or a description it cannot read, E0404 for
/// a `config.json` path outside the data directory (the checker reads no files).
pub fn estimate_hypothetical(c: &mut ShapeCtx) -> Rule {
    if let Some(text) = c.string(0)? {
        match spec::parse(&text) {
            Err(e) => return Err(super::site::unknown_architecture(c, 0, &e)),
            Ok(Spec::Config(rel)) => {
                if let Some(e) = super::files_shapes::lexical_path_error(&rel) {
                    return Err(super::site::path_error(c, 0, &e));
                }
            }
            Ok(Spec::Arch(_)) => {}
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
            super::site::check_calibration_size(c, size)?;
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
            return Err(super::site::feasible_shape_error(c, 0, &est.shape_text()));
        }
    }
    if let Some(budget) = c.array(1)? {
        if not_vector_of(&budget, 3) {
            return Err(super::site::feasible_shape_error(
                c,
                1,
                &budget.shape_text(),
            ));
        }
    }
    Ok(AbsValue::any_scalar())
}
