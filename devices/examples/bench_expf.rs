//! Throughput of `mlpl_devices::math::expf` against the standard library's
//! `f32::exp` (the C library's) and CORE-MATH's correctly rounded `expf`, on
//! 1 M inputs in [-20, 5] summed in f64 (as softmax and cross-entropy do).
//! `cargo run --release -p mlpl-devices --example bench_expf`. Not a test.

use std::hint::black_box;
use std::time::Instant;
#[path = "support/alloc.rs"]
mod alloc;

fn time(name: &str, xs: &[f32], f: impl Fn(f32) -> f32) {
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let t = Instant::now();
        let s: f64 = xs.iter().map(|&x| f(x) as f64).sum();
        black_box(s);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("{name} {:.2} ns/call", best * 1e9 / xs.len() as f64);
}

/// `f` mapped into a buffer first, then summed in order (what the kernels do).
fn time_mapped(name: &str, xs: &[f32], f: impl Fn(f32) -> f32) {
    let mut buf = vec![0.0f32; xs.len()];
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let t = Instant::now();
        for (d, &x) in buf.iter_mut().zip(xs) {
            *d = f(x);
        }
        let s: f64 = buf.iter().map(|&e| e as f64).sum();
        black_box(s);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{name} {:.2} ns/call (map, then sum)",
        best * 1e9 / xs.len() as f64
    );
}

fn main() {
    let xs: Vec<f32> = (0..1_000_000)
        .map(|i| -20.0 + 25.0 * (i as f32 / 1e6))
        .collect();
    time("mlpl-expf", &xs, mlpl_devices::math::expf);
    #[allow(clippy::disallowed_methods)]
    time("std-exp", &xs, f32::exp);
    time("core-math-expf", &xs, core_math::expf);
    time_mapped("mlpl-expf", &xs, mlpl_devices::math::expf);
    #[allow(clippy::disallowed_methods)]
    time_mapped("std-exp", &xs, f32::exp);
}
