//! Model layers and application (LANGUAGE §10.13, §11): the layer constructors,
//! `chain`, `residual`, `apply`, `attention_weights` and `aux_loss`. The layers
//! themselves live in `crate::nn`.

use super::site::CallSite;
use mlpl_diag::code;
use std::collections::HashSet;
use std::sync::Arc;

use mlpl_devices::BinaryOp;

use super::ParamKind::*;
use super::{opt, req, rest, Builtin, Diff, Facts};
use crate::eval::{ops, Call};
use crate::nn::apply::Forward;
use crate::nn::layers::{Dropout, Layer, Rope};
use crate::nn::{init, Activation};
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "linear",
        params: &[req("in", Scalar), req("out", Scalar), req("seed", Seed)],
        summary: "a dense layer x·W + b",
        doc: "`linear(in, out, seed)` creates W `[in, out]` = 0.5·randn(seed, [in, out]) and b `[1, out]` = 0 as tracked parameters `__linear_W_k`, `__linear_b_k`. `apply` maps `[…, in]` to `[…, out]`; leading axes keep their names. E0213 for sizes that are not non-negative integers.",
        example: "m = linear(3, 2, 0)\napply(m, [[1, 0, 0], [0, 1, 0]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: linear,
        shape: Some(super::models_shapes::linear),
    },
    Builtin {
        name: "embed",
        params: &[req("vocab", Scalar), req("d", Scalar), req("seed", Seed)],
        summary: "an embedding table",
        doc: "`embed(vocab, d, seed)` creates E `[vocab, d]` = 0.1·randn(seed, [vocab, d]) (`__embed_E_k`). `apply` maps integer ids of any shape `[…]` to their rows `[…, d]`; an id outside [0, vocab) is E0402.",
        example: "e = embed(5, 3, 1)\napply(e, [0, 4])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: embed,
        shape: Some(super::models_shapes::embed),
    },
    Builtin {
        name: "attention",
        params: &[req("d", Scalar), req("heads", Scalar), req("seed", Seed), opt("kv_heads", Scalar), opt("rope", Model)],
        summary: "multi-head self-attention",
        doc: "`attention(d, heads, seed [, kv_heads [, rope]])` creates Wq `[d, d]`, Wk and Wv `[d, kv_heads·d/heads]` and Wo `[d, d]`, each 0.5·randn(seed + 0, 1, 2, 3). `apply` maps `[T, d]` or `[B, T, d]` to the same shape (LANGUAGE §11.3); consecutive query heads share a key/value head when kv_heads < heads, and a `rope(d/heads, base)` argument rotates queries and keys by position. E0213 when heads does not divide d, kv_heads does not divide heads, or the rope size differs from d/heads.",
        example: "a = attention(4, 2, 7)\napply(a, reshape(iota(8), [2, 4]) / 8)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: attention,
        shape: Some(super::models_shapes::attention),
    },
    Builtin {
        name: "causal_attention",
        params: &[req("d", Scalar), req("heads", Scalar), req("seed", Seed), opt("kv_heads", Scalar), opt("rope", Model)],
        summary: "multi-head self-attention with a causal mask",
        doc: "`causal_attention(d, heads, seed [, kv_heads [, rope]])` is `attention` (the same seed gives the same weights) where every score with column > row is set to −1e9 before the softmax, so position t only attends to positions ≤ t.",
        example: "a = causal_attention(4, 2, 11)\napply(a, reshape(iota(12), [3, 4]) / 12)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: causal_attention,
        shape: Some(super::models_shapes::causal_attention),
    },
    Builtin {
        name: "rms_norm",
        params: &[req("dim", Scalar), opt("gain", Scalar)],
        summary: "RMS normalisation over the last axis",
        doc: "`rms_norm(dim [, gain])` maps `[…, w]` to x / √(mean(x², last axis) + 1e-8). With gain = 1 it has a learned gain g `[dim]` = 1 (`__rms_g_k`) and the last axis must be dim (E0211). gain must be 0 or 1 (E0401).",
        example: "apply(rms_norm(3), [[1, 2, 3], [0, 0, 4]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: rms_norm,
        shape: Some(super::models_shapes::rms_norm),
    },
    Builtin {
        name: "layer_norm",
        params: &[req("d", Scalar)],
        summary: "layer normalisation with gain and bias",
        doc: "`layer_norm(d)` creates g `[d]` = 1 and b `[d]` = 0 (`__ln_g_k`, `__ln_b_k`) and maps `[…, d]` to (x − μ)/√(σ² + 1e-5)·g + b over the last axis (biased variance).",
        example: "apply(layer_norm(3), [[1, 2, 3], [2, 2, 5]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: layer_norm,
        shape: Some(super::models_shapes::layer_norm),
    },
    Builtin {
        name: "tanh_layer",
        params: &[],
        summary: "a tanh activation layer",
        doc: "`tanh_layer()` has no parameters; `apply` computes tanh element-wise on any shape and keeps axis names.",
        example: "apply(tanh_layer(), [-1, 0, 1])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: tanh_layer,
        shape: Some(super::models_shapes::tanh_layer),
    },
    Builtin {
        name: "relu_layer",
        params: &[],
        summary: "a ReLU activation layer",
        doc: "`relu_layer()` has no parameters; `apply` computes max(x, 0) element-wise on any shape and keeps axis names.",
        example: "apply(relu_layer(), [-1, 0, 2])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: relu_layer,
        shape: Some(super::models_shapes::relu_layer),
    },
    Builtin {
        name: "gelu_layer",
        params: &[],
        summary: "a GELU activation layer",
        doc: "`gelu_layer()` has no parameters; `apply` computes `gelu` (tanh approximation, LANGUAGE §10.3) element-wise and keeps axis names.",
        example: "apply(gelu_layer(), [-1, 0, 1])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: gelu_layer,
        shape: Some(super::models_shapes::gelu_layer),
    },
    Builtin {
        name: "silu_layer",
        params: &[],
        summary: "a SiLU activation layer",
        doc: "`silu_layer()` has no parameters; `apply` computes x·sigmoid(x) element-wise and keeps axis names.",
        example: "apply(silu_layer(), [-1, 0, 1])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: silu_layer,
        shape: Some(super::models_shapes::silu_layer),
    },
    Builtin {
        name: "softmax_layer",
        params: &[],
        summary: "a softmax layer over the last axis",
        doc: "`softmax_layer()` has no parameters; `apply` takes rank ≥ 1 and normalises over the last axis (names dropped). A scalar input is E0211.",
        example: "apply(softmax_layer(), [[1, 2, 3], [0, 0, 0]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: softmax_layer,
        shape: Some(super::models_shapes::softmax_layer),
    },
    Builtin {
        name: "dropout",
        params: &[req("p", Scalar), req("seed", Seed)],
        summary: "dropout, active only while training",
        doc: "`dropout(p, seed)` is the identity outside `train` bodies. While training, element i is kept with probability 1 − p and scaled by 1/(1 − p), or zeroed; the mask depends only on the seed, the current `step` and i (LANGUAGE §11.6, §13.7). p must be in [0, 1) (E0401).",
        example: "m = chain(linear(2, 2, 0), dropout(0.5, 1))\napply(m, [[1, 2]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: dropout,
        shape: Some(super::models_shapes::dropout),
    },
    Builtin {
        name: "swiglu",
        params: &[req("d", Scalar), req("hidden", Scalar), req("seed", Seed)],
        summary: "a SwiGLU feed-forward block",
        doc: "`swiglu(d, hidden, seed)` creates Wg, Wu `[d, hidden]` = randn(seed, seed + 1)/√d and Wd `[hidden, d]` = randn(seed + 2)/√hidden, and maps `[…, d]` to (silu(x·Wg) ⊙ (x·Wu))·Wd. hidden must be ≥ 1 (E0213).",
        example: "apply(swiglu(4, 8, 0), reshape(iota(8), [2, 4]) / 8)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: swiglu,
        shape: Some(super::models_shapes::swiglu),
    },
    Builtin {
        name: "rope",
        params: &[req("head_dim", Scalar), req("base", Scalar)],
        summary: "rotary position embedding",
        doc: "`rope(head_dim, base)` rotates each pair (x_i, x_{i+n/2}) of `[…, T, n]` by the angle t·base^(−2i/n), t being the position along the second-to-last axis (LANGUAGE §11.4). Pass it to `attention` to rotate queries and keys. head_dim must be even and ≥ 2 (E0213); base > 0 (E0401).",
        example: "apply(rope(4, 10000), reshape(iota(8), [2, 4]))",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: rope,
        shape: Some(super::models_shapes::rope),
    },
    Builtin {
        name: "moe",
        params: &[req("d", Scalar), req("experts", Scalar), req("top_k", Scalar), req("hidden", Scalar), req("seed", Seed)],
        summary: "a mixture of SwiGLU experts with top-k routing",
        doc: "`moe(d, experts, top_k, hidden, seed)` creates a router R `[d, E]` and experts Wg, Wu `[E, d, hidden]`, Wd `[E, hidden, d]`. Each token is routed to the top_k experts by softmax(x·R) and gets their gate-weighted SwiGLU outputs (LANGUAGE §11.5); each application records the load-balancing loss that `aux_loss` returns. E0213 unless experts ≥ 1, 1 ≤ top_k ≤ experts and hidden ≥ 1.",
        example: "m = moe(4, 3, 2, 8, 0)\napply(m, reshape(iota(8), [2, 4]) / 8)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: moe,
        shape: Some(super::models_shapes::moe),
    },
    Builtin {
        name: "chain",
        params: &[rest("models", Model)],
        summary: "compose models left to right",
        doc: "`chain(m1, …, mn)` applies m1, then m2, …, then mn; `chain()` is the identity. The result shares the children's parameters (it does not copy them). E0303 for an argument that is not a model.",
        example: "m = chain(linear(2, 3, 5), tanh_layer(), linear(3, 1, 6))\napply(m, [[1, 2], [-1, 0.5]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: chain,
        shape: Some(super::models_shapes::chain),
    },
    Builtin {
        name: "residual",
        params: &[req("m", Model)],
        summary: "a residual connection x + m(x)",
        doc: "`residual(m)` maps x to x + m(x), merging axis names; m must map x's shape to itself, which is checked at every application (E0212).",
        example: "apply(residual(linear(2, 2, 0)), [[1, 2]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: residual,
        shape: Some(super::models_shapes::residual),
    },
    Builtin {
        name: "apply",
        params: &[req("model", Model), req("x", Array)],
        summary: "run a model on an input",
        doc: "`apply(model, x)` computes the model's forward pass (LANGUAGE §11.2). Inside a loss every layer is differentiable with respect to its parameters and its input. E0211 when x does not fit a layer (the message names the layer and its expected shape), E0212 when a residual block changes the shape, E0402 for bad embedding ids, E0501 for operands on different devices.",
        example: "apply(linear(2, 1, 0), [[1, 2], [3, 4]])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.13",
        run: apply,
        shape: Some(super::models_shapes::apply),
    },
    Builtin {
        name: "attention_weights",
        params: &[req("model", Model), req("x", Array)],
        summary: "the attention probabilities of the first attention layer",
        doc: "`attention_weights(model, x)` runs the model on x and returns the softmax probabilities of the first attention layer reached in forward order: `[T, T]` for one head, `[heads, T, T]` otherwise, with a leading B axis for a batched input. E0308 when the model has no attention layer.",
        example: "attention_weights(causal_attention(4, 1, 3), reshape(iota(12), [3, 4]) / 12)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.13",
        run: attention_weights,
        shape: Some(super::models_shapes::attention_weights),
    },
    Builtin {
        name: "aux_loss",
        params: &[req("model", Model)],
        summary: "the load-balancing loss of a model's moe layers",
        doc: "`aux_loss(model)` sums the load-balancing losses recorded by the most recent application of each distinct `moe` layer of the model (LANGUAGE §11.5, §12.7); a layer never applied contributes 0. When the application happened earlier in the same loss the value is differentiable. A model without `moe` layers gives 0 with W0106.",
        example: "m = moe(4, 3, 1, 8, 0)\ny = apply(m, reshape(iota(8), [2, 4]) / 8)\naux_loss(m)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.13",
        run: aux_loss,
        shape: Some(super::models_shapes::aux_loss),
    },
];

/// Wraps a layer as a model value.
pub fn model_value(layer: Layer) -> Value {
    Value::Model(crate::value::Model(Arc::new(layer)))
}

/// Argument `i` as a dimension: a non-negative integer (E0213).
pub fn dim(c: &Call, i: usize) -> Result<usize, Diagnostic> {
    let v = c.scalar(i)?;
    super::site::size_argument(c, i, v)
}

/// E0410 when the parameters of a new layer would exceed the allocation limit.
pub fn check_elements(c: &Call, shapes: &[Vec<usize>]) -> Result<(), Diagnostic> {
    match init::elements(shapes) {
        Some(n) if n <= super::MAX_ELEMENTS => Ok(()),
        _ => Err(c.error(code::E0410, "out of host memory").note(format!(
            "the parameters of `{}` would not fit in memory",
            c.name()
        ))),
    }
}

fn linear(c: &mut Call) -> Result<Value, Diagnostic> {
    let (inp, out) = (dim(c, 0)?, dim(c, 1)?);
    let seed = c.seed(2)?;
    check_elements(c, &[vec![inp, out], vec![1, out]])?;
    Ok(model_value(init::linear(c.it, inp, out, seed)))
}

fn embed(c: &mut Call) -> Result<Value, Diagnostic> {
    let (vocab, d) = (dim(c, 0)?, dim(c, 1)?);
    let seed = c.seed(2)?;
    check_elements(c, &[vec![vocab, d]])?;
    Ok(model_value(init::embed(c.it, vocab, d, seed)))
}

fn attention_like(c: &mut Call, causal: bool) -> Result<Value, Diagnostic> {
    let (d, heads) = (dim(c, 0)?, dim(c, 1)?);
    let seed = c.seed(2)?;
    super::site::check_heads(c, d, heads)?;
    let kv = if c.has(3) { dim(c, 3)? } else { heads };
    super::site::check_kv_heads(c, heads, kv)?;
    let hd = d / heads;
    let rope = if c.has(4) {
        let m = c.model(4)?.0.clone();
        Some(super::site::rope_argument(c, 4, &m, hd)?)
    } else {
        None
    };
    check_elements(
        c,
        &[vec![d, d], vec![d, kv * hd], vec![d, kv * hd], vec![d, d]],
    )?;
    Ok(model_value(init::attention(
        c.it, d, heads, kv, causal, rope, seed,
    )))
}

fn attention(c: &mut Call) -> Result<Value, Diagnostic> {
    attention_like(c, false)
}

fn causal_attention(c: &mut Call) -> Result<Value, Diagnostic> {
    attention_like(c, true)
}

fn rms_norm(c: &mut Call) -> Result<Value, Diagnostic> {
    let d = dim(c, 0)?;
    let gain = if c.has(1) { c.scalar(1)? } else { 0.0 };
    super::site::check_gain(c, 1, gain)?;
    check_elements(c, &[vec![d]])?;
    Ok(model_value(init::rms_norm(c.it, d, gain == 1.0)))
}

fn layer_norm(c: &mut Call) -> Result<Value, Diagnostic> {
    let d = dim(c, 0)?;
    check_elements(c, &[vec![d], vec![d]])?;
    Ok(model_value(init::layer_norm(c.it, d)))
}

fn activation(a: Activation) -> Result<Value, Diagnostic> {
    Ok(model_value(Layer::Activation(a)))
}

fn tanh_layer(_: &mut Call) -> Result<Value, Diagnostic> {
    activation(Activation::Tanh)
}

fn relu_layer(_: &mut Call) -> Result<Value, Diagnostic> {
    activation(Activation::Relu)
}

fn gelu_layer(_: &mut Call) -> Result<Value, Diagnostic> {
    activation(Activation::Gelu)
}

fn silu_layer(_: &mut Call) -> Result<Value, Diagnostic> {
    activation(Activation::Silu)
}

fn softmax_layer(_: &mut Call) -> Result<Value, Diagnostic> {
    activation(Activation::Softmax)
}

fn dropout(c: &mut Call) -> Result<Value, Diagnostic> {
    let p = c.scalar(0)?;
    super::site::check_drop_probability(c, 0, p)?;
    let seed = c.seed(1)?;
    Ok(model_value(Layer::Dropout(Dropout { p, seed })))
}

fn swiglu(c: &mut Call) -> Result<Value, Diagnostic> {
    let (d, hidden) = (dim(c, 0)?, dim(c, 1)?);
    super::site::check_positive_size(c, 1, hidden)?;
    let seed = c.seed(2)?;
    check_elements(c, &[vec![d, hidden], vec![d, hidden], vec![hidden, d]])?;
    Ok(model_value(init::swiglu(c.it, d, hidden, seed)))
}

fn rope(c: &mut Call) -> Result<Value, Diagnostic> {
    let n = dim(c, 0)?;
    super::site::check_rope_size(c, 0, n)?;
    let base = c.scalar(1)?;
    super::site::check_rope_base(c, 1, base)?;
    Ok(model_value(Layer::Rope(Rope { head_dim: n, base })))
}

fn moe(c: &mut Call) -> Result<Value, Diagnostic> {
    let d = dim(c, 0)?;
    let experts = dim(c, 1)?;
    super::site::check_positive_size(c, 1, experts)?;
    let k = dim(c, 2)?;
    super::site::check_top_k(c, 2, k, experts)?;
    let hidden = dim(c, 3)?;
    super::site::check_positive_size(c, 3, hidden)?;
    let seed = c.seed(4)?;
    check_elements(
        c,
        &[
            vec![d, experts],
            vec![experts, d, hidden],
            vec![experts, d, hidden],
            vec![experts, hidden, d],
        ],
    )?;
    Ok(model_value(init::moe(c.it, d, experts, k, hidden, seed)))
}

fn chain(c: &mut Call) -> Result<Value, Diagnostic> {
    let mut children = Vec::with_capacity(c.len());
    for i in 0..c.len() {
        children.push(c.model(i)?.0.clone());
    }
    let layer = Layer::Chain(children);
    super::site::check_model_extent(c, &layer)?;
    Ok(model_value(layer))
}

fn residual(c: &mut Call) -> Result<Value, Diagnostic> {
    let inner = c.model(0)?.0.clone();
    let layer = Layer::Residual(inner);
    super::site::check_model_extent(c, &layer)?;
    Ok(model_value(layer))
}

fn apply(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let x = c.array(1)?.clone();
    let (span, x_span) = (c.span, c.arg_span(1));
    Ok(Value::Array(crate::nn::apply::apply(
        c.it, &m, &x, span, x_span,
    )?))
}

fn no_attention(c: &Call) -> Diagnostic {
    super::site::no_attention_error(c)
}

fn attention_weights(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    if !m.any(&|l| matches!(l, Layer::Attention(_))) {
        return Err(no_attention(c));
    }
    let x = c.array(1)?.clone();
    let (span, x_span) = (c.span, c.arg_span(1));
    let mut f = Forward {
        it: c.it,
        span,
        x_span,
        capture: true,
        weights: None,
    };
    f.layer(&m, &x)?;
    match f.weights.take() {
        Some(w) => Ok(Value::Array(w)),
        None => Err(no_attention(c)),
    }
}

fn aux_loss(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let mut seen = HashSet::new();
    let mut recorded = Vec::new();
    m.walk_distinct(&mut |l| {
        if let Layer::Moe(x) = l {
            if seen.insert(x.id) {
                recorded.push(c.it.moe_aux.get(&x.id).cloned());
            }
        }
    });
    if seen.is_empty() {
        super::site::warn_no_aux_loss(c);
        return Ok(Value::exact(0.0));
    }
    let span = c.span;
    let mut total = Array::exact(0.0);
    for aux in recorded.into_iter().flatten() {
        total = ops::arith(c.it, BinaryOp::Add, &total, &aux, span)?;
    }
    Ok(Value::Array(total))
}
