//! A compiled CPU step program through every fused kernel allocates nothing
//! per run, below and above the parallel thresholds (counted by this test
//! binary's global allocator; the program runs on a rayon pool thread, where
//! parallel kernels queue their jobs locally).

mod cpu_program_support;
mod fused_support;

use cpu_program_support::capture;
use fused_support::fused_step;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting every allocation.
struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_fused_step_allocates_nothing_per_run() {
    // Small, then 40,960-element activations and 36,864 scores (parallel).
    for (rows, n, heads, t) in [(6, 5, 2, 4), (256, 160, 8, 48)] {
        let (init, step) = fused_step(rows, n, heads, t);
        let mut program = capture(init, &*step).program;
        let mut counts = [0u64; 4];
        rayon::join(
            || {
                for _ in 0..2 {
                    program.run().unwrap();
                }
                for c in counts.iter_mut() {
                    let before = ALLOCS.load(Ordering::SeqCst);
                    program.run().unwrap();
                    *c = ALLOCS.load(Ordering::SeqCst) - before;
                }
            },
            || (),
        );
        assert_eq!(
            counts, [0; 4],
            "{rows}x{n}, {heads} heads of {t}: allocations per run"
        );
    }
}
