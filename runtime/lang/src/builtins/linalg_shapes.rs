//! Shape rules of `dot` and `matmul` (LANGUAGE §10.4), next to their runtime
//! implementations in `linalg.rs`, with the same diagnostics.

use super::linalg::{
    batch_axes_error, contraction_names_error, inner_dims_error, scalar_operand_error,
};
use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, AxisName, Dim};
use crate::check::broadcast::{self, origin_label, Operand};
use crate::check::ctx::ShapeCtx;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// `dot(a, b)`: a scalar; E0205 unless both are vectors, E0203 for different
/// lengths.
pub fn dot(c: &mut ShapeCtx) -> Rule {
    let a = c.array_of_rank(0, 1, "a vector `[n]`")?;
    let b = c.array_of_rank(1, 1, "a vector `[n]`")?;
    if let (Some(a), Some(b)) = (&a, &b) {
        if let (Some(da), Some(db)) = (&a.dims, &b.dims) {
            if let (Dim::Known(ka), Dim::Known(kb)) = (&da[0], &db[0]) {
                if ka != kb {
                    return Err(inner_dims_error(
                        "dot",
                        (c.arg_span(0), &a.shape_text()),
                        (c.arg_span(1), &b.shape_text()),
                        1,
                        *ka,
                        *kb,
                        false,
                    ));
                }
            }
        }
    }
    Ok(AbsValue::any_scalar())
}

/// `matmul(a, b)`: the forms of LANGUAGE §10.4; E0205, E0203, E0204, then the
/// batch axes' E0201 / E0202, then E0501, in the interpreter's order.
pub fn matmul(c: &mut ShapeCtx) -> Rule {
    let a = c.array(0)?.unwrap_or_else(AbsArray::unknown);
    let b = c.array(1)?.unwrap_or_else(AbsArray::unknown);
    matmul_of(
        "matmul",
        Operand {
            array: &a,
            expr: c.args[0].expr,
        },
        Operand {
            array: &b,
            expr: c.args[1].expr,
        },
    )
    .map(AbsValue::Array)
}

/// The abstract `matmul` of two operands (`op` names it in messages).
pub fn matmul_of(op: &str, l: Operand<'_>, r: Operand<'_>) -> Result<AbsArray, Diagnostic> {
    let (a, b) = (l.array, r.array);
    let (sa, sb) = (l.expr.span, r.expr.span);
    for (x, s) in [(a, sa), (b, sb)] {
        if x.rank() == Some(0) {
            return Err(scalar_operand_error(op, s, &x.shape_text()));
        }
    }
    let (Some(da), Some(db)) = (&a.dims, &b.dims) else {
        return Ok(AbsArray::unknown());
    };
    let ka = &da[da.len() - 1];
    let kb_axis = if db.len() == 1 { 0 } else { db.len() - 2 };
    let kb = &db[kb_axis];
    if let (Dim::Known(x), Dim::Known(y)) = (ka, kb) {
        if x != y {
            let transposed = db.len() == 2 && db[1] == Dim::Known(*x);
            let d = inner_dims_error(
                op,
                (sa, &a.shape_text()),
                (sb, &b.shape_text()),
                db.len(),
                *x,
                *y,
                transposed,
            );
            return Err(origin_label(
                origin_label(d, l, "left operand"),
                r,
                "right operand",
            ));
        }
    }
    if !ka.provably_eq(kb) {
        // The run may fail with E0203 here: names and batch axes say nothing more.
        return Ok(result(a, b, da, db, None));
    }
    if let (AxisName::Named(na), AxisName::Named(nb)) =
        (a.name_of(da.len() - 1), b.name_of(kb_axis))
    {
        if na != nb {
            let d =
                contraction_names_error(op, (sa, &a.shape_text()), (sb, &b.shape_text()), na, nb);
            return Err(origin_label(
                origin_label(d, l, "left operand"),
                r,
                "right operand",
            ));
        }
    }
    let batch = |x: &AbsArray, d: &[Dim]| -> AbsArray {
        let n = if d.len() == 1 { 0 } else { d.len() - 2 };
        let mut out = AbsArray::of_dims(d[..n].to_vec());
        out.names = x.names[..n.min(x.names.len())].to_vec();
        out.origin = x.origin;
        out
    };
    let (ba, bb) = (batch(a, da), batch(b, db));
    let bl = Operand {
        array: &ba,
        expr: l.expr,
    };
    let br = Operand {
        array: &bb,
        expr: r.expr,
    };
    let merged = broadcast::broadcast(op, bl, br).map_err(|d| {
        let d = batch_axes_error(d, (sa, &a.shape_text()), (sb, &b.shape_text()));
        origin_label(origin_label(d, l, "left operand"), r, "right operand")
    })?;
    if merged.certain {
        if let (Some(ta), Some(tb)) = (a.placed, b.placed) {
            if ta != tb {
                let s = sa.to(sb);
                return Err(crate::errors::device_mismatch_error(
                    op,
                    ("left operand", ta, s),
                    ("right operand", tb, s),
                ));
            }
        }
    }
    Ok(result(a, b, da, db, Some(merged.array)))
}

/// The result of `matmul`: batch axes (merged, when known), then the row axis of
/// `a` and the column axis of `b`.
fn result(a: &AbsArray, b: &AbsArray, da: &[Dim], db: &[Dim], batch: Option<AbsArray>) -> AbsArray {
    let batch_rank = da.len().saturating_sub(2).max(db.len().saturating_sub(2));
    let (mut dims, mut names) = match batch.and_then(|x| x.dims.clone().map(|d| (d, x.names))) {
        Some((d, n)) => (d, n),
        None => (
            vec![Dim::Unknown; batch_rank],
            vec![AxisName::Unknown; batch_rank],
        ),
    };
    if da.len() >= 2 {
        dims.push(da[da.len() - 2].clone());
        names.push(a.name_of(da.len() - 2).clone());
    }
    if db.len() >= 2 {
        dims.push(db[db.len() - 1].clone());
        names.push(b.name_of(db.len() - 1).clone());
    }
    let mut out = AbsArray::of_dims(dims);
    out.names = names;
    out.origin = if a.has_named_axis() {
        a.origin
    } else {
        b.origin
    };
    out.placed = a.placed.or(b.placed);
    out
}
