//! [`StepProgram`]: a compiled, replayable step, and [`BackendReplay`], the
//! program every backend can run (its kernels called again, call by call).

use super::op::Op;
use super::plan::StepPlan;
use super::trace::{Origin, ValueId};
use crate::backend::{Backend, Result};
use crate::tensor::Tensor;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A captured step, ready to run again and again.
pub trait StepProgram: Send {
    /// Runs one step. The first run starts from the plan's initial inputs; each
    /// later run first gives every carried input the value it is carried from,
    /// as the previous run left it. Adam updates count one more each run.
    fn run(&mut self) -> Result<()>;
    /// The first element of kept value `v` after the last run (no allocation).
    fn first_element(&self, v: ValueId) -> Result<f32>;
    /// A kept value after the last run, as a tensor.
    fn tensor(&self, v: ValueId) -> Result<Tensor>;
    /// Time spent inside kernel calls over every run so far.
    fn kernel_time(&self) -> Duration;
    /// How the program runs, for telemetry: `"arena"` (preallocated buffers)
    /// or `"calls"` (the backend's kernels called as when recording).
    fn kind(&self) -> &'static str;
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

/// The Adam step of replay run `run` (0-based) of a call recorded as `recorded`
/// in the last recorded iteration: its update count is `run + 1` higher.
pub fn adam_step_of_run(recorded: &crate::AdamStep, run: u64) -> crate::AdamStep {
    crate::AdamStep {
        t: recorded.t + run + 1,
        ..*recorded
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
    fn run(&mut self) -> Result<()> {
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
            let outs: Vec<Tensor> = match &call.op {
                Op::Upload => vec![b.upload(&ins[0])?],
                Op::Download => vec![b.download(&ins[0])?],
                Op::Unary(op) => vec![b.unary(*op, &ins[0])?],
                Op::Binary(op) => vec![b.binary(*op, &ins[0], &ins[1])?],
                Op::Matmul => vec![b.matmul(&ins[0], &ins[1])?],
                Op::MatmulT {
                    transpose_a,
                    transpose_b,
                } => vec![b.matmul_t(&ins[0], &ins[1], *transpose_a, *transpose_b)?],
                Op::Reduce { op, axis } => vec![b.reduce(*op, &ins[0], *axis)?],
                Op::Argmax { axis } => vec![b.argmax(&ins[0], *axis)?],
                Op::Softmax { axis } => vec![b.softmax(&ins[0], *axis)?],
                Op::LogSoftmax { axis } => vec![b.log_softmax(&ins[0], *axis)?],
                Op::LogSumExp { axis } => vec![b.logsumexp(&ins[0], *axis)?],
                Op::SoftmaxBackward { axis } => {
                    vec![b.softmax_backward(&ins[0], &ins[1], *axis)?]
                }
                Op::CrossEntropy { want_grad } => {
                    let (loss, grad) = b.cross_entropy(&ins[0], &ins[1], *want_grad)?;
                    std::iter::once(loss).chain(grad).collect()
                }
                Op::Permute { perm } => vec![b.permute(&ins[0], perm)?],
                Op::GatherRows => vec![b.gather_rows(&ins[0], &ins[1])?],
                Op::ScatterAddRows { vocab } => {
                    vec![b.scatter_add_rows(&ins[0], &ins[1], *vocab)?]
                }
                Op::SumToShape { shape } => vec![b.sum_to_shape(&ins[0], shape)?],
                Op::RmsNorm { eps } => {
                    let (y, r) = b.rms_norm(&ins[0], *eps)?;
                    vec![y, r]
                }
                Op::RmsNormBackward => vec![b.rms_norm_backward(&ins[0], &ins[1], &ins[2])?],
                Op::LayerNorm { eps } => {
                    let (y, m, s) = b.layer_norm(&ins[0], *eps)?;
                    vec![y, m, s]
                }
                Op::LayerNormBackward => {
                    vec![b.layer_norm_backward(&ins[0], &ins[1], &ins[2], &ins[3])?]
                }
                Op::UnaryBackward(op) => {
                    vec![b.unary_backward(*op, &ins[0], &ins[1], &ins[2])?]
                }
                Op::BiasAct(act) => vec![b.bias_act(&ins[0], &ins[1], *act)?],
                Op::BiasActBackward { act, want_bias } => {
                    let (dx, db) =
                        b.bias_act_backward(&ins[0], &ins[1], &ins[2], &ins[3], *act, *want_bias)?;
                    std::iter::once(dx).chain(db).collect()
                }
                Op::MaskedSoftmax { divisor, causal } => {
                    vec![b.masked_softmax(&ins[0], *divisor, *causal)?]
                }
                Op::MaskedSoftmaxBackward { divisor, causal } => {
                    vec![b.masked_softmax_backward(&ins[0], &ins[1], *divisor, *causal)?]
                }
                Op::DropoutMask { shape, key, p } => {
                    let mask = b.dropout_mask(shape, *key, *p)?;
                    vec![mask.unwrap_or_else(|| panic!("the backend stopped making dropout masks"))]
                }
                Op::AdamUpdate(step) => {
                    let step = adam_step_of_run(step, self.runs);
                    let (mut p, mut m, mut v) = (ins[0].clone(), ins[2].clone(), ins[3].clone());
                    drop(ins);
                    b.adam_update(&mut p, &self.get(call.inputs[1]), &mut m, &mut v, &step)?;
                    vec![p, m, v]
                }
                Op::View => vec![ins[0].reshape(out_shape(0))],
            };
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
