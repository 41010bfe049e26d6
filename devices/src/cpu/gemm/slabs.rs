//! A multi-threaded product split into one slab of C per thread, of rows or
//! of columns, each slab an independent single-threaded product (its own
//! packing, no barrier between the blocks of `k`).
//!
//! The shared path ([`sgemm_with`]) packs each block of B once for all
//! threads and then waits for every thread at the end of each `KC` block.
//! Slabs pack again on each thread what their slab shares with the others:
//! a slab of rows packs all of B (`k·n` floats) and its own rows of A; a slab
//! of columns packs its own columns of B and all of A. [`split`] takes
//! columns when A is copied (packed, or its rows padded) and they copy fewer
//! floats per thread (weight gradients `Xᵀ·dY`), else rows, and slabs at all
//! only when every thread gets at least [`MIN_ROWS`] rows or [`MIN_COLS`]
//! columns. On a 2-core AVX-512 Xeon, best of 3 interleaved runs
//! of `bench_gemm`, row slabs were 1.04× faster than the shared path over the
//! 37 cases of `bench/devices` (geometric mean; 1.10–1.17× on the squares
//! 256–1024, at most 4% slower on any case). Who computes which tile changes,
//! never an element's operations: same bits.

use super::microkernel::Microkernel;
use super::sgemm::{for_each_task, sgemm_with, Finish, GemmBlocking, MatRef, Product, SharedC};

/// Rows of C per thread from which a product may be split into row slabs.
pub(super) const MIN_ROWS: usize = 128;

/// Columns of C per thread from which a product may be split into column slabs.
pub(super) const MIN_COLS: usize = 128;

/// How a product is split into slabs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Split {
    /// Consecutive rows of C per thread.
    Rows,
    /// Consecutive columns of C per thread.
    Columns,
}

/// How `product` is split on `threads` threads (`None`: not into slabs);
/// `a_copied` when the product copies A (into panels or padded rows) rather
/// than reading it in place.
pub(super) fn split(product: Product, a_copied: bool, threads: usize) -> Option<Split> {
    let Product { m, n, k, .. } = product;
    if threads < 2 {
        return None;
    }
    let (rows, cols) = (m / threads >= MIN_ROWS, n / threads >= MIN_COLS);
    // Floats each thread copies (B's panels, A's when it is copied).
    let a_floats = |rows: usize| if a_copied { rows * k } else { 0 };
    let by_rows = k * n + a_floats(m / threads);
    let by_cols = k * n / threads + a_floats(m);
    // Columns only where they save copies of A's rows: with A read in place,
    // each column slab reads all of A, and narrow outputs split unevenly
    // (`[2048, 280]` from 128: 0.76× the speed of row slabs).
    let columns = cols && a_copied && by_cols < by_rows;
    match (rows, columns) {
        (_, true) => Some(Split::Columns),
        (true, false) => Some(Split::Rows),
        (false, false) => None,
    }
}

/// `C = A·B` as `slabs` single-threaded products of consecutive rows or
/// columns of C (`split`, from [`split`], which checked that each slab has
/// at least [`MIN_ROWS`] rows or [`MIN_COLS`] columns, more than a tile): each
/// a whole number of the kernel's tiles but the last, on rayon threads.
pub(super) fn sgemm_slabs(
    kernel: Microkernel,
    blocking: GemmBlocking,
    slabs: usize,
    split: Split,
    product: Product,
    c: &mut [f32],
    finish: Option<Finish>,
) {
    let Product {
        m, n, a, b, ldc, ..
    } = product;
    let (len, tile) = match split {
        Split::Rows => (m, kernel.mr),
        Split::Columns => (n, kernel.nr),
    };
    let tiles = len.div_ceil(tile);
    let start = |t: usize| (t * tiles / slabs * tile).min(len);
    let c = SharedC(c[..(m - 1) * ldc + n].as_mut_ptr());
    // Tasks over a range, not a collected list: a product allocates nothing.
    for_each_task(slabs, true, |t| {
        let (s0, s1) = (start(t), start(t + 1));
        let (sub, offset, c_len, (r0, c0)) = match split {
            Split::Rows => {
                let a = MatRef {
                    data: &a.data[s0 * a.rs..],
                    ..a
                };
                let sub = Product {
                    m: s1 - s0,
                    a,
                    ..product
                };
                (sub, s0 * ldc, (s1 - s0 - 1) * ldc + n, (s0, 0))
            }
            Split::Columns => {
                let b = MatRef {
                    data: &b.data[s0 * b.cs..],
                    ..b
                };
                let sub = Product {
                    n: s1 - s0,
                    b,
                    ..product
                };
                (sub, s0, (m - 1) * ldc + s1 - s0, (0, s0))
            }
        };
        // SAFETY: slab t alone writes its rows (or columns) of C: the slabs
        // are consecutive and disjoint, and C is not read meanwhile. The
        // slice spans other slabs' elements between its rows (column slabs),
        // which the slab's product never touches (it writes only columns
        // `0..n` of each `ldc`-float row).
        let slab = unsafe { std::slice::from_raw_parts_mut(c.at(offset), c_len) };
        sgemm_with(
            kernel,
            blocking,
            1,
            sub,
            slab,
            finish.map(|f| f.shifted(r0, c0)),
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(m: usize, n: usize, k: usize) -> Product<'static> {
        static DATA: [f32; 1] = [0.0];
        let r = MatRef {
            data: &DATA,
            rs: 1,
            cs: 1,
        };
        Product {
            m,
            n,
            k,
            a: r,
            b: r,
            ldc: n,
        }
    }

    #[test]
    fn slabs_need_enough_rows_or_columns_per_thread() {
        assert_eq!(
            split(product(1024, 1024, 1024), false, 2),
            Some(Split::Rows)
        );
        assert_eq!(split(product(1024, 1024, 1024), true, 2), Some(Split::Rows));
        assert_eq!(split(product(256, 64, 256), false, 2), Some(Split::Rows));
        assert_eq!(split(product(255, 64, 256), false, 2), None);
        assert_eq!(
            split(product(4096, 4096, 256), false, 1),
            None,
            "one thread"
        );
        assert_eq!(split(product(400, 64, 64), true, 3), Some(Split::Rows));
    }

    #[test]
    fn the_split_copies_the_fewer_floats() {
        // A weight gradient Xᵀ·dY: A = Xᵀ is packed. Rows: each thread packs
        // all of dY (2048·1024) and half of Xᵀ; columns: half of dY and all
        // of Xᵀ (256·2048): fewer.
        assert_eq!(
            split(product(256, 1024, 2048), true, 2),
            Some(Split::Columns)
        );
        // dX = dY·Wᵀ with a tall dY copied by rows: columns would copy all of
        // dY on each thread.
        assert_eq!(split(product(2048, 256, 1024), true, 2), Some(Split::Rows));
        // Few rows, many columns: columns when A is copied, else the
        // shared path.
        assert_eq!(split(product(64, 1024, 256), true, 2), Some(Split::Columns));
        assert_eq!(split(product(64, 1024, 256), false, 2), None);
    }
}
