//! What a compiled CPU step program allocates per run, counted by a global
//! allocator (this test binary's own, so it sees every allocation of the
//! process).
//!
//! The program itself and every kernel run in preallocated memory: a step
//! using every kernel allocates nothing per run, below and above the parallel
//! thresholds, matrix products included (the `gemm` crate's packing buffers
//! and flags are kept per thread by the patched `gemm-common` in
//! `third_party/`). What remains is outside this crate: rayon allocates one
//! block of its global job queue per 63 jobs sent to its pool from a thread
//! outside it. The strict counts run the program on a pool thread (where
//! parallel kernels queue locally); the count from a plain thread is printed.

#[path = "devices/cpu_program_support/mod.rs"]
mod cpu_program_support;
#[path = "devices/fused_support/mod.rs"]
mod fused_support;

use cpu_program_support::{capture, every_kernel, mlp, mlp_products, StepFn};
use fused_support::fused_step;
use mlpl_devices::capture::StepProgram;
use mlpl_devices::Tensor;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's allocations are counted: the measuring thread's
    /// and rayon's workers', not those of the test harness (which prints and
    /// collects the other tests' results meanwhile).
    static MEASURED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Counts one allocation when this thread is measured.
fn count() {
    if MEASURED.with(std::cell::Cell::get) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Marks the calling thread and every rayon worker as measured (or not).
fn measure_threads(on: bool) {
    MEASURED.with(|m| m.set(on));
    rayon::broadcast(|_| MEASURED.with(|m| m.set(on)));
}

/// The system allocator, counting the allocations of measured threads.
struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Measured runs after the two warm-up runs.
const RUNS: usize = 6;

/// Allocations of each of [`RUNS`] runs after two warm-up runs, with the
/// program run on a rayon pool thread.
fn per_run_in_pool(program: &mut dyn StepProgram) -> [u64; RUNS] {
    let mut counts = [0u64; RUNS];
    measure_threads(true);
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
    measure_threads(false);
    counts
}

/// Allocations of [`RUNS`] runs together after two warm-up runs, run from
/// this (non-pool) thread.
fn total_outside_pool(program: &mut dyn StepProgram) -> u64 {
    for _ in 0..2 {
        program.run().unwrap();
    }
    measure_threads(true);
    let before = ALLOCS.load(Ordering::SeqCst);
    for _ in 0..RUNS {
        program.run().unwrap();
    }
    let total = ALLOCS.load(Ordering::SeqCst) - before;
    measure_threads(false);
    total
}

/// The program of a step captured from `init` (the compiled program is all
/// that is kept).
fn program(init: Vec<Tensor>, step: &StepFn) -> Box<dyn StepProgram> {
    capture(init, step).program
}

/// Serialises the tests of this binary: they count allocations process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_step_without_products_allocates_nothing_per_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (rows, cols) in [(6, 8), (96, 512)] {
        let (init, step) = every_kernel(rows, cols, false);
        let mut p = program(init, &*step);
        let counts = per_run_in_pool(&mut *p);
        assert_eq!(
            counts, [0; RUNS],
            "every-kernel step at {rows} x {cols}: allocations per run"
        );
        let outside = total_outside_pool(&mut *p);
        println!(
            "every-kernel step at {rows} x {cols}, run from outside the pool: {outside} allocations in {RUNS} runs"
        );
    }
}

#[test]
fn an_mlp_step_with_its_products_allocates_nothing_per_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (batch, din, hidden, classes) in [(8, 6, 16, 5), (256, 96, 160, 200)] {
        let (init, step) = mlp(batch, din, hidden, classes);
        let mut whole = program(init, &*step);
        let (init, step) = mlp_products(batch, din, hidden, classes);
        let mut products = program(init, &*step);
        let whole_counts = per_run_in_pool(&mut *whole);
        let product_counts = per_run_in_pool(&mut *products);
        println!(
            "mlp {batch}x{din}x{hidden}x{classes}: {whole_counts:?} allocations per run, {product_counts:?} for its 5 products alone"
        );
        assert_eq!(
            product_counts, [0; RUNS],
            "the matrix products allocate (is the gemm-common patch applied?)"
        );
        assert_eq!(whole_counts, [0; RUNS], "the MLP step allocates");
    }
}

#[test]
fn a_step_through_every_fused_kernel_allocates_nothing_per_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Small, then 40,960-element activations and 36,864 scores (parallel).
    for (rows, n, heads, t) in [(6, 5, 2, 4), (256, 160, 8, 48)] {
        let (init, step) = fused_step(rows, n, heads, t);
        let mut p = program(init, &*step);
        let counts = per_run_in_pool(&mut *p);
        assert_eq!(
            counts, [0; RUNS],
            "{rows}x{n}, {heads} heads of {t}: allocations per run"
        );
    }
}
