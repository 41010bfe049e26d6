//! `clone_model` (LANGUAGE §10.14): a deep copy with new parameter names (new ids,
//! depth first), values and placements copied, parameters tracked, frozen flags
//! not copied. A layer shared inside the model stays shared in the copy.

use std::collections::HashMap;
use std::sync::Arc;

use super::init::{bind_param, filled, next_id};
use super::layers::*;
use crate::eval::Interp;
use crate::value::Value;

/// Copies the value of parameter `old` (declared `shape`) to a new tracked
/// parameter `new`. A parameter that is no longer an array becomes zeros.
pub fn copy_param(it: &mut Interp, old: &str, new: &str, shape: &[usize]) {
    let value = match it.ws.get(old) {
        Some(Value::Array(a)) => a.clone().detached(),
        _ => filled(shape, 0.0),
    };
    bind_param(it, new, value);
}

/// A deep copy of `layer` with new ids.
pub fn clone_model(it: &mut Interp, layer: &Arc<Layer>) -> Arc<Layer> {
    let mut done = Done::default();
    clone_shared(it, layer, &mut done)
}

/// The copies made so far: nodes by address, and the new id of each embedding
/// table, so a tied head (`unembed`) keeps sharing its `embed`'s copy.
#[derive(Default)]
struct Done {
    nodes: HashMap<*const Layer, Arc<Layer>>,
    tables: HashMap<u64, u64>,
}

impl Done {
    fn table(&mut self, it: &mut Interp, old: u64) -> u64 {
        *self.tables.entry(old).or_insert_with(|| next_id(it))
    }
}

fn clone_shared(it: &mut Interp, layer: &Arc<Layer>, done: &mut Done) -> Arc<Layer> {
    let key = Arc::as_ptr(layer);
    if let Some(c) = done.nodes.get(&key) {
        return c.clone();
    }
    let copy = Arc::new(clone_node(it, layer, done));
    done.nodes.insert(key, copy.clone());
    copy
}

fn clone_node(it: &mut Interp, layer: &Layer, done: &mut Done) -> Layer {
    let new = match layer {
        Layer::Chain(children) => {
            return Layer::Chain(children.iter().map(|c| clone_shared(it, c, done)).collect())
        }
        Layer::Residual(inner) => return Layer::Residual(clone_shared(it, inner, done)),
        Layer::Linear(l) => Layer::Linear(Linear {
            id: next_id(it),
            ..*l
        }),
        Layer::Lora(l) => {
            let base = Linear {
                id: next_id(it),
                ..l.base
            };
            Layer::Lora(Lora {
                base,
                adapter_id: next_id(it),
                ..*l
            })
        }
        Layer::Embed(e) | Layer::Unembed(e) => {
            let e2 = Embed {
                id: done.table(it, e.id),
                ..*e
            };
            match layer {
                Layer::Embed(_) => Layer::Embed(e2),
                _ => Layer::Unembed(e2),
            }
        }
        Layer::PosEmbed(p) => Layer::PosEmbed(PosEmbed {
            id: next_id(it),
            ..*p
        }),
        Layer::Attention(a) => Layer::Attention(Attention {
            id: next_id(it),
            ..*a
        }),
        Layer::RmsNorm(r) => Layer::RmsNorm(RmsNorm {
            gain: r.gain.map(|_| next_id(it)),
            ..*r
        }),
        Layer::LayerNorm(l) => Layer::LayerNorm(LayerNorm {
            id: next_id(it),
            ..*l
        }),
        Layer::SwiGlu(s) => Layer::SwiGlu(SwiGlu {
            id: next_id(it),
            ..*s
        }),
        Layer::Moe(m) => Layer::Moe(Moe {
            id: next_id(it),
            ..*m
        }),
        Layer::Engram(g) => Layer::Engram(Engram {
            id: next_id(it),
            ..*g
        }),
        Layer::Activation(a) => Layer::Activation(*a),
        Layer::Dropout(d) => Layer::Dropout(*d),
        Layer::Rope(r) => Layer::Rope(*r),
    };
    for (old, fresh) in layer.own_params().iter().zip(new.own_params()) {
        copy_param(it, &old.name, &fresh.name, &fresh.shape);
    }
    new
}
