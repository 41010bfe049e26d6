//! Products with one row of C (`x·W`, a row vector times a matrix: every
//! projection of a token decoded with a key/value cache), up to [`FEW_ROWS`]
//! rows (a batch of decoded tokens), or one column (`A·x`), computed as
//! matrix-vector products rather than in tiles.
//!
//! A tile of `MR` rows computes one live row and `MR − 1` of padding (1 in 8
//! multiply-adds useful in the 8-row tiles), and packs all of B for it: a
//! `[1, 4096]·[4096, 4096]` product ran at a third of NumPy's speed. Here
//! each element of C still takes exactly the numeric contract's operations
//! (see `sgemm.rs`): one accumulator per element and [`KC`] block, starting
//! at +0.0, one fused multiply-add per `p` in increasing `p`, stored for the
//! first block and added to C for the next ones. Only the grouping differs: a
//! SIMD lane holds one column `j`, and B is read once, in the order it is
//! stored:
//!
//! * B with contiguous rows (`x·W`, `W` stored `[k, n]`): each row's piece is
//!   multiplied into a chunk of accumulators that stays in the L1 cache
//!   ([`CHUNK`] accumulators, for each row of A), four rows at a time: W is
//!   read once for all of A's rows;
//! * B with contiguous columns (`x·Wᵀ`, `W` stored `[n, k]`): a group of
//!   one register's lanes of columns (16 at AVX-512, 8 at AVX2) is read
//!   `lanes` steps of `k` at a time, the square block transposed in registers
//!   and multiplied into each row of A, the group's accumulators of a row in
//!   one register; each element of B is read once, along its stored rows.
//!
//! `A·x` (one column of C) is the one-row product `xᵀ·Aᵀ`: the same
//! multiplications (the two factors of a fused multiply-add commute
//! exactly), A read through swapped strides.

use super::sgemm::{
    finish_all, for_each_task, with_buffer, Buffers, Finish, MatRef, Product, SharedC, KC,
};
use super::split_k::split_runs;
use crate::cpu::isa::{vectorised, Isa};
use crate::math::fma_f32;
use std::cell::RefCell;

/// Columns of C whose accumulators one pass over B's rows updates (16 KiB,
/// in the L1 cache while the rows stream past: a row of 4096 floats in one
/// pass).
const CHUNK: usize = 4096;

/// Rows of A up to which a product is computed here when B has a contiguous
/// dimension (each element of W then does that many multiply-adds as it is
/// read; from 5 rows on, the tiles' padding is at most 3 rows in 8).
pub(super) const FEW_ROWS: usize = 4;

/// Columns a task of a row-major B covers at least (a cache line).
const LINE: usize = 16;

thread_local! {
    /// Free buffers for the vector when it is strided.
    static VECTOR_BUFFERS: Buffers = const { RefCell::new(Vec::new()) };
}

/// Computes `product` into `c` on up to `threads` threads, with the kernels
/// of `isa` (which the CPU supports), and returns true when it has one row,
/// or one column stored contiguously (`ldc` 1), and B (A for a column) has a
/// contiguous dimension, or up to [`FEW_ROWS`] rows and such a B;
/// returns false, touching nothing, otherwise, and when the product is
/// better split by runs of `KC` blocks (see below).
pub(super) fn sgemm_vector(
    isa: Isa,
    threads: usize,
    product: Product,
    c: &mut [f32],
    finish: Option<Finish>,
) -> bool {
    let Product { m, n, k, a, b, ldc } = product;
    // The row vectors x (`[rows, k]`), the matrix W (`[k, len]`), the
    // length of C's rows, and whether C is one column (`xᵀ·Aᵀ`).
    let (x, w, len, rows, column) = match (m, n) {
        (1, _) => (a, b, n, 1, false),
        (2..=FEW_ROWS, _) if b.cs == 1 || b.rs == 1 => (a, b, n, m, false),
        (_, 1) if ldc == 1 => (b.t(), a.t(), m, 1, true),
        _ => return false,
    };
    let row_major = w.cs == 1;
    if !row_major && w.rs != 1 {
        return false;
    }
    // A row-major W with runs of `KC` blocks of about equal length for the
    // threads is split by them (`split_k.rs`, whose runs come back here on
    // one thread each): each thread then streams its own rows, one
    // contiguous piece of W (`[1, 1024]·[1024, 4096]`: 1.2× the speed of
    // splitting the columns).
    if row_major && split_runs(m, n, k, threads).is_some() {
        return false;
    }
    // The rows of x one after the other, where they are or copied.
    let in_place = x.cs == 1 && (rows == 1 || x.rs == k);
    with_buffer(
        &VECTOR_BUFFERS,
        if in_place { 0 } else { rows * k },
        |copy| {
            let x: &[f32] = if in_place {
                &x.data[..rows * k]
            } else {
                for (e, v) in copy[..rows * k].iter_mut().enumerate() {
                    *v = x.data[e / k * x.rs + e % k * x.cs];
                }
                &copy[..rows * k]
            };
            let unit = if row_major { LINE } else { MAX_LANES };
            let units = len.div_ceil(unit);
            let tasks = threads.clamp(1, units);
            let start = |t: usize| (t * units / tasks * unit).min(len);
            let shared = SharedC(c.as_mut_ptr());
            for_each_task(tasks, tasks > 1, |t| {
                let (j0, j1) = (start(t), start(t + 1));
                let mut outs: [&mut [f32]; FEW_ROWS] = Default::default();
                for (r, out) in outs[..rows].iter_mut().enumerate() {
                    // SAFETY: the tasks' column ranges are disjoint, inside each
                    // of C's rows (`len` contiguous floats, `ldc` apart), and C
                    // is not read meanwhile.
                    *out =
                        unsafe { std::slice::from_raw_parts_mut(shared.at(r * ldc + j0), j1 - j0) };
                }
                let outs = &mut outs[..rows];
                if row_major {
                    from_rows(x, w, j0, outs);
                } else {
                    from_columns(isa, x, w, j0, outs);
                }
                if !column {
                    for (r, out) in outs.iter_mut().enumerate() {
                        finish_all(finish.map(|f| f.shifted(r, j0)), 1, j1 - j0, j1 - j0, out);
                    }
                }
            });
        },
    );
    if column {
        finish_all(finish, m, 1, 1, &mut c[..m]);
    }
    true
}

/// `outs[r][j] = (x·W)[r, j0 + j]` for a `W` with contiguous rows
/// (`w.cs == 1`) and the `outs.len()` rows of `x` (1 to [`FEW_ROWS`]), one
/// after the other.
fn from_rows(x: &[f32], w: MatRef, j0: usize, outs: &mut [&mut [f32]]) {
    match outs.len() {
        1 => rows_of::<1>(x, w, j0, outs),
        2 => rows_of::<2>(x, w, j0, outs),
        3 => rows_of::<3>(x, w, j0, outs),
        _ => rows_of::<4>(x, w, j0, outs),
    }
}

/// [`from_rows`] for `M` rows, a chunk of `CHUNK / M` columns of each at a
/// time (the accumulators of every row in the L1 cache together).
fn rows_of<const M: usize>(x: &[f32], w: MatRef, j0: usize, outs: &mut [&mut [f32]]) {
    let k = x.len() / M;
    let (width, chunk) = (outs[0].len(), CHUNK / M);
    let mut acc = Vec::new();
    for c0 in (0..width).step_by(chunk) {
        let cols = c0..(c0 + chunk).min(width);
        let jc = j0 + c0;
        for (blk, p0) in (0..k).step_by(KC).enumerate() {
            let steps = p0..(p0 + KC).min(k);
            let mut outs = outs.iter_mut();
            let mut dst: [&mut [f32]; M] =
                std::array::from_fn(|_| &mut outs.next().expect("M rows")[cols.clone()]);
            if blk == 0 {
                rows_into(x, k, w, jc, steps, &mut dst);
            } else {
                acc.resize(M * cols.len(), 0.0);
                let mut parts = acc.chunks_exact_mut(cols.len());
                let mut sums: [&mut [f32]; M] =
                    std::array::from_fn(|_| parts.next().expect("M parts"));
                rows_into(x, k, w, jc, steps, &mut sums);
                for (o, a) in dst.iter_mut().zip(&sums) {
                    add_into(o, a);
                }
            }
        }
    }
}

/// `acc[r][j] = Σ_p x[r·k + p]·W[p, jc + j]` over `steps`, from +0.0 in
/// increasing `p`, for each row `r` of `x` (rows of `k`): each piece of W's
/// rows read from memory once for all of them (then from the L1 cache).
fn rows_into<const M: usize>(
    x: &[f32],
    k: usize,
    w: MatRef,
    jc: usize,
    steps: std::ops::Range<usize>,
    acc: &mut [&mut [f32]; M],
) {
    let len = acc[0].len();
    let row = |p: usize| &w.data[p * w.rs + jc..][..len];
    for a in acc.iter_mut() {
        a.fill(0.0);
    }
    vectorised(
        #[inline(always)]
        || {
            let mut p = steps.start;
            // Four rows per pass over the accumulators: still one
            // multiply-add after the other per element, in increasing `p`.
            while p + 4 <= steps.end {
                let rows = || {
                    row(p)
                        .iter()
                        .zip(row(p + 1))
                        .zip(row(p + 2))
                        .zip(row(p + 3))
                };
                let xs = |r: usize| -> [f32; 4] {
                    let at = r * k + p;
                    [x[at], x[at + 1], x[at + 2], x[at + 3]]
                };
                // Two rows of x per pass where there are two: each loaded
                // element of W then does two multiply-adds.
                let (pairs, last) = acc.split_at_mut(M / 2 * 2);
                for (i, pair) in pairs.chunks_exact_mut(2).enumerate() {
                    let (xa, xb) = (xs(2 * i), xs(2 * i + 1));
                    let [a, b] = pair else { unreachable!() };
                    for ((va, vb), (((&r0, &r1), &r2), &r3)) in
                        a.iter_mut().zip(b.iter_mut()).zip(rows())
                    {
                        let s = fma_f32(xa[0], r0, *va);
                        let t = fma_f32(xb[0], r0, *vb);
                        let s = fma_f32(xa[1], r1, s);
                        let t = fma_f32(xb[1], r1, t);
                        let s = fma_f32(xa[2], r2, s);
                        let t = fma_f32(xb[2], r2, t);
                        *va = fma_f32(xa[3], r3, s);
                        *vb = fma_f32(xb[3], r3, t);
                    }
                }
                for a in last {
                    let xa = xs(M - 1);
                    for (v, (((&r0, &r1), &r2), &r3)) in a.iter_mut().zip(rows()) {
                        let s = fma_f32(xa[0], r0, *v);
                        let s = fma_f32(xa[1], r1, s);
                        let s = fma_f32(xa[2], r2, s);
                        *v = fma_f32(xa[3], r3, s);
                    }
                }
                p += 4;
            }
            for q in p..steps.end {
                for (r, a) in acc.iter_mut().enumerate() {
                    let xq = x[r * k + q];
                    for (v, &wv) in a.iter_mut().zip(row(q)) {
                        *v = fma_f32(xq, wv, *v);
                    }
                }
            }
        },
    );
}

/// `outs[r][j] = (x·W)[r, j0 + j]` for a `W` with contiguous columns
/// (`w.rs == 1`) and the `outs.len()` rows of `x` (1 to [`FEW_ROWS`]), one
/// after the other: groups of the level's lanes of columns in
/// [`ColumnKernel`]s, each transposed block of W multiplied into every row's
/// accumulators, the last columns one chain each ([`columns_in_order`]).
fn from_columns(isa: Isa, x: &[f32], w: MatRef, j0: usize, outs: &mut [&mut [f32]]) {
    let rows = outs.len();
    let k = x.len() / rows;
    let kernel = ColumnKernel::of(isa);
    let lanes = kernel.map_or(1, |kr| kr.lanes);
    let mut acc = [[0.0f32; MAX_LANES]; FEW_ROWS];
    let width = outs[0].len();
    for g0 in (0..width).step_by(lanes) {
        let jg = j0 + g0;
        let g = lanes.min(width - g0);
        for (blk, p0) in (0..k).step_by(KC).enumerate() {
            let steps = p0..(p0 + KC).min(k);
            let at = jg * w.cs + p0;
            match kernel {
                Some(kr) if g == kr.lanes => {
                    // Column `jg + i`'s steps `p0..` at `at + i·cs`, inside W.
                    assert!(w.data.len() > at + (g - 1) * w.cs + steps.len() - 1);
                    let xs = &x[p0..];
                    // SAFETY: the assert keeps every element the kernel
                    // reads inside W, `xs` holds `rows` rows `k` apart of
                    // `steps.len()` steps each, `acc` `rows` rows of
                    // `MAX_LANES`; the caller checked the CPU's support.
                    let done = unsafe {
                        (kr.runs[rows - 1])(
                            xs,
                            k,
                            steps.len(),
                            w.data[at..].as_ptr(),
                            w.cs,
                            acc.as_mut_ptr().cast(),
                        )
                    };
                    for (r, a) in acc[..rows].iter_mut().enumerate() {
                        let xr = &x[r * k..][steps.start + done..steps.end];
                        steps_in_order(xr, &w.data[at + done..], w.cs, &mut a[..g]);
                    }
                }
                _ => {
                    for (r, a) in acc[..rows].iter_mut().enumerate() {
                        let xr = &x[r * k..][steps.clone()];
                        columns_in_order(xr, &w.data[at..], w.cs, &mut a[..g]);
                    }
                }
            }
            for (o, a) in outs.iter_mut().zip(&acc) {
                let o = &mut o[g0..g0 + g];
                if blk == 0 {
                    o.copy_from_slice(&a[..g]);
                } else {
                    add_into(o, &a[..g]);
                }
            }
        }
    }
}

/// `acc[i] = Σ_p x[p]·w[i·cs + p]` from +0.0, in increasing `p`, for each
/// lane `i` (the columns past the last whole group, and every column at the
/// scalar level).
fn columns_in_order(x: &[f32], w: &[f32], cs: usize, acc: &mut [f32]) {
    acc.fill(0.0);
    steps_in_order(x, w, cs, acc);
}

/// `acc[i] += x[p]·w[i·cs + p]`, one fused multiply-add per `p` in
/// increasing `p`, for each lane `i` (also the steps a [`ColumnsFn`] left).
fn steps_in_order(x: &[f32], w: &[f32], cs: usize, acc: &mut [f32]) {
    for (p, &xp) in x.iter().enumerate() {
        for (i, v) in acc.iter_mut().enumerate() {
            *v = fma_f32(xp, w[i * cs + p], *v);
        }
    }
}

/// The most lanes a [`ColumnKernel`] has.
const MAX_LANES: usize = 16;

/// `run(x, xs, steps, w, cs, acc)`: for each of the kernel's `M` rows `r`
/// of x (`x[r·xs..]`) and lanes `i`, `acc[r·MAX_LANES + i] = Σ_p x[r·xs +
/// p]·w[i·cs + p]` over `p < steps`, from +0.0 in increasing `p` (one fused
/// multiply-add each), over the whole blocks of `lanes` steps; returns how
/// many steps that is (the rest is left to [`steps_in_order`]).
///
/// # Safety
/// Every `w[i·cs + p]` (`i` < lanes, `p < steps`) is readable, every
/// `x[r·xs + p]` (`r < M`, `p < steps`) is in `x`, `acc` holds `M` rows of
/// [`MAX_LANES`], and the CPU supports the kernel's level.
type ColumnsFn = unsafe fn(&[f32], usize, usize, *const f32, usize, *mut f32) -> usize;

/// The kernels of [`ColumnsFn`] for one level, for 1 to [`FEW_ROWS`] rows:
/// they read `lanes` columns of W, `lanes` steps of `k` at a time, and
/// transpose them in registers.
#[derive(Clone, Copy)]
struct ColumnKernel {
    lanes: usize,
    runs: [ColumnsFn; FEW_ROWS],
}

impl ColumnKernel {
    /// The kernel of `isa` (none at the scalar level).
    fn of(isa: Isa) -> Option<ColumnKernel> {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Some(ColumnKernel {
                lanes: 16,
                runs: [
                    columns_avx512::<1>,
                    columns_avx512::<2>,
                    columns_avx512::<3>,
                    columns_avx512::<4>,
                ],
            }),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Some(ColumnKernel {
                lanes: 8,
                runs: [
                    columns_avx2::<1>,
                    columns_avx2::<2>,
                    columns_avx2::<3>,
                    columns_avx2::<4>,
                ],
            }),
            _ => None,
        }
    }
}

/// A [`ColumnsFn`] for one level: `lanes × lanes` blocks of W transposed in
/// registers (`transposed`, from `transpose.rs`) and multiplied in step by
/// step, each row's accumulators in one register.
macro_rules! column_kernel {
    (
        $name:ident,
        feature: $feature:literal,
        lanes: $lanes:literal,
        transposed: $transposed:ident,
        zero: $zero:ident,
        load: $load:ident,
        splat: $splat:ident,
        fmadd: $fmadd:ident,
        store: $store:ident $(,)?
    ) => {
        /// See [`column_kernel`].
        ///
        /// # Safety
        /// As [`ColumnsFn`].
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $name<const M: usize>(
            x: &[f32],
            xs: usize,
            steps: usize,
            w: *const f32,
            cs: usize,
            acc: *mut f32,
        ) -> usize {
            use crate::cpu::transpose::$transposed;
            use std::arch::x86_64::*;
            let whole = steps / $lanes * $lanes;
            let mut sums = [$zero(); M];
            for p in (0..whole).step_by($lanes) {
                let rows = std::array::from_fn(|i| $load(w.add(i * cs + p)));
                for (q, step) in $transposed(rows).iter().enumerate() {
                    for (r, sum) in sums.iter_mut().enumerate() {
                        *sum = $fmadd($splat(x[r * xs + p + q]), *step, *sum);
                    }
                }
            }
            for (r, sum) in sums.iter().enumerate() {
                $store(acc.add(r * MAX_LANES), *sum);
            }
            whole
        }
    };
}

column_kernel!(
    columns_avx512,
    feature: "avx512f,fma",
    lanes: 16,
    transposed: transposed_16x16,
    zero: _mm512_setzero_ps,
    load: _mm512_loadu_ps,
    splat: _mm512_set1_ps,
    fmadd: _mm512_fmadd_ps,
    store: _mm512_storeu_ps,
);

column_kernel!(
    columns_avx2,
    feature: "avx2,fma",
    lanes: 8,
    transposed: transposed_8x8,
    zero: _mm256_setzero_ps,
    load: _mm256_loadu_ps,
    splat: _mm256_set1_ps,
    fmadd: _mm256_fmadd_ps,
    store: _mm256_storeu_ps,
);

/// `c[j] = c[j] + acc[j]` (step 3 of the contract for a later block).
fn add_into(c: &mut [f32], acc: &[f32]) {
    vectorised(
        #[inline(always)]
        || {
            for (v, &a) in c.iter_mut().zip(acc) {
                *v += a;
            }
        },
    );
}
