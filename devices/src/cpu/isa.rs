//! The instruction-set level of the CPU kernels that choose their code at run
//! time: the GEMM's micro-kernels, and the element-wise, normalisation,
//! softmax and cross-entropy kernels, whose loops [`vectorised`] compiles for
//! the level.
//!
//! Results never depend on the level: every level computes every output element
//! with the same operations in the same order (see `gemm/sgemm.rs`), so the level
//! only changes speed. It is picked once per process, the best the CPU supports,
//! unless the environment variable `MLPL_CPU_ISA` (`scalar`, `avx2`, `avx512`)
//! asks for another, or a program calls [`force_isa`]. Tests use both to prove
//! that every level prints the same numbers.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// An instruction-set level of the CPU kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Plain Rust, one element at a time (every CPU; the only level off x86-64).
    Scalar,
    /// 256-bit AVX2 with FMA (x86-64 since 2013).
    Avx2,
    /// 512-bit AVX-512F with FMA.
    Avx512,
}

impl Isa {
    /// Every level, lowest first.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// The name `MLPL_CPU_ISA` and [`Isa::parse`] use.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// The level named `name` (`scalar`, `avx2`, `avx512`; case-insensitive).
    pub fn parse(name: &str) -> Option<Isa> {
        Isa::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Whether this CPU can run the level.
    pub fn is_supported(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn from_code(code: u8) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.code() == code)
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The levels this CPU supports, lowest first.
pub fn supported_isas() -> Vec<Isa> {
    Isa::ALL.into_iter().filter(|i| i.is_supported()).collect()
}

/// The best level this CPU supports.
pub fn best_isa() -> Isa {
    *supported_isas().last().expect("scalar is always supported")
}

/// The level set by [`force_isa`] (0: none).
static FORCED: AtomicU8 = AtomicU8::new(0);

/// The level the process starts with: `MLPL_CPU_ISA` when it names a supported
/// level, else the best (an unknown or unsupported name is reported once on
/// standard error and ignored).
fn initial_isa() -> Isa {
    static INITIAL: OnceLock<Isa> = OnceLock::new();
    *INITIAL.get_or_init(|| {
        let Ok(name) = std::env::var("MLPL_CPU_ISA") else {
            return best_isa();
        };
        match Isa::parse(&name) {
            Some(isa) if isa.is_supported() => isa,
            Some(isa) => {
                eprintln!(
                    "warning: MLPL_CPU_ISA={name}: this CPU does not support {isa}; using {}",
                    best_isa()
                );
                best_isa()
            }
            None => {
                eprintln!(
                    "warning: MLPL_CPU_ISA={name} is not a level (use scalar, avx2 or avx512); using {}",
                    best_isa()
                );
                best_isa()
            }
        }
    })
}

/// The level the kernels use now.
pub fn isa() -> Isa {
    Isa::from_code(FORCED.load(Ordering::Relaxed)).unwrap_or_else(initial_isa)
}

/// Makes the kernels use `isa` from now on (`None`: back to the process's
/// initial level). Fails, changing nothing, when this CPU cannot run it.
pub fn force_isa(isa: Option<Isa>) -> Result<(), String> {
    match isa {
        Some(isa) if !isa.is_supported() => Err(format!("this CPU does not support {isa}")),
        Some(isa) => {
            FORCED.store(isa.code(), Ordering::Relaxed);
            Ok(())
        }
        None => {
            FORCED.store(0, Ordering::Relaxed);
            Ok(())
        }
    }
}

/// Runs `f` compiled for the current [`isa`]: `f` is inlined into a function
/// built with that level's target features (AVX-512F, or AVX2 and FMA), so its
/// loops over independent elements use the level's vector width.
///
/// Pass a closure marked `#[inline(always)]` (`vectorised(#[inline(always)]
/// || …)`), calling only `#[inline(always)]` functions for its loops. A
/// closure is a function of its own: without the attribute LLVM compiled the
/// kernels' closures once, for the build's baseline (SSE2), and every level
/// called that copy (RMSNorm, softmax and cross-entropy ran on 128-bit
/// registers at the AVX-512 level).
///
/// Results do not change: Rust keeps every floating-point operation as
/// written (no reassociation, no fusing of a multiply and an add), so the
/// compiler only vectorises across independent elements, and sums that run in
/// order stay in order. Kernels call it once per chunk or row, never per
/// element.
#[inline(always)]
pub(crate) fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    match isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa()` only returns levels the CPU supports.
        Isa::Avx512 => unsafe { compiled_for_avx512(f) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Isa::Avx2 => unsafe { compiled_for_avx2(f) },
        _ => f(),
    }
}

/// `f()`, with `f` inlined and compiled for AVX-512F.
///
/// # Safety
/// The CPU supports [`Isa::Avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn compiled_for_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f()`, with `f` inlined and compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU supports [`Isa::Avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn compiled_for_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_scalar_is_always_there() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()), Some(isa));
        }
        assert_eq!(Isa::parse("AVX2"), Some(Isa::Avx2));
        assert_eq!(Isa::parse("sse9"), None);
        assert_eq!(supported_isas()[0], Isa::Scalar);
        assert!(best_isa().is_supported());
    }
}
