//! Benchmark of the CPU backend's GEMM (not a timed test).
//!
//! `cargo run --release -p mlpl-devices --example bench_gemm [-- [--compare] CASE...]`
//! prints, one per line, `mlpl matmul CASE GFLOPS` for each f32 product `CASE`
//! and `mlpl overhead_ns add4 NS`, the per-call cost of a 4-element
//! `binary(Add)`. A case is `MxNxK.LL`: C `[M, N]` = op(A)·op(B) with inner size
//! `K`, `LL` the layouts of A and B (`n` stored as is, `t` stored transposed
//! and read through strides, as `Backend::matmul_t` takes the backward's
//! operands). Without cases: square products n = 64..1024 (`nxnxn.nn`).
//!
//! The program's thread is worker 0 of rayon's pool, as in `mlpl run`, and
//! the other workers are kept polling for work between calls
//! ([`WarmWorkers`](mlpl_devices::cpu::WarmWorkers)), as during `mlpl run`'s
//! `train` loops and as OpenMP's threads spin in the peers' libraries
//! (`MLPL_WARM_WORKERS=0`: they sleep when idle, and each product first waits
//! for them to wake).
//! With `MLPL_BENCH_CLOCK=thread` and one thread (`RAYON_NUM_THREADS=1`), calls
//! are timed in the thread's CPU time, which leaves out the time the machine's
//! other work takes the core: the way to compare two builds on a loaded machine.
//! With `MLPL_BENCH_COPIES=N` the calls cycle through `N` copies of each
//! case's operands (8 MiB or more in all: out of the L2 cache), as the products
//! of a training step read operands that earlier kernels left in memory; the
//! default, 1, times operands that stay in the cache between calls.
//! With `--compare` it also times, interleaved case by case, MLPL's GEMM at
//! every instruction-set level the CPU supports (`mlpl-avx512`, `mlpl-avx2`,
//! `mlpl-scalar` up to 256³, all threads) and the engines it could use instead:
//! the `gemm` crate with and without threads (the engine before MLPL's
//! deterministic GEMM) and `matrixmultiply` with its `threading` feature.
//! `bench/devices/run.sh` runs it against NumPy and PyTorch (`gemm_peers.py`,
//! the same cases) and writes the table.

use mlpl_devices::{Backend, BinaryOp, CpuBackend, Tensor};
use std::hint::black_box;
#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/timing.rs"]
mod timing;

/// The cases when none are given.
const SQUARE: [usize; 5] = [64, 128, 256, 512, 1024];

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 1000.0 - 0.5
        })
        .collect()
}

/// One product: C `[m, n]` = op(A)·op(B), inner size `k`.
#[derive(Clone, Copy)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    /// A is stored `[k, m]` (read transposed).
    ta: bool,
    /// B is stored `[n, k]` (read transposed).
    tb: bool,
}

impl Case {
    /// Parses `MxNxK.LL` (`LL` two of `n`/`t`; `.nn` when left out).
    fn parse(text: &str) -> Option<Case> {
        let (sizes, layouts) = text.split_once('.').unwrap_or((text, "nn"));
        let mut it = sizes.split('x').map(|s| s.parse::<usize>().ok());
        let (m, n, k) = (it.next()??, it.next()??, it.next()??);
        let flag = |c| match c {
            'n' => Some(false),
            't' => Some(true),
            _ => None,
        };
        let mut ls = layouts.chars();
        let (ta, tb) = (flag(ls.next()?)?, flag(ls.next()?)?);
        (it.next().is_none() && ls.next().is_none() && m * n * k > 0).then_some(Case {
            m,
            n,
            k,
            ta,
            tb,
        })
    }

    fn label(&self) -> String {
        let l = |t: bool| if t { 't' } else { 'n' };
        format!(
            "{}x{}x{}.{}{}",
            self.m,
            self.n,
            self.k,
            l(self.ta),
            l(self.tb)
        )
    }

    fn gflops(&self, secs: f64) -> f64 {
        2.0 * (self.m * self.n * self.k) as f64 / secs / 1e9
    }

    /// `(row stride, column stride)` of op(A) and of op(B) in their storage.
    fn strides(&self) -> ((usize, usize), (usize, usize)) {
        let a = if self.ta { (1, self.m) } else { (self.k, 1) };
        let b = if self.tb { (1, self.k) } else { (self.n, 1) };
        (a, b)
    }
}

/// `MLPL_BENCH_COPIES` (at least 1; 1 when unset or invalid).
fn operand_copies() -> usize {
    std::env::var("MLPL_BENCH_COPIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

fn gemm_crate(case: Case, a: &[f32], b: &[f32], c: &mut [f32], par: gemm::Parallelism) {
    let ((ars, acs), (brs, bcs)) = case.strides();
    // SAFETY: a and b hold op(A) and op(B) at these strides, c is m x n row-major.
    unsafe {
        gemm::gemm(
            case.m,
            case.n,
            case.k,
            c.as_mut_ptr(),
            1,
            case.n as isize,
            false,
            a.as_ptr(),
            acs as isize,
            ars as isize,
            b.as_ptr(),
            bcs as isize,
            brs as isize,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

fn mm_crate(case: Case, a: &[f32], b: &[f32], c: &mut [f32]) {
    let ((ars, acs), (brs, bcs)) = case.strides();
    // SAFETY: as in `gemm_crate`.
    unsafe {
        matrixmultiply::sgemm(
            case.m,
            case.k,
            case.n,
            1.0,
            a.as_ptr(),
            ars as isize,
            acs as isize,
            b.as_ptr(),
            brs as isize,
            bcs as isize,
            0.0,
            c.as_mut_ptr(),
            case.n as isize,
            1,
        );
    }
}

fn main() {
    // As `mlpl run` does: the program's thread takes its share of every
    // parallel kernel instead of handing it all to the pool and waiting.
    rayon::ThreadPoolBuilder::new()
        .use_current_thread()
        .build_global()
        .expect("the global pool is not built yet");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let compare = args.iter().any(|a| a == "--compare");
    let mut cases: Vec<Case> = Vec::new();
    for a in args.iter().filter(|a| *a != "--compare") {
        match Case::parse(a) {
            Some(c) => cases.push(c),
            None => {
                eprintln!("bench_gemm: `{a}` is not a case `MxNxK.LL` (e.g. 2048x512x128.nt)");
                std::process::exit(2);
            }
        }
    }
    if cases.is_empty() {
        cases = SQUARE
            .iter()
            .map(|&n| Case {
                m: n,
                n,
                k: n,
                ta: false,
                tb: false,
            })
            .collect();
    }
    let be = CpuBackend::new();
    let warm = mlpl_devices::cpu::WarmWorkers::new();
    for case in cases {
        warm.rearm();
        let Case { m, n, k, ta, tb } = case;
        let (a, b) = (data(m * k, 1), data(k * n, 2));
        let sa = if ta { vec![k, m] } else { vec![m, k] };
        let sb = if tb { vec![n, k] } else { vec![k, n] };
        let (xa, xb) = (
            Tensor::from_vec(sa, a.clone()),
            Tensor::from_vec(sb, b.clone()),
        );
        let label = case.label();
        let copies: Vec<(Tensor, Tensor)> = (1..operand_copies())
            .map(|_| {
                (
                    Tensor::from_vec(xa.shape().to_vec(), a.clone()),
                    Tensor::from_vec(xb.shape().to_vec(), b.clone()),
                )
            })
            .collect();
        let next = std::cell::Cell::new(0usize);
        let run = || {
            let i = next.get();
            next.set((i + 1) % (copies.len() + 1));
            let (xa, xb) = if i == 0 {
                (&xa, &xb)
            } else {
                (&copies[i - 1].0, &copies[i - 1].1)
            };
            black_box(be.matmul_t(xa, xb, ta, tb).unwrap());
        };
        println!(
            "mlpl matmul {label} {:.2}",
            case.gflops(timing::best_per_call(0.15, run))
        );
        if compare {
            for isa in mlpl_devices::cpu::supported_isas().into_iter().rev() {
                if isa == mlpl_devices::cpu::Isa::Scalar && m * n * k > 256 * 256 * 256 {
                    continue;
                }
                mlpl_devices::cpu::force_isa(Some(isa)).expect("a supported level");
                let g = case.gflops(timing::best_per_call(0.15, run));
                println!("mlpl-{isa} matmul {label} {g:.2}");
            }
            mlpl_devices::cpu::force_isa(None).expect("the initial level");
            let mut c = vec![0.0f32; m * n];
            let par = gemm::Parallelism::Rayon(0);
            let t = timing::best_per_call(0.15, || gemm_crate(case, &a, &b, &mut c, par));
            println!("gemm-rayon matmul {label} {:.2}", case.gflops(t));
            let par = gemm::Parallelism::None;
            let t = timing::best_per_call(0.15, || gemm_crate(case, &a, &b, &mut c, par));
            println!("gemm-1thread matmul {label} {:.2}", case.gflops(t));
            let t = timing::best_per_call(0.15, || mm_crate(case, &a, &b, &mut c));
            println!(
                "matrixmultiply-threading matmul {label} {:.2}",
                case.gflops(t)
            );
        }
    }
    let (x, y) = (
        Tensor::from_vec(vec![4], data(4, 3)),
        Tensor::from_vec(vec![4], data(4, 4)),
    );
    let t = timing::best_per_call(0.15, || {
        black_box(be.binary(BinaryOp::Add, &x, &y).unwrap());
    });
    println!("mlpl overhead_ns add4 {:.0}", t * 1e9);
}
