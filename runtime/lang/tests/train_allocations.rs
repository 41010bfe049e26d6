//! What a steady-state `train` step allocates, counted by a global allocator
//! (this test binary's own, so it sees every allocation of the process).
//!
//! The model is the benchmark's tiny transformer LM (embedding → RMS norm →
//! causal attention → residual, RMS norm → MLP with ReLU → residual, final RMS
//! norm → linear to V, cross-entropy, Adam), smaller. The loop's step is
//! captured (DESIGN §5): its first two iterations are interpreted and recorded,
//! and from the third on the CPU replays the recorded kernels in preallocated
//! buffers (the matrix products' packing buffers are kept per thread, see
//! third_party/gemm-common), so a replayed step allocates nothing. As in
//! `mlpl run`, the program's thread is worker 0 of rayon's pool (otherwise
//! rayon's job queue adds a block every 63 parallel kernels). With capture turned
//! off, every iteration is interpreted; its tensor buffers still come from the
//! CPU backend's buffer pool after a warm-up, and what it allocates (the
//! interpreter's values, the tape's nodes and rules, shape vectors) is printed
//! and bounded.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mlpl_lang::eval::{Interp, RunObserver, Workspace};
use mlpl_syntax::parse;

/// Allocations of at least this many bytes are tensor-sized here (the smallest
/// activation of the model below is 16 × 32 × 32 floats = 64 KiB).
const LARGE: usize = 16 * 1024;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LARGE_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting while [`COUNTING`] is set.
struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted: the thread running the
    /// program and rayon's workers, not the test harness (which prints and
    /// collects the other test's results meanwhile).
    static MEASURED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Counts the calling thread and every rayon worker (or stops counting them).
fn measure_threads(on: bool) {
    MEASURED.with(|m| m.set(on));
    rayon::broadcast(|_| MEASURED.with(|m| m.set(on)));
    COUNTING.store(on, Ordering::SeqCst);
}

impl Counting {
    fn count(size: usize) {
        if COUNTING.load(Ordering::Relaxed) && MEASURED.with(std::cell::Cell::get) {
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

/// Runs the model with capture on or off; returns the allocation counters'
/// increments of each step.
fn per_step(capture: bool) -> Vec<(u64, u64, u64)> {
    // The counters are process-wide: one measured run at a time.
    static SERIAL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let parsed = parse(MODEL);
    assert!(
        parsed.diagnostics.iter().all(|d| !d.is_error()),
        "the model script parses"
    );
    // Room for every mark, so that recording one allocates nothing.
    let marks = Arc::new(Mutex::new(Vec::with_capacity(4 * STEPS)));
    // Like `mlpl run`, the thread running the program is worker 0 of rayon's
    // pool (a pool of this test's own; its registry is leaked when the test
    // ends), so parallel kernels queue their work on its own deque.
    let _pool = rayon::ThreadPoolBuilder::new()
        .use_current_thread()
        .build()
        .expect("this test thread joins a pool of its own");
    mlpl_devices::cpu::warm_threads();
    let mut it = Interp::new(Workspace::new());
    it.capture_steps = capture;
    it.set_observer(Box::new(StepMarks(marks.clone())));
    measure_threads(true);
    let result = it.run(&parsed.program);
    measure_threads(false);
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
            "capture {capture}, step {}: {n} allocations, {bytes} bytes, {large} of {LARGE} bytes or more",
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
    per_step
}

#[test]
fn replayed_steps_allocate_nothing() {
    let steps = per_step(true);
    // Steps 1 and 2 are recorded; the first replay sets up its buffers.
    for (i, &(n, bytes, _)) in steps.iter().enumerate().skip(WARM_UP) {
        assert_eq!(
            (n, bytes),
            (0, 0),
            "replayed step {} allocated {n} blocks ({bytes} bytes)",
            i + 1
        );
    }
}

#[test]
fn interpreted_steps_take_their_tensor_buffers_from_the_pool() {
    let steps = per_step(false);
    for (i, &(_, bytes, large)) in steps.iter().enumerate().skip(WARM_UP) {
        // Tensor-sized blocks an interpreted step may still allocate: the
        // GEMM's packing buffers (kept per thread, at most two new ones when a
        // product needs a larger one).
        assert!(
            large <= 2,
            "step {} made {large} tensor-sized allocations after the warm-up",
            i + 1
        );
        assert!(
            bytes * 20 < steps[0].1,
            "step {} allocated {bytes} bytes, not far below the first step's {}",
            i + 1,
            steps[0].1
        );
    }
}
