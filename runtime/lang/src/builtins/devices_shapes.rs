//! Shape rule of `to_device` (LANGUAGE §10.18, §14.5), for the entry of
//! `devices.rs`: the array keeps its shape and names and is provably placed on
//! the target, which the checker uses to prove E0501 later; a bare variable
//! argument is re-bound. E0311, E0302 and E0502 as at run time.
//!
//! This rule is reached through [`super::shape_rule`] until the entry of
//! `devices.rs` names it in its `shape` field.

use super::site::CallSite;
use crate::check::abstract_value::AbsValue;
use crate::check::ctx::ShapeCtx;
use crate::value::DeviceTarget;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

/// `to_device(x, target)` or `to_device(target, x)`.
pub fn to_device(c: &mut ShapeCtx) -> Result<AbsValue, Diagnostic> {
    let is_str = |v: &AbsValue| match v {
        AbsValue::Str(_) => Some(true),
        AbsValue::Unknown => None,
        _ => Some(false),
    };
    let (ti, xi) = match (is_str(c.value(0)), is_str(c.value(1))) {
        (Some(true), Some(true)) => {
            return Err(c.error_of(0, code::E0311, "a string").note(
                "exactly one argument is the target string; the other is an array or a model",
            ))
        }
        (Some(true), Some(false)) => (0, 1),
        (Some(false), Some(true)) => (1, 0),
        (Some(false), Some(false)) => {
            return Err(c
                .error_of(1, code::E0302, "not a device target")
                .note("one argument must be the target: \"cpu\", \"cuda\", \"cuda:N\" or \"mlx\""))
        }
        _ => return Ok(AbsValue::Unknown),
    };
    let target = match c.value(ti) {
        AbsValue::Str(Some(name)) => match DeviceTarget::parse(name) {
            Some(t) => Some(t),
            None => {
                return Err(c
                    .error_of(ti, code::E0502, format!("\"{name}\""))
                    .help("device targets are \"cpu\", \"cuda\", \"cuda:N\" and \"mlx\""))
            }
        },
        _ => None,
    };
    match c.value(xi).clone() {
        AbsValue::Array(mut a) => {
            a.placed = target;
            c.rebind = Some(xi);
            Ok(AbsValue::Array(a))
        }
        // A model's parameters are placed; the result is the exact scalar 0.
        AbsValue::Model(_) => Ok(AbsValue::scalar(0.0)),
        AbsValue::Tokenizer => Err(c.error_of(xi, code::E0311, "this is a tokenizer")),
        _ => Ok(AbsValue::Unknown),
    }
}
