//! Multi-head, grouped-query and causal attention (LANGUAGE §11.3).
//!
//! All heads are computed at once with batched matrix products: queries are laid
//! out `[B, kv, g, T, hd]` and keys and values `[B, kv, 1, T, hd]`, so the g
//! consecutive query heads of a group broadcast against their shared key/value
//! head. Rotary embeddings (§11.4) rotate queries and keys before the scores.
//! Scaling, the causal mask and the softmax run as one fused backend kernel
//! (`masked_softmax`), forward and backward. A layer with sinks or a sliding
//! window composes the same softmax from ordinary operations instead: the
//! scaled scores plus a constant mask, each head's sink logit joined as one
//! more column, the softmax, and that column sliced off again (GPT-OSS).
//!
//! From [`FUSED_MIN_SCORES`] scores per head on, and unless the probabilities
//! are kept, the whole of it (scores, mask, window, sinks, softmax, the
//! product with the values) is the backend's one `attention` kernel each way
//! instead, on `[B, H, T, hd]` queries and `[B, kv, S, hd]` keys and values;
//! the CPU's is tiled and never holds a `[T, S]` matrix, so memory grows with
//! T, not T².

use mlpl_devices::{AttentionSpec, BinaryOp};

use super::apply::Forward;
use super::layers::{Attention, Layer};
use super::rope;
use crate::eval::{loss, ops};
use crate::value::Array;
use mlpl_diag::Diagnostic;

/// Applies an attention layer to `x` `[T, d]` or `[B, T, d]`. With a key/value
/// cache in `f` (generation), the cached keys and values of earlier positions
/// are used and this step's appended, rotary positions continuing after them. When the forward
/// pass captures weights and none were captured yet, the probabilities are
/// kept in `f.weights`, shaped as `attention_weights` returns them.
pub fn forward(
    f: &mut Forward<'_>,
    layer: &Layer,
    a: &Attention,
    x: &Array,
) -> Result<Array, Diagnostic> {
    let s = x.shape();
    if !(s.len() == 2 || s.len() == 3) || s[s.len() - 1] != a.d {
        let pattern = format!("[T, {0}] or [B, T, {0}]", a.d);
        return Err(f.wrong_input(layer, &pattern, x));
    }
    let (b, t) = if s.len() == 2 {
        (1, s[0])
    } else {
        (s[0], s[1])
    };
    let (d, h, kv, hd) = (a.d, a.heads, a.kv_heads, a.head_dim());
    let g = h / kv.max(1);
    let inner = a.inner();
    let n = |r: &str| a.param_name(r);
    let wq = f.weight(&n("Wq"), &[d, inner])?;
    let wk = f.weight(&n("Wk"), &[d, kv * hd])?;
    let wv = f.weight(&n("Wv"), &[d, kv * hd])?;
    let wo = f.weight(&n("Wo"), &[inner, d])?;
    let biases = if a.bias {
        Some([
            f.weight(&n("bq"), &[1, inner])?,
            f.weight(&n("bk"), &[1, kv * hd])?,
            f.weight(&n("bv"), &[1, kv * hd])?,
            f.weight(&n("bo"), &[1, d])?,
        ])
    } else {
        None
    };
    let past = f.cache.as_ref().map_or(0, |c| c.len(a.id));
    let fused_path = !(f.capture && f.weights.is_none()) && t * (past + t) >= FUSED_MIN_SCORES;
    // The largest result: the scores, unless the fused kernel never makes them.
    let largest = if fused_path { hd } else { past + t };
    ops::check_size("attention", &[b, h, t, largest], f.span)?;

    let x2 = ops::reshape(f.it, x, vec![b * t, d], f.span)?;
    let bias = |i: usize| biases.as_ref().map(|bs| bs[i].clone());
    let q = f.mm(&x2, &wq)?;
    let q = f.add_bias(&q, bias(0).as_ref(), None)?;
    let kk = f.mm(&x2, &wk)?;
    let kk = f.add_bias(&kk, bias(1).as_ref(), None)?;
    let v = f.mm(&x2, &wv)?;
    let v = f.add_bias(&v, bias(2).as_ref(), None)?;
    // Heads to their own axis: [B·T, n·hd] → [B, n, T, hd].
    let mut q = split_heads(f, &q, b, t, h, hd)?;
    let mut kk = split_heads(f, &kk, b, t, kv, hd)?;
    let v = split_heads(f, &v, b, t, kv, hd)?;
    if let Some(eps) = a.qk_norm {
        // Each head's query and key RMS-normalised with a learned gain [hd].
        let qn = f.weight(&n("qn"), &[hd])?;
        let kn = f.weight(&n("kn"), &[hd])?;
        q = ops::norm(f.it, &q, eps as f32, false, f.span)?;
        q = ops::arith(f.it, BinaryOp::Mul, &q, &qn, f.span)?;
        kk = ops::norm(f.it, &kk, eps as f32, false, f.span)?;
        kk = ops::arith(f.it, BinaryOp::Mul, &kk, &kn, f.span)?;
    }
    let mut q = ops::reshape(f.it, &q, vec![b, kv, g, t, hd], f.span)?;
    let mut kk = ops::reshape(f.it, &kk, vec![b, kv, 1, t, hd], f.span)?;
    let mut v = ops::reshape(f.it, &v, vec![b, kv, 1, t, hd], f.span)?;
    if let Some(r) = &a.rope {
        q = rope::rotate_from(f, r, &q, past)?;
        kk = rope::rotate_from(f, r, &kk, past)?;
    }
    if let Some(cache) = f.cache.as_mut() {
        (kk, v) = cache.extend(a.id, kk, v);
    }
    let divisor = (hd as f64).sqrt() as f32;
    let tk = kk.shape()[3];
    if a.causal && past > 0 && t > 1 {
        return Err(f.wrong_input(layer, "one new position per cached step", x));
    }
    let sinks = if a.sinks {
        Some(f.weight(&n("s"), &[h])?)
    } else {
        None
    };
    let o = if fused_path {
        let spec = AttentionSpec {
            divisor,
            causal: a.causal,
            window: a.window,
        };
        let q = ops::reshape(f.it, &q, vec![b, h, t, hd], f.span)?;
        let kk = ops::reshape(f.it, &kk, vec![b, kv, tk, hd], f.span)?;
        let v = ops::reshape(f.it, &v, vec![b, kv, tk, hd], f.span)?;
        ops::attention(f.it, [&q, &kk, &v], sinks.as_ref(), spec, f.span)?
    } else {
        let scores = Scores {
            q: &q,
            kk: &kk,
            sinks: sinks.as_ref(),
            divisor,
            dims: [b, kv, g, t],
            past,
        };
        let probs = probabilities_of(f, a, scores, s.len() == 3)?;
        f.mm(&probs, &v)?
    };
    // [B, kv, g, T, hd] → [B, h, T, hd] → [B, T, h, hd] → [B·T, h·hd].
    let o = ops::reshape(f.it, &o, vec![b, h, t, hd], f.span)?;
    let o = ops::permute(f.it, &o, &[0, 2, 1, 3], f.span)?;
    let o = ops::reshape(f.it, &o, vec![b * t, inner], f.span)?;
    let y = f.mm(&o, &wo)?;
    let y = f.add_bias(&y, bias(3).as_ref(), None)?;
    ops::reshape(f.it, &y, s.to_vec(), f.span)
}

/// Queries and keys of at least this many scores per head (T·S, a constant of
/// the shapes, never of the CPU or the threads) go through the backend's fused
/// `attention` kernel, which on the CPU never holds the `[T, S]` scores; below
/// it, and whenever the probabilities are kept (`attention_weights`), the
/// scores are materialised and `masked_softmax` (or the composed mask with
/// sinks and windows) runs on them. The two paths agree within float32
/// rounding, not to the bit, so the switch sits above the sizes of the
/// examples and conformance tests, whose printed numbers stay as they were.
pub const FUSED_MIN_SCORES: usize = 256 * 256;

/// What [`probabilities_of`] computes from: queries `q` `[B, kv, g, T, hd]`,
/// keys `kk` `[B, kv, 1, Tk, hd]` after `past` cached positions, the heads'
/// sink logits, the scores' divisor and `[B, kv, g, T]`.
struct Scores<'a> {
    q: &'a Array,
    kk: &'a Array,
    sinks: Option<&'a Array>,
    divisor: f32,
    dims: [usize; 4],
    past: usize,
}

/// The attention probabilities `[B, kv, g, T, Tk]`, materialised (the path
/// below [`FUSED_MIN_SCORES`]); kept in `f.weights` when the forward pass
/// captures weights and none were captured yet (`batched`: the layer's input
/// had a batch axis).
fn probabilities_of(
    f: &mut Forward<'_>,
    a: &Attention,
    sc: Scores<'_>,
    batched: bool,
) -> Result<Array, Diagnostic> {
    let Scores {
        q,
        kk,
        sinks,
        divisor,
        dims: [b, kv, g, t],
        past,
    } = sc;
    let h = a.heads;
    // q·kᵀ with the keys read transposed where they are (no copy).
    let scores = f.mm_nt(q, kk)?;
    // With cached keys, the new queries are the last positions: one new query
    // sees every key; a first (prefill) step is square.
    let causal = a.causal && (past == 0 || t > 1);
    // softmax(scores / √hd), causally masked: one fused kernel each way.
    let probs = if a.sinks || a.window.is_some() {
        let mask = Mask {
            causal,
            window: a.window,
            past,
        };
        with_sinks(f, &scores, divisor, mask, sinks, [b, kv, g])?
    } else {
        probabilities(f, &scores, divisor, causal)?
    };
    if f.capture && f.weights.is_none() {
        // `[T, T]` for one head, `[heads, T, T]` otherwise, with a leading `B`
        // axis for a batched input (LANGUAGE §10.13).
        let mut shape = Vec::new();
        if batched {
            shape.push(b);
        }
        if h != 1 {
            shape.push(h);
        }
        shape.extend([t, t]);
        let w = ops::reshape(f.it, &probs.clone().detached(), shape, f.span)?;
        f.weights = Some(w);
    }
    Ok(probs)
}

/// The softmax over the last axis of `scores / divisor`, the entries above the
/// diagonal masked first when `causal` (the backend's fused `masked_softmax`,
/// recorded as one op when the scores are on the loss tape). Names are
/// dropped, as `softmax` drops them.
fn probabilities(
    f: &mut Forward<'_>,
    scores: &Array,
    divisor: f32,
    causal: bool,
) -> Result<Array, Diagnostic> {
    let (backend, placement) = ops::placement_for(f.it, "softmax", &[(scores, f.span)])?;
    let out = match loss::live(f.it, scores) {
        Some(v) => loss::record(f.it, "softmax", f.span, |t| {
            t.masked_softmax(v, divisor, causal)
        })?,
        None => Array::from_tensor(
            backend
                .masked_softmax(&scores.tensor(), divisor, causal)
                .map_err(|e| crate::errors::device_error(e, "softmax", f.span))?,
        ),
    };
    Ok(out.with_placement(placement))
}

/// Which keys a query sees: those at or before it when `causal`, and within
/// the last `window` positions when there is one; the queries are the
/// positions after `past` cached ones.
#[derive(Clone, Copy)]
struct Mask {
    causal: bool,
    window: Option<usize>,
    past: usize,
}

/// What is added to a masked score: exp of it after the softmax's shift is 0
/// in float32, and adding it to a finite score gives itself.
const MASKED: f64 = -1e30;

impl Mask {
    /// The additive mask `[T, Tk]`: 0 where query row r (position past + r)
    /// sees key column c, [`MASKED`] elsewhere.
    fn additive(&self, t: usize, tk: usize) -> Array {
        let mut m = Vec::with_capacity(t * tk);
        for r in 0..t {
            let q = self.past + r;
            for k in 0..tk {
                let after = self.causal && k > q;
                let outside = self.window.is_some_and(|w| k + w <= q);
                m.push(if after || outside { MASKED } else { 0.0 });
            }
        }
        Array::from_f64(vec![t, tk], &m)
    }
}

/// softmax over the last axis of `scores / divisor` masked by `mask`, with
/// each head's sink logit (`sinks` `[heads]`, heads = kv·g) in the
/// denominator when given: scores `[B, kv, g, T, Tk]` plus the sink as column
/// Tk, softmax, column Tk dropped. All ordinary differentiable operations.
fn with_sinks(
    f: &mut Forward<'_>,
    scores: &Array,
    divisor: f32,
    mask: Mask,
    sinks: Option<&Array>,
    [b, kv, g]: [usize; 3],
) -> Result<Array, Diagnostic> {
    let s = scores.shape().to_vec();
    let (t, tk) = (s[3], s[4]);
    let scaled = ops::arith(
        f.it,
        BinaryOp::Div,
        scores,
        &Array::exact(divisor as f64),
        f.span,
    )?;
    let masked = ops::arith(f.it, BinaryOp::Add, &scaled, &mask.additive(t, tk), f.span)?;
    let Some(sinks) = sinks else {
        return ops::softmax(f.it, &masked, 4, false, f.span);
    };
    // [heads] → [1, kv, g, 1, 1], broadcast to [B, kv, g, T, 1].
    let sk = ops::reshape(f.it, sinks, vec![1, kv, g, 1, 1], f.span)?;
    let zeros = Array::from_vec(vec![b, kv, g, t, 1], vec![0.0; b * kv * g * t]);
    let sk = ops::arith(f.it, BinaryOp::Add, &zeros, &sk, f.span)?;
    let joined = ops::concat_axis(f.it, &masked, &sk, 4, f.span)?;
    let p = ops::softmax(f.it, &joined, 4, false, f.span)?;
    ops::slice(f.it, &p, 4, 0, 1, tk, f.span)
}

/// `[B·T, n·hd]` → `[B, n, T, hd]`.
fn split_heads(
    f: &mut Forward<'_>,
    x: &Array,
    b: usize,
    t: usize,
    n: usize,
    hd: usize,
) -> Result<Array, Diagnostic> {
    let x = ops::reshape(f.it, x, vec![b, t, n, hd], f.span)?;
    ops::permute(f.it, &x, &[0, 2, 1, 3], f.span)
}
