//! [`StepProgram`]: a compiled, replayable step, and [`BackendReplay`], the
//! program every backend can run (its kernels called again, call by call).

use super::plan::StepPlan;
use super::trace::{Origin, ValueId};
use crate::backend::{Backend, Result};
use crate::clock::Instant;
use crate::kernels::Op;
use crate::tensor::Tensor;
use std::sync::Arc;
use std::time::Duration;

/// What [`StepProgram::run_observed`] calls after each kernel call: the call's
/// index in the plan's trace, and when it began.
pub type CallObserver<'a> = &'a mut dyn FnMut(usize, Instant);

/// The memory a captured step's arena holds, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaBytes {
    /// Buffers the program allocates: computed values (reused over the step
    /// as their values die) and carried inputs.
    pub owned: u64,
    /// Inputs read in place from the tensors they were recorded with (shared
    /// with the workspace, so no memory of the program's own).
    pub aliased: u64,
}

impl ArenaBytes {
    /// Everything the step's buffers hold while it runs, owned and aliased:
    /// the number to compare with the eager step's live peak
    /// ([`super::Trace::live_peak_bytes`]).
    pub fn total(&self) -> u64 {
        self.owned + self.aliased
    }
}

/// A captured step, ready to run again and again.
pub trait StepProgram: Send {
    /// Runs one step. The first run starts from the plan's initial inputs; each
    /// later run first gives every carried input the value it is carried from,
    /// as the previous run left it. Adam updates count one more each run.
    fn run(&mut self) -> Result<()> {
        self.run_observed(None)
    }
    /// [`StepProgram::run`], calling `after_call` after each kernel call with
    /// the call's index in the plan's trace and when the call began (a
    /// timeline notes the replayed kernels so). Calls that are no kernel (a
    /// [`Op::View`]) are not reported.
    fn run_observed(&mut self, after_call: Option<CallObserver<'_>>) -> Result<()>;
    /// The first element of kept value `v` after the last run (no allocation).
    fn first_element(&self, v: ValueId) -> Result<f32>;
    /// A kept value after the last run, as a tensor.
    fn tensor(&self, v: ValueId) -> Result<Tensor>;
    /// Whether [`StepProgram::tensor`] of `v` can be read now: a kept value
    /// after a run, or, before the first run, a value carried into the next
    /// step, which is then its initial input (the program holds the state
    /// the step starts from, so whoever gave it may drop its own copy).
    /// `false` where the program cannot tell.
    fn readable(&self, _v: ValueId) -> bool {
        false
    }
    /// [`StepProgram::tensor`] of each of `vs`, once no run follows (the
    /// end of a loop): a program may drop its working buffers as soon as
    /// nothing left to read lies in them, so that the copies read out are
    /// not held on top of the whole program.
    fn take_kept(&mut self, vs: &[ValueId]) -> Vec<Result<Tensor>> {
        vs.iter().map(|&v| self.tensor(v)).collect()
    }
    /// Time spent inside kernel calls over every run so far.
    fn kernel_time(&self) -> Duration;
    /// How the program runs, for telemetry: `"arena"` (preallocated buffers)
    /// or `"calls"` (the backend's kernels called as when recording).
    fn kind(&self) -> &'static str;
    /// The memory the program's preallocated buffers hold, when it has an
    /// arena (`None` for programs whose backend allocates as it runs).
    fn arena_bytes(&self) -> Option<ArenaBytes> {
        None
    }
}

/// The generic replay: every recorded call is made again through the backend,
/// with the tensors of this run. Values are dropped after their last use.
pub struct BackendReplay {
    backend: Arc<dyn Backend>,
    plan: StepPlan,
    /// Each value's tensor during and after a run.
    slots: Vec<Option<Tensor>>,
    /// For each call, the values whose last use it is (dropped after it).
    dead_after: Vec<Vec<ValueId>>,
    runs: u64,
    kernel: Duration,
}

impl BackendReplay {
    /// A replay of `plan` on `backend`.
    pub fn new(backend: Arc<dyn Backend>, plan: StepPlan) -> BackendReplay {
        let n = plan.trace.values.len();
        let mut slots = vec![None; n];
        for input in &plan.inputs {
            slots[input.value.index()] = Some(input.initial.clone());
        }
        let dead_after = dead_after(&plan);
        BackendReplay {
            backend,
            plan,
            slots,
            dead_after,
            runs: 0,
            kernel: Duration::ZERO,
        }
    }

    fn get(&self, v: ValueId) -> Tensor {
        self.slots[v.index()]
            .clone()
            .unwrap_or_else(|| panic!("captured step: value {} is not live", v.0))
    }
}

/// For each call, the computed values (not inputs, not live at the end) whose
/// last use it is.
fn dead_after(plan: &StepPlan) -> Vec<Vec<ValueId>> {
    let t = &plan.trace;
    let mut last = vec![None; t.values.len()];
    for (k, c) in t.calls.iter().enumerate() {
        for v in &c.inputs {
            last[v.index()] = Some(k);
        }
    }
    let live = plan.live_at_end();
    let mut dead = vec![Vec::new(); t.calls.len()];
    for (i, l) in last.iter().enumerate() {
        let v = ValueId(i as u32);
        let computed = matches!(t.values[i].origin, Origin::Output { .. });
        if let (Some(k), true, false) = (l, computed, live.binary_search(&v).is_ok()) {
            dead[*k].push(v);
        }
    }
    dead
}

impl StepProgram for BackendReplay {
    fn run_observed(&mut self, mut after_call: Option<CallObserver<'_>>) -> Result<()> {
        if self.runs > 0 {
            for input in &self.plan.inputs {
                if let Some(from) = input.carried_from {
                    self.slots[input.value.index()] = Some(self.get(from));
                }
            }
        }
        let started = Instant::now();
        let b = &*self.backend;
        for k in 0..self.plan.trace.calls.len() {
            let call = &self.plan.trace.calls[k];
            let ins: Vec<Tensor> = call.inputs.iter().map(|&v| self.get(v)).collect();
            let out_shape = |i: usize| self.plan.trace.value(call.outputs[i]).shape.clone();
            let began = Instant::now();
            let outs = match &call.op {
                Op::View => vec![ins[0].reshape(out_shape(0))],
                op => super::replay(b, op, ins, self.runs)?,
            };
            if let (Some(f), false) = (after_call.as_mut(), call.op == Op::View) {
                f(k, began);
            }
            if outs.len() != call.outputs.len() {
                return Err(crate::DeviceError::Backend {
                    device: b.kind().name().to_string(),
                    message: format!(
                        "the replayed `{}` gave {} outputs where {} were recorded",
                        call.op.name(),
                        outs.len(),
                        call.outputs.len()
                    ),
                });
            }
            for (v, t) in call.outputs.iter().zip(outs) {
                self.slots[v.index()] = Some(t);
            }
            for v in &self.dead_after[k] {
                self.slots[v.index()] = None;
            }
        }
        self.kernel += started.elapsed();
        self.runs += 1;
        Ok(())
    }

    fn first_element(&self, v: ValueId) -> Result<f32> {
        Ok(self.get(v).host()[0])
    }

    fn tensor(&self, v: ValueId) -> Result<Tensor> {
        Ok(self.get(v))
    }

    fn kernel_time(&self) -> Duration {
        self.kernel
    }

    fn kind(&self) -> &'static str {
        "calls"
    }
}
