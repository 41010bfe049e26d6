//! Embedding analysis (LANGUAGE §10.15): distances, neighbours, PCA and t-SNE on
//! `[N, D]` data, computed in float64 on the host.

use super::site::CallSite;
use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::data::analysis::{self, AnalysisError};
use crate::eval::Call;
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "pairwise_sqdist",
        params: &[req("X", Array)],
        summary: "squared distances between all rows",
        doc: "`pairwise_sqdist(X)` returns `[N, N]` squared Euclidean distances between the rows of `X: [N, D]` (symmetric, zero diagonal).",
        example: "pairwise_sqdist([[0, 0], [3, 4], [1, 1]])",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.15",
        run: pairwise_sqdist,
        shape: Some(super::analysis_shapes::pairwise_sqdist),
    },
    Builtin {
        name: "knn",
        params: &[req("X", Array), req("k", Scalar)],
        summary: "indices of each row's k nearest rows",
        doc: "`knn(X, k)` returns `[N, k]`: for each row the indices of the k nearest other rows, nearest first, ties to the lower index. E0401 unless 1 ≤ k < N.",
        example: "knn([[0, 0], [3, 4], [1, 1], [0, 1]], 2)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.15",
        run: knn,
        shape: Some(super::analysis_shapes::knn),
    },
    Builtin {
        name: "pca",
        params: &[req("X", Array), req("k", Scalar)],
        summary: "project rows onto the top k principal components",
        doc: "`pca(X, k)` centres the columns and projects onto k components found by power iteration with deflation (LANGUAGE §10.15): `[N, k]`. E0401 unless 1 ≤ k ≤ D and X is finite.",
        example: "pca([[1, 2], [3, 4], [5, 7]], 1)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.15",
        run: pca,
        shape: Some(super::analysis_shapes::pca),
    },
    Builtin {
        name: "tsne",
        params: &[req("X", Array), req("perplexity", Scalar), req("iters", Scalar), req("seed", Seed)],
        summary: "exact t-SNE embedding into 2-D",
        doc: "`tsne(X, perplexity, iters, seed)` returns `[N, 2]` by exact t-SNE (LANGUAGE §10.15). E0401 unless 0 < perplexity < N, iters ≥ 1 and X is finite.",
        example: "tsne(randn(1, [6, 3]), 2, 50, 0)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.15",
        run: tsne,
        shape: Some(super::analysis_shapes::tsne),
    },
];

fn matrix(c: &Call) -> Result<(Vec<f64>, usize, usize), Diagnostic> {
    let x = c.array_of_rank(0, 2, super::site::MATRIX_ND)?;
    Ok((x.to_f64(), x.shape()[0], x.shape()[1]))
}

/// E0410 when a `[m, m]` working matrix would be absurdly large (LANGUAGE §6.5:
/// a diagnostic, not an allocation failure that kills the process).
fn check_square(c: &Call, m: usize) -> Result<(), Diagnostic> {
    super::construct::checked_numel(c, 0, &[m, m]).map(|_| ())
}

fn failed(c: &Call, e: AnalysisError) -> Diagnostic {
    let at = match e {
        AnalysisError::BadK { .. } | AnalysisError::BadPerplexity { .. } => 1,
        AnalysisError::NoIterations => 2,
        _ => 0,
    };
    c.error_at(at, e.code(), "invalid argument value", e.to_string())
}

fn int_arg(c: &Call, i: usize) -> Result<usize, Diagnostic> {
    let v = c.scalar(i)?;
    super::site::nonnegative_integer(c, i, v)
}

fn pairwise_sqdist(c: &mut Call) -> Result<Value, Diagnostic> {
    let (x, n, d) = matrix(c)?;
    check_square(c, n)?;
    let stop = super::stop_requested(c);
    let out = analysis::pairwise_sqdist_until(&x, n, d, &stop)
        .map_err(|e| failed(c, e))?
        .ok_or_else(|| super::cancelled(c))?;
    Ok(Value::Array(Array::from_f64(vec![n, n], &out)))
}

fn knn(c: &mut Call) -> Result<Value, Diagnostic> {
    let (x, n, d) = matrix(c)?;
    let k = int_arg(c, 1)?;
    check_square(c, n)?;
    let stop = super::stop_requested(c);
    let out = analysis::knn_until(&x, n, d, k, &stop)
        .map_err(|e| failed(c, e))?
        .ok_or_else(|| super::cancelled(c))?;
    Ok(Value::Array(Array::from_vec(
        vec![n, k],
        out.iter().map(|&i| i as f32).collect(),
    )))
}

fn pca(c: &mut Call) -> Result<Value, Diagnostic> {
    let (x, n, d) = matrix(c)?;
    let k = int_arg(c, 1)?;
    check_square(c, d)?;
    let stop = super::stop_requested(c);
    let out = analysis::pca_until(&x, n, d, k, &stop)
        .map_err(|e| failed(c, e))?
        .ok_or_else(|| super::cancelled(c))?;
    Ok(Value::Array(Array::from_f64(vec![n, k], &out)))
}

fn tsne(c: &mut Call) -> Result<Value, Diagnostic> {
    let (x, n, d) = matrix(c)?;
    let perplexity = c.scalar(1)?;
    let iters = int_arg(c, 2)?;
    let seed = c.seed(3)?;
    check_square(c, n)?;
    let stop = super::stop_requested(c);
    let out = analysis::tsne_until(&x, n, d, perplexity, iters, seed, &stop)
        .map_err(|e| failed(c, e))?
        .ok_or_else(|| super::cancelled(c))?;
    Ok(Value::Array(Array::from_f64(vec![n, 2], &out)))
}
