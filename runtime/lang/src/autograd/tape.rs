//! The [`Tape`]: the record of a loss's operations, and [`Var`], the handle of
//! one recorded value.

use super::kernels::K;
use mlpl_devices::{Backend, Result, Tensor};
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
    /// The values of the op's inputs, in the order the op recorded them.
    pub inputs: &'a [&'a Tensor],
    /// The op's own value (its forward result).
    pub out: &'a Tensor,
    /// For each input, whether it needs a gradient (rules skip the others).
    pub need: &'a [bool],
}

/// The backward rule of one recorded op.
///
/// Given `g`, the gradient of the loss with respect to the op's output (same
/// shape as the output), returns one entry per input: `Some` gradient with
/// exactly that input's shape where `need` is set, `None` elsewhere.
pub(crate) trait Rule: fmt::Debug + Send + Sync {
    /// Runs the rule through `cx.k`'s backend.
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>>;
}

/// One recorded value.
#[derive(Debug)]
pub(crate) struct Node {
    /// The value (a leaf's tensor or an op's forward result).
    pub value: Tensor,
    /// The op's inputs (empty for a leaf).
    pub inputs: Vec<Var>,
    /// Whether the value depends on a leaf that requires a gradient.
    pub requires_grad: bool,
    /// Whether this node is a leaf.
    pub is_leaf: bool,
    /// The backward rule; `None` for leaves and for ops that need no gradient.
    pub rule: Option<Box<dyn Rule>>,
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
            value,
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

    /// The value of `var`. Panics if `var` is not on this tape.
    pub fn value(&self, var: Var) -> &Tensor {
        &self.nodes[var.0].value
    }

    /// The shape of `var`'s value.
    pub fn shape(&self, var: Var) -> &[usize] {
        self.value(var).shape()
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
    /// run it, and whatever it saved is freed at once).
    pub(crate) fn record(&mut self, value: Tensor, inputs: &[Var], rule: Box<dyn Rule>) -> Var {
        let requires_grad = inputs.iter().any(|v| self.nodes[v.0].requires_grad);
        self.nodes.push(Node {
            value,
            inputs: inputs.to_vec(),
            requires_grad,
            is_leaf: false,
            rule: requires_grad.then_some(rule),
        });
        Var(self.nodes.len() - 1)
    }
}
