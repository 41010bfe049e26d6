//! Element-wise operations: unary and binary ops with exact-scalar arithmetic in
//! float64 and named-axis broadcasting (LANGUAGE §9).

use mlpl_devices::{BinaryOp, UnaryOp};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

use super::*;
use crate::errors::{broadcast_name_error, broadcast_size_error, device_error, relabel_help};
use crate::eval::{loss, Interp};
use crate::value::scalar::{binary_f64, unary_f64};
use crate::value::{named_shape, Array, Names};

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

pub(super) fn op_name(op: UnaryOp) -> &'static str {
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
        UnaryOp::Sin => "sin",
        UnaryOp::Cos => "cos",
        UnaryOp::Erf => "erf",
        UnaryOp::GeluErf => "gelu_erf",
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
        BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Pow
            | BinaryOp::Max
            | BinaryOp::Min
    );
    if differentiable && loss::any_live(it, &[a, b]) {
        let (va, vb) = (loss::var_of(it, a), loss::var_of(it, b));
        return Ok(loss::record(it, name, op_span, |t| match op {
            BinaryOp::Max => t.maximum(va, vb),
            BinaryOp::Min => t.minimum(va, vb),
            _ => t.binary(op, va, vb),
        })?
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

/// A binary arithmetic op between arrays computed by the runtime itself (no
/// source operands to point at; errors point at `span`).
pub fn arith(
    it: &mut Interp,
    op: BinaryOp,
    a: &Array,
    b: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    let e = Expr::placeholder(span);
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
