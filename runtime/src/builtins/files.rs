//! Files and corpora (LANGUAGE §10.9, §16): `load` inside the data directory and
//! the compiled-in corpora of `load_preloaded`.

use super::ParamKind::*;
use super::{req, Builtin, Diff};
use crate::data::corpora;
use crate::diag::Diagnostic;
use crate::eval::Call;
use crate::value::Value;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin { name: "load_preloaded", params: &[req("name", Str)], summary: "a corpus compiled into the runtime", doc: "`load_preloaded(name)` returns the text of a built-in corpus: \"tiny_corpus\" (two pangram lines) or \"tiny_shakespeare_snippet\" (2028 bytes of Shakespeare). No data directory is needed. E0104 for an unknown name.", example: "load_preloaded(\"tiny_corpus\")", diff: Diff::Effect, section: "10.9", run: load_preloaded },
];

fn load_preloaded(c: &mut Call) -> Result<Value, Diagnostic> {
    let name = c.string(0)?;
    match corpora::preloaded(name) {
        Some(text) => Ok(Value::string(text)),
        None => Err(c.error_at(0, "E0104", format!("unknown corpus `{name}`"), "not a preloaded corpus").note(format!("known corpora: {}", corpora::NAMES.join(", ")))),
    }
}
