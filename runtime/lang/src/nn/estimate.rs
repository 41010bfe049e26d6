//! The model side of `estimate_train` (LANGUAGE §15.2): forward FLOPs and
//! activation elements per token of every layer occurrence, for a batch of
//! `[B, S, …]` (R = B·S rows enter every layer), and the five numbers of the
//! estimate.

use std::collections::HashSet;

use super::layers::Layer;
use crate::estimate::Estimate;

/// Forward FLOPs and activation elements per token of a model.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Forward FLOPs for one batch.
    pub flops: f64,
    /// Elements kept for the backward pass, per token.
    pub activations: f64,
}

/// The cost of `layer` for batch `b` and sequence length `s`.
pub fn cost(layer: &Layer, b: f64, s: f64) -> Cost {
    let mut c = Cost::default();
    walk(layer, b, s, None, &mut c);
    c
}

/// Adds the cost of `layer` given the width `w` entering it (`None` before any
/// layer that fixes one) and returns the width leaving it.
fn walk(layer: &Layer, b: f64, s: f64, w: Option<f64>, c: &mut Cost) -> Option<f64> {
    let r = b * s;
    let width = w.unwrap_or(0.0);
    match layer {
        Layer::Linear(l) => {
            let (i, o) = (l.inp as f64, l.out as f64);
            c.flops += 2.0 * i * o * r;
            c.activations += o;
            Some(o)
        }
        Layer::Lora(l) => {
            let (i, o, k) = (l.base.inp as f64, l.base.out as f64, l.rank as f64);
            c.flops += 2.0 * i * o * r + 2.0 * (i + o) * k * r;
            c.activations += o + k;
            Some(o)
        }
        Layer::Embed(e) => {
            c.activations += e.d as f64;
            Some(e.d as f64)
        }
        Layer::Unembed(e) => {
            c.flops += 2.0 * e.d as f64 * e.vocab as f64 * r;
            c.activations += e.vocab as f64;
            Some(e.vocab as f64)
        }
        Layer::PosEmbed(p) => {
            c.activations += p.d as f64;
            Some(p.d as f64)
        }
        Layer::Attention(a) => {
            let (d, h, kv, hd, q) = (
                a.d as f64,
                a.heads as f64,
                a.kv_heads as f64,
                a.head_dim() as f64,
                a.inner() as f64,
            );
            c.flops += 2.0 * r * d * (2.0 * q + 2.0 * kv * hd) + 4.0 * b * s * s * q;
            c.activations += 2.0 * q + d + 2.0 * kv * hd + 2.0 * h * s;
            Some(d)
        }
        Layer::RmsNorm(n) => {
            let w = w.unwrap_or(n.dim as f64);
            c.activations += w + 1.0;
            Some(w)
        }
        Layer::LayerNorm(n) => {
            let w = w.unwrap_or(n.d as f64);
            c.activations += w + 2.0;
            Some(w)
        }
        Layer::Activation(_) | Layer::Rope(_) => {
            c.activations += width;
            w
        }
        Layer::Dropout(_) => {
            c.activations += 2.0 * width;
            w
        }
        Layer::SwiGlu(sw) => {
            let (d, hid) = (sw.d as f64, sw.hidden as f64);
            c.flops += 6.0 * d * hid * r;
            c.activations += 4.0 * hid + d;
            Some(d)
        }
        Layer::Moe(m) => {
            let (d, e, k, hid) = (
                m.d as f64,
                m.experts as f64,
                m.top_k as f64,
                m.hidden as f64,
            );
            c.flops += 2.0 * d * e * r + k * 6.0 * d * hid * r;
            c.activations += 2.0 * e + k * (4.0 * hid + d) + d;
            Some(d)
        }
        Layer::Engram(g) => {
            // The lookup is O(1) per token and FLOP-free: Wk and Wv, the gate,
            // the convolution and the residual adds are the work.
            let (d, k) = (g.d as f64, super::layers::ENGRAM_TAPS as f64);
            c.flops += 4.0 * d * d * r + 2.0 * k * d * r + 10.0 * d * r;
            c.activations += 7.0 * d + 2.0 + g.vocab.map_or(0.0, |_| d);
            Some(d)
        }
        Layer::Chain(children) => children.iter().fold(w, |w, ch| walk(ch, b, s, w, c)),
        Layer::Residual(inner) => {
            let out = walk(inner, b, s, w, c);
            c.activations += width;
            out.or(w)
        }
    }
}

/// `estimate_train(model, steps, batch, seq, dtype_bytes)` at `gflops`: the
/// parameters are counted from their declared shapes, those in `frozen` excluded
/// from the trainable count.
pub fn estimate_train(
    layer: &Layer,
    frozen: &HashSet<String>,
    steps: f64,
    batch: f64,
    seq: f64,
    dt: f64,
    gflops: f64,
) -> Estimate {
    let mut p = 0.0;
    let mut tr = 0.0;
    for spec in layer.param_specs() {
        let n = spec.shape.iter().map(|&d| d as f64).product::<f64>();
        p += n;
        if !frozen.contains(&spec.name) {
            tr += n;
        }
    }
    let c = cost(layer, batch, seq);
    let act_bytes = dt * batch * seq * c.activations;
    let flops = 3.0 * c.flops * steps;
    Estimate {
        params: p,
        vram_bytes: (p + tr + 2.0 * tr) * dt + act_bytes,
        disk_bytes: p * dt,
        flops,
        wall_seconds: flops / (gflops * 1e9),
    }
}

/// The number of elements of the distinct parameters of `layer`.
pub fn param_count(layer: &Layer) -> f64 {
    layer
        .param_specs()
        .iter()
        .map(|p| p.shape.iter().map(|&d| d as f64).product::<f64>())
        .sum()
}

/// The Engram tables of a model, counted apart from the rest (their point is
/// cheap memory, not FLOPs): `params` table elements (of the distinct Engram
/// layers), `trainable` those not frozen, and `bytes` their training memory
/// at `dt` bytes per element (weights, plus gradient and two Adam moments of
/// the trainable ones), which `estimate_train`'s memory includes. `touched` is
/// the rows a `[batch, seq]` batch reads (at most orders·heads per token).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tables {
    /// Table elements.
    pub params: f64,
    /// Table elements not frozen.
    pub trainable: f64,
    /// Training bytes of the tables.
    pub bytes: f64,
    /// Table rows one batch touches (an upper bound).
    pub touched: f64,
}

/// [`Tables`] of `layer` for a `[batch, seq]` batch at `dt` bytes per element.
pub fn tables(layer: &Layer, frozen: &HashSet<String>, batch: f64, seq: f64, dt: f64) -> Tables {
    let mut t = Tables::default();
    layer.walk_distinct(&mut |l| {
        if let Layer::Engram(g) = l {
            let n = (g.table_rows() * g.slot_width()) as f64;
            let name = format!("__engram_T_{}", g.id);
            t.params += n;
            if !frozen.contains(&name) {
                t.trainable += n;
            }
            t.touched += (g.slots() as f64 * batch * seq).min(g.table_rows() as f64);
        }
    });
    t.bytes = (t.params + 3.0 * t.trainable) * dt;
    t
}
