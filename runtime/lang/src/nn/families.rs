//! Parameter families and the in-place edits that use them (LANGUAGE §11.8):
//! `perturb_params` adds σ·randn(seed + i, shape) to the i-th member, `reinit`
//! sets the i-th member (skipping biases, gains and adapters) to
//! std·randn(seed + i, shape).

use super::layers::{Layer, Linear, ParamSpec};
use crate::data::rng;
use crate::eval::Interp;
use crate::value::{Array, Value};

/// A parameter family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Every parameter.
    AllLayers,
    /// Names starting with `__attn_`.
    AttentionOnly,
    /// `__linear_` except the head's, plus `__swiglu_` and `__moe_`.
    MlpOnly,
    /// `__embed_` plus the head's W and b.
    EmbedAndHead,
}

/// The family names, for messages.
pub const NAMES: &[&str] = &["all_layers", "attention_only", "mlp_only", "embed_and_head"];

impl Family {
    /// The family called `name`.
    pub fn parse(name: &str) -> Option<Family> {
        Some(match name {
            "all_layers" => Family::AllLayers,
            "attention_only" => Family::AttentionOnly,
            "mlp_only" => Family::MlpOnly,
            "embed_and_head" => Family::EmbedAndHead,
            _ => return None,
        })
    }
}

/// The head of a model: the model itself if it is a bare `linear`; for a `chain`,
/// its last direct child that is a plain `linear`; otherwise none.
pub fn head(layer: &Layer) -> Option<Linear> {
    match layer {
        Layer::Linear(l) => Some(*l),
        Layer::Chain(children) => children.iter().rev().find_map(|c| match &**c {
            Layer::Linear(l) => Some(*l),
            _ => None,
        }),
        _ => None,
    }
}

/// The members of `family` in parameter order.
pub fn members(layer: &Layer, family: Family) -> Vec<ParamSpec> {
    let head: Vec<String> = head(layer).map_or(Vec::new(), |h| {
        let mut v = vec![h.w()];
        if h.bias {
            v.push(h.b());
        }
        v
    });
    layer
        .param_specs()
        .into_iter()
        .filter(|p| {
            let n = p.name.as_str();
            match family {
                Family::AllLayers => true,
                Family::AttentionOnly => n.starts_with("__attn_"),
                Family::MlpOnly => {
                    (n.starts_with("__linear_") && !head.iter().any(|h| h == n))
                        || n.starts_with("__swiglu_")
                        || n.starts_with("__moe_")
                }
                Family::EmbedAndHead => n.starts_with("__embed_") || head.iter().any(|h| h == n),
            }
        })
        .collect()
}

/// The current value of parameter `name`, if it is still an array.
fn current(it: &Interp, name: &str) -> Option<Array> {
    match it.ws.get(name) {
        Some(Value::Array(a)) => Some(a.clone()),
        _ => None,
    }
}

/// Replaces the values of parameter `name`, keeping its names and placement.
fn store(it: &mut Interp, old: &Array, name: &str, values: &[f64]) {
    let a = Array::from_f64(old.shape().to_vec(), values)
        .with_names(old.names().map(|n| n.to_vec()))
        .with_placement(old.placement());
    it.ws.bindings.insert(name.to_string(), Value::Array(a));
}

/// `perturb_params`: adds sigma·randn(seed + i, shape) to the i-th member, in
/// float64, rounded once. Returns how many parameters changed.
pub fn perturb(it: &mut Interp, layer: &Layer, family: Family, sigma: f64, seed: u64) -> usize {
    let mut count = 0;
    for (i, p) in members(layer, family).iter().enumerate() {
        let Some(old) = current(it, &p.name) else {
            continue;
        };
        let noise = rng::normal_vec(seed.wrapping_add(i as u64), old.numel());
        let values: Vec<f64> = old
            .to_f64()
            .iter()
            .zip(noise)
            .map(|(v, z)| v + sigma * z)
            .collect();
        store(it, &old, &p.name, &values);
        count += 1;
    }
    count
}

/// `reinit`: sets the i-th member that is not a bias, gain or adapter to
/// std·randn(seed + i, shape). Returns how many parameters changed.
pub fn reinit(it: &mut Interp, layer: &Layer, family: Family, std: f64, seed: u64) -> usize {
    let chosen: Vec<ParamSpec> = members(layer, family)
        .into_iter()
        .filter(|p| !matches!(p.role, "b" | "g" | "A" | "B"))
        .collect();
    let mut count = 0;
    for (i, p) in chosen.iter().enumerate() {
        let Some(old) = current(it, &p.name) else {
            continue;
        };
        let values: Vec<f64> = rng::normal_vec(seed.wrapping_add(i as u64), old.numel())
            .into_iter()
            .map(|z| std * z)
            .collect();
        store(it, &old, &p.name, &values);
        count += 1;
    }
    count
}
