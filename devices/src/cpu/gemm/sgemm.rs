//! The f32 GEMM: `C = A·B` with one order of operations on every CPU.
//!
//! # Numeric contract
//! Every element `C[i, j]` is computed as follows, whatever the CPU, its
//! instruction-set level ([`Isa`](crate::cpu::Isa)), the thread count or the blocking sizes:
//!
//! 1. `k` is cut into blocks of [`KC`] (= 256) in order, the last one shorter;
//! 2. in each block, one accumulator starts at +0.0 and takes one fused
//!    multiply-add `acc = A[i, p]·B[p, j] + acc` per `p`, in increasing `p`;
//! 3. the first block's accumulator is stored in C; each later one is added,
//!    `C = C + acc`, in block order.
//!
//! `KC` is a constant of the contract, not a tuning knob: it is never derived
//! from cache sizes. What may vary (and only changes speed) is how rows and
//! columns are grouped: the micro-kernel's tile (`MR × NR`, per level), the
//! packed blocks ([`GemmBlocking`], overridable) and which thread computes
//! which tile. Each element's operations are the same in all of them.
//!
//! # Algorithm
//! The usual packed GEMM (Goto / BLIS): for each block of `nc` columns and each
//! `KC` block of `k`, B's block is packed into `NR`-wide panels once; tiles of
//! (an `mc`-row block of A, a group of B panels) are tasks, spread over rayon
//! threads when `parallel` is set; each task packs its A block into `MR`-row
//! panels and runs the micro-kernel over every tile. Operands are read through
//! row and column strides, so a transposed operand is never copied first.
//!
//! Five variants change only who computes what, never an element's
//! operations: a product of one row of C, or one column, or of up to four
//! rows, B with a contiguous dimension, is a matrix-vector product, one SIMD
//! lane per element of C (`vector.rs`); a
//! row-major A is read in place, or copied row by row when its
//! rows would alias in the L1 cache, not transposed into panels, unless the
//! product is wide enough to amortise the transposition ([`a_tiles`]); a single-threaded product that is small, or has a small output and a
//! row-major B, skips packing ([`sgemm_direct`]); a multi-threaded product with a
//! small output and several `KC` blocks of about equal length is split by runs
//! of blocks instead of by tiles, the later runs' blocks kept apart and added in block order
//! (`split_k.rs`); one with enough rows or columns for every thread is split
//! into one slab of rows or of columns per thread, each a single-threaded
//! product (`slabs.rs`).
//!
//! # Memory
//! Packing buffers are kept per thread (up to [`KEPT`] of each kind) and sized
//! for the whole block, so after a thread's first product of the current
//! blocking, products allocate nothing; [`warm_thread`] makes them up front.

use super::microkernel::{Microkernel, Operands};
use super::slabs;
use super::split_k::{sgemm_split_k, split_runs};
use super::vector;
use crate::cpu::for_chunks;
use crate::cpu::isa::{isa, vectorised};
use crate::cpu::transpose::transpose;
use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The length of the blocks of `k` that are summed separately and then added
/// in order (step 1 of the numeric contract). Changing it changes results.
pub const KC: usize = 256;

/// How many rows of A and columns of B a product packs at once. Results do not
/// depend on it; only speed (and the packing buffers' size) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmBlocking {
    /// Rows of A per packed block (rounded up to the micro-kernel's rows).
    pub mc: usize,
    /// Columns of B per packed block (rounded up to the micro-kernel's columns).
    pub nc: usize,
}

impl GemmBlocking {
    /// The default: 144 × 256 floats of A (144 KiB, inside every x86-64 L2)
    /// and 2048 × 256 of B (2 MiB).
    pub const DEFAULT: GemmBlocking = GemmBlocking { mc: 144, nc: 2048 };

    /// Parses `MC,NC` (both positive), as `MLPL_GEMM_BLOCKING` holds it.
    pub fn parse(text: &str) -> Option<GemmBlocking> {
        let (mc, nc) = text.split_once(',')?;
        let (mc, nc) = (mc.trim().parse().ok()?, nc.trim().parse().ok()?);
        (mc > 0 && nc > 0).then_some(GemmBlocking { mc, nc })
    }

    /// Rounded up to whole tiles of `kernel`.
    fn for_kernel(self, kernel: &Microkernel) -> GemmBlocking {
        GemmBlocking {
            mc: self.mc.div_ceil(kernel.mr) * kernel.mr,
            nc: self.nc.div_ceil(kernel.nr) * kernel.nr,
        }
    }
}

/// The blocking set by [`set_gemm_blocking`] (0, 0: none).
static SET_MC: AtomicUsize = AtomicUsize::new(0);
static SET_NC: AtomicUsize = AtomicUsize::new(0);

/// The blocking the process starts with: `MLPL_GEMM_BLOCKING=MC,NC` when set
/// and valid (an invalid value is reported once and ignored), else the default.
fn initial_blocking() -> GemmBlocking {
    static INITIAL: OnceLock<GemmBlocking> = OnceLock::new();
    *INITIAL.get_or_init(|| match std::env::var("MLPL_GEMM_BLOCKING") {
        Err(_) => GemmBlocking::DEFAULT,
        Ok(text) => GemmBlocking::parse(&text).unwrap_or_else(|| {
            eprintln!(
                "warning: MLPL_GEMM_BLOCKING={text} is not `MC,NC` with two positive sizes; using {},{}",
                GemmBlocking::DEFAULT.mc,
                GemmBlocking::DEFAULT.nc
            );
            GemmBlocking::DEFAULT
        }),
    })
}

/// Rows and columns of the tile the micro-kernel of this process's
/// instruction-set level computes (products are computed in whole tiles, the
/// edges zero-padded, though a last tile of one SIMD vector's columns or
/// fewer computes only that vector); cost models use it.
pub fn gemm_tile() -> (usize, usize) {
    let k = Microkernel::of(isa());
    (k.mr, k.nr)
}

/// The blocking products use now (before rounding to the kernel's tiles).
pub fn gemm_blocking() -> GemmBlocking {
    match (
        SET_MC.load(Ordering::Relaxed),
        SET_NC.load(Ordering::Relaxed),
    ) {
        (0, _) | (_, 0) => initial_blocking(),
        (mc, nc) => GemmBlocking { mc, nc },
    }
}

/// Makes products use `blocking` from now on (`None`: back to the initial one).
/// Sizes of 0 are taken as 1.
pub fn set_gemm_blocking(blocking: Option<GemmBlocking>) {
    let (mc, nc) = blocking.map_or((0, 0), |b| (b.mc.max(1), b.nc.max(1)));
    SET_MC.store(mc, Ordering::Relaxed);
    SET_NC.store(nc, Ordering::Relaxed);
}

/// A matrix read through strides: element `(r, c)` is `data[r·rs + c·cs]`.
#[derive(Clone, Copy)]
pub(crate) struct MatRef<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl MatRef<'_> {
    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.rs + c * self.cs]
    }
}

impl<'a> MatRef<'a> {
    /// The transpose (the same data, strides swapped).
    pub(super) fn t(self) -> MatRef<'a> {
        MatRef {
            data: self.data,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// Packs rows `r0..r0 + live`, columns `p0..p0 + kc` of `x` into one panel of
/// `width` lanes: element `(p, r)` at `p·width + r`, missing lanes zero.
fn pack_panel(
    x: MatRef,
    r0: usize,
    live: usize,
    p0: usize,
    kc: usize,
    width: usize,
    panel: &mut [f32],
) {
    debug_assert!(live <= width);
    pack_panels(x, r0, live, p0, kc, width, panel);
}

/// Packs rows `r0..r0 + rows`, columns `p0..p0 + kc` of `x` into
/// `rows.div_ceil(width)` panels of `width` lanes one after the other (panel
/// `q`, element `(p, r)` at `q·width·kc + p·width + r`), missing lanes of the
/// last zero.
///
/// When `x`'s rows are its contiguous dimension (`x.rs == 1`: a row-major B,
/// or a transposed A), the panels are filled in the order of `x`'s memory, one
/// line `p` at a time across all of them: the reads are one sequential stream
/// (the hardware prefetchers follow it when `x` comes from memory, as in a
/// training step) instead of one short strided piece per line per panel. When
/// `x` is read along `k` (`x.cs == 1`), each panel is a transposition of its
/// rows.
fn pack_panels(
    x: MatRef,
    r0: usize,
    rows: usize,
    p0: usize,
    kc: usize,
    width: usize,
    out: &mut [f32],
) {
    let out = &mut out[..rows.div_ceil(width) * width * kc];
    if x.rs == 1 && matches!(width, 4 | 6 | 8 | 12 | 16 | 32) {
        // Whole panels of the kernels' widths are copied with fixed-size moves
        // (a `memcpy` call per line cost a third of a narrow product), in the
        // level's registers; other widths (none of the kernels') take the
        // element-wise loop below.
        return vectorised(
            #[inline(always)]
            || match width {
                4 => pack_lines::<4>(x, r0, rows, p0, kc, out),
                6 => pack_lines::<6>(x, r0, rows, p0, kc, out),
                8 => pack_lines::<8>(x, r0, rows, p0, kc, out),
                12 => pack_lines::<12>(x, r0, rows, p0, kc, out),
                16 => pack_lines::<16>(x, r0, rows, p0, kc, out),
                _ => pack_lines::<32>(x, r0, rows, p0, kc, out),
            },
        );
    }
    for (q, panel) in out.chunks_exact_mut(width * kc).enumerate() {
        let (first, live) = (r0 + q * width, width.min(rows - q * width));
        if x.cs == 1 {
            // Rows along k: the panel is their transpose.
            let src = &x.data[first * x.rs + p0..];
            transpose(src, x.rs, live, kc, panel, width);
        } else {
            for p in 0..kc {
                for r in 0..live {
                    panel[p * width + r] = x.at(first + r, p0 + p);
                }
            }
        }
        if live < width {
            for line in panel.chunks_exact_mut(width) {
                line[live..].fill(0.0);
            }
        }
    }
}

/// [`pack_panels`] of an `x` whose rows are contiguous (`x.rs == 1`), for
/// panels `W` lanes wide, line by line.
#[inline(always)]
fn pack_lines<const W: usize>(
    x: MatRef,
    r0: usize,
    rows: usize,
    p0: usize,
    kc: usize,
    out: &mut [f32],
) {
    let (whole, tail) = (rows / W, rows % W);
    let line = |p: usize| {
        let start = (p0 + p) * x.cs + r0;
        &x.data[start..start + rows]
    };
    // A run of lines at a time, panel by panel: each panel then gets whole
    // cache lines in a row, where one line at a time across all panels
    // wrote part of a cache line per panel, the panels `W·kc` floats apart
    // (a power of two times W: the same L1 set), evicted before they filled.
    let per_run = (PACK_FLOATS / W).max(1);
    for run in (0..kc).step_by(per_run) {
        let lines = run..(run + per_run).min(kc);
        for q in 0..whole {
            for p in lines.clone() {
                prefetch(line(p).as_ptr().wrapping_add(q * W + PREFETCH_AHEAD));
                let src: &[f32; W] = line(p)[q * W..][..W].try_into().expect("W floats");
                out[q * W * kc + p * W..][..W].copy_from_slice(src);
            }
        }
        if tail > 0 {
            for p in lines {
                let dst = &mut out[whole * W * kc + p * W..][..W];
                dst[..tail].copy_from_slice(&line(p)[whole * W..]);
                dst[tail..].fill(0.0);
            }
        }
    }
}

/// Floats ahead of the one it copies that [`pack_lines`] asks the cache for
/// in each line (a run of lines is that many streams at once, more than the
/// hardware prefetchers follow).
const PREFETCH_AHEAD: usize = 64;

/// Asks for the cache line at `at` (an address only: it may lie outside any
/// allocation, and nothing is read from it).
#[inline(always)]
fn prefetch(at: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Floats that [`pack_lines`] copies into one panel before the next (lines
/// of `k` of `W` floats each: 512 bytes, eight cache lines).
const PACK_FLOATS: usize = 128;

/// Packs rows `i0..i0 + rows`, columns `p0..p0 + kc` of `a` into `mr`-row
/// panels (panel `q`, element `(p, r)` at `q·mr·kc + p·mr + r`).
fn pack_a(a: MatRef, i0: usize, rows: usize, p0: usize, kc: usize, mr: usize, out: &mut [f32]) {
    pack_panels(a, i0, rows, p0, kc, mr, out);
}

/// Packs rows `p0..p0 + kc`, columns `j0..j0 + cols` of `b` into `nr`-wide
/// panels (panel `q`, element `(p, j)` at `q·nr·kc + p·nr + j`).
fn pack_b(b: MatRef, p0: usize, kc: usize, j0: usize, cols: usize, nr: usize, out: &mut [f32]) {
    pack_panels(b.t(), j0, cols, p0, kc, nr, out);
}

/// Floats of B packed from which packing is split across threads.
const PAR_PACK: usize = 32 * 1024;

/// A pointer to C shared by the tasks of one product, which write disjoint
/// tiles.
#[derive(Clone, Copy)]
pub(super) struct SharedC(pub(super) *mut f32);
// SAFETY: tasks write disjoint tiles of C (one task per (row block, panel
// group)), and the product waits for every task before C is used again.
unsafe impl Send for SharedC {}
unsafe impl Sync for SharedC {}

impl SharedC {
    pub(super) fn at(self, offset: usize) -> *mut f32 {
        // SAFETY: callers stay inside C (offsets of tiles of an m × n matrix).
        unsafe { self.0.add(offset) }
    }
}

/// `C = A·B` for `A` `m × k`, `B` `k × n` (read through their strides) into
/// row-major `C` `m × n` (overwritten), by the numeric contract of this module,
/// on rayon threads when `parallel` is set.
pub(crate) fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef,
    b: MatRef,
    c: &mut [f32],
    parallel: bool,
    finish: Option<RowFinish>,
) {
    assert!(
        c.len() >= m * n,
        "sgemm: C holds {} < {m}·{n} floats",
        c.len()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c[..m * n].fill(0.0);
        finish_all(finish.map(Finish::whole), m, n, n, c);
        return;
    }
    assert!(
        a.data.len() > (m - 1) * a.rs + (k - 1) * a.cs
            && b.data.len() > (k - 1) * b.rs + (n - 1) * b.cs,
        "sgemm: an operand is shorter than its strides reach"
    );
    let threads = if parallel {
        rayon::current_num_threads()
    } else {
        1
    };
    let product = Product {
        m,
        n,
        k,
        a,
        b,
        ldc: n,
    };
    sgemm_with(
        Microkernel::for_rows(isa(), m),
        gemm_blocking(),
        threads,
        product,
        c,
        finish.map(Finish::whole),
    );
}

/// The operands of `C = A·B`: `A` `m × k`, `B` `k × n` (`m`, `n`, `k` > 0),
/// and the row stride of C (`ldc ≥ n`; `n` but for a slab of C's columns).
#[derive(Clone, Copy)]
pub(super) struct Product<'a> {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) a: MatRef<'a>,
    pub(super) b: MatRef<'a>,
    pub(super) ldc: usize,
}

/// Work a fused consumer of a product does on C's rows once they hold their
/// final values (a bias and an activation, an addition): called with the
/// row's index in the whole product, the column of the segment's first
/// element, and the segment, which it rewrites in place. Called once per
/// element, while the rows are still in cache; the products' values are those
/// of the plain product.
pub(crate) type RowFinish<'a> = &'a (dyn Fn(usize, usize, &mut [f32]) + Sync);

/// Panels of B after which the packed path finishes a row block's rows in
/// their columns (a `RowFinish` call per row and 256 columns): C's block is
/// then still in the L2 cache (144 rows × 256 columns, 144 KiB), where a
/// whole row of a wide product (`[144, 1024]`: 576 KiB, next to B's 1 MiB
/// block) is not.
const FINISH_PANELS: usize = 8;

/// A [`RowFinish`] for a part of a product: its rows and columns start at
/// `row0` and `col0` of the whole product.
#[derive(Clone, Copy)]
pub(super) struct Finish<'a> {
    f: RowFinish<'a>,
    row0: usize,
    col0: usize,
}

impl<'a> Finish<'a> {
    /// `f` for a whole product.
    pub(super) fn whole(f: RowFinish<'a>) -> Finish<'a> {
        Finish {
            f,
            row0: 0,
            col0: 0,
        }
    }

    /// For the part of the product from row `rows` and column `cols` on.
    pub(super) fn shifted(self, rows: usize, cols: usize) -> Finish<'a> {
        Finish {
            row0: self.row0 + rows,
            col0: self.col0 + cols,
            ..self
        }
    }

    /// Runs on rows `rows` of C (at `c`, row stride `ldc`), columns `cols`.
    ///
    /// # Safety
    /// Those elements lie inside C, hold their final values, and nothing else
    /// accesses them meanwhile.
    unsafe fn rows(
        self,
        c: SharedC,
        ldc: usize,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) {
        for r in rows {
            let at = r * ldc + cols.start;
            // SAFETY: the caller's contract.
            let row = unsafe { std::slice::from_raw_parts_mut(c.at(at), cols.len()) };
            (self.f)(self.row0 + r, self.col0 + cols.start, row);
        }
    }
}

/// Runs `finish` (if any) on every element of an `m × n` C (row stride `ldc`)
/// that holds the product's final values, row by row.
pub(super) fn finish_all(finish: Option<Finish>, m: usize, n: usize, ldc: usize, c: &mut [f32]) {
    if let Some(fin) = finish {
        // SAFETY: C is `m` rows of `ldc ≥ n` floats, borrowed whole here.
        unsafe { fin.rows(SharedC(c.as_mut_ptr()), ldc, 0..m, 0..n) };
    }
}

/// [`sgemm`] with a given kernel and blocking, split for `threads` threads
/// (the caller checked the sizes).
pub(super) fn sgemm_with(
    kernel: Microkernel,
    blocking: GemmBlocking,
    threads: usize,
    product: Product,
    c: &mut [f32],
    finish: Option<Finish>,
) {
    let Product { m, n, k, a, b, ldc } = product;
    if vector::sgemm_vector(kernel.isa, threads, product, c, finish) {
        return;
    }
    if threads == 1 && reads_in_place(product) {
        sgemm_direct(kernel, product, c);
        return finish_all(finish, m, n, ldc, c);
    }
    if let Some(runs) = split_runs(m, n, k, threads) {
        return sgemm_split_k(kernel, blocking, runs, product, c, finish);
    }
    let a_tiles = a_tiles(a, n);
    if let Some(split) = slabs::split(product, a_tiles != ATiles::InPlace, threads) {
        return slabs::sgemm_slabs(kernel, blocking, threads, split, product, c, finish);
    }
    let GemmBlocking { mc, nc } = blocking.for_kernel(&kernel);
    let (mr, nr) = (kernel.mr, kernel.nr);
    let mc = balanced_mc(m, mc, mr, threads);
    let in_place = a_tiles == ATiles::InPlace;
    // A row-major A that is not read in place is copied row by row to rows
    // `lda` floats apart (no aliasing), not transposed into panels.
    let copies_rows = a_tiles == ATiles::CopiedRows;
    let shared_c = SharedC(c.as_mut_ptr());
    for jc in (0..n).step_by(nc) {
        let ncb = nc.min(n - jc);
        let panels = ncb.div_ceil(nr);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            let accumulate = pc > 0;
            let lda = kc + ROW_PAD;
            // Floats of a packed row block of `mc` rows.
            let block_cap = mc * if copies_rows { lda } else { kc };
            with_buffer(&B_BUFFERS, nc * KC, |bpack| {
                let bpack = &mut bpack[..panels * nr * kc];
                // Each thread packs a run of whole panels.
                let par_pack = threads > 1 && panels > 1 && kc * ncb >= PAR_PACK;
                let per_pack = if par_pack {
                    panels.div_ceil(threads)
                } else {
                    panels
                };
                for_chunks(bpack, per_pack * nr * kc, par_pack, |at, run| {
                    let j0 = jc + at / kc;
                    pack_b(b, pc, kc, j0, (run.len() / kc).min(n - j0), nr, run);
                });
                let bpack = &*bpack;
                let row_blocks = m.div_ceil(mc);
                let groups = panel_groups(row_blocks, panels, threads);
                let per_group = panels.div_ceil(groups);
                let groups = panels.div_ceil(per_group);
                // The tiles of row block `ib` (its packed panels at `apack`,
                // see `block_len`) and panel group `g`.
                let tiles = |ib: usize, g: usize, apack: &[f32]| {
                    let i0 = ib * mc;
                    let rows_in_block = mc.min(m - i0);
                    let group = g * per_group..((g + 1) * per_group).min(panels);
                    let finishing = finish.filter(|_| pc + kc == k);
                    for q in group.clone() {
                        let j = jc + q * nr;
                        let cols = nr.min(n - j);
                        let bp = &bpack[q * nr * kc..(q + 1) * nr * kc];
                        for ir in 0..rows_in_block.div_ceil(mr) {
                            let i = i0 + ir * mr;
                            let rows = mr.min(m - i);
                            let (ap, ars, acs) = if in_place && rows == mr {
                                (a.data[i * a.rs + pc..].as_ptr(), a.rs, 1)
                            } else if copies_rows {
                                (apack[ir * mr * lda..].as_ptr(), lda, 1)
                            } else {
                                let panel = if in_place { 0 } else { ir };
                                (apack[panel * mr * kc..].as_ptr(), 1, mr)
                            };
                            // SAFETY: a packed panel holds kc·mr floats, copied
                            // rows mr rows of lda ≥ kc floats, and a
                            // tile read in place lies inside A (rows i..i + mr,
                            // columns pc..pc + kc, checked by `sgemm`); B's panel
                            // holds kc·nr floats; the tile (rows i.., columns
                            // j..) lies inside C and belongs to this task alone;
                            // `kernel`'s level is supported (`isa()` only returns
                            // those).
                            unsafe {
                                (kernel.run)(
                                    kc,
                                    Operands {
                                        a: ap,
                                        ars,
                                        acs,
                                        b: bp.as_ptr(),
                                        brs: nr,
                                    },
                                    shared_c.at(i * ldc + j),
                                    ldc,
                                    rows,
                                    cols,
                                    accumulate,
                                );
                            }
                        }
                        // Every FINISH_PANELS panels (and after the group's
                        // last), the block's rows in those panels' columns are
                        // finished while they are still in the L2 cache.
                        let done = q + 1 - group.start;
                        if let Some(fin) = finishing
                            .filter(|_| done.is_multiple_of(FINISH_PANELS) || q + 1 == group.end)
                        {
                            let first = q + 1 - (done - 1) % FINISH_PANELS - 1;
                            let cols = jc + first * nr..j + cols;
                            // SAFETY: this task alone computed these rows and
                            // columns, now final (the last block of k), and
                            // no other task touches them.
                            unsafe { fin.rows(shared_c, ldc, i0..i0 + rows_in_block, cols) };
                        }
                    }
                };
                // Floats of row block `ib` packed: all its tiles (copied
                // rows: whole tiles of `lda`-float rows, the last rows of a
                // partial one unused), or, when A is read in place, only its
                // last tile if that is partial.
                let block_len = |ib: usize| {
                    let rows = mc.min(m - ib * mc);
                    match (in_place, rows % mr) {
                        (false, _) if copies_rows => rows.div_ceil(mr) * mr * lda,
                        (false, _) => rows.div_ceil(mr) * mr * kc,
                        (true, 0) => 0,
                        (true, _) => mr * kc,
                    }
                };
                // Packs row block `ib` into `dst` (`block_len(ib)` floats).
                let pack_block = |ib: usize, dst: &mut [f32]| {
                    let (i0, rows) = (ib * mc, mc.min(m - ib * mc));
                    if in_place {
                        let edge = rows - rows % mr;
                        if edge < rows {
                            pack_panel(a, i0 + edge, rows - edge, pc, kc, mr, dst);
                        }
                    } else if copies_rows {
                        for (r, row) in dst.chunks_exact_mut(lda).take(rows).enumerate() {
                            let start = (i0 + r) * a.rs + pc;
                            row[..kc].copy_from_slice(&a.data[start..start + kc]);
                        }
                    } else {
                        pack_a(a, i0, rows, pc, kc, mr, dst);
                    }
                };
                let tasks = row_blocks * groups;
                let par = threads > 1 && tasks > 1;
                if groups == 1 {
                    // Each task packs its own row block.
                    let task = |ib: usize| {
                        with_buffer(&A_BUFFERS, mc * (KC + ROW_PAD), |apack| {
                            let apack = &mut apack[..block_len(ib)];
                            pack_block(ib, apack);
                            tiles(ib, 0, apack);
                        })
                    };
                    for_each_task(tasks, par, task);
                } else {
                    // Several tasks share each row block: pack all of A once.
                    let whole_cap = row_blocks * mc * (KC + ROW_PAD);
                    with_buffer(&A_WHOLE_BUFFERS, whole_cap, |whole| {
                        let whole = &mut whole[..row_blocks * block_cap];
                        let pack = |ib: usize, dst: &mut [f32]| {
                            pack_block(ib, &mut dst[..block_len(ib)]);
                        };
                        for_chunks(whole, block_cap, par && !in_place, |at, d| {
                            pack(at / block_cap, d)
                        });
                        let whole = &*whole;
                        let task = |t: usize| {
                            let (ib, g) = (t / groups, t % groups);
                            tiles(ib, g, &whole[ib * block_cap..][..block_len(ib)]);
                        };
                        for_each_task(tasks, par, task);
                    });
                }
            });
        }
    }
}

/// The rows of A per block for `threads` threads: `mc` (whole tiles of `mr`
/// rows) lowered so that there are about a multiple of `threads` row blocks,
/// each of the same number of tiles but the last, so that each thread gets
/// about the same share of the product (at m = 1024 and `mc` = 144, 2 threads
/// got 4 and 4 blocks, one of them 16 rows: 576 against 448 rows). Products
/// with fewer row blocks than threads keep `mc` (their tasks split B's panels
/// instead). Only speed depends on it.
fn balanced_mc(m: usize, mc: usize, mr: usize, threads: usize) -> usize {
    let blocks = m.div_ceil(mc);
    if threads <= 1 || blocks < threads {
        return mc;
    }
    let blocks = blocks.div_ceil(threads) * threads;
    m.div_ceil(mr).div_ceil(blocks).max(1) * mr
}

/// Floats between the rows of a row-major A copied row by row (see
/// [`a_tiles`]) beyond the `kc` of a row: 16 floats, one cache line,
/// so that rows `KC + 16` floats apart fall into different sets of the L1
/// cache.
const ROW_PAD: usize = 16;

/// How the packed path gets the row tiles of A to the micro-kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ATiles {
    /// Read where they are (a row-major A).
    InPlace,
    /// A row-major A copied row by row to rows [`ROW_PAD`] floats longer.
    CopiedRows,
    /// Packed into `MR`-row panels (a transposition for a row-major A).
    Panels,
}

/// Columns of C from which a row-major A is packed into panels too.
const PANELS_FROM_N: usize = 512;

/// How the packed path reads A for a product with `n` columns.
///
/// A row-major A is read in place: packing it is a transposition, and for a
/// narrow product (few panels of B to amortise it over) that costs more than
/// the kernel gains from panels (`[2048, 256]·[256, 256]`: 0.97× with
/// panels). Its rows are copied instead when the row stride is a multiple of
/// 512 floats (a tile's 12 rows, 2 KiB or a multiple of 4 KiB apart, fall into
/// one or two sets of the L1 cache and evict each other). From
/// [`PANELS_FROM_N`] columns on it is packed into panels like any other A: the
/// kernel reads one stream of 12 floats a step instead of 12 rows, and the
/// transposition is shared by 16 panels of B or more (2-core AVX-512 Xeon,
/// best of 3 interleaved rounds: `[2048, 1024]·[1024, 256]` 1.08×,
/// `[2048, 256]·[1024, 256]ᵀ` 1.11×, 1024³ 1.07× on 2 threads; 1.02–1.13× on
/// one). Only speed depends on it (the kernel's operations are the same).
pub(super) fn a_tiles(a: MatRef, n: usize) -> ATiles {
    match (a.cs == 1, n >= PANELS_FROM_N) {
        (true, false) if !a.rs.is_multiple_of(512) => ATiles::InPlace,
        (true, false) => ATiles::CopiedRows,
        _ => ATiles::Panels,
    }
}

/// Groups of B's panels a `row_blocks × panels` product's tasks split each
/// row block into, for `threads` threads: one when there are two row blocks a
/// thread or more, else about four tasks a thread, so that the threads' shares
/// differ by about a panel (`[128, 280]` on 2 threads is 1 row block of 9
/// panels: 3 groups of 3, as before, kept one thread idle a third of the time;
/// 5 groups of at most 2 split it 5 : 4).
fn panel_groups(row_blocks: usize, panels: usize, threads: usize) -> usize {
    if threads <= 1 || row_blocks >= 2 * threads {
        return 1;
    }
    (4 * threads).div_ceil(row_blocks).clamp(1, panels)
}

/// Multiply-adds up to which a single-threaded product reads its operands in
/// place where it can (packing would cost about as much as the product).
const DIRECT_FLOPS: usize = 160 * 160 * 160;

/// Output elements up to which a single-threaded product with a row-major B
/// reads its operands in place at any `k` (its C, at most 64 KiB, stays in the
/// L2 cache over the blocks of `k`). Measured on an AVX-512 Xeon, loaded
/// machine, thread CPU time: `[128, 128]` from `k` = 2048 10–15% faster than
/// packed; `[256, 256]` and larger outputs, or a transposed B, no faster or
/// slower.
const DIRECT_OUT: usize = 128 * 128;

/// Whether a single-threaded product takes [`sgemm_direct`]: a small one
/// ([`DIRECT_FLOPS`]), or a small output with a row-major B ([`DIRECT_OUT`]).
fn reads_in_place(product: Product) -> bool {
    let Product { m, n, k, b, .. } = product;
    m * n * k <= DIRECT_FLOPS || (m * n <= DIRECT_OUT && b.cs == 1)
}

/// [`sgemm`] on one thread with little packing: each full tile reads A where it
/// is (any layout), and B too when B is row-major; B's panels otherwise, and
/// the edge tiles (fewer than `MR` rows or `NR` columns), are packed,
/// zero-padded, into small panels, each once per block of `k`. Same operations
/// per element as the packed path, so the same bits.
fn sgemm_direct(kernel: Microkernel, product: Product, c: &mut [f32]) {
    let Product { m, n, k, a, b, ldc } = product;
    let (mr, nr) = (kernel.mr, kernel.nr);
    let c = SharedC(c.as_mut_ptr());
    with_buffer(&A_BUFFERS, mr * KC, |apanel| {
        with_buffer(&B_BUFFERS, nr * KC, |bpanel| {
            // The last row tile, when partial, is read from a panel.
            let edge = m - m % mr;
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                if edge < m {
                    pack_panel(a, edge, m - edge, pc, kc, mr, &mut apanel[..mr * kc]);
                }
                for j in (0..n).step_by(nr) {
                    let cols = nr.min(n - j);
                    let (bp, brs) = if cols == nr && b.cs == 1 {
                        (b.data[pc * b.rs + j..].as_ptr(), b.rs)
                    } else {
                        pack_b(b, pc, kc, j, cols, nr, &mut bpanel[..nr * kc]);
                        (bpanel.as_ptr(), nr)
                    };
                    for i in (0..m).step_by(mr) {
                        let rows = mr.min(m - i);
                        let (ap, ars, acs) = if rows == mr {
                            (a.data[i * a.rs + pc * a.cs..].as_ptr(), a.rs, a.cs)
                        } else {
                            (apanel.as_ptr(), 1, mr)
                        };
                        let x = Operands {
                            a: ap,
                            ars,
                            acs,
                            b: bp,
                            brs,
                        };
                        // SAFETY: a full tile reads A's rows i..i+mr and B's
                        // columns j..j+nr inside the matrices (checked by
                        // `sgemm`); edge tiles read their packed panels; the
                        // tile of C lies inside C; `kernel`'s level is supported.
                        unsafe { (kernel.run)(kc, x, c.at(i * ldc + j), ldc, rows, cols, pc > 0) };
                    }
                }
            }
        })
    })
}

/// Runs `task(t)` for every `t < tasks`, on rayon threads when `parallel` is set.
pub(super) fn for_each_task(tasks: usize, parallel: bool, task: impl Fn(usize) + Sync + Send) {
    if parallel {
        (0..tasks).into_par_iter().for_each(task);
    } else {
        (0..tasks).for_each(task);
    }
}

/// Packing buffers a thread keeps of each kind.
const KEPT: usize = 4;

/// A 64-byte aligned line of floats, so packed panels start on cache lines.
#[derive(Clone, Copy)]
#[repr(align(64))]
pub(super) struct Line(#[allow(dead_code)] [f32; 16]); // read through `as_flattened_mut_f32`

thread_local! {
    /// Free buffers for packed A blocks.
    static A_BUFFERS: Buffers = const { RefCell::new(Vec::new()) };
    /// Free buffers for the whole of A packed at once (products with few
    /// row blocks, whose tasks share them).
    static A_WHOLE_BUFFERS: Buffers = const { RefCell::new(Vec::new()) };
    /// Free buffers for packed B blocks.
    static B_BUFFERS: Buffers = const { RefCell::new(Vec::new()) };
}

/// A thread's free buffers of one kind.
pub(super) type Buffers = RefCell<Vec<Vec<Line>>>;

/// Runs `f` on a buffer of at least `len` floats from this thread's `kind`
/// (allocated when none is free and big enough), then keeps it for reuse.
pub(super) fn with_buffer<R>(
    kind: &'static std::thread::LocalKey<Buffers>,
    len: usize,
    f: impl FnOnce(&mut [f32]) -> R,
) -> R {
    let lines = len.div_ceil(16);
    let mut buf = kind
        .with(|k| {
            let mut k = k.borrow_mut();
            let i = k.iter().position(|b| b.len() >= lines)?;
            Some(k.swap_remove(i))
        })
        .unwrap_or_else(|| vec![Line([0.0; 16]); lines]);
    let r = f(buf.as_flattened_mut_f32());
    kind.with(|k| {
        let mut k = k.borrow_mut();
        if k.len() < KEPT {
            k.push(buf);
        } else if let Some(small) = k.iter_mut().min_by_key(|b| b.len()) {
            if small.len() < buf.len() {
                *small = buf;
            }
        }
    });
    r
}

/// Views lines as floats.
trait AsFloats {
    fn as_flattened_mut_f32(&mut self) -> &mut [f32];
}

impl AsFloats for Vec<Line> {
    fn as_flattened_mut_f32(&mut self) -> &mut [f32] {
        let len = self.len() * 16;
        // SAFETY: `Line` is 16 f32s with no padding (size 64, align 64).
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr().cast::<f32>(), len) }
    }
}

/// Makes this thread's packing buffers (one of each kind, for the current
/// level and blocking) so that its next products allocate nothing.
pub(crate) fn warm_thread() {
    let kernel = Microkernel::of(isa());
    let GemmBlocking { mc, nc } = gemm_blocking().for_kernel(&kernel);
    with_buffer(&A_BUFFERS, mc * (KC + ROW_PAD), |_| ());
    with_buffer(&B_BUFFERS, nc * KC, |_| ());
    // Products split into panel groups have fewer than 2 row blocks a thread.
    let threads = rayon::current_num_threads();
    with_buffer(&A_WHOLE_BUFFERS, 2 * threads * mc * (KC + ROW_PAD), |_| ());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::isa::{supported_isas, Isa};

    /// The numeric contract written out plainly for one element.
    fn contract(a: MatRef, b: MatRef, i: usize, j: usize, k: usize) -> f32 {
        let mut c = 0.0f32;
        for (blk, p0) in (0..k).step_by(KC).enumerate() {
            let mut acc = 0.0f32;
            for p in p0..(p0 + KC).min(k) {
                acc = a.at(i, p).mul_add(b.at(p, j), acc);
            }
            c = if blk == 0 { acc } else { c + acc };
        }
        c
    }

    /// Values with many significant bits, so that any change of order shows.
    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x as f32 / u32::MAX as f32 - 0.5) * 3.7
            })
            .collect()
    }

    #[test]
    fn panels_hold_each_element_once_at_its_place_and_zeros_past_the_rows() {
        // `x` is 40 x 37 (rows x k) read three ways: rows contiguous (the
        // line-by-line path), k contiguous (transpositions), neither.
        let (rows_all, k_all) = (40, 37);
        let vals = data(rows_all * k_all * 2, 7);
        let layouts = [(1, rows_all), (k_all, 1), (2 * k_all, 2)];
        for (rs, cs) in layouts {
            let x = MatRef {
                data: &vals,
                rs,
                cs,
            };
            for width in [4, 12, 32, 5] {
                for (r0, rows, p0, kc) in [(0, 40usize, 0, 37), (3, 29, 5, 20), (7, 1, 36, 1)] {
                    let panels = rows.div_ceil(width);
                    let mut out = vec![f32::NAN; panels * width * kc + 3];
                    pack_panels(x, r0, rows, p0, kc, width, &mut out);
                    for q in 0..panels {
                        for p in 0..kc {
                            for r in 0..width {
                                let got = out[q * width * kc + p * width + r];
                                let row = q * width + r;
                                let want = if row < rows {
                                    x.at(r0 + row, p0 + p)
                                } else {
                                    0.0
                                };
                                assert_eq!(
                                    got.to_bits(),
                                    want.to_bits(),
                                    "strides ({rs}, {cs}), width {width}, panel {q}, p {p}, lane {r}"
                                );
                            }
                        }
                    }
                    assert!(out[panels * width * kc..].iter().all(|v| v.is_nan()));
                }
            }
        }
    }

    #[test]
    fn every_level_blocking_and_thread_count_keeps_the_contract_bit_for_bit() {
        let shapes = [
            (1, 1, 1),
            (3, 5, 7),
            (13, 33, 257),
            (50, 70, 600),
            (1, 40, 513),
            (40, 1, 300),
            // One row or one column (matrix-vector): groups of columns split
            // over the threads, a last partial group, blocks of k whose
            // transposed steps end early (600 = 256 + 256 + 88); a row-major
            // B split by runs of blocks (515 = 256 + 259), and by columns in
            // chunks of accumulators (300 = 256 + 44: runs unequal).
            (1, 2 * 64 + 37, 600),
            (1, 2048 + 40, 2 * KC + 3),
            (1, 4096 + 40, 300),
            (131, 1, 600),
            (1, 1, 300),
            // A few rows with a row-major B (`FEW_ROWS`): chunks of each
            // row's accumulators, the last columns past whole spans of 16,
            // steps past whole groups of 4; split by runs of blocks (515) and
            // by columns (300); one column.
            (2, 2 * 64 + 37, 600),
            (3, 2048 + 40, 2 * KC + 3),
            (4, 4096 + 40, 300),
            (3, 1, 300),
            (150, 65, 256),
            (130, 70, 300),
            (40, 200, 512),
            // On one thread: with a row-major B, read in place (a small
            // output); with B transposed, packed, A 512 floats wide: its rows
            // copied, not read in place.
            (40, 250, 512),
            // Split by blocks of k on 2 and 3 threads: runs of 2 and 1 blocks.
            (20, 30, 3 * KC + 5),
            // Split into row slabs on 2 threads (and on 3 for the first),
            // slab edges inside a block of `mc` rows; the second has two
            // blocks of k and an output too large to split by them.
            (400, 40, 200),
            (264, 500, KC + 3),
            // Split into column slabs on 2 threads when A is packed (A
            // transposed): 150 columns a thread, the second slab's edge tile
            // partial (one block of k, so not split by blocks of k).
            (40, 300, 200),
            // Wide enough that a row-major A is packed into panels too
            // (`PANELS_FROM_N`), its last tile partial.
            (30, PANELS_FROM_N + 8, 300),
        ];
        let blockings = [
            GemmBlocking::DEFAULT,
            GemmBlocking { mc: 1, nc: 1 },
            GemmBlocking { mc: 24, nc: 40 },
        ];
        for (si, &(m, n, k)) in shapes.iter().enumerate() {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let (da, db) = (data(m * k, si as u32 + 1), data(k * n, si as u32 + 100));
                // A `rows × cols` matrix stored row-major, or as its transpose.
                let mat = |data, rows, cols, transposed| {
                    let (rs, cs) = if transposed { (1, rows) } else { (cols, 1) };
                    MatRef { data, rs, cs }
                };
                let (a, b) = (mat(&da[..], m, k, ta), mat(&db[..], k, n, tb));
                let want: Vec<u32> = (0..m * n)
                    .map(|e| contract(a, b, e / n, e % n, k).to_bits())
                    .collect();
                // Each level's kernel, and the one `sgemm` picks for `m` rows
                // when it differs (8-row tiles at AVX-512).
                let kernels = supported_isas().into_iter().flat_map(|isa| {
                    let (main, for_m) = (Microkernel::of(isa), Microkernel::for_rows(isa, m));
                    std::iter::once((isa, main))
                        .chain((for_m.mr != main.mr).then_some((isa, for_m)))
                });
                for (isa, kernel) in kernels {
                    for blocking in blockings {
                        for threads in [1, 2, 3] {
                            let mut c = vec![f32::NAN; m * n];
                            let product = Product {
                                m,
                                n,
                                k,
                                a,
                                b,
                                ldc: n,
                            };
                            sgemm_with(kernel, blocking, threads, product, &mut c, None);
                            let got: Vec<u32> = c.iter().map(|v| v.to_bits()).collect();
                            assert!(
                                got == want,
                                "{m}x{k} · {k}x{n} (transposed: {ta}, {tb}) differs from the \
                                 contract on {isa} ({}-row tiles), {blocking:?}, {threads} threads",
                                kernel.mr
                            );
                        }
                    }
                }
            }
        }
        assert!(supported_isas().contains(&Isa::Scalar));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn few_rows_get_short_tiles_where_they_pad_fewer_rows() {
        use super::super::microkernel::short_rows_up_to;
        let rows = |isa, m| Microkernel::for_rows(isa, m).mr;
        let limit = short_rows_up_to(Isa::Avx512);
        assert_eq!(rows(Isa::Avx512, 32), 8);
        assert_eq!(rows(Isa::Avx512, 8), 8);
        assert_eq!(rows(Isa::Avx512, 36), 12);
        assert_eq!(rows(Isa::Avx512, 48), 12);
        assert_eq!(rows(Isa::Avx512, limit), 8);
        assert_eq!(rows(Isa::Avx512, limit + 8), 12);
        assert_eq!(rows(Isa::Avx2, 32), 4);
        assert_eq!(rows(Isa::Avx2, 36), 6);
        assert_eq!(rows(Isa::Avx2, short_rows_up_to(Isa::Avx2) + 4), 6);
        assert_eq!(rows(Isa::Scalar, 33), Microkernel::of(Isa::Scalar).mr);
    }

    #[test]
    fn row_blocks_are_balanced_over_the_threads() {
        // (m, mc, mr, threads) -> the rows each thread gets differ by less than
        // one block, and blocks are whole tiles no larger than asked.
        for (m, mc, mr, threads) in [
            (1024, 144, 12, 2),
            (2048, 144, 12, 2),
            (512, 144, 12, 2),
            (2048, 144, 6, 3),
            (300, 144, 12, 2),
        ] {
            let b = balanced_mc(m, mc, mr, threads);
            assert!(b.is_multiple_of(mr) && b <= mc && b > 0, "{m}, {mc}: {b}");
            let blocks = m.div_ceil(b);
            assert_eq!(
                blocks % threads,
                0,
                "{m}, {mc}, {threads}: {blocks} blocks of {b}"
            );
            // Blocks dealt round-robin: the largest share minus the smallest.
            let mut share = vec![0; threads];
            for i in 0..blocks {
                share[i % threads] += b.min(m - i * b);
            }
            let spread = share.iter().max().unwrap() - share.iter().min().unwrap();
            assert!(spread < b, "{m}, {mc}, {threads}: shares {share:?}");
        }
        assert_eq!(balanced_mc(1024, 144, 12, 1), 144);
        assert_eq!(balanced_mc(100, 144, 12, 2), 144);
    }

    #[test]
    fn few_row_blocks_are_split_into_panel_groups_that_balance_the_threads() {
        // (row blocks, panels, threads): the groups of panels dealt to the
        // threads give each a share within about one group of the others.
        for (row_blocks, panels, threads) in
            [(1, 9, 2), (1, 4, 2), (3, 16, 2), (1, 2, 4), (2, 30, 3)]
        {
            let groups = panel_groups(row_blocks, panels, threads);
            let per_group = panels.div_ceil(groups);
            let tasks = row_blocks * panels.div_ceil(per_group);
            assert!(
                tasks >= threads.min(row_blocks * panels),
                "{row_blocks}, {panels}: {tasks} tasks"
            );
            // The busiest thread's panels over an even split.
            let busiest = tasks.div_ceil(threads) * per_group;
            let even = (row_blocks * panels).div_ceil(threads);
            assert!(
                busiest <= even + per_group,
                "{row_blocks}x{panels} on {threads}: {busiest} vs {even}"
            );
        }
        assert_eq!(panel_groups(1, 9, 2), 8);
        assert_eq!(panel_groups(8, 9, 2), 1);
        assert_eq!(panel_groups(1, 9, 1), 1);
    }

    #[test]
    fn a_row_major_a_is_read_in_place_unless_its_rows_alias_or_the_product_is_wide() {
        let data = [0.0f32; 4];
        let a = |rs, cs| MatRef {
            data: &data,
            rs,
            cs,
        };
        assert_eq!(a_tiles(a(128, 1), 256), ATiles::InPlace);
        assert_eq!(a_tiles(a(280, 1), 511), ATiles::InPlace);
        assert_eq!(a_tiles(a(512, 1), 256), ATiles::CopiedRows);
        assert_eq!(a_tiles(a(2048, 1), 280), ATiles::CopiedRows);
        assert_eq!(a_tiles(a(256, 1), PANELS_FROM_N), ATiles::Panels);
        assert_eq!(a_tiles(a(1024, 1), 1024), ATiles::Panels);
        assert_eq!(a_tiles(a(1, 128), 256), ATiles::Panels);
    }

    #[test]
    fn blocking_parses_and_rounds_to_whole_tiles() {
        assert_eq!(
            GemmBlocking::parse("96, 512"),
            Some(GemmBlocking { mc: 96, nc: 512 })
        );
        assert_eq!(GemmBlocking::parse("0,512"), None);
        assert_eq!(GemmBlocking::parse("96"), None);
        let kernel = Microkernel::of(Isa::Scalar);
        let b = GemmBlocking { mc: 5, nc: 9 }.for_kernel(&kernel);
        assert_eq!((b.mc % kernel.mr, b.nc % kernel.nr), (0, 0));
        assert!(b.mc >= 5 && b.nc >= 9);
    }
}
