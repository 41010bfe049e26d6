//! Device scopes (LANGUAGE §14.2): the device stack, availability of targets and
//! the backend an operation runs on.

use mlpl_diag::code;
use std::collections::HashSet;
use std::sync::Arc;

use mlpl_devices::profile::{KernelLog, Profiled};
use mlpl_devices::{Backend, CudaUnavailable, DeviceKind, MlxUnavailable};

use super::Interp;
use crate::value::{DeviceTarget, Value};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Block;

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

impl From<CudaUnavailable> for Unavailable {
    fn from(why: CudaUnavailable) -> Unavailable {
        match why {
            CudaUnavailable::NotBuilt => Unavailable::NotBuilt("CUDA"),
            other => Unavailable::NoDevice(other.to_string()),
        }
    }
}

impl From<MlxUnavailable> for Unavailable {
    fn from(why: MlxUnavailable) -> Unavailable {
        match why {
            MlxUnavailable::NotBuilt => Unavailable::NotBuilt("MLX"),
            other => Unavailable::NoDevice(other.to_string()),
        }
    }
}

/// The device stack of a run and the backends it can use.
#[derive(Debug)]
pub struct DeviceContext {
    stack: Vec<DeviceTarget>,
    warned_blocks: HashSet<usize>,
    /// (block start, operation) pairs already reported as W0503 this run.
    warned_fallbacks: HashSet<(usize, &'static str)>,
    cpu: Arc<dyn Backend>,
    /// While a `train` step is recorded: the recorder standing in for the
    /// active device's backend (and the CPU's, when that is the device).
    recording: Option<(DeviceKind, Arc<dyn Backend>)>,
    /// While a timeline is recorded: the log every device's kernels are noted in.
    profile: Option<Arc<KernelLog>>,
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
            warned_fallbacks: HashSet::new(),
            cpu: mlpl_devices::cpu(),
            recording: None,
            profile: None,
        }
    }

    /// Routes every kernel of the active device through `recorder` (a
    /// [`mlpl_devices::capture::Recorder`]) until called again with `None`.
    pub fn set_recording(&mut self, recorder: Option<Arc<dyn Backend>>) {
        self.recording = recorder.map(|r| (self.active().kind, r));
    }

    /// Notes every kernel of every device in `log` (a timeline's kernel
    /// track) until called again with `None`.
    pub fn set_profile(&mut self, log: Option<Arc<KernelLog>>) {
        self.profile = log;
    }

    /// `b`, profiled when a timeline is recorded.
    fn profiled(&self, b: Arc<dyn Backend>) -> Arc<dyn Backend> {
        match &self.profile {
            Some(log) => Arc::new(Profiled::new(b, log.clone())),
            None => b,
        }
    }

    /// The recorder, when one stands in for a device of `kind`.
    fn recorder_for(&self, kind: DeviceKind) -> Option<Arc<dyn Backend>> {
        self.recording
            .as_ref()
            .filter(|(k, _)| *k == kind)
            .map(|(_, r)| r.clone())
    }

    /// Resets per-run state; `default` is the device for code outside blocks.
    pub fn begin_run(&mut self, default: Option<DeviceTarget>) {
        self.stack.clear();
        // A run that panicked while recording left its recorder here.
        self.recording = None;
        self.warned_blocks.clear();
        self.warned_fallbacks.clear();
        if let Some(d) = default {
            self.stack.push(d);
        }
    }

    /// The active target: the innermost block's, or the CPU.
    pub fn active(&self) -> DeviceTarget {
        self.stack.last().copied().unwrap_or(DeviceTarget::CPU)
    }

    /// Whether `target` can run code in this build on this machine. A CUDA or
    /// MLX device is opened on first use (driver, libraries, kernels) and kept
    /// for the process.
    pub fn availability(&self, target: DeviceTarget) -> Result<(), Unavailable> {
        self.device_backend(target).map(|_| ())
    }

    /// The backend of `target` itself, or why it cannot be used.
    fn device_backend(&self, target: DeviceTarget) -> Result<Arc<dyn Backend>, Unavailable> {
        match target.kind {
            DeviceKind::Cpu => Ok(self.cpu.clone()),
            DeviceKind::Cuda => Ok(mlpl_devices::cuda::open(target.index)?),
            DeviceKind::Mlx => Ok(mlpl_devices::mlx::open()?),
        }
    }

    /// The backend that runs operations for `target` (the CPU when unavailable).
    pub fn backend(&self, target: DeviceTarget) -> Arc<dyn Backend> {
        if let Some(r) = self.recorder_for(target.kind) {
            return r;
        }
        self.profiled(
            self.device_backend(target)
                .unwrap_or_else(|_| self.cpu.clone()),
        )
    }

    /// W0503 for each operation that `target`'s backend ran on the CPU since the
    /// last call, once per operation name per block (`block` = the block's start)
    /// per run; `span` is where to point.
    pub fn fallback_warnings(
        &mut self,
        target: DeviceTarget,
        block: usize,
        span: Span,
    ) -> Vec<Diagnostic> {
        let Ok(backend) = self.device_backend(target) else {
            return Vec::new();
        };
        let help = match target.kind {
            DeviceKind::Mlx => "the MLX backend has no implementation of this kernel yet (docs/devices.md lists them)",
            _ => "tensors of more than 8 axes that cannot be merged have no GPU kernel; reshape them first",
        };
        let mut out = Vec::new();
        for op in backend.take_fallbacks() {
            if self.warned_fallbacks.insert((block, op)) {
                out.push(
                    Diagnostic::warning(
                        code::W0503,
                        format!("`{op}` ran on the CPU: device `{target}` has no kernel for it here"),
                    )
                    .at(span, format!("inside this `{target}` block"))
                    .note("the result is correct; the cpu_fallbacks counter shows how often this happened")
                    .help(help),
                );
            }
        }
        out
    }

    /// The backend for the active device.
    pub fn active_backend(&self) -> Arc<dyn Backend> {
        self.backend(self.active())
    }

    /// The CPU backend (host builtins always run there).
    pub fn cpu(&self) -> Arc<dyn Backend> {
        self.recorder_for(DeviceKind::Cpu)
            .unwrap_or_else(|| self.profiled(self.cpu.clone()))
    }
}

/// `device(target) { body }` (LANGUAGE §14.2).
pub fn device_block(
    it: &mut Interp,
    target: &mlpl_syntax::Expr,
    body: &Block,
    span: Span,
) -> Result<Value, Diagnostic> {
    let tv = it.expr(target)?;
    let Value::Str(name) = &tv else {
        return Err(Diagnostic::of(code::E0302)
            .at(target.span, format!("this is a {}", tv.kind_name()))
            .note("a device target is a string: \"cpu\", \"cuda\", \"cuda:N\" or \"mlx\""));
    };
    let chosen = match DeviceTarget::parse(name) {
        Some(t) => {
            if let Err(why) = it.devices.availability(t) {
                if it.devices.warned_blocks.insert(span.start) {
                    it.warn(
                        Diagnostic::warning(
                            code::W0501,
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
                    code::W0502,
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
    for w in it
        .devices
        .fallback_warnings(chosen, span.start, target.span)
    {
        it.warn(w);
    }
    result
}
