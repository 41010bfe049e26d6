//! Device scopes (LANGUAGE §14.2): the device stack, availability of targets and
//! the backend an operation runs on.

use std::collections::HashSet;
use std::sync::Arc;

use mlpl_devices::{Backend, DeviceKind};

use super::Interp;
use crate::diag::{Diagnostic, Span};
use crate::syntax::Block;
use crate::value::{DeviceTarget, Value};

/// Why a target cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// The backend is not compiled into this build.
    NotBuilt(&'static str),
    /// The backend is built but no device was found.
    NoDevice(String),
}

impl Unavailable {
    /// A sentence for W0501/W0504 and `mlpl run --device`.
    pub fn reason(&self) -> String {
        match self {
            Unavailable::NotBuilt(what) => {
                format!("this build does not include the {what} backend")
            }
            Unavailable::NoDevice(why) => why.clone(),
        }
    }
}

/// The device stack of a run and the backends it can use.
#[derive(Debug)]
pub struct DeviceContext {
    stack: Vec<DeviceTarget>,
    warned_blocks: HashSet<usize>,
    cpu: Arc<dyn Backend>,
}

impl Default for DeviceContext {
    fn default() -> Self {
        DeviceContext::new()
    }
}

impl DeviceContext {
    /// A context with only the CPU active.
    pub fn new() -> DeviceContext {
        DeviceContext {
            stack: Vec::new(),
            warned_blocks: HashSet::new(),
            cpu: mlpl_devices::cpu(),
        }
    }

    /// Resets per-run state; `default` is the device for code outside blocks.
    pub fn begin_run(&mut self, default: Option<DeviceTarget>) {
        self.stack.clear();
        self.warned_blocks.clear();
        if let Some(d) = default {
            self.stack.push(d);
        }
    }

    /// The active target: the innermost block's, or the CPU.
    pub fn active(&self) -> DeviceTarget {
        self.stack.last().copied().unwrap_or(DeviceTarget::CPU)
    }

    /// Whether `target` can run code in this build on this machine.
    pub fn availability(&self, target: DeviceTarget) -> Result<(), Unavailable> {
        match target.kind {
            DeviceKind::Cpu => Ok(()),
            DeviceKind::Cuda => Err(Unavailable::NotBuilt("CUDA")),
            DeviceKind::Mlx => Err(Unavailable::NotBuilt("MLX")),
        }
    }

    /// The backend that runs operations for `target` (the CPU when unavailable).
    pub fn backend(&self, target: DeviceTarget) -> Arc<dyn Backend> {
        match self.availability(target) {
            Ok(()) => self.cpu.clone(),
            Err(_) => self.cpu.clone(),
        }
    }

    /// The backend for the active device.
    pub fn active_backend(&self) -> Arc<dyn Backend> {
        self.backend(self.active())
    }

    /// The CPU backend (host builtins always run there).
    pub fn cpu(&self) -> Arc<dyn Backend> {
        self.cpu.clone()
    }
}

/// `device(target) { body }` (LANGUAGE §14.2).
pub fn device_block(
    it: &mut Interp,
    target: &crate::syntax::Expr,
    body: &Block,
    span: Span,
) -> Result<Value, Diagnostic> {
    let tv = it.expr(target)?;
    let Value::Str(name) = &tv else {
        return Err(Diagnostic::error("E0302", "expected a string")
            .at(target.span, format!("this is a {}", tv.kind_name()))
            .note("a device target is a string: \"cpu\", \"cuda\", \"cuda:N\" or \"mlx\""));
    };
    let chosen = match DeviceTarget::parse(name) {
        Some(t) => {
            if let Err(why) = it.devices.availability(t) {
                if it.devices.warned_blocks.insert(span.start) {
                    it.warn(
                        Diagnostic::warning(
                            "W0501",
                            format!("device `{t}` is not available; this block runs on the CPU"),
                        )
                        .at(target.span, why.reason()),
                    );
                }
            }
            t
        }
        None => {
            it.warn(
                Diagnostic::warning(
                    "W0502",
                    format!("unknown device `{name}`; this block runs on the CPU"),
                )
                .at(target.span, "not a device target")
                .help("device targets are \"cpu\", \"cuda\", \"cuda:N\" and \"mlx\""),
            );
            DeviceTarget::CPU
        }
    };
    it.devices.stack.push(chosen);
    let result = it.block(&body.stmts);
    it.devices.stack.pop();
    result
}
