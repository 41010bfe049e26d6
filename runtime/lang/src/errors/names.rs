//! E0101, an undefined name, as the checker and the interpreter report it.

use mlpl_diag::{code, Diagnostic, Span};

/// E0101 for `name` at `span` with `label`, with a help naming the closest of
/// `known` when one is close.
pub fn undefined_name<'a>(
    name: &str,
    span: Span,
    label: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Diagnostic {
    let d = Diagnostic::error(code::E0101, format!("undefined name `{name}`")).at(span, label);
    match super::suggest::closest(name, known.into_iter()) {
        Some(s) => d.help(format!("a variable with a similar name exists: `{s}`")),
        None => d,
    }
}
