//! Synthetic data sets and row bookkeeping: `blobs`, `moons`, `circles`
//! (LANGUAGE §10.6, §13.5), `grid` (§10.1) and the train/validation split sizes
//! of `split` and `val_split` (§10.8).
//!
//! Values are computed in float64; the caller rounds them to float32 once, when
//! it stores them.

use mlpl_devices::math;
use mlpl_diag::code;
use std::f64::consts::PI;
use std::fmt;

use super::rng::Xorshift64;

/// Standard deviation of the points of a blob around its centre.
const BLOB_SIGMA: f64 = 0.15;

/// Why a data set request cannot be honoured.
#[derive(Clone, Debug, PartialEq)]
pub enum DatasetError {
    /// `grid` needs at least one point per axis (E0401).
    GridSizeZero,
    /// `split` and `val_split` need at least two rows (E0216).
    TooFewRows {
        /// The row count given.
        n: usize,
    },
    /// `split` and `val_split` need 0 < frac < 1 (E0401).
    BadFraction {
        /// The fraction given.
        frac: f64,
    },
    /// The requested result has more rows than can be addressed.
    TooLarge,
}

impl DatasetError {
    /// The diagnostic code of LANGUAGE §20 this error is reported with.
    pub fn code(&self) -> &'static str {
        match self {
            DatasetError::GridSizeZero | DatasetError::BadFraction { .. } => code::E0401,
            DatasetError::TooFewRows { .. } => code::E0216,
            DatasetError::TooLarge => code::E0401,
        }
    }
}

impl fmt::Display for DatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetError::GridSizeZero => write!(f, "grid needs n >= 1 points per axis"),
            DatasetError::TooFewRows { n } => {
                write!(f, "splitting needs at least 2 rows, got {n}")
            }
            DatasetError::BadFraction { frac } => write!(
                f,
                "the split fraction must satisfy 0 < frac < 1, got {}",
                crate::display::format_f64(*frac)
            ),
            DatasetError::TooLarge => write!(f, "the requested data set is too large"),
        }
    }
}

impl std::error::Error for DatasetError {}

/// `blobs(seed, n, centers)`: for each centre (class c, in order) `n` rows
/// `[cx + 0.15·z₁, cy + 0.15·z₂, c]`, drawing the normal for x before the one for
/// y, all from one generator initialised with `seed`.
///
/// Fails with [`DatasetError::TooLarge`] when `n · centers.len()` overflows.
pub fn blobs(seed: u64, n: usize, centers: &[(f64, f64)]) -> Result<Vec<[f64; 3]>, DatasetError> {
    n.checked_mul(centers.len()).ok_or(DatasetError::TooLarge)?;
    let mut rng = Xorshift64::new(seed);
    let mut rows = Vec::new();
    for (class, &(cx, cy)) in centers.iter().enumerate() {
        for _ in 0..n {
            let x = cx + BLOB_SIGMA * rng.normal();
            let y = cy + BLOB_SIGMA * rng.normal();
            rows.push([x, y, class as f64]);
        }
    }
    Ok(rows)
}

/// Which of the two-class shapes [`two_class`] draws.
#[derive(Clone, Copy)]
enum Shape2d {
    Moons,
    Circles,
}

/// `moons(seed, n, noise)`: two interleaving half circles. The first ⌊n/2⌋ rows
/// are class 0 at (cos θ, sin θ), the rest class 1 at (1 − cos θ, 0.5 − sin θ),
/// with θ = π·i/n_c for row i of a class of n_c rows; each row then adds
/// noise·normal() to x and then to y. Rows are `[x, y, class]`.
pub fn moons(seed: u64, n: usize, noise: f64) -> Vec<[f64; 3]> {
    two_class(Shape2d::Moons, seed, n, noise)
}

/// `circles(seed, n, noise)`: two concentric circles, class 0 of radius 0.5 and
/// class 1 of radius 1, split as in [`moons`], with θ = 2π·i/n_c and the same
/// noise. Rows are `[x, y, class]`.
pub fn circles(seed: u64, n: usize, noise: f64) -> Vec<[f64; 3]> {
    two_class(Shape2d::Circles, seed, n, noise)
}

/// The shared body of [`moons`] and [`circles`].
fn two_class(shape: Shape2d, seed: u64, n: usize, noise: f64) -> Vec<[f64; 3]> {
    let n0 = n / 2;
    let n1 = n - n0;
    let mut rng = Xorshift64::new(seed);
    let mut rows = Vec::new();
    for k in 0..n {
        let (class, i, n_c) = if k < n0 { (0, k, n0) } else { (1, k - n0, n1) };
        // n_c >= 1 whenever a row of that class exists.
        let (x, y) = match shape {
            Shape2d::Moons => {
                let theta = PI * i as f64 / n_c as f64;
                if class == 0 {
                    (math::cos(theta), math::sin(theta))
                } else {
                    (1.0 - math::cos(theta), 0.5 - math::sin(theta))
                }
            }
            Shape2d::Circles => {
                let theta = 2.0 * PI * i as f64 / n_c as f64;
                let r = if class == 0 { 0.5 } else { 1.0 };
                (r * math::cos(theta), r * math::sin(theta))
            }
        };
        let x = x + noise * rng.normal();
        let y = y + noise * rng.normal();
        rows.push([x, y, f64::from(class)]);
    }
    rows
}

/// `grid(bounds, n)` with bounds `[xmin, xmax, ymin, ymax]`: `n·n` points, row
/// i·n + j being (xmin + (xmax−xmin)·j/(n−1), ymin + (ymax−ymin)·i/(n−1)); the
/// denominators are 1 when n = 1.
///
/// Fails with [`DatasetError::GridSizeZero`] when n = 0 and
/// [`DatasetError::TooLarge`] when n·n overflows.
pub fn grid(bounds: [f64; 4], n: usize) -> Result<Vec<[f64; 2]>, DatasetError> {
    if n == 0 {
        return Err(DatasetError::GridSizeZero);
    }
    n.checked_mul(n).ok_or(DatasetError::TooLarge)?;
    let [xmin, xmax, ymin, ymax] = bounds;
    let denom = if n == 1 { 1.0 } else { (n - 1) as f64 };
    let mut points = Vec::new();
    for i in 0..n {
        let y = ymin + (ymax - ymin) * i as f64 / denom;
        for j in 0..n {
            let x = xmin + (xmax - xmin) * j as f64 / denom;
            points.push([x, y]);
        }
    }
    Ok(points)
}

/// The training row count of `split(x, frac, seed)` for `n` rows:
/// n_tr = clamp(⌊n·frac⌋, 1, n−1); `val_split` takes the other n − n_tr rows.
///
/// Fails with [`DatasetError::TooFewRows`] when n < 2 and
/// [`DatasetError::BadFraction`] unless 0 < frac < 1.
pub fn split_sizes(n: usize, frac: f64) -> Result<usize, DatasetError> {
    if n < 2 {
        return Err(DatasetError::TooFewRows { n });
    }
    if frac.is_nan() || frac <= 0.0 || frac >= 1.0 {
        return Err(DatasetError::BadFraction { frac });
    }
    let floor = (n as f64 * frac).floor();
    // `as usize` saturates; the clamp keeps the result in 1..n.
    Ok((floor as usize).clamp(1, n - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::rng::tests::assert_f32_equal;

    fn flatten<const W: usize>(rows: &[[f64; W]]) -> Vec<f64> {
        rows.iter().flat_map(|r| r.iter().copied()).collect()
    }

    #[test]
    fn conformance_moons() {
        assert_f32_equal(
            &flatten(&moons(1, 3, 0.1)),
            "1.63416935111537 0.0966866061308505 0\n\
             0.11079516872483018 0.5144149193812704 1\n\
             0.8858843726060426 -0.3075033117332018 1",
        );
    }

    #[test]
    fn conformance_circles() {
        assert_f32_equal(
            &flatten(&circles(2, 2, 0.05)),
            "0.7390801059476805 -0.08731970523518733 0\n\
             0.9840437059859457 -0.00856641136210029 1",
        );
    }

    #[test]
    fn conformance_blobs() {
        let rows = blobs(5, 2, &[(0.0, 0.0), (3.0, 3.0)]).unwrap();
        assert_f32_equal(
            &flatten(&rows),
            "-0.3804410840784122 0.03916927566658086 0\n\
             0.08271122823753606 0.05708944264733968 0\n\
             2.9729171161292407 3.0109296076728906 1\n\
             3.127864586632009 2.987917964663571 1",
        );
    }

    #[test]
    fn noiseless_shapes_by_hand() {
        let m = moons(3, 4, 0.0);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0], [1.0, 0.0, 0.0]);
        assert!((m[1][0] - 0.0).abs() < 1e-15 && (m[1][1] - 1.0).abs() < 1e-15);
        assert_eq!(m[2], [0.0, 0.5, 1.0]);
        assert!((m[3][0] - 1.0).abs() < 1e-15 && (m[3][1] + 0.5).abs() < 1e-15);
        let c = circles(3, 4, 0.0);
        assert_eq!(c[0], [0.5, 0.0, 0.0]);
        assert!((c[1][0] + 0.5).abs() < 1e-15 && c[1][1].abs() < 1e-15);
        assert_eq!(c[2], [1.0, 0.0, 1.0]);
        assert!(moons(1, 0, 0.1).is_empty());
        let one = circles(1, 1, 0.0);
        assert_eq!(one, vec![[1.0, 0.0, 1.0]]);
    }

    #[test]
    fn blobs_edges() {
        assert!(blobs(1, 0, &[(0.0, 0.0)]).unwrap().is_empty());
        assert!(blobs(1, 5, &[]).unwrap().is_empty());
        assert_eq!(
            blobs(1, usize::MAX, &[(0.0, 0.0), (1.0, 1.0)]),
            Err(DatasetError::TooLarge)
        );
        let rows = blobs(9, 3, &[(10.0, -10.0)]).unwrap();
        assert!(rows
            .iter()
            .all(|r| (r[0] - 10.0).abs() < 1.0 && r[2] == 0.0));
    }

    #[test]
    fn conformance_grid() {
        let g = grid([0.0, 1.0, 0.0, 2.0], 2).unwrap();
        assert_eq!(flatten(&g), vec![0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 1.0, 2.0]);
    }

    #[test]
    fn grid_edges() {
        assert_eq!(grid([1.0, 5.0, 2.0, 7.0], 1).unwrap(), vec![[1.0, 2.0]]);
        assert_eq!(
            grid([0.0, 1.0, 0.0, 1.0], 0),
            Err(DatasetError::GridSizeZero)
        );
        assert_eq!(
            grid([0.0, 1.0, 0.0, 1.0], usize::MAX),
            Err(DatasetError::TooLarge)
        );
        let g = grid([-1.0, 1.0, 0.0, 4.0], 3).unwrap();
        assert_eq!(g[5], [1.0, 2.0]);
        assert_eq!(g[7], [0.0, 4.0]);
        assert_eq!(DatasetError::GridSizeZero.code(), code::E0401);
    }

    #[test]
    fn split_sizes_rule() {
        assert_eq!(split_sizes(10, 0.7), Ok(7));
        assert_eq!(split_sizes(10, 0.01), Ok(1));
        assert_eq!(split_sizes(10, 0.99), Ok(9));
        assert_eq!(split_sizes(2, 0.5), Ok(1));
        assert_eq!(split_sizes(3, 0.9), Ok(2));
        assert_eq!(split_sizes(1, 0.5), Err(DatasetError::TooFewRows { n: 1 }));
        assert_eq!(split_sizes(0, 0.5), Err(DatasetError::TooFewRows { n: 0 }));
        assert_eq!(
            split_sizes(5, 0.0),
            Err(DatasetError::BadFraction { frac: 0.0 })
        );
        assert_eq!(
            split_sizes(5, 1.0),
            Err(DatasetError::BadFraction { frac: 1.0 })
        );
        assert!(matches!(
            split_sizes(5, f64::NAN),
            Err(DatasetError::BadFraction { .. })
        ));
        assert_eq!(DatasetError::TooFewRows { n: 1 }.code(), code::E0216);
        assert_eq!(
            DatasetError::BadFraction { frac: 1.5 }.to_string(),
            "the split fraction must satisfy 0 < frac < 1, got 1.5"
        );
    }
}
