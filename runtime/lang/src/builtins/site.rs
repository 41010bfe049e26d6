//! What a builtin's implementation ([`crate::eval::Call`]) and its shape rule
//! ([`crate::check::ctx::ShapeCtx`]) share about the call they handle: the
//! builtin, where its arguments are written, and the diagnostics both word the
//! same way, so that a static error reads exactly like the runtime one.

use super::Builtin;
use mlpl_diag::{Diagnostic, Span};

/// A call of a builtin, seen at run time or by the checker.
pub trait CallSite {
    /// The builtin being called.
    fn builtin(&self) -> &'static Builtin;

    /// The span of argument `i` (the call's span if absent).
    fn arg_span(&self, i: usize) -> Span;

    /// Reports a warning (the interpreter emits it, the checker collects it).
    fn push_warning(&mut self, d: Diagnostic);

    /// The builtin's name.
    fn name(&self) -> &'static str {
        self.builtin().name
    }

    /// The declared name of parameter `i`.
    fn param_name(&self, i: usize) -> &'static str {
        self.builtin().param_at(i).map_or("argument", |p| p.name)
    }

    /// An error at argument `i` with a label.
    fn error_at(
        &self,
        i: usize,
        code: &'static str,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::error(code, message).at(self.arg_span(i), label)
    }

    /// E0401 (invalid argument value) at argument `i`.
    fn invalid(&self, i: usize, what: impl Into<String>) -> Diagnostic {
        let param = self.param_name(i);
        self.error_at(
            i,
            "E0401",
            format!("invalid argument value for `{param}` of `{}`", self.name()),
            what,
        )
    }

    /// A warning at argument `i` with a label.
    fn warn_at(
        &mut self,
        i: usize,
        code: &'static str,
        message: impl Into<String>,
        label: impl Into<String>,
    ) {
        let d = Diagnostic::warning(code, message).at(self.arg_span(i), label);
        self.push_warning(d);
    }
}

/// The sizes of `reshape`'s shape argument (argument 1), with the index of the
/// one `-1` to infer (its size is 0 here); E0213 for more than one `-1` or a
/// size that is not a non-negative integer. Shared by the implementation and the
/// shape rule.
pub fn reshape_sizes(
    c: &impl CallSite,
    spec: &[f64],
) -> Result<(Vec<usize>, Option<usize>), Diagnostic> {
    let mut infer = None;
    let mut shape = Vec::with_capacity(spec.len());
    for (k, &v) in spec.iter().enumerate() {
        if v == -1.0 {
            if infer.replace(k).is_some() {
                return Err(c
                    .error_at(1, "E0213", "invalid dimension", "more than one −1")
                    .note("only one dimension of `reshape` can be inferred"));
            }
            shape.push(0);
        } else if v < 0.0 || v.fract() != 0.0 || !v.is_finite() {
            return Err(c
                .error_at(
                    1,
                    "E0213",
                    "invalid dimension",
                    format!("{} is not a valid size", crate::display::format_f64(v)),
                )
                .note("sizes are non-negative integers; −1 infers one size"));
        } else {
            shape.push(v as usize);
        }
    }
    Ok((shape, infer))
}
