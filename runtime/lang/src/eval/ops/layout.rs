//! Building and rearranging arrays: zeros, axis names, rows, array literals,
//! reshape, permute and concat.

use mlpl_diag::{Diagnostic, Span};

use super::*;
use crate::errors::{
    duplicate_name_warning, first_duplicate, label_count_error, literal_in_loss_error,
    stack_shape_error,
};
use crate::eval::{loss, Interp};
use crate::value::{named_shape, Array};

/// Zeros of `shape` on the active device.
pub fn zeros(_it: &mut Interp, shape: Vec<usize>, span: Span) -> Result<Array, Diagnostic> {
    check_size("zeros", &shape, span)?;
    let n = shape.iter().product();
    Ok(Array::from_vec(shape, try_filled("zeros", n, 0.0, span)?))
}

/// Attaches axis names (E0209 on a count mismatch, W0201 on duplicates).
pub fn label(
    it: &mut Interp,
    a: Array,
    names: Vec<Option<String>>,
    span: Span,
) -> Result<Array, Diagnostic> {
    if names.len() != a.rank() {
        return Err(label_count_error(
            span,
            names.len(),
            &named_shape(&a),
            a.rank(),
        ));
    }
    if let Some(n) = first_duplicate(&names) {
        it.warn(duplicate_name_warning(span, n));
    }
    Ok(a.with_names(Some(names)))
}

/// Row `r` along axis 0, with the names of axes 1.. (used by `for`).
pub fn row(_it: &mut Interp, a: &Array, r: usize) -> Result<Array, Diagnostic> {
    let shape = a.shape()[1..].to_vec();
    let n: usize = shape.iter().product();
    let t = a.tensor();
    let data = t.host()[r * n..(r + 1) * n].to_vec();
    let names = a.names().map(|ns| ns[1..].to_vec());
    Ok(Array::from_vec(shape, data)
        .with_names(names)
        .with_placement(a.placement()))
}

/// Stacks arrays of one shape along a new leading axis (array literals, `last_rows`).
/// Element names are dropped. Different shapes are E0218.
pub fn stack(it: &mut Interp, items: &[(Array, Span)], span: Span) -> Result<Array, Diagnostic> {
    let Some((first, _)) = items.first() else {
        return Ok(Array::from_vec(vec![0], vec![]));
    };
    if let Some((_, s)) = items.iter().find(|(a, _)| loss::live(it, a).is_some()) {
        return Err(literal_in_loss_error(*s));
    }
    let inner = first.shape().to_vec();
    let n: usize = inner.iter().product();
    check_size("stack", &[items.len(), n], span)?;
    let mut data = Vec::with_capacity(n * items.len());
    for (a, s) in items {
        if a.shape() != inner.as_slice() {
            return Err(stack_shape_error(
                (*s, &named_shape(a)),
                (items[0].1, &named_shape(first)),
            )
            .or_at(span));
        }
        data.extend_from_slice(&a.to_f32());
    }
    let mut shape = vec![items.len()];
    shape.extend(inner);
    Ok(Array::from_vec(shape, data))
}

/// The same elements with a new shape (names cleared); differentiable.
pub fn reshape(
    it: &mut Interp,
    a: &Array,
    shape: Vec<usize>,
    span: Span,
) -> Result<Array, Diagnostic> {
    let placement = a.placement();
    if let Some(v) = loss::live(it, a) {
        return Ok(
            loss::record(it, "reshape", span, |t| t.reshape(v, shape))?.with_placement(placement)
        );
    }
    Ok(Array::from_tensor(a.tensor().reshape(shape)).with_placement(placement))
}

/// Axis permutation: result axis i is axis `perm[i]` of `a`; names follow.
pub fn permute(
    it: &mut Interp,
    a: &Array,
    perm: &[usize],
    span: Span,
) -> Result<Array, Diagnostic> {
    let names = a
        .names()
        .map(|n| perm.iter().map(|&p| n[p].clone()).collect());
    let out = one_operand(
        it,
        "transpose",
        a,
        span,
        |t, v| t.permute(v, perm),
        |b, x| b.permute(x, perm),
    )?;
    Ok(out.with_names(names))
}

/// Joins two vectors; differentiable.
pub fn concat(it: &mut Interp, a: &Array, b: &Array, span: Span) -> Result<Array, Diagnostic> {
    let (a1, b1) = (a.numel(), b.numel());
    check_size("concat", &[a1.saturating_add(b1)], span)?;
    if loss::any_live(it, &[a, b]) {
        let (va, vb) = (loss::var_of(it, a), loss::var_of(it, b));
        return loss::record(it, "concat", span, |t| {
            let va = if t.shape(va).len() != 1 {
                t.reshape(va, vec![a1])?
            } else {
                va
            };
            let vb = if t.shape(vb).len() != 1 {
                t.reshape(vb, vec![b1])?
            } else {
                vb
            };
            t.concat(va, vb)
        });
    }
    let mut data = a.to_f32();
    data.extend(b.to_f32());
    Ok(Array::from_vec(vec![data.len()], data))
}
