//! Device diagnostics that the checker and the interpreter both report: a device
//! failure (E0503, E0504) and operands placed on different devices (E0501).

use mlpl_devices::DeviceError;
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};

use crate::value::DeviceTarget;

/// Turns a device failure into E0503 / E0504.
pub fn device_error(e: DeviceError, op: &str, span: Span) -> Diagnostic {
    match e {
        DeviceError::OutOfMemory {
            device,
            requested_bytes,
            free_bytes,
            ..
        } => {
            let mut d = Diagnostic::error(code::E0503, format!("out of device memory on {device}"))
                .at(span, format!("`{op}` asked for {requested_bytes} bytes"));
            if let Some(free) = free_bytes {
                d = d.note(format!("{free} bytes were free"));
            }
            d.help("use smaller batches or a smaller model, or run this part on the CPU")
        }
        DeviceError::Backend { device, message } => {
            Diagnostic::error(code::E0504, format!("device backend failure on {device}"))
                .at(span, format!("in `{op}`"))
                .note(message)
        }
    }
}

/// E0501 (LANGUAGE §14.4): two operands placed on different devices. `first` is
/// the role ("left operand", "argument 1") and target of the first placed
/// operand, `second` those of the conflicting one. Shared by the interpreter and
/// the checker.
pub fn device_mismatch_error(
    op: &str,
    first: (&str, DeviceTarget, Span),
    second: (&str, DeviceTarget, Span),
) -> Diagnostic {
    let (r0, t0, s0) = first;
    let (r1, t1, s1) = second;
    Diagnostic::error(
        code::E0501,
        format!("device mismatch in `{op}`: {r0} is on {t0}, {r1} is on {t1}"),
    )
    .at(s1, format!("{r1} on {t1}"))
    .with_label(s0, format!("{r0} on {t0}"))
    .help(format!(
        "move one operand, for example `to_device(x, \"{t0}\")`"
    ))
}

/// E0501 for a builtin call (LANGUAGE §14.4, "E0501 in every operation"): the
/// first argument placed on a device other than an earlier placed argument's.
/// `placed` lists `(argument index, device, span)` of the array arguments of rank
/// ≥ 1 that are placed, in argument order; `arrays` is how many array arguments
/// the call has (two are named "left operand" and "right operand", as for an
/// operator). Shared by the interpreter and the checker.
pub fn call_placement_conflict(
    op: &str,
    placed: &[(usize, DeviceTarget, Span)],
    arrays: usize,
) -> Option<Diagnostic> {
    let (first, rest) = placed.split_first()?;
    let (i1, t1, s1) = rest.iter().find(|(_, t, _)| *t != first.1)?;
    let role = |i: usize| match (arrays, i == first.0) {
        (2, true) => "left operand".to_string(),
        (2, false) => "right operand".to_string(),
        _ => format!("argument {}", i + 1),
    };
    Some(device_mismatch_error(
        op,
        (&role(first.0), first.1, first.2),
        (&role(*i1), *t1, *s1),
    ))
}
