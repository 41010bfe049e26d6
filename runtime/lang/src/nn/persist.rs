//! Model structure as data (for saving sessions): every model of a workspace is
//! written as one table of layer nodes whose children are earlier entries, so a
//! layer shared between models (or reached twice in one model) is rebuilt as one
//! shared layer again. That matters for `aux_loss`, which reads the most recent
//! application of each distinct `moe` layer.
//!
//! Only the structure is recorded here: parameters are ordinary workspace
//! bindings under their generated names and are saved with the other arrays.
//! Rebuilding checks every size the layer constructors check, so a corrupt file
//! gives an error message, never a panic or a model that cannot be applied.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::layers::{
    Activation, Attention, Dropout, Embed, Engram, Layer, LayerNorm, Linear, Lora, Moe, MoeGate,
    PosEmbed, RmsNorm, Rope, RopeScaling, SwiGlu,
};

/// One saved layer node. Children are indices of earlier nodes of the same table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "layer", rename_all = "snake_case")]
pub enum LayerRecord {
    /// `linear(inp, out)` with model id `id`.
    Linear {
        /// Model id of the parameter names.
        id: u64,
        /// Input width.
        inp: usize,
        /// Output width.
        out: usize,
        /// Whether it has a bias (older files: always).
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        bias: bool,
    },
    /// A LoRA-wrapped linear layer.
    Lora {
        /// Model id of the base W and b.
        id: u64,
        /// Input width.
        inp: usize,
        /// Output width.
        out: usize,
        /// Model id of the adapters A and B.
        adapter_id: u64,
        /// Adapter rank.
        rank: usize,
        /// Scale numerator.
        alpha: f64,
        /// Whether the base has a bias (older files: always).
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        bias: bool,
    },
    /// `unembed(embed(vocab, d))`: the tied head of embedding table `id`.
    Unembed {
        /// Model id of the table.
        id: u64,
        /// Rows.
        vocab: usize,
        /// Row width.
        d: usize,
    },
    /// `pos_embed(max_pos, d)`.
    PosEmbed {
        /// Model id.
        id: u64,
        /// Positions.
        max_pos: usize,
        /// Row width.
        d: usize,
    },
    /// `embed(vocab, d)`.
    Embed {
        /// Model id.
        id: u64,
        /// Rows.
        vocab: usize,
        /// Row width.
        d: usize,
    },
    /// `attention` / `causal_attention`.
    Attention {
        /// Model id.
        id: u64,
        /// Model width.
        d: usize,
        /// Query heads.
        heads: usize,
        /// Key/value heads.
        kv_heads: usize,
        /// Causal mask.
        causal: bool,
        /// Rotary embedding `(head_dim, base)`, if any.
        rope: Option<(usize, f64)>,
        /// The rotary scaling `[factor, low, high, original]` (Llama 3.1), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rope_scaling: Option<[f64; 4]>,
        /// The head width when it is not d / heads.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head_dim: Option<usize>,
        /// q/k/v/o biases.
        #[serde(default, skip_serializing_if = "is_false")]
        bias: bool,
        /// The q/k norm epsilon, if the layer has q/k norms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        qk_norm: Option<f64>,
        /// YaRN scaling `[factor, original, beta_fast, beta_slow, truncate]`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rope_yarn: Option<[f64; 5]>,
        /// Per-head sinks.
        #[serde(default, skip_serializing_if = "is_false")]
        sinks: bool,
        /// The sliding window, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<usize>,
    },
    /// `rms_norm(dim [, 1])`.
    RmsNorm {
        /// Width.
        dim: usize,
        /// Model id of the learned gain, if any.
        gain: Option<u64>,
        /// The epsilon when it is not the default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        eps: Option<f64>,
    },
    /// `layer_norm(d)`.
    LayerNorm {
        /// Model id.
        id: u64,
        /// Width.
        d: usize,
        /// The epsilon when it is not the default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        eps: Option<f64>,
    },
    /// A parameterless activation layer.
    Activation {
        /// `tanh`, `relu`, `gelu`, `silu` or `softmax`.
        function: String,
    },
    /// `dropout(p, seed)`.
    Dropout {
        /// Drop probability.
        p: f64,
        /// Mask seed.
        seed: u64,
    },
    /// `swiglu(d, hidden)`.
    SwiGlu {
        /// Model id.
        id: u64,
        /// Width.
        d: usize,
        /// Hidden width.
        hidden: usize,
    },
    /// `rope(head_dim, base)`.
    Rope {
        /// Rotated width.
        head_dim: usize,
        /// Frequency base.
        base: f64,
        /// The scaling `[factor, low, high, original]` (Llama 3.1), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scaling: Option<[f64; 4]>,
        /// YaRN scaling `[factor, original, beta_fast, beta_slow, truncate]`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        yarn: Option<[f64; 5]>,
    },
    /// `moe(d, experts, top_k, hidden)`.
    Moe {
        /// Model id.
        id: u64,
        /// Width.
        d: usize,
        /// Experts.
        experts: usize,
        /// Experts per token.
        top_k: usize,
        /// Hidden width of an expert.
        hidden: usize,
        /// Router and expert biases.
        #[serde(default, skip_serializing_if = "is_false")]
        bias: bool,
        /// The clamped gated activation's `[alpha, limit]`, if it has it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clamped: Option<[f64; 2]>,
        /// Softmax after top-k.
        #[serde(default, skip_serializing_if = "is_false")]
        softmax_after: bool,
    },
    /// `engram(d, rows, heads)` or `engram_embed(vocab, d, rows, heads)`.
    Engram {
        /// Model id.
        id: u64,
        /// Vocabulary of the embedding-position form.
        vocab: Option<usize>,
        /// Width.
        d: usize,
        /// Rows per order and head.
        rows: usize,
        /// Heads per order.
        heads: usize,
        /// Hash seed.
        seed: u64,
    },
    /// `chain(...)` of earlier nodes.
    Chain {
        /// Node indices, in order.
        children: Vec<usize>,
    },
    /// `residual(m)` of an earlier node.
    Residual {
        /// Node index.
        inner: usize,
    },
}

/// Writes models into one node table, sharing nodes by identity.
#[derive(Debug, Default)]
pub struct ModelWriter {
    nodes: Vec<LayerRecord>,
    seen: HashMap<*const Layer, usize>,
}

impl ModelWriter {
    /// An empty table.
    pub fn new() -> ModelWriter {
        ModelWriter::default()
    }

    /// Adds `layer` (and its children not yet written); returns its node index.
    pub fn add(&mut self, layer: &Arc<Layer>) -> usize {
        let key = Arc::as_ptr(layer);
        if let Some(&i) = self.seen.get(&key) {
            return i;
        }
        let record = self.record(layer);
        self.nodes.push(record);
        let i = self.nodes.len() - 1;
        self.seen.insert(key, i);
        i
    }

    /// The node table.
    pub fn finish(self) -> Vec<LayerRecord> {
        self.nodes
    }

    /// The record of one node, writing its children first.
    fn record(&mut self, layer: &Layer) -> LayerRecord {
        match layer {
            Layer::Linear(l) => LayerRecord::Linear {
                id: l.id,
                inp: l.inp,
                out: l.out,
                bias: l.bias,
            },
            Layer::Lora(l) => LayerRecord::Lora {
                id: l.base.id,
                inp: l.base.inp,
                out: l.base.out,
                adapter_id: l.adapter_id,
                rank: l.rank,
                alpha: l.alpha,
                bias: l.base.bias,
            },
            Layer::Embed(e) => LayerRecord::Embed {
                id: e.id,
                vocab: e.vocab,
                d: e.d,
            },
            Layer::Unembed(e) => LayerRecord::Unembed {
                id: e.id,
                vocab: e.vocab,
                d: e.d,
            },
            Layer::PosEmbed(p) => LayerRecord::PosEmbed {
                id: p.id,
                max_pos: p.max_pos,
                d: p.d,
            },
            Layer::Attention(a) => LayerRecord::Attention {
                id: a.id,
                d: a.d,
                heads: a.heads,
                kv_heads: a.kv_heads,
                causal: a.causal,
                rope: a.rope.map(|r| (r.head_dim, r.base)),
                rope_scaling: a.rope.and_then(|r| scaling_record(r.scaling)),
                head_dim: (a.hd * a.heads != a.d).then_some(a.hd),
                bias: a.bias,
                qk_norm: a.qk_norm,
                rope_yarn: a.rope.and_then(|r| yarn_record(r.scaling)),
                sinks: a.sinks,
                window: a.window,
            },
            Layer::RmsNorm(r) => LayerRecord::RmsNorm {
                dim: r.dim,
                gain: r.gain,
                eps: (r.eps != super::layers::RMS_EPS).then_some(r.eps),
            },
            Layer::LayerNorm(l) => LayerRecord::LayerNorm {
                id: l.id,
                d: l.d,
                eps: (l.eps != super::layers::LN_EPS).then_some(l.eps),
            },
            Layer::Activation(a) => LayerRecord::Activation {
                function: activation_name(*a).to_string(),
            },
            Layer::Dropout(d) => LayerRecord::Dropout {
                p: d.p,
                seed: d.seed,
            },
            Layer::SwiGlu(s) => LayerRecord::SwiGlu {
                id: s.id,
                d: s.d,
                hidden: s.hidden,
            },
            Layer::Rope(r) => LayerRecord::Rope {
                head_dim: r.head_dim,
                base: r.base,
                scaling: scaling_record(r.scaling),
                yarn: yarn_record(r.scaling),
            },
            Layer::Moe(m) => LayerRecord::Moe {
                id: m.id,
                d: m.d,
                experts: m.experts,
                top_k: m.top_k,
                hidden: m.hidden,
                bias: m.bias,
                clamped: match m.gate {
                    MoeGate::Silu => None,
                    MoeGate::Clamped { alpha, limit } => Some([alpha, limit]),
                },
                softmax_after: m.softmax_after,
            },
            Layer::Engram(g) => LayerRecord::Engram {
                id: g.id,
                vocab: g.vocab,
                d: g.d,
                rows: g.rows,
                heads: g.heads,
                seed: g.seed,
            },
            Layer::Chain(children) => LayerRecord::Chain {
                children: children.iter().map(|c| self.add(c)).collect(),
            },
            Layer::Residual(inner) => LayerRecord::Residual {
                inner: self.add(inner),
            },
        }
    }
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn yarn_record(s: RopeScaling) -> Option<[f64; 5]> {
    match s {
        RopeScaling::Yarn {
            factor,
            original,
            beta_fast,
            beta_slow,
            truncate,
            ..
        } => Some([
            factor,
            original,
            beta_fast,
            beta_slow,
            f64::from(u8::from(truncate)),
        ]),
        _ => None,
    }
}

fn scaling_record(s: RopeScaling) -> Option<[f64; 4]> {
    match s {
        RopeScaling::Plain | RopeScaling::Yarn { .. } => None,
        RopeScaling::Llama3 {
            factor,
            low,
            high,
            original,
        } => Some([factor, low, high, original]),
    }
}

fn scaling_of(s: Option<[f64; 4]>, yarn: Option<[f64; 5]>) -> Result<RopeScaling, String> {
    if let Some([factor, original, fast, slow, truncate]) = yarn {
        ensure(
            [factor, original, fast, slow]
                .iter()
                .all(|v| v.is_finite() && *v > 0.0)
                && fast > slow,
            || "YaRN scaling needs finite numbers > 0 and beta_fast > beta_slow".to_string(),
        )?;
        return Ok(RopeScaling::yarn(
            factor,
            original,
            fast,
            slow,
            truncate != 0.0,
        ));
    }
    Ok(match s {
        None => RopeScaling::Plain,
        Some([factor, low, high, original]) => {
            ensure(
                [factor, low, high, original]
                    .iter()
                    .all(|v| v.is_finite() && *v > 0.0)
                    && high > low,
                || "rope scaling needs finite factors > 0 and high > low".to_string(),
            )?;
            RopeScaling::Llama3 {
                factor,
                low,
                high,
                original,
            }
        }
    })
}

fn eps_of(eps: Option<f64>, default: f64) -> Result<f64, String> {
    let e = eps.unwrap_or(default);
    ensure(e.is_finite() && e > 0.0, || {
        format!("epsilon {e} is not a finite number > 0")
    })?;
    Ok(e)
}

fn activation_name(a: Activation) -> &'static str {
    match a {
        Activation::Tanh => "tanh",
        Activation::Relu => "relu",
        Activation::Gelu => "gelu",
        Activation::Silu => "silu",
        Activation::Softmax => "softmax",
    }
}

/// Deepest nesting of `chain` and `residual` a saved model may have (the layer
/// tree is walked recursively; real models nest a few levels).
pub const MAX_DEPTH: usize = super::layers::MAX_MODEL_DEPTH;

/// Rebuilds a node table written by [`ModelWriter`]: entry i of the result is
/// node i. Errors name the node and what is wrong with it.
pub fn rebuild(nodes: &[LayerRecord]) -> Result<Vec<Arc<Layer>>, String> {
    rebuild_each(nodes).into_iter().collect()
}

/// Rebuilds every node of a table it can: entry i is node i or why it cannot be
/// rebuilt (its own fault, or a child's, named). A bad node costs only the
/// models that contain it.
pub fn rebuild_each(nodes: &[LayerRecord]) -> Vec<Result<Arc<Layer>, String>> {
    let mut built: Vec<Result<Arc<Layer>, String>> = Vec::with_capacity(nodes.len());
    let mut depths: Vec<usize> = Vec::with_capacity(nodes.len());
    let mut counts: Vec<usize> = Vec::with_capacity(nodes.len());
    for (i, record) in nodes.iter().enumerate() {
        let children: &[usize] = match record {
            LayerRecord::Chain { children } => children,
            LayerRecord::Residual { inner } => std::slice::from_ref(inner),
            _ => &[],
        };
        // Depth and count from the children that exist (a missing child fails
        // the node in `rebuild_one`).
        let depth = 1 + children
            .iter()
            .map(|&j| depths.get(j).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        let count = children.iter().fold(1usize, |n, &j| {
            n.saturating_add(counts.get(j).copied().unwrap_or(0))
        });
        depths.push(depth);
        counts.push(count);
        let node = rebuild_one(record, &built)
            .and_then(|layer| check_extent(&layer, depth, count).map(|()| layer))
            .map(Arc::new)
            .map_err(|why| format!("model node {i}: {why}"));
        built.push(node);
    }
    built
}

/// Sizes are validated as construction validates them (a crafted 10^12-wide
/// layer is refused here, not when it is first used), and so are the depth and
/// the layers one application runs.
fn check_extent(layer: &Layer, depth: usize, count: usize) -> Result<(), String> {
    let shapes: Vec<Vec<usize>> = layer.own_params().into_iter().map(|p| p.shape).collect();
    match super::init::elements(&shapes) {
        Some(n) if n <= crate::value::MAX_ELEMENTS => {}
        _ => {
            return Err(format!(
                "its parameters would have more than {} elements",
                crate::value::MAX_ELEMENTS
            ))
        }
    }
    if depth > MAX_DEPTH {
        return Err(format!("nested {depth} levels deep (at most {MAX_DEPTH})"));
    }
    if count > super::layers::MAX_MODEL_LAYERS {
        return Err(format!(
            "one application would run {count} layers (at most {})",
            super::layers::MAX_MODEL_LAYERS
        ));
    }
    Ok(())
}

fn earlier(built: &[Result<Arc<Layer>, String>], j: usize) -> Result<Arc<Layer>, String> {
    match built.get(j) {
        Some(Ok(l)) => Ok(l.clone()),
        Some(Err(_)) => Err(format!("child {j} could not be rebuilt")),
        None => Err(format!("child {j} is not an earlier node")),
    }
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

fn rope_layer(
    head_dim: usize,
    base: f64,
    scaling: Option<[f64; 4]>,
    yarn: Option<[f64; 5]>,
) -> Result<Rope, String> {
    ensure(head_dim >= 2 && head_dim.is_multiple_of(2), || {
        format!("rope head_dim {head_dim} is not an even size ≥ 2")
    })?;
    ensure(base.is_finite() && base > 0.0, || {
        format!("rope base {base} is not a finite number > 0")
    })?;
    Ok(Rope {
        head_dim,
        base,
        scaling: scaling_of(scaling, yarn)?,
    })
}

fn rebuild_one(
    record: &LayerRecord,
    built: &[Result<Arc<Layer>, String>],
) -> Result<Layer, String> {
    Ok(match record {
        &LayerRecord::Linear { id, inp, out, bias } => Layer::Linear(Linear { id, inp, out, bias }),
        &LayerRecord::Lora {
            id,
            inp,
            out,
            adapter_id,
            rank,
            alpha,
            bias,
        } => {
            ensure(rank >= 1, || "LoRA rank must be ≥ 1".to_string())?;
            ensure(alpha.is_finite(), || "LoRA alpha is not finite".to_string())?;
            Layer::Lora(Lora {
                base: Linear { id, inp, out, bias },
                adapter_id,
                rank,
                alpha,
            })
        }
        &LayerRecord::Embed { id, vocab, d } => Layer::Embed(Embed { id, vocab, d }),
        &LayerRecord::Unembed { id, vocab, d } => Layer::Unembed(Embed { id, vocab, d }),
        &LayerRecord::PosEmbed { id, max_pos, d } => {
            ensure(max_pos >= 1, || "pos_embed max_pos must be ≥ 1".to_string())?;
            Layer::PosEmbed(PosEmbed { id, max_pos, d })
        }
        &LayerRecord::Attention {
            id,
            d,
            heads,
            kv_heads,
            causal,
            rope,
            rope_scaling,
            head_dim,
            bias,
            qk_norm,
            rope_yarn,
            sinks,
            window,
        } => {
            ensure(heads >= 1 && (head_dim.is_some() || d % heads == 0), || {
                format!("{heads} heads do not divide d = {d}")
            })?;
            let hd = head_dim.unwrap_or(d / heads.max(1));
            ensure(hd >= 1, || "head_dim must be ≥ 1".to_string())?;
            if let Some(e) = qk_norm {
                eps_of(Some(e), e)?;
            }
            ensure(kv_heads >= 1 && heads % kv_heads == 0, || {
                format!("{kv_heads} key/value heads do not divide {heads} heads")
            })?;
            let rope = match rope {
                Some((n, base)) => {
                    let r = rope_layer(n, base, rope_scaling, rope_yarn)?;
                    ensure(n <= hd, || format!("rope size {n} exceeds head_dim = {hd}"))?;
                    Some(r)
                }
                None => None,
            };
            Layer::Attention(Attention {
                id,
                d,
                heads,
                kv_heads,
                causal,
                rope,
                hd,
                bias,
                qk_norm,
                sinks,
                window: window.filter(|w| *w > 0),
            })
        }
        &LayerRecord::RmsNorm { dim, gain, eps } => Layer::RmsNorm(RmsNorm {
            dim,
            gain,
            eps: eps_of(eps, super::layers::RMS_EPS)?,
        }),
        &LayerRecord::LayerNorm { id, d, eps } => Layer::LayerNorm(LayerNorm {
            id,
            d,
            eps: eps_of(eps, super::layers::LN_EPS)?,
        }),
        LayerRecord::Activation { function } => Layer::Activation(match function.as_str() {
            "tanh" => Activation::Tanh,
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "silu" => Activation::Silu,
            "softmax" => Activation::Softmax,
            other => return Err(format!("unknown activation `{other}`")),
        }),
        &LayerRecord::Dropout { p, seed } => {
            ensure((0.0..1.0).contains(&p), || {
                format!("dropout p = {p} is outside [0, 1)")
            })?;
            Layer::Dropout(Dropout { p, seed })
        }
        &LayerRecord::SwiGlu { id, d, hidden } => {
            ensure(hidden >= 1, || "swiglu hidden must be ≥ 1".to_string())?;
            Layer::SwiGlu(SwiGlu { id, d, hidden })
        }
        &LayerRecord::Rope {
            head_dim,
            base,
            scaling,
            yarn,
        } => Layer::Rope(rope_layer(head_dim, base, scaling, yarn)?),
        &LayerRecord::Engram {
            id,
            vocab,
            d,
            rows,
            heads,
            seed,
        } => {
            let g = Engram {
                id,
                vocab,
                d,
                rows,
                heads,
                seed,
            };
            if let Some(why) = g.config_error() {
                return Err(why);
            }
            Layer::Engram(g)
        }
        &LayerRecord::Moe {
            id,
            d,
            experts,
            top_k,
            hidden,
            bias,
            clamped,
            softmax_after,
        } => {
            ensure(experts >= 1 && (1..=experts).contains(&top_k), || {
                format!("top_k = {top_k} is outside 1..={experts}")
            })?;
            ensure(hidden >= 1, || "moe hidden must be ≥ 1".to_string())?;
            let gate = match clamped {
                None => MoeGate::Silu,
                Some([alpha, limit]) => {
                    ensure(
                        alpha.is_finite() && alpha > 0.0 && limit.is_finite() && limit > 0.0,
                        || "moe alpha and limit must be finite numbers > 0".to_string(),
                    )?;
                    MoeGate::Clamped { alpha, limit }
                }
            };
            Layer::Moe(Moe {
                id,
                d,
                experts,
                top_k,
                hidden,
                bias,
                gate,
                softmax_after,
            })
        }
        LayerRecord::Chain { children } => Layer::Chain(
            children
                .iter()
                .map(|&j| earlier(built, j))
                .collect::<Result<_, _>>()?,
        ),
        &LayerRecord::Residual { inner } => Layer::Residual(earlier(built, inner)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linear(id: u64) -> Arc<Layer> {
        Arc::new(Layer::Linear(Linear {
            id,
            inp: 2,
            out: 3,
            bias: true,
        }))
    }

    #[test]
    fn shared_layers_stay_shared_and_structure_round_trips() {
        let moe = Arc::new(Layer::Moe(Moe {
            id: 4,
            d: 3,
            experts: 2,
            top_k: 1,
            hidden: 5,
            bias: true,
            gate: MoeGate::Clamped {
                alpha: 1.702,
                limit: 7.0,
            },
            softmax_after: true,
        }));
        let net = Arc::new(Layer::Chain(vec![
            linear(1),
            Arc::new(Layer::Residual(moe.clone())),
            moe.clone(),
            Arc::new(Layer::Activation(Activation::Gelu)),
        ]));
        let mut w = ModelWriter::new();
        let (i_net, i_moe) = (w.add(&net), w.add(&moe));
        let nodes = w.finish();
        // linear, moe, residual, gelu, chain: the moe node is written once.
        assert_eq!(nodes.len(), 5);
        let json = serde_json::to_string(&nodes).unwrap();
        let back: Vec<LayerRecord> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, nodes);
        let built = rebuild(&back).unwrap();
        let (net2, moe2) = (&built[i_net], &built[i_moe]);
        assert_eq!(net2.parameters(), net.parameters());
        assert_eq!(net2.describe(), net.describe());
        let Layer::Chain(children) = &**net2 else {
            panic!("not a chain")
        };
        assert!(Arc::ptr_eq(&children[2], moe2));
        let Layer::Residual(inner) = &*children[1] else {
            panic!("not a residual")
        };
        assert!(Arc::ptr_eq(inner, moe2));
    }

    #[test]
    fn transformer_options_round_trip_and_older_records_read() {
        let embed = Embed {
            id: 1,
            vocab: 8,
            d: 4,
        };
        let attention = Attention {
            id: 2,
            d: 4,
            heads: 2,
            kv_heads: 1,
            causal: true,
            rope: Some(Rope {
                head_dim: 6,
                base: 1e4,
                scaling: RopeScaling::Llama3 {
                    factor: 8.0,
                    low: 1.0,
                    high: 4.0,
                    original: 16.0,
                },
            }),
            hd: 6,
            bias: true,
            qk_norm: Some(1e-6),
            sinks: true,
            window: Some(3),
        };
        let net = Arc::new(Layer::Chain(vec![
            Arc::new(Layer::Embed(embed)),
            Arc::new(Layer::PosEmbed(PosEmbed {
                id: 3,
                max_pos: 5,
                d: 4,
            })),
            Arc::new(Layer::Attention(attention)),
            Arc::new(Layer::RmsNorm(RmsNorm {
                dim: 4,
                gain: Some(4),
                eps: 1e-5,
            })),
            Arc::new(Layer::LayerNorm(LayerNorm {
                id: 5,
                d: 4,
                eps: 1e-6,
            })),
            Arc::new(Layer::Linear(Linear {
                id: 6,
                inp: 4,
                out: 8,
                bias: false,
            })),
            Arc::new(Layer::Unembed(embed)),
        ]));
        let mut w = ModelWriter::new();
        let i = w.add(&net);
        let json = serde_json::to_string(&w.finish()).unwrap();
        let back: Vec<LayerRecord> = serde_json::from_str(&json).unwrap();
        let built = rebuild(&back).unwrap();
        assert_eq!(built[i].parameters(), net.parameters());
        let describe = |l: &Layer| {
            let mut v = Vec::new();
            l.walk(&mut |n| v.push(n.describe()));
            v
        };
        assert_eq!(describe(&built[i]), describe(&net));
        let Layer::Chain(c) = &*built[i] else {
            panic!("not a chain")
        };
        let Layer::Attention(a) = &*c[2] else {
            panic!("not attention")
        };
        assert_eq!(a.rope.map(|r| r.scaling), attention.rope.map(|r| r.scaling));
        // A record written before these options reads with their defaults.
        let old: Vec<LayerRecord> = serde_json::from_str(
            r#"[{"layer":"linear","id":0,"inp":2,"out":3},{"layer":"rms_norm","dim":2,"gain":null}]"#,
        )
        .unwrap();
        let built = rebuild(&old).unwrap();
        assert!(matches!(&*built[0], Layer::Linear(l) if l.bias));
        assert!(matches!(&*built[1], Layer::RmsNorm(r) if r.eps == super::super::layers::RMS_EPS));
    }

    #[test]
    fn invalid_records_are_errors() {
        let bad = [
            vec![LayerRecord::Chain { children: vec![0] }],
            vec![LayerRecord::Residual { inner: 7 }],
            vec![LayerRecord::Attention {
                id: 0,
                d: 6,
                heads: 0,
                kv_heads: 1,
                causal: true,
                rope: None,
                rope_scaling: None,
                head_dim: None,
                bias: false,
                qk_norm: None,
                rope_yarn: None,
                sinks: false,
                window: None,
            }],
            vec![LayerRecord::Attention {
                id: 0,
                d: 8,
                heads: 2,
                kv_heads: 2,
                causal: true,
                rope: Some((3, 1e4)),
                rope_scaling: None,
                head_dim: None,
                bias: false,
                qk_norm: None,
                rope_yarn: None,
                sinks: false,
                window: None,
            }],
            vec![LayerRecord::Moe {
                id: 0,
                d: 2,
                experts: 2,
                top_k: 3,
                hidden: 1,
                bias: false,
                clamped: None,
                softmax_after: false,
            }],
            vec![LayerRecord::Dropout { p: 1.0, seed: 0 }],
            vec![LayerRecord::Activation {
                function: "swish".into(),
            }],
        ];
        for nodes in bad {
            let err = rebuild(&nodes).expect_err("should fail");
            assert!(err.starts_with("model node 0: "), "{err}");
        }
        // Nesting past MAX_DEPTH is refused (the tree is walked recursively).
        let mut deep = vec![LayerRecord::Activation {
            function: "relu".into(),
        }];
        for i in 0..MAX_DEPTH {
            deep.push(LayerRecord::Residual { inner: i });
        }
        let err = rebuild(&deep).expect_err("too deep");
        assert!(
            err.starts_with(&format!("model node {MAX_DEPTH}: ")),
            "{err}"
        );
        deep.pop();
        assert_eq!(rebuild(&deep).unwrap().len(), MAX_DEPTH);
    }

    #[test]
    fn a_bad_node_costs_only_the_models_containing_it() {
        let nodes = vec![
            LayerRecord::Linear {
                id: 0,
                inp: 2,
                out: 2,
                bias: true,
            },
            // 10^12 wide: refused as construction refuses it.
            LayerRecord::Linear {
                id: 1,
                inp: 1_000_000,
                out: 1_000_000,
                bias: true,
            },
            LayerRecord::Chain {
                children: vec![0, 1],
            },
            LayerRecord::Residual { inner: 0 },
        ];
        let built = rebuild_each(&nodes);
        assert!(built[0].is_ok() && built[3].is_ok());
        let e1 = built[1].as_ref().err().unwrap();
        assert!(e1.starts_with("model node 1: its parameters"), "{e1}");
        let e2 = built[2].as_ref().err().unwrap();
        assert_eq!(e2, "model node 2: child 1 could not be rebuilt");
    }
}
