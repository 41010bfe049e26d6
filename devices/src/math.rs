//! Element-wise math with one result on every CPU.
//!
//! `f32::exp`, `f64::ln` and the other transcendental methods of the standard
//! library call the C library of the machine, whose results may depend on the
//! CPU (glibc, for one, picks an FMA or a non-FMA variant of `exp`, `log`, `sin`
//! and `pow` when a program starts) and differ between C libraries and their
//! versions. The functions here are either CORE-MATH's (the `core-math` crate),
//! which are *correctly rounded*: each returns the float nearest the exact
//! value, so there is only one possible answer and every CPU, compiler and
//! operating system gives it; or, for [`expf`], the hot function of softmax and
//! cross-entropy, MLPL's own, written with IEEE additions and multiplications
//! only, which Rust never fuses or reorders: the same bits everywhere too, at a
//! fraction of the cost of a portable correctly rounded build. Every kernel and host algorithm whose numbers a user sees
//! calls these; square roots, `abs`, `min`, `max`, `powi` and the four basic
//! operations are exact IEEE operations already. A unit test fails when the
//! sources call the standard library's transcendental methods outside tests.

pub use core_math::{
    cos, cosf, erf, erff, exp, log10, log10f, log1p, logf, pow, powf, sin, sinf, tanh, tanhf,
};

/// The natural logarithm, correctly rounded (CORE-MATH's `log`). Just above 1
/// CORE-MATH's `log` takes its slow accurate path on nearly every call, and
/// that is where a softmax's, cross-entropy's or attention row's sum of
/// exponentials shifted by its maximum lies for a confident row (the
/// maximum's own term is exactly 1): a 200-row `cross_entropy` took 75 µs
/// instead of 16. There `log1p(x − 1)` is computed instead, on its fast
/// path for small arguments; `x − 1` is exact for `x` in [1, 2] (Sterbenz)
/// and both functions are correctly rounded, so the result is the same
/// float.
pub fn log(x: f64) -> f64 {
    const NEAR_ONE: f64 = 1.0 + 1.0 / 4096.0;
    if (1.0..NEAR_ONE).contains(&x) {
        core_math::log1p(x - 1.0)
    } else {
        core_math::log(x)
    }
}

/// 2^(i/32) for i < 32, rounded to the nearest f64 (a unit test checks them
/// against CORE-MATH's correctly rounded `exp2`).
#[rustfmt::skip]
pub(crate) const EXP2_32THS: [u64; 32] = [
    0x3ff0000000000000, 0x3ff059b0d3158574, 0x3ff0b5586cf9890f, 0x3ff11301d0125b51,
    0x3ff172b83c7d517b, 0x3ff1d4873168b9aa, 0x3ff2387a6e756238, 0x3ff29e9df51fdee1,
    0x3ff306fe0a31b715, 0x3ff371a7373aa9cb, 0x3ff3dea64c123422, 0x3ff44e086061892d,
    0x3ff4bfdad5362a27, 0x3ff5342b569d4f82, 0x3ff5ab07dd485429, 0x3ff6247eb03a5585,
    0x3ff6a09e667f3bcd, 0x3ff71f75e8ec5f74, 0x3ff7a11473eb0187, 0x3ff82589994cce13,
    0x3ff8ace5422aa0db, 0x3ff93737b0cdc5e5, 0x3ff9c49182a3f090, 0x3ffa5503b23e255d,
    0x3ffae89f995ad3ad, 0x3ffb7f76f2fb5e47, 0x3ffc199bdd85529c, 0x3ffcb720dcef9069,
    0x3ffd5818dcfba487, 0x3ffdfc97337b9b5f, 0x3ffea4afa2a490da, 0x3fff50765b6e4540,
];

/// e^x in f32, within 0.5001 ULP of the exact value (so nearly always the
/// correctly rounded float), with IEEE f64 additions and multiplications only.
///
/// x·32/ln 2 is split into an integer k and a remainder r (|r| ≤ 1/2); then
/// e^x = 2^(k div 32) · 2^((k mod 32)/32) · 2^(r/32), the middle factor from a
/// table, the last from its Taylor series to degree 4 (relative error below
/// 2e-12), all in f64, rounded once to f32 at the end.
#[inline]
pub fn expf(x: f32) -> f32 {
    /// 1.5·2^52: adding it rounds an f64 below 2^51 to an integer, to nearest.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const SCALE: f64 = 32.0 / std::f64::consts::LN_2;
    const STEP: f64 = std::f64::consts::LN_2 / 32.0;
    // Below -104 the result rounds to 0 and above 89 to infinity, so clamping
    // keeps every result (NaN stays NaN) and leaves no branch in the way of
    // vectorising a loop of `expf`.
    let z = f64::from(x.clamp(-104.0, 89.0)) * SCALE;
    let shifted = z + SHIFT;
    let kd = shifted - SHIFT;
    // Same exponent as SHIFT: the difference of the bits is k itself.
    let k = shifted.to_bits().wrapping_sub(SHIFT.to_bits()) as i64;
    let y = (z - kd) * STEP;
    // 1 + y + y²/2 + y³/6 + y⁴/24, evaluated in two halves (Estrin) for a
    // shorter chain of dependent operations.
    let y2 = y * y;
    let p = (1.0 + y) + y2 * ((0.5 + y * (1.0 / 6.0)) + y2 * (1.0 / 24.0));
    let s = f64::from_bits(EXP2_32THS[(k & 31) as usize].wrapping_add(((k >> 5) as u64) << 52));
    (s * p) as f32
}

/// a·b + c rounded once (a fused multiply-add): `f32::mul_add`, except on
/// wasm32, which has no FMA instruction and whose `mul_add` is a library call:
/// there [`fma_f32_via_f64`], the same result without the call in nearly every
/// case.
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "wasm32")]
    {
        fma_f32_via_f64(a, b, c)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        a.mul_add(b, c)
    }
}

/// The fused multiply-add of f32s through f64: a·b is exact in f64 (24 + 24
/// significant bits ≤ 53), so a·b + c in f64 is the exact sum rounded once.
/// Rounding that to f32 rounds the exact sum correctly unless the f64 sum is an
/// exact f32 midpoint (low 29 significand bits 1000…0: the first rounding
/// may have landed on the tie) or lies below f32's normal range (where f32's
/// midpoints sit elsewhere); those rare cases take `f32::mul_add`. (The
/// argument of musl's `fmaf`.)
#[inline(always)]
pub fn fma_f32_via_f64(a: f32, b: f32, c: f32) -> f32 {
    let s = f64::from(a) * f64::from(b) + f64::from(c);
    let bits = s.to_bits();
    if bits & 0x1fff_ffff != 0x1000_0000 && s.abs() >= f64::from(f32::MIN_POSITIVE) {
        s as f32
    } else {
        a.mul_add(b, c)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// `log` takes `log1p(x − 1)` just above 1: the same bits as CORE-MATH's
    /// `log` there, at the switch and beyond it.
    #[test]
    fn log_near_one_is_core_maths_log_bit_for_bit() {
        let mut xs = vec![1.0, 2.0, 1.5, 7.25, 1e6, 0.5, 0.999];
        for k in 0..20_000u64 {
            xs.push(f64::from_bits(1.0f64.to_bits() + k));
            // Spread over [1, 1 + 2^-11): both sides of the switch.
            xs.push(1.0 + (k as f64 * 0.618_033_988_749_895).fract() * 2f64.powi(-11));
        }
        for e in 1..=53 {
            let d = 2f64.powi(-e);
            xs.extend([1.0 + d, 1.0 + 3.0 * d, 1.0 + d * 0.7]);
        }
        let near: f64 = 1.0 + 1.0 / 4096.0;
        xs.extend([
            near,
            f64::from_bits(near.to_bits() - 1),
            f64::from_bits(near.to_bits() + 1),
        ]);
        for x in xs {
            assert_eq!(
                super::log(x).to_bits(),
                core_math::log(x).to_bits(),
                "{x:e}"
            );
        }
    }

    /// The wasm build's fused multiply-add equals `f32::mul_add` bit for bit:
    /// random operands of every magnitude, and sums built to land on f32 ties.
    #[test]
    fn fma_through_f64_is_the_fused_multiply_add() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let same = |a: f32, b: f32, c: f32| {
            let (want, got) = (a.mul_add(b, c), super::fma_f32_via_f64(a, b, c));
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "{a:e} * {b:e} + {c:e}: {want:e} vs {got:e}"
            );
        };
        for _ in 0..2_000_000 {
            let r = next();
            let (a, b, c) = (
                f32::from_bits(r as u32),
                f32::from_bits((r >> 32) as u32),
                f32::from_bits(next() as u32),
            );
            same(a, b, c);
            // Magnitudes that meet: products near c's size, with cancellation.
            let x = 1.0 + (r & 0xffff) as f32 / 65536.0;
            let y = 1.0 + ((r >> 16) & 0xffff) as f32 / 65536.0;
            same(x, y, -(x * y));
            same(
                x,
                -y,
                f32::from_bits(c.to_bits() & 0x807f_ffff | 0x3f80_0000),
            );
            // Ties: 1 + 2^-24 (an f32 midpoint) plus a tiny product just above,
            // below or at zero.
            let t = 2f32.powi(-30) * (1.0 + (r & 0xff) as f32 / 256.0);
            same(t, 1.0, 1.0 + f32::EPSILON);
            same(t, -1.0, 1.0 + f32::EPSILON);
            same(2f32.powi(-24), 1.0 + f32::EPSILON * (r & 7) as f32, 1.0);
            // Below the normal range.
            same(f32::MIN_POSITIVE * x, 0.5 * y, -f32::MIN_POSITIVE * 0.25);
        }
        for (a, b, c) in [
            (0.0, 0.0, -0.0),
            (-0.0, 1.0, 0.0),
            (f32::MAX, 2.0, -f32::MAX),
            (f32::INFINITY, 0.0, 1.0),
            (f32::NAN, 1.0, 1.0),
            (1e-40, 1e-40, 0.0),
        ] {
            same(a, b, c);
        }
    }

    #[test]
    fn the_exp2_table_is_correctly_rounded() {
        for (i, &bits) in super::EXP2_32THS.iter().enumerate() {
            assert_eq!(
                bits,
                core_math::exp2(i as f64 / 32.0).to_bits(),
                "2^({i}/32)"
            );
        }
    }

    /// Distance in ULPs between two finite floats of the same sign (or zero).
    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn expf_is_within_one_ulp_of_the_correctly_rounded_value_and_nearly_always_equal() {
        for (x, want) in [
            (0.0f32, 1.0f32),
            (-0.0, 1.0),
            (f32::INFINITY, f32::INFINITY),
            (f32::NEG_INFINITY, 0.0),
            (89.5, f32::INFINITY),
            (-110.0, 0.0),
        ] {
            assert_eq!(super::expf(x), want, "expf({x})");
        }
        assert!(super::expf(f32::NAN).is_nan());
        let (mut checked, mut differ) = (0u64, 0u64);
        // Every 61st float from -104 to 89 (both signs' bit patterns).
        for bits in (0..0x42b2_0000u32)
            .step_by(61)
            .chain((0x8000_0000..0xc2d0_0000u32).step_by(61))
        {
            let x = f32::from_bits(bits);
            let (got, want) = (super::expf(x), core_math::expf(x));
            assert!(
                ulps(got, want) <= 1,
                "expf({x:e}) = {got:e}, correctly rounded {want:e}"
            );
            checked += 1;
            differ += u64::from(got != want);
        }
        assert!(checked > 30_000_000);
        assert!(
            differ * 10_000 < checked,
            "{differ} of {checked} not correctly rounded"
        );
    }

    /// The standard library's transcendental float methods (`log`, with a
    /// base, is left out: too many loggers share the name).
    const FORBIDDEN: &[&str] = &[
        "exp", "exp2", "exp_m1", "ln", "ln_1p", "log2", "log10", "powf", "sin", "cos", "tan",
        "sinh", "cosh", "tanh", "asin", "acos", "atan", "atan2", "cbrt", "hypot",
    ];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    rust_files(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(path);
            }
        }
    }

    /// The lines of `text` before its first `#[cfg(test)]` (test modules sit
    /// at the end of a file) that call a forbidden method (`x.exp(`) or name
    /// one (`f32::exp`).
    fn forbidden_calls(text: &str) -> Vec<String> {
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let is_ident = |c: char| c.is_alphanumeric() || c == '_';
        let mut found = Vec::new();
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            let hit = FORBIDDEN.iter().any(|name| {
                line.contains(&format!(".{name}("))
                    || ["f32::", "f64::"].iter().any(|ty| {
                        line.match_indices(&format!("{ty}{name}"))
                            .any(|(i, m)| !line[i + m.len()..].starts_with(is_ident))
                    })
            });
            if hit {
                found.push(format!("line {}: {}", n + 1, line.trim()));
            }
        }
        found
    }

    #[test]
    fn the_sources_use_the_portable_functions() {
        assert!(!forbidden_calls("let y = x.exp();").is_empty());
        assert!(!forbidden_calls("map(src, f32::tanh);").is_empty());
        assert!(!forbidden_calls("a.powf(b)").is_empty());
        assert!(forbidden_calls("let y = math::expf(x); // x.exp()").is_empty());
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for crate_dir in [
            "devices/src",
            "runtime/diag/src",
            "runtime/syntax/src",
            "runtime/lang/src",
            "runtime/runner/src",
            "lsp/src",
        ] {
            rust_files(&root.join(crate_dir), &mut files);
        }
        assert!(files.len() > 20, "found the workspace's sources");
        let bad: Vec<String> = files
            .iter()
            .flat_map(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                forbidden_calls(&text)
                    .into_iter()
                    .map(move |c| format!("{}: {c}", f.display()))
            })
            .collect();
        assert!(
            bad.is_empty(),
            "call mlpl_devices::math (same bits on every CPU) instead of the standard library:\n{}",
            bad.join("\n")
        );
    }
}
