//! The layer tree of a model (LANGUAGE §11.1, §11.2): one variant per layer kind,
//! each parameterised layer remembering the model id its parameter names carry.

use std::sync::Arc;

/// The deepest nesting of `chain` and `residual` a model may have (docs/limits.md):
/// every walk over a model (apply, display, persistence, the checker) recurses
/// once per level, so this bounds their stack; `chain`/`residual` refuse deeper
/// models with E0411, and restore refuses them too.
pub const MAX_MODEL_DEPTH: usize = 512;

/// The most layers one application of a model may run (docs/limits.md): a
/// sub-model used twice counts twice, so `repeat 40 { m = chain(m, m) }` is
/// refused with E0411 at 2^20 instead of growing to 2^40.
pub const MAX_MODEL_LAYERS: usize = 1 << 20;

/// A model's size as a graph: its nesting depth and the layers one application
/// runs (saturating), each shared node computed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Nesting levels (a single layer is 1).
    pub depth: usize,
    /// Layers one application runs, shared sub-models counted at every use.
    pub layers: usize,
}

impl Layer {
    /// This model's [`Extent`]: linear in its distinct nodes, however much they
    /// are shared.
    pub fn extent(&self) -> Extent {
        fn go(l: &Layer, memo: &mut std::collections::HashMap<usize, Extent>) -> Extent {
            let children: &[Arc<Layer>] = match l {
                Layer::Chain(c) => c,
                Layer::Residual(c) => std::slice::from_ref(c),
                _ => {
                    return Extent {
                        depth: 1,
                        layers: 1,
                    }
                }
            };
            let mut e = Extent {
                depth: 0,
                layers: 1,
            };
            for c in children {
                let key = Arc::as_ptr(c) as usize;
                let ce = match memo.get(&key) {
                    Some(ce) => *ce,
                    None => {
                        let ce = go(c, memo);
                        memo.insert(key, ce);
                        ce
                    }
                };
                e.depth = e.depth.max(ce.depth);
                e.layers = e.layers.saturating_add(ce.layers);
            }
            e.depth = e.depth.saturating_add(1);
            e
        }
        go(self, &mut std::collections::HashMap::new())
    }
}

/// `rms_norm`'s epsilon when none is given.
pub const RMS_EPS: f64 = 1e-8;

/// `layer_norm`'s epsilon when none is given.
pub const LN_EPS: f64 = 1e-5;

/// One node of a model tree.
#[derive(Debug)]
pub enum Layer {
    /// `linear(in, out, seed)`: x·W + b.
    Linear(Linear),
    /// A linear layer wrapped with LoRA adapters by `lora` (LANGUAGE §11.7).
    Lora(Lora),
    /// `embed(vocab, d, seed)`: rows of a table.
    Embed(Embed),
    /// `attention(…)` and `causal_attention(…)` (LANGUAGE §11.3).
    Attention(Attention),
    /// `rms_norm(dim [, gain])`.
    RmsNorm(RmsNorm),
    /// `layer_norm(d)`.
    LayerNorm(LayerNorm),
    /// A parameterless element-wise or softmax layer.
    Activation(Activation),
    /// `dropout(p, seed)` (LANGUAGE §11.6).
    Dropout(Dropout),
    /// `swiglu(d, hidden, seed)`.
    SwiGlu(SwiGlu),
    /// `rope(head_dim, base)` (LANGUAGE §11.4).
    Rope(Rope),
    /// `moe(d, experts, top_k, hidden, seed)` (LANGUAGE §11.5).
    Moe(Moe),
    /// `unembed(e)`: a tied output head x·Eᵀ reusing an `embed` layer's table.
    Unembed(Embed),
    /// `pos_embed(max_pos, d, seed)`: learned absolute position embeddings added
    /// to `[…, T, d]`.
    PosEmbed(PosEmbed),
    /// `engram(d, rows, heads, seed)` and `engram_embed(vocab, d, rows, heads,
    /// seed)`: Engram conditional memory (docs/language.md).
    Engram(Engram),
    /// `chain(m1, ..., mn)`: composition, left to right.
    Chain(Vec<Arc<Layer>>),
    /// `residual(m)`: x + m(x).
    Residual(Arc<Layer>),
}

/// A `linear` layer: W `[in, out]`, and b `[1, out]` when it has a bias.
#[derive(Clone, Copy, Debug)]
pub struct Linear {
    /// The model id in the parameter names.
    pub id: u64,
    /// Input width.
    pub inp: usize,
    /// Output width.
    pub out: usize,
    /// Whether the layer adds a learned bias.
    pub bias: bool,
}

/// A `pos_embed` layer: P `[max_pos, d]`, row t added at position t.
#[derive(Clone, Copy, Debug)]
pub struct PosEmbed {
    /// The model id in the parameter name.
    pub id: u64,
    /// Positions the table holds.
    pub max_pos: usize,
    /// Row width.
    pub d: usize,
}

/// A LoRA-wrapped linear layer: the (cloned) base plus adapters A `[in, r]`, B `[r, out]`.
#[derive(Clone, Copy, Debug)]
pub struct Lora {
    /// The wrapped linear layer (its W and b).
    pub base: Linear,
    /// The model id of the adapters' names (`__lora_A_j`, `__lora_B_j`).
    pub adapter_id: u64,
    /// The adapter rank r.
    pub rank: usize,
    /// The scale numerator: the update is (alpha / r)·(x·A)·B.
    pub alpha: f64,
}

/// An `embed` layer: E `[vocab, d]`.
#[derive(Clone, Copy, Debug)]
pub struct Embed {
    /// The model id in the parameter name.
    pub id: u64,
    /// Number of rows.
    pub vocab: usize,
    /// Row width.
    pub d: usize,
}

/// An attention layer (LANGUAGE §11.3).
#[derive(Clone, Copy, Debug)]
pub struct Attention {
    /// The model id in the parameter names.
    pub id: u64,
    /// Model width.
    pub d: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (divides `heads`).
    pub kv_heads: usize,
    /// Whether the causal mask is applied.
    pub causal: bool,
    /// Rotary position embedding of queries and keys, if any.
    pub rope: Option<Rope>,
    /// The width of one head (d / heads unless given).
    pub hd: usize,
    /// Whether the q, k, v and o projections add learned biases.
    pub bias: bool,
    /// The epsilon of the per-head RMS norms (with gains) of queries and keys,
    /// when the layer has them (Qwen 3's q/k norm).
    pub qk_norm: Option<f64>,
    /// Whether each head has a learned sink logit `s` in its softmax's
    /// denominator (GPT-OSS).
    pub sinks: bool,
    /// The sliding window: a query at position q sees the keys at positions
    /// q − window < k ≤ q (with `causal`), when the layer has one.
    pub window: Option<usize>,
}

impl Attention {
    /// The width of one head.
    pub fn head_dim(&self) -> usize {
        self.hd
    }

    /// The width of all query heads, heads · head_dim.
    pub fn inner(&self) -> usize {
        self.heads * self.hd
    }

    /// The parameter names of this layer, in parameter order: Wq, Wk, Wv, Wo,
    /// then the biases bq, bk, bv, bo, the q/k norm gains qn, kn and the
    /// sinks s when it has them.
    pub fn param_name(&self, role: &str) -> String {
        format!("__attn_{role}_{}", self.id)
    }
}

/// An `rms_norm` layer; `gain` holds the model id when it has a learned gain.
#[derive(Clone, Copy, Debug)]
pub struct RmsNorm {
    /// The declared width (checked only with a gain).
    pub dim: usize,
    /// The model id of `__rms_g_k`, when the layer has a gain.
    pub gain: Option<u64>,
    /// The epsilon added to the mean square (1e-8 unless given).
    pub eps: f64,
}

/// A `layer_norm` layer: g `[d]`, b `[d]`.
#[derive(Clone, Copy, Debug)]
pub struct LayerNorm {
    /// The model id in the parameter names.
    pub id: u64,
    /// Width.
    pub d: usize,
    /// The epsilon added to the variance (1e-5 unless given).
    pub eps: f64,
}

/// The parameterless layers that apply one function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `tanh_layer()`.
    Tanh,
    /// `relu_layer()`.
    Relu,
    /// `gelu_layer()`.
    Gelu,
    /// `silu_layer()`.
    Silu,
    /// `softmax_layer()`: softmax over the last axis.
    Softmax,
}

/// A `dropout` layer.
#[derive(Clone, Copy, Debug)]
pub struct Dropout {
    /// Drop probability in [0, 1).
    pub p: f64,
    /// The mask seed (LANGUAGE §13.7).
    pub seed: u64,
}

/// A `swiglu` layer: Wg, Wu `[d, hidden]`, Wd `[hidden, d]`.
#[derive(Clone, Copy, Debug)]
pub struct SwiGlu {
    /// The model id in the parameter names.
    pub id: u64,
    /// Width.
    pub d: usize,
    /// Hidden width.
    pub hidden: usize,
}

/// A `rope` layer (also the `rope` argument of attention).
#[derive(Clone, Copy, Debug)]
pub struct Rope {
    /// The rotated width (even, ≥ 2).
    pub head_dim: usize,
    /// The frequency base (> 0).
    pub base: f64,
    /// How the frequencies are rescaled for long contexts.
    pub scaling: RopeScaling,
}

/// A rotary embedding's frequency rescaling (LANGUAGE §11.4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// θ_i = base^(−2i/n).
    Plain,
    /// Llama 3.1's: frequencies whose wavelength exceeds original/low are
    /// divided by `factor`, those below original/high kept, the band between
    /// interpolated smoothly.
    Llama3 {
        /// The division of the low frequencies.
        factor: f64,
        /// The low-frequency factor.
        low: f64,
        /// The high-frequency factor.
        high: f64,
        /// The original context length.
        original: f64,
    },
    /// YaRN, as `transformers` computes it: θ_i blended between θ_i (high
    /// frequencies, extrapolated) and θ_i / factor (low frequencies,
    /// interpolated) by a linear ramp over the correction range of
    /// `beta_fast` and `beta_slow` rotations in `original` positions; cosines
    /// and sines are multiplied by `attention`.
    Yarn {
        /// The context extension factor.
        factor: f64,
        /// The original context length.
        original: f64,
        /// Rotations bounding the extrapolated band (32 unless given).
        beta_fast: f64,
        /// Rotations bounding the interpolated band (1 unless given).
        beta_slow: f64,
        /// Whether the correction range is rounded outwards to whole dimensions.
        truncate: bool,
        /// The attention factor multiplying cos and sin (0.1·ln(factor) + 1).
        attention: f64,
    },
}

impl RopeScaling {
    /// YaRN's scaling with its attention factor derived from `factor` as
    /// `transformers` does (0.1·ln(factor) + 1, 1 for factor ≤ 1).
    pub fn yarn(
        factor: f64,
        original: f64,
        beta_fast: f64,
        beta_slow: f64,
        truncate: bool,
    ) -> Self {
        let attention = if factor <= 1.0 {
            1.0
        } else {
            0.1 * mlpl_devices::math::log(factor) + 1.0
        };
        RopeScaling::Yarn {
            factor,
            original,
            beta_fast,
            beta_slow,
            truncate,
            attention,
        }
    }
}

/// The experts' gated activation of a `moe` layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MoeGate {
    /// SwiGLU: silu(g) ⊙ u.
    Silu,
    /// GPT-OSS's clamped form: g' = min(g, limit), u' = clamp(u, −limit,
    /// limit), (u' + 1) ⊙ g'·sigmoid(alpha·g').
    Clamped {
        /// The sigmoid's gain.
        alpha: f64,
        /// The clamp.
        limit: f64,
    },
}

/// A `moe` layer: R `[d, E]`, Wg, Wu `[E, d, hidden]`, Wd `[E, hidden, d]`.
#[derive(Clone, Copy, Debug)]
pub struct Moe {
    /// The model id in the parameter names.
    pub id: u64,
    /// Width.
    pub d: usize,
    /// Number of experts E.
    pub experts: usize,
    /// Experts chosen per token.
    pub top_k: usize,
    /// Hidden width of each expert.
    pub hidden: usize,
    /// Whether the router and the experts have biases: bR `[1, E]`, bg, bu
    /// `[E, 1, hidden]`, bd `[E, 1, d]`.
    pub bias: bool,
    /// The experts' gated activation.
    pub gate: MoeGate,
    /// Whether the gates are the softmax of the chosen experts' logits
    /// (GPT-OSS) rather than the router's softmax renormalised over them.
    pub softmax_after: bool,
}

/// An Engram conditional memory layer (docs/language.md, "Engram conditional
/// memory"): one hashed table of [`ENGRAM_ORDERS`]·`heads` blocks of `rows`
/// rows of width `d / (orders·heads)`, key and value projections Wk, Wv
/// `[d, d]` and a causal convolution C `[ENGRAM_TAPS, d]`; the embedding-position
/// form also owns the token embedding E `[vocab, d]`.
#[derive(Clone, Copy, Debug)]
pub struct Engram {
    /// The model id in the parameter names.
    pub id: u64,
    /// The token vocabulary of the embedding-position form (`engram_embed`).
    pub vocab: Option<usize>,
    /// Model width.
    pub d: usize,
    /// Rows per n-gram order and head.
    pub rows: usize,
    /// Hash heads per n-gram order.
    pub heads: usize,
    /// The hash seed (the keys of LANGUAGE's formula).
    pub seed: u64,
}

/// The n-gram orders an Engram layer looks up.
pub const ENGRAM_ORDERS: [usize; 2] = [2, 3];

/// The most rows an Engram table may have: 2²⁴, so that every row index is an
/// exact float32 integer.
pub const ENGRAM_MAX_ROWS: usize = 1 << 24;

/// Taps of an Engram layer's causal convolution.
pub const ENGRAM_TAPS: usize = 4;

impl Engram {
    /// Table blocks: one per order and head.
    pub fn slots(&self) -> usize {
        ENGRAM_ORDERS.len() * self.heads
    }
    /// The width of one block's rows, d / slots.
    pub fn slot_width(&self) -> usize {
        self.d / self.slots().max(1)
    }
    /// Rows of the whole table, slots · rows.
    pub fn table_rows(&self) -> usize {
        self.slots() * self.rows
    }
    /// Why these sizes make no Engram layer, if they do not: `heads` ≥ 1,
    /// `rows` ≥ 1, `d` a positive multiple of orders·heads, and at most 2²⁴
    /// table rows (row indices are exact float32 integers).
    pub fn config_error(&self) -> Option<String> {
        let slots = self.slots();
        if self.heads == 0 || self.rows == 0 {
            Some(format!(
                "heads ({}) and rows ({}) must be at least 1",
                self.heads, self.rows
            ))
        } else if self.d == 0 || !self.d.is_multiple_of(slots) {
            Some(format!(
                "d = {} is not a positive multiple of {} orders × {} heads = {slots}",
                self.d,
                ENGRAM_ORDERS.len(),
                self.heads
            ))
        } else if slots
            .checked_mul(self.rows)
            .is_none_or(|r| r > ENGRAM_MAX_ROWS)
        {
            Some(format!(
                "{slots} × {} rows exceed the table's limit of 2^24 rows",
                self.rows
            ))
        } else {
            None
        }
    }

    /// The name written in messages and by `describe`.
    pub fn name(&self) -> &'static str {
        if self.vocab.is_some() {
            "engram_embed"
        } else {
            "engram"
        }
    }
}

/// One parameter of one layer: its workspace name, its checkpoint kind and role
/// (LANGUAGE §11.9) and its declared shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// The generated workspace name, e.g. `__linear_W_3`.
    pub name: String,
    /// The layer kind used in checkpoint keys (`linear`, `lora`, `attention`, …).
    pub kind: &'static str,
    /// The role used in checkpoint keys (`W`, `b`, `E`, `Wq`, …).
    pub role: &'static str,
    /// The shape the layer expects.
    pub shape: Vec<usize>,
}

fn spec(name: String, kind: &'static str, role: &'static str, shape: Vec<usize>) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        role,
        shape,
    }
}

impl Linear {
    /// `__linear_W_k`.
    pub fn w(&self) -> String {
        format!("__linear_W_{}", self.id)
    }
    /// `__linear_b_k`.
    pub fn b(&self) -> String {
        format!("__linear_b_{}", self.id)
    }
}

impl Lora {
    /// `__lora_A_j`.
    pub fn a(&self) -> String {
        format!("__lora_A_{}", self.adapter_id)
    }
    /// `__lora_B_j`.
    pub fn b_adapter(&self) -> String {
        format!("__lora_B_{}", self.adapter_id)
    }
}

impl Layer {
    /// The names of the distinct parameters of this model in parameter order
    /// (LANGUAGE §11.1): depth first, each layer's parameters in their order, a
    /// parameter reached twice listed at its first position.
    pub fn parameters(&self) -> Vec<String> {
        self.param_specs().into_iter().map(|p| p.name).collect()
    }

    /// The distinct parameters of this model in parameter order, with their kinds,
    /// roles and declared shapes.
    pub fn param_specs(&self) -> Vec<ParamSpec> {
        let mut out = Vec::new();
        self.walk_distinct(&mut |l| out.extend(l.own_params()));
        let mut seen = std::collections::HashSet::new();
        out.retain(|p| seen.insert(p.name.clone()));
        out
    }

    /// Calls `f` on every node, depth first in declaration order (shared layers
    /// once per occurrence).
    pub fn walk(&self, f: &mut dyn FnMut(&Layer)) {
        f(self);
        match self {
            Layer::Chain(children) => children.iter().for_each(|c| c.walk(f)),
            Layer::Residual(inner) => inner.walk(f),
            _ => {}
        }
    }

    /// Calls `f` on every distinct node, depth first in declaration order: a
    /// shared sub-model is visited at its first occurrence only, so the walk is
    /// linear in the distinct nodes however much they are shared.
    pub fn walk_distinct(&self, f: &mut dyn FnMut(&Layer)) {
        fn go(l: &Layer, f: &mut dyn FnMut(&Layer), seen: &mut std::collections::HashSet<usize>) {
            f(l);
            let children: &[Arc<Layer>] = match l {
                Layer::Chain(c) => c,
                Layer::Residual(c) => std::slice::from_ref(c),
                _ => return,
            };
            for c in children {
                if seen.insert(Arc::as_ptr(c) as usize) {
                    go(c, f, seen);
                }
            }
        }
        go(self, f, &mut std::collections::HashSet::new());
    }

    /// The parameters this node owns itself (not its children's), in order.
    pub fn own_params(&self) -> Vec<ParamSpec> {
        match self {
            Layer::Linear(l) => {
                let mut v = vec![spec(l.w(), "linear", "W", vec![l.inp, l.out])];
                if l.bias {
                    v.push(spec(l.b(), "linear", "b", vec![1, l.out]));
                }
                v
            }
            Layer::Lora(l) => {
                let mut v = vec![spec(l.base.w(), "lora", "W", vec![l.base.inp, l.base.out])];
                if l.base.bias {
                    v.push(spec(l.base.b(), "lora", "b", vec![1, l.base.out]));
                }
                v.push(spec(l.a(), "lora", "A", vec![l.base.inp, l.rank]));
                v.push(spec(l.b_adapter(), "lora", "B", vec![l.rank, l.base.out]));
                v
            }
            Layer::Embed(e) | Layer::Unembed(e) => vec![spec(
                format!("__embed_E_{}", e.id),
                "embed",
                "E",
                vec![e.vocab, e.d],
            )],
            Layer::PosEmbed(p) => vec![spec(
                format!("__pos_P_{}", p.id),
                "pos_embed",
                "P",
                vec![p.max_pos, p.d],
            )],
            Layer::Attention(a) => {
                let (kv, q) = (a.kv_heads * a.head_dim(), a.inner());
                let n = |r: &str| a.param_name(r);
                let mut v = vec![
                    spec(n("Wq"), "attention", "Wq", vec![a.d, q]),
                    spec(n("Wk"), "attention", "Wk", vec![a.d, kv]),
                    spec(n("Wv"), "attention", "Wv", vec![a.d, kv]),
                    spec(n("Wo"), "attention", "Wo", vec![q, a.d]),
                ];
                if a.bias {
                    v.push(spec(n("bq"), "attention", "bq", vec![1, q]));
                    v.push(spec(n("bk"), "attention", "bk", vec![1, kv]));
                    v.push(spec(n("bv"), "attention", "bv", vec![1, kv]));
                    v.push(spec(n("bo"), "attention", "bo", vec![1, a.d]));
                }
                if a.qk_norm.is_some() {
                    v.push(spec(n("qn"), "attention", "qn", vec![a.head_dim()]));
                    v.push(spec(n("kn"), "attention", "kn", vec![a.head_dim()]));
                }
                if a.sinks {
                    v.push(spec(n("s"), "attention", "s", vec![a.heads]));
                }
                v
            }
            Layer::RmsNorm(r) => match r.gain {
                Some(k) => vec![spec(format!("__rms_g_{k}"), "rms_norm", "g", vec![r.dim])],
                None => vec![],
            },
            Layer::LayerNorm(l) => vec![
                spec(format!("__ln_g_{}", l.id), "layer_norm", "g", vec![l.d]),
                spec(format!("__ln_b_{}", l.id), "layer_norm", "b", vec![l.d]),
            ],
            Layer::SwiGlu(s) => {
                let k = s.id;
                vec![
                    spec(
                        format!("__swiglu_Wg_{k}"),
                        "swiglu",
                        "Wg",
                        vec![s.d, s.hidden],
                    ),
                    spec(
                        format!("__swiglu_Wu_{k}"),
                        "swiglu",
                        "Wu",
                        vec![s.d, s.hidden],
                    ),
                    spec(
                        format!("__swiglu_Wd_{k}"),
                        "swiglu",
                        "Wd",
                        vec![s.hidden, s.d],
                    ),
                ]
            }
            Layer::Moe(m) => {
                let k = m.id;
                let (e, d, h) = (m.experts, m.d, m.hidden);
                let mut v = vec![
                    spec(format!("__moe_R_{k}"), "moe", "R", vec![d, e]),
                    spec(format!("__moe_Wg_{k}"), "moe", "Wg", vec![e, d, h]),
                    spec(format!("__moe_Wu_{k}"), "moe", "Wu", vec![e, d, h]),
                    spec(format!("__moe_Wd_{k}"), "moe", "Wd", vec![e, h, d]),
                ];
                if m.bias {
                    v.extend([
                        spec(format!("__moe_bR_{k}"), "moe", "bR", vec![1, e]),
                        spec(format!("__moe_bg_{k}"), "moe", "bg", vec![e, 1, h]),
                        spec(format!("__moe_bu_{k}"), "moe", "bu", vec![e, 1, h]),
                        spec(format!("__moe_bd_{k}"), "moe", "bd", vec![e, 1, d]),
                    ]);
                }
                v
            }
            Layer::Engram(g) => {
                let k = g.id;
                let mut out = Vec::with_capacity(5);
                if let Some(v) = g.vocab {
                    out.push(spec(format!("__engram_E_{k}"), "engram", "E", vec![v, g.d]));
                }
                out.extend([
                    spec(
                        format!("__engram_T_{k}"),
                        "engram",
                        "T",
                        vec![g.table_rows(), g.slot_width()],
                    ),
                    spec(format!("__engram_Wk_{k}"), "engram", "Wk", vec![g.d, g.d]),
                    spec(format!("__engram_Wv_{k}"), "engram", "Wv", vec![g.d, g.d]),
                    spec(
                        format!("__engram_C_{k}"),
                        "engram",
                        "C",
                        vec![ENGRAM_TAPS, g.d],
                    ),
                ]);
                out
            }
            Layer::Activation(_)
            | Layer::Dropout(_)
            | Layer::Rope(_)
            | Layer::Chain(_)
            | Layer::Residual(_) => vec![],
        }
    }

    /// How the layer is written in messages, e.g. `linear(3, 2)`.
    pub fn describe(&self) -> String {
        match self {
            Layer::Linear(l) if l.bias => format!("linear({}, {})", l.inp, l.out),
            Layer::Linear(l) => format!("linear({}, {}, bias = 0)", l.inp, l.out),
            Layer::Lora(l) => format!(
                "lora-wrapped linear({}, {}) of rank {}",
                l.base.inp, l.base.out, l.rank
            ),
            Layer::Embed(e) => format!("embed({}, {})", e.vocab, e.d),
            Layer::Unembed(e) => format!("unembed(embed({}, {}))", e.vocab, e.d),
            Layer::PosEmbed(p) => format!("pos_embed({}, {})", p.max_pos, p.d),
            Layer::Attention(a) => {
                let name = if a.causal {
                    "causal_attention"
                } else {
                    "attention"
                };
                let mut extra = String::new();
                if a.kv_heads != a.heads {
                    extra += &format!(", kv_heads = {}", a.kv_heads);
                }
                if a.hd * a.heads != a.d {
                    extra += &format!(", head_dim = {}", a.hd);
                }
                if a.bias {
                    extra += ", bias = 1";
                }
                if let Some(eps) = a.qk_norm {
                    extra += &format!(", qk_norm = {}", crate::display::format_f64(eps));
                }
                if a.sinks {
                    extra += ", sinks = 1";
                }
                if let Some(w) = a.window {
                    extra += &format!(", window = {w}");
                }
                format!("{name}({}, {}{extra})", a.d, a.heads)
            }
            Layer::RmsNorm(r) => match r.gain {
                Some(_) if r.eps != RMS_EPS => format!(
                    "rms_norm({}, 1, {})",
                    r.dim,
                    crate::display::format_f64(r.eps)
                ),
                Some(_) => format!("rms_norm({}, 1)", r.dim),
                None if r.eps != RMS_EPS => format!(
                    "rms_norm({}, 0, {})",
                    r.dim,
                    crate::display::format_f64(r.eps)
                ),
                None => format!("rms_norm({})", r.dim),
            },
            Layer::LayerNorm(l) if l.eps != LN_EPS => {
                format!("layer_norm({}, {})", l.d, crate::display::format_f64(l.eps))
            }
            Layer::LayerNorm(l) => format!("layer_norm({})", l.d),
            Layer::Activation(a) => match a {
                Activation::Tanh => "tanh_layer()",
                Activation::Relu => "relu_layer()",
                Activation::Gelu => "gelu_layer()",
                Activation::Silu => "silu_layer()",
                Activation::Softmax => "softmax_layer()",
            }
            .to_string(),
            Layer::Dropout(d) => format!("dropout({})", crate::display::format_f64(d.p)),
            Layer::SwiGlu(s) => format!("swiglu({}, {})", s.d, s.hidden),
            Layer::Rope(r) => format!(
                "rope({}, {})",
                r.head_dim,
                crate::display::format_f64(r.base)
            ),
            Layer::Moe(m) => {
                let mut extra = String::new();
                if m.bias {
                    extra += ", bias = 1";
                }
                if let MoeGate::Clamped { alpha, limit } = m.gate {
                    extra += &format!(
                        ", alpha = {}, limit = {}",
                        crate::display::format_f64(alpha),
                        crate::display::format_f64(limit)
                    );
                }
                if m.softmax_after {
                    extra += ", softmax after top-k";
                }
                format!(
                    "moe({}, {}, {}, {}{extra})",
                    m.d, m.experts, m.top_k, m.hidden
                )
            }
            Layer::Engram(g) => match g.vocab {
                Some(v) => format!("engram_embed({v}, {}, {}, {})", g.d, g.rows, g.heads),
                None => format!("engram({}, {}, {})", g.d, g.rows, g.heads),
            },
            Layer::Chain(c) => format!("chain of {} layers", c.len()),
            Layer::Residual(_) => "residual".to_string(),
        }
    }

    /// Whether any node of this model satisfies `pred`.
    pub fn any(&self, pred: &dyn Fn(&Layer) -> bool) -> bool {
        let mut found = false;
        self.walk_distinct(&mut |l| found |= pred(l));
        found
    }
}
