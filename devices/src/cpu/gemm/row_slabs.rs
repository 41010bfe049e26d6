//! A multi-threaded product split into one slab of C's rows per thread, each
//! slab an independent single-threaded product (its own packing of B, no
//! barrier between the blocks of `k`).
//!
//! The shared path ([`sgemm_with`]) packs each block of B once for all
//! threads and then waits for every thread at the end of each `KC` block. A
//! slab packs B again on each thread, which costs `k·n` copies per thread
//! against `m·n·k / threads` multiply-adds, so it is taken only when every
//! thread has at least [`MIN_ROWS`] rows. On a 2-core AVX-512 Xeon, best of 3
//! interleaved runs of `bench_gemm`, slabs were 1.04× faster over the 37 cases
//! of `bench/devices` (geometric mean; 1.10–1.17× on the squares 256–1024, at
//! most 4% slower on any case). Who computes which tile changes, never an
//! element's operations: same bits.

use super::microkernel::Microkernel;
use super::sgemm::{for_each_task, sgemm_with, GemmBlocking, MatRef, Product, SharedC};

/// Rows of C per thread from which a product is split into slabs.
pub(super) const MIN_ROWS: usize = 128;

/// Whether a product of `m` rows on `threads` threads is split into one slab
/// per thread.
pub(super) fn takes_slabs(m: usize, threads: usize) -> bool {
    threads >= 2 && m / threads >= MIN_ROWS
}

/// `C = A·B` as `slabs` single-threaded products of consecutive rows, each a
/// whole number of the kernel's tiles but the last, on rayon threads (every
/// slab non-empty: the caller checked [`takes_slabs`], so each has at least
/// [`MIN_ROWS`] rows, more than a tile).
pub(super) fn sgemm_row_slabs(
    kernel: Microkernel,
    blocking: GemmBlocking,
    slabs: usize,
    product: Product,
    c: &mut [f32],
) {
    let Product { m, n, a, .. } = product;
    let tiles = m.div_ceil(kernel.mr);
    let start = |t: usize| (t * tiles / slabs * kernel.mr).min(m);
    let c = SharedC(c[..m * n].as_mut_ptr());
    // Tasks over a range, not a collected list: a product allocates nothing.
    for_each_task(slabs, true, |t| {
        let (i0, i1) = (start(t), start(t + 1));
        let sub = Product {
            m: i1 - i0,
            a: MatRef {
                data: &a.data[i0 * a.rs..],
                ..a
            },
            ..product
        };
        // SAFETY: slab t alone writes rows i0..i1 of C (the slabs are
        // consecutive and disjoint), and C is not read meanwhile.
        let slab = unsafe { std::slice::from_raw_parts_mut(c.at(i0 * n), (i1 - i0) * n) };
        sgemm_with(kernel, blocking, 1, sub, slab);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_need_enough_rows_per_thread() {
        assert!(takes_slabs(1024, 2));
        assert!(takes_slabs(256, 2));
        assert!(!takes_slabs(255, 2), "fewer than MIN_ROWS rows a thread");
        assert!(!takes_slabs(4096, 1), "one thread");
        assert!(takes_slabs(400, 3));
    }
}
