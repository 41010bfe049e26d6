//! Array operations with the language's rules: exact-scalar arithmetic in float64,
//! named-axis broadcasting (LANGUAGE §9), placement checks (§14.4), and dispatch to
//! the device backend. Builtins and operators call these; nothing here parses.

use std::sync::Arc;

use mlpl_devices::{Backend, Tensor};

use super::{loss, Interp};
use crate::errors::{device_error, device_mismatch_error};
use crate::value::{Array, Placement};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

mod budget;
mod elementwise;
mod layout;
mod nn;
mod reduce;
mod select;

pub use budget::*;
pub use elementwise::*;
pub use layout::*;
pub use nn::*;
pub use reduce::*;
pub use select::*;

/// The two operands of a binary operation, with the expressions they came from.
pub struct Operands<'a> {
    /// Left operand.
    pub left: &'a Array,
    /// Its expression.
    pub left_expr: &'a Expr,
    /// Right operand.
    pub right: &'a Array,
    /// Its expression.
    pub right_expr: &'a Expr,
}

/// Chooses where an operation runs (LANGUAGE §14.4): the common placement of its
/// placed operands (E0501 if they differ), otherwise the active device.
pub fn placement_for(
    it: &Interp,
    op: &str,
    operands: &[(&Array, Span)],
) -> Result<(Arc<dyn Backend>, Placement), Diagnostic> {
    let mut placed: Option<(crate::value::DeviceTarget, Span, usize)> = None;
    for (i, (a, span)) in operands.iter().enumerate() {
        if let Placement::Placed(t) = a.placement() {
            match placed {
                None => placed = Some((t, *span, i)),
                Some((t0, s0, i0)) if t0 != t => {
                    let role = |k: usize| match (operands.len(), k) {
                        (2, 0) => "left operand".to_string(),
                        (2, _) => "right operand".to_string(),
                        (_, k) => format!("argument {}", k + 1),
                    };
                    let (r0, r1) = (role(i0), role(i));
                    return Err(device_mismatch_error(op, (&r0, t0, s0), (&r1, t, *span)));
                }
                Some(_) => {}
            }
        }
    }
    Ok(match placed {
        Some((t, _, _)) => (it.devices.backend(t), Placement::Placed(t)),
        None => (it.devices.active_backend(), Placement::Floating),
    })
}

/// The backend and placement for a one-operand operation.
pub(super) fn place1(
    it: &Interp,
    op: &str,
    a: &Array,
    span: Span,
) -> Result<(Arc<dyn Backend>, Placement), Diagnostic> {
    placement_for(it, op, &[(a, span)])
}

/// Runs a one-operand operation: recorded on the loss tape when `x` is on it,
/// otherwise directly on the backend; the result keeps the operation's placement.
pub(super) fn one_operand(
    it: &mut Interp,
    op: &str,
    x: &Array,
    span: Span,
    on_tape: impl FnOnce(
        &mut crate::autograd::Tape,
        crate::autograd::Var,
    ) -> mlpl_devices::Result<crate::autograd::Var>,
    on_device: impl FnOnce(&dyn Backend, &Tensor) -> mlpl_devices::Result<Tensor>,
) -> Result<Array, Diagnostic> {
    let (backend, placement) = place1(it, op, x, span)?;
    let out = match loss::live(it, x) {
        Some(v) => loss::record(it, op, span, |t| on_tape(t, v))?,
        None => Array::from_tensor(
            on_device(backend.as_ref(), &x.tensor()).map_err(|e| device_error(e, op, span))?,
        ),
    };
    Ok(out.with_placement(placement))
}
