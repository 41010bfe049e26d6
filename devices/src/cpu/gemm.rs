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
//!
//! Memory: the `gemm` crate (0.18) takes no workspace. Released, every general
//! product allocates inside it (a flag vector of `mc / MR` entries, a packing
//! buffer when it packs an operand, a flag vector per extra thread); the
//! workspace applies a patched `gemm-common` (`third_party/gemm-common`) that
//! keeps these per thread, so products allocate only the first time a thread
//! needs a bigger buffer (its L2 packing slab is allocated once per thread). Everything else here is
//! planned from the shapes ([`MatmulPlan`], [`MatmulOpPlan`]) and runs in the
//! caller's memory.

use super::layout::{permute_into, PermutePlan};
use super::pool;
use crate::shape::{broadcast_shapes, broadcast_strides, offset_of};
use crate::tensor::{numel_of, Tensor};
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
    let plan = MatmulPlan::new(a.shape(), Layout::Plain, b.shape(), Layout::Plain);
    let mut out = pool::scratch(plan.out_len());
    matmul_into(&plan, a.host(), b.host(), &mut out);
    out.into_tensor(plan.out_shape)
}

/// The products [`matmul_op`] runs for given shapes and transpose flags: which
/// operand is copied with its last two axes swapped first, and the product.
#[derive(Clone, Debug)]
pub(crate) struct MatmulOpPlan {
    /// The swap of `a` copied first (a transposed left operand of a
    /// matrix-vector product), when it moves elements.
    pub(crate) swap_a: Option<PermutePlan>,
    /// The swap of `b` copied first (every transposed right operand), when it
    /// moves elements.
    pub(crate) swap_b: Option<PermutePlan>,
    /// The product of the (swapped) operands.
    pub(crate) product: MatmulPlan,
}

/// The permutation swapping the last two of `rank` axes.
fn swap_last_two(rank: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(rank - 2, rank - 1);
    perm
}

impl MatmulOpPlan {
    /// The plan of `matmul_op(a, transpose_a, b, transpose_b)` for operands of
    /// shapes `sa` and `sb` (panics on invalid shapes).
    pub(crate) fn new(
        sa: &[usize],
        transpose_a: bool,
        sb: &[usize],
        transpose_b: bool,
    ) -> MatmulOpPlan {
        assert!(
            sa.len() >= 2 && sb.len() >= 2,
            "matmul: operands need rank >= 2, got {sa:?} and {sb:?}"
        );
        let n = if transpose_b {
            sb[sb.len() - 2]
        } else {
            sb[sb.len() - 1]
        };
        let swap = |s: &[usize]| PermutePlan::new(s, &swap_last_two(s.len()));
        let (swap_b, b_shape) = if transpose_b {
            let p = swap(sb);
            let shape = p.out_shape.clone();
            (p.moves().then_some(p), shape)
        } else {
            (None, sb.to_vec())
        };
        let (swap_a, product) = if transpose_a && n > 1 {
            (
                None,
                MatmulPlan::new(sa, Layout::Transposed, &b_shape, Layout::Plain),
            )
        } else if transpose_a {
            let p = swap(sa);
            let product = MatmulPlan::new(&p.out_shape, Layout::Plain, &b_shape, Layout::Plain);
            (p.moves().then_some(p), product)
        } else {
            (
                None,
                MatmulPlan::new(sa, Layout::Plain, &b_shape, Layout::Plain),
            )
        };
        MatmulOpPlan {
            swap_a,
            swap_b,
            product,
        }
    }

    /// Scratch elements needed for the swapped copies of `a` and of `b`.
    pub(crate) fn scratch_lens(&self) -> (usize, usize) {
        let len = |p: &Option<PermutePlan>| p.as_ref().map_or(0, |p| numel_of(&p.out_shape));
        (len(&self.swap_a), len(&self.swap_b))
    }
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
    let plan = MatmulOpPlan::new(a.shape(), transpose_a, b.shape(), transpose_b);
    let (na, nb) = plan.scratch_lens();
    // Scratch only for the operands that are copied.
    let (mut sa, mut sb) = (
        (na > 0).then(|| pool::scratch(na)),
        (nb > 0).then(|| pool::scratch(nb)),
    );
    let mut out = pool::scratch(plan.product.out_len());
    matmul_op_into(
        &plan,
        a.host(),
        b.host(),
        sa.as_deref_mut().unwrap_or(&mut []),
        sb.as_deref_mut().unwrap_or(&mut []),
        &mut out,
    );
    sa.into_iter().chain(sb).for_each(pool::Out::recycle);
    out.into_tensor(plan.product.out_shape)
}

/// [`matmul_op`] on slices: `scratch_a` and `scratch_b` hold the swapped
/// copies ([`MatmulOpPlan::scratch_lens`] elements each).
pub(crate) fn matmul_op_into(
    plan: &MatmulOpPlan,
    a: &[f32],
    b: &[f32],
    scratch_a: &mut [f32],
    scratch_b: &mut [f32],
    out: &mut [f32],
) {
    let a = match &plan.swap_a {
        Some(p) => {
            permute_into(p, a, scratch_a);
            &*scratch_a
        }
        None => a,
    };
    let b = match &plan.swap_b {
        Some(p) => {
            permute_into(p, b, scratch_b);
            &*scratch_b
        }
        None => b,
    };
    matmul_into(&plan.product, a, b, out);
}

/// How a batched product walks its batch.
#[derive(Clone, Debug)]
enum Batching {
    /// Nothing to multiply (an empty result, or k = 0): the output is zeros.
    Zeros,
    /// One shared right operand: the batch folds into the rows of one GEMM.
    Folded,
    /// One GEMM per batch element, each operand read at its broadcast offset.
    PerElement {
        /// The broadcast batch shape.
        batch: Vec<usize>,
        /// Element strides of `a`'s matrices over `batch`.
        stride_a: Vec<usize>,
        /// Element strides of `b`'s matrices over `batch`.
        stride_b: Vec<usize>,
    },
}

/// A batched product's sizes, layouts and batch walk, decided from the shapes.
#[derive(Clone, Debug)]
pub(crate) struct MatmulPlan {
    m: usize,
    n: usize,
    k: usize,
    la: Layout,
    lb: Layout,
    /// Batch elements.
    nb: usize,
    batching: Batching,
    /// The result's shape.
    pub(crate) out_shape: Vec<usize>,
}

impl MatmulPlan {
    /// The plan of `op(a)·op(b)`, where a [`Layout::Transposed`] operand is
    /// used with its last two axes swapped (read through strides): `a` is
    /// `[..., m, k]` (or `[..., k, m]` when transposed), `b` `[..., k, n]` (or
    /// `[..., n, k]`) → `[batch..., m, n]`.
    ///
    /// Panics on invalid shapes (the runtime checks first).
    pub(crate) fn new(sa: &[usize], la: Layout, sb: &[usize], lb: Layout) -> MatmulPlan {
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
        let batching = if nb * m * n == 0 || k == 0 {
            Batching::Zeros
        } else if numel_of(bb) == 1 && numel_of(ba) == nb && la == Layout::Plain {
            Batching::Folded
        } else {
            let stride_a = broadcast_strides(ba, &batch)
                .iter()
                .map(|s| s * m * k)
                .collect();
            let stride_b = broadcast_strides(bb, &batch)
                .iter()
                .map(|s| s * k * n)
                .collect();
            Batching::PerElement {
                batch,
                stride_a,
                stride_b,
            }
        };
        MatmulPlan {
            m,
            n,
            k,
            la,
            lb,
            nb,
            batching,
            out_shape,
        }
    }

    /// The result's element count.
    pub(crate) fn out_len(&self) -> usize {
        self.nb * self.m * self.n
    }
}

/// The product `plan` describes of `xa` and `xb`, into `out`
/// ([`MatmulPlan::out_len`] elements, every one written).
pub(crate) fn matmul_into(plan: &MatmulPlan, xa: &[f32], xb: &[f32], out: &mut [f32]) {
    let &MatmulPlan {
        m,
        n,
        k,
        la,
        lb,
        nb,
        ..
    } = plan;
    let flops = m * n * k;
    let (stride_a, stride_b, batch) = match &plan.batching {
        Batching::Zeros => {
            out.fill(0.0);
            return;
        }
        Batching::Folded => {
            sgemm_t(nb * m, n, k, xa, la, xb, lb, out, nb * flops >= PAR_FLOPS);
            return;
        }
        Batching::PerElement {
            batch,
            stride_a,
            stride_b,
        } => (stride_a, stride_b, batch),
    };
    let one = |i: usize, c: &mut [f32], parallel: bool| {
        let pa = offset_of(i, batch, stride_a);
        let pb = offset_of(i, batch, stride_b);
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
}
