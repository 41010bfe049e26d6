//! `dst[i] = expf(src[i] − m)` over a slice, 8 lanes at a time on AVX-512F,
//! with exactly the operations of [`math::expf`] in every lane, so the same
//! bits as the scalar loop on every CPU.
//!
//! Why by hand: compiled for AVX2 or AVX-512, the scalar loop vectorises with
//! gather instructions for the 32-entry table, which are slow on AMD's cores
//! (the loop ran 3× slower than the baseline build's). Here the table sits in
//! four registers and is read with two-source permutes. On other levels the
//! scalar loop runs as the baseline build compiles it.

use crate::math;

/// `dst[i] = math::expf(src[i] − m)` for `i < src.len()` (`dst` at least as
/// long), on the CPU's best level ([`super::isa`]).
pub(crate) fn exp_shifted(src: &[f32], m: f32, dst: &mut [f32]) {
    let dst = &mut dst[..src.len()];
    #[cfg(target_arch = "x86_64")]
    if super::isa() == super::Isa::Avx512 {
        // SAFETY: the level is supported (`isa()` only returns those).
        unsafe { avx512::exp_shifted(src, m, dst) };
        return;
    }
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = math::expf(v - m);
    }
}

/// [`exp_shifted`] in place: `x[i] = math::expf(x[i] − m)`.
pub(crate) fn exp_shifted_in_place(x: &mut [f32], m: f32) {
    #[cfg(target_arch = "x86_64")]
    if super::isa() == super::Isa::Avx512 {
        // SAFETY: as in `exp_shifted`.
        unsafe { avx512::exp_shifted_in_place(x, m) };
        return;
    }
    for d in x.iter_mut() {
        *d = math::expf(*d - m);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use crate::math::{self, EXP2_32THS};
    use std::arch::x86_64::*;

    /// The constants of `math::expf`.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const SCALE: f64 = 32.0 / std::f64::consts::LN_2;
    const STEP: f64 = std::f64::consts::LN_2 / 32.0;

    /// `math::expf(x − m)` in each of 8 lanes, step by step as the scalar code.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn exp8(x: __m256, m: __m256, table: &[__m512d; 4]) -> __m256 {
        let x = _mm256_sub_ps(x, m);
        // x.clamp(-104, 89): NaN stays NaN (max/min return their second
        // operand when one is NaN).
        let x = _mm256_min_ps(
            _mm256_set1_ps(89.0),
            _mm256_max_ps(_mm256_set1_ps(-104.0), x),
        );
        let z = _mm512_mul_pd(_mm512_cvtps_pd(x), _mm512_set1_pd(SCALE));
        let shifted = _mm512_add_pd(z, _mm512_set1_pd(SHIFT));
        let kd = _mm512_sub_pd(shifted, _mm512_set1_pd(SHIFT));
        let k = _mm512_sub_epi64(
            _mm512_castpd_si512(shifted),
            _mm512_set1_epi64(SHIFT.to_bits() as i64),
        );
        let y = _mm512_mul_pd(_mm512_sub_pd(z, kd), _mm512_set1_pd(STEP));
        let y2 = _mm512_mul_pd(y, y);
        // (1 + y) + y2·((0.5 + y·(1/6)) + y2·(1/24))
        let inner = _mm512_add_pd(
            _mm512_add_pd(
                _mm512_set1_pd(0.5),
                _mm512_mul_pd(y, _mm512_set1_pd(1.0 / 6.0)),
            ),
            _mm512_mul_pd(y2, _mm512_set1_pd(1.0 / 24.0)),
        );
        let p = _mm512_add_pd(
            _mm512_add_pd(_mm512_set1_pd(1.0), y),
            _mm512_mul_pd(y2, inner),
        );
        // EXP2_32THS[k & 31]: entries 0..16 from the first two registers,
        // 16..32 from the last two, chosen by bit 4.
        let low = _mm512_permutex2var_pd(table[0], k, table[1]);
        let high = _mm512_permutex2var_pd(table[2], k, table[3]);
        let upper = _mm512_test_epi64_mask(k, _mm512_set1_epi64(16));
        let t = _mm512_castpd_si512(_mm512_mask_blend_pd(upper, low, high));
        // + ((k >> 5) << 52) on the bits, wrapping.
        let s = _mm512_add_epi64(t, _mm512_slli_epi64::<52>(_mm512_srai_epi64::<5>(k)));
        _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_castsi512_pd(s), p))
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn table() -> [__m512d; 4] {
        let t = EXP2_32THS.as_ptr().cast::<f64>();
        [0, 8, 16, 24].map(|i| _mm512_loadu_pd(t.add(i)))
    }

    /// # Safety
    /// The CPU supports AVX-512F; `dst.len() == src.len()`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn exp_shifted(src: &[f32], m: f32, dst: &mut [f32]) {
        let (table, mv) = (table(), _mm256_set1_ps(m));
        let whole = src.len() - src.len() % 8;
        for i in (0..whole).step_by(8) {
            let e = exp8(_mm256_loadu_ps(src.as_ptr().add(i)), mv, &table);
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), e);
        }
        for (d, &v) in dst[whole..].iter_mut().zip(&src[whole..]) {
            *d = math::expf(v - m);
        }
    }

    /// # Safety
    /// The CPU supports AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn exp_shifted_in_place(x: &mut [f32], m: f32) {
        let (table, mv) = (table(), _mm256_set1_ps(m));
        let whole = x.len() - x.len() % 8;
        for i in (0..whole).step_by(8) {
            let p = x.as_mut_ptr().add(i);
            _mm256_storeu_ps(p, exp8(_mm256_loadu_ps(p), mv, &table));
        }
        for d in x[whole..].iter_mut() {
            *d = math::expf(*d - m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::isa::{force_isa, supported_isas};

    /// Inputs over the whole range, the edges of the clamp and the specials.
    fn inputs() -> Vec<f32> {
        let mut v: Vec<f32> = (0..200_003u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .filter(|x| !x.is_nan())
            .collect();
        v.extend((0..20_000).map(|i| -110.0 + i as f32 * 0.01));
        v.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -104.0,
            89.0,
            88.72284,
            88.72285,
            -103.97208,
            -87.33655,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            1e-45,
            f32::MAX,
            f32::MIN,
        ]);
        v
    }

    #[test]
    fn every_level_gives_the_bits_of_the_scalar_expf() {
        let x = inputs();
        for m in [0.0f32, 1.5, -3.25, f32::INFINITY] {
            let want: Vec<f32> = x.iter().map(|&v| math::expf(v - m)).collect();
            for isa in supported_isas() {
                force_isa(Some(isa)).expect("a supported level");
                let mut got = vec![0.0f32; x.len()];
                exp_shifted(&x, m, &mut got);
                let mut again = x.clone();
                exp_shifted_in_place(&mut again, m);
                for (i, ((&w, &g), &a)) in want.iter().zip(&got).zip(&again).enumerate() {
                    let same = |g: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                    assert!(
                        same(g) && same(a),
                        "{isa}: exp({} - {m}) = {g} / {a}, scalar {w}",
                        x[i]
                    );
                }
            }
        }
        force_isa(None).expect("the initial level");
    }
}
