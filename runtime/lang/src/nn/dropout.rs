//! Dropout (LANGUAGE §11.6, §13.7): the identity outside training; in training
//! mode (inside a `train` body) element i is kept with probability 1 − p and
//! scaled by 1/(1 − p), by a mask that depends only on the seed, the current
//! `step` and i.

use mlpl_devices::{BinaryOp, DropoutKey};

use super::apply::Forward;
use super::layers::Dropout;
use crate::data::rng;
use crate::eval::ops;
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;

/// The mask multiplied into an input of `shape` at `step`: 1/(1 − p) where kept, 0
/// elsewhere.
pub fn mask(d: &Dropout, step: u64, shape: &[usize]) -> Array {
    let n: usize = shape.iter().product();
    let scale = 1.0 / (1.0 - d.p);
    let values: Vec<f64> = (0..n as u64)
        .map(|i| {
            if rng::dropout_keep(d.seed, step, i, d.p) {
                scale
            } else {
                0.0
            }
        })
        .collect();
    Array::from_f64(shape.to_vec(), &values)
}

/// The `step` of the innermost `train` loop, as an unsigned integer (0 if unbound).
pub fn current_step(f: &Forward<'_>) -> u64 {
    match f.it.ws.get("step") {
        Some(Value::Array(a)) => a.scalar_value().map_or(0, rng::seed_from_f64),
        _ => 0,
    }
}

/// Applies a dropout layer to `x`.
pub fn forward(f: &mut Forward<'_>, d: &Dropout, x: &Array) -> Result<Array, Diagnostic> {
    if f.it.train_depth == 0 || d.p == 0.0 {
        return Ok(x.clone());
    }
    let step = current_step(f);
    // A GPU makes the same mask in its own memory; otherwise it is built here.
    // The key `mix(mix(seed) ^ step)` is passed as its two parts, so a captured
    // step can count `step` on (`DropoutKey`).
    let key = DropoutKey {
        stream: rng::mix(d.seed),
        counter: step,
    };
    let backend = f.it.devices.active_backend();
    let m = match backend.dropout_mask(x.shape(), key, d.p) {
        Ok(Some(t)) => Array::from_tensor(t),
        Ok(None) => mask(d, step, x.shape()),
        Err(e) => return Err(crate::errors::device_error(e, "dropout", f.span)),
    };
    ops::arith(f.it, BinaryOp::Mul, x, &m, f.span)
}
