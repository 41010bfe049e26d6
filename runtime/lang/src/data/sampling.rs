//! Token sampling and top-k selection (LANGUAGE §10.2 `argtop_k`, §10.7
//! `sample` and `top_k`, §13.6).

use mlpl_devices::math;
use mlpl_diag::code;
use std::fmt;

use super::rng::{mix, Xorshift64};

/// Why a sampling request cannot be honoured.
#[derive(Clone, Debug, PartialEq)]
pub enum SamplingError {
    /// `sample` needs at least one logit (E0216).
    Empty,
    /// The temperature is negative or NaN (E0401).
    BadTemperature {
        /// The temperature given.
        temperature: f64,
    },
    /// `k` is outside the allowed range (E0401): 1..=V for `top_k`, 0..=N for
    /// `argtop_k`.
    BadK {
        /// The k given.
        k: usize,
        /// The length of the input.
        len: usize,
    },
}

impl SamplingError {
    /// The diagnostic code of LANGUAGE §20 this error is reported with.
    pub fn code(&self) -> &'static str {
        match self {
            SamplingError::Empty => code::E0216,
            SamplingError::BadTemperature { .. } | SamplingError::BadK { .. } => code::E0401,
        }
    }
}

impl fmt::Display for SamplingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SamplingError::Empty => write!(f, "cannot sample from empty logits"),
            SamplingError::BadTemperature { temperature } => write!(
                f,
                "temperature must be >= 0, got {}",
                crate::display::format_f64(*temperature)
            ),
            SamplingError::BadK { k, len } => {
                write!(f, "k = {k} is out of range for {len} values")
            }
        }
    }
}

impl std::error::Error for SamplingError {}

/// `sample(logits, temperature, seed)` (LANGUAGE §13.6).
///
/// Temperature 0 gives the index of the first maximum. Otherwise, in float64,
/// wᵢ = exp((xᵢ − max) / temperature) and Z = Σ wᵢ; one uniform u is drawn from a
/// generator initialised with `mix(seed)` and the first i with u·Z < w₀ + … + wᵢ
/// is returned (the last index if none).
pub fn sample(logits: &[f32], temperature: f64, seed: u64) -> Result<usize, SamplingError> {
    if logits.is_empty() {
        return Err(SamplingError::Empty);
    }
    if temperature.is_nan() || temperature < 0.0 {
        return Err(SamplingError::BadTemperature { temperature });
    }
    if temperature == 0.0 {
        return Ok(first_max(logits));
    }
    let max = logits
        .iter()
        .map(|&x| f64::from(x))
        .fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = logits
        .iter()
        .map(|&x| math::exp((f64::from(x) - max) / temperature))
        .collect();
    let z: f64 = weights.iter().sum();
    let u = Xorshift64::new(mix(seed)).uniform();
    let target = u * z;
    let mut cumulative = 0.0;
    for (i, w) in weights.iter().enumerate() {
        cumulative += w;
        if target < cumulative {
            return Ok(i);
        }
    }
    Ok(logits.len() - 1)
}

/// The index of the first maximum (NaN is never greater than anything).
fn first_max(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in values.iter().enumerate().skip(1) {
        if x > values[best] {
            best = i;
        }
    }
    best
}

/// `top_k(logits, k)`: a copy of `logits` whose entries outside the k largest are
/// `-inf`; among equal values the lower index is kept. `k` must be in 1..=V.
pub fn top_k(logits: &[f32], k: usize) -> Result<Vec<f32>, SamplingError> {
    if k == 0 || k > logits.len() {
        return Err(SamplingError::BadK {
            k,
            len: logits.len(),
        });
    }
    let keep = argtop_k(logits, k)?;
    let mut out = vec![f32::NEG_INFINITY; logits.len()];
    for i in keep {
        out[i] = logits[i];
    }
    Ok(out)
}

/// `argtop_k(v, k)`: the indices of the k largest values in descending order of
/// value; equal values keep index order (lower index first) and NaN compares
/// equal to every value. `k` must be in 0..=N.
///
/// The order is that of a stable merge sort with this comparison, which is
/// deterministic even though "NaN equals everything" is not a total order.
pub fn argtop_k(v: &[f32], k: usize) -> Result<Vec<usize>, SamplingError> {
    if k > v.len() {
        return Err(SamplingError::BadK { k, len: v.len() });
    }
    let mut order: Vec<usize> = (0..v.len()).collect();
    stable_merge_sort(&mut order, |&a, &b| v[a] > v[b]);
    order.truncate(k);
    Ok(order)
}

/// Bottom-up stable merge sort: `before(x, y)` says x must come strictly before y.
/// An element of the right run is taken only when it is strictly before the
/// current element of the left run, which keeps equal (and incomparable)
/// elements in their original order. Never panics, whatever the predicate.
fn stable_merge_sort<T: Copy>(items: &mut Vec<T>, before: impl Fn(&T, &T) -> bool) {
    let n = items.len();
    let mut buffer: Vec<T> = Vec::with_capacity(n);
    let mut width = 1;
    while width < n {
        buffer.clear();
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut i, mut j) = (start, mid);
            while i < mid && j < end {
                if before(&items[j], &items[i]) {
                    buffer.push(items[j]);
                    j += 1;
                } else {
                    buffer.push(items[i]);
                    i += 1;
                }
            }
            buffer.extend_from_slice(&items[i..mid]);
            buffer.extend_from_slice(&items[j..end]);
            start = end;
        }
        std::mem::swap(items, &mut buffer);
        width = width.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOGITS: [f32; 5] = [0.1, 2.0, -1.0, 0.5, 0.3];

    #[test]
    fn conformance_sample() {
        assert_eq!(sample(&LOGITS, 0.8, 5), Ok(3));
    }

    #[test]
    fn conformance_top_k() {
        let ninf = f32::NEG_INFINITY;
        assert_eq!(top_k(&LOGITS, 2), Ok(vec![ninf, 2.0, ninf, 0.5, ninf]));
    }

    #[test]
    fn sample_by_hand() {
        // Recompute the rule directly for a few seeds.
        for seed in 0..50u64 {
            let t = 0.7;
            let w: Vec<f64> = LOGITS
                .iter()
                .map(|&x| ((f64::from(x) - 2.0) / t).exp())
                .collect();
            let z: f64 = w.iter().sum();
            let u = Xorshift64::new(mix(seed)).uniform();
            let mut c = 0.0;
            let mut want = 4;
            for (i, wi) in w.iter().enumerate() {
                c += wi;
                if u * z < c {
                    want = i;
                    break;
                }
            }
            assert_eq!(sample(&LOGITS, t, seed), Ok(want));
        }
    }

    #[test]
    fn sample_greedy_and_edges() {
        assert_eq!(sample(&LOGITS, 0.0, 9), Ok(1));
        assert_eq!(sample(&[1.0, 3.0, 3.0], 0.0, 9), Ok(1));
        assert_eq!(sample(&[f32::NEG_INFINITY, 0.0], 1.0, 3), Ok(1));
        assert_eq!(sample(&[7.0], 2.0, 1), Ok(0));
        // All -inf: weights are NaN, so the last index is returned.
        assert_eq!(sample(&[f32::NEG_INFINITY; 3], 1.0, 1), Ok(2));
        assert_eq!(sample(&[], 1.0, 1), Err(SamplingError::Empty));
        assert_eq!(
            sample(&LOGITS, -0.5, 1),
            Err(SamplingError::BadTemperature { temperature: -0.5 })
        );
        assert!(matches!(
            sample(&LOGITS, f64::NAN, 1),
            Err(SamplingError::BadTemperature { .. })
        ));
        assert_eq!(SamplingError::Empty.code(), code::E0216);
        // A very low temperature concentrates on the maximum.
        assert!((0..20).all(|s| sample(&LOGITS, 1e-3, s) == Ok(1)));
    }

    #[test]
    fn sample_distribution_follows_softmax() {
        let logits = [0.0f32, (2.0f32).ln()];
        let ones = (0..3000u64)
            .filter(|&s| sample(&logits, 1.0, s) == Ok(1))
            .count();
        assert!((1850..2150).contains(&ones), "{ones}");
    }

    #[test]
    fn argtop_k_order_and_ties() {
        assert_eq!(argtop_k(&LOGITS, 3), Ok(vec![1, 3, 4]));
        assert_eq!(argtop_k(&[1.0, 2.0, 2.0, 1.0], 4), Ok(vec![1, 2, 0, 3]));
        assert_eq!(argtop_k(&[5.0, 5.0, 5.0], 2), Ok(vec![0, 1]));
        assert_eq!(argtop_k(&LOGITS, 0), Ok(vec![]));
        assert_eq!(argtop_k(&[], 0), Ok(vec![]));
        assert_eq!(
            argtop_k(&LOGITS, 6),
            Err(SamplingError::BadK { k: 6, len: 5 })
        );
        let v: Vec<f32> = (0..100).map(|i| ((i * 37) % 101) as f32).collect();
        let mut want: Vec<usize> = (0..100).collect();
        want.sort_by(|&a, &b| v[b].partial_cmp(&v[a]).unwrap().then(a.cmp(&b)));
        assert_eq!(argtop_k(&v, 100).unwrap(), want);
    }

    #[test]
    fn argtop_k_with_nan_is_deterministic() {
        let v = [1.0, f32::NAN, 3.0, 2.0, f32::NAN, 0.5];
        let got = argtop_k(&v, 6).unwrap();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(argtop_k(&v, 6).unwrap(), got);
        // NaN equal to everything: with only NaN, index order is kept.
        assert_eq!(argtop_k(&[f32::NAN; 4], 4), Ok(vec![0, 1, 2, 3]));
        assert_eq!(argtop_k(&[f32::NAN, 1.0], 2), Ok(vec![0, 1]));
    }

    #[test]
    fn top_k_edges() {
        let ninf = f32::NEG_INFINITY;
        assert_eq!(top_k(&[1.0, 1.0, 0.0], 1), Ok(vec![1.0, ninf, ninf]));
        assert_eq!(top_k(&[1.0, 2.0], 2), Ok(vec![1.0, 2.0]));
        assert_eq!(top_k(&[1.0], 0), Err(SamplingError::BadK { k: 0, len: 1 }));
        assert_eq!(top_k(&[1.0], 2), Err(SamplingError::BadK { k: 2, len: 1 }));
        assert_eq!(top_k(&[], 1), Err(SamplingError::BadK { k: 1, len: 0 }));
        assert_eq!(SamplingError::BadK { k: 0, len: 1 }.code(), code::E0401);
    }
}
