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
//! multiply-add; row sums are sequential in f64. A SIMD lane holds one key or
//! one element of the head dimension, so the ISA level (`cpu/isa.rs`) changes
//! only speed. Work items (a head's query block, or a key/value head's key
//! tile) are independent and each is computed by one thread.

use crate::attention::{AttentionDims, AttentionSpec};
#[cfg(target_arch = "x86_64")]
use crate::cpu::isa::{isa, Isa};
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
    let item = |bh: usize, qb: usize, o: &mut [f32], l: &mut [f32]| {
        let (bi, h) = (bh / a.h, bh % a.h);
        let kvh = bi * a.kv + h / g;
        let head = Head {
            q: &q[bh * t * d..(bh + 1) * t * d],
            k: &k[kvh * a.s * d..(kvh + 1) * a.s * d],
            v: &v[kvh * a.s * d..(kvh + 1) * a.s * d],
            sink: a.sinks.then(|| sinks[h]),
        };
        with_tiles(2 * d * KEY_BLOCK, |tiles| {
            forward_block(a, spec, &head, qb * QUERY_BLOCK, o, l, tiles)
        });
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
    let (par, rows) = (parallel(a), t * d);
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
        // Σ dout∘out per query row, summed in f64 in increasing order.
        delta.clear();
        delta.extend((0..a.b * a.h * t).map(|r| {
            let (o, go) = (&out[r * d..(r + 1) * d], &dout[r * d..(r + 1) * d]);
            o.iter()
                .zip(go)
                .map(|(&x, &y)| x as f64 * y as f64)
                .sum::<f64>() as f32
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
/// and values `[s, d]`, and its sink logit.
struct Head<'a> {
    q: &'a [f32],
    k: &'a [f32],
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

/// Generates `$name`, which runs `$body` (an `#[inline(always)]` function of
/// the same arguments) compiled for the ISA level in force: AVX-512 or AVX2
/// (each with FMA) on x86-64 where the CPU has them, else plain code. The
/// operations are the same at every level; only the vector width changes.
macro_rules! isa_dispatched {
    ($(#[$doc:meta])* fn $name:ident = $body:ident($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) {
                    $body($($arg),*)
                }
                match isa() {
                    // SAFETY: `isa()` is only ever a level this CPU supports.
                    Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    Isa::Scalar => {}
                }
            }
            $body($($arg),*)
        }
    };
}

isa_dispatched! {
    /// The forward pass of query rows `r0..r0 + lse.len()` of one head into
    /// `out` (their rows of `[t, d]`) and `lse`.
    fn forward_block = forward_block_body(
        a: &AttentionDims, spec: &AttentionSpec, head: &Head<'_>, r0: usize,
        out: &mut [f32], lse: &mut [f32], tiles: &mut [f32]
    )
}

isa_dispatched! {
    /// `dq` of query rows `r0..` of one head (their rows of `[t, d]`).
    fn dq_block = dq_block_body(
        a: &AttentionDims, spec: &AttentionSpec, g: &Grads<'_>, r0: usize, dq: &mut [f32],
        tiles: &mut [f32]
    )
}

isa_dispatched! {
    /// Adds one query head's terms to `dk` and `dv` of key tile `c0..` (their
    /// rows of `[s, d]`).
    fn dkv_tile = dkv_tile_body(
        a: &AttentionDims, spec: &AttentionSpec, g: &Grads<'_>, c0: usize,
        dk: &mut [f32], dv: &mut [f32], tiles: &mut [f32]
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

/// `s[j] = Σ_dd x[dd]·kt[dd][j]` for the first `s.len()` keys of a transposed
/// tile: one FMA chain from +0.0 per key, in increasing `dd` (the whole tile
/// is computed in registers; the padding columns are dropped).
#[inline(always)]
fn dots(x: &[f32], kt: &[f32], s: &mut [f32]) {
    let mut acc = [0.0f32; KEY_BLOCK];
    for (dd, &xv) in x.iter().enumerate() {
        let col: &[f32; KEY_BLOCK] = kt[dd * KEY_BLOCK..(dd + 1) * KEY_BLOCK]
            .try_into()
            .expect("a tile column");
        for (a, &kv) in acc.iter_mut().zip(col) {
            *a = fma_f32(xv, kv, *a);
        }
    }
    let w = s.len();
    s.copy_from_slice(&acc[..w]);
}

/// `acc[e] += Σ_j c[j]·rows[j·d + e]` for the `d = acc.len()` elements: one
/// fused multiply-add per term, `j` increasing, each element kept in a
/// register over the terms.
#[inline(always)]
fn weighted_rows(c: &[f32], rows: &[f32], acc: &mut [f32]) {
    let d = acc.len();
    let mut e0 = 0;
    while e0 + 64 <= d {
        weighted_chunk::<64>(c, rows, d, e0, acc);
        e0 += 64;
    }
    while e0 + 16 <= d {
        weighted_chunk::<16>(c, rows, d, e0, acc);
        e0 += 16;
    }
    while e0 < d {
        weighted_chunk::<1>(c, rows, d, e0, acc);
        e0 += 1;
    }
}

/// [`weighted_rows`] for elements `e0..e0 + N`.
#[inline(always)]
fn weighted_chunk<const N: usize>(c: &[f32], rows: &[f32], d: usize, e0: usize, acc: &mut [f32]) {
    let mut r: [f32; N] = acc[e0..e0 + N].try_into().expect("N elements");
    for (j, &cj) in c.iter().enumerate() {
        let row: &[f32; N] = rows[j * d + e0..j * d + e0 + N]
            .try_into()
            .expect("N elements");
        for (a, &x) in r.iter_mut().zip(row) {
            *a = fma_f32(cj, x, *a);
        }
    }
    acc[e0..e0 + N].copy_from_slice(&r);
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

#[inline(always)]
fn forward_block_body(
    a: &AttentionDims,
    spec: &AttentionSpec,
    head: &Head<'_>,
    r0: usize,
    out: &mut [f32],
    lse: &mut [f32],
    tiles: &mut [f32],
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
    let kt = &mut tiles[..d * KEY_BLOCK];
    let mut srow = [0.0f32; KEY_BLOCK];
    let mut c0 = first;
    while c0 < end {
        let c1 = tile_end(c0, end);
        let w = c1 - c0;
        transpose_into(&head.k[c0 * d..c1 * d], d, w, kt);
        for i in 0..n {
            let r = r0 + i;
            let (ja, jz) = seen_in_tile(a, spec, r, c0, c1);
            if ja == jz {
                continue;
            }
            let s = &mut srow[..w];
            dots(&head.q[r * d..(r + 1) * d], kt, s);
            let mut mx = f32::NEG_INFINITY;
            for x in &mut s[ja..jz] {
                *x /= spec.divisor;
                mx = mx.max(*x);
            }
            let m_new = m[i].max(mx);
            if m_new == f32::NEG_INFINITY {
                continue;
            }
            let corr = math::expf(m[i] - m_new);
            simd_exp::exp_shifted_in_place(&mut s[ja..jz], m_new);
            let sum: f64 = s[ja..jz].iter().map(|&p| p as f64).sum();
            l[i] = l[i] * corr as f64 + sum;
            let o = &mut out[i * d..(i + 1) * d];
            if corr != 1.0 {
                o.iter_mut().for_each(|x| *x *= corr);
            }
            let vs = &head.v[(c0 + ja) * d..(c0 + jz) * d];
            weighted_rows(&s[ja..jz], vs, o);
            m[i] = m_new;
        }
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

/// The probabilities `p` (in place of the scores `s`) and `ds = p·(dp − δ)/divisor`
/// (in place of `dp`) of row `r` over keys `ja..jz` of a tile.
#[inline(always)]
fn tile_gradients(spec: &AttentionSpec, g: &Grads<'_>, r: usize, s: &mut [f32], dp: &mut [f32]) {
    let (lse, delta) = (g.lse[r], g.delta[r]);
    // p = expf(x / divisor − lse): the quotients first, then the exps 8
    // lanes at a time (`simd_exp`, the same bits).
    for x in s.iter_mut() {
        *x /= spec.divisor;
    }
    simd_exp::exp_shifted_in_place(s, lse);
    for (&p, y) in s.iter().zip(dp.iter_mut()) {
        *y = p * (*y - delta) / spec.divisor;
    }
}

#[inline(always)]
fn dq_block_body(
    a: &AttentionDims,
    spec: &AttentionSpec,
    g: &Grads<'_>,
    r0: usize,
    dq: &mut [f32],
    tiles: &mut [f32],
) {
    let d = a.d;
    let n = if d == 0 { 0 } else { dq.len() / d };
    if n == 0 {
        return;
    }
    dq.fill(0.0);
    let (first, _) = a.visible(r0, spec);
    let (_, end) = a.visible(r0 + n - 1, spec);
    let (kt, vt) = tiles[..2 * d * KEY_BLOCK].split_at_mut(d * KEY_BLOCK);
    let (mut srow, mut dprow) = ([0.0f32; KEY_BLOCK], [0.0f32; KEY_BLOCK]);
    let mut c0 = first;
    while c0 < end {
        let c1 = tile_end(c0, end);
        let w = c1 - c0;
        transpose_into(&g.k[c0 * d..c1 * d], d, w, kt);
        transpose_into(&g.v[c0 * d..c1 * d], d, w, vt);
        for i in 0..n {
            let r = r0 + i;
            let (ja, jz) = seen_in_tile(a, spec, r, c0, c1);
            if ja == jz || g.lse[r] == f32::NEG_INFINITY {
                continue;
            }
            let (s, dp) = (&mut srow[..w], &mut dprow[..w]);
            dots(&g.q[r * d..(r + 1) * d], kt, s);
            dots(&g.dout[r * d..(r + 1) * d], vt, dp);
            tile_gradients(spec, g, r, &mut s[ja..jz], &mut dp[ja..jz]);
            let ks = &g.k[(c0 + ja) * d..(c0 + jz) * d];
            weighted_rows(&dp[ja..jz], ks, &mut dq[i * d..(i + 1) * d]);
        }
        c0 = c1;
    }
}

#[inline(always)]
fn dkv_tile_body(
    a: &AttentionDims,
    spec: &AttentionSpec,
    g: &Grads<'_>,
    c0: usize,
    dk: &mut [f32],
    dv: &mut [f32],
    tiles: &mut [f32],
) {
    let d = a.d;
    let w = if d == 0 { 0 } else { dk.len() / d };
    if w == 0 {
        return;
    }
    let c1 = c0 + w;
    let (kt, vt) = tiles[..2 * d * KEY_BLOCK].split_at_mut(d * KEY_BLOCK);
    transpose_into(&g.k[c0 * d..c1 * d], d, w, kt);
    transpose_into(&g.v[c0 * d..c1 * d], d, w, vt);
    // The probabilities and score gradients of a block of query rows, then
    // each key's gradient rows summed over the block's rows in order.
    let mut p = [0.0f32; QUERY_BLOCK * KEY_BLOCK];
    let mut ds = [0.0f32; QUERY_BLOCK * KEY_BLOCK];
    let mut seen = [(0usize, 0usize); QUERY_BLOCK];
    let (mut cp, mut cds) = ([0.0f32; QUERY_BLOCK], [0.0f32; QUERY_BLOCK]);
    let mut rb = 0;
    while rb < a.t {
        let n = QUERY_BLOCK.min(a.t - rb);
        let mut any = false;
        for i in 0..n {
            let r = rb + i;
            seen[i] = seen_in_tile(a, spec, r, c0, c1);
            let (ja, jz) = seen[i];
            if ja == jz || g.lse[r] == f32::NEG_INFINITY {
                seen[i] = (0, 0);
                continue;
            }
            any = true;
            let (s, dp) = (
                &mut p[i * KEY_BLOCK..i * KEY_BLOCK + w],
                &mut ds[i * KEY_BLOCK..i * KEY_BLOCK + w],
            );
            dots(&g.q[r * d..(r + 1) * d], kt, s);
            dots(&g.dout[r * d..(r + 1) * d], vt, dp);
            tile_gradients(spec, g, r, &mut s[ja..jz], &mut dp[ja..jz]);
        }
        if any {
            for j in 0..w {
                // The rows of the block that see key j (consecutive ones).
                let mut m = 0;
                let mut first = None;
                for (i, &(ja, jz)) in seen[..n].iter().enumerate() {
                    if ja <= j && j < jz {
                        first.get_or_insert(i);
                        cp[m] = p[i * KEY_BLOCK + j];
                        cds[m] = ds[i * KEY_BLOCK + j];
                        m += 1;
                    }
                }
                let Some(i0) = first else { continue };
                debug_assert!(seen[i0..i0 + m].iter().all(|&(ja, jz)| ja <= j && j < jz));
                let rows = (rb + i0) * d..(rb + i0 + m) * d;
                weighted_rows(&cp[..m], &g.dout[rows.clone()], &mut dv[j * d..(j + 1) * d]);
                weighted_rows(&cds[..m], &g.q[rows], &mut dk[j * d..(j + 1) * d]);
            }
        }
        rb += n;
    }
}
