//! Shape rules of the model layers and application (LANGUAGE §10.13, §11), for
//! the entries of `models.rs`. A constructor whose sizes are all constants gives
//! a model with its layer tree (parameter ids are placeholders), checked as the
//! interpreter checks it (E0213, E0401); `chain` checks that its stages fit and
//! `residual` that its block keeps the width (E0211, E0212 when provable for
//! every input); `apply` runs the tree over the abstract input (E0211, E0212,
//! E0402).
//!
//! These rules are reached through [`super::shape_rule`] until the entries of
//! `models.rs` name them in their `shape` field.

use super::site::CallSite;
use mlpl_diag::code;
use std::sync::Arc;

use crate::check::abstract_value::{AbsArray, AbsValue, Dim};
use crate::check::ctx::ShapeCtx;
use crate::check::models::{self, AbsModel, Forward};
use crate::nn::layers::{
    Activation, Attention, Dropout, Embed, Layer, LayerNorm, Linear, Moe, RmsNorm, Rope, SwiGlu,
};
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// Argument `i` as a size: its value when constant; E0213 when it is provably not
/// a non-negative integer.
pub fn dim(c: &ShapeCtx, i: usize) -> Result<Option<usize>, Diagnostic> {
    c.scalar(i)?
        .map(|v| super::site::size_argument(c, i, v))
        .transpose()
}

fn model(layer: Layer) -> Rule {
    Ok(AbsValue::Model(Some(AbsModel(Arc::new(layer)))))
}

fn unknown_model() -> Rule {
    Ok(AbsValue::Model(None))
}

/// `linear(in, out, seed [, bias])`: E0401 unless bias is 0 or 1.
pub fn linear(c: &mut ShapeCtx) -> Rule {
    let (inp, out) = (dim(c, 0)?, dim(c, 1)?);
    c.seed(2)?;
    let bias = switch(c, 3, true)?;
    match (inp, out, bias) {
        (Some(inp), Some(out), Some(bias)) => model(Layer::Linear(Linear {
            id: c.fresh_id(),
            inp,
            out,
            bias,
        })),
        _ => unknown_model(),
    }
}

/// Optional switch argument `i`: its value when constant (E0401 unless 0 or 1).
fn switch(c: &ShapeCtx, i: usize, default: bool) -> Result<Option<bool>, Diagnostic> {
    if !c.has(i) {
        return Ok(Some(default));
    }
    c.scalar(i)?
        .map(|v| super::site::check_switch(c, i, v))
        .transpose()
}

/// Optional epsilon argument `i`: its value when constant (E0401 unless > 0).
fn eps(c: &ShapeCtx, i: usize, default: f64) -> Result<Option<f64>, Diagnostic> {
    if !c.has(i) {
        return Ok(Some(default));
    }
    c.scalar(i)?
        .map(|v| super::site::check_eps(c, i, v))
        .transpose()
}

/// `unembed(e)`: E0401 unless e is an `embed` layer.
pub fn unembed(c: &mut ShapeCtx) -> Rule {
    match c.model(0)? {
        Some(m) => model(Layer::Unembed(super::site::embed_argument(c, 0, &m.0)?)),
        None => unknown_model(),
    }
}

/// `pos_embed(max_pos, d, seed)`: E0213 unless max_pos ≥ 1.
pub fn pos_embed(c: &mut ShapeCtx) -> Rule {
    let (max_pos, d) = (dim(c, 0)?, dim(c, 1)?);
    if let Some(n) = max_pos {
        super::site::check_positive_size(c, 0, n)?;
    }
    c.seed(2)?;
    match (max_pos, d) {
        (Some(max_pos), Some(d)) => model(Layer::PosEmbed(crate::nn::layers::PosEmbed {
            id: c.fresh_id(),
            max_pos,
            d,
        })),
        _ => unknown_model(),
    }
}

/// `generate(model, ids, n …)`: ids `[n]` (E0401 for a negative temperature).
pub fn generate(c: &mut ShapeCtx) -> Rule {
    c.model(0)?;
    let n = dim(c, 2)?;
    if c.has(3) {
        if let Some(t) = c.scalar(3)? {
            if !(t.is_finite() && t >= 0.0) {
                return Err(c.invalid(3, "temperature must be a finite number ≥ 0"));
            }
        }
    }
    if c.has(4) {
        dim(c, 4)?;
    }
    if c.has(5) {
        c.seed(5)?;
    }
    let stop = c.has(6);
    if stop {
        dim(c, 6)?;
    }
    // With a stop id the number of steps is known at run time only.
    let steps = match n {
        Some(n) if !stop => Dim::Known(n),
        _ => Dim::Unknown,
    };
    let prompt = c.value(1).as_array().and_then(|a| a.dims.clone());
    Ok(AbsValue::Array(match prompt {
        Some(d) if d.len() == 1 => AbsArray::of_dims(vec![steps]),
        Some(d) if d.len() == 2 => AbsArray::of_dims(vec![d[0].clone(), steps]),
        _ => AbsArray::unknown(),
    }))
}

/// `embed(vocab, d, seed)`.
pub fn embed(c: &mut ShapeCtx) -> Rule {
    let (vocab, d) = (dim(c, 0)?, dim(c, 1)?);
    c.seed(2)?;
    match (vocab, d) {
        (Some(vocab), Some(d)) => model(Layer::Embed(Embed {
            id: c.fresh_id(),
            vocab,
            d,
        })),
        _ => unknown_model(),
    }
}

fn attention_like(c: &mut ShapeCtx, causal: bool) -> Rule {
    let (d, heads) = (dim(c, 0)?, dim(c, 1)?);
    c.seed(2)?;
    let (Some(d), Some(heads)) = (d, heads) else {
        return unknown_model();
    };
    let given = if c.has(5) {
        match dim(c, 5)? {
            Some(h) => Some(h),
            None => return unknown_model(),
        }
    } else {
        None
    };
    let hd = super::site::head_width(c, d, heads, given)?;
    let kv = if c.has(3) { dim(c, 3)? } else { Some(heads) };
    let Some(kv) = kv else {
        return unknown_model();
    };
    super::site::check_kv_heads(c, heads, kv)?;
    let rope = if c.has(4) {
        match c.value(4) {
            AbsValue::Model(Some(m)) => {
                let m = m.clone();
                Some(super::site::rope_argument(c, 4, &m.0, hd)?)
            }
            AbsValue::Model(None) => return unknown_model(),
            AbsValue::Array(_) => match c.scalar(4)? {
                Some(v) if v == 0.0 => None,
                Some(_) => {
                    return Err(super::site::rope_kind_error(
                        c,
                        4,
                        "number other than 0",
                        hd,
                    ))
                }
                None => return unknown_model(),
            },
            other => match other.kind_name() {
                Some(kind) => return Err(super::site::rope_kind_error(c, 4, kind, hd)),
                None => return unknown_model(),
            },
        }
    } else {
        None
    };
    let Some(bias) = switch(c, 6, false)? else {
        return unknown_model();
    };
    let qk_norm = if c.has(7) {
        match c.scalar(7)? {
            Some(v) => super::site::qk_norm_value(c, 7, v)?,
            None => return unknown_model(),
        }
    } else {
        None
    };
    let Some(sinks) = switch(c, 8, false)? else {
        return unknown_model();
    };
    let window = if c.has(9) {
        match c.scalar(9)? {
            Some(v) => super::site::window_value(c, 9, v)?,
            None => return unknown_model(),
        }
    } else {
        None
    };
    model(Layer::Attention(Attention {
        id: c.fresh_id(),
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
    }))
}

/// `attention(d, heads, seed [, kv_heads [, rope]])`: E0213 unless heads divides
/// d, kv_heads divides heads and the rope size is d/heads.
pub fn attention(c: &mut ShapeCtx) -> Rule {
    attention_like(c, false)
}

/// `causal_attention(d, heads, seed [, kv_heads [, rope]])`.
pub fn causal_attention(c: &mut ShapeCtx) -> Rule {
    attention_like(c, true)
}

/// `rms_norm(dim [, gain])`: E0401 unless gain is 0 or 1.
pub fn rms_norm(c: &mut ShapeCtx) -> Rule {
    let d = dim(c, 0)?;
    let gain = if c.has(1) { c.scalar(1)? } else { Some(0.0) };
    if let Some(g) = gain {
        super::site::check_gain(c, 1, g)?;
    }
    match (d, gain, eps(c, 2, crate::nn::RMS_EPS)?) {
        (Some(dim), Some(g), Some(eps)) => {
            let gain = (g == 1.0).then(|| c.fresh_id());
            model(Layer::RmsNorm(RmsNorm { dim, gain, eps }))
        }
        _ => unknown_model(),
    }
}

/// `layer_norm(d)`.
pub fn layer_norm(c: &mut ShapeCtx) -> Rule {
    match (dim(c, 0)?, eps(c, 1, crate::nn::LN_EPS)?) {
        (Some(d), Some(eps)) => model(Layer::LayerNorm(LayerNorm {
            id: c.fresh_id(),
            d,
            eps,
        })),
        _ => unknown_model(),
    }
}

/// `tanh_layer()`.
pub fn tanh_layer(_: &mut ShapeCtx) -> Rule {
    model(Layer::Activation(Activation::Tanh))
}

/// `relu_layer()`.
pub fn relu_layer(_: &mut ShapeCtx) -> Rule {
    model(Layer::Activation(Activation::Relu))
}

/// `gelu_layer()`.
pub fn gelu_layer(_: &mut ShapeCtx) -> Rule {
    model(Layer::Activation(Activation::Gelu))
}

/// `silu_layer()`.
pub fn silu_layer(_: &mut ShapeCtx) -> Rule {
    model(Layer::Activation(Activation::Silu))
}

/// `softmax_layer()`.
pub fn softmax_layer(_: &mut ShapeCtx) -> Rule {
    model(Layer::Activation(Activation::Softmax))
}

/// `dropout(p, seed)`: E0401 unless 0 ≤ p < 1.
pub fn dropout(c: &mut ShapeCtx) -> Rule {
    let p = c.scalar(0)?;
    if let Some(p) = p {
        super::site::check_drop_probability(c, 0, p)?;
    }
    c.seed(1)?;
    match p {
        Some(p) => model(Layer::Dropout(Dropout { p, seed: 0 })),
        None => unknown_model(),
    }
}

/// `swiglu(d, hidden, seed)`: E0213 for hidden < 1.
pub fn swiglu(c: &mut ShapeCtx) -> Rule {
    let (d, hidden) = (dim(c, 0)?, dim(c, 1)?);
    if let Some(h) = hidden {
        super::site::check_positive_size(c, 1, h)?;
    }
    c.seed(2)?;
    match (d, hidden) {
        (Some(d), Some(hidden)) => model(Layer::SwiGlu(SwiGlu {
            id: c.fresh_id(),
            d,
            hidden,
        })),
        _ => unknown_model(),
    }
}

/// `rope(head_dim, base [, factor, low, high, original])`: E0213 unless
/// head_dim is even and ≥ 2, E0401 unless base > 0 and the scaling is valid.
pub fn rope(c: &mut ShapeCtx) -> Rule {
    let n = dim(c, 0)?;
    if let Some(n) = n {
        super::site::check_rope_size(c, 0, n)?;
    }
    let base = c.scalar(1)?;
    if let Some(b) = base {
        super::site::check_rope_base(c, 1, b)?;
    }
    let scaling = if c.has(2) {
        let mut v = [0.0; 4];
        let mut known = true;
        for (k, x) in v.iter_mut().enumerate() {
            if !c.has(2 + k) {
                return Err(super::site::rope_scaling_missing(c));
            }
            match c.scalar(2 + k)? {
                Some(s) => *x = s,
                None => known = false,
            }
        }
        if !known {
            return unknown_model();
        }
        super::site::check_rope_scaling(c, v)?
    } else {
        crate::nn::layers::RopeScaling::Plain
    };
    match (n, base) {
        (Some(head_dim), Some(base)) => model(Layer::Rope(Rope {
            head_dim,
            base,
            scaling,
        })),
        _ => unknown_model(),
    }
}

/// `moe(d, experts, top_k, hidden, seed)`: E0213 unless experts ≥ 1,
/// 1 ≤ top_k ≤ experts and hidden ≥ 1.
pub fn moe(c: &mut ShapeCtx) -> Rule {
    let d = dim(c, 0)?;
    let experts = dim(c, 1)?;
    if let Some(e) = experts {
        super::site::check_positive_size(c, 1, e)?;
    }
    let k = dim(c, 2)?;
    if let (Some(k), Some(e)) = (k, experts) {
        super::site::check_top_k(c, 2, k, e)?;
    }
    let hidden = dim(c, 3)?;
    if let Some(h) = hidden {
        super::site::check_positive_size(c, 3, h)?;
    }
    c.seed(4)?;
    let bias = switch(c, 5, false)?;
    let alpha = if c.has(6) { c.scalar(6)? } else { Some(0.0) };
    let limit = if c.has(7) {
        c.scalar(7)?.map(Some)
    } else {
        Some(None)
    };
    let gate = match (alpha, limit) {
        (Some(a), Some(l)) => Some(super::site::moe_gate(c, a, l)?),
        _ => None,
    };
    let softmax_after = switch(c, 8, false)?;
    match (d, experts, k, hidden, bias, gate, softmax_after) {
        (
            Some(d),
            Some(experts),
            Some(top_k),
            Some(hidden),
            Some(bias),
            Some(gate),
            Some(softmax_after),
        ) => model(Layer::Moe(Moe {
            id: c.fresh_id(),
            d,
            experts,
            top_k,
            hidden,
            bias,
            gate,
            softmax_after,
        })),
        _ => unknown_model(),
    }
}

/// `yarn_rope(head_dim, base, factor, original [, beta_fast [, beta_slow [,
/// truncate]]])`: `rope`'s checks, and E0401 unless the YaRN numbers are
/// valid.
pub fn yarn_rope(c: &mut ShapeCtx) -> Rule {
    let n = dim(c, 0)?;
    if let Some(n) = n {
        super::site::check_rope_size(c, 0, n)?;
    }
    let base = c.scalar(1)?;
    if let Some(b) = base {
        super::site::check_rope_base(c, 1, b)?;
    }
    let mut v = [0.0, 0.0, 32.0, 1.0];
    let mut known = true;
    for (k, x) in v.iter_mut().enumerate() {
        if c.has(2 + k) {
            match c.scalar(2 + k)? {
                Some(s) => *x = s,
                None => known = false,
            }
        }
    }
    let truncate = switch(c, 6, true)?;
    let (Some(truncate), true) = (truncate, known) else {
        return unknown_model();
    };
    let scaling = super::site::check_yarn(c, v, truncate)?;
    match (n, base) {
        (Some(head_dim), Some(base)) => model(Layer::Rope(Rope {
            head_dim,
            base,
            scaling,
        })),
        _ => unknown_model(),
    }
}

/// `chain(m1, …, mn)`: E0303 for an argument that is not a model; E0211 at the
/// first stage whose input width differs from what the stages before it produce.
pub fn chain(c: &mut ShapeCtx) -> Rule {
    let mut children = Vec::with_capacity(c.len());
    let mut known = true;
    for i in 0..c.len() {
        match c.model(i)? {
            Some(m) => children.push(m.0),
            None => known = false,
        }
    }
    if !known {
        return unknown_model();
    }
    let layer = Layer::Chain(children);
    super::site::check_model_extent(c, &layer)?;
    if let Err(e) = models::flow(&layer) {
        let Layer::Chain(children) = &layer else {
            return unknown_model();
        };
        let stage = children
            .get(e.index)
            .map_or_else(String::new, |l| l.describe());
        return Err(Diagnostic::of(code::E0211)
            .at(
                c.arg_span(e.index),
                format!("`{stage}` expects […, {}], got […, {}]", e.expected, e.got),
            )
            .note(format!(
                "the stages before it produce a last axis of {}; every input of this chain fails here",
                e.got
            ))
            .help(format!("make the previous stage output {} features", e.expected)));
    }
    model(layer)
}

/// `residual(m)`: E0212 when m provably changes the width of every input.
pub fn residual(c: &mut ShapeCtx) -> Rule {
    let Some(m) = c.model(0)? else {
        return unknown_model();
    };
    if let Ok(f) = models::flow(&m.0) {
        // A block taking ids (`residual(embed(…))`) is no error until it is
        // applied: constructing it runs fine.
        let changes = match (f.ids, f.input, f.output) {
            (false, Some(i), Some(o)) => i != o,
            _ => false,
        };
        if changes {
            let from = f.input.map_or("[…]".to_string(), |i| format!("[…, {i}]"));
            let to = f.output.map_or("[…]".to_string(), |o| format!("[…, {o}]"));
            return Err(models::residual_error(c.arg_span(0), &from, &to));
        }
    }
    let layer = Layer::Residual(m.0);
    super::site::check_model_extent(c, &layer)?;
    model(layer)
}

/// `apply(model, x)`: the forward pass over the abstract input.
pub fn apply(c: &mut ShapeCtx) -> Rule {
    let m = c.model(0)?;
    let x = c.array(1)?;
    let (Some(m), Some(x)) = (m, x) else {
        return Ok(AbsValue::any_array());
    };
    let mut f = Forward::new(c.arg_span(1));
    Ok(AbsValue::Array(f.layer(&m.0, &x)?))
}

fn no_attention(c: &ShapeCtx) -> Diagnostic {
    super::site::no_attention_error(c)
}

/// `attention_weights(model, x)`: `[T, T]`, `[heads, T, T]`, with a leading B
/// for a batched input; E0308 without an attention layer.
pub fn attention_weights(c: &mut ShapeCtx) -> Rule {
    let Some(m) = c.model(0)? else {
        c.array(1)?;
        return Ok(AbsValue::any_array());
    };
    if !m.0.any(&|l| matches!(l, Layer::Attention(_))) {
        return Err(no_attention(c));
    }
    let Some(x) = c.array(1)? else {
        return Ok(AbsValue::any_array());
    };
    let mut f = Forward::new(c.arg_span(1));
    f.layer(&m.0, &x)?;
    Ok(AbsValue::Array(match f.first_attention {
        Some((input, heads)) => models::attention_weights_shape(&input, heads),
        None => AbsArray::unknown(),
    }))
}

/// `aux_loss(model)`: a scalar; W0106 for a model without `moe` layers.
pub fn aux_loss(c: &mut ShapeCtx) -> Rule {
    if let Some(m) = c.model(0)? {
        if !m.0.any(&|l| matches!(l, Layer::Moe(_))) {
            super::site::warn_no_aux_loss(c);
            return Ok(AbsValue::scalar(0.0));
        }
    }
    Ok(AbsValue::any_scalar())
}
