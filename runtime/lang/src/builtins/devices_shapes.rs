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
    let which = [is_str(c.value(0)), is_str(c.value(1))];
    let Some((ti, xi)) = super::site::device_target_argument(c, which)? else {
        return Ok(AbsValue::Unknown);
    };
    let target = match c.value(ti) {
        AbsValue::Str(Some(name)) => match DeviceTarget::parse(name) {
            Some(t) => Some(t),
            None => return Err(super::site::unknown_device_target(c, ti, name)),
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
        AbsValue::Tokenizer(_) => Err(c.error_of(xi, code::E0311, "this is a tokenizer")),
        _ => Ok(AbsValue::Unknown),
    }
}
