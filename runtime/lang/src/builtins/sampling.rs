//! Sampling (LANGUAGE §10.7, §13.6).

use super::site::CallSite;
use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::data::sampling;
use crate::eval::Call;
use crate::value::{Array, Value};
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "sample",
        params: &[req("logits", Array), req("temperature", Scalar), req("seed", Seed)],
        summary: "draw a token id from logits",
        doc: "`sample(logits, temperature, seed)` returns an id drawn from softmax(logits / temperature) (LANGUAGE §13.6); temperature 0 takes the first maximum. `-inf` entries are never drawn. E0216 for empty logits; E0401 for a negative temperature.",
        example: "sample([0.1, 2.0, -1.0, 0.5, 0.3], 0.8, 5)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.7",
        run: sample,
        shape: Some(super::sampling_shapes::sample),
    },
    Builtin {
        name: "top_k",
        params: &[req("logits", Array), req("k", Scalar)],
        summary: "keep the k largest logits, -inf elsewhere",
        doc: "`top_k(logits, k)` keeps the k largest entries of a `[V]` vector and sets the others to `-inf`; among equal values the lower index is kept. E0401 unless 1 ≤ k ≤ V.",
        example: "top_k([0.1, 2.0, -1.0, 0.5, 0.3], 2)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.7",
        run: top_k,
        shape: Some(super::sampling_shapes::top_k),
    },
];

fn sample(c: &mut Call) -> Result<Value, Diagnostic> {
    let logits = c.array_of_rank(0, 1, "a vector of logits `[V]`")?.to_f32();
    let t = c.scalar(1)?;
    let seed = c.seed(2)?;
    let i = sampling::sample(&logits, t, seed).map_err(|e| {
        let at = if e.code() == code::E0216 { 0 } else { 1 };
        c.error_at(
            at,
            e.code(),
            if at == 0 {
                "empty array"
            } else {
                "invalid argument value"
            },
            e.to_string(),
        )
    })?;
    Ok(Value::Array(Array::scalar_f32(i as f32)))
}

fn top_k(c: &mut Call) -> Result<Value, Diagnostic> {
    let a = c.array_of_rank(0, 1, "a vector of logits `[V]`")?.clone();
    let k = c.scalar(1)?;
    let n = a.numel();
    super::site::check_top_k_of(c, 1, k, n)?;
    let kept = sampling::top_k(&a.to_f32(), k as usize).map_err(|e| c.invalid(1, e.to_string()))?;
    // Dropped entries become -inf through a mask, so gradients flow through the
    // kept ones (∂ ✓ in LANGUAGE §10.7).
    let dropped: Vec<f32> = kept
        .iter()
        .map(|&v| if v == f32::NEG_INFINITY { 1.0 } else { 0.0 })
        .collect();
    let mask = mlpl_devices::Tensor::from_vec(vec![n], dropped);
    let span = c.span;
    let out = crate::eval::ops::mask_fill(c.it, &a, &mask, f32::NEG_INFINITY, span)?;
    Ok(Value::Array(out.with_names(a.names().map(|x| x.to_vec()))))
}
