//! Linear algebra (LANGUAGE §10.4): `dot` and the forms of `matmul`.

use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::eval::{ops, Call, Interp};
use crate::value::{named_shape, Array, Value};
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "dot",
        params: &[req("a", Array), req("b", Array)],
        summary: "inner product of two vectors",
        doc: "`dot(a, b)` is Σ aᵢbᵢ for two `[n]` vectors. E0205 unless both have rank 1; E0203 when the lengths differ.",
        example: "dot([1, 2, 3], [4, 5, 6])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.4",
        run: dot,
        shape: Some(super::linalg_shapes::dot),
    },
    Builtin {
        name: "matmul",
        params: &[req("a", Array), req("b", Array)],
        summary: "matrix product (batched, with vectors)",
        doc: "`matmul(a, b)` multiplies `[m, k]` by `[k, n]` into `[m, n]`; vectors on either side contract their only axis; leading batch axes broadcast (`[…, m, k]` × `[…, k, n]`). Result names: merged batch names, then a's row name and b's column name. E0203 inner sizes differ; E0204 contracted axes named differently; E0205 a scalar operand.",
        example: "matmul(reshape(iota(6), [2, 3]), reshape(iota(6), [3, 2]))",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.4",
        run: matmul,
        shape: Some(super::linalg_shapes::matmul),
    },
];

fn dot(c: &mut Call) -> Result<Value, Diagnostic> {
    for i in 0..2 {
        c.array_of_rank(i, 1, "a vector `[n]`")?;
    }
    let (a, b) = (c.array(0)?.clone(), c.array(1)?.clone());
    if a.shape()[0] != b.shape()[0] {
        return Err(inner_error(
            "dot",
            &a,
            c.args[0].span,
            &b,
            c.args[1].span,
            a.shape()[0],
            b.shape()[0],
        ));
    }
    // `dot` ignores axis names (LANGUAGE §10.4: no E0204, an unnamed result).
    let (a, b) = (a.unnamed(), b.unnamed());
    let r = matmul_arrays(c.it, &a, c.args[0].expr, &b, c.args[1].expr, "dot")?;
    Ok(Value::Array(r))
}

fn matmul(c: &mut Call) -> Result<Value, Diagnostic> {
    let (a, b) = (c.array(0)?.clone(), c.array(1)?.clone());
    Ok(Value::Array(matmul_arrays(
        c.it,
        &a,
        c.args[0].expr,
        &b,
        c.args[1].expr,
        "matmul",
    )?))
}

fn inner_error(
    op: &str,
    a: &Array,
    sa: Span,
    b: &Array,
    sb: Span,
    ka: usize,
    kb: usize,
) -> Diagnostic {
    let transposed = b.rank() == 2 && b.shape()[1] == ka;
    inner_dims_error(
        op,
        (sa, &named_shape(a)),
        (sb, &named_shape(b)),
        b.rank(),
        ka,
        kb,
        transposed,
    )
}

/// E0203 (LANGUAGE §10.4): the contracted sizes `ka` (last axis of the left
/// operand) and `kb` differ. `a` and `b` are each operand's span and named shape;
/// `transposed` adds the `transpose` help (the right operand is `[n, ka]`). Shared
/// by the interpreter and the checker.
pub fn inner_dims_error(
    op: &str,
    a: (Span, &str),
    b: (Span, &str),
    b_rank: usize,
    ka: usize,
    kb: usize,
    transposed: bool,
) -> Diagnostic {
    let which = if b_rank > 2 {
        "the second-to-last axis"
    } else if b_rank == 2 {
        "the first axis"
    } else {
        "the only axis"
    };
    let mut d = Diagnostic::of_op(code::E0203, op)
        .at(b.0, format!("right operand: {}", b.1))
        .with_label(a.0, format!("left operand: {}", a.1))
        .note(format!("the last axis of the left operand ({ka}) must equal {which} of the right operand ({kb})"));
    if transposed {
        d = d.help("the right operand looks transposed: try `transpose(...)` on it");
    }
    d
}

/// E0204: the contracted axes are named `na` (left) and `nb` (right).
pub fn contraction_names_error(
    op: &str,
    a: (Span, &str),
    b: (Span, &str),
    na: &str,
    nb: &str,
) -> Diagnostic {
    Diagnostic::of(code::E0204)
        .at(b.0, format!("right operand: {}", b.1))
        .with_label(a.0, format!("left operand: {}", a.1))
        .note(format!(
            "`{op}` contracts `{na}` on the left with `{nb}` on the right"
        ))
        .help(format!(
            "relabel one side so both contracted axes are named `{na}`"
        ))
}

/// E0205: an operand of `op` (at `span`, of named shape `shape`) is a scalar.
pub fn scalar_operand_error(op: &str, span: Span, shape: &str) -> Diagnostic {
    Diagnostic::of(code::E0205)
        .at(span, format!("has shape {shape}"))
        .note(format!("`{op}` needs operands of rank 1 or more"))
}

/// Rewrites a broadcasting error of the batch axes of `matmul` so that it shows
/// both whole operands (`a`, `b`: span and named shape).
pub fn batch_axes_error(d: Diagnostic, a: (Span, &str), b: (Span, &str)) -> Diagnostic {
    let mut d = d;
    d.primary = Some(mlpl_diag::Label {
        span: b.0,
        message: format!("right operand: {}", b.1),
    });
    d.secondary = vec![mlpl_diag::Label {
        span: a.0,
        message: format!("left operand: {}", a.1),
    }];
    d.note("the leading (batch) axes of `matmul` broadcast like element-wise operands")
}

/// `matmul` of two arrays with the forms and naming rules of LANGUAGE §10.4.
pub fn matmul_arrays(
    it: &mut Interp,
    a: &Array,
    ea: &Expr,
    b: &Array,
    eb: &Expr,
    op: &str,
) -> Result<Array, Diagnostic> {
    let (sa, sb) = (ea.span, eb.span);
    for (x, s) in [(a, sa), (b, sb)] {
        if x.rank() == 0 {
            return Err(scalar_operand_error(op, s, &named_shape(x)));
        }
    }
    let ka = *a.shape().last().unwrap();
    let kb_axis = if b.rank() == 1 { 0 } else { b.rank() - 2 };
    let kb = b.shape()[kb_axis];
    if ka != kb {
        return Err(inner_error(op, a, sa, b, sb, ka, kb));
    }
    if let (Some(na), Some(nb)) = (a.axis_name(a.rank() - 1), b.axis_name(kb_axis)) {
        if na != nb {
            return Err(contraction_names_error(
                op,
                (sa, &named_shape(a)),
                (sb, &named_shape(b)),
                na,
                nb,
            ));
        }
    }
    // Promote vectors to matrices, multiply, then drop the promoted axes.
    let a_vec = a.rank() == 1;
    let b_vec = b.rank() == 1;
    let at = if a_vec {
        a.tensor().reshape(vec![1, ka])
    } else {
        a.tensor()
    };
    let bt = if b_vec {
        b.tensor().reshape(vec![kb, 1])
    } else {
        b.tensor()
    };
    let a_batch = &at.shape()[..at.rank() - 2];
    let b_batch = &bt.shape()[..bt.rank() - 2];
    // Batch axes broadcast with name unification (E0201/E0202).
    let batch_a = Array::from_vec(a_batch.to_vec(), vec![0.0; a_batch.iter().product()])
        .with_names(
            a.names()
                .filter(|_| !a_vec)
                .map(|n| n[..a_batch.len()].to_vec()),
        );
    let batch_b = Array::from_vec(b_batch.to_vec(), vec![0.0; b_batch.iter().product()])
        .with_names(
            b.names()
                .filter(|_| !b_vec)
                .map(|n| n[..b_batch.len()].to_vec()),
        );
    let operands = ops::Operands {
        left: &batch_a,
        left_expr: ea,
        right: &batch_b,
        right_expr: eb,
    };
    let (batch_shape, batch_names) = ops::broadcast(op, &operands)
        .map_err(|d| batch_axes_error(d, (sa, &named_shape(a)), (sb, &named_shape(b))))?;
    let m = at.shape()[at.rank() - 2];
    let n = bt.shape()[bt.rank() - 1];
    ops::check_size(op, &[batch_shape.as_slice(), &[m, n]].concat(), sa.to(sb))?;
    let product = ops::matmul_raw(it, &at, a, &bt, b, sa.to(sb))?;
    let mut shape = batch_shape.clone();
    let mut names: Vec<Option<String>> =
        batch_names.unwrap_or_else(|| vec![None; batch_shape.len()]);
    if !a_vec {
        shape.push(m);
        names.push(a.axis_name(a.rank() - 2).map(str::to_string));
    }
    if !b_vec {
        shape.push(n);
        names.push(b.axis_name(b.rank() - 1).map(str::to_string));
    }
    let placement = product.placement();
    let shaped = ops::reshape(it, &product, shape, sa.to(sb))?;
    Ok(shaped.with_names(Some(names)).with_placement(placement))
}
