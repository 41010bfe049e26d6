//! [`Op`]: one kernel call of a recorded step, as data, with everything known
//! about it from the op alone: its name, how many tensors it takes and gives,
//! and the element count of each output for given input shapes. Every match
//! over ops names every op, so a new one is a compile error wherever it must be
//! handled.

use crate::backend::{AdamStep, BinaryOp, ReduceOp, UnaryOp};
use crate::shape::{broadcast_shapes, reduced_shape, rows_of};

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
    /// `logsumexp(x, axis)`.
    LogSumExp {
        /// The axis, removed from the shape.
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
    /// `dropout_mask(shape, key, p)` when the backend made the mask (no inputs).
    DropoutMask {
        /// The mask's shape.
        shape: Vec<usize>,
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
    /// The numbers of tensor inputs and outputs a call has.
    pub fn arity(&self) -> (usize, usize) {
        match self {
            Op::Upload | Op::Download | Op::Unary(_) | Op::View => (1, 1),
            Op::Reduce { .. } | Op::Argmax { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. } => {
                (1, 1)
            }
            Op::Permute { .. } | Op::SumToShape { .. } | Op::LogSumExp { .. } => (1, 1),
            Op::Binary(_) | Op::Matmul | Op::MatmulT { .. } | Op::SoftmaxBackward { .. } => (2, 1),
            Op::GatherRows | Op::ScatterAddRows { .. } => (2, 1),
            Op::CrossEntropy { want_grad } => (2, 1 + *want_grad as usize),
            Op::RmsNorm { .. } => (1, 2),
            Op::RmsNormBackward => (3, 1),
            Op::LayerNorm { .. } => (1, 3),
            Op::LayerNormBackward => (4, 1),
            Op::DropoutMask { .. } => (0, 1),
            Op::UnaryBackward(_) => (3, 1),
            Op::BiasAct(_) | Op::MaskedSoftmaxBackward { .. } => (2, 1),
            Op::BiasActBackward { want_bias, .. } => (4, 1 + *want_bias as usize),
            Op::MaskedSoftmax { .. } => (1, 1),
            Op::AdamUpdate(_) => (4, 3),
        }
    }

    /// Checks that a call of this op with inputs of shapes `ins` and outputs of
    /// shapes `outs` is one the eager kernel accepts and that its outputs have the
    /// element counts the kernel writes (the program's buffers are flat), so that
    /// building the kernel plan and running it cannot fail.
    pub fn check_output_sizes(&self, ins: &[&[usize]], outs: &[&[usize]]) -> Result<(), String> {
        let op = self;
        let n = |s: &[usize]| s.iter().product::<usize>();
        let axis_ok = |s: &[usize], a: usize| {
            if a < s.len() {
                Ok(())
            } else {
                Err(format!("axis {a} is out of range for shape {s:?}"))
            }
        };
        let rows_of = |s: &[usize]| rows_of(s).0;
        let expected: Vec<usize> = match op {
            Op::Upload | Op::Download | Op::Unary(_) | Op::View => vec![n(ins[0])],
            Op::Binary(_) => {
                let out = broadcast_shapes(ins[0], ins[1]).ok_or_else(|| {
                    format!("shapes {:?} and {:?} do not broadcast", ins[0], ins[1])
                })?;
                vec![n(&out)]
            }
            Op::Matmul => product_size(ins[0], false, ins[1], false)?,
            Op::MatmulT {
                transpose_a,
                transpose_b,
            } => product_size(ins[0], *transpose_a, ins[1], *transpose_b)?,
            Op::Reduce { axis, .. } | Op::Argmax { axis } => {
                if let Some(a) = axis {
                    axis_ok(ins[0], *a)?;
                }
                vec![n(&reduced_shape(ins[0], *axis))]
            }
            Op::Softmax { axis } | Op::LogSoftmax { axis } => {
                axis_ok(ins[0], *axis)?;
                vec![n(ins[0])]
            }
            Op::LogSumExp { axis } => {
                axis_ok(ins[0], *axis)?;
                vec![n(&reduced_shape(ins[0], Some(*axis)))]
            }
            Op::SoftmaxBackward { axis } => {
                axis_ok(ins[0], *axis)?;
                if ins[0] != ins[1] {
                    return Err(format!("y {:?} and dy {:?} differ", ins[0], ins[1]));
                }
                vec![n(ins[0])]
            }
            Op::CrossEntropy { want_grad } => {
                let rows = match ins[0].split_last() {
                    Some((_, lead)) => n(lead),
                    None => return Err("scalar logits".into()),
                };
                if n(ins[1]) != rows {
                    return Err(format!("{} targets for {rows} rows", n(ins[1])));
                }
                let mut e = vec![1];
                if *want_grad {
                    e.push(n(ins[0]));
                }
                e
            }
            Op::Permute { perm } => {
                let mut seen = vec![false; perm.len()];
                let ok = perm.len() == ins[0].len()
                    && perm
                        .iter()
                        .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
                if !ok {
                    return Err(format!(
                        "{perm:?} does not permute the axes of {:?}",
                        ins[0]
                    ));
                }
                vec![n(ins[0])]
            }
            Op::GatherRows => match ins[0] {
                &[_, d] => vec![n(ins[1]) * d],
                t => return Err(format!("table {t:?} is not [V, d]")),
            },
            Op::ScatterAddRows { vocab } => {
                let d = ins[1].last().copied().unwrap_or(0);
                if ins[1].is_empty() || n(ins[1]) != n(ins[0]) * d {
                    return Err(format!(
                        "src {:?} is not one row per id of {:?}",
                        ins[1], ins[0]
                    ));
                }
                vec![vocab * d]
            }
            Op::SumToShape { shape } => {
                let g = ins[0];
                let fits = shape.len() <= g.len()
                    && shape
                        .iter()
                        .zip(&g[g.len() - shape.len()..])
                        .all(|(&t, &d)| t == d || t == 1);
                if !fits {
                    return Err(format!("{shape:?} does not broadcast to {g:?}"));
                }
                vec![n(shape)]
            }
            Op::RmsNorm { .. } => vec![n(ins[0]), rows_of(ins[0])],
            Op::LayerNorm { .. } => vec![n(ins[0]), rows_of(ins[0]), rows_of(ins[0])],
            Op::RmsNormBackward | Op::LayerNormBackward => {
                let last = ins.len() - 1;
                let stats_ok = ins[1..last].iter().all(|s| n(s) == rows_of(ins[0]));
                if !stats_ok || n(ins[last]) != n(ins[0]) {
                    return Err(format!(
                        "x {:?} and its statistics or dy {:?} differ",
                        ins[0],
                        &ins[1..]
                    ));
                }
                vec![n(ins[0])]
            }
            Op::UnaryBackward(_) | Op::MaskedSoftmaxBackward { .. } => {
                if ins.iter().any(|s| *s != ins[0]) {
                    return Err(format!("the operands' shapes {ins:?} differ"));
                }
                vec![n(ins[0])]
            }
            Op::MaskedSoftmax { causal, .. } => {
                if ins[0].is_empty() || (*causal && ins[0].len() < 2) {
                    return Err(format!("scores {:?} have too low a rank", ins[0]));
                }
                vec![n(ins[0])]
            }
            Op::BiasAct(_) | Op::BiasActBackward { .. } => {
                let (x, b) = (ins[0], ins[1]);
                let fits = x.last().is_some_and(|&w| {
                    b.len() <= x.len()
                        && b.last() == Some(&w)
                        && b[..b.len() - 1].iter().all(|&d| d == 1)
                });
                if !fits || ins[2..].iter().any(|s| *s != x) {
                    return Err(format!("bias {b:?} is not one row of x {x:?}"));
                }
                match op {
                    Op::BiasActBackward {
                        want_bias: true, ..
                    } => vec![n(x), n(b)],
                    _ => vec![n(x)],
                }
            }
            Op::DropoutMask { shape, .. } => vec![n(shape)],
            Op::AdamUpdate(_) => {
                if ins.iter().any(|s| n(s) != n(ins[0])) {
                    return Err(format!("p, g, m and v sizes differ: {ins:?}"));
                }
                vec![n(ins[0]); 3]
            }
        };
        let got: Vec<usize> = outs.iter().map(|s| n(s)).collect();
        if got != expected {
            return Err(format!(
                "outputs of {got:?} elements recorded where the kernel writes {expected:?}"
            ));
        }
        Ok(())
    }

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
            Op::LogSumExp { .. } => "logsumexp",
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

/// The element count of `a · b` with the last two axes of each swapped first
/// when asked, or why the two do not multiply.
fn product_size(sa: &[usize], ta: bool, sb: &[usize], tb: bool) -> Result<Vec<usize>, String> {
    if sa.len() < 2 || sb.len() < 2 {
        return Err(format!("operands {sa:?} and {sb:?} need rank >= 2"));
    }
    let last2 = |s: &[usize], t: bool| {
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        if t {
            (c, r)
        } else {
            (r, c)
        }
    };
    let ((m, k), (k2, n)) = (last2(sa, ta), last2(sb, tb));
    match broadcast_shapes(&sa[..sa.len() - 2], &sb[..sb.len() - 2]) {
        Some(b) if k == k2 => Ok(vec![b.iter().product::<usize>() * m * n]),
        _ => Err(format!("{sa:?} and {sb:?} do not multiply")),
    }
}
