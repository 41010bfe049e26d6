//! Subnormal numbers flushed to zero in the CPU backend's arithmetic.
//!
//! x86-64 cores handle a subnormal operand or result (magnitude below
//! `f32::MIN_POSITIVE`, 1.2e-38) in microcode: a product of subnormals ran
//! ~200× slower than a normal one on an Intel Xeon (docs/benchmarks.md,
//! "Subnormal numbers"), and a saturated softmax fills a backward pass with
//! them. So every thread that runs the backend's kernels computes with the
//! MXCSR's flush-to-zero (FTZ: a subnormal result becomes ±0) and
//! denormals-are-zero (DAZ: a subnormal input reads as ±0) set: the same
//! rule on every x86-64 CPU, at every instruction-set level and thread count,
//! so results stay identical across them (docs/reproducibility.md). Elsewhere
//! (aarch64, wasm32) nothing is set and subnormals are kept.
//!
//! The first kernel a thread launches sets the mode on that thread and, with
//! one `rayon::broadcast`, on every thread of the rayon pool it belongs to
//! (the global pool for a thread outside any), where the kernels' parallel
//! work runs.

use std::cell::Cell;

thread_local! {
    /// Whether this thread already computes with subnormals flushed.
    static FLUSHING: Cell<bool> = const { Cell::new(false) };
}

/// Makes this thread and its rayon pool flush subnormals (once per thread;
/// afterwards one thread-local read).
pub(crate) fn flush_in_this_pool() {
    if FLUSHING.with(Cell::get) {
        return;
    }
    flush_on_this_thread();
    rayon::broadcast(|_| flush_on_this_thread());
}

/// Whether this thread computes with subnormals flushed to zero (FTZ and DAZ
/// set on x86-64; always false elsewhere).
pub fn flushing_subnormals() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        #[allow(deprecated)]
        // SAFETY: reading the MXCSR has no side effect.
        let csr = unsafe { std::arch::x86_64::_mm_getcsr() };
        csr & MODE == MODE
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// FTZ (bit 15) and DAZ (bit 6) of the MXCSR.
#[cfg(target_arch = "x86_64")]
const MODE: u32 = 0x8040;

fn flush_on_this_thread() {
    #[cfg(target_arch = "x86_64")]
    #[allow(deprecated)]
    // SAFETY: FTZ and DAZ change only how subnormal values round and read; the
    // other control bits (rounding mode, exception masks) are kept.
    unsafe {
        use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
        _mm_setcsr(_mm_getcsr() | MODE);
    }
    FLUSHING.with(|f| f.set(true));
}
