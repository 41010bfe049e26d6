//! Shape rules of the visualization builtins (LANGUAGE §10.20), for the entries
//! of `viz.rs`: every chart is a string; the shape requirements are checked when
//! provable (E0106, E0205, E0218, E0401, E0103).
//!
//! These rules are reached through [`super::shape_rule`] until the entries of
//! `viz.rs` name them in their `shape` field.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, Dim};
use crate::check::ctx::ShapeCtx;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// A chart (a string whose text is only known at run time).
fn chart() -> Rule {
    Ok(AbsValue::Str(None))
}

/// `[N, k]` with k in `cols` (E0205 for another rank, E0218 for another k), as
/// `viz::matrix_of`; the row count when known.
fn matrix_of(
    c: &ShapeCtx,
    i: usize,
    cols: &[usize],
    expected: &str,
) -> Result<Option<Dim>, Diagnostic> {
    let Some(a) = c.array(i)? else {
        return Ok(None);
    };
    match a.dims.as_deref() {
        Some([n, k]) => match k {
            Dim::Known(k) if !cols.contains(k) => Err(c
                .error_of(i, code::E0218, format!("has shape {}", a.shape_text()))
                .note(format!("expected {expected}"))),
            _ => Ok(Some(n.clone())),
        },
        Some(_) => Err(c.rank_error(i, &a, expected)),
        None => Ok(None),
    }
}

/// `[N]` (E0205 otherwise); its length when known.
fn vector_of(c: &ShapeCtx, i: usize) -> Result<Option<Dim>, Diagnostic> {
    Ok(c.array_of_rank(i, 1, "a vector `[N]`")?
        .and_then(|a| a.dims.map(|d| d[0].clone())))
}

/// E0218 when two counts provably differ, as `viz::same_count`.
fn same_count(c: &ShapeCtx, i: usize, n: &Option<Dim>, m: &Option<Dim>) -> Result<(), Diagnostic> {
    match (n, m) {
        (Some(Dim::Known(n)), Some(Dim::Known(m))) => super::site::check_point_count(c, i, *n, *m),
        _ => Ok(()),
    }
}

/// `svg(data, type [, aux])`.
pub fn svg(c: &mut ShapeCtx) -> Rule {
    let kind = c.string(1)?;
    let a = c.array(0)?;
    let Some(kind) = kind else {
        return chart();
    };
    let rank = a.as_ref().and_then(AbsArray::rank);
    match kind.as_str() {
        "scatter" => {
            matrix_of(c, 0, &[2], "`[N, 2]`")?;
        }
        "scatter3d" => {
            matrix_of(c, 0, &[3, 4], "`[N, 3]` or `[N, 4]`")?;
        }
        "line" => {
            if let Some(a) = &a {
                match a.dims.as_deref() {
                    Some([]) | Some([_]) | None => {}
                    Some([_, k]) if !k.provably_ne(&Dim::Known(2)) => {}
                    Some(_) => return Err(c.rank_error(0, a, "`[]`, `[N]` or `[N, 2]`")),
                }
            }
        }
        "bar" => {
            if let (Some(a), Some(r)) = (&a, rank) {
                if r > 1 {
                    return Err(c.rank_error(0, a, "of rank 0 or 1"));
                }
            }
        }
        "heatmap" => {
            if let (Some(a), Some(r)) = (&a, rank) {
                if r != 2 {
                    return Err(c.rank_error(0, a, "a matrix"));
                }
            }
        }
        "decision_boundary" => {
            if let (Some(a), Some(r)) = (&a, rank) {
                if r != 2 {
                    return Err(c.rank_error(0, a, "a matrix of grid outputs"));
                }
            }
            if !c.has(2) {
                if rank == Some(2) {
                    return Err(Diagnostic::of(code::E0103)
                        .at(c.span, "")
                        .note("\"decision_boundary\" needs the training points as a third argument `[N, 3]` of (x, y, label)"));
                }
                return chart();
            }
            if rank == Some(2) {
                matrix_of(c, 2, &[3], "`[N, 3]` of (x, y, label)")?;
            }
        }
        other => return Err(super::site::unknown_chart(c, 1, other)),
    }
    chart()
}

/// `hist(data, bins)`: E0205 unless data is `[N]`, E0401 for bins.
pub fn hist(c: &mut ShapeCtx) -> Rule {
    vector_of(c, 0)?;
    if let Some(bins) = c.scalar(1)? {
        super::site::hist_bins(c, bins)?;
    }
    chart()
}

/// `scatter_labeled(points, labels)`: `[N, 2]` and `[N]` (E0205, E0218).
pub fn scatter_labeled(c: &mut ShapeCtx) -> Rule {
    let n = matrix_of(c, 0, &[2], "`[N, 2]`")?;
    let m = vector_of(c, 1)?;
    same_count(c, 1, &n, &m)?;
    chart()
}

/// `loss_curve(losses)`: `[N]` (E0205).
pub fn loss_curve(c: &mut ShapeCtx) -> Rule {
    vector_of(c, 0)?;
    chart()
}

/// `confusion_matrix(pred, actual)`: two `[N]` id vectors of one length.
pub fn confusion_matrix(c: &mut ShapeCtx) -> Rule {
    let n = vector_of(c, 0)?;
    let m = vector_of(c, 1)?;
    same_count(c, 1, &n, &m)?;
    chart()
}

/// `boundary_2d(grid_outputs, dims, points, labels)`: E0218 unless dims has two
/// entries whose product is the output count; points `[N, 2]`, labels `[N]`.
pub fn boundary_2d(c: &mut ShapeCtx) -> Rule {
    let out = c.array(0)?;
    let dims = c.array(1)?;
    if let Some(d) = &dims {
        if let Some(len) = d.numel() {
            if len != 2 {
                return Err(super::site::boundary_dims_error(c, len));
            }
        }
        if let (Some(k), Some(n)) = (&d.constant, out.as_ref().and_then(AbsArray::numel)) {
            let (r, w) = (k[0].max(0.0) as usize, k[1].max(0.0) as usize);
            if r.checked_mul(w) != Some(n) {
                return Err(c
                    .error_of(0, code::E0218, format!("{n} outputs"))
                    .note(format!("dims ask for {r}·{w} grid outputs")));
            }
        }
    }
    let n = matrix_of(c, 2, &[2], "`[N, 2]`")?;
    let m = vector_of(c, 3)?;
    same_count(c, 3, &n, &m)?;
    chart()
}
