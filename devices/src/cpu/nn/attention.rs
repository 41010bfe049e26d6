//! Tiled attention (flash-attention style): [`attention`] and
//! [`attention_backward`] never hold a `[T, S]` matrix. The forward pass walks
//! each block of [`QUERY_BLOCK`] query rows over tiles of [`KEY_BLOCK`] keys
//! with an online softmax (a running maximum and denominator per row, the
//! weighted values rescaled when the maximum grows) and saves each row's
//! logsumexp; the backward pass recomputes the probabilities of one tile at a
//! time from it. Work and scratch per call grow with T·S and T respectively,
//! memory with T.
//!
//! Determinism: every output element has one fixed order of operations,
//! whatever the CPU, its vector width or the thread count. A score is one
//! chain of fused multiply-adds from +0.0 over the head dimension in
//! increasing order (the GEMM's contract, so for `D ≤ 256` the same bits as
//! the composed `q·kᵀ`); a weighted sum of values or gradients adds one key's
//! (or query's) term at a time in increasing order, each a fused
//! multiply-add; row sums are in f64 in the lane order of `lane_sum` (as the
//! softmax kernels sum), row maxima exact. A SIMD lane holds one key or
//! one element of the head dimension, so the ISA level (`cpu/isa.rs`) changes
//! only speed. Work items (a head's query block, or a key/value head's key
//! tile) are independent and each is computed by one thread.
//!
//! Speed: the forward pass transposes every key tile once per call (not once
//! per query block), divides by a power-of-two divisor as a product with its
//! exact reciprocal, and takes its row maxima and sums over independent
//! lanes rather than one chain of dependent operations per row; the tile
//! loops compute two query rows at a time so that rows share
//! each load of a key or value tile, and the
//! backward pass runs in one pass per key/value head when there are enough
//! heads for the threads ([`dqkv_head`]: the probabilities of a tile are
//! computed once for `dq`, `dk` and `dv`, five products per tile instead of
//! seven); with few heads it runs as a `dq` pass and a `dk`/`dv` pass, whose
//! items spread over the threads. Both give the same bits.

use crate::attention::{AttentionDims, AttentionSpec};
#[cfg(target_arch = "x86_64")]
use crate::cpu::isa::{isa, Isa};
use crate::cpu::lane_sum::{row_max, sum_map, sum_map2};
use crate::cpu::pool;
use crate::cpu::simd_exp;
use crate::math::{self, fma_f32};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Query rows per forward (and `dq`) work item.
pub(crate) const QUERY_BLOCK: usize = 32;
/// Keys per tile (and per `dk`/`dv` work item).
pub(crate) const KEY_BLOCK: usize = 64;
/// Multiply-adds of a call (B·H·T·S·D) from which work items go to rayon's threads.
const PAR_WORK: usize = 1 << 18;

/// The sizes of a call (the runtime validated the shapes).
fn dims_of(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    sinks: &[usize],
    spec: &AttentionSpec,
) -> AttentionDims {
    AttentionDims::of(q.shape(), k.shape(), v.shape(), sinks, spec)
        .unwrap_or_else(|e| panic!("attention: {e}"))
}

/// [`Backend::attention`](crate::Backend::attention) on host tensors: `(out, lse)`.
pub(crate) fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    sinks: &Tensor,
    spec: &AttentionSpec,
) -> (Tensor, Tensor) {
    let a = dims_of(q, k, v, sinks.shape(), spec);
    let sizes = a.forward_sizes();
    let (mut out, mut lse) = (pool::scratch(sizes[0]), pool::scratch(sizes[1]));
    attention_into(
        [q.host(), k.host(), v.host(), sinks.host()],
        &a,
        spec,
        &mut out,
        &mut lse,
    );
    (
        out.into_tensor(q.shape().to_vec()),
        lse.into_tensor(vec![a.b, a.h, a.t]),
    )
}

/// [`Backend::attention_backward`](crate::Backend::attention_backward) on host
/// tensors: `(dq, dk, dv)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_backward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    lse: &Tensor,
    dout: &Tensor,
    spec: &AttentionSpec,
) -> (Tensor, Tensor, Tensor) {
    let a = dims_of(q, k, v, &[0], spec);
    let sizes = a.backward_sizes();
    let mut dq = pool::scratch(sizes[0]);
    let mut dk = pool::scratch(sizes[1]);
    let mut dv = pool::scratch(sizes[2]);
    let ins = [
        q.host(),
        k.host(),
        v.host(),
        out.host(),
        lse.host(),
        dout.host(),
    ];
    attention_backward_into(ins, &a, spec, &mut dq, &mut dk, &mut dv);
    (
        dq.into_tensor(q.shape().to_vec()),
        dk.into_tensor(k.shape().to_vec()),
        dv.into_tensor(k.shape().to_vec()),
    )
}

/// Whether a call is big enough for its work items to go to rayon's threads
/// (the results are the same either way).
fn parallel(a: &AttentionDims) -> bool {
    a.b * a.h * a.t * a.s * a.d >= PAR_WORK
}

/// Whether the backward pass runs in one pass per key/value head
/// ([`dqkv_head`]: five products per tile) rather than a `dq` pass and a
/// `dk`/`dv` pass (seven: the second recomputes the probabilities): when
/// there are no threads to share, or enough heads to keep every thread busy.
/// The results are the same either way.
fn one_pass(a: &AttentionDims, par: bool) -> bool {
    !par || a.b * a.kv >= 2 * rayon::current_num_threads()
}

/// Whether `attention_backward` on `a` runs in one pass per key/value head
/// on this thread pool (see [`one_pass`]); cost models count its products
/// from it.
pub fn backward_in_one_pass(a: &AttentionDims) -> bool {
    one_pass(a, parallel(a))
}

/// Runs `f(i, piece_a, piece_b)` for the pieces `i` of `x` and `y` cut into
/// `ax` and `ay` elements (the last ones shorter), in parallel when `par`;
/// every piece of a buffer has the same index in both. `ax`, `ay` > 0.
fn for_pieces<F>(x: &mut [f32], ax: usize, y: &mut [f32], ay: usize, par: bool, f: F)
where
    F: Fn(usize, &mut [f32], &mut [f32]) + Sync + Send,
{
    if par {
        x.par_chunks_mut(ax)
            .zip(y.par_chunks_mut(ay))
            .enumerate()
            .for_each(|(i, (a, b))| f(i, a, b));
    } else {
        for (i, (a, b)) in x.chunks_mut(ax).zip(y.chunks_mut(ay)).enumerate() {
            f(i, a, b);
        }
    }
}

thread_local! {
    /// Each thread's transposed key and value tiles (grown, never shrunk), so
    /// that a call in a captured step allocates nothing once warm.
    static TILES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The calling thread's `Σ dout∘out` rows of a backward call.
    static DELTA: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's tile scratch of at least `n` elements.
fn with_tiles<R>(n: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    TILES.with(|t| {
        let mut t = t.borrow_mut();
        if t.len() < n {
            t.resize(n, 0.0);
        }
        f(&mut t[..n])
    })
}

/// The forward pass into `out` (`[b, h, t, d]`) and `lse` (`[b, h, t]`), from
/// `[q, k, v, sinks]` (sinks `[h]`, or empty when `a.sinks` is unset).
pub(crate) fn attention_into(
    [q, k, v, sinks]: [&[f32]; 4],
    a: &AttentionDims,
    spec: &AttentionSpec,
    out: &mut [f32],
    lse: &mut [f32],
) {
    let (t, d, g) = (a.t, a.d, a.group());
    if t == 0 || a.b * a.h == 0 {
        return;
    }
    let par = parallel(a);
    // Every key/value head's keys, transposed once into tiles for all the
    // query blocks that read them.
    let head_tiles = a.s.div_ceil(KEY_BLOCK) * d * KEY_BLOCK;
    let mut kt = pool::scratch(a.b * a.kv * head_tiles);
    if head_tiles > 0 {
        let transpose_head = |kvh: usize, kth: &mut [f32]| {
            let keys = &k[kvh * a.s * d..(kvh + 1) * a.s * d];
            for (tile, kt) in kth.chunks_mut(d * KEY_BLOCK).enumerate() {
                let c0 = tile * KEY_BLOCK;
                let c1 = (c0 + KEY_BLOCK).min(a.s);
                transpose_into(&keys[c0 * d..c1 * d], d, c1 - c0, kt);
            }
        };
        if par {
            kt.par_chunks_mut(head_tiles)
                .enumerate()
                .for_each(|(kvh, kth)| transpose_head(kvh, kth));
        } else {
            for (kvh, kth) in kt.chunks_mut(head_tiles).enumerate() {
                transpose_head(kvh, kth);
            }
        }
    }
    let kt = &kt[..];
    let item = |bh: usize, qb: usize, o: &mut [f32], l: &mut [f32]| {
        let (bi, h) = (bh / a.h, bh % a.h);
        let kvh = bi * a.kv + h / g;
        let head = Head {
            q: &q[bh * t * d..(bh + 1) * t * d],
            kt: &kt[kvh * head_tiles..(kvh + 1) * head_tiles],
            v: &v[kvh * a.s * d..(kvh + 1) * a.s * d],
            sink: a.sinks.then(|| sinks[h]),
        };
        forward_block(a, spec, &head, qb * QUERY_BLOCK, o, l)
    };
    if d == 0 {
        // No values: only the logsumexp of zero scores.
        for (bh, lh) in lse.chunks_mut(t).enumerate() {
            for (qb, l) in lh.chunks_mut(QUERY_BLOCK).enumerate() {
                item(bh, qb, &mut [], l);
            }
        }
        return;
    }
    // Query blocks never straddle two heads: cut each head's rows on its own.
    let rows = t * d;
    for_pieces(out, rows, lse, t, par, |bh, o, l| {
        for_pieces(o, QUERY_BLOCK * d, l, QUERY_BLOCK, par, |qb, ob, lb| {
            item(bh, qb, ob, lb)
        });
    });
}

/// The backward pass into `dq`, `dk`, `dv` from `[q, k, v, out, lse, dout]`.
pub(crate) fn attention_backward_into(
    [q, k, v, out, lse, dout]: [&[f32]; 6],
    a: &AttentionDims,
    spec: &AttentionSpec,
    dq: &mut [f32],
    dk: &mut [f32],
    dv: &mut [f32],
) {
    let (t, s, d, g) = (a.t, a.s, a.d, a.group());
    if d == 0 || t == 0 || s == 0 || a.b * a.h == 0 {
        dk.fill(0.0);
        dv.fill(0.0);
        dq.fill(0.0);
        return;
    }
    let par = parallel(a);
    DELTA.with(|cell| {
        let mut delta = cell.borrow_mut();
        // Σ dout∘out per query row, summed in f64 in the lane order
        // (`lane_sum`).
        delta.clear();
        delta.extend((0..a.b * a.h * t).map(|r| {
            let (o, go) = (&out[r * d..(r + 1) * d], &dout[r * d..(r + 1) * d]);
            sum_map2(o, go, |x, y| x as f64 * y as f64) as f32
        }));
        let delta = &delta[..];
        let grads = |bh: usize, kvh: usize| Grads {
            q: &q[bh * t * d..(bh + 1) * t * d],
            k: &k[kvh * s * d..(kvh + 1) * s * d],
            v: &v[kvh * s * d..(kvh + 1) * s * d],
            dout: &dout[bh * t * d..(bh + 1) * t * d],
            lse: &lse[bh * t..(bh + 1) * t],
            delta: &delta[bh * t..(bh + 1) * t],
        };
        if one_pass(a, par) {
            // One item per key/value head: its key tiles in order, each
            // adding to dk, dv and the group's dq (the same order of
            // operations per element as the two passes below).
            let (gq, kv) = (g * t * d, s * d);
            let item = |bk: usize, dqg: &mut [f32], dkh: &mut [f32], dvh: &mut [f32]| {
                let heads = (bk / a.kv) * a.h + (bk % a.kv) * g;
                let head = |hh: usize| grads(heads + hh, bk);
                with_tiles(2 * d * KEY_BLOCK, |tiles| {
                    dqkv_head(a, spec, &head, dqg, dkh, dvh, tiles)
                });
            };
            if par {
                dq.par_chunks_mut(gq)
                    .zip(dk.par_chunks_mut(kv))
                    .zip(dv.par_chunks_mut(kv))
                    .enumerate()
                    .for_each(|(bk, ((dqg, dkh), dvh))| item(bk, dqg, dkh, dvh));
            } else {
                for (bk, ((dqg, dkh), dvh)) in dq
                    .chunks_mut(gq)
                    .zip(dk.chunks_mut(kv))
                    .zip(dv.chunks_mut(kv))
                    .enumerate()
                {
                    item(bk, dqg, dkh, dvh);
                }
            }
            return;
        }
        // dq: one item per head and query block.
        let dq_item = |bh: usize, r0: usize, dqb: &mut [f32]| {
            let kvh = (bh / a.h) * a.kv + (bh % a.h) / g;
            with_tiles(2 * d * KEY_BLOCK, |tiles| {
                dq_block(a, spec, &grads(bh, kvh), r0, dqb, tiles)
            });
        };
        if par {
            dq.par_chunks_mut(t * d).enumerate().for_each(|(bh, dqh)| {
                dqh.par_chunks_mut(QUERY_BLOCK * d)
                    .enumerate()
                    .for_each(|(qb, dqb)| dq_item(bh, qb * QUERY_BLOCK, dqb));
            });
        } else {
            for (bh, dqh) in dq.chunks_mut(t * d).enumerate() {
                for (qb, dqb) in dqh.chunks_mut(QUERY_BLOCK * d).enumerate() {
                    dq_item(bh, qb * QUERY_BLOCK, dqb);
                }
            }
        }
        // dk and dv: one item per key/value head and key tile, summed over the
        // group's query heads in increasing order.
        for_pieces(dk, s * d, dv, s * d, par, |bk, dkh, dvh| {
            let (bi, kvh) = (bk / a.kv, bk % a.kv);
            for_pieces(
                dkh,
                KEY_BLOCK * d,
                dvh,
                KEY_BLOCK * d,
                par,
                |tile, dkb, dvb| {
                    dkb.fill(0.0);
                    dvb.fill(0.0);
                    for hh in 0..g {
                        let bh = bi * a.h + kvh * g + hh;
                        with_tiles(2 * d * KEY_BLOCK, |tiles| {
                            dkv_tile(a, spec, &grads(bh, bk), tile * KEY_BLOCK, dkb, dvb, tiles)
                        });
                    }
                },
            );
        });
    });
}

/// One query head's operands: its queries `[t, d]`, its key/value head's keys
/// transposed into tiles (`[⌈s / KEY_BLOCK⌉, d, KEY_BLOCK]`, the last one's
/// columns past `s` zero) and values `[s, d]`, and its sink logit.
struct Head<'a> {
    q: &'a [f32],
    kt: &'a [f32],
    v: &'a [f32],
    sink: Option<f32>,
}

/// One query head's operands of the backward pass (rows of `[t, d]` or `[t]`,
/// keys and values `[s, d]`).
struct Grads<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    dout: &'a [f32],
    lse: &'a [f32],
    delta: &'a [f32],
}

/// The keys of tile `c0..` (at most [`KEY_BLOCK`], ending at `end`).
fn tile_end(c0: usize, end: usize) -> usize {
    ((c0 / KEY_BLOCK + 1) * KEY_BLOCK).min(end)
}

/// Generates `$name`, which runs `$body::<R>` (an `#[inline(always)]`
/// function of the same arguments, computing `R` query rows or keys
/// together) compiled for the ISA level in force: AVX-512 or AVX2 (each with
/// FMA) on x86-64 where the CPU has them, else plain code, all with `R` = 2.
/// `R` = 4 with AVX-512 (meant to fill its 32 registers) was 3–5× slower than
/// `R` = 2 on an AVX-512 Xeon (`bench_attention`, T = 1024, head width 64:
/// 95 ms against 19 ms forward + backward), so every level takes 2. The
/// operations on each element are the same for every `R` and level; only
/// speed changes.
macro_rules! isa_dispatched {
    ($(#[$doc:meta])* fn $name:ident $(<$lt:lifetime>)? = $body:ident($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        fn $name $(<$lt>)? ($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2 $(<$lt>)? ($($arg: $ty),*) {
                    $body::<ROWS, LANES>($($arg),*)
                }
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx512 $(<$lt>)? ($($arg: $ty),*) {
                    $body::<ROWS, LANES_AVX512>($($arg),*)
                }
                match isa() {
                    // SAFETY: `isa()` is only ever a level this CPU supports.
                    Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    Isa::Scalar => {}
                }
            }
            $body::<ROWS, LANES>($($arg),*)
        }
    };
}

/// Query rows (or keys) a tile pass computes together at every level.
const ROWS: usize = 2;

isa_dispatched! {
    /// The forward pass of query rows `r0..r0 + lse.len()` of one head into
    /// `out` (their rows of `[t, d]`) and `lse`.
    fn forward_block = forward_block_rows(
        a: &AttentionDims, spec: &AttentionSpec, head: &Head<'_>, r0: usize,
        out: &mut [f32], lse: &mut [f32]
    )
}

isa_dispatched! {
    /// `dq` of query rows `r0..` of one head (their rows of `[t, d]`).
    fn dq_block = dq_block_rows(
        a: &AttentionDims, spec: &AttentionSpec, g: &Grads<'_>, r0: usize, dq: &mut [f32],
        tiles: &mut [f32]
    )
}

isa_dispatched! {
    /// Adds one query head's terms to `dk` and `dv` of key tile `c0..` (their
    /// rows of `[s, d]`).
    fn dkv_tile = dkv_tile_rows(
        a: &AttentionDims, spec: &AttentionSpec, g: &Grads<'_>, c0: usize,
        dk: &mut [f32], dv: &mut [f32], tiles: &mut [f32]
    )
}

isa_dispatched! {
    /// The gradients of one key/value head: `dk`, `dv` (its rows of `[s, d]`)
    /// and `dq` of its group's query heads (their rows of `[t, d]`, one head
    /// after another); `head(hh)` is the operands of the group's `hh`-th head.
    fn dqkv_head<'a> = dqkv_head_rows(
        a: &AttentionDims, spec: &AttentionSpec, head: &dyn Fn(usize) -> Grads<'a>,
        dq: &mut [f32], dk: &mut [f32], dv: &mut [f32], tiles: &mut [f32]
    )
}

/// `kt` ← the keys `rows` (`[w, d]`, w ≤ [`KEY_BLOCK`]) transposed to
/// `[d, KEY_BLOCK]`, the columns from `w` on zero.
#[inline(always)]
fn transpose_into(rows: &[f32], d: usize, w: usize, kt: &mut [f32]) {
    if w < KEY_BLOCK {
        kt[..d * KEY_BLOCK].fill(0.0);
    }
    for (j, row) in rows.chunks_exact(d).enumerate().take(w) {
        for (dd, &x) in row.iter().enumerate() {
            kt[dd * KEY_BLOCK + j] = x;
        }
    }
}

/// Keys (or head-dimension elements) per register pass of the tile loops
/// (`L` of the `*_rows` functions): 32 (four AVX2 registers a row, eight
/// accumulators for two rows, of the 16 registers).
const LANES: usize = 32;

/// [`LANES`] with AVX-512: 64, four registers a row, so that two rows keep
/// eight fused multiply-add chains in flight (with 32, four chains waited on
/// the FMA latency). Quiet, AVX-512 Xeon, `bench_attention`, forward +
/// backward, T 1024: 16.4–17.0 → 14.6–15.8 ms at head width 64, 27.9–29.2 →
/// 25.8–27.7 at 128. Only speed changes: each element's chain is the same.
#[cfg(target_arch = "x86_64")]
const LANES_AVX512: usize = 64;

/// `s[i][j] = Σ_dd x_i[dd]·kt[dd][j]` for the `n` rows `x_i` of `xs` from row
/// `r0` (rows of `d`) and every key `j` of a transposed tile: one FMA chain
/// from +0.0 per score, in increasing `dd`. `R` rows share each load of the
/// tile.
#[inline(always)]
fn scores_of_rows<const R: usize, const L: usize>(
    xs: &[f32],
    r0: usize,
    n: usize,
    d: usize,
    kt: &[f32],
    s: &mut [[f32; KEY_BLOCK]; QUERY_BLOCK],
) {
    let row = |i: usize| &xs[(r0 + i) * d..(r0 + i + 1) * d];
    let mut i = 0;
    while i + R <= n {
        let rows: [&[f32]; R] = std::array::from_fn(|k| row(i + k));
        dots_of::<R, L>(&rows, kt, &mut s[i..i + R]);
        i += R;
    }
    while i < n {
        dots_of::<1, L>(&[row(i)], kt, &mut s[i..i + 1]);
        i += 1;
    }
}

/// [`scores_of_rows`] for the `R` rows `x` into `s` (`R` rows of scores).
#[inline(always)]
fn dots_of<const R: usize, const L: usize>(
    x: &[&[f32]; R],
    kt: &[f32],
    s: &mut [[f32; KEY_BLOCK]],
) {
    let d = x[0].len();
    for j0 in (0..KEY_BLOCK).step_by(L) {
        let mut acc = [[0.0f32; L]; R];
        for dd in 0..d {
            let col: &[f32; L] = kt[dd * KEY_BLOCK + j0..dd * KEY_BLOCK + j0 + L]
                .try_into()
                .expect("a tile column");
            for (acc, x) in acc.iter_mut().zip(x) {
                let xv = x[dd];
                for (a, &kv) in acc.iter_mut().zip(col) {
                    *a = fma_f32(xv, kv, *a);
                }
            }
        }
        for (row, acc) in s.iter_mut().zip(&acc) {
            row[j0..j0 + L].copy_from_slice(acc);
        }
    }
}

/// `acc_i[e] += Σ_j w(i, j)·rows[j·d + e]` for `R` rows `i` of `terms`
/// weights each (`w(i, j)`: row `i`'s weight of term `j`) and the `R` rows
/// of `d` elements of `acc`: one fused multiply-add per term, `j`
/// increasing, each element kept in a register over the terms; the `R`
/// rows share each load of `rows`.
#[inline(always)]
fn weighted_rows_of<const R: usize, const L: usize>(
    terms: usize,
    w: impl Fn(usize, usize) -> f32 + Copy,
    rows: &[f32],
    acc: &mut [f32],
) {
    let d = acc.len() / R;
    let rows = &rows[..terms * d];
    let mut e0 = 0;
    while e0 + L <= d {
        weighted_chunk::<R, L>(terms, w, rows, d, e0, acc);
        e0 += L;
    }
    while e0 + LANES <= d {
        weighted_chunk::<R, LANES>(terms, w, rows, d, e0, acc);
        e0 += LANES;
    }
    while e0 + 8 <= d {
        weighted_chunk::<R, 8>(terms, w, rows, d, e0, acc);
        e0 += 8;
    }
    while e0 < d {
        weighted_chunk::<R, 1>(terms, w, rows, d, e0, acc);
        e0 += 1;
    }
}

/// [`weighted_rows_of`] for elements `e0..e0 + N` of each row.
#[inline(always)]
fn weighted_chunk<const R: usize, const N: usize>(
    terms: usize,
    w: impl Fn(usize, usize) -> f32 + Copy,
    rows: &[f32],
    d: usize,
    e0: usize,
    acc: &mut [f32],
) {
    let mut r: [[f32; N]; R] = std::array::from_fn(|k| {
        acc[k * d + e0..k * d + e0 + N]
            .try_into()
            .expect("N elements")
    });
    for j in 0..terms {
        let row: &[f32; N] = rows[j * d + e0..j * d + e0 + N]
            .try_into()
            .expect("N elements");
        for (k, r) in r.iter_mut().enumerate() {
            let cj = w(k, j);
            for (a, &x) in r.iter_mut().zip(row) {
                *a = fma_f32(cj, x, *a);
            }
        }
    }
    for (k, r) in r.iter().enumerate() {
        acc[k * d + e0..k * d + e0 + N].copy_from_slice(r);
    }
}

/// The keys row `r` sees within tile `c0..c1`, relative to `c0` (empty when none).
#[inline(always)]
fn seen_in_tile(
    a: &AttentionDims,
    spec: &AttentionSpec,
    r: usize,
    c0: usize,
    c1: usize,
) -> (usize, usize) {
    let (lo, hi) = a.visible(r, spec);
    let (lo, hi) = (lo.max(c0), hi.min(c1));
    if lo >= hi {
        (0, 0)
    } else {
        (lo - c0, hi - c0)
    }
}

/// [`forward_block`] with the scores and weighted values of `R` query
/// rows computed together.
#[inline(always)]
fn forward_block_rows<const R: usize, const L: usize>(
    a: &AttentionDims,
    spec: &AttentionSpec,
    head: &Head<'_>,
    r0: usize,
    out: &mut [f32],
    lse: &mut [f32],
) {
    let (n, d) = (lse.len(), a.d);
    if n == 0 {
        return;
    }
    // Running maximum and denominator per row, starting from the sink.
    let mut m = [head.sink.unwrap_or(f32::NEG_INFINITY); QUERY_BLOCK];
    let mut l = [if head.sink.is_some() { 1.0f64 } else { 0.0 }; QUERY_BLOCK];
    out.fill(0.0);
    let (first, _) = a.visible(r0, spec);
    let (_, end) = a.visible(r0 + n - 1, spec);
    let mut scores = [[0.0f32; KEY_BLOCK]; QUERY_BLOCK];
    // The keys each row takes from the tile (relative to its start; empty
    // when the row sees none or all its scores are −∞).
    let mut seen = [(0usize, 0usize); QUERY_BLOCK];
    // Whole tiles: a row's scores are the same wherever its key sits in one.
    let mut c0 = first - first % KEY_BLOCK;
    while c0 < end {
        let c1 = tile_end(c0, end);
        let kt = &head.kt[c0 * d..(c0 + KEY_BLOCK) * d];
        scores_of_rows::<R, L>(head.q, r0, n, d, kt, &mut scores);
        for i in 0..n {
            let r = r0 + i;
            let (ja, jz) = seen_in_tile(a, spec, r, c0, c1);
            seen[i] = (0, 0);
            if ja == jz {
                continue;
            }
            let s = &mut scores[i][ja..jz];
            divide_all(s, spec.divisor);
            let m_new = m[i].max(row_max(s));
            if m_new == f32::NEG_INFINITY {
                continue;
            }
            let corr = math::expf(m[i] - m_new);
            simd_exp::exp_shifted_in_place(s, m_new);
            l[i] = l[i] * corr as f64 + sum_map(s, |p| p as f64);
            if corr != 1.0 {
                out[i * d..(i + 1) * d].iter_mut().for_each(|x| *x *= corr);
            }
            m[i] = m_new;
            seen[i] = (ja, jz);
        }
        // Each row's weighted values.
        add_weighted_rows::<R, L>(&seen[..n], &scores, &head.v[c0 * d..], out);
        c0 = c1;
    }
    for i in 0..n {
        let o = &mut out[i * d..(i + 1) * d];
        if l[i] > 0.0 {
            let inv = (1.0 / l[i]) as f32;
            o.iter_mut().for_each(|x| *x *= inv);
            lse[i] = (m[i] as f64 + math::log(l[i])) as f32;
        } else {
            o.fill(0.0);
            lse[i] = f32::NEG_INFINITY;
        }
    }
}

/// `x[i] /= divisor` for every `i`; by a product with the reciprocal when
/// the divisor is a power of two whose reciprocal is a normal float (the
/// same bits: both round the same real number, and a product takes one
/// cycle where a division takes several).
#[inline(always)]
fn divide_all(x: &mut [f32], divisor: f32) {
    match exact_reciprocal(divisor) {
        Some(r) => x.iter_mut().for_each(|v| *v *= r),
        None => x.iter_mut().for_each(|v| *v /= divisor),
    }
}

/// `1 / x` when `x` and it are normal powers of two (so `y · (1 / x)` is
/// `y / x` exactly, rounding included).
#[inline(always)]
fn exact_reciprocal(x: f32) -> Option<f32> {
    const MANTISSA: u32 = (1 << 23) - 1;
    let r = 1.0 / x;
    (x.is_normal() && r.is_normal() && x.to_bits() & MANTISSA == 0).then_some(r)
}

/// The probabilities `p` (in place of the scores `s`) and `ds = p·(dp − δ)/divisor`
/// (in place of `dp`) of row `r` over keys `ja..jz` of a tile.
#[inline(always)]
fn tile_gradients(spec: &AttentionSpec, g: &Grads<'_>, r: usize, s: &mut [f32], dp: &mut [f32]) {
    let (lse, delta) = (g.lse[r], g.delta[r]);
    // p = expf(x / divisor − lse): the quotients first, then the exps 8
    // lanes at a time (`simd_exp`, the same bits).
    divide_all(s, spec.divisor);
    simd_exp::exp_shifted_in_place(s, lse);
    for (&p, y) in s.iter().zip(dp.iter_mut()) {
        *y = p * (*y - delta);
    }
    divide_all(dp, spec.divisor);
}

/// [`dq_block`] with `R` query rows computed together.
#[inline(always)]
fn dq_block_rows<const R: usize, const L: usize>(
    a: &AttentionDims,
    spec: &AttentionSpec,
    g: &Grads<'_>,
    r0: usize,
    dq: &mut [f32],
    tiles: &mut [f32],
) {
    let d = a.d;
    let n = dq.len().checked_div(d).unwrap_or(0);
    if n == 0 {
        return;
    }
    dq.fill(0.0);
    let (first, _) = a.visible(r0, spec);
    let (_, end) = a.visible(r0 + n - 1, spec);
    let mut blk = BlockGradients::<R, L>::new();
    let mut c0 = first;
    while c0 < end {
        let c1 = tile_end(c0, end);
        transpose_tiles(g, d, c0, c1, tiles);
        if blk.compute(a, spec, g, r0, n, (c0, c1), tiles) {
            add_weighted_rows::<R, L>(&blk.seen[..n], &blk.ds, &g.k[c0 * d..], dq);
        }
        c0 = c1;
    }
}

/// [`dkv_tile`] with `R` query rows (for the probabilities) and `R`
/// keys (for the gradient rows) computed together.
#[inline(always)]
fn dkv_tile_rows<const R: usize, const L: usize>(
    a: &AttentionDims,
    spec: &AttentionSpec,
    g: &Grads<'_>,
    c0: usize,
    dk: &mut [f32],
    dv: &mut [f32],
    tiles: &mut [f32],
) {
    let d = a.d;
    let w = dk.len().checked_div(d).unwrap_or(0);
    if w == 0 {
        return;
    }
    transpose_tiles(g, d, c0, c0 + w, tiles);
    let mut blk = BlockGradients::<R, L>::new();
    for rb in (0..a.t).step_by(QUERY_BLOCK) {
        let n = QUERY_BLOCK.min(a.t - rb);
        if blk.compute(a, spec, g, rb, n, (c0, c0 + w), tiles) {
            blk.add_key_gradients(g, rb, n, w, d, dk, dv);
        }
    }
}

/// [`dqkv_head`] with `R` query rows (for the probabilities and `dq`)
/// and `R` keys (for `dk`, `dv`) computed together. Per element the order
/// of operations is that of [`dq_block`] (keys in increasing order,
/// tile after tile) and of [`dkv_tile`] (the group's heads, then the
/// query rows, in increasing order).
#[inline(always)]
fn dqkv_head_rows<'a, const R: usize, const L: usize>(
    a: &AttentionDims,
    spec: &AttentionSpec,
    head: &dyn Fn(usize) -> Grads<'a>,
    dq: &mut [f32],
    dk: &mut [f32],
    dv: &mut [f32],
    tiles: &mut [f32],
) {
    let (t, s, d) = (a.t, a.s, a.d);
    dq.fill(0.0);
    dk.fill(0.0);
    dv.fill(0.0);
    let mut blk = BlockGradients::<R, L>::new();
    for c0 in (0..s).step_by(KEY_BLOCK) {
        let c1 = (c0 + KEY_BLOCK).min(s);
        transpose_tiles(&head(0), d, c0, c1, tiles);
        let (dkt, dvt) = (&mut dk[c0 * d..c1 * d], &mut dv[c0 * d..c1 * d]);
        for hh in 0..a.group() {
            let g = head(hh);
            let dqh = &mut dq[hh * t * d..(hh + 1) * t * d];
            for rb in (0..t).step_by(QUERY_BLOCK) {
                let n = QUERY_BLOCK.min(t - rb);
                // Visible ranges grow with the row: skip blocks that end
                // before the tile or start after it.
                if a.visible(rb + n - 1, spec).1 <= c0 || a.visible(rb, spec).0 >= c1 {
                    continue;
                }
                if blk.compute(a, spec, &g, rb, n, (c0, c1), tiles) {
                    blk.add_key_gradients(&g, rb, n, c1 - c0, d, dkt, dvt);
                    let dq_rows = &mut dqh[rb * d..(rb + n) * d];
                    add_weighted_rows::<R, L>(&blk.seen[..n], &blk.ds, &g.k[c0 * d..], dq_rows);
                }
            }
        }
    }
}

/// The keys and values of tile `c0..c1` transposed into the two halves of
/// `tiles` (`[d, KEY_BLOCK]` each).
#[inline(always)]
fn transpose_tiles(g: &Grads<'_>, d: usize, c0: usize, c1: usize, tiles: &mut [f32]) {
    let (kt, vt) = tiles[..2 * d * KEY_BLOCK].split_at_mut(d * KEY_BLOCK);
    transpose_into(&g.k[c0 * d..c1 * d], d, c1 - c0, kt);
    transpose_into(&g.v[c0 * d..c1 * d], d, c1 - c0, vt);
}

/// The probabilities and score gradients of a block of query rows over one
/// key tile, computed `R` rows at a time.
struct BlockGradients<const R: usize, const L: usize> {
    /// Probabilities, a row per query row of the block.
    p: [[f32; KEY_BLOCK]; QUERY_BLOCK],
    /// Score gradients `p·(dp − δ)/divisor`.
    ds: [[f32; KEY_BLOCK]; QUERY_BLOCK],
    /// The keys each row takes from the tile (relative to its start; empty
    /// when none, or when the row's logsumexp is −∞).
    seen: [(usize, usize); QUERY_BLOCK],
}

impl<const R: usize, const L: usize> BlockGradients<R, L> {
    #[inline(always)]
    fn new() -> Self {
        BlockGradients {
            p: [[0.0; KEY_BLOCK]; QUERY_BLOCK],
            ds: [[0.0; KEY_BLOCK]; QUERY_BLOCK],
            seen: [(0, 0); QUERY_BLOCK],
        }
    }

    /// Rows `rb..rb + n` of head `g` over keys `c0..c1` (transposed in
    /// `tiles`); false when no row sees any of them.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn compute(
        &mut self,
        a: &AttentionDims,
        spec: &AttentionSpec,
        g: &Grads<'_>,
        rb: usize,
        n: usize,
        (c0, c1): (usize, usize),
        tiles: &[f32],
    ) -> bool {
        let d = a.d;
        let mut any = false;
        for (i, seen) in self.seen[..n].iter_mut().enumerate() {
            let r = rb + i;
            *seen = seen_in_tile(a, spec, r, c0, c1);
            if seen.0 == seen.1 || g.lse[r] == f32::NEG_INFINITY {
                *seen = (0, 0);
            } else {
                any = true;
            }
        }
        if !any {
            return false;
        }
        let (kt, vt) = tiles[..2 * d * KEY_BLOCK].split_at(d * KEY_BLOCK);
        scores_of_rows::<R, L>(g.q, rb, n, d, kt, &mut self.p);
        scores_of_rows::<R, L>(g.dout, rb, n, d, vt, &mut self.ds);
        for (i, &(ja, jz)) in self.seen[..n].iter().enumerate() {
            if ja != jz {
                tile_gradients(
                    spec,
                    g,
                    rb + i,
                    &mut self.p[i][ja..jz],
                    &mut self.ds[i][ja..jz],
                );
            }
        }
        true
    }

    /// Adds the block's terms to `dk` and `dv` of the tile's `w` keys (their
    /// rows of `d`): each key's rows in increasing order, `R` keys at a time
    /// where they are seen by the same rows.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn add_key_gradients(
        &mut self,
        g: &Grads<'_>,
        rb: usize,
        n: usize,
        w: usize,
        d: usize,
        dk: &mut [f32],
        dv: &mut [f32],
    ) {
        let seen = &self.seen[..n];
        // The rows that see key `j`: all of them or none where every row
        // takes the same keys (the tiles inside the causal triangle).
        let uniform = seen.iter().all(|&x| x == seen[0]);
        let rows_of_key = |j: usize| {
            if uniform {
                let (ja, jz) = seen[0];
                if ja <= j && j < jz {
                    (0, n)
                } else {
                    (0, 0)
                }
            } else {
                rows_seeing(seen, j)
            }
        };
        let mut j = 0;
        while j < w {
            let (i0, m) = rows_of_key(j);
            if m == 0 {
                j += 1;
                continue;
            }
            let keys = if j + R <= w && (1..R).all(|k| rows_of_key(j + k) == (i0, m)) {
                R
            } else {
                1
            };
            let rows = (rb + i0) * d..(rb + i0 + m) * d;
            let (dvj, dkj) = (
                &mut dv[j * d..(j + keys) * d],
                &mut dk[j * d..(j + keys) * d],
            );
            // Key `j + k`'s weight of query row `i0 + i`: a column of the
            // block, read in place.
            let (p, ds) = (&self.p[i0..i0 + m], &self.ds[i0..i0 + m]);
            let wp = |k: usize, i: usize| p[i][j + k];
            let wds = |k: usize, i: usize| ds[i][j + k];
            if keys == R {
                weighted_rows_of::<R, L>(m, wp, &g.dout[rows.clone()], dvj);
                weighted_rows_of::<R, L>(m, wds, &g.q[rows], dkj);
            } else {
                weighted_rows_of::<1, L>(m, wp, &g.dout[rows.clone()], dvj);
                weighted_rows_of::<1, L>(m, wds, &g.q[rows], dkj);
            }
            j += keys;
        }
    }
}

/// `out_i += Σ_j weights[i][j]·src[j]` over the keys `seen[i]` of each row
/// `i` (rows of `d` in `out` and in `src`, the tile's rows from its first
/// key), `R` rows at a time where they take the same keys.
#[inline(always)]
fn add_weighted_rows<const R: usize, const L: usize>(
    seen: &[(usize, usize)],
    weights: &[[f32; KEY_BLOCK]; QUERY_BLOCK],
    src: &[f32],
    out: &mut [f32],
) {
    let n = seen.len();
    let d = out.len().checked_div(n).unwrap_or(0);
    let mut i = 0;
    while i < n {
        let (ja, jz) = seen[i];
        if ja == jz {
            i += 1;
            continue;
        }
        let (rows, terms) = (&src[ja * d..jz * d], jz - ja);
        if i + R <= n && seen[i..i + R].iter().all(|&x| x == (ja, jz)) {
            let w = &weights[i..i + R];
            let weight = |k: usize, j: usize| w[k][ja + j];
            weighted_rows_of::<R, L>(terms, weight, rows, &mut out[i * d..(i + R) * d]);
            i += R;
        } else {
            let w = &weights[i][ja..jz];
            let weight = |_: usize, j: usize| w[j];
            weighted_rows_of::<1, L>(terms, weight, rows, &mut out[i * d..(i + 1) * d]);
            i += 1;
        }
    }
}

/// The rows of a query block (their key ranges `seen`) that see key `j`: `m`
/// consecutive ones from `i0` (`(0, 0)` when none).
#[inline(always)]
fn rows_seeing(seen: &[(usize, usize)], j: usize) -> (usize, usize) {
    let mut it = seen
        .iter()
        .enumerate()
        .filter(|(_, &(ja, jz))| ja <= j && j < jz);
    match it.next() {
        Some((i0, _)) => (i0, 1 + it.count()),
        None => (0, 0),
    }
}
