//! Shape rules of `hf_model` and `hf_save` (entries of `hf.rs`). The checker
//! reads no files, so a loaded checkpoint is a model of unknown structure;
//! paths are checked lexically (E0404).

use super::files_shapes::lexical_path_error;
use super::site;

use crate::check::abstract_value::AbsValue;
use crate::check::ctx::ShapeCtx;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

fn path(c: &ShapeCtx, i: usize) -> Result<(), Diagnostic> {
    if let Some(e) = c.string(i)?.as_deref().and_then(lexical_path_error) {
        return Err(site::path_error(c, i, &e));
    }
    Ok(())
}

/// `hf_model(dir)`: a model (its layers are read at run time).
pub fn hf_model(c: &mut ShapeCtx) -> Rule {
    path(c, 0)?;
    Ok(AbsValue::Model(None))
}

/// `hf_save(model, dir [, dtype])`: the number of tensors written (E0401 for
/// an unknown constant dtype).
pub fn hf_save(c: &mut ShapeCtx) -> Rule {
    c.model(0)?;
    path(c, 1)?;
    if c.has(2) {
        if let Some(name) = c.string(2)? {
            super::hf::save_dtype(c, &name)?;
        }
    }
    Ok(AbsValue::any_scalar())
}
