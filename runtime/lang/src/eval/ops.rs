//! Array operations with the language's rules: exact-scalar arithmetic in float64,
//! named-axis broadcasting (LANGUAGE §9), placement checks (§14.4), and dispatch to
//! the device backend. Builtins and operators call these; nothing here parses.

use std::sync::Arc;

use mlpl_devices::{Backend, BinaryOp, ReduceOp, Tensor, UnaryOp};

use super::{loss, Interp};
use crate::errors::{
    broadcast_name_error, broadcast_size_error, device_error, device_mismatch_error,
    duplicate_name_warning, first_duplicate, label_count_error, literal_in_loss_error,
    relabel_help, stack_shape_error,
};
use crate::value::scalar::{binary_f64, unary_f64};
use crate::value::{named_shape, Array, Names, Placement};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{Expr, ExprKind};

/// The two operands of a binary operation, with the expressions they came from.
pub struct Operands<'a> {
    /// Left operand.
    pub left: &'a Array,
    /// Its expression.
    pub left_expr: &'a Expr,
    /// Right operand.
    pub right: &'a Array,
    /// Its expression.
    pub right_expr: &'a Expr,
}

/// Chooses where an operation runs (LANGUAGE §14.4): the common placement of its
/// placed operands (E0501 if they differ), otherwise the active device.
pub fn placement_for(
    it: &Interp,
    op: &str,
    operands: &[(&Array, Span)],
) -> Result<(Arc<dyn Backend>, Placement), Diagnostic> {
    let mut placed: Option<(crate::value::DeviceTarget, Span, usize)> = None;
    for (i, (a, span)) in operands.iter().enumerate() {
        if let Placement::Placed(t) = a.placement() {
            match placed {
                None => placed = Some((t, *span, i)),
                Some((t0, s0, i0)) if t0 != t => {
                    let role = |k: usize| match (operands.len(), k) {
                        (2, 0) => "left operand".to_string(),
                        (2, _) => "right operand".to_string(),
                        (_, k) => format!("argument {}", k + 1),
                    };
                    let (r0, r1) = (role(i0), role(i));
                    return Err(device_mismatch_error(op, (&r0, t0, s0), (&r1, t, *span)));
                }
                Some(_) => {}
            }
        }
    }
    Ok(match placed {
        Some((t, _, _)) => (it.devices.backend(t), Placement::Placed(t)),
        None => (it.devices.active_backend(), Placement::Floating),
    })
}

/// An element-wise unary operation; names and placement are kept.
pub fn unary(it: &mut Interp, op: UnaryOp, a: &Array, span: Span) -> Result<Array, Diagnostic> {
    if let Some(v) = a.exact_value() {
        return Ok(Array::exact(unary_f64(op, v)));
    }
    let (backend, placement) = placement_for(it, op_name(op), &[(a, span)])?;
    if let Some(v) = loss::live(it, a) {
        return Ok(loss::record(it, op_name(op), span, |t| t.unary(op, v))?
            .with_names(a.names().map(|n| n.to_vec()))
            .with_placement(placement));
    }
    let t = backend
        .unary(op, &a.tensor())
        .map_err(|e| device_error(e, op_name(op), span))?;
    Ok(Array::from_tensor(t)
        .with_names(a.names().map(|n| n.to_vec()))
        .with_placement(placement))
}

fn op_name(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "neg",
        UnaryOp::Exp => "exp",
        UnaryOp::Log => "log",
        UnaryOp::Sqrt => "sqrt",
        UnaryOp::Abs => "abs",
        UnaryOp::Sigmoid => "sigmoid",
        UnaryOp::Tanh => "tanh",
        UnaryOp::Relu => "relu",
        UnaryOp::Gelu => "gelu",
        UnaryOp::Silu => "silu",
    }
}

/// An element-wise binary operation with broadcasting and name unification
/// (LANGUAGE §9); `name` is the operator or builtin as written, for messages.
pub fn binary(
    it: &mut Interp,
    op: BinaryOp,
    name: &str,
    o: &Operands<'_>,
    op_span: Span,
) -> Result<Array, Diagnostic> {
    let (a, b) = (o.left, o.right);
    if let (Some(x), Some(y)) = (a.exact_value(), b.exact_value()) {
        return Ok(Array::exact(binary_f64(op, x, y)));
    }
    let (shape, names) = broadcast(name, o)?;
    check_size(name, &shape, op_span)?;
    let (backend, placement) =
        placement_for(it, name, &[(a, o.left_expr.span), (b, o.right_expr.span)])?;
    let differentiable = matches!(
        op,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow
    );
    if differentiable && loss::any_live(it, &[a, b]) {
        let (va, vb) = (loss::var_of(it, a), loss::var_of(it, b));
        return Ok(loss::record(it, name, op_span, |t| t.binary(op, va, vb))?
            .with_names(names)
            .with_placement(placement));
    }
    let t = backend
        .binary(op, &a.tensor(), &b.tensor())
        .map_err(|e| device_error(e, name, op_span))?;
    Ok(Array::from_tensor(t)
        .with_names(names)
        .with_placement(placement))
}

/// The broadcast shape and merged names of two operands, or E0201 / E0202.
pub fn broadcast(name: &str, o: &Operands<'_>) -> Result<(Vec<usize>, Names), Diagnostic> {
    let (a, b) = (o.left, o.right);
    let (sa, sb) = (a.shape(), b.shape());
    let rank = sa.len().max(sb.len());
    let mut shape = vec![0; rank];
    let mut names: Vec<Option<String>> = vec![None; rank];
    let mut size_conflict = None;
    let mut name_conflict = None;
    for k in 1..=rank {
        let da = (k <= sa.len()).then(|| sa[sa.len() - k]);
        let db = (k <= sb.len()).then(|| sb[sb.len() - k]);
        let na = (k <= sa.len()).then(|| a.axis_name(sa.len() - k)).flatten();
        let nb = (k <= sb.len()).then(|| b.axis_name(sb.len() - k)).flatten();
        let size = match (da, db) {
            (Some(x), Some(y)) if x == y || y == 1 => x,
            (Some(1), Some(y)) => y,
            (Some(x), Some(y)) => {
                size_conflict.get_or_insert((k, x, y));
                x
            }
            (Some(x), None) => x,
            (None, Some(y)) => y,
            (None, None) => unreachable!(),
        };
        shape[rank - k] = size;
        names[rank - k] = match (na, nb) {
            (Some(x), Some(y)) if x != y => {
                name_conflict.get_or_insert((k, x.to_string(), y.to_string()));
                Some(x.to_string())
            }
            (Some(x), _) | (None, Some(x)) => Some(x.to_string()),
            (None, None) => None,
        };
    }
    let left = (o.left_expr.span, named_shape(a));
    let right = (o.right_expr.span, named_shape(b));
    if let Some((k, x, y)) = size_conflict {
        return Err(broadcast_size_error(name, &left, &right, k, x, y));
    }
    if let Some((k, x, y)) = name_conflict {
        let left_names: Vec<Option<&str>> = (0..a.rank()).map(|i| a.axis_name(i)).collect();
        let right_names: Vec<Option<&str>> = (0..b.rank()).map(|i| b.axis_name(i)).collect();
        let help = relabel_help(o.right_expr, &left_names, &right_names);
        return Err(broadcast_name_error(name, &left, &right, k, &x, &y, help));
    }
    Ok((shape, crate::value::normalize_names(Some(names), rank)))
}

/// E0410 when a result of `shape` would exceed the largest array MLPL allocates
/// ([`crate::builtins::MAX_ELEMENTS`]): a diagnostic instead of an allocation
/// failure that would end the process (LANGUAGE §6.5).
pub fn check_size(op: &str, shape: &[usize], span: Span) -> Result<(), Diagnostic> {
    match shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) {
        Some(n) if n <= crate::builtins::MAX_ELEMENTS => Ok(()),
        _ => Err(Diagnostic::error("E0410", "out of host memory").at(
            span,
            format!(
                "`{op}` would create {} elements",
                shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("×")
            ),
        )),
    }
}

/// Zeros of `shape` on the active device.
pub fn zeros(_it: &mut Interp, shape: Vec<usize>, _span: Span) -> Result<Array, Diagnostic> {
    Ok(Array::from_tensor(Tensor::zeros(shape)))
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
    let names = axis.and_then(|ax| {
        a.names().map(|n| {
            n.iter()
                .enumerate()
                .filter(|(i, _)| *i != ax)
                .map(|(_, x)| x.clone())
                .collect()
        })
    });
    Ok(Array::from_tensor(t)
        .with_names(names)
        .with_placement(placement))
}

/// A binary arithmetic op between arrays computed by the runtime itself (no
/// source operands to point at; errors point at `span`).
pub fn arith(
    it: &mut Interp,
    op: BinaryOp,
    a: &Array,
    b: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    let e = Expr {
        kind: ExprKind::Error,
        span,
    };
    let name = match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Pow => "pow",
        BinaryOp::Gt => "gt",
        BinaryOp::Lt => "lt",
        BinaryOp::Eq => "eq",
        BinaryOp::Max => "max",
        BinaryOp::Min => "min",
    };
    binary(
        it,
        op,
        name,
        &Operands {
            left: a,
            left_expr: &e,
            right: b,
            right_expr: &e,
        },
        span,
    )
}

/// The names of `a` without the reduced axis (none for a full reduction).
fn reduced_names(a: &Array, axis: Option<usize>) -> Names {
    let ax = axis?;
    a.names().map(|n| {
        n.iter()
            .enumerate()
            .filter(|(i, _)| *i != ax)
            .map(|(_, x)| x.clone())
            .collect()
    })
}

/// The backend and placement for a one-operand operation.
fn place1(
    it: &Interp,
    op: &str,
    a: &Array,
    span: Span,
) -> Result<(Arc<dyn Backend>, Placement), Diagnostic> {
    placement_for(it, op, &[(a, span)])
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

/// Batched matrix product of two arrays of rank ≥ 2 (batch axes broadcast); the
/// caller has checked shapes and names.
pub fn matmul_raw(
    it: &mut Interp,
    a: &Tensor,
    a_arr: &Array,
    b: &Tensor,
    b_arr: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    let (backend, placement) = placement_for(it, "matmul", &[(a_arr, span), (b_arr, span)])?;
    let out = if loss::any_live(it, &[a_arr, b_arr]) {
        let va = loss::var_of(it, a_arr);
        let vb = loss::var_of(it, b_arr);
        let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
        loss::record(it, "matmul", span, |t| {
            let va = if t.shape(va) != sa.as_slice() {
                t.reshape(va, sa)?
            } else {
                va
            };
            let vb = if t.shape(vb) != sb.as_slice() {
                t.reshape(vb, sb)?
            } else {
                vb
            };
            t.matmul(va, vb)
        })?
    } else {
        Array::from_tensor(
            backend
                .matmul(a, b)
                .map_err(|e| device_error(e, "matmul", span))?,
        )
    };
    Ok(out.with_placement(placement))
}

/// Softmax or log-softmax along `axis` (names dropped, as in the original).
pub fn softmax(
    it: &mut Interp,
    a: &Array,
    axis: usize,
    log: bool,
    span: Span,
) -> Result<Array, Diagnostic> {
    if log {
        one_operand(
            it,
            "log_softmax",
            a,
            span,
            |t, v| t.log_softmax(v, axis),
            |b, x| b.log_softmax(x, axis),
        )
    } else {
        one_operand(
            it,
            "softmax",
            a,
            span,
            |t, v| t.softmax(v, axis),
            |b, x| b.softmax(x, axis),
        )
    }
}

/// Mean cross-entropy of `[rows, V]` logits against validated integer targets.
pub fn cross_entropy(
    it: &mut Interp,
    logits: &Array,
    rows: usize,
    vocab: usize,
    targets: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    let (backend, _) = place1(it, "cross_entropy", logits, span)?;
    let tt = targets.tensor().reshape(vec![rows]);
    if let Some(v) = loss::live(it, logits) {
        return loss::record(it, "cross_entropy", span, |t| {
            let v = if t.shape(v) != [rows, vocab] {
                t.reshape(v, vec![rows, vocab])?
            } else {
                v
            };
            t.cross_entropy(v, &tt)
        });
    }
    let lt = logits.tensor().reshape(vec![rows, vocab]);
    let (loss, _) = backend
        .cross_entropy(&lt, &tt, false)
        .map_err(|e| device_error(e, "cross_entropy", span))?;
    Ok(Array::from_tensor(loss))
}

/// Rows of `table` `[V, d]` selected by validated integer `ids` of any shape.
pub fn gather_rows(
    it: &mut Interp,
    table: &Array,
    ids: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    let ids = ids.tensor();
    one_operand(
        it,
        "embed",
        table,
        span,
        |t, v| t.gather_rows(v, &ids),
        |b, x| b.gather_rows(x, &ids),
    )
}

/// RMS norm (`layer = false`) or layer norm without affine over the last axis.
pub fn norm(
    it: &mut Interp,
    x: &Array,
    eps: f32,
    layer: bool,
    span: Span,
) -> Result<Array, Diagnostic> {
    if layer {
        one_operand(
            it,
            "layer_norm",
            x,
            span,
            |t, v| t.layer_norm(v, eps),
            |b, x| b.layer_norm(x, eps).map(|r| r.0),
        )
    } else {
        one_operand(
            it,
            "rms_norm",
            x,
            span,
            |t, v| t.rms_norm(v, eps),
            |b, x| b.rms_norm(x, eps).map(|r| r.0),
        )
    }
}

/// Runs a one-operand operation: recorded on the loss tape when `x` is on it,
/// otherwise directly on the backend; the result keeps the operation's placement.
fn one_operand(
    it: &mut Interp,
    op: &str,
    x: &Array,
    span: Span,
    on_tape: impl FnOnce(
        &mut crate::autograd::Tape,
        crate::autograd::Var,
    ) -> mlpl_devices::Result<crate::autograd::Var>,
    on_device: impl FnOnce(&dyn Backend, &Tensor) -> mlpl_devices::Result<Tensor>,
) -> Result<Array, Diagnostic> {
    let (backend, placement) = place1(it, op, x, span)?;
    let out = match loss::live(it, x) {
        Some(v) => loss::record(it, op, span, |t| on_tape(t, v))?,
        None => Array::from_tensor(
            on_device(backend.as_ref(), &x.tensor()).map_err(|e| device_error(e, op, span))?,
        ),
    };
    Ok(out.with_placement(placement))
}

/// Sets the entries of `x` where `mask` is 1 to `value` (no gradient flows there).
pub fn mask_fill(
    it: &mut Interp,
    x: &Array,
    mask: &Tensor,
    value: f32,
    span: Span,
) -> Result<Array, Diagnostic> {
    let placement = x.placement();
    if let Some(v) = loss::live(it, x) {
        // On the tape the fill value must be finite; the most negative float32
        // behaves as -inf for the softmax and cross-entropy that follow `top_k`.
        let value = value.clamp(f32::MIN, f32::MAX);
        return Ok(
            loss::record(it, "mask", span, |t| t.mask_fill(v, mask, value))?
                .with_placement(placement),
        );
    }
    let mut data = x.to_f32();
    let m = mask.host();
    let n = m.len();
    for (i, d) in data.iter_mut().enumerate() {
        if m[i % n] != 0.0 {
            *d = value;
        }
    }
    Ok(Array::from_vec(x.shape().to_vec(), data).with_placement(placement))
}

/// Joins two vectors; differentiable.
pub fn concat(it: &mut Interp, a: &Array, b: &Array, span: Span) -> Result<Array, Diagnostic> {
    let (a1, b1) = (a.numel(), b.numel());
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
