//! Matrix multiplication: batched, broadcasting over leading axes, on top of a
//! packed f32 GEMM micro-kernel library.
//!
//! GEMM engine: the `gemm` crate (the one candle uses; rayon parallelism, runtime
//! CPU-feature dispatch to AVX2/AVX-512/FMA micro-kernels). It was measured
//! against `matrixmultiply` 0.3 with its `threading` feature (2 threads) on the
//! 2-core development machine (AMD EPYC with AVX-512, release build, square f32,
//! best of 5 batches, `cargo run --release -p mlpl-devices --example bench_gemm --
//! --compare`), in GFLOP/s:
//!
//! | n    | gemm, 2 threads | gemm, 1 thread | matrixmultiply, 2 threads |
//! |------|-----------------|----------------|---------------------------|
//! | 64   | 99              | 99             | 79                        |
//! | 128  | 124             | 107            | 101                       |
//! | 256  | 195             | 111            | 157                       |
//! | 512  | 218             | 111            | 190                       |
//! | 1024 | 213             | 107            | 195                       |
//!
//! `gemm` is faster at every size (by 10-25%), so it is the engine.
//!
//! Small products (fewer than [`PAR_FLOPS`] multiply-adds) run single-threaded so
//! they do not pay for a thread hand-off. A batch of small products is spread
//! over rayon threads one product per task instead.

use crate::shape::{broadcast_shapes, broadcast_strides, offset_of};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Multiply-adds (m·n·k) from which a single product uses every thread.
pub(crate) const PAR_FLOPS: usize = 96 * 96 * 96;

/// C = A·B for row-major contiguous A `[m, k]`, B `[k, n]` into C `[m, n]`
/// (C is overwritten). `parallel` lets the GEMM use rayon threads.
pub(crate) fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    parallel: bool,
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c[..m * n].fill(0.0);
        return;
    }
    let par = if parallel {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the asserts above bound every index the strides below reach:
    // A is read at i*k + p, B at p*n + j, C written at i*n + j for i < m, j < n, p < k.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
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

/// Batched, broadcasting matmul: `a` `[..., m, k]`, `b` `[..., k, n]` (both rank
/// ≥ 2) → `[batch..., m, n]`. Broadcast batch operands are read through strides,
/// never copied.
///
/// Panics on invalid shapes (the runtime checks first).
pub(crate) fn matmul(a: &Tensor, b: &Tensor) -> Tensor {
    let (sa, sb) = (a.shape(), b.shape());
    assert!(
        sa.len() >= 2 && sb.len() >= 2,
        "matmul: operands need rank >= 2, got {sa:?} and {sb:?}"
    );
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    assert_eq!(k, k2, "matmul: inner sizes differ in {sa:?} x {sb:?}");
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let batch = broadcast_shapes(ba, bb)
        .unwrap_or_else(|| panic!("matmul: batch axes of {sa:?} and {sb:?} do not broadcast"));
    let nb: usize = batch.iter().product();
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    let mut out = vec![0.0f32; nb * m * n];
    if out.is_empty() || k == 0 {
        return Tensor::from_vec(out_shape, out);
    }
    let (xa, xb) = (a.host(), b.host());
    let b_batch: usize = bb.iter().product();
    let a_batch: usize = ba.iter().product();
    let flops = m * n * k;
    if b_batch == 1 && a_batch == nb {
        // One shared right operand: fold the batch into the rows of a single GEMM.
        sgemm(nb * m, n, k, xa, xb, &mut out, nb * flops >= PAR_FLOPS);
        return Tensor::from_vec(out_shape, out);
    }
    let stride_a: Vec<usize> = broadcast_strides(ba, &batch)
        .iter()
        .map(|s| s * m * k)
        .collect();
    let stride_b: Vec<usize> = broadcast_strides(bb, &batch)
        .iter()
        .map(|s| s * k * n)
        .collect();
    let one = |i: usize, c: &mut [f32], parallel: bool| {
        let pa = offset_of(i, &batch, &stride_a);
        let pb = offset_of(i, &batch, &stride_b);
        sgemm(
            m,
            n,
            k,
            &xa[pa..pa + m * k],
            &xb[pb..pb + k * n],
            c,
            parallel,
        );
    };
    if flops >= PAR_FLOPS || nb == 1 {
        for (i, c) in out.chunks_mut(m * n).enumerate() {
            one(i, c, flops >= PAR_FLOPS);
        }
    } else if nb * flops >= PAR_FLOPS {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| one(i, c, false));
    } else {
        for (i, c) in out.chunks_mut(m * n).enumerate() {
            one(i, c, false);
        }
    }
    Tensor::from_vec(out_shape, out)
}
