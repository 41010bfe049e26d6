//! [`Trace`]: the kernel calls of one recorded `train` step, as data.

use crate::backend::{AdamStep, BinaryOp, ReduceOp, UnaryOp};
use crate::tensor::Tensor;

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

/// One recorded kernel: a [`Backend`](crate::Backend) method and the arguments
/// that are not tensors. Tensor arguments are the call's `inputs`, in the order
/// the method takes them; results are its `outputs`, in the order it returns them.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `upload(x)`.
    Upload,
    /// `download(x)`.
    Download,
    /// `unary(op, x)`.
    Unary(UnaryOp),
    /// `binary(op, a, b)`.
    Binary(BinaryOp),
    /// `matmul(a, b)`.
    Matmul,
    /// `matmul_t(a, b, transpose_a, transpose_b)`.
    MatmulT {
        /// Whether `a`'s last two axes are swapped first.
        transpose_a: bool,
        /// Whether `b`'s last two axes are swapped first.
        transpose_b: bool,
    },
    /// `reduce(op, x, axis)`.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The axis, or everything.
        axis: Option<usize>,
    },
    /// `argmax(x, axis)`.
    Argmax {
        /// The axis, or everything.
        axis: Option<usize>,
    },
    /// `softmax(x, axis)`.
    Softmax {
        /// The axis.
        axis: usize,
    },
    /// `log_softmax(x, axis)`.
    LogSoftmax {
        /// The axis.
        axis: usize,
    },
    /// `softmax_backward(y, dy, axis)`.
    SoftmaxBackward {
        /// The axis.
        axis: usize,
    },
    /// `cross_entropy(logits, targets, want_grad)`: outputs the loss and, when
    /// `want_grad`, the gradient of the logits.
    CrossEntropy {
        /// Whether the gradient is an output.
        want_grad: bool,
    },
    /// `permute(x, perm)`.
    Permute {
        /// Result axis `i` is input axis `perm[i]`.
        perm: Vec<usize>,
    },
    /// `gather_rows(table, ids)`.
    GatherRows,
    /// `scatter_add_rows(ids, src, vocab)`.
    ScatterAddRows {
        /// Rows of the result.
        vocab: usize,
    },
    /// `sum_to_shape(g, shape)`.
    SumToShape {
        /// The result's shape.
        shape: Vec<usize>,
    },
    /// `rms_norm(x, eps)`: outputs `y` and `inv_rms`.
    RmsNorm {
        /// Added to the mean square.
        eps: f32,
    },
    /// `rms_norm_backward(x, inv_rms, dy)`.
    RmsNormBackward,
    /// `layer_norm(x, eps)`: outputs `y`, `mean` and `inv_std`.
    LayerNorm {
        /// Added to the variance.
        eps: f32,
    },
    /// `layer_norm_backward(x, mean, inv_std, dy)`.
    LayerNormBackward,
    /// `unary_backward(op, x, y, dy)`.
    UnaryBackward(UnaryOp),
    /// `bias_act(x, bias, act)`.
    BiasAct(UnaryOp),
    /// `bias_act_backward(x, bias, y, dy, act, want_bias)`: outputs `dx` and,
    /// when `want_bias`, `dbias`.
    BiasActBackward {
        /// The activation.
        act: UnaryOp,
        /// Whether the bias gradient is an output.
        want_bias: bool,
    },
    /// `masked_softmax(x, divisor, causal)`.
    MaskedSoftmax {
        /// What the scores are divided by.
        divisor: f32,
        /// Whether entries above the diagonal are masked.
        causal: bool,
    },
    /// `masked_softmax_backward(y, dy, divisor, causal)`.
    MaskedSoftmaxBackward {
        /// What the scores were divided by.
        divisor: f32,
        /// Whether entries above the diagonal were masked.
        causal: bool,
    },
    /// `dropout_mask(shape, key, p)` when the backend made the mask (no inputs;
    /// the output's shape is the mask's).
    DropoutMask {
        /// The mask's key.
        key: u64,
        /// The drop probability.
        p: f64,
    },
    /// `adam_update(p, g, m, v, step)`: inputs `p, g, m, v`, outputs the updated
    /// `p, m, v`. Replays of a captured step add one to `step.t` each time.
    AdamUpdate(AdamStep),
    /// Not a kernel: the input's elements viewed with the output's shape (a
    /// reshape done on the host between kernels, which shares the storage).
    View,
}

impl Op {
    /// The backend method's name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Upload => "upload",
            Op::Download => "download",
            Op::Unary(_) => "unary",
            Op::Binary(_) => "binary",
            Op::Matmul => "matmul",
            Op::MatmulT { .. } => "matmul_t",
            Op::Reduce { .. } => "reduce",
            Op::Argmax { .. } => "argmax",
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::SoftmaxBackward { .. } => "softmax_backward",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::Permute { .. } => "permute",
            Op::GatherRows => "gather_rows",
            Op::ScatterAddRows { .. } => "scatter_add_rows",
            Op::SumToShape { .. } => "sum_to_shape",
            Op::RmsNorm { .. } => "rms_norm",
            Op::RmsNormBackward => "rms_norm_backward",
            Op::LayerNorm { .. } => "layer_norm",
            Op::LayerNormBackward => "layer_norm_backward",
            Op::UnaryBackward(_) => "unary_backward",
            Op::BiasAct(_) => "bias_act",
            Op::BiasActBackward { .. } => "bias_act_backward",
            Op::MaskedSoftmax { .. } => "masked_softmax",
            Op::MaskedSoftmaxBackward { .. } => "masked_softmax_backward",
            Op::DropoutMask { .. } => "dropout_mask",
            Op::AdamUpdate(_) => "adam_update",
            Op::View => "reshape",
        }
    }
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
/// before it. The tensors seen while recording are kept in the trace, so that no
/// storage is freed and reused while the step is recorded (storage identity is
/// how values are told apart).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Every value, inputs and outputs, in the order they appeared.
    pub values: Vec<ValueInfo>,
    /// The calls, in the order they ran.
    pub calls: Vec<Call>,
    /// The inputs: their value and the tensor seen.
    pub inputs: Vec<(ValueId, Tensor)>,
    /// The tensor each value held when it was recorded.
    pub tensors: Vec<Tensor>,
    /// Values that code other than a kernel read on the host while the step ran
    /// (each once, in first-read order).
    pub host_reads: Vec<ValueId>,
}

impl Trace {
    /// The value `v`'s information.
    pub fn value(&self, v: ValueId) -> &ValueInfo {
        &self.values[v.index()]
    }

    /// The tensor `v` held when it was recorded.
    pub fn tensor(&self, v: ValueId) -> &Tensor {
        &self.tensors[v.index()]
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
