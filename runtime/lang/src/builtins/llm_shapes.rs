//! Shape rule of `llm_call` (LANGUAGE §10.19), next to its implementation in
//! `llm.rs`: three strings in, a string of unknown text out.

use crate::check::abstract_value::AbsValue;
use crate::check::ctx::ShapeCtx;
use mlpl_diag::Diagnostic;

/// `llm_call(endpoint, prompt, model)`: a string; E0302 for a non-string argument.
pub fn llm_call(c: &mut ShapeCtx) -> Result<AbsValue, Diagnostic> {
    for i in 0..3 {
        c.string(i)?;
    }
    Ok(AbsValue::Str(None))
}
