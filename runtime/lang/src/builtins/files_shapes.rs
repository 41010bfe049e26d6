//! Shape rules of the file builtins (LANGUAGE §10.9, §16), for the entries of
//! `files.rs`: `load` of a CSV file gives a `[N, C]` array with symbolic sizes,
//! `load_preloaded` the text of a compiled-in corpus. Paths are checked lexically
//! (E0404); whether a file exists is only known at run time.
//!
//! These rules are reached through [`super::shape_rule`] until the entries of
//! `files.rs` name them in their `shape` field.

use super::site::{self, CallSite};
use mlpl_diag::code;
use std::path::Path;

use crate::check::abstract_value::{AbsArray, AbsValue};
use crate::check::ctx::ShapeCtx;
use crate::data::corpora;
use crate::data::files::{self, PathError};
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// The lexical part of the data-directory sandbox, as `data::files` applies
/// it: an absolute or prefixed path, or one climbing above the directory, is
/// E0404.
pub fn lexical_path_error(rel: &str) -> Option<PathError> {
    files::normalise(rel).err()
}

/// `load(path)`: `[N, C]` for a `.csv` file, an array for `.safetensors`, a
/// string otherwise; E0404 for a path outside the data directory.
pub fn load(c: &mut ShapeCtx) -> Rule {
    let Some(path) = c.string(0)? else {
        return Ok(AbsValue::Unknown);
    };
    if let Some(e) = lexical_path_error(&path) {
        return Err(site::path_error(c, 0, &e));
    }
    let ext = Path::new(&path)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    Ok(match ext.as_str() {
        "csv" => {
            let (n, cols) = (c.fresh("N"), c.fresh("C"));
            AbsValue::Array(AbsArray::of_dims(vec![n, cols]))
        }
        "safetensors" => AbsValue::any_array(),
        _ => AbsValue::Str(None),
    })
}

/// `load_preloaded(name)`: the corpus text; E0104 for an unknown name.
pub fn load_preloaded(c: &mut ShapeCtx) -> Rule {
    let Some(name) = c.string(0)? else {
        return Ok(AbsValue::Str(None));
    };
    match corpora::preloaded(&name) {
        Some(text) => Ok(AbsValue::Str(Some(text.to_string()))),
        None => Err(super::site::unknown_corpus(c, 0, &name)),
    }
}

/// `save(value, path)`: the number of tensors written; E0401 unless the path ends
/// in `.safetensors`, E0301 for a string or tokenizer, E0404.
pub fn save(c: &mut ShapeCtx) -> Rule {
    let path = c.string(1)?;
    if let Some(p) = &path {
        site::check_safetensors_path(c, 1, p)?;
    }
    match c.value(0) {
        AbsValue::Str(_) | AbsValue::Tokenizer(_) => {
            let kind = c.value(0).kind_name().unwrap_or("value");
            return Err(c.error_of(0, code::E0301, format!("this is a {kind}")));
        }
        _ => {}
    }
    if let Some(e) = path.as_deref().and_then(lexical_path_error) {
        return Err(site::path_error(c, 1, &e));
    }
    Ok(match c.value(0) {
        AbsValue::Array(_) => AbsValue::scalar(1.0),
        AbsValue::Model(Some(m)) => AbsValue::scalar(m.0.param_specs().len() as f64),
        _ => AbsValue::any_scalar(),
    })
}

/// `load_weights(model, path)`: the number of parameters loaded; E0404.
pub fn load_weights(c: &mut ShapeCtx) -> Rule {
    let m = c.model(0)?;
    if let Some(e) = c.string(1)?.as_deref().and_then(lexical_path_error) {
        return Err(site::path_error(c, 1, &e));
    }
    Ok(match m {
        Some(m) => AbsValue::scalar(m.0.param_specs().len() as f64),
        None => AbsValue::any_scalar(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked_lexically() {
        assert!(lexical_path_error("data/train.csv").is_none());
        assert!(lexical_path_error("a/../b.csv").is_none());
        assert_eq!(
            lexical_path_error("/etc/passwd").unwrap().code(),
            code::E0404
        );
        assert_eq!(lexical_path_error("../x.csv").unwrap().code(), code::E0404);
        assert_eq!(
            lexical_path_error("a/../../x.csv").unwrap().code(),
            code::E0404
        );
        assert_eq!(lexical_path_error("C:x.csv").unwrap().code(), code::E0404);
    }
}
