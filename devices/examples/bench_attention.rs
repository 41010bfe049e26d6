//! Benchmark of the CPU's tiled attention against the composed path it
//! replaces for long sequences (not a timed test).
//!
//! `cargo run --release -p mlpl-devices --example bench_attention` prints one
//! line per case: `attention T H D MS_TILED MS_COMPOSED RATIO MB_TILED
//! MB_COMPOSED`: the best milliseconds per forward + backward call of each
//! path, measured in interleaved batches in the same run, composed / tiled,
//! and the peak bytes allocated during one forward + backward call beyond
//! what was allocated before it (inputs excluded, the CPU's buffer pool
//! emptied first), in MiB. Causal attention over one batch row of `H` heads
//! of width `D`; the composed path is the trait's default (`Unfused`): the
//! batched product `q·kᵀ`, divide, additive mask, softmax and logsumexp, the
//! product with `v`, and its backward from the saved logsumexp.
//!
//! Optional arguments: the sequence lengths to run (default 128 512 1024 2048).

use mlpl_devices::cpu::release_unused_buffers;
use mlpl_devices::{AttentionSpec, Backend, CpuBackend, Tensor, Unfused};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
#[path = "support/timing.rs"]
mod timing;

/// Bytes allocated now, and the most since the last [`reset_peak`].
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator (through `ALIGNED`), tracking live and peak bytes.
struct Tracking;

/// The allocator `Tracking` counts for: as `mlpl`'s, large blocks on a cache line.
const ALIGNED: mlpl_devices::cpu::LineAligned<System> = mlpl_devices::cpu::LineAligned(System);

// SAFETY: every call is forwarded unchanged to `ALIGNED`.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { ALIGNED.alloc(layout) };
        grew(layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { ALIGNED.alloc_zeroed(layout) };
        grew(layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { ALIGNED.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { ALIGNED.realloc(ptr, layout, new_size) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        grew(new_size);
        p
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// Peak bytes allocated while `f` runs, beyond those live when it starts.
fn peak_bytes(f: &mut impl FnMut()) -> usize {
    release_unused_buffers();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    f();
    PEAK.load(Ordering::Relaxed) - base
}

fn data(shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 500.0 - 1.0
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), v)
}

/// One forward and backward call of attention on `be`.
fn step(be: &dyn Backend, [q, k, v, dout]: &[Tensor; 4], spec: AttentionSpec) {
    let none = Tensor::zeros(vec![0]);
    let (out, lse) = be.attention(q, k, v, &none, spec).unwrap();
    let grads = be
        .attention_backward(q, k, v, &out, &lse, dout, spec)
        .unwrap();
    black_box(grads);
}

fn main() {
    let lengths: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a sequence length"))
        .collect();
    let lengths = if lengths.is_empty() {
        vec![128, 512, 1024, 2048]
    } else {
        lengths
    };
    let tiled = CpuBackend::new();
    let composed = Unfused(CpuBackend::new());
    let h = 4;
    println!("# attention T H D ms_tiled ms_composed composed/tiled MiB_tiled MiB_composed");
    for &t in &lengths {
        for d in [64, 128] {
            let ops = [
                data(&[1, h, t, d], 1),
                data(&[1, h, t, d], 2),
                data(&[1, h, t, d], 3),
                data(&[1, h, t, d], 4),
            ];
            let spec = AttentionSpec {
                divisor: (d as f32).sqrt(),
                causal: true,
                window: None,
            };
            let mut run_tiled = || step(&tiled, &ops, spec);
            let mut run_composed = || step(&composed, &ops, spec);
            let mib = |b: usize| b as f64 / (1 << 20) as f64;
            let (pt, pc) = (peak_bytes(&mut run_tiled), peak_bytes(&mut run_composed));
            let (tt, tc) = timing::interleaved(run_tiled, run_composed, 5, 0.2);
            println!(
                "attention {t} {h} {d} {:.2} {:.2} {:.2} {:.2} {:.2}",
                tt * 1e3,
                tc * 1e3,
                tc / tt,
                mib(pt),
                mib(pc)
            );
        }
    }
}
