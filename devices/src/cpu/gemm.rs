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

use super::pool;
use crate::shape::{broadcast_shapes, broadcast_strides, offset_of};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Multiply-adds (m·n·k) from which a single product uses every thread.
pub(crate) const PAR_FLOPS: usize = 96 * 96 * 96;

/// How an operand of a product is stored: as the matrix itself (row-major) or
/// as its transpose (the matrix is read through swapped strides, never copied).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `[rows, cols]` row-major.
    Plain,
    /// Stored as `[cols, rows]` row-major: the matrix is its transpose.
    Transposed,
}

impl Layout {
    /// `(row stride, column stride)` of a `[rows, cols]` matrix stored this way.
    fn strides(self, rows: usize, cols: usize) -> (isize, isize) {
        match self {
            Layout::Plain => (cols as isize, 1),
            Layout::Transposed => (1, rows as isize),
        }
    }
}

/// C = A·B for A `[m, k]` and B `[k, n]`, each stored as its [`Layout`] says,
/// into row-major C `[m, n]` (overwritten). `parallel` lets the GEMM use rayon
/// threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_t(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    la: Layout,
    b: &[f32],
    lb: Layout,
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
    let (a_rs, a_cs) = la.strides(m, k);
    let (b_rs, b_cs) = lb.strides(k, n);
    // SAFETY: the asserts above bound every index the strides below reach: A is
    // read at i*a_rs + p*a_cs < m*k, B at p*b_rs + j*b_cs < k*n, C written at
    // i*n + j < m*n for i < m, j < n, p < k.
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
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
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
    matmul_t(a, Layout::Plain, b, Layout::Plain)
}

/// [`matmul`] of `a` and `b`, each with its last two axes swapped first when
/// its flag is set, with results bit-identical to permuting and multiplying.
///
/// A transposed left operand is read through strides: that is the large copy
/// saved in a layer's backward pass (`aᵀ·g` over every row of the batch). A
/// transposed right operand (a weight in `g·wᵀ`, small), and the transposed
/// left operand of a matrix-vector product (n = 1), are copied first: for those
/// layouts the GEMM library picks kernels that sum in another order, and the
/// results would differ from `matmul` of the permuted operands in the last bits.
pub(crate) fn matmul_op(a: &Tensor, transpose_a: bool, b: &Tensor, transpose_b: bool) -> Tensor {
    let n = if transpose_b {
        b.shape()[b.rank() - 2]
    } else {
        b.shape()[b.rank() - 1]
    };
    let swapped = |x: &Tensor| {
        let r = x.rank();
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        super::layout::permute(x, &perm)
    };
    let b = if transpose_b { swapped(b) } else { b.clone() };
    if transpose_a && n > 1 {
        matmul_t(a, Layout::Transposed, &b, Layout::Plain)
    } else if transpose_a {
        matmul(&swapped(a), &b)
    } else {
        matmul(a, &b)
    }
}

/// [`matmul`] of `op(a)` and `op(b)`, where a [`Layout::Transposed`] operand
/// is used with its last two axes swapped (read through strides, not copied):
/// `a` is `[..., m, k]` (or `[..., k, m]` when transposed), `b` `[..., k, n]`
/// (or `[..., n, k]`) → `[batch..., m, n]`.
///
/// Panics on invalid shapes (the runtime checks first).
pub(crate) fn matmul_t(a: &Tensor, la: Layout, b: &Tensor, lb: Layout) -> Tensor {
    let (sa, sb) = (a.shape(), b.shape());
    assert!(
        sa.len() >= 2 && sb.len() >= 2,
        "matmul: operands need rank >= 2, got {sa:?} and {sb:?}"
    );
    let last2 = |s: &[usize], l: Layout| {
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        match l {
            Layout::Plain => (r, c),
            Layout::Transposed => (c, r),
        }
    };
    let (m, k) = last2(sa, la);
    let (k2, n) = last2(sb, lb);
    assert_eq!(k, k2, "matmul: inner sizes differ in {sa:?} x {sb:?}");
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let batch = broadcast_shapes(ba, bb)
        .unwrap_or_else(|| panic!("matmul: batch axes of {sa:?} and {sb:?} do not broadcast"));
    let nb: usize = batch.iter().product();
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    if nb * m * n == 0 || k == 0 {
        return pool::zeroed(nb * m * n).into_tensor(out_shape);
    }
    // Every element is written below (the GEMM overwrites its destination).
    let mut out = pool::scratch(nb * m * n);
    let (xa, xb) = (a.host(), b.host());
    let b_batch: usize = bb.iter().product();
    let a_batch: usize = ba.iter().product();
    let flops = m * n * k;
    if b_batch == 1 && a_batch == nb && la == Layout::Plain {
        // One shared right operand: fold the batch into the rows of a single GEMM.
        sgemm_t(
            nb * m,
            n,
            k,
            xa,
            la,
            xb,
            lb,
            &mut out,
            nb * flops >= PAR_FLOPS,
        );
        return out.into_tensor(out_shape);
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
        sgemm_t(
            m,
            n,
            k,
            &xa[pa..pa + m * k],
            la,
            &xb[pb..pb + k * n],
            lb,
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
    out.into_tensor(out_shape)
}
