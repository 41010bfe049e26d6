//! [`Trace`]: the kernel calls of one recorded `train` step, as data.

use crate::kernels::Op;
use crate::tensor::{Storage, Tensor, WeakTensor};

/// The index of one value of a [`Trace`] (an input, or one output of a call).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    /// The position in [`Trace::values`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a value of a trace comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The `i`-th entry of [`Trace::inputs`]: a tensor the step did not compute
    /// with a kernel (a parameter, the data, a constant made on the host).
    Input(usize),
    /// Output `index` of call `call`.
    Output {
        /// Position in [`Trace::calls`].
        call: usize,
        /// Which of the call's outputs.
        index: usize,
    },
}

/// One value of a trace.
#[derive(Clone, Debug)]
pub struct ValueInfo {
    /// Its shape.
    pub shape: Vec<usize>,
    /// Where it comes from.
    pub origin: Origin,
}

/// One recorded call.
#[derive(Clone, Debug)]
pub struct Call {
    /// What ran.
    pub op: Op,
    /// Its tensor arguments.
    pub inputs: Vec<ValueId>,
    /// Its results.
    pub outputs: Vec<ValueId>,
}

/// The kernel calls of one step, in the order they ran.
///
/// Every value is either an input (a tensor from outside the step's kernels) or
/// the output of exactly one call; a call's inputs are always values defined
/// before it. The trace names the tensors seen while recording by weak handles
/// ([`WeakTensor`]): no storage can be reused while the trace lives (storage
/// identity is how values are told apart), yet each value is freed when the
/// step drops it, so recording holds no more memory than an eager step.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Every value, inputs and outputs, in the order they appeared.
    pub values: Vec<ValueInfo>,
    /// The calls, in the order they ran.
    pub calls: Vec<Call>,
    /// The inputs: their value and the tensor seen (`None` once released by
    /// [`Trace::release_overwritten_inputs`]).
    pub inputs: Vec<(ValueId, Option<Tensor>)>,
    /// The tensor each value held when it was recorded (weakly: the elements
    /// are only there while the step still holds the value).
    pub tensors: Vec<WeakTensor>,
    /// Values that code other than a kernel read on the host while the step ran
    /// (each once, in first-read order).
    pub host_reads: Vec<ValueId>,
    /// The eager step's live peak: the most bytes of tensors seen by the
    /// step's kernels (inputs included, each storage once) that were alive at
    /// the same time, sampled after every call, with the optimizer state an
    /// Adam update reads counted from the start of the step (the workspace
    /// holds it throughout, though the kernels see the moments only at the
    /// update).
    pub live_peak_bytes: u64,
}

impl Trace {
    /// The value `v`'s information.
    pub fn value(&self, v: ValueId) -> &ValueInfo {
        &self.values[v.index()]
    }

    /// The tensor `v` held when it was recorded, while the step (or what it
    /// left behind) still holds it.
    pub fn tensor(&self, v: ValueId) -> Option<Tensor> {
        self.tensors[v.index()].upgrade()
    }

    /// Drops the trace's hold on the inputs an Adam update overwrote (its old
    /// `p`, `m`, `v`) that nothing outside the trace holds any more: the state
    /// before the step, which an eager step updates in place. Recording
    /// copies it instead (the recorder keeps the inputs as they were), so
    /// without this a recorded iteration would hold the parameters and
    /// moments twice until the plan is made. Their storages stay named by the
    /// weak handles, so values are still told apart; a plan that would need
    /// their elements (a host-made input compared with one of them) is refused
    /// instead ([`super::plan`]). Returns the bytes released.
    pub fn release_overwritten_inputs(&mut self) -> u64 {
        let mut overwritten = vec![false; self.values.len()];
        for c in &self.calls {
            for &i in overwritten_inputs(&c.op) {
                if let Some(v) = c.inputs.get(i) {
                    overwritten[v.index()] = true;
                }
            }
        }
        let mut bytes = 0;
        for j in 0..self.inputs.len() {
            let (v, ref t) = self.inputs[j];
            let n = t.as_ref().map_or(0, Tensor::numel) as u64;
            if overwritten[v.index()] && self.release_input(j) {
                bytes += 4 * n;
            }
        }
        bytes
    }

    /// Releases input `j`'s tensor when nothing outside the trace holds it;
    /// whether it is released now (or was before).
    pub(crate) fn release_input(&mut self, j: usize) -> bool {
        let Some((_, t)) = self.inputs.get_mut(j) else {
            return false;
        };
        match t {
            Some(x) if unshared(x) => {
                *t = None;
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// The value whose recorded tensor shares `t`'s storage and shape, if any
    /// (the latest such value).
    pub fn find(&self, t: &Tensor) -> Option<ValueId> {
        self.tensors
            .iter()
            .rposition(|x| x.shares_storage(t) && x.shape() == t.shape())
            .map(|i| ValueId(i as u32))
    }
}

/// Whether no other tensor holds `t`'s storage.
fn unshared(t: &Tensor) -> bool {
    match t.storage() {
        Storage::Host(a) => std::sync::Arc::strong_count(a) == 1,
        Storage::Device(a) => std::sync::Arc::strong_count(a) == 1,
    }
}

/// The inputs a call of `op` overwrites in place when it runs eagerly: an
/// Adam update's parameter and moments (`p`, `m`, `v`); none for other ops.
pub(crate) fn overwritten_inputs(op: &Op) -> &'static [usize] {
    match op {
        Op::AdamUpdate { .. } => &[0, 2, 3],
        _ => &[],
    }
}
