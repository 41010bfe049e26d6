//! Benchmark of the CPU backend (not a timed test).
//!
//! `cargo run --release -p mlpl-devices --example bench_gemm` prints, one per line,
//! `mlpl matmul N GFLOPS` for square f32 matmuls of size N = 64..1024 and
//! `mlpl overhead_ns add4 NS`, the per-call cost of a 4-element `binary(Add)`.
//! With `--compare` it also times, interleaved size by size, MLPL's GEMM at every
//! instruction-set level the CPU supports (`mlpl-avx512`, `mlpl-avx2`,
//! `mlpl-scalar`, all threads) and the engines it could use instead: the `gemm`
//! crate with and without threads (the engine before MLPL's deterministic
//! GEMM) and `matrixmultiply` with its `threading` feature.
//! `bench/devices/run.sh` runs it against NumPy and writes the table.

use mlpl_devices::{Backend, BinaryOp, CpuBackend, Tensor};
use std::hint::black_box;
use std::time::Instant;

const SIZES: [usize; 5] = [64, 128, 256, 512, 1024];

/// Best seconds per call of `f` over 5 batches of about 0.15 s each (the best
/// batch is the one least disturbed by other work on the machine).
fn time_per_call(mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut reps = 0u64;
    while start.elapsed().as_secs_f64() < 0.05 {
        f();
        reps += 1;
    }
    let per = start.elapsed().as_secs_f64() / reps as f64;
    let reps = ((0.15 / per) as u64).max(1);
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64() / reps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 1000.0 - 0.5
        })
        .collect()
}

fn gflops(n: usize, secs: f64) -> f64 {
    2.0 * (n as f64).powi(3) / secs / 1e9
}

fn gemm_crate(n: usize, a: &[f32], b: &[f32], c: &mut [f32], par: gemm::Parallelism) {
    // SAFETY: a, b, c are n x n row-major.
    unsafe {
        gemm::gemm(
            n,
            n,
            n,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            n as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

fn mm_crate(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    // SAFETY: a, b, c are n x n row-major.
    unsafe {
        matrixmultiply::sgemm(
            n,
            n,
            n,
            1.0,
            a.as_ptr(),
            n as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

fn main() {
    let compare = std::env::args().any(|a| a == "--compare");
    let be = CpuBackend::new();
    for n in SIZES {
        let (a, b) = (data(n * n, 1), data(n * n, 2));
        let (ta, tb) = (
            Tensor::from_vec(vec![n, n], a.clone()),
            Tensor::from_vec(vec![n, n], b.clone()),
        );
        let t = time_per_call(|| {
            black_box(be.matmul(&ta, &tb).unwrap());
        });
        println!("mlpl matmul {n} {:.2}", gflops(n, t));
        if compare {
            for isa in mlpl_devices::cpu::supported_isas().into_iter().rev() {
                if isa == mlpl_devices::cpu::Isa::Scalar && n > 256 {
                    continue;
                }
                mlpl_devices::cpu::force_isa(Some(isa)).expect("a supported level");
                let t = time_per_call(|| {
                    black_box(be.matmul(&ta, &tb).unwrap());
                });
                println!("mlpl-{isa} matmul {n} {:.2}", gflops(n, t));
            }
            mlpl_devices::cpu::force_isa(None).expect("the initial level");
            let mut c = vec![0.0f32; n * n];
            let t = time_per_call(|| gemm_crate(n, &a, &b, &mut c, gemm::Parallelism::Rayon(0)));
            println!("gemm-rayon matmul {n} {:.2}", gflops(n, t));
            let t = time_per_call(|| gemm_crate(n, &a, &b, &mut c, gemm::Parallelism::None));
            println!("gemm-1thread matmul {n} {:.2}", gflops(n, t));
            let t = time_per_call(|| mm_crate(n, &a, &b, &mut c));
            println!("matrixmultiply-threading matmul {n} {:.2}", gflops(n, t));
        }
    }
    let (x, y) = (
        Tensor::from_vec(vec![4], data(4, 3)),
        Tensor::from_vec(vec![4], data(4, 4)),
    );
    let t = time_per_call(|| {
        black_box(be.binary(BinaryOp::Add, &x, &y).unwrap());
    });
    println!("mlpl overhead_ns add4 {:.0}", t * 1e9);
}
