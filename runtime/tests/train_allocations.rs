//! What a steady-state `train` step allocates, counted by a global allocator
//! (this test binary's own, so it sees every allocation of the process).
//!
//! The model is the benchmark's tiny transformer LM (embedding → RMS norm →
//! causal attention → residual, RMS norm → MLP with ReLU → residual, final RMS
//! norm → linear to V, cross-entropy, Adam), smaller. After the warm-up steps
//! every tensor buffer of a step (activations, gradients, tape values) comes
//! from the CPU backend's buffer pool: no tensor buffer is allocated. What
//! still allocates is printed: two packing buffers inside the `gemm` crate,
//! and small blocks (about 1,150 a step, 160 KiB: the interpreter's values,
//! the tape's nodes and backward rules, shape vectors, per-row statistics).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mlpl_runtime::eval::{Interp, RunObserver, Workspace};
use mlpl_runtime::syntax::parse;

/// Allocations of at least this many bytes are tensor-sized here (the smallest
/// activation of the model below is 16 × 32 × 32 floats = 64 KiB).
const LARGE: usize = 16 * 1024;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LARGE_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting while [`COUNTING`] is set.
struct Counting;

impl Counting {
    fn count(size: usize) {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(size as u64, Ordering::Relaxed);
            if size >= LARGE {
                LARGE_ALLOCS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// (allocations, bytes, large allocations) so far.
fn snapshot() -> (u64, u64, u64) {
    (
        ALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
        LARGE_ALLOCS.load(Ordering::Relaxed),
    )
}

/// Records the allocation counters at the end of every step.
struct StepMarks(Arc<Mutex<Vec<(u64, u64, u64)>>>);

impl RunObserver for StepMarks {
    fn on_train_start(&mut self, _total: usize, _depth: usize) {
        self.0.lock().unwrap().push(snapshot());
    }

    fn on_step(&mut self, _: usize, _: usize, _: f64, _: Option<f64>, _: f64) {
        self.0.lock().unwrap().push(snapshot());
    }
}

/// Tensor-sized allocations a steady-state step still makes: none for tensors;
/// the `gemm` crate allocates a 72 KiB packing buffer on each of the two
/// threads for the batched products of the attention backward (seen with a
/// backtrace from this allocator).
const GEMM_PACKING_PER_STEP: u64 = 2;

const STEPS: usize = 8;
const WARM_UP: usize = 3;

const MODEL: &str = r#"
text = load_preloaded("tiny_shakespeare_snippet")
ids = tokenize_bytes(text)
X = split(shift_pairs_x(ids, 32), 16 / 61, 0)
Y = split(shift_pairs_y(ids, 32), 16 / 61, 0)
V = 280
d = 32
model = chain(
  embed(V, d, 0),
  residual(chain(rms_norm(d), causal_attention(d, 1, 1))),
  residual(chain(rms_norm(d), linear(d, 4 * d, 2), relu_layer(), linear(4 * d, d, 3))),
  rms_norm(d),
  linear(d, V, 4),
)
reinit(model, "all_layers", 0.02, 5)
train 8 {
  adam(cross_entropy(apply(model, X), Y), model, 0.001, 0.9, 0.999, 1e-8)
}
"#;

#[test]
fn steady_state_steps_allocate_no_tensor_buffers() {
    let parsed = parse(MODEL);
    assert!(
        parsed.diagnostics.iter().all(|d| !d.is_error()),
        "the model script parses"
    );
    let marks = Arc::new(Mutex::new(Vec::new()));
    let mut it = Interp::new(Workspace::new());
    it.set_observer(Box::new(StepMarks(marks.clone())));
    COUNTING.store(true, Ordering::Relaxed);
    let result = it.run(&parsed.program);
    COUNTING.store(false, Ordering::Relaxed);
    if let Err(d) = result {
        panic!("the training script failed: {} {}", d.code, d.message);
    }
    let marks = marks.lock().unwrap().clone();
    assert_eq!(
        marks.len(),
        STEPS + 1,
        "one mark before the loop and one per step"
    );
    let per_step: Vec<(u64, u64, u64)> = marks
        .windows(2)
        .map(|w| (w[1].0 - w[0].0, w[1].1 - w[0].1, w[1].2 - w[0].2))
        .collect();
    for (i, (n, bytes, large)) in per_step.iter().enumerate() {
        eprintln!(
            "step {}: {n} allocations, {bytes} bytes, {large} of {LARGE} bytes or more",
            i + 1
        );
    }
    // The first step allocates every tensor buffer (this also proves the
    // counter sees the kernels' allocations).
    assert!(
        per_step[0].2 >= 20,
        "the first step made only {} tensor-sized allocations",
        per_step[0].2
    );
    for (i, &(_, bytes, large)) in per_step.iter().enumerate().skip(WARM_UP) {
        assert!(
            large <= GEMM_PACKING_PER_STEP,
            "step {} made {large} tensor-sized allocations after the warm-up",
            i + 1
        );
        assert!(
            bytes * 20 < per_step[0].1,
            "step {} allocated {bytes} bytes, not far below the first step's {}",
            i + 1,
            per_step[0].1
        );
    }
}
