//! Matrix multiplication: batched, broadcasting over leading axes, on the
//! deterministic packed GEMM of [`sgemm`].
//!
//! Engine: MLPL's own GEMM (`sgemm.rs`, micro-kernels in `microkernel.rs`),
//! because results must be bit-identical on every x86-64 CPU, thread count and
//! instruction-set level, which no GEMM library offers: libraries derive their
//! `k` blocking from cache sizes and sum in a different order in their AVX2,
//! AVX-512 and matrix-vector kernels. Speed against the `gemm` crate (the engine
//! before) is in `docs/benchmarks.md`
//! (`cargo run --release -p mlpl-devices --example bench_gemm -- --compare`).
//!
//! Products of fewer than [`SPLIT_FLOPS`] multiply-adds (matrix-vector
//! products: [`VECTOR_SPLIT_FLOPS`]) run single-threaded so they do not pay
//! for a thread hand-off (once the rayon workers are kept
//! polling for work, [`WarmWorkers`](crate::cpu::WarmWorkers), a product split
//! from 100³ up is faster: 2-core AMD EPYC Zen 5, best of 3 interleaved,
//! 100³ 1.4×, 128³ 1.5× at AVX-512 and 1.7× at AVX2; before them, 128³ was
//! faster on one thread than on two). A batch of small products is spread
//! over rayon threads one product per task instead, from [`PAR_FLOPS`] in all.
//!
//! Memory: the GEMM packs into buffers each thread keeps (see `sgemm.rs`);
//! everything else here is planned from the shapes ([`MatmulPlan`]) and runs in
//! the caller's memory.

mod microkernel;
mod sgemm;
mod slabs;
mod split_k;
mod vector;

pub(crate) use sgemm::warm_thread;
pub use sgemm::{gemm_blocking, gemm_tile, set_gemm_blocking, GemmBlocking, KC};

use super::pool;
use crate::shape::{broadcast_shapes, broadcast_strides, offset_of};
use crate::tensor::{numel_of, Tensor};
use rayon::prelude::*;
pub(crate) use sgemm::RowFinish;

use sgemm::{sgemm, MatRef};

/// Multiply-adds in all from which a batch of products is spread over threads.
pub(crate) const PAR_FLOPS: usize = 96 * 96 * 96;

/// Multiply-adds (m·n·k) from which one product is split across threads (see
/// the module's documentation).
const SPLIT_FLOPS: usize = 100 * 100 * 100;

/// Elements of the matrix from which a product of one column or of up to
/// [`FEW_ROWS`](vector::FEW_ROWS) rows (matrix-vector products, see
/// `vector.rs`) is split across threads: it reads each element of its
/// matrix once, so the threads' caches and memory bandwidth count from a
/// smaller size (512 KiB of matrix).
const VECTOR_SPLIT_FLOPS: usize = 128 * 1024;

/// Whether a product of `m × n` outputs and inner size `k` is split across
/// threads ([`SPLIT_FLOPS`], [`VECTOR_SPLIT_FLOPS`]).
fn splits(m: usize, n: usize, k: usize) -> bool {
    let matrix = match (m, n) {
        (_, 1) => m * k,
        (..=vector::FEW_ROWS, _) => n * k,
        _ => 0,
    };
    m * n * k >= SPLIT_FLOPS || matrix >= VECTOR_SPLIT_FLOPS
}

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
    fn strides(self, rows: usize, cols: usize) -> (usize, usize) {
        match self {
            Layout::Plain => (cols, 1),
            Layout::Transposed => (1, rows),
        }
    }
}

/// C = A·B for A `[m, k]` and B `[k, n]`, each stored as its [`Layout`] says,
/// into row-major C `[m, n]` (overwritten). `parallel` lets the GEMM use rayon
/// threads; `finish` runs on C's rows as they become final (see [`RowFinish`]).
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
    finish: Option<RowFinish>,
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let (rs, cs) = la.strides(m, k);
    let a = MatRef { data: a, rs, cs };
    let (rs, cs) = lb.strides(k, n);
    let b = MatRef { data: b, rs, cs };
    sgemm(m, n, k, a, b, c, parallel, finish);
}

/// Batched, broadcasting matmul: `a` `[..., m, k]`, `b` `[..., k, n]` (both rank
/// ≥ 2) → `[batch..., m, n]`. Broadcast batch operands are read through strides,
/// never copied.
///
/// Panics on invalid shapes (the runtime checks first).
pub(crate) fn matmul(a: &Tensor, b: &Tensor) -> Tensor {
    matmul_op(a, false, b, false)
}

/// [`matmul`] of `a` and `b`, each with its last two axes swapped first when
/// its flag is set. A swapped operand is read through strides, never copied:
/// the GEMM sums in the same order for every layout, so the result is bit for
/// bit that of permuting and multiplying.
pub(crate) fn matmul_op(a: &Tensor, transpose_a: bool, b: &Tensor, transpose_b: bool) -> Tensor {
    let plan = MatmulPlan::for_op(a.shape(), transpose_a, b.shape(), transpose_b);
    let mut out = pool::scratch(plan.out_len());
    matmul_into(&plan, a.host(), b.host(), &mut out);
    out.into_tensor(plan.out_shape)
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

    /// The plan of `matmul_op(a, transpose_a, b, transpose_b)` for operands of
    /// shapes `sa` and `sb` (panics on invalid shapes).
    pub(crate) fn for_op(
        sa: &[usize],
        transpose_a: bool,
        sb: &[usize],
        transpose_b: bool,
    ) -> MatmulPlan {
        let layout = |t: bool| if t { Layout::Transposed } else { Layout::Plain };
        MatmulPlan::new(sa, layout(transpose_a), sb, layout(transpose_b))
    }

    /// Columns of the result (of each product of a batch).
    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// Whether the plan runs as one GEMM (a single product, or a batch folded
    /// into one), so that its rows become final inside that GEMM.
    pub(crate) fn is_one_product(&self) -> bool {
        match self.batching {
            Batching::Folded => true,
            Batching::PerElement { .. } => self.nb == 1,
            Batching::Zeros => false,
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
    matmul_into_then(plan, xa, xb, out, None)
}

/// [`matmul_into`], then `finish` on every row of the result (`[.., n]`
/// rows, numbered through the batch axes), as the rows become final: inside
/// the GEMM for a product of one matrix (or a batch folded into one), after
/// each product of a batch otherwise.
pub(crate) fn matmul_into_then(
    plan: &MatmulPlan,
    xa: &[f32],
    xb: &[f32],
    out: &mut [f32],
    finish: Option<RowFinish>,
) {
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
            if let Some(f) = finish {
                for (r, row) in out.chunks_mut(n.max(1)).enumerate() {
                    f(r, 0, row);
                }
            }
            return;
        }
        Batching::Folded => {
            let parallel = splits(nb * m, n, k);
            sgemm_t(nb * m, n, k, xa, la, xb, lb, out, parallel, finish);
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
        // Rows numbered through the batch: product i's start at i·m.
        let shifted = |r: usize, col: usize, row: &mut [f32]| {
            if let Some(f) = finish {
                f(i * m + r, col, row)
            }
        };
        let (a, b) = (&xa[pa..pa + m * k], &xb[pb..pb + k * n]);
        let fin: Option<RowFinish> = finish.is_some().then_some(&shifted);
        sgemm_t(m, n, k, a, la, b, lb, c, parallel, fin);
    };
    if nb > 1 && !splits(m, n, k) && nb * flops >= PAR_FLOPS {
        // Small products, many of them: one per task.
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| one(i, c, false));
    } else {
        for (i, c) in out.chunks_mut(m * n).enumerate() {
            one(i, c, splits(m, n, k));
        }
    }
}
