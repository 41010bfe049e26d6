//! Selection, clamping, slicing and permutation (docs/language.md): `where`,
//! `clamp`, `slice` and `permute`. Each keeps axis names and is
//! differentiable.

use super::ParamKind::*;
use super::{opt, req, rest, Builtin, Diff, Facts};
use crate::eval::{ops, Call};
use crate::value::{named_shape, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "where",
        params: &[req("cond", Array), req("a", Array), req("b", Array)],
        summary: "a where cond ≠ 0, else b, broadcasting",
        doc: "`where(cond, a, b)` takes each element from `a` where `cond` is non-zero (NaN counts as true) and from `b` elsewhere. The three broadcast together with axis-name unification, checked pair by pair (E0201, E0202). Only the chosen operand is read, so `where(m, x, -inf)` holds no NaN. Differentiable in `a` and `b`; `cond` gets no gradient.",
        example: "x : [t] = [-2, 0.5, 3]\nwhere(gt(x, 0), x, 0.1 * x)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.3",
        run: select,
        shape: Some(super::select_shapes::select),
    },
    Builtin {
        name: "clamp",
        params: &[req("x", Array), req("lo", Scalar), req("hi", Scalar)],
        summary: "x limited to [lo, hi] element-wise",
        doc: "`clamp(x, lo, hi)` = `minimum(maximum(x, lo), hi)` for scalar bounds, with x's shape and names (so `hi` wins when lo > hi, as in PyTorch). The gradient is PyTorch's: the incoming gradient where lo ≤ x ≤ hi, 0 elsewhere.",
        example: "clamp([-3, 0.5, 9], -1, 1)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.3",
        run: clamp,
        shape: Some(super::select_shapes::clamp),
    },
    Builtin {
        name: "slice",
        params: &[req("x", Array), req("axis", Axis), req("start", Scalar), req("stop", Scalar), opt("step", Scalar)],
        summary: "the positions start, start + step, … before stop along one axis",
        doc: "`slice(x, axis, start, stop [, step])` keeps positions start, start + step, … below stop of one axis (a number, negative from the end, or a name), like Python's `x[start:stop:step]` on that axis; every axis keeps its name. Negative bounds count from the end; a bound past either end or a start after the stop is E0220 (not clipped), a step below 1 is E0401. Differentiable: the gradient is written back into zeros at the sliced positions.",
        example: "x : [time, feat] = reshape(iota(12), [4, 3])\nslice(x, \"time\", 1, -1)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: slice,
        shape: Some(super::select_shapes::slice),
    },
    Builtin {
        name: "permute",
        params: &[req("x", Array), rest("axes", Axis)],
        summary: "reorder the axes of x, names kept",
        doc: "`permute(x, axes…)` lists every axis of x once, by number (negative from the end) or by name, in its new order: result axis i is the i-th axis given, with its size and name. E0221 unless every axis is given exactly once. Differentiable (the gradient is permuted back).",
        example: "x : [batch, time, feat] = zeros([2, 3, 4])\nlabels(permute(x, \"time\", 0, -1))",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: permute,
        shape: Some(super::select_shapes::permute),
    },
];

fn select(c: &mut Call) -> Result<Value, Diagnostic> {
    let (cond, a, b) = (
        c.array(0)?.clone(),
        c.array(1)?.clone(),
        c.array(2)?.clone(),
    );
    let args = [
        (&cond, c.args[0].expr),
        (&a, c.args[1].expr),
        (&b, c.args[2].expr),
    ];
    Ok(Value::Array(ops::select(c.it, args, c.span)?))
}

fn clamp(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let (lo, hi) = (c.scalar(1)?, c.scalar(2)?);
    Ok(Value::Array(ops::clamp(c.it, &x, lo, hi, c.span)?))
}

/// How messages name axis `axis` of an array with `names`.
pub(super) fn axis_text(axis: usize, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("axis `{n}`"),
        None => format!("axis {axis}"),
    }
}

fn slice(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let axis = c.axis(1, &x)?;
    let (start, stop) = (c.integer(2)?, c.integer(3)?);
    let step = if c.has(4) { c.integer(4)? } else { 1 };
    let text = axis_text(axis, x.axis_name(axis));
    let (first, step, len) =
        super::site::slice_range(c, &text, x.shape()[axis], start, stop, step)?;
    Ok(Value::Array(ops::slice(
        c.it, &x, axis, first, step, len, c.span,
    )?))
}

fn permute(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let axes = (1..c.len())
        .map(|i| c.axis(i, &x))
        .collect::<Result<Vec<_>, _>>()?;
    super::site::check_permutation(c, x.rank(), &named_shape(&x), &axes)?;
    Ok(Value::Array(ops::permute(c.it, &x, &axes, c.span)?))
}
