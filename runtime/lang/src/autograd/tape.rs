//! The [`Tape`]: the record of a loss's operations, and [`Var`], the handle of
//! one recorded value.

use super::kernels::K;
use mlpl_devices::{Backend, DeviceError, Result, Tensor, WeakTensor};
use std::fmt;
use std::sync::Arc;

/// The handle of one value recorded on a [`Tape`] (a leaf or an op's result).
///
/// A `Var` is a plain index: it is only meaningful on the tape that returned
/// it, and using it on another tape reads an unrelated node (or panics when the
/// index is out of range).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub(crate) usize);

impl Var {
    /// The node's position on its tape (recording order, from 0).
    pub fn index(self) -> usize {
        self.0
    }
}

/// What a backward rule is given besides the output gradient.
pub(crate) struct Ctx<'a> {
    /// The kernels of the tape's backend.
    pub k: K<'a>,
    /// The op's inputs: their values while the tape has them (always those
    /// the rule reads, [`Rule::reads`]) and their shapes.
    pub(crate) inputs: &'a [Input],
    /// The op's own value (its forward result), when the tape has it (always
    /// when the rule reads it).
    pub(crate) out: Option<&'a Tensor>,
    /// For each input, whether it needs a gradient (rules skip the others).
    pub need: &'a [bool],
}

/// One input of an op as a backward rule sees it.
pub(crate) struct Input {
    /// Its value, unless the tape released it (the rule does not read it).
    pub value: Option<Tensor>,
    /// Its shape.
    pub shape: Vec<usize>,
}

impl Ctx<'_> {
    /// The value of input `i`. Available for every input the rule reads
    /// ([`Rule::reads`]); an error for one it declared it does not read and
    /// the tape released.
    pub fn input(&self, i: usize) -> Result<&Tensor> {
        self.inputs[i]
            .value
            .as_ref()
            .ok_or_else(|| released(self.k))
    }

    /// The shape of input `i`.
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.inputs[i].shape
    }

    /// The op's own value: available when the rule reads it ([`Rule::reads`]).
    pub fn out(&self) -> Result<&Tensor> {
        self.out.ok_or_else(|| released(self.k))
    }
}

/// The error for a value the tape released but a rule read (a rule whose
/// [`Rule::reads`] leaves out something it reads).
fn released(k: K<'_>) -> DeviceError {
    DeviceError::Backend {
        device: k.0.kind().name().to_string(),
        message: "a backward rule read a value the loss tape had released".into(),
    }
}

/// Which of an op's values its backward rule reads (beyond their shapes,
/// which are always kept): the tape keeps exactly these until the rule has
/// run and releases every other value of the loss once nothing else holds it,
/// as PyTorch's autograd keeps only the tensors an op saves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Bit `i`: input `i`'s value.
    inputs: u32,
    /// The op's own value.
    out: bool,
}

impl Reads {
    /// Every input and the output (the default: always correct).
    pub const ALL: Reads = Reads {
        inputs: u32::MAX,
        out: true,
    };
    /// Nothing but shapes.
    pub const NONE: Reads = Reads {
        inputs: 0,
        out: false,
    };

    /// These inputs (by position), not the output.
    pub const fn inputs(list: &[usize]) -> Reads {
        let mut inputs = 0u32;
        let mut i = 0;
        while i < list.len() {
            inputs |= 1 << list[i];
            i += 1;
        }
        Reads { inputs, out: false }
    }

    /// The same, and the output too.
    pub const fn and_out(self) -> Reads {
        Reads {
            inputs: self.inputs,
            out: true,
        }
    }

    /// Whether input `i` is read.
    pub fn input(self, i: usize) -> bool {
        i >= 32 || self.inputs & (1 << i) != 0
    }

    /// Whether the output is read.
    pub fn out(self) -> bool {
        self.out
    }
}

/// The backward rule of one recorded op.
///
/// Given `g`, the gradient of the loss with respect to the op's output (same
/// shape as the output), returns one entry per input: `Some` gradient with
/// exactly that input's shape where `need` is set, `None` elsewhere.
pub(crate) trait Rule: fmt::Debug + Send + Sync {
    /// Runs the rule through `cx.k`'s backend.
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>>;

    /// The values `backward` reads ([`Ctx::input`], [`Ctx::out`]); the tape
    /// may release the others. Every input and the output unless a rule says
    /// less.
    fn reads(&self) -> Reads {
        Reads::ALL
    }
}

/// A node's value as the tape holds it.
#[derive(Debug)]
pub(crate) enum Slot {
    /// Held: a leaf, a value some rule reads, or one not yet handed to the
    /// caller ([`Tape::take_value`]).
    Held(Tensor),
    /// Named only: alive while the caller (or anything else) holds it.
    Weak(WeakTensor),
}

impl Slot {
    /// The value, while it is alive.
    pub fn get(&self) -> Option<Tensor> {
        match self {
            Slot::Held(t) => Some(t.clone()),
            Slot::Weak(w) => w.upgrade(),
        }
    }

    /// Its shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            Slot::Held(t) => t.shape(),
            Slot::Weak(w) => w.shape(),
        }
    }

    /// Holds the value (when it is still alive).
    fn hold(&mut self) {
        if let Slot::Weak(w) = self {
            if let Some(t) = w.upgrade() {
                *self = Slot::Held(t);
            }
        }
    }

    /// Stops holding the value: it lives on while something else holds it.
    fn release(&mut self) {
        if let Slot::Held(t) = self {
            *self = Slot::Weak(t.downgrade());
        }
    }
}

/// One recorded value.
#[derive(Debug)]
pub(crate) struct Node {
    /// The value (a leaf's tensor or an op's forward result).
    pub slot: Slot,
    /// Whether a backward rule reads the value (its own or a later op's), so
    /// the tape keeps holding it.
    pub saved: bool,
    /// The op's inputs (empty for a leaf).
    pub inputs: Vec<Var>,
    /// Whether the value depends on a leaf that requires a gradient.
    pub requires_grad: bool,
    /// Whether this node is a leaf.
    pub is_leaf: bool,
    /// The backward rule; `None` for leaves and for ops that need no gradient.
    pub rule: Option<Arc<dyn Rule>>,
}

/// A record of array operations from which gradients are computed (LANGUAGE §12.2).
///
/// Create one per loss evaluation with [`Tape::new`], add inputs with
/// [`Tape::leaf`], build the loss with the op methods (`add`, `matmul`,
/// `softmax`, …, in [`super::ops`]), then call [`Tape::backward`]. Every op
/// computes its forward value immediately, through the tape's backend, and
/// returns the result's [`Var`]; [`Tape::value`] reads it.
///
/// All tensors given to a tape (leaves, `targets`, `ids`, masks) must already
/// live on the tape's device.
#[derive(Debug)]
pub struct Tape {
    backend: Arc<dyn Backend>,
    pub(crate) nodes: Vec<Node>,
}

impl Tape {
    /// An empty tape whose ops and backward rules run on `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Tape {
        Tape {
            backend,
            nodes: Vec::new(),
        }
    }

    /// The backend every op and backward rule of this tape runs on.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Records an input value. `requires_grad` makes it a trainable leaf whose
    /// gradient [`Tape::backward`] returns; otherwise it is a constant.
    pub fn leaf(&mut self, value: Tensor, requires_grad: bool) -> Var {
        self.nodes.push(Node {
            slot: Slot::Held(value),
            saved: true,
            inputs: Vec::new(),
            requires_grad,
            is_leaf: true,
            rule: None,
        });
        Var(self.nodes.len() - 1)
    }

    /// Records a constant (a leaf that does not require a gradient).
    pub fn constant(&mut self, value: Tensor) -> Var {
        self.leaf(value, false)
    }

    /// Records the constant scalar `v` (shape `[]`), uploaded to the tape's device.
    pub fn scalar(&mut self, v: f32) -> Result<Var> {
        let t = self.k().constant(v)?;
        Ok(self.constant(t))
    }

    /// The value of `var`. Panics if `var` is not on this tape; an error when
    /// the tape released it (see [`Tape::take_value`]) and nothing else holds
    /// it any more.
    pub fn value(&self, var: Var) -> Result<Tensor> {
        self.nodes[var.0]
            .slot
            .get()
            .ok_or_else(|| released(self.k()))
    }

    /// The value of `var`, handed to the caller to hold: from now on the tape
    /// keeps it only when a backward rule reads it (the op's own or a later
    /// op's, [`Rule::reads`]) and otherwise only names it, so it is freed as
    /// soon as the caller drops it, as in PyTorch, whose autograd keeps only
    /// what the ops save. Leaves stay held. Panics if `var` is not on this
    /// tape.
    pub fn take_value(&mut self, var: Var) -> Result<Tensor> {
        let t = self.value(var)?;
        let node = &mut self.nodes[var.0];
        if !node.saved {
            node.slot.release();
        }
        Ok(t)
    }

    /// Keeps holding `var`'s value (for a caller that stops holding it but may
    /// still use `var`, as when an array moves to another device).
    pub fn keep(&mut self, var: Var) {
        let node = &mut self.nodes[var.0];
        node.saved = true;
        node.slot.hold();
    }

    /// The shape of `var`'s value.
    pub fn shape(&self, var: Var) -> &[usize] {
        self.nodes[var.0].slot.shape()
    }

    /// Whether `var` depends on a leaf that requires a gradient.
    pub fn requires_grad(&self, var: Var) -> bool {
        self.nodes[var.0].requires_grad
    }

    /// Whether `var` is a leaf (recorded with [`Tape::leaf`], [`Tape::constant`]
    /// or [`Tape::scalar`]).
    pub fn is_leaf(&self, var: Var) -> bool {
        self.nodes[var.0].is_leaf
    }

    /// The number of recorded nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The backend's kernels.
    pub(crate) fn k(&self) -> K<'_> {
        K(&*self.backend)
    }

    /// Records an op's result `value` computed from `inputs`. The rule is kept
    /// only when some input requires a gradient (otherwise nothing will ever
    /// run it, and whatever it saved is freed at once); the inputs it reads
    /// are held from now on ([`Rule::reads`]).
    pub(crate) fn record(&mut self, value: Tensor, inputs: &[Var], rule: Box<dyn Rule>) -> Var {
        let requires_grad = inputs.iter().any(|v| self.nodes[v.0].requires_grad);
        let rule: Option<Arc<dyn Rule>> = requires_grad.then(|| Arc::from(rule));
        let mut saved = false;
        if let Some(r) = &rule {
            let reads = r.reads();
            saved = reads.out();
            for (i, v) in inputs.iter().enumerate() {
                if reads.input(i) {
                    let node = &mut self.nodes[v.0];
                    node.saved = true;
                    node.slot.hold();
                }
            }
        }
        self.nodes.push(Node {
            slot: Slot::Held(value),
            saved,
            inputs: inputs.to_vec(),
            requires_grad,
            is_leaf: false,
            rule,
        });
        Var(self.nodes.len() - 1)
    }
}
