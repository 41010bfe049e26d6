//! What a builtin's implementation ([`crate::eval::Call`]) and its shape rule
//! ([`crate::check::ctx::ShapeCtx`]) share about the call they handle: the
//! builtin, where its arguments are written, and the diagnostics both word the
//! same way, so that a static error reads exactly like the runtime one.

use super::Builtin;
use mlpl_diag::code;
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

    /// The diagnostic of `code`, with its catalog headline, at argument `i`
    /// with a label.
    fn error_of(&self, i: usize, code: &'static str, label: impl Into<String>) -> Diagnostic {
        Diagnostic::of(code).at(self.arg_span(i), label)
    }

    /// E0401 (invalid argument value) at argument `i`.
    fn invalid(&self, i: usize, what: impl Into<String>) -> Diagnostic {
        let param = self.param_name(i);
        self.error_at(
            i,
            code::E0401,
            format!("invalid argument value for `{param}` of `{}`", self.name()),
            what,
        )
    }

    /// E0205: argument `i`, of named shape `shape`, has the wrong rank; it must
    /// be `expected` (such as "of rank 0 or 1").
    fn rank_error_for(&self, i: usize, shape: &str, expected: &str) -> Diagnostic {
        Diagnostic::of(code::E0205)
            .at(self.arg_span(i), format!("has shape {shape}"))
            .note(format!(
                "argument `{}` of `{}` must be {expected}",
                self.param_name(i),
                self.name()
            ))
    }

    /// Reports the warning `code`, with its catalog headline, at argument `i`.
    fn warn_of(&mut self, i: usize, code: &'static str, label: impl Into<String>) {
        let d = Diagnostic::of(code).at(self.arg_span(i), label);
        self.push_warning(d);
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
                    .error_of(1, code::E0213, "more than one −1")
                    .note("only one dimension of `reshape` can be inferred"));
            }
            shape.push(0);
        } else if v < 0.0 || v.fract() != 0.0 || !v.is_finite() {
            return Err(c
                .error_of(
                    1,
                    code::E0213,
                    format!("{} is not a valid size", crate::display::format_f64(v)),
                )
                .note("sizes are non-negative integers; −1 infers one size"));
        } else {
            shape.push(v as usize);
        }
    }
    Ok((shape, infer))
}

/// The token ids `values` of argument `i`: E0402 for one that is negative, not
/// an integer, or above `max` (when given; else above `u32::MAX`). Shared by the
/// tokenizer builtins and their shape rules.
pub fn token_ids(
    c: &impl CallSite,
    i: usize,
    values: &[f64],
    max: Option<u32>,
) -> Result<Vec<u32>, Diagnostic> {
    values
        .iter()
        .enumerate()
        .map(|(k, &x)| {
            let ok =
                x.fract() == 0.0 && x >= 0.0 && max.map_or(x <= u32::MAX as f64, |m| x <= m as f64);
            if ok {
                Ok(x as u32)
            } else {
                let range = max.map_or("non-negative integers".to_string(), |m| {
                    format!("integers in 0..={m}")
                });
                Err(c
                    .error_of(
                        i,
                        code::E0402,
                        format!("{} at position {k}", crate::display::format_f64(x)),
                    )
                    .note(format!("ids must be {range}")))
            }
        })
        .collect()
}

/// The column of `one_hot`'s row `r` for the id `id` (NaN and negative ids are
/// 0, others truncated); E0402 when it is not below `k`. Shared by the
/// implementation and the shape rule.
pub fn one_hot_column(c: &impl CallSite, r: usize, id: f64, k: usize) -> Result<usize, Diagnostic> {
    let id = if id.is_nan() || id < 0.0 {
        0.0
    } else {
        id.trunc()
    };
    if id >= k as f64 {
        return Err(c
            .error_of(
                0,
                code::E0402,
                format!("id {} at position {r}", crate::display::format_f64(id)),
            )
            .note(format!("ids must be below k = {k}")));
    }
    Ok(id as usize)
}
