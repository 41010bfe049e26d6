//! Shape and axis-name diagnostics that the checker and the interpreter both
//! report: broadcasting (E0201, E0202), axis-name lists (E0209, W0201) and array
//! literals (E0218).

use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{Expr, ExprKind};

/// E0201 (LANGUAGE §9.4): the operands of `op` do not broadcast; axis `-k` has
/// size `x` on the left and `y` on the right. `left` and `right` are each
/// operand's span and named shape. Shared by the interpreter and the checker.
pub fn broadcast_size_error(
    op: &str,
    left: &(Span, String),
    right: &(Span, String),
    k: usize,
    x: usize,
    y: usize,
) -> Diagnostic {
    Diagnostic::of_op(code::E0201, op)
        .at(right.0, format!("right operand: {}", right.1))
        .with_label(left.0, format!("left operand: {}", left.1))
        .note(format!(
            "axis -{k} has size {x} on the left and {y} on the right; aligned sizes must be equal or one of them must be 1"
        ))
}

/// E0202 (LANGUAGE §9.4): aligned axis `-k` is named `x` on the left and `y` on
/// the right; `help` is the suggested fix ([`relabel_help`]). Shared by the
/// interpreter and the checker.
pub fn broadcast_name_error(
    op: &str,
    left: &(Span, String),
    right: &(Span, String),
    k: usize,
    x: &str,
    y: &str,
    help: String,
) -> Diagnostic {
    Diagnostic::of_op(code::E0202, op)
        .at(right.0, format!("right operand: {}", right.1))
        .with_label(left.0, format!("left operand: {}", left.1))
        .note(format!(
            "axis -{k} is named `{x}` on the left and `{y}` on the right"
        ))
        .help(help)
}

/// The help line of E0202: relabel the right operand (its variable name, or `y`)
/// with the left operand's names on the aligned axes.
pub fn relabel_help(right_expr: &Expr, left: &[Option<&str>], right: &[Option<&str>]) -> String {
    let fixed: Vec<String> = (0..right.len())
        .map(|i| {
            let from_end = right.len() - i;
            let l = (from_end <= left.len())
                .then(|| left[left.len() - from_end])
                .flatten();
            format!("\"{}\"", l.or(right[i]).unwrap_or(""))
        })
        .collect();
    let target = match &right_expr.unparen().kind {
        ExprKind::Var(v) => v.clone(),
        _ => "y".to_string(),
    };
    format!(
        "rename one side, for example `relabel({target}, [{}])`",
        fixed.join(", ")
    )
}

/// E0209: `n` names given for an array of rank `rank` (named shape `shape`).
pub fn label_count_error(span: Span, n: usize, shape: &str, rank: usize) -> Diagnostic {
    Diagnostic::of(code::E0209)
        .at(
            span,
            format!(
                "{n} name{} for shape {shape}",
                if n == 1 { "" } else { "s" }
            ),
        )
        .note(format!(
            "the array has rank {rank}; give one name per axis (\"\" leaves an axis unnamed)"
        ))
}

/// W0201 for a names list that repeats `name`.
pub fn duplicate_name_warning(span: Span, name: &str) -> Diagnostic {
    Diagnostic::warning(code::W0201, format!("duplicate axis name `{name}`"))
        .at(span, "a lookup by name finds the first axis")
}

/// The first name that appears twice in `names`.
pub fn first_duplicate(names: &[Option<String>]) -> Option<&str> {
    let named: Vec<&String> = names.iter().flatten().collect();
    (0..named.len())
        .find(|&i| named[..i].contains(&named[i]))
        .map(|i| named[i].as_str())
}

/// E0218: an element of an array literal differs in shape from the first one.
pub fn stack_shape_error(item: (Span, &str), first: (Span, &str)) -> Diagnostic {
    Diagnostic::of(code::E0218)
        .at(item.0, format!("this element has shape {}", item.1))
        .with_label(first.0, format!("the first element has shape {}", first.1))
        .note("all elements of an array literal must have the same shape")
}
