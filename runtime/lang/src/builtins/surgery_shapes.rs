//! Shape rules of model surgery (LANGUAGE §10.14), for the entries of
//! `surgery.rs`: copies keep the layer tree, `lora` wraps every linear layer
//! (E0213, E0310), the parameter families are checked (E0107) and
//! `embed_table` reads the first embedding's size (E0308).
//!
//! These rules are reached through [`super::shape_rule`] until the entries of
//! `surgery.rs` name them in their `shape` field.

use std::sync::Arc;

use crate::check::abstract_value::{AbsArray, AbsValue};
use crate::check::ctx::ShapeCtx;
use crate::check::models::AbsModel;
use crate::nn::families::Family;
use crate::nn::layers::{Layer, Linear, Lora};
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// `clone_model(m)`: a model with the same layers.
pub fn clone_model(c: &mut ShapeCtx) -> Rule {
    let m = c.model(0)?;
    Ok(AbsValue::Model(m.map(|m| {
        AbsModel(Arc::new(copy(&m.0, None, &mut || c.fresh_id())))
    })))
}

/// A copy of `layer` with new parameter ids (`id` hands them out; a layer
/// shared inside the model is copied once per occurrence here, which only
/// matters for parameter counts of shared layers), its linear layers
/// LoRA-wrapped with `(rank, alpha)`.
fn copy(layer: &Layer, lora: Option<(usize, f64)>, id: &mut dyn FnMut() -> u64) -> Layer {
    match layer {
        Layer::Linear(l) => {
            let base = Linear { id: id(), ..*l };
            match lora {
                Some((rank, alpha)) => Layer::Lora(Lora {
                    base,
                    adapter_id: id(),
                    rank,
                    alpha,
                }),
                None => Layer::Linear(base),
            }
        }
        Layer::Lora(l) => Layer::Lora(Lora {
            base: Linear { id: id(), ..l.base },
            adapter_id: id(),
            ..*l
        }),
        Layer::Embed(e) => Layer::Embed(crate::nn::layers::Embed { id: id(), ..*e }),
        Layer::Unembed(e) => Layer::Unembed(crate::nn::layers::Embed { id: id(), ..*e }),
        Layer::PosEmbed(p) => Layer::PosEmbed(crate::nn::layers::PosEmbed { id: id(), ..*p }),
        Layer::Attention(a) => Layer::Attention(crate::nn::layers::Attention { id: id(), ..*a }),
        Layer::RmsNorm(r) => Layer::RmsNorm(crate::nn::layers::RmsNorm {
            gain: r.gain.map(|_| id()),
            ..*r
        }),
        Layer::LayerNorm(l) => Layer::LayerNorm(crate::nn::layers::LayerNorm { id: id(), ..*l }),
        Layer::Activation(a) => Layer::Activation(*a),
        Layer::Dropout(d) => Layer::Dropout(*d),
        Layer::SwiGlu(s) => Layer::SwiGlu(crate::nn::layers::SwiGlu { id: id(), ..*s }),
        Layer::Rope(r) => Layer::Rope(*r),
        Layer::Moe(m) => Layer::Moe(crate::nn::layers::Moe { id: id(), ..*m }),
        Layer::Engram(g) => Layer::Engram(crate::nn::layers::Engram { id: id(), ..*g }),
        Layer::Chain(children) => Layer::Chain(
            children
                .iter()
                .map(|ch| Arc::new(copy(ch, lora, id)))
                .collect(),
        ),
        Layer::Residual(inner) => Layer::Residual(Arc::new(copy(inner, lora, id))),
    }
}

/// `freeze(m)`: the exact scalar 0.
pub fn freeze(c: &mut ShapeCtx) -> Rule {
    c.model(0)?;
    Ok(AbsValue::scalar(0.0))
}

/// `unfreeze(m)`: the exact scalar 0.
pub fn unfreeze(c: &mut ShapeCtx) -> Rule {
    c.model(0)?;
    Ok(AbsValue::scalar(0.0))
}

/// `lora(m, rank, alpha, seed)`: E0310 for a model with adapters; E0213 for a
/// rank that is not an integer ≥ 1 or exceeds min(in, out) of a linear layer.
pub fn lora(c: &mut ShapeCtx) -> Rule {
    let m = c.model(0)?;
    if let Some(m) = &m {
        super::site::check_not_lora_student(c, &m.0)?;
    }
    let r = c.scalar(1)?;
    if let Some(r) = r {
        super::site::check_lora_rank(c, r, m.as_ref().map(|m| &*m.0))?;
    }
    let alpha = c.scalar(2)?;
    c.seed(3)?;
    Ok(AbsValue::Model(match (m, r, alpha) {
        (Some(m), Some(r), Some(alpha)) => Some(AbsModel(Arc::new(copy(
            &m.0,
            Some((r as usize, alpha)),
            &mut || c.fresh_id(),
        )))),
        _ => None,
    }))
}

/// A parameter family argument (E0302, E0107).
fn family(c: &ShapeCtx, i: usize) -> Result<(), Diagnostic> {
    if let Some(name) = c.string(i)? {
        if Family::parse(&name).is_none() {
            return Err(super::site::unknown_family(c, i, &name));
        }
    }
    Ok(())
}

/// `perturb_params(m, family, sigma, seed)`: the exact scalar 0; E0107.
pub fn perturb_params(c: &mut ShapeCtx) -> Rule {
    c.model(0)?;
    family(c, 1)?;
    c.scalar(2)?;
    c.seed(3)?;
    Ok(AbsValue::scalar(0.0))
}

/// `reinit(m, family, std, seed)`: the exact scalar 0; E0107, E0401 for std < 0.
pub fn reinit(c: &mut ShapeCtx) -> Rule {
    c.model(0)?;
    family(c, 1)?;
    if let Some(std) = c.scalar(2)? {
        super::site::check_std(c, 2, std)?;
    }
    c.seed(3)?;
    Ok(AbsValue::scalar(0.0))
}

/// `embed_table(m)`: `[vocab, d]` of the first embedding; E0308 without one.
pub fn embed_table(c: &mut ShapeCtx) -> Rule {
    let Some(m) = c.model(0)? else {
        return Ok(AbsValue::any_array());
    };
    let mut first = None;
    m.0.walk_distinct(&mut |l| {
        if let (Layer::Embed(e), None) = (l, &first) {
            first = Some((e.vocab, e.d));
        }
    });
    match first {
        Some((v, d)) => Ok(AbsValue::Array(AbsArray::of_shape(&[v, d]))),
        None => Err(super::site::no_embedding_error(c)),
    }
}
