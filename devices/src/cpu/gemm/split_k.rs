//! Products with a small output and a long `k` (the weight gradients
//! `Xᵀ·dY` of small models: `[128, 128]` from 2048 tokens), split over the
//! threads by blocks of `k` instead of by tiles of C.
//!
//! Such a product has few tiles per [`KC`] block, so splitting each block's
//! tiles over the threads hands work off twice per block (B's packing, then
//! the tiles) and leaves threads idle. Instead, each thread takes a run of
//! consecutive `KC` blocks: the first run is summed straight into C, as the
//! single-threaded product would; every block of the other runs is stored in
//! its own temporary matrix (its accumulators, step 2 of the numeric contract
//! in `sgemm.rs`). Then the temporaries are added to C in block order (step 3),
//! so every element sees exactly the operations of the serial order: the same
//! bits.

use super::microkernel::Microkernel;
use super::sgemm::{
    finish_all, for_each_task, sgemm_with, with_buffer, Buffers, Finish, GemmBlocking, MatRef,
    Product, SharedC, KC,
};
use crate::cpu::{for_chunks, row_chunk};
use std::cell::RefCell;

/// Output elements (`m·n`) up to which a product with two or more `KC` blocks
/// is split by blocks of `k` (`256 × 512`: about 33 M multiply-adds a block, where
/// the hand-offs per block and the idle threads still showed).
const MAX_OUT: usize = 256 * 512;

/// Floats of temporaries a split may use (2 MiB); longer products are split
/// by tiles instead.
const MAX_TEMP: usize = 512 * 1024;

thread_local! {
    /// Free buffers for the temporaries.
    static TEMP_BUFFERS: Buffers = const { RefCell::new(Vec::new()) };
}

/// Into how many runs of blocks a product of `m × n` outputs and inner size
/// `k` is split for `threads` threads (see [`run_start`]); `None` when it is
/// split by tiles instead (one thread, one block, a large output, a run more
/// than 1.25× its share of `k`, or temporaries over [`MAX_TEMP`]).
pub(super) fn split_runs(m: usize, n: usize, k: usize, threads: usize) -> Option<usize> {
    let blocks = k.div_ceil(KC);
    if threads < 2 || blocks < 2 || m * n > MAX_OUT {
        return None;
    }
    let runs = threads.min(blocks);
    // The last block may be short (`k` = 300: 256 + 44): a run of it would
    // leave its thread idle most of the time (300³ ran at 0.71 of tiles).
    let longest = (0..runs)
        .map(|t| (run_start(t + 1, blocks, runs) * KC).min(k) - run_start(t, blocks, runs) * KC)
        .max()
        .unwrap_or(k);
    let balanced = longest * runs * 4 <= k * 5;
    let temps_fit = (blocks - run_start(1, blocks, runs)) * m * n <= MAX_TEMP;
    (balanced && temps_fit).then_some(runs)
}

/// The first block of run `t` of `runs` over `blocks` blocks (run `t` is
/// blocks `run_start(t)..run_start(t + 1)`, all of them non-empty).
fn run_start(t: usize, blocks: usize, runs: usize) -> usize {
    t * blocks / runs
}

/// `C = A·B` split into `runs` runs of blocks of `k` (from [`split_runs`]),
/// each single-threaded with `kernel` and `blocking`, on rayon threads.
pub(super) fn sgemm_split_k(
    kernel: Microkernel,
    blocking: GemmBlocking,
    runs: usize,
    product: Product,
    c: &mut [f32],
    finish: Option<Finish>,
) {
    let Product { m, n, k, ldc, .. } = product;
    assert_eq!(ldc, n, "split_k: C's rows are whole rows");
    let out = m * n;
    let blocks = k.div_ceil(KC);
    let start = |t: usize| run_start(t, blocks, runs);
    let temps_len = (blocks - start(1)) * out;
    let c = &mut c[..out];
    with_buffer(&TEMP_BUFFERS, temps_len, |temps| {
        let temps = &mut temps[..temps_len];
        let (c_at, temps_at) = (SharedC(c.as_mut_ptr()), SharedC(temps.as_mut_ptr()));
        let part = |j0: usize, j1: usize| columns(product, j0 * KC, (j1 * KC).min(k));
        for_each_task(runs, true, |t| {
            let (first, end) = (start(t), start(t + 1));
            if t == 0 {
                // SAFETY: run 0 alone writes C, and C is not read meanwhile.
                let dst = unsafe { std::slice::from_raw_parts_mut(c_at.at(0), out) };
                sgemm_with(kernel, blocking, 1, part(0, end), dst, None);
            } else {
                let len = (end - first) * out;
                // SAFETY: run t alone writes the temporaries of its blocks,
                // `(first - start(1))·out..` for `len` floats, inside `temps`.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(temps_at.at((first - start(1)) * out), len)
                };
                for (j, d) in (first..end).zip(dst.chunks_exact_mut(out)) {
                    sgemm_with(kernel, blocking, 1, part(j, j + 1), d, None);
                }
            }
        });
        // Step 3 for the blocks of the later runs, in block order.
        let temps = &*temps;
        for_chunks(c, row_chunk(n), true, |at, chunk| {
            let len = chunk.len();
            for t in temps.chunks_exact(out) {
                for (x, &y) in chunk.iter_mut().zip(&t[at..at + len]) {
                    *x += y;
                }
            }
            // The chunk's rows are final now (whole rows: `row_chunk(n)`).
            let fin = finish.map(|f| f.shifted(at / n, 0));
            finish_all(fin, len / n, n, n, chunk);
        });
    });
}

/// The product of A's columns and B's rows `p0..p1` (the caller keeps `p0 <
/// p1 <= k`).
fn columns(product: Product, p0: usize, p1: usize) -> Product {
    let Product { m, n, a, b, .. } = product;
    Product {
        m,
        n,
        ldc: n,
        k: p1 - p0,
        a: MatRef {
            data: &a.data[p0 * a.cs..],
            ..a
        },
        b: MatRef {
            data: &b.data[p0 * b.rs..],
            ..b
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_outputs_with_several_blocks_are_split_into_non_empty_runs() {
        assert_eq!(split_runs(128, 128, 2048, 2), Some(2));
        assert_eq!(
            split_runs(128, 128, 2048, 16),
            Some(8),
            "one block a run at most"
        );
        // One thread, one block, a large output, temporaries over the cap.
        assert_eq!(split_runs(128, 128, 2048, 1), None);
        assert_eq!(split_runs(128, 128, KC, 2), None);
        assert_eq!(split_runs(512, 512, 2048, 2), None);
        assert_eq!(split_runs(256, 512, 64 * KC, 2), None);
        // Runs of unequal length: 256 + 44 is unbalanced, 256 + 344 is not.
        assert_eq!(split_runs(300, 300, 300, 2), None);
        assert_eq!(split_runs(128, 128, 600, 2), Some(2));
        for (blocks, runs) in [(2, 2), (3, 2), (8, 2), (7, 3), (9, 4)] {
            let starts: Vec<usize> = (0..=runs).map(|t| run_start(t, blocks, runs)).collect();
            assert_eq!((starts[0], starts[runs]), (0, blocks));
            assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
        }
    }
}
