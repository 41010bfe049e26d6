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
use crate::nn::layers::{Dropout, Layer, Rope, RopeScaling};
use crate::nn::{init, Activation};
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "linear",
        params: &[req("in", Scalar), req("out", Scalar), req("seed", Seed), opt("bias", Scalar)],
        summary: "a dense layer x·W + b",
        doc: "`linear(in, out, seed [, bias])` creates W `[in, out]` = 0.5·randn(seed, [in, out]) and b `[1, out]` = 0 as tracked parameters `__linear_W_k`, `__linear_b_k`; with bias = 0 the layer is x·W and has no b (bias must be 0 or 1, E0401). `apply` maps `[…, in]` to `[…, out]`; leading axes keep their names. E0213 for sizes that are not non-negative integers.",
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
        params: &[req("d", Scalar), req("heads", Scalar), req("seed", Seed), opt("kv_heads", Scalar), opt("rope", Any), opt("head_dim", Scalar), opt("bias", Scalar), opt("qk_norm", Scalar), opt("sinks", Scalar), opt("window", Scalar)],
        summary: "multi-head self-attention",
        doc: "`attention(d, heads, seed [, kv_heads [, rope [, head_dim [, bias [, qk_norm [, sinks [, window]]]]]]])` creates Wq `[d, heads·hd]`, Wk and Wv `[d, kv_heads·hd]` and Wo `[heads·hd, d]`, each 0.5·randn(seed + 0, 1, 2, 3), where the head width hd is head_dim when given and not 0, else d/heads. `apply` maps `[T, d]` or `[B, T, d]` to the same shape (LANGUAGE §11.3); consecutive query heads share a key/value head when kv_heads < heads, and a `rope(hd, base)` argument (0 for none) rotates queries and keys by position. bias = 1 adds biases bq, bk, bv, bo (zeros); qk_norm = ε > 0 RMS-normalises each head's queries and keys with learned gains qn, kn `[hd]` (ones) before the rotation (Qwen 3; 0 for none). sinks = 1 adds a learned logit s `[heads]` (zeros) per head to its softmax's denominator (GPT-OSS); window = w ≥ 1 lets a query at position q see only keys q − w < k ≤ q (a sliding window; 0 for none). A rope narrower than hd rotates the first entries of each head (partial rotary). E0213 when heads does not divide d (without head_dim), kv_heads does not divide heads, or the rope size exceeds hd; E0401 for a bias or sinks other than 0 or 1 or an ε that is not ≥ 0.",
        example: "a = attention(4, 2, 7)\napply(a, reshape(iota(8), [2, 4]) / 8)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: attention,
        shape: Some(super::models_shapes::attention),
    },
    Builtin {
        name: "causal_attention",
        params: &[req("d", Scalar), req("heads", Scalar), req("seed", Seed), opt("kv_heads", Scalar), opt("rope", Any), opt("head_dim", Scalar), opt("bias", Scalar), opt("qk_norm", Scalar), opt("sinks", Scalar), opt("window", Scalar)],
        summary: "multi-head self-attention with a causal mask",
        doc: "`causal_attention(d, heads, seed [, kv_heads [, rope [, head_dim [, bias [, qk_norm [, sinks [, window]]]]]]])` is `attention` (the same seed gives the same weights) where every score with column > row is set to −1e9 before the softmax, so position t only attends to positions ≤ t.",
        example: "a = causal_attention(4, 2, 11)\napply(a, reshape(iota(12), [3, 4]) / 12)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: causal_attention,
        shape: Some(super::models_shapes::causal_attention),
    },
    Builtin {
        name: "rms_norm",
        params: &[req("dim", Scalar), opt("gain", Scalar), opt("eps", Scalar)],
        summary: "RMS normalisation over the last axis",
        doc: "`rms_norm(dim [, gain [, eps]])` maps `[…, w]` to x / √(mean(x², last axis) + eps), eps 1e-8 unless given (Llama uses 1e-5, Qwen 1e-6). With gain = 1 it has a learned gain g `[dim]` = 1 (`__rms_g_k`) and the last axis must be dim (E0211). gain must be 0 or 1 and eps a finite number > 0 (E0401).",
        example: "apply(rms_norm(3), [[1, 2, 3], [0, 0, 4]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: rms_norm,
        shape: Some(super::models_shapes::rms_norm),
    },
    Builtin {
        name: "layer_norm",
        params: &[req("d", Scalar), opt("eps", Scalar)],
        summary: "layer normalisation with gain and bias",
        doc: "`layer_norm(d [, eps])` creates g `[d]` = 1 and b `[d]` = 0 (`__ln_g_k`, `__ln_b_k`) and maps `[…, d]` to (x − μ)/√(σ² + eps)·g + b over the last axis (biased variance), eps 1e-5 unless given (a finite number > 0, E0401).",
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
        params: &[req("head_dim", Scalar), req("base", Scalar), opt("factor", Scalar), opt("low", Scalar), opt("high", Scalar), opt("original", Scalar)],
        summary: "rotary position embedding",
        doc: "`rope(head_dim, base [, factor, low, high, original])` rotates each pair (x_i, x_{i+n/2}) of `[…, T, n]` by the angle t·θ_i, θ_i = base^(−2i/n), t being the position along the second-to-last axis (LANGUAGE §11.4). With the four scaling arguments it is Llama 3.1's rope: θ_i whose wavelength 2π/θ_i exceeds original/low is divided by factor, one below original/high is kept, and the band between is interpolated. Pass it to `attention` to rotate queries and keys. head_dim must be even and ≥ 2 (E0213); base > 0 and the scaling numbers finite and > 0 with high > low (E0401).",
        example: "apply(rope(4, 10000), reshape(iota(8), [2, 4]))",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: rope,
        shape: Some(super::models_shapes::rope),
    },
    Builtin {
        name: "yarn_rope",
        params: &[req("head_dim", Scalar), req("base", Scalar), req("factor", Scalar), req("original", Scalar), opt("beta_fast", Scalar), opt("beta_slow", Scalar), opt("truncate", Scalar)],
        summary: "rotary position embedding with YaRN scaling",
        doc: "`yarn_rope(head_dim, base, factor, original [, beta_fast [, beta_slow [, truncate]]])` is `rope(head_dim, base)` with YaRN's frequencies, as Hugging Face `transformers` computes them (GPT-OSS): θ_i is blended between θ_i and θ_i/factor by a linear ramp over the dimensions between the correction bounds of beta_fast (32 unless given) and beta_slow (1) rotations in `original` positions (rounded outwards unless truncate = 0), and cos and sin are multiplied by the attention factor 0.1·ln(factor) + 1. head_dim must be even and ≥ 2 (E0213); base, factor, original and the betas finite and > 0 with beta_fast > beta_slow, truncate 0 or 1 (E0401).",
        example: "apply(yarn_rope(4, 10000, 4, 64), reshape(iota(8), [2, 4]))",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: yarn_rope,
        shape: Some(super::models_shapes::yarn_rope),
    },
    Builtin {
        name: "moe",
        params: &[req("d", Scalar), req("experts", Scalar), req("top_k", Scalar), req("hidden", Scalar), req("seed", Seed), opt("bias", Scalar), opt("alpha", Scalar), opt("limit", Scalar), opt("after", Scalar)],
        summary: "a mixture of SwiGLU experts with top-k routing",
        doc: "`moe(d, experts, top_k, hidden, seed [, bias [, alpha, limit [, after]]])` creates a router R `[d, E]` and experts Wg, Wu `[E, d, hidden]`, Wd `[E, hidden, d]`. Each token is routed to the top_k experts by softmax(x·R) and gets their gate-weighted SwiGLU outputs (LANGUAGE §11.5); each application records the load-balancing loss that `aux_loss` returns. bias = 1 adds biases (zeros) bR `[1, E]` to the router and bg, bu `[E, 1, hidden]`, bd `[E, 1, d]` to the experts; alpha > 0 with limit > 0 replaces SwiGLU by GPT-OSS's clamped form (min(g, limit)·sigmoid(alpha·min(g, limit))) ⊙ (clamp(u, −limit, limit) + 1) (alpha 0: SwiGLU); after = 1 makes the gates the softmax of the chosen experts' logits (softmax after top-k, GPT-OSS) instead of the router's probabilities renormalised over them. E0213 unless experts ≥ 1, 1 ≤ top_k ≤ experts and hidden ≥ 1; E0401 for a bias or after other than 0 or 1, a negative alpha, or alpha > 0 without a limit > 0.",
        example: "m = moe(4, 3, 2, 8, 0)\napply(m, reshape(iota(8), [2, 4]) / 8)",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: moe,
        shape: Some(super::models_shapes::moe),
    },
    Builtin {
        name: "unembed",
        params: &[req("e", Model)],
        summary: "a tied output head sharing an embedding table",
        doc: "`unembed(e)` is the output head x·Eᵀ of the `embed(vocab, d, seed)` layer e: it maps `[…, d]` to `[…, vocab]` with e's own table `__embed_E_k`, so the parameter is used twice and its gradient sums both uses (GPT-2, tied Llama and Qwen heads). E0303 when e is not an `embed` layer.",
        example: "e = embed(5, 3, 1)\napply(chain(e, unembed(e)), [0, 4])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss(),
        section: "10.13",
        run: unembed,
        shape: Some(super::models_shapes::unembed),
    },
    Builtin {
        name: "pos_embed",
        params: &[req("max_pos", Scalar), req("d", Scalar), req("seed", Seed)],
        summary: "learned absolute position embeddings",
        doc: "`pos_embed(max_pos, d, seed)` creates P `[max_pos, d]` = 0.1·randn(seed, [max_pos, d]) (`__pos_P_k`) and maps `[…, T, d]` to x + P[0..T] (row t added at position t; GPT-2's `wpe`). E0211 when the last axis is not d or T > max_pos; max_pos must be ≥ 1 (E0213).",
        example: "p = pos_embed(4, 2, 0)\napply(p, [[1, 0], [0, 1]])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: pos_embed,
        shape: Some(super::models_shapes::pos_embed),
    },
    Builtin {
        name: "generate",
        params: &[req("model", Model), req("ids", Array), req("n", Scalar), opt("temperature", Scalar), opt("top_k", Scalar), opt("seed", Seed), opt("stop", Scalar)],
        summary: "autoregressive decoding with a key/value cache",
        doc: "`generate(model, ids, n [, temperature [, top_k [, seed [, stop]]]])` returns the n token ids `[n]` that follow the prompt ids `[T]` under a model mapping ids `[T]` to logits `[T, V]` (LANGUAGE §11.11); a batch of prompts `[B, T]` gives `[B, n]`, its rows decoded together, row r's draws seeded with seed + r·n + i. With a stop id (≥ 0), a row ends with the step that produces it: decoding stops when every row has, the result has as many columns as steps were taken (≤ n), and rows that ended earlier are padded with the stop id. Every attention layer keeps a key/value cache, so each new token costs one position. temperature 0 (the default) is greedy, the first maximum; otherwise the id is drawn from softmax(logits / temperature), among the top_k largest logits when top_k ≥ 1, the draw of step i seeded with seed + i (seed 0 unless given). E0401 for a model with a non-causal `attention` layer or a negative temperature.",
        example: "e = embed(5, 4, 1)\nm = chain(e, causal_attention(4, 2, 2), unembed(e))\ngenerate(m, [1, 2], 3)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.13",
        run: generate,
        shape: Some(super::models_shapes::generate),
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
    let bias = switch(c, 3, true)?;
    check_elements(c, &[vec![inp, out], vec![1, out]])?;
    Ok(model_value(init::linear(c.it, inp, out, seed, bias)))
}

/// Optional switch argument `i` (0 or 1, E0401), `default` when absent.
fn switch(c: &Call, i: usize, default: bool) -> Result<bool, Diagnostic> {
    if !c.has(i) {
        return Ok(default);
    }
    let v = c.scalar(i)?;
    super::site::check_switch(c, i, v)
}

/// Optional epsilon argument `i` (finite, > 0, E0401), `default` when absent.
fn eps(c: &Call, i: usize, default: f64) -> Result<f64, Diagnostic> {
    if !c.has(i) {
        return Ok(default);
    }
    let v = c.scalar(i)?;
    super::site::check_eps(c, i, v)
}

fn unembed(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let e = super::site::embed_argument(c, 0, &m)?;
    Ok(model_value(Layer::Unembed(e)))
}

fn pos_embed(c: &mut Call) -> Result<Value, Diagnostic> {
    let (max_pos, d) = (dim(c, 0)?, dim(c, 1)?);
    super::site::check_positive_size(c, 0, max_pos)?;
    let seed = c.seed(2)?;
    check_elements(c, &[vec![max_pos, d]])?;
    Ok(model_value(init::pos_embed(c.it, max_pos, d, seed)))
}

fn generate(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    if m.any(&|l| matches!(l, Layer::Attention(a) if !a.causal)) {
        // Cached keys are only valid when earlier positions never see later ones.
        return Err(c
            .invalid(
                0,
                "the model has an attention layer without the causal mask",
            )
            .help("`generate` decodes models built with `causal_attention`"));
    }
    let prompt = c.array(1)?.shape().to_vec();
    if !(prompt.len() == 1 || prompt.len() == 2) {
        return Err(c.rank_error(1, "prompt ids `[T]` or a batch `[B, T]`"));
    }
    let ids = Array::from_vec(prompt.clone(), c.array(1)?.to_f32());
    let n = dim(c, 2)?;
    let temperature = if c.has(3) { c.scalar(3)? } else { 0.0 };
    if !(temperature.is_finite() && temperature >= 0.0) {
        return Err(c.invalid(3, "temperature must be a finite number ≥ 0"));
    }
    let top_k = if c.has(4) { dim(c, 4)? } else { 0 };
    let seed = if c.has(5) { c.seed(5)? } else { 0 };
    let stop = if c.has(6) {
        Some(u32::try_from(dim(c, 6)?).map_err(|_| c.invalid(6, "the stop id is too large"))?)
    } else {
        None
    };
    let how = crate::nn::generate::Decoding {
        temperature,
        top_k,
        seed,
        stop,
    };
    let (span, x_span) = (c.span, c.arg_span(1));
    let (out, steps) = crate::nn::generate::generate(c.it, &m, &ids, n, how, span, x_span)?;
    let shape = if prompt.len() == 2 {
        vec![prompt[0], steps]
    } else {
        vec![steps]
    };
    Ok(Value::Array(Array::from_vec(shape, out)))
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
    let given = if c.has(5) { Some(dim(c, 5)?) } else { None };
    let hd = super::site::head_width(c, d, heads, given)?;
    let kv = if c.has(3) { dim(c, 3)? } else { heads };
    super::site::check_kv_heads(c, heads, kv)?;
    let rope = match c.has(4).then(|| c.value(4).clone()) {
        Some(Value::Model(m)) => Some(super::site::rope_argument(c, 4, &m.0, hd)?),
        Some(Value::Array(a)) if a.rank() == 0 && a.to_f64()[0] == 0.0 => None,
        Some(other) => return Err(super::site::rope_kind_error(c, 4, other.kind_name(), hd)),
        None => None,
    };
    let bias = switch(c, 6, false)?;
    let qk_norm = if c.has(7) {
        let v = c.scalar(7)?;
        super::site::qk_norm_value(c, 7, v)?
    } else {
        None
    };
    let sinks = switch(c, 8, false)?;
    let window = if c.has(9) {
        let v = c.scalar(9)?;
        super::site::window_value(c, 9, v)?
    } else {
        None
    };
    let q = heads.saturating_mul(hd);
    check_elements(
        c,
        &[vec![d, q], vec![d, kv * hd], vec![d, kv * hd], vec![q, d]],
    )?;
    let a = crate::nn::layers::Attention {
        id: 0,
        d,
        heads,
        kv_heads: kv,
        causal,
        rope,
        hd,
        bias,
        qk_norm,
        sinks,
        window,
    };
    Ok(model_value(init::attention(c.it, a, seed)))
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
    let e = eps(c, 2, crate::nn::RMS_EPS)?;
    check_elements(c, &[vec![d]])?;
    Ok(model_value(init::rms_norm(c.it, d, gain == 1.0, e)))
}

fn layer_norm(c: &mut Call) -> Result<Value, Diagnostic> {
    let d = dim(c, 0)?;
    let e = eps(c, 1, crate::nn::LN_EPS)?;
    check_elements(c, &[vec![d], vec![d]])?;
    Ok(model_value(init::layer_norm(c.it, d, e)))
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
    let scaling = if c.has(2) {
        let mut v = [0.0; 4];
        for (k, x) in v.iter_mut().enumerate() {
            if !c.has(2 + k) {
                return Err(super::site::rope_scaling_missing(c));
            }
            *x = c.scalar(2 + k)?;
        }
        super::site::check_rope_scaling(c, v)?
    } else {
        RopeScaling::Plain
    };
    Ok(model_value(Layer::Rope(Rope {
        head_dim: n,
        base,
        scaling,
    })))
}

fn yarn_rope(c: &mut Call) -> Result<Value, Diagnostic> {
    let n = dim(c, 0)?;
    super::site::check_rope_size(c, 0, n)?;
    let base = c.scalar(1)?;
    super::site::check_rope_base(c, 1, base)?;
    let mut v = [0.0, 0.0, 32.0, 1.0];
    for (k, x) in v.iter_mut().enumerate() {
        if c.has(2 + k) {
            *x = c.scalar(2 + k)?;
        }
    }
    let truncate = switch(c, 6, true)?;
    let scaling = super::site::check_yarn(c, v, truncate)?;
    Ok(model_value(Layer::Rope(Rope {
        head_dim: n,
        base,
        scaling,
    })))
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
    let bias = switch(c, 5, false)?;
    let alpha = if c.has(6) { c.scalar(6)? } else { 0.0 };
    let limit = if c.has(7) { Some(c.scalar(7)?) } else { None };
    let gate = super::site::moe_gate(c, alpha, limit)?;
    let softmax_after = switch(c, 8, false)?;
    check_elements(
        c,
        &[
            vec![d, experts],
            vec![experts, d, hidden],
            vec![experts, d, hidden],
            vec![experts, hidden, d],
        ],
    )?;
    let m = crate::nn::layers::Moe {
        id: 0,
        d,
        experts,
        top_k: k,
        hidden,
        bias,
        gate,
        softmax_after,
    };
    Ok(model_value(init::moe(c.it, m, seed)))
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
        capture: true,
        ..Forward::new(c.it, span, x_span)
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
