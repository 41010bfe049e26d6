//! Selection, clamping and slicing with the language's rules: `where`
//! broadcasts its three operands with name unification (LANGUAGE §9, each
//! pair checked as a binary operation would be), `clamp` and `slice` keep
//! names and placement; all three are differentiable.

use mlpl_devices::{BinaryOp, Tensor};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

use super::*;
use crate::eval::{loss, Interp};
use crate::value::{Array, Names};

/// `where(cond, a, b)`: `a` where `cond` ≠ 0, else `b`, broadcast together.
/// `args` are the three operands with their expressions; E0201 / E0202 name
/// the first pair (a–b, cond–a, cond–b) that does not broadcast.
pub fn select(
    it: &mut Interp,
    args: [(&Array, &Expr); 3],
    span: Span,
) -> Result<Array, Diagnostic> {
    let name = "where";
    let [(c, ce), (a, ae), (b, be)] = args;
    if let (Some(cv), Some(av), Some(bv)) = (c.exact_value(), a.exact_value(), b.exact_value()) {
        return Ok(Array::exact(if cv != 0.0 { av } else { bv }));
    }
    let pair = |l: (&Array, &Expr), r: (&Array, &Expr)| {
        broadcast(
            name,
            &Operands {
                left: l.0,
                left_expr: l.1,
                right: r.0,
                right_expr: r.1,
            },
        )
    };
    let ab = pair((a, ae), (b, be))?;
    let ca = pair((c, ce), (a, ae))?;
    pair((c, ce), (b, be))?;
    let (shape, names) = merge(ab, ca);
    check_size(name, &shape, span)?;
    let (backend, placement) =
        placement_for(it, name, &[(c, ce.span), (a, ae.span), (b, be.span)])?;
    let out = if loss::any_live(it, &[a, b]) {
        let (vc, va, vb) = (
            loss::var_of(it, c),
            loss::var_of(it, a),
            loss::var_of(it, b),
        );
        loss::record(it, name, span, |t| t.select(vc, va, vb))?
    } else {
        let t = backend
            .select(&c.tensor(), &a.tensor(), &b.tensor())
            .map_err(|e| crate::errors::device_error(e, name, span))?;
        Array::from_tensor(t)
    };
    Ok(out.with_names(names).with_placement(placement))
}

/// The joint shape and names of two broadcasts that share an operand (so
/// they agree wherever both have an axis): the larger size and the first
/// name of each axis, aligned at the end.
fn merge((s1, n1): (Vec<usize>, Names), (s2, n2): (Vec<usize>, Names)) -> (Vec<usize>, Names) {
    let rank = s1.len().max(s2.len());
    let at = |s: &[usize], k: usize| (k < s.len()).then(|| s[s.len() - 1 - k]);
    let name_at = |n: &Names, len: usize, k: usize| {
        n.as_ref()
            .and_then(|n| (k < len).then(|| n[len - 1 - k].clone()))
            .flatten()
    };
    let mut shape = vec![0; rank];
    let mut names = vec![None; rank];
    for k in 0..rank {
        shape[rank - 1 - k] = match (at(&s1, k), at(&s2, k)) {
            (Some(x), Some(y)) => {
                if x == 1 {
                    y
                } else {
                    x
                }
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => unreachable!(),
        };
        names[rank - 1 - k] = name_at(&n1, s1.len(), k).or_else(|| name_at(&n2, s2.len(), k));
    }
    (shape, crate::value::normalize_names(Some(names), rank))
}

/// `clamp(x, lo, hi)` = `minimum(maximum(x, lo), hi)` for scalar bounds, with
/// `x`'s names and placement; the gradient is PyTorch's (`g` where
/// lo ≤ x ≤ hi).
pub fn clamp(
    it: &mut Interp,
    x: &Array,
    lo: f64,
    hi: f64,
    span: Span,
) -> Result<Array, Diagnostic> {
    use crate::value::scalar::binary_f64;
    if let Some(v) = x.exact_value() {
        let low = binary_f64(BinaryOp::Max, v, lo);
        return Ok(Array::exact(binary_f64(BinaryOp::Min, low, hi)));
    }
    let (lo32, hi32) = (lo as f32, hi as f32);
    let out = one_operand(
        it,
        "clamp",
        x,
        span,
        |t, v| t.clamp(v, lo32, hi32),
        |b, t| {
            let low = b.binary(BinaryOp::Max, t, &Tensor::scalar(lo32))?;
            b.binary(BinaryOp::Min, &low, &Tensor::scalar(hi32))
        },
    )?;
    Ok(out.with_names(x.names().map(|n| n.to_vec())))
}

/// The `len` positions `start, start + step, …` of `x` along `axis` (already
/// checked against the axis), with `x`'s names and placement.
pub fn slice(
    it: &mut Interp,
    x: &Array,
    axis: usize,
    start: usize,
    step: usize,
    len: usize,
    span: Span,
) -> Result<Array, Diagnostic> {
    let out = one_operand(
        it,
        "slice",
        x,
        span,
        |t, v| t.slice_axis(v, axis, start, step, len),
        |b, t| b.slice_axis(t, axis, start, step, len),
    )?;
    Ok(out.with_names(x.names().map(|n| n.to_vec())))
}

/// `concat(a, b, axis)`: `a` and `b` joined along `axis` (already checked:
/// one rank, every other axis equal), with the names of `a` where it has
/// them, else of `b`.
pub fn concat_axis(
    it: &mut Interp,
    a: &Array,
    b: &Array,
    axis: usize,
    span: Span,
) -> Result<Array, Diagnostic> {
    let name = "concat";
    let mut shape = a.shape().to_vec();
    shape[axis] += b.shape()[axis];
    check_size(name, &shape, span)?;
    let (backend, placement) = placement_for(it, name, &[(a, span), (b, span)])?;
    let names: Vec<Option<String>> = (0..a.rank())
        .map(|i| a.axis_name(i).or(b.axis_name(i)).map(str::to_string))
        .collect();
    let out = if loss::any_live(it, &[a, b]) {
        let (va, vb) = (loss::var_of(it, a), loss::var_of(it, b));
        loss::record(it, name, span, |t| t.concat_axis(va, vb, axis))?
    } else {
        let dev = |e| crate::errors::device_error(e, name, span);
        let na = a.shape()[axis];
        let pa = backend
            .unslice_axis(&a.tensor(), &shape, axis, 0, 1)
            .map_err(dev)?;
        let pb = backend
            .unslice_axis(&b.tensor(), &shape, axis, na, 1)
            .map_err(dev)?;
        Array::from_tensor(backend.binary(BinaryOp::Add, &pa, &pb).map_err(dev)?)
    };
    let rank = shape.len();
    Ok(out
        .with_names(crate::value::normalize_names(Some(names), rank))
        .with_placement(placement))
}
