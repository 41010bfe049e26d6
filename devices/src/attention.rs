//! Fused attention ([`Backend::attention`] and [`Backend::attention_backward`]):
//! what a call computes ([`AttentionSpec`], [`AttentionDims`], which keys a
//! query sees) and the composed default every backend inherits, built from
//! the primitive kernels (batched products, the additive mask, softmax and
//! logsumexp). The default materialises the `[T, S]` scores of every head; the
//! CPU's tiled kernel (`cpu/nn/attention.rs`) computes the same function
//! without them.

#[allow(unused_imports)] // for the docs
use crate::backend::Backend;
use crate::backend::{BinaryOp, ReduceOp, Result, UnaryOp};
use crate::tensor::Tensor;

/// How one attention call masks and scales its scores.
///
/// Query row `r` of `T` sits at position `p = r + S − T` among the `S` keys
/// (the queries are the last `T` positions, as in a prefill or a cached
/// generation step), and sees key `c` when `c ≤ p` (if `causal`) and
/// `c + window > p` (if there is a window). The scores of the keys it sees are
/// divided by `divisor` before the softmax.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionSpec {
    /// Every score `q·k` is divided by this (√head_dim for scaled dot products).
    pub divisor: f32,
    /// Whether a query sees only the keys at or before its position.
    pub causal: bool,
    /// When set, a query sees only the last `window` positions up to its own (≥ 1).
    pub window: Option<usize>,
}

impl AttentionSpec {
    /// Whether the mask depends on positions (so the queries must not
    /// outnumber the keys).
    pub fn positional(&self) -> bool {
        self.causal || self.window.is_some()
    }
}

/// The sizes of one attention call: queries `[b, h, t, d]`, keys and values
/// `[b, kv, s, d]` (each group of `h / kv` consecutive query heads shares one
/// key/value head), sinks `[h]` or `[0]` (none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionDims {
    /// Batch.
    pub b: usize,
    /// Query heads.
    pub h: usize,
    /// Key/value heads (divides `h`).
    pub kv: usize,
    /// Queries per head.
    pub t: usize,
    /// Keys per head.
    pub s: usize,
    /// Head dimension.
    pub d: usize,
    /// Whether each head has a sink logit.
    pub sinks: bool,
}

impl AttentionDims {
    /// The sizes of a call with operands of shapes `q`, `k`, `v` and `sinks`
    /// under `spec`, or why the kernel would not accept them.
    pub fn of(
        q: &[usize],
        k: &[usize],
        v: &[usize],
        sinks: &[usize],
        spec: &AttentionSpec,
    ) -> std::result::Result<AttentionDims, String> {
        let (&[b, h, t, d], &[kb, kv, s, kd]) = (q, k) else {
            return Err(format!(
                "attention of q {q:?} and k {k:?} (need [B, H, T, D] and [B, KV, S, D])"
            ));
        };
        if kb != b || kd != d || v != k || kv == 0 || h % kv != 0 {
            return Err(format!(
                "attention of q {q:?}, k {k:?} and v {v:?}: k and v must be [B, KV, S, D] with KV dividing H"
            ));
        }
        let has_sinks = match sinks {
            [0] => false,
            [n] if *n == h => true,
            _ => {
                return Err(format!(
                    "attention sinks {sinks:?} are neither [{h}] nor [0]"
                ))
            }
        };
        if spec.positional() && s < t {
            return Err(format!(
                "a causal or windowed attention of {t} queries over {s} keys (need S ≥ T)"
            ));
        }
        if spec.window == Some(0) {
            return Err("an attention window of 0 positions".into());
        }
        Ok(AttentionDims {
            b,
            h,
            kv,
            t,
            s,
            d,
            sinks: has_sinks,
        })
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.h / self.kv
    }

    /// The position of query row 0 among the keys.
    pub fn offset(&self) -> usize {
        self.s.saturating_sub(self.t)
    }

    /// The keys `lo..hi` query row `r` sees under `spec` (a contiguous range).
    pub fn visible(&self, r: usize, spec: &AttentionSpec) -> (usize, usize) {
        let p = r + self.offset();
        let hi = if spec.causal {
            (p + 1).min(self.s)
        } else {
            self.s
        };
        let lo = spec.window.map_or(0, |w| (p + 1).saturating_sub(w));
        (lo.min(hi), hi)
    }

    /// Element counts of the outputs of `attention`: `out` (q's) and `lse` `[b, h, t]`.
    pub fn forward_sizes(&self) -> Vec<usize> {
        let rows = self.b * self.h * self.t;
        vec![rows * self.d, rows]
    }

    /// Element counts of the outputs of `attention_backward`: `dq`, `dk`, `dv`.
    pub fn backward_sizes(&self) -> Vec<usize> {
        let q = self.b * self.h * self.t * self.d;
        let kv = self.b * self.kv * self.s * self.d;
        vec![q, kv, kv]
    }

    /// Floating-point operations of the forward pass (multiply-adds count 2):
    /// the scores and the weighted values over the keys each query sees.
    pub fn forward_flops(&self, spec: &AttentionSpec) -> f64 {
        let pairs = self.visible_pairs(spec) as f64;
        (self.b * self.h) as f64 * pairs * (4 * self.d) as f64
    }

    /// Query/key pairs one head computes (the keys each query sees, summed).
    pub fn visible_pairs(&self, spec: &AttentionSpec) -> usize {
        (0..self.t)
            .map(|r| {
                let (lo, hi) = self.visible(r, spec);
                hi - lo
            })
            .sum()
    }
}

/// What the composed default adds to a masked score: its softmax weight is
/// exactly 0 in float32, and adding it to any finite score gives itself.
const MASKED: f32 = -1e30;

/// The sizes of a call, for the composed default (the caller validated them).
fn dims(q: &Tensor, k: &Tensor, v: &Tensor, sinks: &Tensor, spec: &AttentionSpec) -> AttentionDims {
    AttentionDims::of(q.shape(), k.shape(), v.shape(), sinks.shape(), spec)
        .unwrap_or_else(|e| panic!("attention: {e}"))
}

/// The masked, scaled scores `[b, kv, g, t, s]` (plus each head's sink as
/// column `s` when there are sinks), and the queries, keys and values viewed
/// as `[b, kv, g, t, d]` and `[b, kv, 1, s, d]`.
struct Scores {
    logits: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
}

fn scores<B: Backend + ?Sized>(
    be: &B,
    a: &AttentionDims,
    [q, k, v, sinks]: [&Tensor; 4],
    spec: &AttentionSpec,
) -> Result<Scores> {
    let (g, AttentionDims { b, kv, t, s, d, .. }) = (a.group(), *a);
    let q = q.reshape(vec![b, kv, g, t, d]);
    let k = k.reshape(vec![b, kv, 1, s, d]);
    let v = v.reshape(vec![b, kv, 1, s, d]);
    let raw = be.matmul_t(&q, &k, false, true)?;
    let divisor = be.upload(&Tensor::scalar(spec.divisor))?;
    let mut x = be.binary(BinaryOp::Div, &raw, &divisor)?;
    if spec.positional() {
        let mut m = vec![0.0; t * s];
        for (r, row) in m.chunks_mut(s.max(1)).enumerate() {
            let (lo, hi) = a.visible(r, spec);
            row[..lo].fill(MASKED);
            row[hi..].fill(MASKED);
        }
        let m = be.upload(&Tensor::from_vec(vec![t, s], m))?;
        x = be.binary(BinaryOp::Add, &x, &m)?;
    }
    if a.sinks {
        // The sinks [h] as a column [b, kv, g, t, 1], joined after the scores.
        let zeros = be.upload(&Tensor::zeros(vec![b, kv, g, t, 1]))?;
        let col = be.binary(BinaryOp::Add, &zeros, &sinks.reshape(vec![1, kv, g, 1, 1]))?;
        let shape = [b, kv, g, t, s + 1];
        let left = be.unslice_axis(&x, &shape, 4, 0, 1)?;
        let right = be.unslice_axis(&col, &shape, 4, s, 1)?;
        x = be.binary(BinaryOp::Add, &left, &right)?;
    }
    Ok(Scores { logits: x, q, k, v })
}

/// The composed [`Backend::attention`]: scores, mask, softmax and the product
/// with the values, every head's `[T, S]` probabilities materialised.
pub(crate) fn composed_attention<B: Backend + ?Sized>(
    be: &B,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    sinks: &Tensor,
    spec: &AttentionSpec,
) -> Result<(Tensor, Tensor)> {
    let a = dims(q, k, v, sinks, spec);
    let sc = scores(be, &a, [q, k, v, sinks], spec)?;
    let lse = be.logsumexp(&sc.logits, 4)?;
    let mut p = be.softmax(&sc.logits, 4)?;
    if a.sinks {
        p = be.slice_axis(&p, 4, 0, 1, a.s)?;
    }
    let out = be.matmul(&p, &sc.v)?;
    Ok((
        out.reshape(vec![a.b, a.h, a.t, a.d]),
        lse.reshape(vec![a.b, a.h, a.t]),
    ))
}

/// The composed [`Backend::attention_backward`]: the probabilities recomputed
/// from the saved logsumexp, then `dS = P ∘ (dP − Σ dO ∘ O)` and the three
/// products (key and value gradients summed over the heads of a group).
#[allow(clippy::too_many_arguments)]
pub(crate) fn composed_attention_backward<B: Backend + ?Sized>(
    be: &B,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    lse: &Tensor,
    dout: &Tensor,
    spec: &AttentionSpec,
) -> Result<(Tensor, Tensor, Tensor)> {
    let none = Tensor::zeros(vec![0]);
    let a = dims(q, k, v, &none, spec);
    let (g, AttentionDims { b, kv, t, s, d, .. }) = (a.group(), a);
    let sc = scores(be, &a, [q, k, v, &none], spec)?;
    let lse = lse.reshape(vec![b, kv, g, t, 1]);
    let p = be.unary(UnaryOp::Exp, &be.binary(BinaryOp::Sub, &sc.logits, &lse)?)?;
    let dout = dout.reshape(vec![b, kv, g, t, d]);
    let out = out.reshape(vec![b, kv, g, t, d]);
    let delta = be.reduce(
        ReduceOp::Sum,
        &be.binary(BinaryOp::Mul, &dout, &out)?,
        Some(4),
    )?;
    let delta = delta.reshape(vec![b, kv, g, t, 1]);
    let dp = be.matmul_t(&dout, &sc.v, false, true)?;
    let ds = be.binary(BinaryOp::Mul, &p, &be.binary(BinaryOp::Sub, &dp, &delta)?)?;
    let divisor = be.upload(&Tensor::scalar(spec.divisor))?;
    let ds = be.binary(BinaryOp::Div, &ds, &divisor)?;
    let dq = be.matmul(&ds, &sc.k)?;
    let kv_shape = [b, kv, 1, s, d];
    let dk = be.sum_to_shape(&be.matmul_t(&ds, &sc.q, true, false)?, &kv_shape)?;
    let dv = be.sum_to_shape(&be.matmul_t(&p, &dout, true, false)?, &kv_shape)?;
    Ok((
        dq.reshape(vec![b, a.h, t, d]),
        dk.reshape(vec![b, kv, s, d]),
        dv.reshape(vec![b, kv, s, d]),
    ))
}
