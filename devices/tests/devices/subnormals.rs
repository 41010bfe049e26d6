//! Subnormal numbers on the CPU backend: flushed to zero on x86-64 (FTZ and
//! DAZ) on the thread that launches a kernel and on every thread of its rayon
//! pool, with the same bits at every thread count.

use mlpl_devices::cpu::flushing_subnormals;
use mlpl_devices::{Backend, BinaryOp, CpuBackend, Tensor};

/// `[m, k]` filled with `scale · (small integers)`, deterministic.
fn filled(m: usize, k: usize, scale: f32, seed: usize) -> Tensor {
    let data = (0..m * k)
        .map(|i| scale * (((i * 7 + seed * 13) % 11) as f32 - 5.0))
        .collect();
    Tensor::from_vec(vec![m, k], data)
}

/// Runs `f` in a fresh rayon pool of `threads` threads.
fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn a_kernel_makes_its_thread_and_pool_flush_subnormals() {
    let (caller, workers) = in_pool(3, || {
        let b = CpuBackend::default();
        let x = filled(4, 4, 1.0, 0);
        b.binary(BinaryOp::Add, &x, &x).unwrap();
        (
            flushing_subnormals(),
            rayon::broadcast(|_| flushing_subnormals()),
        )
    });
    if cfg!(target_arch = "x86_64") {
        assert!(caller, "the launching thread does not flush subnormals");
        assert_eq!(
            workers,
            vec![true; 3],
            "a pool thread does not flush subnormals"
        );
    } else {
        assert!(!caller && workers.iter().all(|w| !w));
    }
}

#[test]
fn products_of_subnormal_size_are_zero_at_every_thread_count() {
    // Inputs of 1e-20 scale: every product is about 1e-40 (subnormal).
    let (a, b) = (filled(96, 300, 1e-20, 1), filled(300, 80, 1e-20, 2));
    let tiny = Tensor::from_vec(vec![4], vec![1e-39, -3e-40, 2.0, 1e-45]);
    let one = Tensor::from_vec(vec![4], vec![1.0; 4]);
    let run = |threads| {
        in_pool(threads, || {
            let cpu = CpuBackend::default();
            let c = cpu.matmul_t(&a, &b, false, false).unwrap().to_vec();
            let d = cpu.binary(BinaryOp::Mul, &tiny, &one).unwrap().to_vec();
            (c, d)
        })
    };
    let (c1, d1) = run(1);
    if cfg!(target_arch = "x86_64") {
        assert!(c1.iter().all(|&v| v == 0.0), "a subnormal product was kept");
        assert_eq!(
            d1,
            vec![0.0, 0.0, 2.0, 0.0],
            "a subnormal input was not read as zero"
        );
    }
    for threads in [2, 3] {
        let (c, d) = run(threads);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&c), bits(&c1), "{threads} threads");
        assert_eq!(bits(&d), bits(&d1), "{threads} threads");
    }
}
