//! Loss diagnostics that the checker and the interpreter both report.

use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};

/// E0306: an array literal element that depends on a trainable parameter.
pub fn literal_in_loss_error(span: Span) -> Diagnostic {
    Diagnostic::of(code::E0306)
        .at(span, "depends on a trainable parameter")
        .note("an array literal is not differentiable; build the value with `concat`, `reshape` or arithmetic instead")
}
