//! `math::expf` 8 lanes at a time on AVX2 and on AVX-512F (`exp8`), with
//! exactly the operations of [`math::expf`] in every lane, so the same bits as
//! the scalar code on every CPU; and `dst[i] = expf(src[i] − m)` over a slice
//! with it (on AVX-512; see below). `exp8` is also the building block of the
//! vector activations ([`super::simd_act`]).
//!
//! Why by hand: compiled for AVX2 or AVX-512, the scalar loop vectorises with
//! gather instructions for the 32-entry table, which are slow on AMD's cores
//! (the loop ran 3× slower than the baseline build's). On AVX-512 the table
//! sits in four registers and is read with two-source permutes. On AVX2 a
//! permute reads only 8 entries of 32 bits, so the table is held as the high
//! and the low 32-bit halves of its entries, 4 registers each; four permutes
//! and three blends on bits 3 and 4 of the index read each half, and an
//! interleave joins them. The arithmetic is f64 in both: 8 lanes of one zmm,
//! or two ymm halves of 4. On the scalar level the scalar loop runs as the
//! baseline build compiles it.
//!
//! On AVX2, `exp_shifted` itself runs the scalar loop too: on the AMD EPYC
//! measured (128-bit floating-point units, where the baseline build's SSE2
//! loop already does 2 f64 lanes per instruction), the 8-lane `exp` ran at
//! 0.85–0.97× the scalar loop's speed with the permutes and 0.95–1.04× with
//! gathers. The AVX2 `exp8` serves the activations whose other arithmetic
//! gains from the width (GELU: `super::simd_act`).

use crate::math;

/// `dst[i] = math::expf(src[i] − m)` for `i < src.len()` (`dst` at least as
/// long), on the CPU's best level ([`super::isa`]).
pub(crate) fn exp_shifted(src: &[f32], m: f32, dst: &mut [f32]) {
    let dst = &mut dst[..src.len()];
    #[cfg(target_arch = "x86_64")]
    match super::isa() {
        // SAFETY: the level is supported (`isa()` only returns those).
        super::Isa::Avx512 => return unsafe { avx512::exp_shifted(src, m, dst) },
        // AVX2: the scalar loop (see the module's comment).
        super::Isa::Avx2 | super::Isa::Scalar => {}
    }
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = math::expf(v - m);
    }
}

/// [`exp_shifted`] in place: `x[i] = math::expf(x[i] − m)`.
pub(crate) fn exp_shifted_in_place(x: &mut [f32], m: f32) {
    #[cfg(target_arch = "x86_64")]
    match super::isa() {
        // SAFETY: as in `exp_shifted`.
        super::Isa::Avx512 => return unsafe { avx512::exp_shifted_in_place(x, m) },
        // AVX2: the scalar loop (see the module's comment).
        super::Isa::Avx2 | super::Isa::Scalar => {}
    }
    for d in x.iter_mut() {
        *d = math::expf(*d - m);
    }
}

/// The constants of `math::expf`.
#[cfg(target_arch = "x86_64")]
mod constants {
    /// 1.5·2^52.
    pub(super) const SHIFT: f64 = 6_755_399_441_055_744.0;
    /// 32 / ln 2.
    pub(super) const SCALE: f64 = 32.0 / std::f64::consts::LN_2;
    /// ln 2 / 32.
    pub(super) const STEP: f64 = std::f64::consts::LN_2 / 32.0;
}

/// The loops of `exp_shifted` and `exp_shifted_in_place` for a level whose
/// module defines `Table`, `table()` and `exp8`, compiled with the level's
/// target features `$features` (AVX-512 only for now: see the module's
/// comment).
#[cfg(target_arch = "x86_64")]
macro_rules! exp_loops {
    ($features:literal) => {
        /// # Safety
        /// The CPU supports the level; `dst.len() == src.len()`.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn exp_shifted(src: &[f32], m: f32, dst: &mut [f32]) {
            let (table, mv) = (table(), _mm256_set1_ps(m));
            let whole = src.len() - src.len() % 8;
            for i in (0..whole).step_by(8) {
                let x = _mm256_sub_ps(_mm256_loadu_ps(src.as_ptr().add(i)), mv);
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), exp8(x, &table));
            }
            for (d, &v) in dst[whole..].iter_mut().zip(&src[whole..]) {
                *d = crate::math::expf(v - m);
            }
        }

        /// # Safety
        /// The CPU supports the level.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn exp_shifted_in_place(x: &mut [f32], m: f32) {
            let (table, mv) = (table(), _mm256_set1_ps(m));
            let whole = x.len() - x.len() % 8;
            for i in (0..whole).step_by(8) {
                let p = x.as_mut_ptr().add(i);
                let v = _mm256_sub_ps(_mm256_loadu_ps(p), mv);
                _mm256_storeu_ps(p, exp8(v, &table));
            }
            for d in x[whole..].iter_mut() {
                *d = crate::math::expf(*d - m);
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use super::constants::{SCALE, SHIFT, STEP};
    use crate::math::EXP2_32THS;
    use std::arch::x86_64::*;

    /// `EXP2_32THS` in four registers of 8 entries.
    pub(in crate::cpu) type Table = [__m512d; 4];

    /// The table, loaded.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in crate::cpu) unsafe fn table() -> Table {
        let t = EXP2_32THS.as_ptr().cast::<f64>();
        [0, 8, 16, 24].map(|i| _mm512_loadu_pd(t.add(i)))
    }

    /// `math::expf(x)` in each of 8 lanes, step by step as the scalar code.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in crate::cpu) unsafe fn exp8(x: __m256, table: &Table) -> __m256 {
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

    exp_loops!("avx512f");
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use super::constants::{SCALE, SHIFT, STEP};
    use crate::math::EXP2_32THS;
    use std::arch::x86_64::*;

    /// Bits `32·H..32·H + 32` of every entry of `EXP2_32THS`.
    const fn halves<const H: u32>() -> [u32; 32] {
        let mut out = [0u32; 32];
        let mut i = 0;
        while i < 32 {
            out[i] = (EXP2_32THS[i] >> (32 * H)) as u32;
            i += 1;
        }
        out
    }
    const LOW_HALVES: [u32; 32] = halves::<0>();
    const HIGH_HALVES: [u32; 32] = halves::<1>();

    /// `EXP2_32THS` as the low 32-bit halves of its entries in 4 registers of
    /// 8, and the high halves in 4 more.
    pub(in crate::cpu) struct Table {
        low: [__m256i; 4],
        high: [__m256i; 4],
    }

    /// The table, loaded.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::cpu) unsafe fn table() -> Table {
        let load =
            |h: &[u32; 32]| [0, 8, 16, 24].map(|i| _mm256_loadu_si256(h.as_ptr().add(i).cast()));
        Table {
            low: load(&LOW_HALVES),
            high: load(&HIGH_HALVES),
        }
    }

    /// `half[idx & 31]` in each of 8 lanes of 32 bits: the 8 entries that
    /// match the low 3 bits from each register, then a blend on bit 3 and
    /// one on bit 4 (`blendv` reads a lane's sign bit).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lookup(half: &[__m256i; 4], idx: __m256i) -> __m256 {
        let p = half.map(|h| _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(h, idx)));
        let bit3 = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx));
        let bit4 = _mm256_castsi256_ps(_mm256_slli_epi32::<27>(idx));
        let first = _mm256_blendv_ps(p[0], p[1], bit3);
        let second = _mm256_blendv_ps(p[2], p[3], bit3);
        _mm256_blendv_ps(first, second, bit4)
    }

    /// The f64 steps of `math::expf` on 4 clamped lanes up to the table:
    /// the polynomial `p`, and `shifted`, whose low 51 bits are k's (SHIFT's
    /// are zero there).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn reduce4(x: __m128) -> (__m256d, __m256d) {
        let z = _mm256_mul_pd(_mm256_cvtps_pd(x), _mm256_set1_pd(SCALE));
        let shifted = _mm256_add_pd(z, _mm256_set1_pd(SHIFT));
        let kd = _mm256_sub_pd(shifted, _mm256_set1_pd(SHIFT));
        let y = _mm256_mul_pd(_mm256_sub_pd(z, kd), _mm256_set1_pd(STEP));
        let y2 = _mm256_mul_pd(y, y);
        // (1 + y) + y2·((0.5 + y·(1/6)) + y2·(1/24))
        let inner = _mm256_add_pd(
            _mm256_add_pd(
                _mm256_set1_pd(0.5),
                _mm256_mul_pd(y, _mm256_set1_pd(1.0 / 6.0)),
            ),
            _mm256_mul_pd(y2, _mm256_set1_pd(1.0 / 24.0)),
        );
        let p = _mm256_add_pd(
            _mm256_add_pd(_mm256_set1_pd(1.0), y),
            _mm256_mul_pd(y2, inner),
        );
        (p, shifted)
    }

    /// `(entry + ((k >> 5) << 52)) · p` rounded to f32, in 4 lanes. Only
    /// bits 5..=16 of k survive the shifts, and `shifted` has k's there, so
    /// a logical shift of it serves (AVX2 has no 64-bit arithmetic shift).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn scale4(entry: __m256i, shifted: __m256d, p: __m256d) -> __m128 {
        let e = _mm256_slli_epi64::<52>(_mm256_srli_epi64::<5>(_mm256_castpd_si256(shifted)));
        let s = _mm256_castsi256_pd(_mm256_add_epi64(entry, e));
        _mm256_cvtpd_ps(_mm256_mul_pd(s, p))
    }

    /// `math::expf(x)` in each of 8 lanes, step by step as the scalar code,
    /// the f64 steps in two halves of 4 lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::cpu) unsafe fn exp8(x: __m256, table: &Table) -> __m256 {
        // x.clamp(-104, 89): NaN stays NaN (max/min return their second
        // operand when one is NaN).
        let x = _mm256_min_ps(
            _mm256_set1_ps(89.0),
            _mm256_max_ps(_mm256_set1_ps(-104.0), x),
        );
        let (pa, sa) = reduce4(_mm256_castps256_ps128(x));
        let (pb, sb) = reduce4(_mm256_extractf128_ps::<1>(x));
        // The low 32 bits of each lane's k: [a0 a1 b0 b1 | a2 a3 b2 b3].
        let idx = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(
            _mm256_castpd_ps(sa),
            _mm256_castpd_ps(sb),
        ));
        let low = _mm256_castps_si256(lookup(&table.low, idx));
        let high = _mm256_castps_si256(lookup(&table.high, idx));
        // Interleaving the halves puts the entries of a0 a1 | a2 a3 in the
        // first result and those of b0 b1 | b2 b3 in the second.
        let ea = _mm256_unpacklo_epi32(low, high);
        let eb = _mm256_unpackhi_epi32(low, high);
        _mm256_set_m128(scale4(eb, sb, pb), scale4(ea, sa, pa))
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
