//! Axis-name builtins (LANGUAGE §8, §10.11).

use super::site::CallSite;
use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::eval::{ops, Call};
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;
use mlpl_syntax::ExprKind;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "label",
        params: &[req("x", Array), req("names", Names)],
        summary: "name the axes of x",
        doc: "`label(x, names)` returns x with its axes named; `names` is a list of strings (\"\" leaves an axis unnamed) or one comma-separated string as `labels` returns. E0209 when the count differs from the rank; W0201 for a duplicate name.",
        example: "labels(label(zeros([2, 3]), [\"batch\", \"feat\"]))",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.11",
        run: label,
        shape: Some(super::axes_shapes::label),
    },
    Builtin {
        name: "relabel",
        params: &[req("x", Array), req("names", Names)],
        summary: "rename the axes of x",
        doc: "`relabel(x, names)` is identical to `label`: it replaces any existing names.",
        example: "x : [a, b] = zeros([2, 3])\nlabels(relabel(x, [\"rows\", \"\"]))",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.11",
        run: label,
        shape: Some(super::axes_shapes::label),
    },
    Builtin {
        name: "reshape_labeled",
        params: &[req("x", Array), req("dims", Array), req("names", Names)],
        summary: "reshape, then name the axes",
        doc: "`reshape_labeled(x, dims, names)` is `label(reshape(x, dims), names)`.",
        example: "labels(reshape_labeled(iota(6), [2, 3], [\"r\", \"c\"]))",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.11",
        run: reshape_labeled,
        shape: Some(super::axes_shapes::reshape_labeled),
    },
    Builtin {
        name: "labels",
        params: &[req("x", Array)],
        summary: "the axis names as a comma-separated string",
        doc: "`labels(x)` returns the names joined with `,`, an empty segment per unnamed axis: `\"batch,feat\"`, `\",\"` for an unnamed matrix, `\"\"` for a scalar or unnamed vector.",
        example: "M : [batch, feat] = zeros([2, 3])\nlabels(M)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.11",
        run: labels,
        shape: Some(super::axes_shapes::labels),
    },
];

/// The names argument, treating `""` given as one string for a vector as one
/// unnamed axis (the form `labels` returns for it).
fn names_for(c: &Call, i: usize, rank: usize) -> Vec<Option<String>> {
    let names = c.names(i).to_vec();
    let is_list = matches!(c.args[i].expr.unparen().kind, ExprKind::List(_));
    if names.is_empty() && rank == 1 && !is_list {
        return vec![None];
    }
    names
}

fn label(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let names = names_for(c, 1, x.rank());
    let span = c.arg_span(1);
    Ok(Value::Array(ops::label(c.it, x, names, span)?))
}

fn reshape_labeled(c: &mut Call) -> Result<Value, Diagnostic> {
    // Reuse `reshape`'s rules (E0210, E0213) by calling it on the first two arguments.
    let reshape = super::lookup("reshape").expect("reshape is registered");
    let args = c.args[..2].to_vec();
    let mut inner = Call {
        it: &mut *c.it,
        builtin: reshape,
        span: c.span,
        name_span: c.name_span,
        args,
    };
    let Value::Array(shaped) = (reshape.run)(&mut inner)? else {
        unreachable!()
    };
    let names = names_for(c, 2, shaped.rank());
    let span = c.arg_span(2);
    Ok(Value::Array(ops::label(c.it, shaped, names, span)?))
}

fn labels(c: &mut Call) -> Result<Value, Diagnostic> {
    let x: &Array = c.array(0)?;
    let s = match x.names() {
        None if x.rank() <= 1 => String::new(),
        None => vec![""; x.rank()].join(","),
        Some(n) => n
            .iter()
            .map(|s| s.as_deref().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(","),
    };
    Ok(Value::string(s))
}
