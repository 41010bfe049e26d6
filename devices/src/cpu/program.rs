//! The CPU's compiled form of a captured step ([`CpuProgram`]): the plan's
//! calls as a list of kernel steps over an arena of preallocated host buffers.
//!
//! Compiling decides everything that depends only on shapes (broadcast walks,
//! GEMM batching, permutation copies, reduction layouts) and gives every value a
//! buffer; running calls the same slice-level kernels as the eager backend, so
//! results are the same bits, and allocates nothing.
//!
//! Buffers ([`arena_bytes`] gives their sizes without allocating them): an
//! input the step never overwrites (the data, constants) is read in place from
//! the tensor it was recorded with (aliased, not copied); a carried input
//! (parameters, optimizer moments, reassigned variables) has a buffer of its
//! own. A computed value takes a buffer no live value holds: the smallest free
//! one of at least its length, else the largest free one, grown to its length,
//! else a new one. A buffer is free again as soon as the last call reading its
//! value ran (values read after a step, and the sources of carried inputs, are
//! never freed), so every value lives from the call that computes it to its
//! last reader and nothing longer. A view (`Op::View`) shares its input's
//! buffer, which stays live until the view's last use. Adam updates run in
//! place: the updated `p`, `m`, `v` take the buffers of the old ones when
//! nothing reads those later (for a carried input, when it is carried from that
//! very update); otherwise the old value is copied into a fresh buffer first.
//! Before each run after the first, each carried input receives the value it
//! is carried from (no copy when both already share a buffer, as Adam's state
//! does).
//!
//! What still allocates while running: nothing in this module or in the
//! kernels. The `gemm` crate allocates its packing buffers (and a small flag
//! vector) inside each general matrix product, and rayon allocates one block of
//! its global job queue per 63 parallel kernels called from a thread outside
//! its pool (see `tests/cpu_program_allocations.rs`, which counts both).

use super::elementwise::{binary_into, unary_into, BinaryPlan};
use super::fused_products::{self, Fusion, Then};
use super::gemm::{matmul_into, MatmulPlan};
use super::layout::{permute_into, sum_to_shape_into, PermutePlan, SumToShapePlan};
use super::nn;
use super::reduce::{argmax_into, reduce_into};
use super::select;
use crate::attention::{AttentionDims, AttentionSpec};
use crate::backend::{
    AdamStep, BinaryOp, DeviceError, DeviceKind, DropoutKey, ReduceOp, Result, UnaryOp,
};
use crate::capture::{ArenaBytes, CallObserver, Op, Origin, StepPlan, StepProgram, ValueId};
use crate::clock::Instant;
use crate::counter_scope::{count_in_scopes, Count};
use crate::tensor::{numel_of, Storage, Tensor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What one step of the program computes, with everything that depends only
/// on shapes decided.
#[derive(Debug)]
enum Kernel {
    /// The input's elements copied (an upload or download).
    Copy,
    /// `unary(op, x)`.
    Unary(UnaryOp),
    /// `binary(op, a, b)`.
    Binary(BinaryOp, BinaryPlan),
    /// `matmul` / `matmul_t`.
    Matmul(MatmulPlan),
    /// `reduce(op, x, axis)` of an input of `shape`.
    Reduce {
        op: ReduceOp,
        axis: Option<usize>,
        shape: Vec<usize>,
    },
    /// `argmax(x, axis)` of an input of `shape`.
    Argmax {
        axis: Option<usize>,
        shape: Vec<usize>,
    },
    /// `softmax` (or `log_softmax` when `log`) over `(outer, n, inner)`.
    Softmax {
        dims: (usize, usize, usize),
        log: bool,
    },
    /// `softmax_backward` over `(outer, n, inner)`.
    SoftmaxBackward { dims: (usize, usize, usize) },
    /// `cross_entropy` of `(rows, v)` logits.
    CrossEntropy {
        dims: (usize, usize),
        want_grad: bool,
    },
    /// `permute`.
    Permute(PermutePlan),
    /// `gather_rows` from a table of rows of `d`.
    GatherRows { d: usize },
    /// `scatter_add_rows` of rows of `d`.
    ScatterAddRows { d: usize },
    /// `sum_to_shape`.
    SumToShape(SumToShapePlan),
    /// `rms_norm` of `(rows, d)`.
    RmsNorm { dims: (usize, usize), eps: f32 },
    /// `rms_norm_backward` of `(rows, d)`.
    RmsNormBackward { dims: (usize, usize) },
    /// `layer_norm` of `(rows, d)`.
    LayerNorm { dims: (usize, usize), eps: f32 },
    /// `layer_norm_backward` of `(rows, d)`.
    LayerNormBackward { dims: (usize, usize) },
    /// `unary_backward(op, x, y, dy)`.
    UnaryBackward(UnaryOp),
    /// `bias_act(x, bias, act)`.
    BiasAct(UnaryOp),
    /// A product and the call consuming it, fused (see [`fused_products`]):
    /// the product's operands, then the consumer's others.
    Fused { plan: MatmulPlan, then: Then },
    /// `bias_act_backward`: `dx`, then `dbias` summed by the plan when wanted.
    BiasActBackward {
        act: UnaryOp,
        dbias: Option<SumToShapePlan>,
    },
    /// `masked_softmax` (or its backward when `backward`) of `(rows, T, S)` scores.
    MaskedSoftmax {
        dims: (usize, usize, usize),
        divisor: f32,
        causal: bool,
        backward: bool,
    },
    /// `attention` (or its backward when `backward`), tiled.
    Attention {
        dims: AttentionDims,
        spec: AttentionSpec,
        backward: bool,
    },
    /// `dropout_mask(shape, key, p)`; the key's counter grows by one per run.
    DropoutMask { key: DropoutKey, p: f64 },
    /// `adam_update` with the recorded step; `t` grows by one per run.
    Adam(AdamStep),
    /// A kernel written as one function of the input slices, the output buffers
    /// and the scratch: the arena form of a kernel in a single match arm of
    /// [`kernel_of`].
    Slices(SliceKernel),
}

/// The function of a [`Kernel::Slices`]: up to four input slices (unused ones
/// empty), up to three output buffers, and the scratch.
type SliceFn = dyn Fn(&[&[f32]; 4], &mut [&mut [f32]; 3], &mut Scratch) + Send + Sync;

/// An arena kernel as a function, with the scratch it needs.
struct SliceKernel {
    /// The kernel's name, for debugging.
    name: &'static str,
    /// Scratch elements it needs: (f32, f64).
    scratch: (usize, usize),
    run: Box<SliceFn>,
}

impl std::fmt::Debug for SliceKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SliceKernel({}, scratch {:?})", self.name, self.scratch)
    }
}

/// A [`Kernel::Slices`] for `op` needing `scratch` (f32, f64) elements.
fn slices(
    op: &Op,
    scratch: (usize, usize),
    run: impl Fn(&[&[f32]; 4], &mut [&mut [f32]; 3], &mut Scratch) + Send + Sync + 'static,
) -> Kernel {
    Kernel::Slices(SliceKernel {
        name: op.name(),
        scratch,
        run: Box::new(run),
    })
}

/// Where a value's elements are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// In the arena, from this element on.
    Arena(usize),
    /// In the storage of this aliased input (read in place).
    Aliased(usize),
}

/// A value's elements while it lives: `len` elements at `place`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    place: Place,
    len: usize,
}

/// One kernel call: its kernel and the arena slots it reads and writes.
#[derive(Debug)]
struct Step {
    kernel: Kernel,
    /// Slots of the call's inputs, in the kernel's argument order.
    ins: Vec<Slot>,
    /// Slots of the call's outputs (at most 3).
    outs: Vec<Slot>,
    /// Whether the step counts as a kernel launch (uploads and downloads are
    /// identities on the CPU and count nothing, as in the eager backend).
    counted: bool,
    /// The index of its call in the plan's trace.
    call: usize,
    /// For a fused step, the product's call (`call` is its consumer's).
    product_call: Option<usize>,
}

/// Scratch memory shared by every step (steps run one at a time).
#[derive(Debug, Default)]
struct Scratch {
    /// Softmax column maxima.
    a: Vec<f32>,
    /// f64 accumulators (softmax sums, per-row losses, gradient sums).
    f64s: Vec<f64>,
}

/// A captured step compiled for the CPU: kernels over preallocated buffers.
#[derive(Debug)]
pub struct CpuProgram {
    /// The arena: every owned value at its offset (values whose lifetimes do
    /// not meet share elements).
    arena: Arena,
    /// The owned inputs' initial elements and their offsets, until the first
    /// run copies them into the arena and drops them: compiling copies
    /// nothing, so the caller can drop its own references to the carried
    /// state first (`StepProgram::readable`) and the state is never held
    /// twice.
    initial: Vec<(usize, Tensor)>,
    /// Carried values' places and their inputs' index in `initial` (read
    /// before the first run).
    carried_initial: Vec<(Place, usize)>,
    /// The storages of the inputs read in place.
    aliased: Vec<Arc<Vec<f32>>>,
    bytes: ArenaBytes,
    steps: Vec<Step>,
    scratch: Scratch,
    /// `(input's slot, source's slot)` copied before every run after the
    /// first (pairs at the same place are left out).
    carries: Vec<(Slot, Slot)>,
    /// Each value's place.
    value_place: Vec<Place>,
    /// Each value's shape.
    shapes: Vec<Vec<usize>>,
    /// Whether a value can be read after a run (kept, carried from, or an input).
    readable: Vec<bool>,
    runs: u64,
    kernel: Duration,
    /// The backend's kernel-launch counter.
    launches: Arc<AtomicU64>,
}

/// A failure to compile, as a device error.
fn unsupported(message: String) -> DeviceError {
    DeviceError::Backend {
        device: "cpu".into(),
        message: format!("captured step: {message}"),
    }
}

/// The kernel of a call with inputs of shapes `ins`.
fn kernel_of(op: &Op, ins: &[&[usize]]) -> Result<Kernel> {
    Ok(match op {
        Op::Upload | Op::Download => Kernel::Copy,
        Op::Unary { op: u } => Kernel::Unary(*u),
        Op::Binary { op: b } => {
            let plan = BinaryPlan::new(ins[0], ins[1]).ok_or_else(|| {
                unsupported(format!(
                    "binary shapes {:?} and {:?} do not broadcast",
                    ins[0], ins[1]
                ))
            })?;
            Kernel::Binary(*b, plan)
        }
        Op::Matmul => Kernel::Matmul(MatmulPlan::for_op(ins[0], false, ins[1], false)),
        Op::MatmulT {
            transpose_a,
            transpose_b,
        } => Kernel::Matmul(MatmulPlan::for_op(
            ins[0],
            *transpose_a,
            ins[1],
            *transpose_b,
        )),
        Op::Reduce { op, axis } => Kernel::Reduce {
            op: *op,
            axis: *axis,
            shape: ins[0].to_vec(),
        },
        Op::Argmax { axis } => Kernel::Argmax {
            axis: *axis,
            shape: ins[0].to_vec(),
        },
        Op::Softmax { axis } | Op::LogSoftmax { axis } => Kernel::Softmax {
            dims: nn::split_at_axis(ins[0], *axis),
            log: matches!(op, Op::LogSoftmax { .. }),
        },
        Op::LogSumExp { axis } => {
            let dims = nn::split_at_axis(ins[0], *axis);
            let n = nn::softmax_scratch_lens(dims);
            slices(op, (0, n), move |x, o, s| {
                nn::logsumexp_into(x[0], dims, o[0], &mut s.f64s[..n])
            })
        }
        Op::SoftmaxBackward { axis } => Kernel::SoftmaxBackward {
            dims: nn::split_at_axis(ins[0], *axis),
        },
        Op::CrossEntropy { want_grad } => Kernel::CrossEntropy {
            dims: nn::cross_entropy_rows(ins[0]),
            want_grad: *want_grad,
        },
        Op::Permute { perm } => Kernel::Permute(PermutePlan::new(ins[0], perm)),
        Op::GatherRows => match ins[0] {
            &[_, d] => Kernel::GatherRows { d },
            table => {
                return Err(unsupported(format!(
                    "gather_rows from a table of shape {table:?} (not [V, d])"
                )))
            }
        },
        Op::ScatterAddRows { .. } => Kernel::ScatterAddRows {
            d: ins[1].last().copied().unwrap_or(1),
        },
        Op::EngramHash {
            orders,
            heads,
            rows,
            seed,
        } => {
            let t = ins[0].last().copied().unwrap_or(1);
            let (orders, heads, rows, seed) = (orders.clone(), *heads, *rows, *seed);
            slices(op, (0, 0), move |x, o, _| {
                nn::engram_hash_into(x[0], t, &orders, heads, rows, seed, o[0])
            })
        }
        Op::CausalConv => {
            let dims = nn::conv_dims(ins[0]);
            slices(op, (0, 0), move |x, o, _| {
                nn::causal_conv_into(x[0], x[1], dims, o[0])
            })
        }
        Op::CausalConvBackward => {
            let dims = nn::conv_dims(ins[0]);
            slices(op, (0, 0), move |x, o, _| {
                let [dx, dw, _] = o;
                nn::causal_conv_backward_into(x[0], x[1], x[2], dims, dx, dw)
            })
        }
        Op::SumToShape { shape } => Kernel::SumToShape(SumToShapePlan::new(ins[0], shape)),
        Op::RmsNorm { eps } => Kernel::RmsNorm {
            dims: crate::shape::rows_of(ins[0]),
            eps: *eps,
        },
        Op::RmsNormBackward => Kernel::RmsNormBackward {
            dims: crate::shape::rows_of(ins[0]),
        },
        Op::LayerNorm { eps } => Kernel::LayerNorm {
            dims: crate::shape::rows_of(ins[0]),
            eps: *eps,
        },
        Op::LayerNormBackward => Kernel::LayerNormBackward {
            dims: crate::shape::rows_of(ins[0]),
        },
        Op::DropoutMask { key, p, .. } => Kernel::DropoutMask { key: *key, p: *p },
        Op::UnaryBackward { op: u } => Kernel::UnaryBackward(*u),
        Op::BiasAct { act } => Kernel::BiasAct(*act),
        Op::BiasActBackward { act, want_bias } => Kernel::BiasActBackward {
            act: *act,
            dbias: want_bias.then(|| SumToShapePlan::new(ins[0], ins[1])),
        },
        Op::MaskedSoftmax { divisor, causal } | Op::MaskedSoftmaxBackward { divisor, causal } => {
            Kernel::MaskedSoftmax {
                dims: nn::score_dims(ins[0], *causal),
                divisor: *divisor,
                causal: *causal,
                backward: matches!(op, Op::MaskedSoftmaxBackward { .. }),
            }
        }
        Op::Attention { spec } | Op::AttentionBackward { spec } => {
            let backward = matches!(op, Op::AttentionBackward { .. });
            let sinks: &[usize] = if backward { &[0] } else { ins[3] };
            Kernel::Attention {
                dims: AttentionDims::of(ins[0], ins[1], ins[2], sinks, spec)
                    .map_err(unsupported)?,
                spec: *spec,
                backward,
            }
        }
        Op::Select => {
            let plan = select::SelectPlan::new([ins[0], ins[1], ins[2]])
                .ok_or_else(|| unsupported(format!("select shapes {ins:?} do not broadcast")))?;
            slices(op, (0, 0), move |x, o, _| {
                select::select_into(&plan, x[0], x[1], x[2], o[0])
            })
        }
        Op::SliceAxis {
            axis,
            start,
            step,
            len,
        } => {
            let plan = select::SlicePlan::new(ins[0], *axis, *start, *step, *len);
            slices(op, (0, 0), move |x, o, _| {
                select::slice_into(&plan, x[0], o[0])
            })
        }
        Op::UnsliceAxis {
            shape,
            axis,
            start,
            step,
        } => {
            let plan = select::SlicePlan::new(shape, *axis, *start, *step, ins[0][*axis]);
            slices(op, (0, 0), move |x, o, _| {
                select::unslice_into(&plan, x[0], o[0])
            })
        }
        Op::AdamUpdate { step } => Kernel::Adam(*step),
        Op::View => unreachable!("views are aliases, not steps"),
    })
}

impl Kernel {
    /// Scratch elements this kernel needs: (f32, f64).
    fn scratch_lens(&self) -> (usize, usize) {
        match self {
            Kernel::Softmax { dims, .. } => {
                let n = nn::softmax_scratch_lens(*dims);
                (n, n)
            }
            Kernel::SoftmaxBackward { dims } => (0, nn::softmax_scratch_lens(*dims)),
            Kernel::CrossEntropy { dims, .. } => (0, dims.0),
            Kernel::SumToShape(p) => (0, p.acc_len()),
            Kernel::BiasActBackward { dbias: Some(p), .. } => (0, p.acc_len()),
            // The kernels below need no scratch; each is named, so that a new
            // kernel must say what it needs.
            Kernel::Copy
            | Kernel::Unary(_)
            | Kernel::Binary(..)
            | Kernel::Matmul(_)
            | Kernel::Reduce { .. }
            | Kernel::Argmax { .. }
            | Kernel::Permute(_)
            | Kernel::GatherRows { .. }
            | Kernel::ScatterAddRows { .. }
            | Kernel::RmsNorm { .. }
            | Kernel::RmsNormBackward { .. }
            | Kernel::LayerNorm { .. }
            | Kernel::LayerNormBackward { .. }
            | Kernel::UnaryBackward(_)
            | Kernel::BiasAct(_)
            | Kernel::Fused { .. }
            | Kernel::BiasActBackward { dbias: None, .. }
            | Kernel::MaskedSoftmax { .. }
            | Kernel::Attention { .. }
            | Kernel::DropoutMask { .. }
            | Kernel::Adam(_) => (0, 0),
            Kernel::Slices(k) => k.scratch,
        }
    }
}

/// The arena of a compiled step, decided from the plan alone (nothing is
/// allocated): its steps and where every value lives.
struct Layout {
    steps: Vec<Step>,
    /// The arena's length in elements.
    arena_len: usize,
    /// Elements at the start of the arena that hold the step's state: the
    /// carried inputs and the values they are carried from. The rest (`arena_len - state_len`) is the step's working
    /// memory, kept in a buffer of its own that is dropped first when the
    /// loop ends.
    state_len: usize,
    /// Owned inputs: their offset and the elements they start with.
    initial: Vec<(usize, Tensor)>,
    /// For the inputs carried from a value: that value's place and the
    /// input's index in `initial` (what the value holds before a first run).
    carried_initial: Vec<(Place, usize)>,
    /// The inputs read in place, by [`Place::Aliased`] index.
    aliased: Vec<Tensor>,
    carries: Vec<(Slot, Slot)>,
    value_place: Vec<Place>,
    readable: Vec<bool>,
}

impl Layout {
    /// The bytes the layout holds.
    fn bytes(&self) -> ArenaBytes {
        let mut bytes = ArenaBytes {
            owned: 4 * self.arena_len as u64,
            aliased: 0,
        };
        for t in &self.aliased {
            let b = 4 * t.numel() as u64;
            if aliasable(t) {
                bytes.aliased += b;
            } else {
                bytes.owned += b;
            }
        }
        bytes
    }
}

/// Whether an input can be read in place from `t`'s storage (a host tensor
/// that is not a view of a longer storage).
fn aliasable(t: &Tensor) -> bool {
    matches!(t.storage(), Storage::Host(a) if a.len() == t.numel())
}

/// The bytes the CPU's compiled form of `plan` holds while it runs: its
/// arena (computed values, which share elements when their lifetimes do not
/// meet, and carried inputs) and the inputs it reads in place. Computed from
/// the plan alone, without allocating anything; [`CpuProgram::arena_bytes`]
/// reports the same for a compiled program. Errors are those of compiling the
/// plan.
pub fn arena_bytes(plan: &StepPlan) -> Result<ArenaBytes> {
    Ok(layout(plan)?.bytes())
}

/// Compiles `plan` into a [`CpuProgram`] counting its launches in `launches`.
pub(crate) fn compile(plan: &StepPlan, launches: Arc<AtomicU64>) -> Result<CpuProgram> {
    let layout = layout(plan)?;
    let bytes = layout.bytes();
    let Layout {
        steps,
        arena_len,
        state_len,
        initial,
        carried_initial,
        aliased,
        carries,
        value_place,
        readable,
    } = layout;
    // Allocated by the first run (`load_initial`).
    let arena = Arena {
        state_len,
        work_len: arena_len - state_len,
        ..Arena::default()
    };
    let aliased = aliased
        .into_iter()
        .map(|t| match t.storage() {
            Storage::Host(a) if aliasable(&t) => a.clone(),
            _ => Arc::new(t.host().to_vec()),
        })
        .collect();
    let mut scratch = Scratch::default();
    let (mut la, mut lf) = (0, 0);
    for s in &steps {
        let (a, f) = s.kernel.scratch_lens();
        (la, lf) = (la.max(a), lf.max(f));
    }
    scratch.a.resize(la, 0.0);
    scratch.f64s.resize(lf, 0.0);
    Ok(CpuProgram {
        arena,
        initial,
        carried_initial,
        aliased,
        bytes,
        steps,
        scratch,
        carries,
        value_place,
        shapes: plan.trace.values.iter().map(|v| v.shape.clone()).collect(),
        readable,
        runs: 0,
        kernel: Duration::ZERO,
        launches,
    })
}

/// Decides the arena of `plan` (see the module's documentation).
///
/// Products are fused into their consumers ([`fused_products`]) unless that
/// makes the block larger (the fusions that keep operands alive longer are
/// dropped first, then all): the packing is a heuristic, so a step with fewer
/// live bytes at every call may still pack into a larger block.
fn layout(plan: &StepPlan) -> Result<Layout> {
    let all = fused_products::find(plan);
    let plain = layout_fusing(plan, &[])?;
    let shorter: Vec<Fusion> = all.iter().filter(|f| !f.extends).copied().collect();
    let mut candidates = vec![all.clone()];
    if shorter.len() < all.len() {
        candidates.push(shorter);
    }
    for fusions in candidates.iter().filter(|f| !f.is_empty()) {
        let fused = layout_fusing(plan, fusions)?;
        if fused.bytes().total() <= plain.bytes().total() {
            return Ok(fused);
        }
    }
    Ok(plain)
}

/// [`layout`] with the products of `fusions` fused into their consumers.
fn layout_fusing(plan: &StepPlan, fusions: &[Fusion]) -> Result<Layout> {
    let trace = &plan.trace;
    let n = trace.values.len();
    // Products fused into their consumers, by either call.
    let mut fused_at: Vec<Option<Fusion>> = vec![None; trace.calls.len()];
    for f in fusions {
        fused_at[f.product] = Some(*f);
        fused_at[f.consumer] = Some(*f);
    }
    let shape = |v: ValueId| trace.values[v.index()].shape.as_slice();
    // Every value's root: the value whose buffer it uses (views share).
    let mut root: Vec<usize> = (0..n).collect();
    // The last call reading each root (through any of its views).
    let mut last: Vec<Option<usize>> = vec![None; n];
    // Values defined so far: the inputs, then each call's outputs.
    let mut defined: Vec<bool> = trace
        .values
        .iter()
        .map(|v| matches!(v.origin, Origin::Input(_)))
        .collect();
    for (k, c) in trace.calls.iter().enumerate() {
        for v in c.inputs.iter().chain(&c.outputs) {
            if v.index() >= n {
                return Err(unsupported(format!(
                    "call {} names an unknown value",
                    k + 1
                )));
            }
        }
        let in_shapes: Vec<&[usize]> = c.inputs.iter().map(|v| shape(*v)).collect();
        let out_shapes: Vec<&[usize]> = c.outputs.iter().map(|v| shape(*v)).collect();
        c.op.check_output_sizes(&in_shapes, &out_shapes)
            .map_err(|e| unsupported(format!("call {} (`{}`): {e}", k + 1, c.op.name())))?;
        if let Some(v) = c.inputs.iter().find(|v| !defined[v.index()]) {
            return Err(unsupported(format!(
                "call {} reads value {} before any call computes it",
                k + 1,
                v.0
            )));
        }
        for (index, v) in c.outputs.iter().enumerate() {
            if defined[v.index()]
                || trace.values[v.index()].origin != (Origin::Output { call: k, index })
            {
                return Err(unsupported(format!(
                    "call {} computes value {}, which is not its output {}",
                    k + 1,
                    v.0,
                    index + 1
                )));
            }
            defined[v.index()] = true;
        }
        if c.op == Op::View {
            let (i, o) = (c.inputs[0], c.outputs[0]);
            if numel_of(shape(i)) != numel_of(shape(o)) {
                return Err(unsupported(format!(
                    "call {} views {:?} as {:?}",
                    k + 1,
                    shape(i),
                    shape(o)
                )));
            }
            root[o.index()] = root[i.index()];
        }
        // A fused product reads its operands when its consumer runs.
        let reader = match fused_at[k] {
            Some(f) if f.product == k => f.consumer,
            _ => k,
        };
        for v in &c.inputs {
            let l = &mut last[root[v.index()]];
            *l = Some(l.map_or(reader, |l| l.max(reader)));
        }
    }
    // Fused products are never stored: their values need no buffer.
    let mut unstored = vec![false; n];
    for f in fusions {
        unstored[trace.calls[f.product].outputs[0].index()] = true;
    }
    let live_at_end = plan.live_at_end();
    // Roots that must survive the step: inputs and everything live at the end.
    let mut pinned = vec![false; n];
    for (j, (v, _)) in trace.inputs.iter().enumerate() {
        if trace.values.get(v.index()).map(|x| x.origin) != Some(Origin::Input(j)) {
            return Err(unsupported(format!(
                "input {} is not an input value",
                j + 1
            )));
        }
        pinned[root[v.index()]] = true;
    }
    let mut kept_root = vec![false; n];
    for v in &live_at_end {
        if v.index() >= n {
            return Err(unsupported("a kept value is unknown".into()));
        }
        pinned[root[v.index()]] = true;
        kept_root[root[v.index()]] = true;
    }
    if plan.inputs.len() != trace.inputs.len() {
        return Err(unsupported(
            "the plan's inputs do not match the trace's".into(),
        ));
    }

    let ends = trace.calls.len();
    // When each root is defined: inputs before the first call.
    let mut def = vec![0usize; n];
    for (k, c) in trace.calls.iter().enumerate() {
        for o in &c.outputs {
            def[o.index()] = k;
        }
    }
    for (j, input) in plan.inputs.iter().enumerate() {
        let v = input.value;
        if trace.inputs[j].0 != v {
            return Err(unsupported(format!(
                "the plan's input {} is not the trace's",
                j + 1
            )));
        }
        if let Some(from) = input.carried_from.filter(|f| f.index() >= n) {
            return Err(unsupported(format!(
                "input {} is carried from an unknown value {}",
                j + 1,
                from.0
            )));
        }
        // Buffers are flat: a carried input may start as a view of its value.
        if input.initial.numel() != numel_of(shape(v)) {
            return Err(unsupported(format!(
                "input value {} starts with shape {:?}, recorded as {:?}",
                v.0,
                input.initial.shape(),
                shape(v)
            )));
        }
    }
    // Carried inputs by the root they are carried from.
    let carried_from_root: HashMap<usize, usize> = plan
        .inputs
        .iter()
        .filter_map(|i| i.carried_from.map(|c| (i.value.index(), root[c.index()])))
        .collect();
    // Each root's group: roots that share one buffer in turn (an Adam update
    // in place writes its old p, m, v's buffers).
    let mut group: Vec<usize> = (0..n).collect();
    for (k, c) in trace.calls.iter().enumerate() {
        if !matches!(c.op, Op::AdamUpdate { .. }) {
            continue;
        }
        let in_roots: Vec<usize> = c.inputs.iter().map(|v| root[v.index()]).collect();
        for (oi, o) in c.outputs.iter().enumerate() {
            let r = o.index();
            // Adam's p, m, v (inputs 0, 2, 3) become outputs 0, 1, 2.
            let src = c.inputs[[0, 2, 3][oi]];
            let sr = root[src.index()];
            let only_here = in_roots.iter().filter(|&&x| x == sr).count() == 1;
            let free_after = last[sr] == Some(k) && !kept_root[sr];
            let may_write = !pinned[sr] || carried_from_root.get(&sr) == Some(&r);
            let same_len = numel_of(shape(src)) == numel_of(shape(*o));
            if only_here && free_after && may_write && same_len {
                group[r] = group[sr];
            }
        }
    }
    // Inputs the step never writes are read in place from their tensors.
    let aliased_root = |r: usize| {
        matches!(trace.values[r].origin, Origin::Input(_)) && !carried_from_root.contains_key(&r)
    };
    // Each group's lifetime, in calls: from the call defining its first root
    // (inputs: before the first call) to the last call reading any of its
    // roots, or to the end of the step for pinned ones.
    let mut span: Vec<Option<(usize, usize)>> = vec![None; n];
    for r in 0..n {
        if root[r] != r || aliased_root(r) || unstored[r] {
            continue;
        }
        let end = if pinned[r] {
            ends
        } else {
            last[r].unwrap_or(def[r])
        };
        let g = group[r];
        span[g] = Some(match span[g] {
            Some((s0, e0)) => (s0.min(def[r]), e0.max(end)),
            None => (def[r], end),
        });
    }
    let len_of = |r: usize| numel_of(shape(ValueId(r as u32)));
    let mut glen = vec![0usize; n];
    for r in (0..n).filter(|&r| root[r] == r) {
        glen[group[r]] = glen[group[r]].max(len_of(r));
    }
    let groups: Vec<(usize, (usize, usize), usize)> = (0..n)
        .filter_map(|g| span[g].map(|s| (g, s, glen[g])))
        .collect();
    // The state's groups (carried inputs and the values they are carried
    // from) are packed first, the working values above them.
    let mut state = vec![false; n];
    for (&input, &from) in &carried_from_root {
        state[group[root[input]]] = true;
        state[group[from]] = true;
    }
    let (state_groups, work_groups): (Vec<_>, Vec<_>) =
        groups.into_iter().partition(|&(g, ..)| state[g]);
    let (mut offset, state_len) = pack(&state_groups, n);
    let (work_offset, work_len) = pack(&work_groups, n);
    for &(g, ..) in &work_groups {
        offset[g] = state_len + work_offset[g];
    }
    let arena_len = state_len + work_len;
    let mut place = vec![Place::Arena(0); n];
    let mut initial = Vec::new();
    let mut aliased = Vec::new();
    let mut carried_initial = Vec::new();
    for input in &plan.inputs {
        let r = root[input.value.index()];
        if aliased_root(r) {
            place[r] = Place::Aliased(aliased.len());
            aliased.push(input.initial.clone());
        } else {
            if let Some(from) = input.carried_from {
                let from = root[from.index()];
                carried_initial.push((Place::Arena(offset[group[from]]), initial.len()));
            }
            initial.push((offset[group[r]], input.initial.clone()));
        }
    }
    for r in 0..n {
        if root[r] == r && !aliased_root(r) {
            place[r] = Place::Arena(offset[group[r]]);
        }
    }
    let slot = |v: ValueId| Slot {
        place: place[root[v.index()]],
        len: numel_of(shape(v)),
    };

    let mut steps = Vec::with_capacity(trace.calls.len());
    for (k, c) in trace.calls.iter().enumerate() {
        if c.op == Op::View {
            continue;
        }
        if let Some(f) = fused_at[k] {
            if f.product == k {
                continue;
            }
            let p = &trace.calls[f.product];
            let operands = [p.inputs[0], p.inputs[1]];
            let ins = operands.iter().chain(f.others.iter().flatten());
            let (ta, tb) = match p.op {
                Op::MatmulT {
                    transpose_a,
                    transpose_b,
                } => (transpose_a, transpose_b),
                _ => (false, false),
            };
            steps.push(Step {
                kernel: Kernel::Fused {
                    plan: MatmulPlan::for_op(shape(operands[0]), ta, shape(operands[1]), tb),
                    then: f.then,
                },
                ins: ins.map(|&v| slot(v)).collect(),
                outs: c.outputs.iter().map(|&v| slot(v)).collect(),
                counted: true,
                call: k,
                product_call: Some(f.product),
            });
            continue;
        }
        let ins: Vec<Slot> = c.inputs.iter().map(|&v| slot(v)).collect();
        let outs: Vec<Slot> = c.outputs.iter().map(|&v| slot(v)).collect();
        let in_shapes: Vec<&[usize]> = c.inputs.iter().map(|v| shape(*v)).collect();
        let kernel = kernel_of(&c.op, &in_shapes)?;
        let counted = !matches!(kernel, Kernel::Copy);
        steps.push(Step {
            kernel,
            ins,
            outs,
            counted,
            call: k,
            product_call: None,
        });
    }
    let carries = plan
        .inputs
        .iter()
        .filter_map(|i| {
            let from = i.carried_from?;
            let (dst, src) = (slot(i.value), slot(from));
            (dst.place != src.place).then_some((dst, src))
        })
        .collect();
    // Readable after a run: values live at the end (and their views), and
    // inputs that are not carried (they never change).
    let readable = (0..n)
        .map(|v| {
            let r = root[v];
            kept_root[r]
                || (matches!(trace.values[r].origin, Origin::Input(_))
                    && !carried_from_root.contains_key(&r))
        })
        .collect();
    let value_place = (0..n).map(|v| place[root[v]]).collect();
    Ok(Layout {
        steps,
        arena_len,
        state_len,
        initial,
        carried_initial,
        aliased,
        carries,
        value_place,
        readable,
    })
}

/// Offsets in one block for `groups` (`(id, (first call, last call), length)`;
/// two groups whose call ranges meet may not overlap): each group, in turn,
/// takes the tightest gap between the groups already placed that live at the
/// same time as it (best fit), else the first element above them all. The
/// groups are tried in a few orders (largest first; largest length × lifetime
/// first; longest-lived first; earliest first), and the smallest block wins
/// (the first of equals): no one order packs every step best. Returns each
/// id's offset (indexed by id, `n` entries) and the block's length.
fn pack(groups: &[(usize, (usize, usize), usize)], n: usize) -> (Vec<usize>, usize) {
    type Key = fn(&(usize, (usize, usize), usize)) -> (usize, usize, usize);
    let orders: [Key; 4] = [
        |&(g, _, len)| (usize::MAX - len, 0, g),
        |&(g, (s, e), len)| (usize::MAX - len.saturating_mul(e - s + 1), 0, g),
        |&(g, (s, e), len)| (usize::MAX - (e - s), usize::MAX - len, g),
        |&(g, (s, _), len)| (s, usize::MAX - len, g),
    ];
    let mut best: Option<(Vec<usize>, usize)> = None;
    for key in orders {
        let mut order = groups.to_vec();
        order.sort_by_key(key);
        let mut offset = vec![0usize; n];
        let mut placed: Vec<(usize, usize, usize, usize)> = Vec::with_capacity(order.len());
        let mut arena_len = 0;
        for &(g, (s0, e0), size) in &order {
            let mut taken: Vec<(usize, usize)> = placed
                .iter()
                .filter(|&&(s1, e1, _, len)| s0 <= e1 && s1 <= e0 && len > 0)
                .map(|&(_, _, off, len)| (off, off + len))
                .collect();
            taken.sort_unstable();
            let (mut gap, mut top): (Option<(usize, usize)>, usize) = (None, 0);
            for (start, end) in taken {
                if start >= top + size && gap.is_none_or(|(g, _)| start - top < g) {
                    gap = Some((start - top, top));
                }
                top = top.max(end);
            }
            let off = gap.map_or(top, |(_, at)| at);
            offset[g] = off;
            placed.push((s0, e0, off, size));
            arena_len = arena_len.max(off + size);
        }
        if best.as_ref().is_none_or(|(_, len)| arena_len < *len) {
            best = Some((offset, arena_len));
        }
    }
    best.unwrap_or_else(|| (vec![0; n], 0))
}

/// The arena's elements, in two buffers: the step's state (offsets below
/// `state_len`) and its working memory (the offsets above, from 0 in
/// `work`). No value lies across the two. Both are empty until the first
/// run allocates them.
#[derive(Debug, Default)]
struct Arena {
    state: Vec<f32>,
    work: Vec<f32>,
    state_len: usize,
    work_len: usize,
}

impl Arena {
    /// The elements `off..off + len` of the arena.
    fn get(&self, off: usize, len: usize) -> &[f32] {
        match off.checked_sub(self.state_len) {
            None => &self.state[off..off + len],
            Some(w) => &self.work[w..w + len],
        }
    }

    /// The elements `off..off + len` of the arena, to write.
    fn get_mut(&mut self, off: usize, len: usize) -> &mut [f32] {
        match off.checked_sub(self.state_len) {
            None => &mut self.state[off..off + len],
            Some(w) => &mut self.work[w..w + len],
        }
    }

    /// Copies `len` elements from offset `from` to offset `to`.
    fn copy(&mut self, from: usize, to: usize, len: usize) {
        let (s, w) = (self.state_len, &mut self.work);
        match (from.checked_sub(s), to.checked_sub(s)) {
            (None, None) => self.state.copy_within(from..from + len, to),
            (Some(f), Some(t)) => w.copy_within(f..f + len, t),
            (None, Some(t)) => w[t..t + len].copy_from_slice(&self.state[from..from + len]),
            (Some(f), None) => self.state[to..to + len].copy_from_slice(&w[f..f + len]),
        }
    }
}

/// The elements of `slot`.
fn read<'a>(arena: &'a Arena, aliased: &'a [Arc<Vec<f32>>], slot: Slot) -> &'a [f32] {
    match slot.place {
        Place::Arena(off) => arena.get(off, slot.len),
        Place::Aliased(i) => &aliased[i][..slot.len],
    }
}

/// Copies slot `src` into the arena slot `dst` (same length, apart or the
/// same place).
fn copy_slot(arena: &mut Arena, aliased: &[Arc<Vec<f32>>], src: Slot, dst: Slot) {
    let Place::Arena(to) = dst.place else {
        unreachable!("the arena never writes an aliased input")
    };
    match src.place {
        Place::Arena(from) => arena.copy(from, to, src.len),
        Place::Aliased(i) => arena
            .get_mut(to, dst.len)
            .copy_from_slice(&aliased[i][..src.len]),
    }
}

/// The most inputs a compiled kernel reads (`attention_backward`: q, k, v,
/// out, lse, dout).
const MAX_INS: usize = 6;
/// The most outputs a compiled kernel writes.
const MAX_OUTS: usize = 3;

/// The step's input slices and output slices (at most [`MAX_INS`] and
/// [`MAX_OUTS`]; unused ones empty). The planner never lets an output meet an
/// input or another output in the arena, so the slices are split off one
/// another without copying.
fn regions<'a>(
    arena: &'a mut Arena,
    aliased: &'a [Arc<Vec<f32>>],
    ins: &[Slot],
    outs: &[Slot],
) -> ([&'a [f32]; MAX_INS], [&'a mut [f32]; MAX_OUTS]) {
    assert!(ins.len() <= MAX_INS && outs.len() <= MAX_OUTS);
    // The distinct arena ranges, by offset (an input may appear twice).
    let mut ranges = [(0usize, 0usize); MAX_INS + MAX_OUTS];
    let mut count = 0;
    for s in outs.iter().chain(ins) {
        if let (Place::Arena(off), true) = (s.place, s.len > 0) {
            if !ranges[..count].contains(&(off, s.len)) {
                ranges[count] = (off, s.len);
                count += 1;
            }
        }
    }
    ranges[..count].sort_unstable();
    let mut pieces: [Option<&'a mut [f32]>; MAX_INS + MAX_OUTS] = Default::default();
    let (mut rest, mut at) = (arena.state.as_mut_slice(), 0);
    let mut work = Some(arena.work.as_mut_slice());
    for (piece, &(off, len)) in pieces.iter_mut().zip(&ranges[..count]) {
        if off >= arena.state_len {
            // The first range in the working buffer: split that one now.
            if let Some(w) = work.take() {
                (rest, at) = (w, arena.state_len);
            }
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - at);
        let (mid, tail) = tail.split_at_mut(len);
        *piece = Some(mid);
        (rest, at) = (tail, off + len);
    }
    let index = |s: &Slot| match s.place {
        Place::Arena(off) => ranges[..count].iter().position(|&r| r == (off, s.len)),
        Place::Aliased(_) => None,
    };
    let mut out: [&'a mut [f32]; MAX_OUTS] = Default::default();
    for (o, s) in out.iter_mut().zip(outs) {
        if let Some(i) = index(s) {
            *o = pieces[i].take().expect("outputs are apart");
        }
    }
    let shared: [Option<&'a [f32]>; MAX_INS + MAX_OUTS] = pieces.map(|p| p.map(|m| &*m));
    let mut input: [&'a [f32]; MAX_INS] = Default::default();
    for (x, s) in input.iter_mut().zip(ins) {
        *x = match (s.place, index(s)) {
            (Place::Aliased(i), _) => &aliased[i][..s.len],
            (_, Some(i)) => shared[i].expect("an input is not an output"),
            (_, None) => &[],
        };
    }
    (input, out)
}

/// Runs one step on the arena (`runs` earlier runs, for Adam's count and
/// dropout's counter).
fn execute(
    step: &Step,
    arena: &mut Arena,
    aliased: &[Arc<Vec<f32>>],
    scratch: &mut Scratch,
    runs: u64,
) {
    if let Kernel::Adam(adam) = &step.kernel {
        // Old p, m, v into the new places unless the update is in place.
        for (i, &o) in [0, 2, 3].iter().zip(&step.outs) {
            if step.ins[*i].place != o.place {
                copy_slot(arena, aliased, step.ins[*i], o);
            }
        }
        let h = crate::declare::Attr::replayed(adam, runs).constants();
        let ([g, ..], [p, m, v]) = regions(arena, aliased, &step.ins[1..2], &step.outs);
        nn::adam_update_into(p, g, m, v, h);
        return;
    }
    let (xs, mut outs) = regions(arena, aliased, &step.ins, &step.outs);
    if let Kernel::Slices(k) = &step.kernel {
        (k.run)(&[xs[0], xs[1], xs[2], xs[3]], &mut outs, scratch);
    } else {
        let x = |i: usize| xs[i];
        let [o0, o1, o2] = &mut outs;
        let Scratch { a, f64s } = scratch;
        match &step.kernel {
            Kernel::Copy => o0.copy_from_slice(x(0)),
            Kernel::Unary(op) => unary_into(*op, x(0), o0),
            Kernel::Binary(op, plan) => binary_into(*op, plan, x(0), x(1), o0),
            Kernel::Matmul(plan) => matmul_into(plan, x(0), x(1), o0),
            Kernel::Reduce { op, axis, shape } => reduce_into(*op, x(0), shape, *axis, o0),
            Kernel::Argmax { axis, shape } => argmax_into(x(0), shape, *axis, o0),
            Kernel::Softmax { dims, log } => {
                let s = nn::softmax_scratch_lens(*dims);
                nn::softmax_into(x(0), *dims, *log, o0, &mut a[..s], &mut f64s[..s])
            }
            Kernel::SoftmaxBackward { dims } => {
                let s = nn::softmax_scratch_lens(*dims);
                nn::softmax_backward_into(x(0), x(1), *dims, o0, &mut f64s[..s])
            }
            Kernel::CrossEntropy { dims, want_grad } => {
                let grad = want_grad.then_some(&mut **o1);
                nn::cross_entropy_into(x(0), x(1), *dims, o0, grad, &mut f64s[..dims.0])
            }
            Kernel::Permute(plan) => permute_into(plan, x(0), o0),
            Kernel::GatherRows { d } => nn::gather_rows_into(x(0), *d, x(1), o0),
            Kernel::ScatterAddRows { d } => nn::scatter_add_rows_into(x(0), x(1), *d, o0),
            Kernel::SumToShape(plan) => {
                sum_to_shape_into(plan, x(0), o0, &mut f64s[..plan.acc_len()])
            }
            Kernel::RmsNorm { dims, eps } => nn::rms_norm_into(x(0), *dims, *eps, o0, o1),
            Kernel::RmsNormBackward { dims } => {
                nn::rms_norm_backward_into(x(0), x(1), x(2), *dims, o0)
            }
            Kernel::LayerNorm { dims, eps } => nn::layer_norm_into(x(0), *dims, *eps, o0, o1, o2),
            Kernel::LayerNormBackward { dims } => {
                nn::layer_norm_backward_into(x(0), x(1), x(2), x(3), *dims, o0)
            }
            Kernel::DropoutMask { key, p } => {
                let key = crate::declare::Attr::replayed(key, runs).key();
                nn::dropout_mask_into(key, *p, o0)
            }
            Kernel::UnaryBackward(op) => nn::unary_backward_into(*op, x(0), x(1), x(2), o0),
            Kernel::BiasAct(act) => nn::bias_act_into(*act, x(0), x(1), o0),
            Kernel::Fused { plan, then } => {
                let others = [
                    xs.get(2).copied().unwrap_or(&[]),
                    xs.get(3).copied().unwrap_or(&[]),
                ];
                fused_products::run(plan, *then, x(0), x(1), others, o0)
            }
            Kernel::BiasActBackward { act, dbias } => {
                nn::bias_act_backward_into(*act, x(0), x(1), x(2), x(3), o0);
                if let Some(plan) = dbias {
                    sum_to_shape_into(plan, o0, o1, &mut f64s[..plan.acc_len()]);
                }
            }
            Kernel::MaskedSoftmax {
                dims,
                divisor,
                causal,
                backward: false,
            } => nn::masked_softmax_into(x(0), *dims, *divisor, *causal, o0),
            Kernel::MaskedSoftmax {
                dims,
                divisor,
                causal,
                backward: true,
            } => nn::masked_softmax_backward_into(x(0), x(1), *dims, *divisor, *causal, o0),
            Kernel::Attention {
                dims,
                spec,
                backward: false,
            } => nn::attention_into([x(0), x(1), x(2), x(3)], dims, spec, o0, o1),
            Kernel::Attention {
                dims,
                spec,
                backward: true,
            } => {
                let ins = [x(0), x(1), x(2), x(3), x(4), x(5)];
                nn::attention_backward_into(ins, dims, spec, o0, o1, o2)
            }
            Kernel::Adam(_) | Kernel::Slices(_) => {
                unreachable!("handled above")
            }
        }
    }
}

impl CpuProgram {
    /// The bytes the program's buffers hold (see [`arena_bytes`]).
    pub fn arena_bytes(&self) -> ArenaBytes {
        self.bytes
    }

    /// Copies the owned inputs' initial elements into the arena (before the
    /// first run), dropping each tensor once copied, then tells the
    /// allocator hook that the memory freed should go back to the OS before
    /// the run touches the rest of the arena.
    fn load_initial(&mut self) {
        if self.runs > 0 {
            return;
        }
        let a = &mut self.arena;
        a.state = vec![0.0; a.state_len];
        self.carried_initial.clear();
        for (off, t) in std::mem::take(&mut self.initial) {
            a.get_mut(off, t.numel()).copy_from_slice(t.host());
        }
        crate::capture::released_after_compile();
        a.work = vec![0.0; a.work_len];
    }

    /// The initial input a carried value `v` stands for before the first run.
    fn carried_initial(&self, v: ValueId) -> Option<&Tensor> {
        let place = *self.value_place.get(v.index())?;
        let len = numel_of(self.shapes.get(v.index())?);
        self.carried_initial
            .iter()
            .find(|(p, _)| *p == place)
            .map(|&(_, i)| &self.initial[i].1)
            .filter(|t| t.numel() == len)
    }

    /// The buffer of `v` when it can be read after a run.
    fn readable_buffer(&self, v: ValueId) -> Result<&[f32]> {
        if self.runs == 0 {
            if let Some(t) = self.carried_initial(v) {
                return Ok(t.host());
            }
        }
        match self.readable.get(v.index()) {
            Some(true) if self.runs > 0 => {
                let len = numel_of(&self.shapes[v.index()]);
                let slot = Slot {
                    place: self.value_place[v.index()],
                    len,
                };
                Ok(read(&self.arena, &self.aliased, slot))
            }
            Some(true) => Err(unsupported(format!(
                "value {} was read before the first run",
                v.0
            ))),
            _ => Err(unsupported(format!(
                "value {} is not kept after a step (name it in the plan's `keep`)",
                v.0
            ))),
        }
    }
}

impl StepProgram for CpuProgram {
    fn run_observed(&mut self, mut after_call: Option<CallObserver<'_>>) -> Result<()> {
        self.load_initial();
        if self.arena.work.len() != self.arena.work_len {
            // Dropped by `take_kept`.
            self.arena.work = vec![0.0; self.arena.work_len];
        }
        if self.runs > 0 {
            for &(dst, src) in &self.carries {
                copy_slot(&mut self.arena, &self.aliased, src, dst);
            }
        }
        for step in &self.steps {
            let started = Instant::now();
            execute(
                step,
                &mut self.arena,
                &self.aliased,
                &mut self.scratch,
                self.runs,
            );
            self.kernel += started.elapsed();
            if let Some(f) = after_call.as_mut() {
                if let Some(product) = step.product_call {
                    // The fused step's time goes to the product; its
                    // consumer is reported as ending with it.
                    f(product, started);
                    f(step.call, Instant::now());
                } else {
                    f(step.call, started);
                }
            }
            if step.counted {
                // A fused step counts as the two calls it stands for, as
                // observers and the eager step see them.
                let calls = if step.product_call.is_some() { 2 } else { 1 };
                self.launches.fetch_add(calls, Ordering::Relaxed);
                for _ in 0..calls {
                    count_in_scopes(DeviceKind::Cpu, Count::Kernel);
                }
            }
        }
        self.runs += 1;
        Ok(())
    }

    fn first_element(&self, v: ValueId) -> Result<f32> {
        self.readable_buffer(v)?
            .first()
            .copied()
            .ok_or_else(|| unsupported(format!("value {} has no elements", v.0)))
    }

    fn tensor(&self, v: ValueId) -> Result<Tensor> {
        let data = self.readable_buffer(v)?.to_vec();
        Ok(Tensor::from_vec(self.shapes[v.index()].clone(), data))
    }

    fn take_kept(&mut self, vs: &[ValueId]) -> Vec<Result<Tensor>> {
        // The values in the working buffer first, then it goes (a later run
        // allocates it again), then the state's values.
        let state_len = self.arena.state_len;
        let in_work = |v: ValueId| matches!(self.value_place.get(v.index()), Some(&Place::Arena(off)) if off >= state_len);
        let mut out: Vec<Option<Result<Tensor>>> = vs
            .iter()
            .map(|&v| (self.runs > 0 && in_work(v)).then(|| self.tensor(v)))
            .collect();
        if self.runs > 0 {
            self.arena.work = Vec::new();
            crate::capture::released_after_compile();
        }
        for (o, &v) in out.iter_mut().zip(vs) {
            if o.is_none() {
                *o = Some(self.tensor(v));
            }
        }
        out.into_iter().flatten().collect()
    }

    fn readable(&self, v: ValueId) -> bool {
        if self.runs == 0 {
            self.carried_initial(v).is_some()
        } else {
            self.readable.get(v.index()) == Some(&true)
        }
    }

    fn kernel_time(&self) -> Duration {
        self.kernel
    }

    fn kind(&self) -> &'static str {
        "arena"
    }

    fn arena_bytes(&self) -> Option<ArenaBytes> {
        Some(self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::capture::{plan, Recorder};
    use crate::cpu::CpuBackend;

    /// The CPU program of two recorded iterations of `step` from `init`,
    /// keeping the state (and what `step` returns as kept).
    fn compiled(
        init: Vec<Tensor>,
        step: impl Fn(&dyn Backend, u64, &[Tensor]) -> (Vec<Tensor>, Vec<Tensor>),
    ) -> CpuProgram {
        compiled_keeping(init, step).0
    }

    /// [`compiled`] and the ids of the values kept: the carried state's,
    /// then the others'.
    fn compiled_keeping(
        init: Vec<Tensor>,
        step: impl Fn(&dyn Backend, u64, &[Tensor]) -> (Vec<Tensor>, Vec<Tensor>),
    ) -> (CpuProgram, Vec<ValueId>) {
        let cpu = Arc::new(CpuBackend::new());
        let inner: Arc<dyn Backend> = cpu.clone();
        let rec = Recorder::start(inner.clone());
        let (s1, _) = step(&*rec, 1, &init);
        let first = rec.finish();
        let rec = Recorder::start(inner);
        let (s2, k2) = step(&*rec, 2, &s1);
        let second = rec.finish();
        let keep = s2
            .iter()
            .chain(&k2)
            .map(|t| second.find(t).unwrap())
            .collect();
        let p = plan(&first, second, keep).unwrap();
        let ids = p.keep.clone();
        (compile(&p, cpu.kernel_launches.clone()).unwrap(), ids)
    }

    fn adam(t: u64) -> AdamStep {
        AdamStep {
            lr: 0.1,
            b1: 0.9,
            b2: 0.99,
            eps: 1e-8,
            wd: 0.0,
            t,
        }
    }

    #[test]
    fn adam_updates_carried_state_in_place_with_no_copies() {
        let x = Tensor::from_vec(vec![2, 3], vec![0.5, -1.0, 2.0, 0.25, 3.0, -0.75]);
        let init = vec![x, Tensor::zeros(vec![2, 3]), Tensor::zeros(vec![2, 3])];
        let prog = compiled(init, |b, it, s| {
            let g = b.unary(UnaryOp::Tanh, &s[0]).unwrap();
            let (mut p, mut m, mut v) = (s[0].clone(), s[1].clone(), s[2].clone());
            b.adam_update(&mut p, &g, &mut m, &mut v, adam(it)).unwrap();
            (vec![p, m, v], vec![])
        });
        let adam = prog
            .steps
            .iter()
            .find(|s| matches!(s.kernel, Kernel::Adam(_)))
            .unwrap();
        assert_eq!(adam.outs, vec![adam.ins[0], adam.ins[2], adam.ins[3]]);
        assert!(prog.carries.is_empty(), "{:?}", prog.carries);
    }

    #[test]
    fn the_state_is_copied_in_by_the_first_run_and_read_out_without_the_working_memory() {
        let x = Tensor::from_vec(vec![2, 3], vec![0.5, -1.0, 2.0, 0.25, 3.0, -0.75]);
        let init = vec![x, Tensor::zeros(vec![2, 3]), Tensor::zeros(vec![2, 3])];
        let step = |b: &dyn Backend, it, s: &[Tensor]| {
            let y = b.unary(UnaryOp::Tanh, &s[0]).unwrap();
            let g = b.binary(BinaryOp::Mul, &y, &s[0]).unwrap();
            let (mut p, mut m, mut v) = (s[0].clone(), s[1].clone(), s[2].clone());
            b.adam_update(&mut p, &g, &mut m, &mut v, adam(it)).unwrap();
            (vec![p, m, v], vec![y])
        };
        let (mut a, ids) = compiled_keeping(init.clone(), step);
        let (mut b, _) = compiled_keeping(init, step);
        let (state, y) = (&ids[..3], ids[3]);
        // Compiling allocates nothing; before the first run the carried
        // values read as the state that run starts from (the second
        // recorded iteration's), the others not at all.
        assert!(a.arena.state.is_empty() && a.arena.work.is_empty());
        assert!(a.arena.state_len > 0 && a.arena.work_len > 0);
        let before: Vec<Tensor> = state.iter().map(|&v| a.tensor(v).unwrap()).collect();
        assert!(state.iter().all(|&v| a.readable(v)));
        assert!(!a.readable(y) && a.tensor(y).is_err());
        a.run().unwrap();
        b.run().unwrap();
        assert!(
            a.initial.is_empty(),
            "the initial inputs are dropped once copied"
        );
        let after: Vec<Tensor> = state.iter().map(|&v| a.tensor(v).unwrap()).collect();
        assert_ne!(before[0].host(), after[0].host(), "the update ran");
        // Read out mid-loop: the working buffer goes, the values read are
        // those of `tensor`, and a later run allocates it again.
        let taken = b.take_kept(&ids);
        assert!(b.arena.work.is_empty());
        for (t, &v) in taken.iter().zip(&ids) {
            assert_eq!(t.as_ref().unwrap().host(), a.tensor(v).unwrap().host());
        }
        for p in [&mut a, &mut b] {
            p.run().unwrap();
            p.run().unwrap();
        }
        for &v in &ids {
            let bits = |p: &CpuProgram| {
                p.tensor(v)
                    .unwrap()
                    .host()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&a), bits(&b));
        }
    }

    #[test]
    fn dead_values_give_their_buffers_to_later_values() {
        let x = Tensor::from_vec(vec![64], (0..64).map(|i| i as f32 / 64.0).collect());
        let prog = compiled(vec![Tensor::zeros(vec![1])], move |b, _, s| {
            let mut y = b.unary(UnaryOp::Exp, &x).unwrap();
            for _ in 0..10 {
                y = b.unary(UnaryOp::Tanh, &y).unwrap();
            }
            let c = b
                .binary(BinaryOp::Add, &s[0], &Tensor::scalar(1.0))
                .unwrap();
            (vec![c], vec![y])
        });
        // x and the constant are read in place; the arena holds the counter
        // and the new one (the step's state, apart from its working memory)
        // and two alternating places for the chain (the kept result is in
        // one of them).
        assert_eq!(
            prog.arena_bytes(),
            ArenaBytes {
                owned: 4 * (1 + 1 + 64 + 64),
                aliased: 4 * (64 + 1),
            }
        );
    }

    #[test]
    fn inputs_the_step_does_not_write_are_read_in_place() {
        let data = Tensor::from_vec(vec![4, 8], (0..32).map(|i| i as f32 * 0.125).collect());
        let w = Tensor::from_vec(
            vec![8, 2],
            (0..16).map(|i| (i as f32 - 8.0) / 16.0).collect(),
        );
        let d = data.clone();
        let prog = compiled(
            vec![w, Tensor::zeros(vec![8, 2]), Tensor::zeros(vec![8, 2])],
            move |b, it, s| {
                let y = b.matmul(&d, &s[0]).unwrap();
                let g = b.matmul_t(&d, &y, true, false).unwrap();
                let (mut p, mut m, mut v) = (s[0].clone(), s[1].clone(), s[2].clone());
                b.adam_update(&mut p, &g, &mut m, &mut v, adam(it)).unwrap();
                (vec![p, m, v], vec![])
            },
        );
        let aliased: Vec<*const f32> = prog.aliased.iter().map(|a| a.as_ptr()).collect();
        assert_eq!(
            aliased,
            vec![data.host().as_ptr()],
            "the data is not copied"
        );
        // p, m, v (updated in place), then y and g.
        assert_eq!(prog.arena_bytes().owned, 4 * (3 * 16 + 8 + 16));
        assert_eq!(prog.arena_bytes().aliased, 4 * 32);
    }

    #[test]
    fn a_shorter_value_takes_a_longer_dead_place() {
        let x = Tensor::from_vec(vec![16, 16], (0..256).map(|i| i as f32 / 256.0).collect());
        let prog = compiled(vec![Tensor::scalar(0.0)], move |b, _, s| {
            let e = b.unary(UnaryOp::Exp, &x).unwrap();
            let t = b.unary(UnaryOp::Tanh, &e).unwrap();
            let r = b.reduce(ReduceOp::Sum, &t, Some(1)).unwrap();
            let r = b.unary(UnaryOp::Neg, &r).unwrap();
            let c = b.binary(BinaryOp::Add, &s[0], &r).unwrap();
            let c = b.reduce(ReduceOp::Sum, &c, None).unwrap();
            (vec![c], vec![])
        });
        // e (256) and t (256) are live together; the row sums (16) and
        // everything after but the new counter take their dead places: the
        // arena holds those two and the counter, old and new (the step's
        // state, apart from its working memory).
        assert_eq!(prog.arena_bytes().owned, 4 * (256 + 256 + 1 + 1));
    }
}
