//! Reductions along an axis or over everything, with the axis name removed:
//! sum, mean, product, maximum, and logsumexp.

use mlpl_devices::ReduceOp;
use mlpl_diag::{Diagnostic, Span};

use super::*;
use crate::errors::device_error;
use crate::eval::{loss, Interp};
use crate::value::{Array, Names};

/// A reduction along an axis (names of the other axes kept) or over everything.
pub fn reduce(
    it: &mut Interp,
    op: ReduceOp,
    a: &Array,
    axis: Option<usize>,
    span: Span,
) -> Result<Array, Diagnostic> {
    if let Some(v) = a.exact_value() {
        return Ok(Array::exact(v));
    }
    check_reduced(a, axis, span)?;
    let (backend, placement) = placement_for(it, "reduce", &[(a, span)])?;
    let t = match loss::live(it, a) {
        Some(v) if op != ReduceOp::Max => {
            let arr = loss::record(it, "reduce", span, |t| match op {
                ReduceOp::Sum => t.sum(v, axis),
                ReduceOp::Mean => t.mean(v, axis),
                ReduceOp::Prod => t.prod(v, axis),
                ReduceOp::Max => unreachable!(),
            })?;
            return Ok(arr
                .with_names(reduced_names(a, axis))
                .with_placement(placement));
        }
        _ => backend
            .reduce(op, &a.tensor(), axis)
            .map_err(|e| device_error(e, "reduce", span))?,
    };
    Ok(Array::from_tensor(t)
        .with_names(reduced_names(a, axis))
        .with_placement(placement))
}

/// E0410 when reducing an axis of `a` would create a result too large: an
/// empty array can have huge other axes (`sum(zeros([1e20, 0]), 1)`).
fn check_reduced(a: &Array, axis: Option<usize>, span: Span) -> Result<(), Diagnostic> {
    if let Some(ax) = axis {
        let mut shape = a.shape().to_vec();
        if ax < shape.len() {
            shape.remove(ax);
            check_size("reduce", &shape, span)?;
        }
    }
    Ok(())
}

/// The names of `a` without the reduced axis (none for a full reduction).
pub(super) fn reduced_names(a: &Array, axis: Option<usize>) -> Names {
    let ax = axis?;
    a.names().map(|n| {
        n.iter()
            .enumerate()
            .filter(|(i, _)| *i != ax)
            .map(|(_, x)| x.clone())
            .collect()
    })
}

/// `log Σ exp(a)` along `axis` (removed, with its name), or over every element
/// when `axis` is `None` (a scalar). An exact scalar is its own logsumexp.
pub fn logsumexp(
    it: &mut Interp,
    a: &Array,
    axis: Option<usize>,
    span: Span,
) -> Result<Array, Diagnostic> {
    if let Some(v) = a.exact_value() {
        return Ok(Array::exact(v));
    }
    check_reduced(a, axis, span)?;
    let (x, ax) = match axis {
        Some(ax) => (a.clone(), ax),
        None => (reshape(it, a, vec![a.numel()], span)?, 0),
    };
    let out = one_operand(
        it,
        "logsumexp",
        &x,
        span,
        |t, v| t.logsumexp(v, ax),
        |b, x| b.logsumexp(x, ax),
    )?;
    Ok(out.with_names(reduced_names(a, axis)))
}
