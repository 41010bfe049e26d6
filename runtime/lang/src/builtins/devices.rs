//! Device placement (LANGUAGE §10.18, §14.5).

use super::site::CallSite;
use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::errors::device_error;
use crate::eval::Call;
use crate::value::{Array, DeviceTarget, Placement, Value};
use mlpl_devices::{DeviceKind, Tensor};
use mlpl_diag::code;
use mlpl_diag::Diagnostic;
use mlpl_diag::Span;
use mlpl_syntax::ExprKind;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[Builtin {
    name: "to_device",
    params: &[req("x", Any), req("target", Any)],
    summary: "place an array or a model's parameters on a device",
    doc: "`to_device(x, target)` (or `to_device(target, x)`) places an array on \"cpu\", \"cuda\", \"cuda:N\" or \"mlx\"; a bare variable is re-bound to the placed array. A model's parameters are all placed and the result is 0. An unavailable target keeps the placement but the data stays in host memory (W0504). E0502 unknown target; E0311 for strings and tokenizers.",
    example: "x = to_device([1, 2, 3], \"cpu\")\nx * 2",
    diff: Diff::Effect,
    facts: Facts::NONE,
    section: "10.18",
    run: to_device, shape: Some(super::devices_shapes::to_device)
}];

/// The array with its data in `target`'s memory when that device is available (one
/// counted upload, or download for the CPU); names and tape node are kept.
fn move_data(
    c: &mut Call,
    a: Array,
    target: DeviceTarget,
    span: Span,
) -> Result<Array, Diagnostic> {
    let Some(t) = a.tensor_ref() else {
        return Ok(a);
    };
    if c.it.devices.availability(target).is_err() {
        return Ok(a);
    }
    let moved = if target.kind == DeviceKind::Cpu {
        match t.device_buffer() {
            Some(b) => b.to_host().map(|v| Tensor::from_vec(t.shape().to_vec(), v)),
            None => return Ok(a),
        }
    } else {
        c.it.devices.backend(target).upload(t)
    }
    .map_err(|e| device_error(e, "to_device", span))?;
    let mut out = Array::from_tensor(moved).with_names(a.names().map(|n| n.to_vec()));
    if let Some(node) = a.node() {
        // The loss tape names the moved array's node by the old tensor, which
        // `out` no longer holds: the tape keeps it.
        if let Some(t) = c.it.tape.as_mut().filter(|t| t.id == node.tape) {
            t.tape.keep(node.var);
        }
        out = out.with_node(node);
    }
    Ok(out)
}

fn to_device(c: &mut Call) -> Result<Value, Diagnostic> {
    let is_string = |v: &Value| Some(matches!(v, Value::Str(_)));
    let which = [is_string(c.value(0)), is_string(c.value(1))];
    let Some((ti, xi)) = super::site::device_target_argument(c, which)? else {
        unreachable!("every value is known at run time")
    };
    let name = c.string(ti)?.to_string();
    let Some(target) = DeviceTarget::parse(&name) else {
        return Err(super::site::unknown_device_target(c, ti, &name));
    };
    if let Err(why) = c.it.devices.availability(target) {
        c.warn_at(
            ti,
            code::W0504,
            format!("placement on `{target}` is not available; the data stays in host memory"),
            why.reason(),
        );
    }
    let span = c.args[xi].expr.span;
    match c.value(xi).clone() {
        Value::Array(a) => {
            let placed = move_data(c, a, target, span)?.with_placement(Placement::Placed(target));
            if let ExprKind::Var(var) = &c.args[xi].expr.unparen().kind {
                let var = var.clone();
                c.it.ws.bindings.insert(var, Value::Array(placed.clone()));
            }
            Ok(Value::Array(placed))
        }
        Value::Model(m) => {
            for name in m.0.parameters() {
                if let Some(Value::Array(a)) = c.it.ws.get(&name) {
                    let a = a.clone();
                    let placed =
                        move_data(c, a, target, span)?.with_placement(Placement::Placed(target));
                    c.it.ws.bindings.insert(name, Value::Array(placed));
                }
            }
            Ok(Value::exact(0.0))
        }
        other => Err(c.error_of(xi, code::E0311, format!("this is a {}", other.kind_name()))),
    }
}
