//! Per-run time of a captured training step compiled for the CPU
//! (`CpuProgram`, preallocated buffers) against the generic call-by-call
//! replay (`BackendReplay`, the CPU backend's kernels called again), on the
//! same recorded step, interleaved in one process.
//!
//! `cargo run --release -p mlpl-devices --example bench_step_program`
//!
//! The step is a two-layer perceptron's forward, cross-entropy, backward and
//! Adam update (the tests' `mlp`), at three sizes.

#[path = "../tests/devices/cpu_program_support/mod.rs"]
mod support;

use mlpl_devices::capture::{BackendReplay, StepProgram};
use mlpl_devices::{Backend, CpuBackend};
use std::sync::Arc;
use std::time::Instant;
#[path = "support/alloc.rs"]
mod alloc;

/// Median of `xs` (sorted in place).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Milliseconds per run of `p` over a batch of `runs` runs.
fn batch_ms(p: &mut dyn StepProgram, runs: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..runs {
        p.run().unwrap();
    }
    t.elapsed().as_secs_f64() * 1e3 / runs as f64
}

fn main() {
    println!("| batch x din x hidden x classes | arena ms/run | calls ms/run | calls / arena |");
    println!("|---|---|---|---|");
    for (batch, din, hidden, classes) in [
        (64, 32, 128, 64),
        (256, 128, 512, 256),
        (512, 256, 1024, 280),
    ] {
        let (init, step) = support::mlp(batch, din, hidden, classes);
        let c = support::capture(init, &*step);
        let mut arena = c.program;
        let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
        let mut calls: Box<dyn StepProgram> = Box::new(BackendReplay::new(cpu, c.plan));
        let runs = (20_000_000 / (batch * hidden * (din + classes))).clamp(5, 2000);
        for _ in 0..3 {
            arena.run().unwrap();
            calls.run().unwrap();
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..9 {
            a.push(batch_ms(&mut *arena, runs));
            b.push(batch_ms(&mut *calls, runs));
        }
        let (ma, mb) = (median(&mut a), median(&mut b));
        println!(
            "| {batch} x {din} x {hidden} x {classes} | {ma:.4} | {mb:.4} | {:.2} |",
            mb / ma
        );
    }
}
