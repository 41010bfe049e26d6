//! Shape rules of `where`, `clamp`, `slice` and `permute`, next to their
//! runtime implementations in `select.rs`: the same broadcasting, bounds and
//! permutation checks, with names kept.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, Dim};
use crate::check::broadcast::{self, Operand};
use crate::check::ctx::ShapeCtx;
use crate::value::scalar::binary_f64;
use mlpl_devices::BinaryOp;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// `where(cond, a, b)`: the pairs a–b, cond–a and cond–b broadcast (E0201,
/// E0202, E0501 in that order, as at run time); the joint shape and names.
pub fn select(c: &mut ShapeCtx) -> Rule {
    let arrays: Vec<AbsArray> = (0..3)
        .map(|i| Ok(c.array(i)?.unwrap_or_else(AbsArray::unknown)))
        .collect::<Result<_, Diagnostic>>()?;
    let op = |i: usize| Operand {
        array: &arrays[i],
        expr: c.args[i].expr,
    };
    let mut certain = true;
    let mut joint = Vec::new();
    for (l, r) in [(1, 2), (0, 1), (0, 2)] {
        let b = broadcast::broadcast("where", op(l), op(r))?;
        certain &= b.certain;
        joint.push(b.array);
    }
    if certain {
        for (l, r) in [(1, 2), (0, 1), (0, 2)] {
            broadcast::placement("where", op(l), op(r))?;
        }
    }
    let (ab, ca) = (&joint[0], &joint[1]);
    let out = broadcast::broadcast(
        "where",
        Operand {
            array: ab,
            expr: c.args[1].expr,
        },
        Operand {
            array: ca,
            expr: c.args[0].expr,
        },
    )?;
    Ok(AbsValue::Array(out.array))
}

/// `clamp(x, lo, hi)`: x's shape and names, folded when constant.
pub fn clamp(c: &mut ShapeCtx) -> Rule {
    let (lo, hi) = (c.scalar(1)?, c.scalar(2)?);
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    let exact = x.rank() == Some(0);
    let folded = match (&x.constant, lo, hi) {
        (Some(v), Some(lo), Some(hi)) => Some(
            v.iter()
                .map(|&e| {
                    let (e, lo, hi) = if exact {
                        (e, lo, hi)
                    } else {
                        (e as f32 as f64, lo as f32 as f64, hi as f32 as f64)
                    };
                    binary_f64(BinaryOp::Min, binary_f64(BinaryOp::Max, e, lo), hi)
                })
                .collect(),
        ),
        _ => None,
    };
    Ok(AbsValue::Array(x.with_constant(folded)))
}

/// `slice(x, axis, start, stop [, step])`: x with the axis's size replaced by
/// the slice's length (E0220 and E0401 when the bounds are known to be wrong).
pub fn slice(c: &mut ShapeCtx) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    let axis = c.axis(1, &x)?;
    let (start, stop) = (c.integer(2)?, c.integer(3)?);
    let step = if c.has(4) { c.integer(4)? } else { Some(1) };
    if let Some(s) = step.filter(|&s| s < 1) {
        return Err(c.invalid(
            4,
            format!("step {s}: a slice's step must be a positive integer"),
        ));
    }
    let mut out = x.clone().with_constant(None);
    let Some(dims) = out.dims.as_mut() else {
        return Ok(AbsValue::Array(out));
    };
    let Some(axis) = axis else {
        // Which axis shrinks is not known: every size is.
        dims.iter_mut().for_each(|d| *d = Dim::Unknown);
        return Ok(AbsValue::Array(out));
    };
    let len = match (dims[axis].known(), start, stop, step) {
        (Some(size), Some(start), Some(stop), Some(step)) => {
            let text = super::select::axis_text(axis, x.name_of(axis).named());
            let (_, _, len) = super::site::slice_range(c, &text, size, start, stop, step)?;
            Dim::Known(len)
        }
        _ => Dim::Unknown,
    };
    dims[axis] = len;
    Ok(AbsValue::Array(out))
}

/// `permute(x, axes…)`: the axes reordered with their sizes and names
/// (E0221 unless the axes given are a permutation).
pub fn permute(c: &mut ShapeCtx) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    let axes: Vec<Option<usize>> = (1..c.len())
        .map(|i| c.axis(i, &x))
        .collect::<Result<_, _>>()?;
    let (Some(dims), Some(rank)) = (&x.dims, x.rank()) else {
        return Ok(AbsValue::any_array());
    };
    let Some(axes) = axes.into_iter().collect::<Option<Vec<usize>>>() else {
        // Some axis is not known: the rank is, when the count is right.
        let mut out = AbsArray::of_dims(vec![Dim::Unknown; rank]);
        out.placed = x.placed;
        return Ok(AbsValue::Array(out));
    };
    super::site::check_permutation(c, rank, &x.shape_text(), &axes)?;
    let mut out = AbsArray::of_dims(axes.iter().map(|&a| dims[a].clone()).collect());
    out.names = axes.iter().map(|&a| x.name_of(a).clone()).collect();
    out.origin = x.origin;
    out.placed = x.placed;
    Ok(AbsValue::Array(out))
}
