//! Creating layers: model ids, parameter names and initial values (LANGUAGE §11.1,
//! §11.2, §13.8). Random values are drawn in float64, scaled in float64 and
//! rounded to float32 once.

use super::layers::*;
use crate::data::rng;
use crate::eval::Interp;
use crate::value::{Array, Value};

/// Takes the next model id of the workspace (LANGUAGE §11.1).
pub fn next_id(it: &mut Interp) -> u64 {
    let k = it.ws.model_counter;
    it.ws.model_counter = k.wrapping_add(1);
    k
}

/// Binds `name` to `value` as a tracked parameter.
pub fn bind_param(it: &mut Interp, name: &str, value: Array) {
    it.ws.assign(name, Value::Array(value), true);
}

/// `scale · randn(seed, shape)`, scaled in float64 and rounded once.
pub fn randn_scaled(seed: u64, shape: &[usize], scale: f64) -> Array {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = rng::normal_vec(seed, n)
        .into_iter()
        .map(|z| z * scale)
        .collect();
    Array::from_f64(shape.to_vec(), &values)
}

/// An array of `shape` filled with `v`.
pub fn filled(shape: &[usize], v: f32) -> Array {
    let n: usize = shape.iter().product();
    Array::from_vec(shape.to_vec(), vec![v; n])
}

/// `linear(in, out, seed [, bias])`: W = 0.5·randn(seed, [in, out]), b = 0
/// when it has a bias.
pub fn linear(it: &mut Interp, inp: usize, out: usize, seed: u64, bias: bool) -> Layer {
    let l = Linear {
        id: next_id(it),
        inp,
        out,
        bias,
    };
    bind_param(it, &l.w(), randn_scaled(seed, &[inp, out], 0.5));
    if bias {
        bind_param(it, &l.b(), filled(&[1, out], 0.0));
    }
    Layer::Linear(l)
}

/// `pos_embed(max_pos, d, seed)`: P = 0.1·randn(seed, [max_pos, d]).
pub fn pos_embed(it: &mut Interp, max_pos: usize, d: usize, seed: u64) -> Layer {
    let layer = Layer::PosEmbed(PosEmbed {
        id: next_id(it),
        max_pos,
        d,
    });
    for p in layer.own_params() {
        bind_param(it, &p.name, randn_scaled(seed, &p.shape, 0.1));
    }
    layer
}

/// `embed(vocab, d, seed)`: E = 0.1·randn(seed, [vocab, d]).
pub fn embed(it: &mut Interp, vocab: usize, d: usize, seed: u64) -> Layer {
    let e = Embed {
        id: next_id(it),
        vocab,
        d,
    };
    let layer = Layer::Embed(e);
    for p in layer.own_params() {
        bind_param(it, &p.name, randn_scaled(seed, &p.shape, 0.1));
    }
    layer
}

/// `attention(…)` / `causal_attention(…)`: Wq, Wk, Wv, Wo = 0.5·randn(seed + 0, 1, 2, 3),
/// biases 0 and q/k norm gains 1. `a.id` is replaced by a fresh id. The caller
/// has checked the sizes (`kv_heads` divides `heads`).
pub fn attention(it: &mut Interp, a: Attention, seed: u64) -> Layer {
    let layer = Layer::Attention(Attention {
        id: next_id(it),
        ..a
    });
    for (i, p) in layer.own_params().into_iter().enumerate() {
        let value = match p.role {
            "Wq" | "Wk" | "Wv" | "Wo" => randn_scaled(seed.wrapping_add(i as u64), &p.shape, 0.5),
            "qn" | "kn" => filled(&p.shape, 1.0),
            _ => filled(&p.shape, 0.0),
        };
        bind_param(it, &p.name, value);
    }
    layer
}

/// `rms_norm(dim [, gain [, eps]])`: a gain g = 1 when `gain` is set.
pub fn rms_norm(it: &mut Interp, dim: usize, gain: bool, eps: f64) -> Layer {
    let layer = Layer::RmsNorm(RmsNorm {
        dim,
        gain: gain.then(|| next_id(it)),
        eps,
    });
    for p in layer.own_params() {
        bind_param(it, &p.name, filled(&p.shape, 1.0));
    }
    layer
}

/// `layer_norm(d [, eps])`: g = 1, b = 0.
pub fn layer_norm(it: &mut Interp, d: usize, eps: f64) -> Layer {
    let layer = Layer::LayerNorm(LayerNorm {
        id: next_id(it),
        d,
        eps,
    });
    for p in layer.own_params() {
        let v = if p.role == "g" { 1.0 } else { 0.0 };
        bind_param(it, &p.name, filled(&p.shape, v));
    }
    layer
}

/// `swiglu(d, hidden, seed)`: Wg, Wu = randn(seed, seed+1)/√d, Wd = randn(seed+2)/√hidden.
pub fn swiglu(it: &mut Interp, d: usize, hidden: usize, seed: u64) -> Layer {
    let layer = Layer::SwiGlu(SwiGlu {
        id: next_id(it),
        d,
        hidden,
    });
    let scales = [inv_sqrt(d), inv_sqrt(d), inv_sqrt(hidden)];
    for (i, p) in layer.own_params().into_iter().enumerate() {
        bind_param(
            it,
            &p.name,
            randn_scaled(seed.wrapping_add(i as u64), &p.shape, scales[i]),
        );
    }
    layer
}

/// `moe(d, experts, top_k, hidden, seed [, …])`: R, Wg, Wu = randn(seed + 0,
/// 1, 2)/√d, Wd = randn(seed + 3)/√hidden, the biases (when it has them) 0.
pub fn moe(it: &mut Interp, m: Moe, seed: u64) -> Layer {
    let (d, hidden) = (m.d, m.hidden);
    let layer = Layer::Moe(Moe {
        id: next_id(it),
        ..m
    });
    let scales = [inv_sqrt(d), inv_sqrt(d), inv_sqrt(d), inv_sqrt(hidden)];
    for (i, p) in layer.own_params().into_iter().enumerate() {
        let value = match scales.get(i) {
            Some(&s) => randn_scaled(seed.wrapping_add(i as u64), &p.shape, s),
            None => filled(&p.shape, 0.0),
        };
        bind_param(it, &p.name, value);
    }
    layer
}

/// `engram(d, rows, heads, seed)` (`vocab` None) and `engram_embed(vocab, d,
/// rows, heads, seed)`: E = 0.1·randn(seed) (embedding form only), T =
/// 0.1·randn(seed + 1), Wk, Wv = randn(seed + 2, seed + 3)/√d, C = 0; the hash
/// keys derive from `seed`. The caller has checked that 2·heads divides d.
pub fn engram(
    it: &mut Interp,
    vocab: Option<usize>,
    d: usize,
    rows: usize,
    heads: usize,
    seed: u64,
) -> Layer {
    let layer = Layer::Engram(Engram {
        id: next_id(it),
        vocab,
        d,
        rows,
        heads,
        seed,
    });
    for p in layer.own_params() {
        let value = match p.role {
            "E" => randn_scaled(seed, &p.shape, 0.1),
            "T" => randn_scaled(seed.wrapping_add(1), &p.shape, 0.1),
            "Wk" => randn_scaled(seed.wrapping_add(2), &p.shape, inv_sqrt(d)),
            "Wv" => randn_scaled(seed.wrapping_add(3), &p.shape, inv_sqrt(d)),
            _ => filled(&p.shape, 0.0),
        };
        bind_param(it, &p.name, value);
    }
    layer
}

/// 1/√n in float64.
pub fn inv_sqrt(n: usize) -> f64 {
    1.0 / (n as f64).sqrt()
}

/// The total number of elements the parameters of a new layer would have, or
/// `None` on overflow (the constructors check it against the allocation limit).
pub fn elements(shapes: &[Vec<usize>]) -> Option<usize> {
    shapes.iter().try_fold(0usize, |acc, s| {
        let n = s.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
        acc.checked_add(n)
    })
}
