//! Construction and structure builtins (LANGUAGE §10.1).

use super::site::CallSite;
use mlpl_devices::BinaryOp;
use mlpl_diag::code;

use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::eval::{ops, Call};
use crate::value::{named_shape, Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "iota",
        params: &[req("n", Count)],
        summary: "0, 1, ..., n-1 as a vector",
        doc: "`iota(n)` returns the `[n]` vector 0, 1, ..., n−1 (unnamed). `n` is a count: fractions truncate, negatives give an empty vector.",
        example: "iota(5)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.1",
        run: iota,
        shape: Some(super::construct_shapes::iota),
    },
    Builtin {
        name: "shape",
        params: &[req("x", Array)],
        summary: "the sizes of x's axes",
        doc: "`shape(x)` returns a `[rank]` vector of the sizes of x's axes; a scalar gives the empty `[0]`.",
        example: "shape(zeros([2, 3]))",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.1",
        run: shape,
        shape: Some(super::construct_shapes::shape),
    },
    Builtin {
        name: "rank",
        params: &[req("x", Array)],
        summary: "the number of axes of x",
        doc: "`rank(x)` returns the number of axes of x as a scalar.",
        example: "rank(zeros([2, 3]))",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.1",
        run: rank,
        shape: Some(super::construct_shapes::rank),
    },
    Builtin {
        name: "reshape",
        params: &[req("x", Array), req("dims", Array)],
        summary: "same elements, new shape",
        doc: "`reshape(x, dims)` keeps x's elements in row-major order with the shape `dims`. At most one entry of `dims` may be −1, meaning whatever makes the count match. Names are cleared. Errors: E0210 when the element count differs, E0213 for two −1.",
        example: "reshape(iota(6), [2, 3])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: reshape,
        shape: Some(super::construct_shapes::reshape),
    },
    Builtin {
        name: "transpose",
        params: &[req("x", Array)],
        summary: "reverse the axes",
        doc: "`transpose(x)` reverses the order of x's axes (and their names); rank 0 and 1 are unchanged.",
        example: "transpose(reshape(iota(6), [2, 3]))",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: transpose,
        shape: Some(super::construct_shapes::transpose),
    },
    Builtin {
        name: "zeros",
        params: &[req("shape", Array)],
        summary: "an array of zeros",
        doc: "`zeros(shape)` returns an unnamed array of zeros; `shape` lists the sizes (`zeros(3)` is `zeros([3])`). Negative sizes are treated as 0 (W0203).",
        example: "zeros([2, 3])",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.1",
        run: zeros,
        shape: Some(super::construct_shapes::zeros),
    },
    Builtin {
        name: "ones",
        params: &[req("shape", Array)],
        summary: "an array of ones",
        doc: "`ones(shape)` returns an unnamed array of ones; `shape` as for `zeros`.",
        example: "ones([2, 2])",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.1",
        run: ones,
        shape: Some(super::construct_shapes::ones),
    },
    Builtin {
        name: "fill",
        params: &[req("shape", Array), req("v", Scalar)],
        summary: "an array filled with v",
        doc: "`fill(shape, v)` returns an array of `shape` whose every element is the scalar `v`.",
        example: "fill([2, 2], 7)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: fill,
        shape: Some(super::construct_shapes::fill),
    },
    Builtin {
        name: "grid",
        params: &[req("bounds", Array), req("n", Count)],
        summary: "an n×n grid of 2-D points",
        doc: "`grid([xmin, xmax, ymin, ymax], n)` returns `[n·n, 2]` points; row i·n+j is (xmin + (xmax−xmin)·j/(n−1), ymin + (ymax−ymin)·i/(n−1)). E0218 unless `bounds` has 4 elements; E0401 when n < 1.",
        example: "grid([0, 1, 0, 2], 2)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.1",
        run: grid,
        shape: Some(super::construct_shapes::grid),
    },
    Builtin {
        name: "concat",
        params: &[req("a", Array), req("b", Array), opt("axis", Axis)],
        summary: "join two vectors, or two arrays along an axis",
        doc: "`concat(a, b)` returns a's elements followed by b's as a vector; both must have rank ≤ 1 (E0205). `concat(a, b, axis)` joins two arrays of one rank along an axis of `a` (number or name); every other axis must agree in size and name (E0222), and the names are kept. Both forms are differentiable.",
        example: "concat([1, 2], [3])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: concat,
        shape: Some(super::construct_shapes::concat),
    },
    Builtin {
        name: "last_row",
        params: &[req("m", Array)],
        summary: "the last row of a matrix",
        doc: "`last_row(m)` returns row r−1 of an `[r, c]` matrix as a `[c]` vector. E0205 unless rank 2; E0216 when there are no rows.",
        example: "last_row(reshape(iota(6), [3, 2]))",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: last_row,
        shape: Some(super::construct_shapes::last_row),
    },
    Builtin {
        name: "scatter",
        params: &[req("buf", Array), req("i", Scalar), req("v", Scalar)],
        summary: "a copy of buf with element i set to v",
        doc: "`scatter(buf, i, v)` returns a copy of the `[N]` vector `buf` with element i set to the scalar v; `buf` itself is not modified. E0402 when i is not an integer in [0, N).",
        example: "scatter(zeros([4]), 2, 5)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.1",
        run: scatter,
        shape: Some(super::construct_shapes::scatter),
    },
];

fn iota(c: &mut Call) -> Result<Value, Diagnostic> {
    let n = c.count(0)?;
    checked_numel(c, 0, &[n])?;
    if n > 1 << 24 {
        super::site::warn_rounded_indices(c);
    }
    Ok(Value::Array(Array::from_vec(
        vec![n],
        (0..n).map(|i| i as f32).collect(),
    )))
}

fn shape(c: &mut Call) -> Result<Value, Diagnostic> {
    let s = c.array(0)?.shape().to_vec();
    Ok(Value::Array(Array::from_vec(
        vec![s.len()],
        s.iter().map(|&d| d as f32).collect(),
    )))
}

fn rank(c: &mut Call) -> Result<Value, Diagnostic> {
    let a = c.array(0)?;
    Ok(if a.is_exact() {
        Value::exact(0.0)
    } else {
        Value::Array(Array::scalar_f32(a.rank() as f32))
    })
}

/// Reads a shape argument: the array's elements are sizes, read as counts.
pub fn shape_arg(c: &mut Call, i: usize) -> Result<Vec<usize>, Diagnostic> {
    let dims = c.array(i)?.to_f64();
    Ok(dims.into_iter().map(|d| c.to_count(i, d)).collect())
}

pub use crate::value::MAX_ELEMENTS;

/// The element count of `shape`, or E0410 when it is absurdly large.
pub fn checked_numel(c: &Call, i: usize, shape: &[usize]) -> Result<usize, Diagnostic> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| {
            c.error_of(
                i,
                code::E0410,
                format!(
                    "{} elements requested",
                    shape
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join("×")
                ),
            )
        })
}

fn filled(c: &mut Call, v: f32) -> Result<Value, Diagnostic> {
    let s = shape_arg(c, 0)?;
    let n = checked_numel(c, 0, &s)?;
    ops::check_size(c.name(), &s, c.span)?;
    let mut data = Vec::new();
    data.try_reserve_exact(n)
        .map_err(|_| c.error_of(0, code::E0410, format!("{n} elements requested")))?;
    data.resize(n, v);
    Ok(Value::Array(Array::from_vec(s, data)))
}

fn zeros(c: &mut Call) -> Result<Value, Diagnostic> {
    filled(c, 0.0)
}

fn ones(c: &mut Call) -> Result<Value, Diagnostic> {
    filled(c, 1.0)
}

fn fill(c: &mut Call) -> Result<Value, Diagnostic> {
    let v = c.scalar(1)? as f32;
    let v_arr = c.array(1)?.clone();
    let ones = filled(c, 1.0)?;
    if crate::eval::loss::live(c.it, &v_arr).is_none() {
        return filled(c, v);
    }
    let Value::Array(ones) = ones else {
        unreachable!()
    };
    let span = c.span;
    Ok(Value::Array(ops::arith(
        c.it,
        BinaryOp::Mul,
        &ones,
        &v_arr,
        span,
    )?))
}

fn reshape(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let dims = c.array(1)?.to_f64();
    let count = x.numel();
    let (mut shape, infer) = super::site::reshape_sizes(c, &dims)?;
    let known: usize = shape
        .iter()
        .enumerate()
        .filter(|(k, _)| Some(*k) != infer)
        .map(|(_, &d)| d)
        .product();
    if let Some(k) = infer {
        if known == 0 || count % known != 0 {
            return Err(super::site::reshape_infer_error(
                c,
                &named_shape(&x),
                count,
                known,
            ));
        }
        shape[k] = count / known;
    } else if known != count {
        return Err(super::site::reshape_count_error(
            c,
            &named_shape(&x),
            count,
            known,
        ));
    }
    let span = c.span;
    Ok(Value::Array(ops::reshape(c.it, &x, shape, span)?))
}

fn transpose(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    if x.rank() <= 1 {
        return Ok(Value::Array(x));
    }
    let perm: Vec<usize> = (0..x.rank()).rev().collect();
    let span = c.arg_span(0);
    Ok(Value::Array(ops::permute(c.it, &x, &perm, span)?))
}

fn grid(c: &mut Call) -> Result<Value, Diagnostic> {
    let b = c.array(0)?.to_f64();
    if b.len() != 4 || c.array(0)?.rank() > 1 {
        return Err(super::site::grid_bounds_error(c, b.len()));
    }
    let n = c.scalar(1)?;
    if !(n >= 1.0) {
        return Err(super::site::grid_size_error(c));
    }
    let n = c.count(1)?;
    checked_numel(c, 1, &[n, n])?;
    let pts = crate::data::datasets::grid([b[0], b[1], b[2], b[3]], n)
        .map_err(|e| c.error(e.code(), e.to_string()))?;
    let flat: Vec<f64> = pts.iter().flat_map(|p| p.iter().copied()).collect();
    Ok(Value::Array(Array::from_f64(vec![pts.len(), 2], &flat)))
}

fn concat(c: &mut Call) -> Result<Value, Diagnostic> {
    if c.has(2) {
        let (a, b) = (c.array(0)?.clone(), c.array(1)?.clone());
        let axis = c.axis(2, &a)?;
        let names = |x: &crate::value::Array| {
            (0..x.rank())
                .map(|i| x.axis_name(i).map(str::to_string))
                .collect::<Vec<_>>()
        };
        super::site::check_concat_axis(c, axis, (a.shape(), b.shape()), (&names(&a), &names(&b)))?;
        let span = c.span;
        return Ok(Value::Array(ops::concat_axis(c.it, &a, &b, axis, span)?));
    }
    for i in 0..2 {
        if c.array(i)?.rank() > 1 {
            return Err(c.rank_error(i, "of rank 0 or 1"));
        }
    }
    let (a, b) = (c.array(0)?.clone(), c.array(1)?.clone());
    let span = c.span;
    Ok(Value::Array(ops::concat(c.it, &a, &b, span)?))
}

fn last_row(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.array_of_rank(0, 2, "a matrix `[r, c]`")?;
    let (r, cols) = (m.shape()[0], m.shape()[1]);
    if r == 0 {
        return Err(c.error_of(0, code::E0216, format!("{} has no rows", named_shape(m))));
    }
    if crate::eval::loss::live(c.it, m).is_some() {
        let m = m.clone();
        let mut pick = vec![0.0; r];
        pick[r - 1] = 1.0;
        let pick = Array::from_vec(vec![1, r], pick);
        let span = c.span;
        let row = ops::matmul_raw(c.it, &pick.tensor(), &pick, &m.tensor(), &m, span)?;
        return Ok(Value::Array(ops::reshape(c.it, &row, vec![cols], span)?));
    }
    let data = m.to_f32()[(r - 1) * cols..].to_vec();
    Ok(Value::Array(Array::from_vec(vec![cols], data)))
}

fn scatter(c: &mut Call) -> Result<Value, Diagnostic> {
    let buf = c.array_of_rank(0, 1, "a vector `[N]`")?;
    let n = buf.shape()[0];
    let i = c.scalar(1)?;
    let v = c.scalar(2)?;
    if i.fract() != 0.0 || !(i >= 0.0 && i < n as f64) {
        return Err(c
            .error_of(
                1,
                code::E0402,
                format!("index {}", crate::display::format_f64(i)),
            )
            .note(format!("the index must be an integer in [0, {n})")));
    }
    let (buf_arr, v_arr) = (buf.clone(), c.array(2)?.clone());
    if crate::eval::loss::any_live(c.it, &[&buf_arr, &v_arr]) {
        // buf·(1 − eᵢ) + v·eᵢ keeps the gradient of both buf and v.
        let mut keep = vec![1.0; n];
        keep[i as usize] = 0.0;
        let mut put = vec![0.0; n];
        put[i as usize] = 1.0;
        let span = c.span;
        let kept = ops::arith(
            c.it,
            BinaryOp::Mul,
            &buf_arr,
            &Array::from_vec(vec![n], keep),
            span,
        )?;
        let placed = ops::arith(
            c.it,
            BinaryOp::Mul,
            &v_arr,
            &Array::from_vec(vec![n], put),
            span,
        )?;
        return Ok(Value::Array(ops::arith(
            c.it,
            BinaryOp::Add,
            &kept,
            &placed,
            span,
        )?));
    }
    let mut data = buf.to_f32();
    data[i as usize] = v as f32;
    Ok(Value::Array(Array::from_vec(vec![n], data)))
}
