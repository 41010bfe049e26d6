//! The one mapping between an MLPL layer tree and a Hugging Face checkpoint
//! (docs/models.md): [`build`] makes the tree a configuration describes, and
//! [`plan`] reads a tree back as a configuration plus one [`Binding`] per
//! parameter (which tensor of the checkpoint it is, in which layout). Loading
//! and saving both go through [`plan`], so they cannot disagree.

use std::sync::Arc;

use super::config::{Config, Family, Oss};
use crate::nn::layers::*;

/// How a parameter sits in its checkpoint tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The same values, the same shape.
    Same,
    /// A `[out, in]` weight of `torch.nn.Linear`; MLPL's is `[in, out]`.
    Transposed,
    /// A bias `[n]`; MLPL's is `[1, n]`.
    Row,
    /// Columns `start..start + w` of a fused tensor `[r, total]` (or `[total]`
    /// for a bias), e.g. GPT-2's `c_attn` holding q, k and v.
    Columns {
        /// The first column.
        start: usize,
    },
    /// Every second entry of the last axis, from `offset`: GPT-OSS's
    /// `gate_up_proj` `[E, d, 2h]` interleaves the gate (even columns) and up
    /// (odd columns) projections; MLPL's Wg, Wu are `[E, d, h]` (and the biases
    /// `[E, 2h]` ↔ `[E, 1, h]`).
    Interleaved {
        /// 0 for the gate, 1 for up.
        offset: usize,
    },
}

/// One parameter of the model and its tensor in the checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    /// The workspace name of the parameter.
    pub param: String,
    /// Its MLPL shape.
    pub shape: Vec<usize>,
    /// The checkpoint's tensor name.
    pub hf: String,
    /// The checkpoint tensor's shape.
    pub hf_shape: Vec<usize>,
    /// How the values are laid out there.
    pub layout: Layout,
}

/// The layer tree of `c`, its parameter ids drawn from `id`.
pub fn build(c: &Config, id: &mut dyn FnMut() -> u64) -> Layer {
    let embed = Embed {
        id: id(),
        vocab: c.vocab,
        d: c.d,
    };
    let mut children = vec![Arc::new(Layer::Embed(embed))];
    let gpt2 = c.family == Family::Gpt2;
    if gpt2 {
        children.push(Arc::new(Layer::PosEmbed(PosEmbed {
            id: id(),
            max_pos: c.positions,
            d: c.d,
        })));
    }
    let norm = |id: &mut dyn FnMut() -> u64| {
        Arc::new(if gpt2 {
            Layer::LayerNorm(LayerNorm {
                id: id(),
                d: c.d,
                eps: c.eps,
            })
        } else {
            Layer::RmsNorm(RmsNorm {
                dim: c.d,
                gain: Some(id()),
                eps: c.eps,
            })
        })
    };
    for _ in 0..c.layers {
        let rope = (!gpt2).then_some(Rope {
            head_dim: c.head_dim,
            base: c.rope_theta,
            scaling: c.rope_scaling,
        });
        let layer = children.len().saturating_sub(1 + usize::from(gpt2)) / 2;
        let window = c
            .oss
            .as_ref()
            .and_then(|o| {
                o.sliding
                    .get(layer)
                    .copied()
                    .unwrap_or(false)
                    .then_some(o.window)
            })
            .flatten();
        let attention = Layer::Attention(Attention {
            id: id(),
            d: c.d,
            heads: c.heads,
            kv_heads: c.kv_heads,
            causal: true,
            rope,
            hd: c.head_dim,
            bias: c.attention_bias,
            qk_norm: (c.family == Family::Qwen3).then_some(c.eps),
            sinks: c.family == Family::GptOss,
            window,
        });
        let n1 = norm(id);
        children.push(Arc::new(Layer::Residual(Arc::new(Layer::Chain(vec![
            n1,
            Arc::new(attention),
        ])))));
        let n2 = norm(id);
        let mlp: Vec<Arc<Layer>> = if gpt2 {
            let up = Linear {
                id: id(),
                inp: c.d,
                out: c.hidden,
                bias: true,
            };
            let down = Linear {
                id: id(),
                inp: c.hidden,
                out: c.d,
                bias: true,
            };
            vec![
                n2,
                Arc::new(Layer::Linear(up)),
                Arc::new(Layer::Activation(Activation::Gelu)),
                Arc::new(Layer::Linear(down)),
            ]
        } else if let Some(o) = &c.oss {
            vec![
                n2,
                Arc::new(Layer::Moe(Moe {
                    id: id(),
                    d: c.d,
                    experts: o.experts,
                    top_k: o.top_k,
                    hidden: c.hidden,
                    bias: true,
                    gate: MoeGate::Clamped {
                        alpha: o.alpha,
                        limit: o.limit,
                    },
                    softmax_after: true,
                })),
            ]
        } else {
            vec![
                n2,
                Arc::new(Layer::SwiGlu(SwiGlu {
                    id: id(),
                    d: c.d,
                    hidden: c.hidden,
                })),
            ]
        };
        children.push(Arc::new(Layer::Residual(Arc::new(Layer::Chain(mlp)))));
    }
    children.push(norm(id));
    children.push(Arc::new(if c.tied {
        Layer::Unembed(embed)
    } else {
        Layer::Linear(Linear {
            id: id(),
            inp: c.d,
            out: c.vocab,
            bias: false,
        })
    }));
    Layer::Chain(children)
}

/// Collects bindings with the family's names.
struct Planner {
    family: Family,
    out: Vec<Binding>,
}

impl Planner {
    fn bind(
        &mut self,
        param: String,
        shape: Vec<usize>,
        hf: String,
        layout: Layout,
        hf_shape: Vec<usize>,
    ) {
        self.out.push(Binding {
            param,
            shape,
            hf,
            hf_shape,
            layout,
        });
    }

    /// A `[in, out]` weight stored `[out, in]`.
    fn linear_weight(&mut self, param: String, inp: usize, out: usize, hf: String) {
        self.bind(
            param,
            vec![inp, out],
            hf,
            Layout::Transposed,
            vec![out, inp],
        );
    }

    fn norm(&mut self, layer: &Layer, prefix: &str) -> Result<(), String> {
        match layer {
            Layer::RmsNorm(RmsNorm {
                dim, gain: Some(k), ..
            }) if self.family != Family::Gpt2 => {
                self.bind(
                    format!("__rms_g_{k}"),
                    vec![*dim],
                    format!("{prefix}.weight"),
                    Layout::Same,
                    vec![*dim],
                );
                Ok(())
            }
            Layer::LayerNorm(l) if self.family == Family::Gpt2 => {
                self.bind(
                    format!("__ln_g_{}", l.id),
                    vec![l.d],
                    format!("{prefix}.weight"),
                    Layout::Same,
                    vec![l.d],
                );
                self.bind(
                    format!("__ln_b_{}", l.id),
                    vec![l.d],
                    format!("{prefix}.bias"),
                    Layout::Same,
                    vec![l.d],
                );
                Ok(())
            }
            other => Err(format!(
                "expected the family's norm, found `{}`",
                other.describe()
            )),
        }
    }

    fn attention(&mut self, a: &Attention, i: usize) -> Result<(), String> {
        let (d, q, kv) = (a.d, a.inner(), a.kv_heads * a.hd);
        let n = |r: &str| a.param_name(r);
        if self.family == Family::Gpt2 {
            let p = format!("transformer.h.{i}.attn");
            let total = q + 2 * kv;
            for (k, (role, w)) in [("q", q), ("k", kv), ("v", kv)].into_iter().enumerate() {
                let start = [0, q, q + kv][k];
                self.bind(
                    n(&format!("W{role}")),
                    vec![d, w],
                    format!("{p}.c_attn.weight"),
                    Layout::Columns { start },
                    vec![d, total],
                );
                self.bind(
                    n(&format!("b{role}")),
                    vec![1, w],
                    format!("{p}.c_attn.bias"),
                    Layout::Columns { start },
                    vec![total],
                );
            }
            self.bind(
                n("Wo"),
                vec![q, d],
                format!("{p}.c_proj.weight"),
                Layout::Same,
                vec![q, d],
            );
            self.bind(
                n("bo"),
                vec![1, d],
                format!("{p}.c_proj.bias"),
                Layout::Row,
                vec![d],
            );
            return Ok(());
        }
        let p = format!("model.layers.{i}.self_attn");
        self.linear_weight(n("Wq"), d, q, format!("{p}.q_proj.weight"));
        self.linear_weight(n("Wk"), d, kv, format!("{p}.k_proj.weight"));
        self.linear_weight(n("Wv"), d, kv, format!("{p}.v_proj.weight"));
        self.linear_weight(n("Wo"), q, d, format!("{p}.o_proj.weight"));
        if a.bias {
            for (role, w, hf) in [
                ("bq", q, "q_proj"),
                ("bk", kv, "k_proj"),
                ("bv", kv, "v_proj"),
                ("bo", d, "o_proj"),
            ] {
                self.bind(
                    n(role),
                    vec![1, w],
                    format!("{p}.{hf}.bias"),
                    Layout::Row,
                    vec![w],
                );
            }
        }
        if a.sinks {
            self.bind(
                n("s"),
                vec![a.heads],
                format!("{p}.sinks"),
                Layout::Same,
                vec![a.heads],
            );
        }
        if a.qk_norm.is_some() {
            self.bind(
                n("qn"),
                vec![a.hd],
                format!("{p}.q_norm.weight"),
                Layout::Same,
                vec![a.hd],
            );
            self.bind(
                n("kn"),
                vec![a.hd],
                format!("{p}.k_norm.weight"),
                Layout::Same,
                vec![a.hd],
            );
        }
        Ok(())
    }

    /// GPT-OSS's router and experts (`…mlp.router`, `…mlp.experts`).
    fn moe(&mut self, m: &Moe, mp: &str) {
        let (e, d, h, k) = (m.experts, m.d, m.hidden, m.id);
        let name = |r: &str| format!("__moe_{r}_{k}");
        self.linear_weight(name("R"), d, e, format!("{mp}.router.weight"));
        self.bind(
            name("bR"),
            vec![1, e],
            format!("{mp}.router.bias"),
            Layout::Row,
            vec![e],
        );
        let x = format!("{mp}.experts");
        for (role, offset) in [("Wg", 0), ("Wu", 1)] {
            self.bind(
                name(role),
                vec![e, d, h],
                format!("{x}.gate_up_proj"),
                Layout::Interleaved { offset },
                vec![e, d, 2 * h],
            );
        }
        for (role, offset) in [("bg", 0), ("bu", 1)] {
            self.bind(
                name(role),
                vec![e, 1, h],
                format!("{x}.gate_up_proj_bias"),
                Layout::Interleaved { offset },
                vec![e, 2 * h],
            );
        }
        self.bind(
            name("Wd"),
            vec![e, h, d],
            format!("{x}.down_proj"),
            Layout::Same,
            vec![e, h, d],
        );
        self.bind(
            name("bd"),
            vec![e, 1, d],
            format!("{x}.down_proj_bias"),
            Layout::Row,
            vec![e, d],
        );
    }
}

/// The parts of a `residual(chain(norm, …))` block.
fn block(layer: &Layer) -> Option<&[Arc<Layer>]> {
    match layer {
        Layer::Residual(inner) => match &**inner {
            Layer::Chain(c) if c.len() >= 2 => Some(c),
            _ => None,
        },
        _ => None,
    }
}

/// Reads `layer` as a checkpoint of one of the families: its configuration and
/// the binding of every parameter. An error says where the tree departs from
/// the families' shape (docs/models.md).
pub fn plan(layer: &Layer) -> Result<(Config, Vec<Binding>), String> {
    let Layer::Chain(children) = layer else {
        return Err("the model is not a chain of embed, blocks, norm and head".into());
    };
    let Some(Layer::Embed(embed)) = children.first().map(|c| &**c) else {
        return Err("the model does not start with an `embed` layer".into());
    };
    let gpt2 = matches!(children.get(1).map(|c| &**c), Some(Layer::PosEmbed(_)));
    let first = if gpt2 { 2 } else { 1 };
    let blocks = &children[first..children.len().saturating_sub(2).max(first)];
    if blocks.len() % 2 != 0 || children.len() < first + 2 {
        return Err(
            "expected pairs of attention and feed-forward blocks, then a norm and a head".into(),
        );
    }
    let attn_of = |b: &Arc<Layer>| -> Option<Attention> {
        match block(b)?.get(1).map(|l| &**l) {
            Some(Layer::Attention(a)) => Some(*a),
            _ => None,
        }
    };
    let a0 = blocks.first().and_then(attn_of);
    let family = if gpt2 {
        Family::Gpt2
    } else if a0.is_some_and(|a| a.sinks) {
        Family::GptOss
    } else if a0.is_some_and(|a| a.qk_norm.is_some()) {
        Family::Qwen3
    } else {
        Family::Llama
    };
    let mut oss: Option<Oss> = None;
    let mut p = Planner {
        family,
        out: Vec::new(),
    };
    let (vocab, d) = (embed.vocab, embed.d);
    let embed_name = if gpt2 {
        "transformer.wte.weight"
    } else {
        "model.embed_tokens.weight"
    };
    p.bind(
        format!("__embed_E_{}", embed.id),
        vec![vocab, d],
        embed_name.into(),
        Layout::Same,
        vec![vocab, d],
    );
    let mut positions = 0;
    if let Layer::PosEmbed(pe) = &*children[1] {
        positions = pe.max_pos;
        p.bind(
            format!("__pos_P_{}", pe.id),
            vec![pe.max_pos, pe.d],
            "transformer.wpe.weight".into(),
            Layout::Same,
            vec![pe.max_pos, pe.d],
        );
    }
    let mut eps = 0.0;
    let mut hidden = 0;
    let layer_prefix = |i: usize| {
        if gpt2 {
            format!("transformer.h.{i}")
        } else {
            format!("model.layers.{i}")
        }
    };
    for (i, pair) in blocks.chunks(2).enumerate() {
        let (Some(att), Some(mlp)) = (block(&pair[0]), block(&pair[1])) else {
            return Err(format!("block {i} is not residual(chain(norm, …)) twice"));
        };
        let pre = layer_prefix(i);
        let (n1, n2) = if gpt2 {
            ("ln_1", "ln_2")
        } else {
            ("input_layernorm", "post_attention_layernorm")
        };
        p.norm(&att[0], &format!("{pre}.{n1}"))?;
        eps = match &*att[0] {
            Layer::RmsNorm(r) => r.eps,
            Layer::LayerNorm(l) => l.eps,
            _ => eps,
        };
        let Some(Layer::Attention(a)) = att.get(1).map(|l| &**l) else {
            return Err(format!("block {i} has no attention layer"));
        };
        if att.len() != 2 || !a.causal || a.d != d {
            return Err(format!(
                "block {i}'s attention is not a causal attention of width {d}"
            ));
        }
        if a.sinks != (family == Family::GptOss) {
            return Err(format!(
                "block {i}'s attention {} sinks, unlike block 0's",
                if a.sinks { "has" } else { "has no" }
            ));
        }
        if a.window.is_some() && family != Family::GptOss {
            return Err(format!(
                "block {i}'s attention has a sliding window, which only GPT-OSS checkpoints hold"
            ));
        }
        p.attention(a, i)?;
        p.norm(&mlp[0], &format!("{pre}.{n2}"))?;
        match (gpt2, &mlp[1..]) {
            (false, [m]) if family == Family::GptOss => {
                let Layer::Moe(m) = &**m else {
                    return Err(format!("block {i}'s feed-forward is not a `moe`"));
                };
                let MoeGate::Clamped { alpha, limit } = m.gate else {
                    return Err(format!(
                        "block {i}'s `moe` does not use the clamped gated activation"
                    ));
                };
                if !m.bias || !m.softmax_after || m.d != d {
                    return Err(format!(
                        "block {i}'s `moe` is not GPT-OSS's (width {d}, biases, softmax after top-k)"
                    ));
                }
                hidden = m.hidden;
                let o = oss.get_or_insert(Oss {
                    experts: m.experts,
                    top_k: m.top_k,
                    alpha,
                    limit,
                    window: None,
                    sliding: Vec::new(),
                });
                if (o.experts, o.top_k, o.alpha, o.limit) != (m.experts, m.top_k, alpha, limit) {
                    return Err(format!("block {i}'s `moe` differs from block 0's"));
                }
                o.sliding.push(a.window.is_some());
                if let Some(w) = a.window {
                    if o.window.is_some_and(|ow| ow != w) {
                        return Err(format!(
                            "block {i}'s sliding window differs from an earlier one"
                        ));
                    }
                    o.window = Some(w);
                }
                p.moe(m, &format!("{pre}.mlp"));
            }
            (false, [s]) => {
                let Layer::SwiGlu(s) = &**s else {
                    return Err(format!("block {i}'s feed-forward is not a `swiglu`"));
                };
                hidden = s.hidden;
                let k = s.id;
                let mp = format!("{pre}.mlp");
                p.linear_weight(
                    format!("__swiglu_Wg_{k}"),
                    s.d,
                    s.hidden,
                    format!("{mp}.gate_proj.weight"),
                );
                p.linear_weight(
                    format!("__swiglu_Wu_{k}"),
                    s.d,
                    s.hidden,
                    format!("{mp}.up_proj.weight"),
                );
                p.linear_weight(
                    format!("__swiglu_Wd_{k}"),
                    s.hidden,
                    s.d,
                    format!("{mp}.down_proj.weight"),
                );
            }
            (true, [up, act, down]) => {
                let (Layer::Linear(up), Layer::Activation(Activation::Gelu), Layer::Linear(down)) =
                    (&**up, &**act, &**down)
                else {
                    return Err(format!(
                        "block {i}'s feed-forward is not linear, gelu_layer, linear"
                    ));
                };
                hidden = up.out;
                let mp = format!("{pre}.mlp");
                for (l, hf) in [(up, "c_fc"), (down, "c_proj")] {
                    p.bind(
                        l.w(),
                        vec![l.inp, l.out],
                        format!("{mp}.{hf}.weight"),
                        Layout::Same,
                        vec![l.inp, l.out],
                    );
                    p.bind(
                        l.b(),
                        vec![1, l.out],
                        format!("{mp}.{hf}.bias"),
                        Layout::Row,
                        vec![l.out],
                    );
                }
            }
            _ => return Err(format!("block {i}'s feed-forward has an unexpected form")),
        }
    }
    let norm = &children[children.len() - 2];
    p.norm(
        norm,
        if gpt2 {
            "transformer.ln_f"
        } else {
            "model.norm"
        },
    )?;
    if eps == 0.0 {
        eps = match &**norm {
            Layer::RmsNorm(r) => r.eps,
            Layer::LayerNorm(l) => l.eps,
            _ => eps,
        };
    }
    let tied = match &*children[children.len() - 1] {
        Layer::Unembed(e) if e.id == embed.id => true,
        Layer::Linear(l) if !l.bias && l.inp == d && l.out == vocab => {
            p.linear_weight(l.w(), d, vocab, "lm_head.weight".into());
            false
        }
        other => {
            return Err(format!(
            "the head `{}` is neither `unembed` of the embedding nor `linear(d, vocab, seed, 0)`",
            other.describe()
        ))
        }
    };
    let a = a0.unwrap_or(Attention {
        id: 0,
        d,
        heads: 1,
        kv_heads: 1,
        causal: true,
        rope: None,
        hd: d,
        bias: gpt2,
        qk_norm: None,
        sinks: false,
        window: None,
    });
    let rope = a.rope.unwrap_or(Rope {
        head_dim: a.hd,
        base: 10000.0,
        scaling: RopeScaling::Plain,
    });
    let config = Config {
        family,
        vocab,
        d,
        layers: blocks.len() / 2,
        heads: a.heads,
        kv_heads: a.kv_heads,
        head_dim: a.hd,
        hidden,
        eps,
        rope_theta: rope.base,
        rope_scaling: rope.scaling,
        positions: match rope.scaling {
            _ if gpt2 => positions,
            // What YaRN's factor implies, which `transformers` checks.
            RopeScaling::Yarn {
                factor, original, ..
            } => (factor * original).round() as usize,
            _ => 2048,
        },
        tied,
        attention_bias: a.bias,
        oss,
    };
    Ok((config, p.out))
}
