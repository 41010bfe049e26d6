//! Shape rule of `compare` (LANGUAGE §10.16), next to its runtime implementation
//! in `experiments.rs`.

use crate::check::abstract_value::AbsValue;
use crate::check::ctx::ShapeCtx;
use mlpl_diag::Diagnostic;

/// `compare(a, b)`: a string report; E0302 unless both are strings.
pub fn compare(c: &mut ShapeCtx) -> Result<AbsValue, Diagnostic> {
    c.string(0)?;
    c.string(1)?;
    Ok(AbsValue::Str(None))
}
