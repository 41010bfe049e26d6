//! Shape rules of data set preparation and language-model windows (LANGUAGE
//! §10.8), next to their runtime implementations in `dataprep.rs`. Row counts of
//! data-dependent inputs stay symbolic: `batch` of `[N, ...]` has `⌈N/64⌉`
//! batches, `shift_pairs_x` of `[T]` ids has `⌊T/17⌋` windows.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, AxisName, Dim};
use crate::check::ctx::ShapeCtx;
use crate::check::dims;
use crate::data::datasets;
use crate::display::format_f64;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

fn rows_of(c: &ShapeCtx, i: usize) -> Result<Option<AbsArray>, Diagnostic> {
    let Some(x) = c.array(i)? else {
        return Ok(None);
    };
    if x.rank() == Some(0) {
        return Err(c.rank_error(i, &x, "of rank 1 or more (its rows are axis 0)"));
    }
    Ok(x.dims.is_some().then_some(x))
}

/// `x` with axis 0 of size `n` and unnamed, the other axes kept.
fn with_rows(x: &AbsArray, n: Dim) -> AbsArray {
    let mut d = x.dims.clone().unwrap_or_default();
    if let Some(first) = d.first_mut() {
        *first = n;
    }
    let mut out = AbsArray::of_dims(d);
    out.names = x.names.clone();
    if let Some(first) = out.names.first_mut() {
        *first = AxisName::Unnamed;
    }
    out.origin = x.origin;
    out
}

/// `shuffle(x, seed)`: same shape, axis 0 unnamed.
pub fn shuffle(c: &mut ShapeCtx) -> Rule {
    let x = rows_of(c, 0)?;
    c.seed(1)?;
    Ok(AbsValue::Array(match x {
        Some(x) => {
            let n = x.dims.as_ref().map_or(Dim::Unknown, |d| d[0].clone());
            with_rows(&x, n)
        }
        None => AbsArray::unknown(),
    }))
}

fn batch_size(c: &ShapeCtx) -> Result<Option<usize>, Diagnostic> {
    match c.scalar(1)? {
        Some(s) => super::site::positive_count(c, 1, s, "the batch size").map(Some),
        None => Ok(None),
    }
}

/// `batch(x, size)`: `[⌈n/size⌉, size, …rest]`, the two leading axes unnamed.
pub fn batch(c: &mut ShapeCtx) -> Rule {
    let x = rows_of(c, 0)?;
    let size = batch_size(c)?;
    let Some(x) = x else {
        return Ok(AbsValue::any_array());
    };
    let d = x.dims.clone().unwrap_or_default();
    let nb = size.map_or(Dim::Unknown, |s| dims::ceil_div(&d[0], s));
    let mut out_dims = vec![nb, size.map_or(Dim::Unknown, Dim::Known)];
    out_dims.extend(d[1..].iter().cloned());
    let mut out = AbsArray::of_dims(out_dims);
    let mut names = vec![AxisName::Unnamed, AxisName::Unnamed];
    names.extend(x.names.get(1..).unwrap_or(&[]).iter().cloned());
    out.names = names;
    out.origin = x.origin;
    Ok(AbsValue::Array(out))
}

/// `batch_mask(x, size)`: `[⌈n/size⌉, size]`.
pub fn batch_mask(c: &mut ShapeCtx) -> Rule {
    let x = rows_of(c, 0)?;
    let size = batch_size(c)?;
    let n = x
        .and_then(|x| x.dims.map(|d| d[0].clone()))
        .unwrap_or(Dim::Unknown);
    let nb = size.map_or(Dim::Unknown, |s| dims::ceil_div(&n, s));
    Ok(AbsValue::Array(AbsArray::of_dims(vec![
        nb,
        size.map_or(Dim::Unknown, Dim::Known),
    ])))
}

fn split_rows(c: &mut ShapeCtx, train: bool) -> Rule {
    let x = rows_of(c, 0)?;
    let frac = c.scalar(1)?;
    c.seed(2)?;
    let Some(x) = x else {
        return Ok(AbsValue::any_array());
    };
    let n = x.dims.as_ref().map_or(Dim::Unknown, |d| d[0].clone());
    if let (Dim::Known(n), Some(frac)) = (&n, frac) {
        if let Err(e) = datasets::split_sizes(*n, frac) {
            let i = if e.code() == code::E0216 { 0 } else { 1 };
            let headline = if i == 0 {
                "empty array"
            } else {
                "invalid argument value"
            };
            return Err(c.error_at(i, e.code(), headline, e.to_string()));
        }
    }
    if let (Dim::Known(n), None) = (&n, frac) {
        if *n < 2 {
            let e = datasets::split_sizes(*n, 0.5).err();
            if let Some(e) = e {
                return Err(c.error_at(0, e.code(), "empty array", e.to_string()));
            }
        }
    }
    let rows = match frac {
        Some(f) => {
            let label = format!("{}[{}]", if train { "train" } else { "val" }, format_f64(f));
            dims::derived(&n, &label, |n| {
                let tr = datasets::split_sizes(n, f).ok()?;
                Some(if train { tr } else { n - tr })
            })
        }
        None => Dim::Unknown,
    };
    Ok(AbsValue::Array(with_rows(&x, rows)))
}

/// `split(x, frac, seed)`: `[n_tr, …rest]`; E0216 for fewer than 2 rows, E0401
/// unless 0 < frac < 1.
pub fn split(c: &mut ShapeCtx) -> Rule {
    split_rows(c, true)
}

/// `val_split(x, frac, seed)`: `[n − n_tr, …rest]`.
pub fn val_split(c: &mut ShapeCtx) -> Rule {
    split_rows(c, false)
}

fn windows(c: &mut ShapeCtx) -> Rule {
    let ids = c.array_of_rank(0, 1, "a vector of ids `[N]`")?;
    let block = match c.scalar(1)? {
        Some(b) => Some(super::site::positive_count(c, 1, b, "block")?),
        None => None,
    };
    let n = ids
        .and_then(|i| i.dims.map(|d| d[0].clone()))
        .unwrap_or(Dim::Unknown);
    if let (Dim::Known(n), Some(block)) = (&n, block) {
        if n / (block + 1) == 0 {
            return Err(c.invalid(1, format!("{n} ids make no window of {} tokens", block + 1)));
        }
    }
    let b = block.map_or(Dim::Unknown, |k| dims::floor_div(&n, k + 1));
    Ok(AbsValue::Array(AbsArray::of_dims(vec![
        b,
        block.map_or(Dim::Unknown, Dim::Known),
    ])))
}

/// `shift_pairs_x(ids, block)`: `[⌊N/(block+1)⌋, block]`.
pub fn shift_pairs_x(c: &mut ShapeCtx) -> Rule {
    windows(c)
}

/// `shift_pairs_y(ids, block)`: as `shift_pairs_x`.
pub fn shift_pairs_y(c: &mut ShapeCtx) -> Rule {
    windows(c)
}
