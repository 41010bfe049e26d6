//! The activations whose scalar forms call `exp` or `tanh` (sigmoid, SiLU,
//! GELU's tanh approximation, tanh, exp) and the derivatives that do (GELU,
//! SiLU, erf), 8 lanes at a time on AVX2 and on AVX-512F, with the same IEEE
//! operations in the same order as the scalar closures of the element-wise
//! and fused kernels (`elementwise.rs`, `nn/activation.rs`), so the same bits
//! on every level: a division stays a division, `-x` a sign flip, no product
//! is fused into an addition that the scalar code does not fuse.
//!
//! `exp` is [`super::simd_exp`]'s `exp8`. `tanh` is CORE-MATH's `tanhf`
//! (correctly rounded, so one answer on every CPU) in 8 lanes: its branches
//! on the bits of `x` become selects, and its rational function is evaluated
//! in f64 with fused multiply-adds (the build compiles the C source for
//! baseline x86-64, without them: `.cargo/config.toml`; CORE-MATH's result
//! is correctly rounded either way). A test compares it with the scalar
//! function over a stride of every f32, another (ignored by default: a
//! few minutes) over all 2³² of them.
//!
//! The kernels take rows of `x` with an optional bias row added to each
//! (`bias_act`), and return `false` where the caller runs its scalar loop:
//! on the scalar level, and on AVX2 for the ops whose 8-lane form was no
//! faster there (`Forward::on_avx2`).

use crate::backend::UnaryOp;

/// Set by the tests: AVX2 runs every 8-lane form, so the forms it skips for
/// speed (the same code as AVX-512's, but for `exp8`) are checked on AVX2
/// machines too. Which path runs never changes a bit.
#[cfg(test)]
static EVERY_FORM_ON_AVX2: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether AVX2 runs every 8-lane form ([`EVERY_FORM_ON_AVX2`]; never outside tests).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn every_form_on_avx2() -> bool {
    #[cfg(test)]
    return EVERY_FORM_ON_AVX2.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(test))]
    false
}

/// An activation with an 8-lane form.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Forward {
    Exp,
    Sigmoid,
    Silu,
    Gelu,
    Tanh,
}

impl Forward {
    /// Whether the AVX2 form runs instead of the scalar loop: only where it
    /// was faster on the AMD EPYC measured (128-bit floating-point units;
    /// GELU 1.2–1.6×, tanh 2.5–3.1×); exp, sigmoid and SiLU, mostly `exp`,
    /// ran at 0.8–0.9×, as `exp` alone did (`simd_exp`).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn on_avx2(self) -> bool {
        matches!(self, Forward::Gelu | Forward::Tanh) || every_form_on_avx2()
    }

    fn of(op: UnaryOp) -> Option<Forward> {
        Some(match op {
            UnaryOp::Exp => Forward::Exp,
            UnaryOp::Sigmoid => Forward::Sigmoid,
            UnaryOp::Silu => Forward::Silu,
            UnaryOp::Gelu => Forward::Gelu,
            UnaryOp::Tanh => Forward::Tanh,
            _ => return None,
        })
    }
}

/// A derivative with an 8-lane form (one that calls `exp` or `tanh`; the
/// others are plain arithmetic, which the compiler vectorises).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Grad {
    Gelu,
    Silu,
    Erf,
}

impl Grad {
    /// As [`Forward::on_avx2`]: GELU's (tanh) ran 2.3–2.6× faster, SiLU's
    /// and erf's (exp) no faster.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn on_avx2(self) -> bool {
        matches!(self, Grad::Gelu) || every_form_on_avx2()
    }

    fn of(op: UnaryOp) -> Option<Grad> {
        Some(match op {
            UnaryOp::Gelu => Grad::Gelu,
            UnaryOp::Silu => Grad::Silu,
            UnaryOp::Erf => Grad::Erf,
            _ => return None,
        })
    }
}

/// `out[i] = op(x[i] + bias[i mod n])`, `n` the bias's length (each row of
/// `xs` gets the bias added; without one, `op(x[i])`), with the bits of the
/// scalar forms. Returns `false`, writing nothing, when `op` has no vector
/// form or the level is scalar. `out` is as long as `xs`, a whole number of
/// bias rows.
pub(crate) fn forward(op: UnaryOp, xs: &[f32], bias: Option<&[f32]>, out: &mut [f32]) -> bool {
    let Some(f) = Forward::of(op) else {
        return false;
    };
    if xs.is_empty() || bias.is_some_and(<[f32]>::is_empty) {
        return true;
    }
    assert_eq!(xs.len(), out.len(), "activation: output length differs");
    #[cfg(target_arch = "x86_64")]
    match super::isa() {
        // SAFETY: `isa()` only returns supported levels.
        super::Isa::Avx512 => return unsafe { avx512::forward(f, xs, bias, out) },
        // SAFETY: as above.
        super::Isa::Avx2 if f.on_avx2() => return unsafe { avx2::forward(f, xs, bias, out) },
        super::Isa::Avx2 | super::Isa::Scalar => {}
    }
    let _ = f;
    false
}

/// `out[i] = op'(x[i] + bias[i mod n])·g[i]`, the derivative's scalar form's
/// bits (as [`forward`]; `ys` is not needed by the ops with a vector form).
/// Returns `false`, writing nothing, when `op`'s derivative has no vector
/// form or the level is scalar.
pub(crate) fn backward(
    op: UnaryOp,
    xs: &[f32],
    bias: Option<&[f32]>,
    gs: &[f32],
    out: &mut [f32],
) -> bool {
    let Some(f) = Grad::of(op) else {
        return false;
    };
    if xs.is_empty() || bias.is_some_and(<[f32]>::is_empty) {
        return true;
    }
    assert!(
        xs.len() == out.len() && gs.len() == out.len(),
        "activation backward: lengths differ"
    );
    #[cfg(target_arch = "x86_64")]
    match super::isa() {
        // SAFETY: `isa()` only returns supported levels.
        super::Isa::Avx512 => return unsafe { avx512::backward(f, xs, bias, gs, out) },
        // SAFETY: as above.
        super::Isa::Avx2 if f.on_avx2() => return unsafe { avx2::backward(f, xs, bias, gs, out) },
        super::Isa::Avx2 | super::Isa::Scalar => {}
    }
    let _ = f;
    false
}

/// The constants of CORE-MATH's `tanhf`: the numerator's and the
/// denominator's coefficients (of z², in order), and |x| (as bits) above
/// which tanh rounds to ±1.
#[cfg(target_arch = "x86_64")]
mod tanh_constants {
    pub(super) const CN: [f64; 8] = [
        f64::from_bits(0x3ff0000000000000),
        f64::from_bits(0x3fc30877b8b72d33),
        f64::from_bits(0x3f7694aa09ae9e5e),
        f64::from_bits(0x3f14101377abb729),
        f64::from_bits(0x3e9e0392b1db0018),
        f64::from_bits(0x3e12533756e546f7),
        f64::from_bits(0x3d6d62e5abe6ae8a),
        f64::from_bits(0x3c9b06be534182de),
    ];
    pub(super) const CD: [f64; 8] = [
        f64::from_bits(0x3ff0000000000000),
        f64::from_bits(0x3fded99131b0ebea),
        f64::from_bits(0x3fa0d27ed6c95a69),
        f64::from_bits(0x3f47cbdaca0e9fcc),
        f64::from_bits(0x3edb4e60b892578e),
        f64::from_bits(0x3e5a6f707c5c71ab),
        f64::from_bits(0x3dc35a8b6e2cd94c),
        f64::from_bits(0x3d0ca8230677aa01),
    ];
    /// |x| (bits) above which the result is ±1.
    pub(super) const SATURATED: i32 = 0x4110_2cb3;
    /// The cubic coefficient of the Taylor branch, −0x1.555556p-2.
    pub(super) const THIRD: f32 = f32::from_bits(0xbeaa_aaab);
}

/// The 8-lane activations and their loops for a level whose `simd_exp`
/// module is `$level` (the same code for both levels, compiled with the
/// level's target features `$features`).
#[cfg(target_arch = "x86_64")]
macro_rules! act_kernels {
    ($level:ident, $features:literal) => {
        mod $level {
            use super::tanh_constants::{CD, CN, SATURATED, THIRD};
            use super::{Forward, Grad};
            use crate::backend::composed::TWO_OVER_SQRT_PI;
            use crate::cpu::nn::{GELU_C, GELU_KAPPA};
            use crate::cpu::simd_exp::$level::{exp8, table, Table};
            use std::arch::x86_64::*;

            /// `-x`: the sign flipped, as the scalar negation.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn neg(x: __m256) -> __m256 {
                _mm256_xor_ps(x, _mm256_set1_ps(-0.0))
            }

            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn splat(v: f32) -> __m256 {
                _mm256_set1_ps(v)
            }

            /// `1 / (1 + expf(-x))`.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn sigmoid8(x: __m256, t: &Table) -> __m256 {
                let e = exp8(neg(x), t);
                _mm256_div_ps(splat(1.0), _mm256_add_ps(splat(1.0), e))
            }

            /// `x / (1 + expf(-2·(C·(x + κ·x·x·x))))`.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn gelu8(x: __m256, t: &Table) -> __m256 {
                let cube = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(splat(GELU_KAPPA), x), x), x);
                let z = _mm256_mul_ps(splat(GELU_C), _mm256_add_ps(x, cube));
                let e = exp8(_mm256_mul_ps(splat(-2.0), z), t);
                _mm256_div_ps(x, _mm256_add_ps(splat(1.0), e))
            }

            /// The rational function of `tanhf` in 4 lanes of f64:
            /// z·n(z²)/d(z²), each polynomial by Estrin's scheme.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn tanh_rational4(x: __m128) -> __m128 {
                let z = _mm256_cvtps_pd(x);
                let z2 = _mm256_mul_pd(z, z);
                let z4 = _mm256_mul_pd(z2, z2);
                let z8 = _mm256_mul_pd(z4, z4);
                let poly = |c: &[f64; 8]| {
                    let pair = |i: usize| {
                        _mm256_fmadd_pd(z2, _mm256_set1_pd(c[i + 1]), _mm256_set1_pd(c[i]))
                    };
                    let (c0, c2, c4, c6) = (pair(0), pair(2), pair(4), pair(6));
                    let c0 = _mm256_fmadd_pd(z4, c2, c0);
                    let c4 = _mm256_fmadd_pd(z4, c6, c4);
                    _mm256_fmadd_pd(z8, c4, c0)
                };
                let (n, d) = (poly(&CN), poly(&CD));
                _mm256_cvtpd_ps(_mm256_div_pd(_mm256_mul_pd(z, n), d))
            }

            /// `math::tanhf(x)` (CORE-MATH's `cr_tanhf`): every branch
            /// computed, the one the bits of `x` choose kept.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn tanh8(x: __m256) -> __m256 {
                let bits = _mm256_castps_si256(x);
                let abs_bits = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fff_ffff));
                let abs = _mm256_castsi256_ps(abs_bits);
                let sign = _mm256_xor_ps(x, abs);
                let below = |b: i32| {
                    _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(b), abs_bits))
                };
                let above = |b: i32| {
                    _mm256_castsi256_ps(_mm256_cmpgt_epi32(abs_bits, _mm256_set1_epi32(b)))
                };
                // |x| ≤ 0x1.205966p+3: the rational function.
                let rational = _mm256_set_m128(
                    tanh_rational4(_mm256_extractf128_ps::<1>(x)),
                    tanh_rational4(_mm256_castps256_ps128(x)),
                );
                // Larger (and ±∞): copysign(1, x) − copysign(2⁻²⁵, x).
                let one = _mm256_or_ps(sign, splat(1.0));
                let saturated =
                    _mm256_sub_ps(one, _mm256_or_ps(sign, splat(f32::from_bits(0x3300_0000))));
                let mut r = _mm256_blendv_ps(rational, saturated, above(SATURATED));
                // Exponent below 115 (|x| < 2⁻¹³): x + x·(THIRD·x²), fused.
                let small = _mm256_fmadd_ps(x, _mm256_mul_ps(_mm256_mul_ps(x, x), splat(THIRD)), x);
                r = _mm256_blendv_ps(r, small, below(115 << 23));
                // Below 102 (|x| < 2⁻²⁶): x − x·|x|, fused; ±0 stays.
                let tiny = _mm256_fnmadd_ps(x, abs, x);
                r = _mm256_blendv_ps(r, tiny, below(102 << 23));
                r = _mm256_blendv_ps(
                    r,
                    x,
                    _mm256_castsi256_ps(_mm256_cmpeq_epi32(abs_bits, _mm256_setzero_si256())),
                );
                // ±∞: ±1; NaN: x + x.
                r = _mm256_blendv_ps(
                    r,
                    one,
                    _mm256_castsi256_ps(_mm256_cmpeq_epi32(
                        abs_bits,
                        _mm256_set1_epi32(0x7f80_0000),
                    )),
                );
                _mm256_blendv_ps(r, _mm256_add_ps(x, x), above(0x7f80_0000))
            }

            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn forward8(f: Forward, x: __m256, t: &Table) -> __m256 {
                match f {
                    Forward::Exp => exp8(x, t),
                    Forward::Sigmoid => sigmoid8(x, t),
                    Forward::Silu => _mm256_mul_ps(x, sigmoid8(x, t)),
                    Forward::Gelu => gelu8(x, t),
                    Forward::Tanh => tanh8(x),
                }
            }

            /// The derivative times `g`, as the scalar closures of
            /// `with_unary_grad`.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn grad8(f: Grad, x: __m256, g: __m256, t: &Table) -> __m256 {
                let one = splat(1.0);
                match f {
                    Grad::Gelu => {
                        let x2 = _mm256_mul_ps(x, x);
                        let inner = _mm256_add_ps(_mm256_mul_ps(x2, splat(GELU_KAPPA)), one);
                        let th = tanh8(_mm256_mul_ps(_mm256_mul_ps(x, inner), splat(GELU_C)));
                        let du = _mm256_mul_ps(
                            _mm256_add_ps(_mm256_mul_ps(x2, splat(3.0 * GELU_KAPPA)), one),
                            splat(GELU_C),
                        );
                        let one_minus = _mm256_sub_ps(one, _mm256_mul_ps(th, th));
                        let second = _mm256_mul_ps(_mm256_mul_ps(x, one_minus), du);
                        let sum = _mm256_add_ps(_mm256_add_ps(th, one), second);
                        _mm256_mul_ps(g, _mm256_mul_ps(sum, splat(0.5)))
                    }
                    Grad::Silu => {
                        let s = sigmoid8(x, t);
                        let inner = _mm256_add_ps(_mm256_mul_ps(x, _mm256_sub_ps(one, s)), one);
                        _mm256_mul_ps(g, _mm256_mul_ps(s, inner))
                    }
                    Grad::Erf => {
                        let e = exp8(neg(_mm256_mul_ps(x, x)), t);
                        _mm256_mul_ps(g, _mm256_mul_ps(e, splat(TWO_OVER_SQRT_PI)))
                    }
                }
            }

            /// 8 lanes of `row` from `i` (the rest zero past its end).
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn load(row: &[f32], i: usize) -> __m256 {
                if i + 8 <= row.len() {
                    _mm256_loadu_ps(row.as_ptr().add(i))
                } else {
                    let mut lanes = [0.0f32; 8];
                    lanes[..row.len() - i].copy_from_slice(&row[i..]);
                    _mm256_loadu_ps(lanes.as_ptr())
                }
            }

            /// Stores the lanes of `v` that `row` has from `i`.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn store(row: &mut [f32], i: usize, v: __m256) {
                if i + 8 <= row.len() {
                    _mm256_storeu_ps(row.as_mut_ptr().add(i), v);
                } else {
                    let mut lanes = [0.0f32; 8];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), v);
                    let n = row.len() - i;
                    row[i..].copy_from_slice(&lanes[..n]);
                }
            }

            /// `x` from `i` of `row`, plus the bias's lanes when there is one.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn biased(row: &[f32], bias: Option<&[f32]>, i: usize) -> __m256 {
                let x = load(row, i);
                match bias {
                    Some(b) => _mm256_add_ps(x, load(b, i)),
                    None => x,
                }
            }

            /// # Safety
            /// The CPU supports the level; `out.len() == xs.len()`, a
            /// multiple of the bias's length (> 0).
            #[target_feature(enable = $features)]
            pub(super) unsafe fn forward(
                f: Forward,
                xs: &[f32],
                bias: Option<&[f32]>,
                out: &mut [f32],
            ) -> bool {
                let t = table();
                let n = bias.map_or(xs.len(), <[f32]>::len);
                for (orow, xrow) in out.chunks_mut(n).zip(xs.chunks(n)) {
                    for i in (0..xrow.len()).step_by(8) {
                        store(orow, i, forward8(f, biased(xrow, bias, i), &t));
                    }
                }
                true
            }

            /// # Safety
            /// As [`forward`], and `gs.len() == xs.len()`.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn backward(
                f: Grad,
                xs: &[f32],
                bias: Option<&[f32]>,
                gs: &[f32],
                out: &mut [f32],
            ) -> bool {
                let t = table();
                let n = bias.map_or(xs.len(), <[f32]>::len);
                let rows = out.chunks_mut(n).zip(xs.chunks(n)).zip(gs.chunks(n));
                for ((orow, xrow), grow) in rows {
                    for i in (0..xrow.len()).step_by(8) {
                        let g = load(grow, i);
                        store(orow, i, grad8(f, biased(xrow, bias, i), g, &t));
                    }
                }
                true
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
act_kernels!(avx2, "avx2,fma");
#[cfg(target_arch = "x86_64")]
act_kernels!(avx512, "avx512f,avx2,fma");

#[cfg(test)]
mod tests {
    use crate::backend::UnaryOp;
    use crate::cpu::elementwise::unary_into;
    use crate::cpu::isa::{force_isa, supported_isas, Isa};
    use crate::cpu::nn::{bias_act_backward_into, bias_act_into, unary_backward_into};

    /// Inputs over every magnitude (bit patterns spread over all 2³²,
    /// subnormals and NaNs included), a fine sweep of the range where the
    /// activations bend, and the edges: ±0, ±∞, NaN, the smallest normal and
    /// subnormal, the branch points of `tanhf` and the clamp of `expf`.
    fn inputs() -> Vec<f32> {
        let mut v: Vec<f32> = (0..60_001u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .collect();
        v.extend((0..40_000).map(|i| -20.0 + i as f32 * 0.001));
        v.extend((0..2_000).map(|i| f32::from_bits(i * 4099)));
        v.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            1e-45,
            -1e-45,
            f32::MAX,
            f32::MIN,
            -104.0,
            89.0,
            88.72284,
            -103.97208,
            f32::from_bits(0x4110_2cb3),
            f32::from_bits(0x4110_2cb4),
            -f32::from_bits(0x4110_2cb3),
            f32::from_bits(115 << 23),
            f32::from_bits((115 << 23) - 1),
            f32::from_bits(102 << 23),
            -f32::from_bits((102 << 23) - 1),
        ]);
        v
    }

    /// Equal bits, or both NaN (a NaN's payload may follow either operand).
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// Every op's forward and backward, unfused and with a bias row, on
    /// `x` (with `g` as the incoming gradient), at `isa`.
    fn outputs(
        isa: Isa,
        x: &[f32],
        g: &[f32],
        bias: &[f32],
    ) -> Vec<(UnaryOp, &'static str, Vec<f32>)> {
        force_isa(Some(isa)).expect("a supported level");
        let mut out = Vec::new();
        use UnaryOp as U;
        let ops = [
            U::Neg,
            U::Exp,
            U::Log,
            U::Sqrt,
            U::Abs,
            U::Sigmoid,
            U::Tanh,
            U::Relu,
            U::Gelu,
            U::Silu,
            U::Sin,
            U::Cos,
            U::Erf,
            U::GeluErf,
        ];
        for op in ops {
            let mut y = vec![0.0; x.len()];
            unary_into(op, x, &mut y);
            let mut dx = vec![0.0; x.len()];
            unary_backward_into(op, x, &y, g, &mut dx);
            let mut by = vec![0.0; x.len()];
            bias_act_into(op, x, bias, &mut by);
            let mut bdx = vec![0.0; x.len()];
            bias_act_backward_into(op, x, bias, &by, g, &mut bdx);
            out.extend([
                (op, "forward", y),
                (op, "backward", dx),
                (op, "bias forward", by),
                (op, "bias backward", bdx),
            ]);
        }
        out
    }

    /// Runs `f` with the MXCSR's flush-to-zero and denormals-are-zero set
    /// or cleared on this thread, restoring the register after.
    fn with_flush<R>(flush: bool, f: impl FnOnce() -> R) -> R {
        #[cfg(target_arch = "x86_64")]
        #[allow(deprecated)]
        {
            use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
            const MODE: u32 = 0x8040;
            // SAFETY: only how subnormals read and round changes, and the
            // register is restored.
            let saved = unsafe { _mm_getcsr() };
            unsafe { _mm_setcsr(if flush { saved | MODE } else { saved & !MODE }) };
            let r = f();
            unsafe { _mm_setcsr(saved) };
            r
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = flush;
            f()
        }
    }

    /// Every level gives the scalar level's bits for every op, forward and
    /// backward, plain and with a bias, with subnormals kept and flushed.
    /// Pieces stay below the parallel threshold, so everything runs on this
    /// thread, under the mode set here; their lengths and the bias's (13) are
    /// no multiples of 8, so every loop ends in a remainder.
    #[test]
    fn every_level_gives_the_bits_of_the_scalar_activations() {
        let all = inputs();
        let grads: Vec<f32> = (0..all.len())
            .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let bias: Vec<f32> = (0..13).map(|i| i as f32 * 0.37 - 2.1).collect();
        let piece = 13 * 1601;
        // Gated or not on AVX2, each form must give the scalar bits.
        super::EVERY_FORM_ON_AVX2.store(true, std::sync::atomic::Ordering::Relaxed);
        for flush in [false, true] {
            with_flush(flush, || {
                for (x, g) in all.chunks(piece).zip(grads.chunks(piece)) {
                    let len = x.len() - x.len() % 13;
                    let (x, g) = (&x[..len], &g[..len]);
                    let want = outputs(Isa::Scalar, x, g, &bias);
                    for isa in supported_isas() {
                        let got = outputs(isa, x, g, &bias);
                        for ((op, what, w), (_, _, o)) in want.iter().zip(&got) {
                            for (i, (&a, &b)) in w.iter().zip(o).enumerate() {
                                assert!(
                                    same(a, b),
                                    "{isa} {op:?} {what} (flush {flush}) of {:e} (bits {:#x}): {b:e}, scalar {a:e}",
                                    x[i],
                                    x[i].to_bits()
                                );
                            }
                        }
                    }
                }
            });
        }
        super::EVERY_FORM_ON_AVX2.store(false, std::sync::atomic::Ordering::Relaxed);
        force_isa(None).expect("the initial level");
    }

    /// `tanh` at every level against `math::tanhf` over the f32s of `bits`.
    fn check_tanh(bits: impl Iterator<Item = u32>) -> u64 {
        let mut checked = 0;
        let xs: Vec<f32> = bits.map(f32::from_bits).collect();
        let isas = supported_isas();
        for x in xs.chunks(16_000) {
            let want: Vec<f32> = x.iter().map(|&v| crate::math::tanhf(v)).collect();
            for &isa in &isas[1..] {
                force_isa(Some(isa)).expect("a supported level");
                let mut got = vec![0.0; x.len()];
                unary_into(UnaryOp::Tanh, x, &mut got);
                for (i, (&w, &o)) in want.iter().zip(&got).enumerate() {
                    assert!(same(w, o), "{isa}: tanh({:e}) = {o:e}, scalar {w:e}", x[i]);
                }
            }
            checked += x.len() as u64;
        }
        force_isa(None).expect("the initial level");
        checked
    }

    /// The vector `tanh` is CORE-MATH's `tanhf` on every 97th f32, both
    /// signs, subnormals and NaNs included.
    #[test]
    fn the_vector_tanh_is_the_scalar_tanhf() {
        for flush in [false, true] {
            let n = with_flush(flush, || check_tanh((0..=u32::MAX).step_by(97)));
            assert!(n > 40_000_000);
        }
    }

    /// The same over all 2³² f32s (a few minutes; run with `--ignored`).
    #[test]
    #[ignore]
    fn the_vector_tanh_is_the_scalar_tanhf_on_every_f32() {
        for flush in [false, true] {
            with_flush(flush, || check_tanh(0..=u32::MAX));
        }
    }
}
