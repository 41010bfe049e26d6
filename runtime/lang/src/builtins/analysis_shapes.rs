//! Shape rules of the embedding analysis builtins (LANGUAGE §10.15), next to
//! their runtime implementations in `analysis.rs`.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, Dim};
use crate::check::ctx::ShapeCtx;
use crate::data::analysis::AnalysisError;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// `X: [N, D]` (E0205 otherwise): its two sizes.
fn matrix(c: &ShapeCtx) -> Result<(Dim, Dim), Diagnostic> {
    let x = c.array_of_rank(0, 2, super::site::MATRIX_ND)?;
    Ok(match x.and_then(|x| x.dims) {
        Some(d) => (d[0].clone(), d[1].clone()),
        None => (Dim::Unknown, Dim::Unknown),
    })
}

/// A non-negative integer argument (E0401), as `analysis::int_arg`.
fn int_arg(c: &ShapeCtx, i: usize) -> Result<Option<usize>, Diagnostic> {
    c.scalar(i)?
        .map(|v| super::site::nonnegative_integer(c, i, v))
        .transpose()
}

fn failed(c: &ShapeCtx, i: usize, e: AnalysisError) -> Diagnostic {
    c.error_at(i, e.code(), "invalid argument value", e.to_string())
}

/// `pairwise_sqdist(X)`: `[N, N]`.
pub fn pairwise_sqdist(c: &mut ShapeCtx) -> Rule {
    let (n, _) = matrix(c)?;
    Ok(AbsValue::Array(AbsArray::of_dims(vec![n.clone(), n])))
}

/// `knn(X, k)`: `[N, k]`; E0401 unless 1 ≤ k < N.
pub fn knn(c: &mut ShapeCtx) -> Rule {
    let (n, _) = matrix(c)?;
    let k = int_arg(c, 1)?;
    if let (Some(k), Dim::Known(n)) = (k, &n) {
        if k == 0 || k >= *n {
            return Err(failed(c, 1, AnalysisError::BadK { k, limit: *n }));
        }
    }
    Ok(AbsValue::Array(AbsArray::of_dims(vec![
        n,
        k.map_or(Dim::Unknown, Dim::Known),
    ])))
}

/// `pca(X, k)`: `[N, k]`; E0401 unless 1 ≤ k ≤ D.
pub fn pca(c: &mut ShapeCtx) -> Rule {
    let (n, d) = matrix(c)?;
    let k = int_arg(c, 1)?;
    if let (Some(k), Dim::Known(d)) = (k, &d) {
        if k == 0 || k > *d {
            return Err(failed(c, 1, AnalysisError::BadK { k, limit: d + 1 }));
        }
    }
    Ok(AbsValue::Array(AbsArray::of_dims(vec![
        n,
        k.map_or(Dim::Unknown, Dim::Known),
    ])))
}

/// `tsne(X, perplexity, iters, seed)`: `[N, 2]`; E0401 unless 0 < perplexity < N
/// and iters ≥ 1.
pub fn tsne(c: &mut ShapeCtx) -> Rule {
    let (n, _) = matrix(c)?;
    let perplexity = c.scalar(1)?;
    let iters = int_arg(c, 2)?;
    c.seed(3)?;
    if let (Some(p), Dim::Known(n)) = (perplexity, &n) {
        if p.is_nan() || p <= 0.0 || p >= *n as f64 {
            return Err(failed(
                c,
                1,
                AnalysisError::BadPerplexity {
                    perplexity: p,
                    n: *n,
                },
            ));
        }
    }
    if iters == Some(0) && n.known().is_some() && perplexity.is_some() {
        return Err(failed(c, 2, AnalysisError::NoIterations));
    }
    Ok(AbsValue::Array(AbsArray::of_dims(vec![n, Dim::Known(2)])))
}
