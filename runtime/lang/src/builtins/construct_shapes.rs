//! Shape rules of the construction builtins (LANGUAGE §10.1), next to their
//! runtime implementations in `construct.rs`.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, Dim, MAX_CONST};
use crate::check::ctx::ShapeCtx;
use crate::display::format_f64;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// `iota(n)`: `[n]`, the constant 0..n when small.
pub fn iota(c: &mut ShapeCtx) -> Rule {
    let Some(n) = c.count(0)? else {
        return Ok(AbsValue::Array(AbsArray::of_dims(vec![Dim::Unknown])));
    };
    if n > 1 << 24 {
        super::site::warn_rounded_indices(c);
    }
    let data = (n <= MAX_CONST).then(|| (0..n).map(|i| i as f64).collect());
    Ok(AbsValue::Array(
        AbsArray::of_shape(&[n]).with_constant(data),
    ))
}

/// `shape(x)`: `[rank]`, the sizes when known.
pub fn shape(c: &mut ShapeCtx) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::Array(AbsArray::of_dims(vec![Dim::Unknown])));
    };
    let Some(rank) = x.rank() else {
        return Ok(AbsValue::Array(AbsArray::of_dims(vec![Dim::Unknown])));
    };
    let data = x
        .known_shape()
        .map(|s| s.iter().map(|&d| d as f32 as f64).collect());
    Ok(AbsValue::Array(
        AbsArray::of_shape(&[rank]).with_constant(data),
    ))
}

/// `rank(x)`: a scalar, the rank when known.
pub fn rank(c: &mut ShapeCtx) -> Rule {
    let r = c.array(0)?.and_then(|x| x.rank());
    Ok(AbsValue::Array(
        AbsArray::any_scalar().with_constant(r.map(|r| vec![r as f64])),
    ))
}

/// The shape rule of `reshape(x, dims)` with `x` and `dims` at arguments 0 and 1
/// (shared with `reshape_labeled`): E0213 and E0210 as at run time.
pub fn reshaped(c: &mut ShapeCtx) -> Result<AbsArray, Diagnostic> {
    let x = c.array(0)?;
    let Some(d) = c.array(1)? else {
        return Ok(AbsArray::unknown());
    };
    let Some(spec) = d.constant.clone() else {
        return Ok(match d.numel() {
            Some(k) if k <= MAX_CONST => AbsArray::of_dims(vec![Dim::Unknown; k]),
            _ => AbsArray::unknown(),
        });
    };
    let (shape, infer) = super::site::reshape_sizes(c, &spec)?;
    let Some(known) = shape
        .iter()
        .enumerate()
        .filter(|(k, _)| Some(*k) != infer)
        .try_fold(1usize, |acc, (_, &d)| acc.checked_mul(d))
    else {
        // Too large to be a real shape: the run fails on memory, not here.
        return Ok(AbsArray::of_dims(vec![Dim::Unknown; shape.len()]));
    };
    let count = x.as_ref().and_then(|x| x.numel());
    let mut dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
    match (infer, count) {
        (Some(k), Some(count)) => {
            if known == 0 || count % known != 0 {
                let xs = x.as_ref().map_or_else(String::new, |x| x.shape_text());
                return Err(super::site::reshape_infer_error(c, &xs, count, known));
            }
            dims[k] = Dim::Known(count / known);
        }
        (Some(k), None) => dims[k] = Dim::Unknown,
        (None, Some(count)) if known != count => {
            let xs = x.as_ref().map_or_else(String::new, |x| x.shape_text());
            return Err(super::site::reshape_count_error(c, &xs, count, known));
        }
        (None, _) => {}
    }
    let mut out = AbsArray::of_dims(dims);
    if let Some(x) = x {
        out.placed = x.placed;
        out = out.with_constant(x.constant);
    }
    Ok(out)
}

/// `reshape(x, dims)`: `dims`, names cleared.
pub fn reshape(c: &mut ShapeCtx) -> Rule {
    Ok(AbsValue::Array(reshaped(c)?))
}

/// `transpose(x)`: axes and names reversed.
pub fn transpose(c: &mut ShapeCtx) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    let Some(d) = &x.dims else {
        return Ok(AbsValue::Array(AbsArray {
            constant: None,
            ..x.clone()
        }));
    };
    if d.len() <= 1 {
        return Ok(AbsValue::Array(x));
    }
    let mut out = x.clone();
    out.dims = Some(d.iter().rev().cloned().collect());
    out.names = x.names.iter().rev().cloned().collect();
    out.constant = match (&x.constant, x.known_shape()) {
        (Some(data), Some(shape)) => Some(reverse_axes(data, &shape)),
        _ => None,
    };
    Ok(AbsValue::Array(out))
}

/// Row-major data of `shape` with its axes reversed.
fn reverse_axes(data: &[f64], shape: &[usize]) -> Vec<f64> {
    let rank = shape.len();
    let rshape: Vec<usize> = shape.iter().rev().cloned().collect();
    let mut strides = vec![1usize; rank];
    for k in (0..rank.saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    let mut out = Vec::with_capacity(data.len());
    let mut idx = vec![0usize; rank];
    for _ in 0..data.len() {
        // idx indexes the result; the source index is idx reversed.
        let src: usize = (0..rank).map(|k| idx[k] * strides[rank - 1 - k]).sum();
        out.push(data[src]);
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < rshape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

fn filled(c: &mut ShapeCtx, v: Option<f64>) -> Rule {
    let Some(dims) = c.shape_arg(0)? else {
        return Ok(AbsValue::any_array());
    };
    let a = AbsArray::of_dims(dims);
    let data = match (v, a.numel()) {
        (Some(v), Some(n)) if n <= MAX_CONST => Some(vec![v as f32 as f64; n]),
        _ => None,
    };
    Ok(AbsValue::Array(a.with_constant(data)))
}

/// `zeros(shape)`.
pub fn zeros(c: &mut ShapeCtx) -> Rule {
    filled(c, Some(0.0))
}

/// `ones(shape)`.
pub fn ones(c: &mut ShapeCtx) -> Rule {
    filled(c, Some(1.0))
}

/// `fill(shape, v)`: E0205 unless `v` is a scalar.
pub fn fill(c: &mut ShapeCtx) -> Rule {
    let v = c.scalar(1)?;
    filled(c, v)
}

/// `grid(bounds, n)`: `[n·n, 2]`; E0218 unless `bounds` has 4 elements, E0401 for
/// n < 1.
pub fn grid(c: &mut ShapeCtx) -> Rule {
    if let Some(b) = c.array(0)? {
        if let Some(len) = b.numel() {
            if len != 4 || b.rank().is_some_and(|r| r > 1) {
                return Err(super::site::grid_bounds_error(c, len));
            }
        }
    }
    let n = c.scalar(1)?;
    if let Some(n) = n {
        if n.is_nan() || n < 1.0 {
            return Err(super::site::grid_size_error(c));
        }
    }
    let n = c.count(1)?;
    let rows = n.map_or(Dim::Unknown, |n| Dim::Known(n.saturating_mul(n)));
    Ok(AbsValue::Array(AbsArray::of_dims(vec![
        rows,
        Dim::Known(2),
    ])))
}

/// The element count of a rank ≤ 1 argument of `concat`.
fn length(a: &AbsArray) -> Dim {
    match &a.dims {
        Some(d) if d.is_empty() => Dim::Known(1),
        Some(d) if d.len() == 1 => d[0].clone(),
        _ => Dim::Unknown,
    }
}

/// `concat(a, b)`: `[len(a) + len(b)]`; E0205 for rank > 1.
pub fn concat(c: &mut ShapeCtx) -> Rule {
    if c.has(2) {
        return concat_axis(c);
    }
    let mut parts = Vec::new();
    for i in 0..2 {
        let a = c.array(i)?;
        if let Some(a) = &a {
            if a.rank().is_some_and(|r| r > 1) {
                return Err(c.rank_error(i, a, "of rank 0 or 1"));
            }
        }
        parts.push(a);
    }
    let (Some(a), Some(b)) = (&parts[0], &parts[1]) else {
        return Ok(AbsValue::Array(AbsArray::of_dims(vec![Dim::Unknown])));
    };
    let len = match (length(a), length(b)) {
        (Dim::Known(x), Dim::Known(y)) => x.checked_add(y).map_or(Dim::Unknown, Dim::Known),
        _ => Dim::Unknown,
    };
    let data = match (&a.constant, &b.constant) {
        (Some(x), Some(y)) => Some(x.iter().chain(y).map(|&v| v as f32 as f64).collect()),
        _ => None,
    };
    Ok(AbsValue::Array(
        AbsArray::of_dims(vec![len]).with_constant(data),
    ))
}

/// `concat(a, b, axis)`: `a`'s shape with the axis's sizes added, names kept
/// (E0222 when the other axes provably differ).
fn concat_axis(c: &mut ShapeCtx) -> Rule {
    let (Some(a), b) = (c.array(0)?, c.array(1)?) else {
        return Ok(AbsValue::any_array());
    };
    let Some(axis) = c.axis(2, &a)? else {
        let mut out = AbsArray::of_dims(vec![Dim::Unknown; a.rank().unwrap_or(0)]);
        if a.rank().is_none() {
            out = AbsArray::unknown();
        }
        return Ok(AbsValue::Array(out));
    };
    let Some(b) = b else {
        let mut out = a.with_constant(None);
        if let Some(d) = out.dims.as_mut() {
            d[axis] = Dim::Unknown;
        }
        return Ok(AbsValue::Array(out));
    };
    if let (Some(sa), Some(sb), Some(na), Some(nb)) = (
        a.known_shape(),
        b.known_shape(),
        a.known_names(),
        b.known_names(),
    ) {
        super::site::check_concat_axis(c, axis, (&sa, &sb), (&na, &nb))?;
    }
    let mut out = a.clone().with_constant(None);
    if let Some(d) = out.dims.as_mut() {
        d[axis] = match (
            a.dims.as_ref().map(|d| d[axis].clone()),
            b.dims.as_ref().and_then(|d| d.get(axis).cloned()),
        ) {
            (Some(Dim::Known(x)), Some(Dim::Known(y))) => Dim::Known(x + y),
            _ => Dim::Unknown,
        };
    }
    for (i, n) in out.names.iter_mut().enumerate() {
        if n.named().is_none() {
            if let Some(m) = b.names.get(i).filter(|m| m.named().is_some()) {
                *n = m.clone();
            }
        }
    }
    Ok(AbsValue::Array(out))
}

/// `last_row(m)`: `[c]`; E0205 unless rank 2, E0216 without rows.
pub fn last_row(c: &mut ShapeCtx) -> Rule {
    let Some(m) = c.array_of_rank(0, 2, "a matrix `[r, c]`")? else {
        return Ok(AbsValue::Array(AbsArray::of_dims(vec![Dim::Unknown])));
    };
    let Some(d) = m.dims.clone() else {
        return Ok(AbsValue::Array(AbsArray::of_dims(vec![Dim::Unknown])));
    };
    if d[0] == Dim::Known(0) {
        return Err(c.error_of(0, code::E0216, format!("{} has no rows", m.shape_text())));
    }
    let data = match (&m.constant, d[1].known()) {
        (Some(x), Some(cols)) if x.len() >= cols => Some(x[x.len() - cols..].to_vec()),
        _ => None,
    };
    Ok(AbsValue::Array(
        AbsArray::of_dims(vec![d[1].clone()]).with_constant(data),
    ))
}

/// `scatter(buf, i, v)`: `[N]`; E0402 for an index that is not an integer in
/// [0, N).
pub fn scatter(c: &mut ShapeCtx) -> Rule {
    let buf = c.array_of_rank(0, 1, "a vector `[N]`")?;
    let i = c.scalar(1)?;
    let v = c.scalar(2)?;
    let n = buf
        .as_ref()
        .and_then(|b| b.dims.as_ref().map(|d| d[0].clone()))
        .unwrap_or(Dim::Unknown);
    if let (Some(i), Some(nk)) = (i, n.known()) {
        if i.fract() != 0.0 || !(i >= 0.0 && i < nk as f64) {
            return Err(c
                .error_of(1, code::E0402, format!("index {}", format_f64(i)))
                .note(format!("the index must be an integer in [0, {nk})")));
        }
    }
    let data = match (buf.as_ref().and_then(|b| b.constant.clone()), i, v) {
        (Some(mut d), Some(i), Some(v)) => {
            if let Some(slot) = d.get_mut(i as usize) {
                *slot = v as f32 as f64;
            }
            Some(d)
        }
        _ => None,
    };
    Ok(AbsValue::Array(
        AbsArray::of_dims(vec![n]).with_constant(data),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reversing_axes() {
        let data: Vec<f64> = (0..6).map(f64::from).collect();
        assert_eq!(
            reverse_axes(&data, &[2, 3]),
            vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
        );
        let cube: Vec<f64> = (0..8).map(f64::from).collect();
        // transpose of [2,2,2]: out[i][j][k] = in[k][j][i]
        assert_eq!(
            reverse_axes(&cube, &[2, 2, 2]),
            vec![0.0, 4.0, 2.0, 6.0, 1.0, 5.0, 3.0, 7.0]
        );
    }
}
