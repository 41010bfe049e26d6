//! Structural checkpoint keys (LANGUAGE §11.9): the path of child indices through
//! `chain` nodes (`residual` adds none), then the layer kind and the parameter
//! role, e.g. `1.1.attention.Wq`. Keys do not depend on generated names, so a
//! checkpoint loads into the same architecture built in another program.

use super::layers::{Layer, ParamSpec};

/// The distinct parameters of `layer` in parameter order with their keys; a
/// shared parameter appears once, under the key of its first occurrence.
pub fn keyed_params(layer: &Layer) -> Vec<(String, ParamSpec)> {
    let mut out = Vec::new();
    collect(layer, "", &mut out);
    let mut seen = std::collections::HashSet::new();
    out.retain(|(_, p)| seen.insert(p.name.clone()));
    out
}

fn collect(layer: &Layer, prefix: &str, out: &mut Vec<(String, ParamSpec)>) {
    match layer {
        Layer::Chain(children) => {
            for (i, c) in children.iter().enumerate() {
                collect(c, &format!("{prefix}{i}."), out);
            }
        }
        Layer::Residual(inner) => collect(inner, prefix, out),
        _ => {
            for p in layer.own_params() {
                out.push((format!("{prefix}{}.{}", p.kind, p.role), p));
            }
        }
    }
}
