//! Reductions and selection (LANGUAGE §10.2).

use super::site::CallSite;
use mlpl_devices::ReduceOp;

use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::eval::{ops, Call};
use crate::value::{named_shape, Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "reduce_add",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "sum of elements, optionally along an axis",
        doc: "`reduce_add(x)` sums all elements (0 when empty); `reduce_add(x, axis)` sums along one axis. Same as `sum`.",
        example: "reduce_add(reshape(iota(6), [2, 3]), 1)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.2",
        run: sum,
        shape: Some(super::reduce_shapes::sum),
    },
    Builtin {
        name: "sum",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "sum of elements, optionally along an axis",
        doc: "`sum(x)` / `sum(x, axis)`: the same as `reduce_add`.",
        example: "M : [batch, feat] = reshape(iota(6), [2, 3])\nsum(M, \"batch\")",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.2",
        run: sum,
        shape: Some(super::reduce_shapes::sum),
    },
    Builtin {
        name: "reduce_mul",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "product of elements, optionally along an axis",
        doc: "`reduce_mul(x)` multiplies all elements (1 when empty); with an axis, along that axis.",
        example: "reduce_mul([1, 2, 3, 4])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.2",
        run: prod,
        shape: Some(super::reduce_shapes::prod),
    },
    Builtin {
        name: "mean",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "mean of elements, optionally along an axis",
        doc: "`mean(x)` is the sum divided by max(n, 1); `mean(x, axis)` averages along one axis.",
        example: "mean([[1, 2], [3, 4]], 0)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.2",
        run: mean,
        shape: Some(super::reduce_shapes::mean),
    },
    Builtin {
        name: "argmax",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "index of the first maximum",
        doc: "`argmax(x)` is the row-major flat index of the first maximum; `argmax(x, axis)` the index along an axis. E0216 for an empty array or axis.",
        example: "argmax([[1, 5, 2], [7, 0, 3]], 1)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.2",
        run: argmax,
        shape: Some(super::reduce_shapes::argmax),
    },
    Builtin {
        name: "argtop_k",
        params: &[req("v", Array), req("k", Scalar)],
        summary: "indices of the k largest values",
        doc: "`argtop_k(v, k)` returns the indices of the k largest entries of the vector v in descending order of value; equal values keep index order. E0205 unless v is a vector; E0401 unless 0 ≤ k ≤ N.",
        example: "argtop_k([0.1, 2, -1, 0.5], 2)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.2",
        run: argtop_k,
        shape: Some(super::reduce_shapes::argtop_k),
    },
];

fn optional_axis(c: &Call, x: &Array) -> Result<Option<usize>, Diagnostic> {
    if c.has(1) {
        Ok(Some(c.axis(1, x)?))
    } else {
        Ok(None)
    }
}

fn reduction(c: &mut Call, op: ReduceOp) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let axis = optional_axis(c, &x)?;
    Ok(Value::Array(ops::reduce(c.it, op, &x, axis, c.span)?))
}

fn sum(c: &mut Call) -> Result<Value, Diagnostic> {
    reduction(c, ReduceOp::Sum)
}

fn prod(c: &mut Call) -> Result<Value, Diagnostic> {
    reduction(c, ReduceOp::Prod)
}

fn mean(c: &mut Call) -> Result<Value, Diagnostic> {
    reduction(c, ReduceOp::Mean)
}

fn argmax(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let axis = optional_axis(c, &x)?;
    let empty = match axis {
        Some(ax) => x.shape()[ax] == 0,
        None => x.numel() == 0,
    };
    if empty {
        return Err(super::site::empty_argmax(c, &named_shape(&x)));
    }
    if x.is_exact() {
        return Ok(Value::exact(0.0));
    }
    let (backend, placement) = ops::placement_for(c.it, "argmax", &[(&x, c.span)])?;
    let t = backend
        .argmax(&x.tensor(), axis)
        .map_err(|e| crate::errors::device_error(e, "argmax", c.span))?;
    let names = axis.and_then(|ax| {
        x.names().map(|n| {
            n.iter()
                .enumerate()
                .filter(|(i, _)| *i != ax)
                .map(|(_, s)| s.clone())
                .collect()
        })
    });
    Ok(Value::Array(
        Array::from_tensor(t)
            .with_names(names)
            .with_placement(placement),
    ))
}

fn argtop_k(c: &mut Call) -> Result<Value, Diagnostic> {
    let v = c.array_of_rank(0, 1, "a vector `[N]`")?.to_f32();
    let k = c.scalar(1)?;
    if k.fract() != 0.0 || !(k >= 0.0 && k <= v.len() as f64) {
        return Err(c.invalid(1, format!("k must be an integer in 0..={}", v.len())));
    }
    let idx =
        crate::data::sampling::argtop_k(&v, k as usize).map_err(|e| c.invalid(1, e.to_string()))?;
    Ok(Value::Array(Array::from_vec(
        vec![idx.len()],
        idx.iter().map(|&i| i as f32).collect(),
    )))
}
