//! Dropout masks from the counter-based stream of LANGUAGE §13.7.

use crate::cpu::{pool, PAR_CHUNK, PAR_THRESHOLD};
use crate::tensor::Tensor;

/// The dropout mask of [`Backend::dropout_mask`](crate::Backend::dropout_mask)
/// for `n` elements: element i is `1/(1-p)` (as f32) when
/// `(splitmix64(key + i·0x9E3779B97F4A7C15) >> 11)·2⁻⁵³ >= p`, else 0.
pub(crate) fn dropout_mask(shape: &[usize], key: u64, p: f64) -> Tensor {
    let mut out = pool::scratch(crate::tensor::numel_of(shape));
    dropout_mask_into(key, p, &mut out);
    out.into_tensor(shape.to_vec())
}

/// [`dropout_mask`] into `out`.
pub(crate) fn dropout_mask_into(key: u64, p: f64, out: &mut [f32]) {
    const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
    const TWO_POW_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;
    let splitmix64 = |z: u64| {
        let mut z = z.wrapping_add(GOLDEN_GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let scale = (1.0 / (1.0 - p)) as f32;
    crate::cpu::for_chunks(out, PAR_CHUNK, out.len() >= PAR_THRESHOLD, |s, o| {
        for (i, d) in o.iter_mut().enumerate() {
            let bits =
                splitmix64(key.wrapping_add(((s + i) as u64).wrapping_mul(GOLDEN_GAMMA))) >> 11;
            *d = if bits as f64 * TWO_POW_MINUS_53 >= p {
                scale
            } else {
                0.0
            };
        }
    });
}
