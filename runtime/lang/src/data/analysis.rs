//! Embedding analysis (LANGUAGE §10.15): pairwise squared distances, k nearest
//! neighbours, PCA by power iteration and exact t-SNE, all over a row-major
//! `[n, d]` float64 matrix.

use mlpl_devices::math;
use mlpl_diag::code;
use std::fmt;

use super::rng::Xorshift64;

/// Probabilities below this are clamped up (t-SNE's P and Q).
const MIN_PROB: f64 = 1e-12;
/// Most bisection steps per row when fitting the t-SNE precisions.
const BISECTION_STEPS: usize = 50;
/// Entropy tolerance of the bisection.
const BISECTION_TOL: f64 = 1e-5;
/// t-SNE early exaggeration factor and the iteration at which it ends.
const EXAGGERATION: f64 = 4.0;
const EXAGGERATION_END: usize = 100;
/// t-SNE momentum before and after iteration `MOMENTUM_SWITCH`.
const MOMENTUM_EARLY: f64 = 0.5;
const MOMENTUM_LATE: f64 = 0.8;
const MOMENTUM_SWITCH: usize = 250;
/// t-SNE learning rate.
const LEARNING_RATE: f64 = 200.0;
/// Scale of the initial t-SNE embedding.
const INIT_SCALE: f64 = 1e-4;
/// PCA power iterations per component.
const POWER_ITERATIONS: usize = 50;
/// A Gram–Schmidt residual below this norm counts as vanished.
const VANISH_NORM: f64 = 1e-12;
/// A power-iteration vector below this norm is not renormalised.
const TINY_NORM: f64 = 1e-30;

/// Why an analysis request cannot be honoured.
#[derive(Clone, Debug, PartialEq)]
pub enum AnalysisError {
    /// The data does not hold `n · d` values.
    ShapeMismatch {
        /// Number of values given.
        len: usize,
        /// Rows claimed.
        n: usize,
        /// Columns claimed.
        d: usize,
    },
    /// `k` is out of range (E0401): 1 ≤ k < n for `knn`, 1 ≤ k ≤ d for `pca`.
    BadK {
        /// The k given.
        k: usize,
        /// The exclusive upper bound.
        limit: usize,
    },
    /// The input holds NaN or an infinity (E0401).
    NotFinite,
    /// t-SNE needs 0 < perplexity < n (E0401).
    BadPerplexity {
        /// The perplexity given.
        perplexity: f64,
        /// The row count.
        n: usize,
    },
    /// t-SNE needs at least one iteration (E0401).
    NoIterations,
    /// An `[n, n]` or `[d, d]` intermediate would not fit in memory (E0401).
    TooLarge,
}

impl AnalysisError {
    /// The diagnostic code of LANGUAGE §20 this error is reported with.
    pub fn code(&self) -> &'static str {
        match self {
            AnalysisError::ShapeMismatch { .. } => code::E0205,
            _ => code::E0401,
        }
    }
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::ShapeMismatch { len, n, d } => {
                write!(
                    f,
                    "expected {n}·{d} values for an [{n}, {d}] matrix, got {len}"
                )
            }
            AnalysisError::BadK { k, limit } => {
                write!(
                    f,
                    "k = {k} is out of range (must be at least 1 and below {limit})"
                )
            }
            AnalysisError::NotFinite => write!(f, "X must contain only finite values"),
            AnalysisError::BadPerplexity { perplexity, n } => write!(
                f,
                "perplexity must satisfy 0 < perplexity < N = {n}, got {}",
                crate::display::format_f64(*perplexity)
            ),
            AnalysisError::NoIterations => write!(f, "iters must be at least 1"),
            AnalysisError::TooLarge => write!(f, "the input is too large to analyse"),
        }
    }
}

impl std::error::Error for AnalysisError {}

/// Checks that `x` holds exactly `n · d` values.
fn check_shape(x: &[f64], n: usize, d: usize) -> Result<(), AnalysisError> {
    match n.checked_mul(d) {
        Some(len) if len == x.len() => Ok(()),
        _ => Err(AnalysisError::ShapeMismatch { len: x.len(), n, d }),
    }
}

/// Checks that a `[m, m]` float64 matrix can be addressed.
fn check_square(m: usize) -> Result<(), AnalysisError> {
    match m.checked_mul(m) {
        Some(cells) if cells <= isize::MAX as usize / std::mem::size_of::<f64>() => Ok(()),
        _ => Err(AnalysisError::TooLarge),
    }
}

/// Checks that every value is finite.
fn check_finite(x: &[f64]) -> Result<(), AnalysisError> {
    if x.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(AnalysisError::NotFinite)
    }
}

/// `pairwise_sqdist(X)`: the `[n, n]` matrix of squared Euclidean distances
/// between the rows of the `[n, d]` matrix `x`, symmetric with a zero diagonal.
pub fn pairwise_sqdist(x: &[f64], n: usize, d: usize) -> Result<Vec<f64>, AnalysisError> {
    check_shape(x, n, d)?;
    check_square(n)?;
    Ok(sqdist_with(x, n, d, &|| false).0)
}

/// [`pairwise_sqdist`] that gives up (`Ok(None)`) soon after `stop` returns
/// true; `stop` is asked before every row.
pub fn pairwise_sqdist_until(
    x: &[f64],
    n: usize,
    d: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<f64>>, AnalysisError> {
    check_shape(x, n, d)?;
    check_square(n)?;
    let (out, stopped) = sqdist_with(x, n, d, stop);
    Ok((!stopped).then_some(out))
}

/// Upper triangle computed once and mirrored; the flag says whether `stop`
/// (asked before every row) ended it early.
fn sqdist_with(x: &[f64], n: usize, d: usize, stop: &dyn Fn() -> bool) -> (Vec<f64>, bool) {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        if stop() {
            return (out, true);
        }
        for j in (i + 1)..n {
            let s: f64 = (0..d)
                .map(|c| {
                    let diff = x[i * d + c] - x[j * d + c];
                    diff * diff
                })
                .sum();
            out[i * n + j] = s;
            out[j * n + i] = s;
        }
    }
    (out, false)
}

/// `knn(X, k)`: for each row the indices of the k nearest other rows by squared
/// distance, nearest first, ties to the lower index; a row never lists itself.
/// The result is `[n, k]` row-major. Requires 1 ≤ k < n.
pub fn knn(x: &[f64], n: usize, d: usize, k: usize) -> Result<Vec<usize>, AnalysisError> {
    knn_with(x, n, d, k, &|| false).map(|(out, _)| out)
}

/// [`knn`] that gives up (`Ok(None)`) soon after `stop` returns true; `stop` is
/// asked before every row.
pub fn knn_until(
    x: &[f64],
    n: usize,
    d: usize,
    k: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<usize>>, AnalysisError> {
    let (out, stopped) = knn_with(x, n, d, k, stop)?;
    Ok((!stopped).then_some(out))
}

/// The neighbour search; the flag says whether `stop` ended it early.
fn knn_with(
    x: &[f64],
    n: usize,
    d: usize,
    k: usize,
    stop: &dyn Fn() -> bool,
) -> Result<(Vec<usize>, bool), AnalysisError> {
    check_shape(x, n, d)?;
    if k == 0 || k >= n {
        return Err(AnalysisError::BadK { k, limit: n });
    }
    check_square(n)?;
    let (dist, stopped) = sqdist_with(x, n, d, stop);
    let mut out = Vec::with_capacity(n * k);
    if stopped {
        return Ok((out, true));
    }
    let mut candidates: Vec<usize> = Vec::with_capacity(n - 1);
    for i in 0..n {
        if stop() {
            return Ok((out, true));
        }
        candidates.clear();
        candidates.extend((0..n).filter(|&j| j != i));
        let row = &dist[i * n..(i + 1) * n];
        // A total order (NaN distances last), then the index for ties.
        candidates.sort_by(|&a, &b| row[a].total_cmp(&row[b]).then(a.cmp(&b)));
        out.extend_from_slice(&candidates[..k]);
    }
    Ok((out, false))
}

/// `pca(X, k)`: the `[n, k]` projection of the column-centred data onto its
/// first k principal components (LANGUAGE §10.15).
///
/// Cov = Xcᵀ·Xc / n. Each component starts from the lowest-index basis vector
/// that survives Gram–Schmidt against the earlier components, runs 50 power
/// iterations (multiply by Cov, Gram–Schmidt, normalise), then deflates
/// Cov ← Cov − λ·v·vᵀ with λ = vᵀ·Cov·v. Requires finite data and 1 ≤ k ≤ d.
pub fn pca(x: &[f64], n: usize, d: usize, k: usize) -> Result<Vec<f64>, AnalysisError> {
    pca_with(x, n, d, k, &|| false).map(|(y, _)| y)
}

/// [`pca`] that gives up (`Ok(None)`) soon after `stop` returns true; `stop` is
/// asked for every row of the covariance and every power iteration.
pub fn pca_until(
    x: &[f64],
    n: usize,
    d: usize,
    k: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<f64>>, AnalysisError> {
    let (y, stopped) = pca_with(x, n, d, k, stop)?;
    Ok((!stopped).then_some(y))
}

/// The projection; the flag says whether `stop` ended it early.
fn pca_with(
    x: &[f64],
    n: usize,
    d: usize,
    k: usize,
    stop: &dyn Fn() -> bool,
) -> Result<(Vec<f64>, bool), AnalysisError> {
    check_shape(x, n, d)?;
    if k == 0 || k > d {
        return Err(AnalysisError::BadK { k, limit: d + 1 });
    }
    check_finite(x)?;
    check_square(d)?;
    let xc = centre_columns(x, n, d);
    let Some(cov) = covariance(&xc, n, d, stop) else {
        return Ok((Vec::new(), true));
    };
    let Some(components) = principal_components(cov, d, k, stop) else {
        return Ok((Vec::new(), true));
    };
    let mut y = vec![0.0; n * k];
    for i in 0..n {
        for c in 0..k {
            y[i * k + c] = dot(&xc[i * d..(i + 1) * d], &components[c * d..(c + 1) * d]);
        }
    }
    Ok((y, false))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Subtracts each column's mean (an empty matrix stays empty).
fn centre_columns(x: &[f64], n: usize, d: usize) -> Vec<f64> {
    let mut means = vec![0.0; d];
    for row in x.chunks(d.max(1)).take(n) {
        for (m, v) in means.iter_mut().zip(row) {
            *m += v;
        }
    }
    for m in &mut means {
        *m /= n as f64;
    }
    x.chunks(d.max(1))
        .take(n)
        .flat_map(|row| row.iter().zip(&means).map(|(v, m)| v - m))
        .collect()
}

/// Cov = Xcᵀ·Xc / n, `[d, d]`; `None` when `stop` (asked for every row) said so.
fn covariance(xc: &[f64], n: usize, d: usize, stop: &dyn Fn() -> bool) -> Option<Vec<f64>> {
    let mut cov = vec![0.0; d * d];
    for a in 0..d {
        if stop() {
            return None;
        }
        for b in a..d {
            let s: f64 = (0..n).map(|i| xc[i * d + a] * xc[i * d + b]).sum();
            let v = s / n as f64;
            cov[a * d + b] = v;
            cov[b * d + a] = v;
        }
    }
    Some(cov)
}

/// The first `k` components as rows of a `[k, d]` matrix; `None` when `stop`
/// (asked before every power iteration) said so.
fn principal_components(
    mut cov: Vec<f64>,
    d: usize,
    k: usize,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<f64>> {
    let mut components = vec![0.0; k * d];
    let mut v = vec![0.0; d];
    let mut next = vec![0.0; d];
    for comp in 0..k {
        let (done, _) = components.split_at(comp * d);
        for start in 0..d {
            v.iter_mut().for_each(|x| *x = 0.0);
            v[start] = 1.0;
            orthogonalize(&mut v, done, d);
            let norm = dot(&v, &v).sqrt();
            if norm > VANISH_NORM {
                v.iter_mut().for_each(|x| *x /= norm);
                break;
            }
        }
        for _ in 0..POWER_ITERATIONS {
            if stop() {
                return None;
            }
            for (a, out) in next.iter_mut().enumerate() {
                *out = dot(&cov[a * d..(a + 1) * d], &v);
            }
            orthogonalize(&mut next, done, d);
            let norm = dot(&next, &next).sqrt();
            if norm > TINY_NORM {
                for (vi, ni) in v.iter_mut().zip(&next) {
                    *vi = ni / norm;
                }
            }
        }
        let lambda: f64 = (0..d)
            .map(|a| v[a] * dot(&cov[a * d..(a + 1) * d], &v))
            .sum();
        components[comp * d..(comp + 1) * d].copy_from_slice(&v);
        for a in 0..d {
            for b in 0..d {
                cov[a * d + b] -= lambda * v[a] * v[b];
            }
        }
    }
    Some(components)
}

/// Removes from `w` its projections on the unit rows of `earlier` (`[m, d]`).
fn orthogonalize(w: &mut [f64], earlier: &[f64], d: usize) {
    for prior in earlier.chunks(d.max(1)) {
        let p = dot(w, prior);
        for (wi, pi) in w.iter_mut().zip(prior) {
            *wi -= p * pi;
        }
    }
}

/// `tsne(X, perplexity, iters, seed)`: exact t-SNE to `[n, 2]` (row-major), as
/// LANGUAGE §10.15 describes: per-row precisions by bisection, symmetrised and
/// clamped P, Student-t Q, early exaggeration 4 for iterations 0..99, momentum
/// 0.5 then 0.8 from iteration 250, learning rate 200, re-centring every
/// iteration, initial Y = 1e-4 · randn(seed, [n, 2]).
///
/// Requires finite data, 0 < perplexity < n and iters ≥ 1.
pub fn tsne(
    x: &[f64],
    n: usize,
    d: usize,
    perplexity: f64,
    iters: usize,
    seed: u64,
) -> Result<Vec<f64>, AnalysisError> {
    tsne_with(x, n, d, perplexity, iters, seed, &|| false).map(|(y, _)| y)
}

/// [`tsne`] that gives up (`Ok(None)`) soon after `stop` returns true; `stop` is
/// asked before every iteration.
pub fn tsne_until(
    x: &[f64],
    n: usize,
    d: usize,
    perplexity: f64,
    iters: usize,
    seed: u64,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<f64>>, AnalysisError> {
    let (y, stopped) = tsne_with(x, n, d, perplexity, iters, seed, stop)?;
    Ok((!stopped).then_some(y))
}

/// The t-SNE iterations; the flag says whether `stop` ended them early.
fn tsne_with(
    x: &[f64],
    n: usize,
    d: usize,
    perplexity: f64,
    iters: usize,
    seed: u64,
    stop: &dyn Fn() -> bool,
) -> Result<(Vec<f64>, bool), AnalysisError> {
    check_shape(x, n, d)?;
    check_finite(x)?;
    if perplexity.is_nan() || perplexity <= 0.0 || perplexity >= n as f64 {
        return Err(AnalysisError::BadPerplexity { perplexity, n });
    }
    if iters == 0 {
        return Err(AnalysisError::NoIterations);
    }
    check_square(n)?;
    let Some(p) = joint_probabilities(x, n, d, perplexity, stop) else {
        return Ok((Vec::new(), true));
    };
    let mut rng = Xorshift64::new(seed);
    let mut y: Vec<f64> = (0..n * 2).map(|_| rng.normal() * INIT_SCALE).collect();
    let mut update = vec![0.0; n * 2];
    for step in 0..iters {
        if stop() {
            return Ok((y, true));
        }
        let exaggeration = if step < EXAGGERATION_END {
            EXAGGERATION
        } else {
            1.0
        };
        let momentum = if step < MOMENTUM_SWITCH {
            MOMENTUM_EARLY
        } else {
            MOMENTUM_LATE
        };
        tsne_step(&mut y, &p, &mut update, n, exaggeration, momentum);
    }
    Ok((y, false))
}

/// P = max((P(j|i) + P(i|j)) / 2n, 1e-12), the rows P(·|i) fitted to the target
/// perplexity; `None` when `stop` (asked for every row) said so.
fn joint_probabilities(
    x: &[f64],
    n: usize,
    d: usize,
    perplexity: f64,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<f64>> {
    let target = math::log(perplexity);
    let (dist, stopped) = sqdist_with(x, n, d, stop);
    if stopped {
        return None;
    }
    let mut conditional = vec![0.0; n * n];
    for i in 0..n {
        if stop() {
            return None;
        }
        let row = fit_row(&dist[i * n..(i + 1) * n], i, target);
        conditional[i * n..(i + 1) * n].copy_from_slice(&row);
    }
    let norm = 2.0 * n as f64;
    let mut p = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let v = (conditional[i * n + j] + conditional[j * n + i]) / norm;
            p[i * n + j] = v.max(MIN_PROB);
        }
    }
    Some(p)
}

/// Bisection on the precision β of row `i` until the entropy of P(·|i) is within
/// the tolerance of `target` (at most 50 steps); returns the last row computed.
fn fit_row(dist_row: &[f64], i: usize, target: f64) -> Vec<f64> {
    let mut beta = 1.0_f64;
    let mut lo = f64::NEG_INFINITY;
    let mut hi = f64::INFINITY;
    let mut row = Vec::new();
    for _ in 0..BISECTION_STEPS {
        let (r, entropy) = conditional_row(dist_row, i, beta);
        row = r;
        let diff = entropy - target;
        if diff.abs() < BISECTION_TOL {
            break;
        }
        if diff > 0.0 {
            // Too spread out: sharpen.
            lo = beta;
            beta = if hi.is_infinite() {
                beta * 2.0
            } else {
                (beta + hi) * 0.5
            };
        } else {
            hi = beta;
            beta = if lo.is_infinite() {
                beta * 0.5
            } else {
                (beta + lo) * 0.5
            };
        }
    }
    row
}

/// P(·|i) at precision β (self excluded) and its Shannon entropy.
fn conditional_row(dist_row: &[f64], i: usize, beta: f64) -> (Vec<f64>, f64) {
    let mut row = vec![0.0; dist_row.len()];
    let mut z = 0.0;
    for (j, (r, &dij)) in row.iter_mut().zip(dist_row).enumerate() {
        if j != i {
            *r = math::exp(-beta * dij);
            z += *r;
        }
    }
    let mut entropy = 0.0;
    if z > 0.0 {
        for (j, r) in row.iter_mut().enumerate() {
            if j == i {
                continue;
            }
            *r /= z;
            if *r > MIN_PROB {
                entropy -= *r * math::log(*r);
            }
        }
    }
    (row, entropy)
}

/// One gradient step with momentum, then re-centring.
fn tsne_step(
    y: &mut [f64],
    p: &[f64],
    update: &mut [f64],
    n: usize,
    exaggeration: f64,
    momentum: f64,
) {
    let mut q_num = vec![0.0; n * n];
    let mut z = 0.0;
    for i in 0..n {
        for j in (i + 1)..n {
            let dx = y[i * 2] - y[j * 2];
            let dy = y[i * 2 + 1] - y[j * 2 + 1];
            let q = 1.0 / (1.0 + dx * dx + dy * dy);
            q_num[i * n + j] = q;
            q_num[j * n + i] = q;
            z += 2.0 * q;
        }
    }
    let z_inv = if z > 0.0 { 1.0 / z } else { 0.0 };
    let mut grad = vec![0.0; n * 2];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let qn = q_num[i * n + j];
            let q = (qn * z_inv).max(MIN_PROB);
            let mult = 4.0 * (exaggeration * p[i * n + j] - q) * qn;
            grad[i * 2] += mult * (y[i * 2] - y[j * 2]);
            grad[i * 2 + 1] += mult * (y[i * 2 + 1] - y[j * 2 + 1]);
        }
    }
    for ((u, yk), g) in update.iter_mut().zip(y.iter_mut()).zip(&grad) {
        *u = momentum * *u - LEARNING_RATE * g;
        *yk += *u;
    }
    if n > 0 {
        let (mut sx, mut sy) = (0.0, 0.0);
        for pt in y.chunks(2) {
            sx += pt[0];
            sy += pt[1];
        }
        let (mx, my) = (sx / n as f64, sy / n as f64);
        for pt in y.chunks_mut(2) {
            pt[0] -= mx;
            pt[1] -= my;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance_pairwise_sqdist() {
        let x = [0.0, 0.0, 3.0, 4.0, 1.0, 1.0];
        assert_eq!(
            pairwise_sqdist(&x, 3, 2).unwrap(),
            vec![0.0, 25.0, 2.0, 25.0, 0.0, 13.0, 2.0, 13.0, 0.0]
        );
    }

    #[test]
    fn pairwise_edges() {
        assert_eq!(pairwise_sqdist(&[], 0, 2).unwrap(), Vec::<f64>::new());
        assert_eq!(pairwise_sqdist(&[], 2, 0).unwrap(), vec![0.0; 4]);
        assert_eq!(
            pairwise_sqdist(&[1.0, 2.0, 3.0], 2, 2),
            Err(AnalysisError::ShapeMismatch { len: 3, n: 2, d: 2 })
        );
        assert!(pairwise_sqdist(&[1.0], usize::MAX, 2).is_err());
        assert_eq!(
            pairwise_sqdist(&[], usize::MAX, 0),
            Err(AnalysisError::TooLarge)
        );
        assert_eq!(
            pairwise_sqdist(&[], usize::MAX >> 8, 0),
            Err(AnalysisError::TooLarge)
        );
        assert_eq!(
            knn(&[], usize::MAX >> 8, 0, 1),
            Err(AnalysisError::TooLarge)
        );
        assert_eq!(
            pca(&[], 0, usize::MAX >> 8, 1),
            Err(AnalysisError::TooLarge)
        );
        assert_eq!(
            tsne(&[], usize::MAX >> 8, 0, 5.0, 1, 1),
            Err(AnalysisError::TooLarge)
        );
        assert_eq!(AnalysisError::TooLarge.code(), code::E0401);
        assert_eq!(
            AnalysisError::ShapeMismatch { len: 0, n: 1, d: 1 }.code(),
            code::E0205
        );
    }

    #[test]
    fn conformance_knn() {
        let x = [0.0, 0.0, 3.0, 4.0, 1.0, 1.0, 0.0, 1.0];
        assert_eq!(knn(&x, 4, 2, 2).unwrap(), vec![3, 2, 2, 3, 3, 0, 0, 2]);
    }

    #[test]
    fn knn_ties_and_errors() {
        // Points on a line: 0, 1, 2 — row 1 has two neighbours at distance 1.
        let x = [0.0, 1.0, 2.0];
        assert_eq!(knn(&x, 3, 1, 2).unwrap(), vec![1, 2, 0, 2, 1, 0]);
        // Duplicate points: ties go to the lower index, never to itself.
        let x = [5.0, 5.0, 5.0];
        assert_eq!(knn(&x, 3, 1, 1).unwrap(), vec![1, 0, 0]);
        assert_eq!(
            knn(&x, 3, 1, 0),
            Err(AnalysisError::BadK { k: 0, limit: 3 })
        );
        assert_eq!(
            knn(&x, 3, 1, 3),
            Err(AnalysisError::BadK { k: 3, limit: 3 })
        );
        assert!(knn(&[], 0, 1, 1).is_err());
        assert!(knn(&[f64::NAN, 0.0, 1.0], 3, 1, 2).is_ok());
    }

    #[test]
    fn pca_recovers_the_main_axis() {
        // Points along the direction (1, 1) with a little spread across it.
        let x = [-2.0, -2.0, -1.0, -1.1, 0.0, 0.1, 1.0, 0.9, 2.0, 2.1];
        let y = pca(&x, 5, 2, 2).unwrap();
        assert_eq!(y.len(), 10);
        // The first coordinate is the projection on ±(1,1)/√2 of the centred data.
        let means = [0.0, 0.0];
        for i in 0..5 {
            let proj = ((x[i * 2] - means[0]) + (x[i * 2 + 1] - means[1])) / 2f64.sqrt();
            assert!((y[i * 2].abs() - proj.abs()).abs() < 0.02, "row {i}");
        }
        // Components are orthogonal, so projections preserve squared norms.
        let total: f64 = x.iter().map(|v| v * v).sum();
        let projected: f64 = y.iter().map(|v| v * v).sum();
        assert!((total - projected).abs() < 1e-9);
        // The first component carries most of the variance.
        let first: f64 = (0..5).map(|i| y[i * 2] * y[i * 2]).sum();
        assert!(first > 0.99 * projected);
    }

    #[test]
    fn pca_by_hand_diagonal_covariance() {
        // Cov = diag(0.5, 4.5). The first component starts at e0, which is an
        // eigenvector, so the power iteration stays there (λ = 0.5); after
        // deflation e0 vanishes under Gram–Schmidt and the second component
        // starts at e1.
        let x = [1.0, 0.0, -1.0, 0.0, 0.0, 3.0, 0.0, -3.0];
        let y = pca(&x, 4, 2, 2).unwrap();
        assert_eq!(y, vec![1.0, 0.0, -1.0, 0.0, 0.0, 3.0, 0.0, -3.0]);
        assert_eq!(pca(&x, 4, 2, 1).unwrap(), vec![1.0, -1.0, 0.0, 0.0]);
        // A start vector with a component along the dominant axis converges to it.
        let x = [
            1.0, 1.0, -1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 2.0, 2.0, -2.0, -2.0,
        ];
        let y = pca(&x, 6, 2, 1).unwrap();
        let want = [
            2f64.sqrt(),
            -(2f64.sqrt()),
            0.0,
            0.0,
            8f64.sqrt(),
            -(8f64.sqrt()),
        ];
        for (g, w) in y.iter().zip(&want) {
            assert!((g.abs() - w.abs()).abs() < 1e-9, "{g} vs {w}");
        }
    }

    #[test]
    fn pca_degenerate_and_errors() {
        // Constant data: every projection is 0 and nothing is NaN.
        let y = pca(&[1.0, 2.0, 1.0, 2.0, 1.0, 2.0], 3, 2, 2).unwrap();
        assert!(y.iter().all(|v| *v == 0.0));
        assert_eq!(
            pca(&[1.0, 2.0], 1, 2, 3),
            Err(AnalysisError::BadK { k: 3, limit: 3 })
        );
        assert_eq!(
            pca(&[1.0, 2.0], 1, 2, 0),
            Err(AnalysisError::BadK { k: 0, limit: 3 })
        );
        assert_eq!(
            pca(&[1.0, f64::INFINITY], 1, 2, 1),
            Err(AnalysisError::NotFinite)
        );
        assert_eq!(pca(&[], 0, 2, 1).unwrap(), Vec::<f64>::new());
        assert!(pca(&[], 0, 0, 1).is_err());
    }

    /// Two well separated clusters of `per` points each in 3-D.
    fn clusters(per: usize) -> Vec<f64> {
        let noise = crate::data::rng::normal_vec(11, per * 6);
        (0..2 * per)
            .flat_map(|i| {
                let c = if i < per { 0.0 } else { 10.0 };
                (0..3).map(move |k| (i, k, c))
            })
            .map(|(i, k, c)| c + 0.3 * noise[i * 3 + k])
            .collect()
    }

    #[test]
    fn tsne_separates_clusters_and_is_deterministic() {
        let (per, n) = (30, 60);
        let x = clusters(per);
        let y = tsne(&x, n, 3, 10.0, 300, 7).unwrap();
        assert_eq!(y.len(), 2 * n);
        assert!(y.iter().all(|v| v.is_finite()));
        // Centred every iteration.
        let scale = y.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        let mx: f64 = y.chunks(2).map(|p| p[0]).sum::<f64>() / n as f64;
        let my: f64 = y.chunks(2).map(|p| p[1]).sum::<f64>() / n as f64;
        assert!(mx.abs() < 1e-12 * scale * n as f64 && my.abs() < 1e-12 * scale * n as f64);
        // Points of the same cluster end up closer than points of different ones,
        // and most nearest neighbours are in the same cluster.
        let dist = pairwise_sqdist(&y, n, 2).unwrap();
        let (mut within, mut across) = (0.0, 0.0);
        for i in 0..n {
            for j in 0..n {
                if (i < per) == (j < per) {
                    within += dist[i * n + j].sqrt();
                } else {
                    across += dist[i * n + j].sqrt();
                }
            }
        }
        assert!(within < across, "{within} vs {across}");
        // (Learning rate 200 is large for so few points, so the layout is rough.)
        let nn = knn(&y, n, 2, 1).unwrap();
        let same = nn
            .iter()
            .enumerate()
            .filter(|(i, &j)| (*i < per) == (j < per))
            .count();
        assert!(same >= n * 3 / 4, "{same}");
        assert_eq!(tsne(&x, n, 3, 10.0, 300, 7).unwrap(), y);
        assert_ne!(tsne(&x, n, 3, 10.0, 300, 8).unwrap(), y);
    }

    #[test]
    fn tsne_stops_when_asked() {
        let x: Vec<f64> = (0..30).map(f64::from).collect();
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 5
        };
        assert_eq!(tsne_until(&x, 10, 3, 2.0, 100, 1, &stop), Ok(None));
        assert_eq!(asked.get(), 6);
        let full = tsne_until(&x, 10, 3, 2.0, 100, 1, &|| false).unwrap();
        assert_eq!(full, Some(tsne(&x, 10, 3, 2.0, 100, 1).unwrap()));
    }

    #[test]
    fn distances_neighbours_and_pca_stop_when_asked() {
        let x: Vec<f64> = (0..60).map(|v| f64::from(v * v % 17)).collect();
        let always = || true;
        assert_eq!(pairwise_sqdist_until(&x, 20, 3, &always), Ok(None));
        assert_eq!(knn_until(&x, 20, 3, 2, &always), Ok(None));
        assert_eq!(pca_until(&x, 20, 3, 2, &always), Ok(None));
        // Invalid input is still an error, stopped or not.
        assert!(knn_until(&x, 20, 3, 20, &always).is_err());
        let never = || false;
        let d = pairwise_sqdist_until(&x, 20, 3, &never).unwrap();
        assert_eq!(d, Some(pairwise_sqdist(&x, 20, 3).unwrap()));
        let k = knn_until(&x, 20, 3, 2, &never).unwrap();
        assert_eq!(k, Some(knn(&x, 20, 3, 2).unwrap()));
        let p = pca_until(&x, 20, 3, 2, &never).unwrap();
        assert_eq!(p, Some(pca(&x, 20, 3, 2).unwrap()));
        // Asked as it goes: the 5th row of the distances stops knn.
        let asked = std::cell::Cell::new(0);
        let fifth = || {
            asked.set(asked.get() + 1);
            asked.get() >= 5
        };
        assert_eq!(knn_until(&x, 20, 3, 2, &fifth), Ok(None));
        assert_eq!(asked.get(), 5);
    }

    #[test]
    fn tsne_first_step_by_hand() {
        // One iteration from the seeded start: Y₁ = Y₀ − 200·grad, re-centred.
        let x = [0.0, 1.0, 3.0];
        let n = 3;
        let p = joint_probabilities(&x, n, 1, 1.5, &|| false).unwrap();
        let y0 = crate::data::rng::normal_vec(4, 6)
            .into_iter()
            .map(|v| v * 1e-4)
            .collect::<Vec<_>>();
        let mut want = y0.clone();
        let mut z = 0.0;
        let mut qn = [[0.0; 3]; 3];
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    let dx = y0[i * 2] - y0[j * 2];
                    let dy = y0[i * 2 + 1] - y0[j * 2 + 1];
                    qn[i][j] = 1.0 / (1.0 + dx * dx + dy * dy);
                    z += qn[i][j];
                }
            }
        }
        for i in 0..n {
            for c in 0..2 {
                let mut g = 0.0;
                for j in 0..n {
                    if i != j {
                        let q = (qn[i][j] / z).max(1e-12);
                        g += 4.0
                            * (4.0 * p[i * n + j] - q)
                            * qn[i][j]
                            * (y0[i * 2 + c] - y0[j * 2 + c]);
                    }
                }
                want[i * 2 + c] -= 200.0 * g;
            }
        }
        for c in 0..2 {
            let m = (want[c] + want[2 + c] + want[4 + c]) / 3.0;
            for i in 0..n {
                want[i * 2 + c] -= m;
            }
        }
        let got = tsne(&x, n, 1, 1.5, 1, 4).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-12, "{g} vs {w}");
        }
    }

    #[test]
    fn tsne_probabilities_are_symmetric_and_normalised() {
        let x = clusters(10);
        let p = joint_probabilities(&x, 20, 3, 5.0, &|| false).unwrap();
        for i in 0..20 {
            for j in 0..20 {
                assert!((p[i * 20 + j] - p[j * 20 + i]).abs() < 1e-15);
                assert!(p[i * 20 + j] >= 1e-12);
            }
        }
        let total: f64 = (0..400).filter(|k| k / 20 != k % 20).map(|k| p[k]).sum();
        assert!((total - 1.0).abs() < 1e-6);
        // The fitted rows reach the target perplexity.
        let (dist, _) = sqdist_with(&x, 20, 3, &|| false);
        let row = fit_row(&dist[..20], 0, 5f64.ln());
        let h: f64 = row
            .iter()
            .filter(|&&v| v > 1e-12)
            .map(|v| -v * v.ln())
            .sum();
        assert!((h - 5f64.ln()).abs() < 1e-4);
    }

    #[test]
    fn tsne_errors() {
        let x = [0.0, 1.0, 2.0];
        assert_eq!(
            tsne(&x, 3, 1, 3.0, 10, 1),
            Err(AnalysisError::BadPerplexity {
                perplexity: 3.0,
                n: 3
            })
        );
        assert!(matches!(
            tsne(&x, 3, 1, 0.0, 10, 1),
            Err(AnalysisError::BadPerplexity { .. })
        ));
        assert!(matches!(
            tsne(&x, 3, 1, f64::NAN, 10, 1),
            Err(AnalysisError::BadPerplexity { .. })
        ));
        assert_eq!(tsne(&x, 3, 1, 1.0, 0, 1), Err(AnalysisError::NoIterations));
        assert_eq!(
            tsne(&[f64::NAN, 1.0, 2.0], 3, 1, 1.0, 1, 1),
            Err(AnalysisError::NotFinite)
        );
        assert!(tsne(&[], 0, 1, 0.5, 1, 1).is_err());
        // A single row with perplexity in (0, 1) stays finite.
        assert_eq!(tsne(&[4.0], 1, 1, 0.5, 3, 1).unwrap(), vec![0.0, 0.0]);
        assert_eq!(AnalysisError::NoIterations.code(), code::E0401);
    }
}
