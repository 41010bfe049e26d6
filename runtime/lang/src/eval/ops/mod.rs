//! Array operations with the language's rules: exact-scalar arithmetic in float64,
//! named-axis broadcasting (LANGUAGE §9), placement checks (§14.4), and dispatch to
//! the device backend. Builtins and operators call these; nothing here parses.

use mlpl_diag::code;
use std::sync::Arc;

use mlpl_devices::{Backend, Tensor};

use super::{loss, Interp};
use crate::errors::{device_error, device_mismatch_error};
use crate::value::{Array, Placement};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

mod elementwise;
mod layout;
mod nn;
mod reduce;
mod select;

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

/// E0410 when a result of `shape` would exceed the largest array MLPL allocates
/// ([`crate::builtins::MAX_ELEMENTS`]), the calling thread's memory budget
/// ([`set_memory_budget`]) or, for results of [`PROBE_BYTES`] and more, the
/// host memory available now: a diagnostic instead of an allocation failure that
/// would end the process (LANGUAGE §6.5, docs/limits.md).
pub fn check_size(op: &str, shape: &[usize], span: Span) -> Result<(), Diagnostic> {
    let sizes = || {
        shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("×")
    };
    let n = match shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) {
        Some(n) if n <= crate::builtins::MAX_ELEMENTS => n,
        _ => {
            return Err(Diagnostic::of(code::E0410)
                .at(span, format!("`{op}` would create {} elements", sizes())))
        }
    };
    let bytes = n.saturating_mul(4);
    match over_budget(bytes) {
        Some((limit, what)) => Err(Diagnostic::of(code::E0410)
            .at(span, format!("`{op}` would create {} elements", sizes()))
            .note(format!("{bytes} bytes asked; {what} is {limit} bytes"))),
        None => Ok(()),
    }
}

/// Results this large (64 MiB) are also checked against the host memory
/// available (`MemAvailable` in /proc/meminfo, where there is one).
pub const PROBE_BYTES: usize = 64 << 20;

thread_local! {
    static BUDGET: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Sets the largest single result, in bytes, that operations on this thread may
/// allocate (`None`: no budget beyond [`crate::builtins::MAX_ELEMENTS`] and the
/// memory available). A `mlpl serve` session sets it on its worker thread.
pub fn set_memory_budget(bytes: Option<usize>) {
    BUDGET.with(|b| b.set(bytes));
}

/// This thread's budget ([`set_memory_budget`]).
pub fn memory_budget() -> Option<usize> {
    BUDGET.with(|b| b.get())
}

/// The host memory available now, in bytes, where the system says.
pub fn available_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// The limit `bytes` is over, and what it is: this thread's budget or, from
/// [`PROBE_BYTES`] up, the host memory available.
fn over_budget(bytes: usize) -> Option<(usize, &'static str)> {
    if let Some(limit) = memory_budget() {
        if bytes > limit {
            return Some((limit, "the memory budget of one result"));
        }
    }
    if bytes >= PROBE_BYTES {
        if let Some(avail) = available_memory() {
            if bytes > avail {
                return Some((avail, "the host memory available"));
            }
        }
    }
    None
}

/// E0410 when `bytes` for a result of `op` are over this thread's budget or,
/// from [`PROBE_BYTES`] up, over the memory available.
pub fn check_bytes(op: &str, bytes: usize, span: Span) -> Result<(), Diagnostic> {
    match over_budget(bytes) {
        Some((limit, what)) => Err(Diagnostic::of(code::E0410)
            .at(span, format!("`{op}` would allocate {bytes} bytes"))
            .note(format!("{what} is {limit} bytes"))),
        None => Ok(()),
    }
}

/// A vector of `n` copies of `v`, or E0410 when the allocation fails (a fallible
/// reservation: the allocator's refusal is an error in this run, not an abort).
pub fn try_filled(op: &str, n: usize, v: f32, span: Span) -> Result<Vec<f32>, Diagnostic> {
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| {
        Diagnostic::of(code::E0410).at(span, format!("`{op}` could not allocate {n} elements"))
    })?;
    data.resize(n, v);
    Ok(data)
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
