//! The kernels one training step runs, derived from a model's layers and the
//! exact shapes of its batch: the same list (kernel names and operand sizes)
//! that step capture records and `mlpl run --timeline` shows.
//!
//! Each layer has its forward and backward kernels in [`forward`] and
//! [`backward`], next to each other, one arm per layer. **Adding a layer**: add
//! an arm to both (the kernels its `nn` forward calls, and those its tape
//! entries call in the backward pass), then extend the test in
//! `tests/lang/estimates.rs` that compares this list with a recorded step of a
//! model using the layer; until then the layer falls into the generic arm,
//! which counts its parameters' GEMM work from `nn::estimate::cost`.

use crate::nn::estimate::cost;
use crate::nn::layers::{Activation, Attention, Layer, MoeGate};
use mlpl_devices::math;

/// What a kernel spends its time on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Work {
    /// `batch` products of `[m, k]·[k, n]`.
    Gemm {
        /// Independent products (attention's heads and batch rows).
        batch: f64,
        /// Rows.
        m: f64,
        /// Inner size.
        k: f64,
        /// Columns.
        n: f64,
        /// Which operand is read transposed.
        layout: GemmLayout,
    },
    /// A memory-bound kernel reading and writing `bytes` in all.
    Memory {
        /// Bytes moved.
        bytes: f64,
    },
    /// A fused attention call (`attention`, or `attention_backward` when
    /// `backward`) over `heads` query heads (batch rows × heads) of `t`
    /// queries and `s` keys of width `d`, doing `fmas` multiply-adds as the
    /// tiled kernel computes them ([`attention_fmas`]).
    Attention {
        /// Query heads over the batch (B·H).
        heads: f64,
        /// Queries per head.
        t: f64,
        /// Keys per head.
        s: f64,
        /// Head width.
        d: f64,
        /// Multiply-adds of the whole call.
        fmas: f64,
        /// The backward pass.
        backward: bool,
    },
}

/// Which operand of a product is stored transposed (read through strides):
/// a weight gradient `xᵀ·g` reads its left one, an input gradient `g·Wᵀ` its
/// right one. At few rows or a short inner size the three run at very
/// different speeds (a layer's input gradient on one row at a third of its
/// forward's), so each is costed from calibrated points of its own layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GemmLayout {
    /// Both operands as stored.
    #[default]
    Plain,
    /// The left operand transposed.
    TransposedA,
    /// The right operand transposed.
    TransposedB,
    /// Both transposed.
    TransposedAB,
}

impl GemmLayout {
    /// The layout reading the left operand transposed when `ta`, the right
    /// one when `tb`.
    pub fn of(ta: bool, tb: bool) -> GemmLayout {
        match (ta, tb) {
            (false, false) => GemmLayout::Plain,
            (true, false) => GemmLayout::TransposedA,
            (false, true) => GemmLayout::TransposedB,
            (true, true) => GemmLayout::TransposedAB,
        }
    }
}

/// One kernel call of a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kernel {
    /// The kernel's name as the kernel table spells it (`matmul`, `adam_update`).
    pub name: &'static str,
    /// Its work.
    pub work: Work,
    /// Elements of its outputs (what the step's buffers hold).
    pub out_elems: f64,
    /// Evaluations of a transcendental function (`exp`, `tanh`, `log`, …),
    /// which cost more than the bytes they move.
    pub evals: f64,
    /// The function those evaluations are, costed by its own calibrated
    /// figures ([`Transcendental`]).
    pub func: Transcendental,
    /// Rows of a row-wise kernel (softmax, cross-entropy, a norm, their
    /// backward passes), each of which costs a fixed setup beyond its
    /// elements (`DeviceModel::row_s`); 0 for other kernels.
    pub rows: f64,
}

/// The function of a kernel's transcendental evaluations, each calibrated on
/// its own (`train_loops::measure::transcendental_points`): the CPU's kernels
/// compute them in different ways (some in vector lanes, some one element at
/// a time) and the GELU and SiLU, forward and backward, add arithmetic around
/// theirs, so one pooled figure was far off for some of them. Functions
/// not calibrated on their own take the nearest one's cost: a softmax's or
/// cross-entropy's exponentials and logarithms, a sigmoid and a norm's root
/// per row count as [`Transcendental::Exp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Transcendental {
    /// `exp` (and the functions costed like it).
    #[default]
    Exp,
    /// `tanh`.
    Tanh,
    /// The GELU (tanh approximation), forward.
    Gelu,
    /// The GELU's derivative (a backward pass).
    GeluBackward,
    /// SiLU, `x·sigmoid(x)`, forward.
    Silu,
    /// SiLU's derivative.
    SiluBackward,
}

impl Transcendental {
    /// Every function, in the order the calibration measures them.
    pub const ALL: [Transcendental; 6] = [
        Transcendental::Exp,
        Transcendental::Tanh,
        Transcendental::Gelu,
        Transcendental::GeluBackward,
        Transcendental::Silu,
        Transcendental::SiluBackward,
    ];

    /// The name the calibration cache stores it under.
    pub fn name(self) -> &'static str {
        match self {
            Transcendental::Exp => "exp",
            Transcendental::Tanh => "tanh",
            Transcendental::Gelu => "gelu",
            Transcendental::GeluBackward => "gelu_backward",
            Transcendental::Silu => "silu",
            Transcendental::SiluBackward => "silu_backward",
        }
    }

    /// The function an activation's forward pass evaluates (`None` for relu).
    pub fn forward_of(a: Activation) -> Option<Transcendental> {
        match a {
            Activation::Relu => None,
            Activation::Tanh => Some(Transcendental::Tanh),
            Activation::Gelu => Some(Transcendental::Gelu),
            Activation::Silu => Some(Transcendental::Silu),
            Activation::Softmax => Some(Transcendental::Exp),
        }
    }

    /// The function an activation's backward pass evaluates: `gelu` and
    /// `silu` evaluate their inner function again; `tanh` and `softmax` work
    /// from the saved output (`None`).
    pub fn backward_of(a: Activation) -> Option<Transcendental> {
        match a {
            Activation::Gelu => Some(Transcendental::GeluBackward),
            Activation::Silu => Some(Transcendental::SiluBackward),
            _ => None,
        }
    }
}

impl Kernel {
    /// FLOPs of a GEMM (0 for memory-bound kernels).
    pub fn flops(&self) -> f64 {
        match self.work {
            Work::Gemm { batch, m, k, n, .. } => 2.0 * batch * m * k * n,
            Work::Attention { fmas, .. } => 2.0 * fmas,
            Work::Memory { .. } => 0.0,
        }
    }

    /// The kernel with `evals` transcendental evaluations of `func`.
    fn with_evals(self, func: Transcendental, evals: f64) -> Kernel {
        Kernel {
            evals,
            func,
            ..self
        }
    }

    /// The kernel as a row-wise one over `rows` rows.
    fn per_row(self, rows: f64) -> Kernel {
        Kernel { rows, ..self }
    }

    /// The kernel with one evaluation of `func` per output element, when it
    /// evaluates one (`None`: none).
    fn evaluating(self, func: Option<Transcendental>) -> Kernel {
        match func {
            Some(f) => self.with_evals(f, self.out_elems),
            None => self,
        }
    }
}

/// A GEMM kernel `name` of `batch` products `[m, k]·[k, n]`, both operands as
/// stored.
fn gemm(name: &'static str, batch: f64, m: f64, k: f64, n: f64) -> Kernel {
    gemm_laid_out(name, batch, m, k, n, GemmLayout::Plain)
}

/// A weight gradient `xᵀ·g`: `[m, k]·[k, n]` reading the left operand transposed.
fn gemm_ta(m: f64, k: f64, n: f64) -> Kernel {
    gemm_laid_out("matmul_t", 1.0, m, k, n, GemmLayout::TransposedA)
}

/// An input gradient `g·Wᵀ` (or a product with a transposed weight):
/// `[m, k]·[k, n]` reading the right operand transposed.
fn gemm_tb(m: f64, k: f64, n: f64) -> Kernel {
    gemm_laid_out("matmul_t", 1.0, m, k, n, GemmLayout::TransposedB)
}

/// A GEMM kernel `name` of `batch` products `[m, k]·[k, n]` in `layout`.
fn gemm_laid_out(
    name: &'static str,
    batch: f64,
    m: f64,
    k: f64,
    n: f64,
    layout: GemmLayout,
) -> Kernel {
    Kernel {
        name,
        work: Work::Gemm {
            batch,
            m,
            k,
            n,
            layout,
        },
        out_elems: batch * m * n,
        evals: 0.0,
        func: Transcendental::Exp,
        rows: 0.0,
    }
}

/// Whether an attention layer over sequences of `s` positions runs the fused
/// `attention` kernels (the layer's own rule, `nn::attention::FUSED_MIN_SCORES`).
fn fused_attention(s: f64) -> bool {
    s * s >= crate::nn::attention::FUSED_MIN_SCORES as f64
}

/// Keys per tile of the CPU's fused attention kernel
/// (`mlpl_devices::cpu::nn::attention`, `KEY_BLOCK`): a query row computes
/// its scores against every key of each tile it sees any key of.
pub const ATTENTION_KEY_TILE: usize = 64;

/// Multiply-adds of one head of a fused attention call of `t` queries over
/// `s` keys of width `d` (causal when `causal`, within a `window` when set),
/// as the tiled kernel computes them: a query row's scores against the whole
/// of every key tile it sees part of ([`ATTENTION_KEY_TILE`] keys of `d`
/// each), and its weighted sum over the keys it sees (`d` per key). The
/// backward pass computes two score rows per tile (the probabilities and
/// their gradients) and three weighted sums (`dq`, `dk`, `dv`); when it runs
/// as two passes (`one_pass` false: few heads for the threads) it computes
/// the score rows twice. Causal attention sees about half the pairs, but the
/// diagonal tiles are computed whole.
pub fn attention_fmas(
    t: usize,
    s: usize,
    d: usize,
    causal: bool,
    window: Option<usize>,
    backward: Option<bool>,
) -> f64 {
    let (tiles, pairs) = attention_tiles_and_pairs(t, s, causal, window);
    let (dots, sums) = match backward {
        None => (1.0, 1.0),
        Some(true) => (2.0, 3.0),
        Some(false) => (4.0, 3.0),
    };
    (dots * ATTENTION_KEY_TILE as f64 * tiles + sums * pairs) * d as f64
}

/// Whether the CPU's attention backward on `b` sequences of `heads` query
/// and `kv` key/value heads runs in one pass (the argument of
/// [`attention_fmas`] for a backward call).
pub fn attention_backward_one_pass(b: usize, heads: usize, kv: usize, t: usize, d: usize) -> bool {
    mlpl_devices::cpu::attention_backward_in_one_pass(&mlpl_devices::AttentionDims {
        b,
        h: heads,
        kv,
        t,
        s: t,
        d,
        sinks: false,
    })
}

/// Row-tile pairs (a query row and a key tile it sees part of) and
/// query-key pairs of one head.
fn attention_tiles_and_pairs(
    t: usize,
    s: usize,
    causal: bool,
    window: Option<usize>,
) -> (f64, f64) {
    let dims = mlpl_devices::AttentionDims {
        b: 1,
        h: 1,
        kv: 1,
        t,
        s,
        d: 1,
        sinks: false,
    };
    let spec = mlpl_devices::AttentionSpec {
        divisor: 1.0,
        causal,
        window: window.filter(|&w| w > 0),
    };
    let tile = ATTENTION_KEY_TILE;
    let (mut tiles, mut pairs) = (0usize, 0usize);
    for r in 0..t {
        let (lo, hi) = dims.visible(r, &spec);
        if lo < hi {
            tiles += (hi - 1) / tile - lo / tile + 1;
            pairs += hi - lo;
        }
    }
    (tiles as f64, pairs as f64)
}

/// The [`Work::Attention`] of attention layer `a`'s fused kernel on a batch
/// of `b` sequences of `s` positions (self-attention: `s` queries, `s` keys).
fn attention_work(a: &Attention, b: f64, s: f64, backward: bool) -> Work {
    let heads = b * a.heads as f64;
    let n = s as usize;
    let one_pass = attention_backward_one_pass(b as usize, a.heads, a.kv_heads, n, a.head_dim());
    let fmas = attention_fmas(
        n,
        n,
        a.head_dim(),
        a.causal,
        a.window,
        backward.then_some(one_pass),
    );
    Work::Attention {
        heads,
        t: s,
        s,
        d: a.head_dim() as f64,
        fmas: heads * fmas,
        backward,
    }
}

/// Query-key pairs one head of attention layer `a` sees over `s` positions
/// (its exponentials).
fn attention_pairs(a: &Attention, s: f64) -> f64 {
    let n = s as usize;
    attention_tiles_and_pairs(n, n, a.causal, a.window).1
}

/// An attention layer's width, heads, key/value heads, head width and inner
/// (heads × head width) size, as the cost formulas use them.
fn attention_sizes(a: &Attention) -> (f64, f64, f64, f64, f64) {
    (
        a.d as f64,
        a.heads as f64,
        a.kv_heads as f64,
        a.head_dim() as f64,
        a.inner() as f64,
    )
}

/// A memory-bound kernel `name` reading `reads` elements and writing `writes`.
fn mem(name: &'static str, reads: f64, writes: f64) -> Kernel {
    Kernel {
        name,
        work: Work::Memory {
            bytes: 4.0 * (reads + writes),
        },
        out_elems: writes,
        evals: 0.0,
        func: Transcendental::Exp,
        rows: 0.0,
    }
}

/// The loss a step differentiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    /// `cross_entropy(logits, targets)`.
    CrossEntropy,
    /// Any other scalar loss of the model's output (counted as a few
    /// element-wise kernels over it).
    Other,
}

/// What one step of a `train` loop does around the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepShape {
    /// Batch rows B.
    pub batch: f64,
    /// Sequence length S (1 without a sequence axis).
    pub seq: f64,
    /// The loss.
    pub loss: LossKind,
    /// Forward passes per step: 1 for the loss, plus one per recorded metric
    /// that applies the model again.
    pub forwards: f64,
    /// Optimizer state slots per parameter (Adam 2, momentum SGD 1).
    pub slots: f64,
}

/// The kernels of one step: the forward (with its loss), the backward, the
/// optimizer's update of every trainable parameter tensor (`trainable` lists
/// their element counts), and a forward with the loss per extra pass.
pub fn step_kernels(layer: &Layer, step: &StepShape, trainable: &[f64]) -> Vec<Kernel> {
    let r = step.batch * step.seq;
    let mut fwd = Vec::new();
    let out = forward(layer, step, None, false, &mut fwd);
    let width = out.unwrap_or(1.0);
    let mut loss = Vec::new();
    loss_kernels(step.loss, r, width, true, &mut loss);
    let mut bwd = Vec::new();
    backward(layer, step, None, true, &mut bwd);
    let mut all = fwd.clone();
    all.extend(loss);
    all.extend(bwd.into_iter().rev());
    for &n in trainable {
        all.push(if step.slots >= 2.0 {
            mem("adam_update", 4.0 * n, 3.0 * n)
        } else {
            mem("momentum_update", 3.0 * n, 2.0 * n)
        });
    }
    for _ in 1..step.forwards.max(1.0) as usize {
        all.extend(fwd.iter().copied());
        loss_kernels(step.loss, r, width, false, &mut all);
    }
    all
}

/// The forward kernels of the loss over `[r, width]` outputs; `grad` when the
/// backward pass follows.
fn loss_kernels(loss: LossKind, r: f64, width: f64, grad: bool, out: &mut Vec<Kernel>) {
    let n = r * width;
    match loss {
        LossKind::CrossEntropy => {
            // An exponential per logit and a logarithm per row.
            out.push(
                mem("cross_entropy", n + r, if grad { n + 1.0 } else { 1.0 })
                    .with_evals(Transcendental::Exp, n + r)
                    .per_row(r),
            );
            if grad {
                out.push(mem("upload", 0.0, 1.0));
                out.push(mem("binary", n, n));
            }
        }
        LossKind::Other => {
            out.push(mem("binary", 2.0 * n, n));
            out.push(mem("binary", 2.0 * n, n));
            out.push(mem("reduce", n, 1.0));
            if grad {
                out.push(mem("upload", 0.0, 1.0));
                out.push(mem("binary", n, n));
                out.push(mem("binary", 2.0 * n, n));
            }
        }
    }
}

/// Appends the forward kernels of `layer` for a width `w` entering it (`None`
/// before any layer that fixes one; `fused` when the previous kernel was a
/// biased `linear` whose activation this layer is) and returns the width
/// leaving it.
fn forward(
    layer: &Layer,
    st: &StepShape,
    w: Option<f64>,
    fused: bool,
    out: &mut Vec<Kernel>,
) -> Option<f64> {
    let (b, s) = (st.batch, st.seq);
    let r = b * s;
    let width = w.unwrap_or(0.0);
    match layer {
        Layer::Linear(l) => {
            let (i, o) = (l.inp as f64, l.out as f64);
            out.push(gemm("matmul", 1.0, r, i, o));
            if l.bias {
                out.push(mem("binary", r * o + o, r * o));
            }
            Some(o)
        }
        Layer::Lora(l) => {
            // x·W, then (x·A)·B scaled by alpha / r and added (nn/apply.rs).
            let (i, o, k) = (l.base.inp as f64, l.base.out as f64, l.rank as f64);
            out.push(gemm("matmul", 1.0, r, i, o));
            out.push(gemm("matmul", 1.0, r, i, k));
            out.push(gemm("matmul", 1.0, r, k, o));
            out.push(mem("binary", r * o, r * o));
            out.push(mem("binary", 2.0 * r * o, r * o));
            if l.base.bias {
                out.push(mem("binary", r * o + o, r * o));
            }
            Some(o)
        }
        Layer::Activation(a) => {
            if !fused {
                let name = if matches!(a, Activation::Softmax) {
                    "softmax"
                } else {
                    "unary"
                };
                let k = mem(name, r * width, r * width).evaluating(Transcendental::forward_of(*a));
                out.push(if name == "softmax" { k.per_row(r) } else { k });
            }
            w
        }
        Layer::Embed(e) => {
            out.push(mem("gather_rows", 2.0 * r * e.d as f64, r * e.d as f64));
            Some(e.d as f64)
        }
        Layer::Unembed(e) => {
            let (d, v) = (e.d as f64, e.vocab as f64);
            out.push(gemm_tb(r, d, v));
            Some(v)
        }
        Layer::PosEmbed(p) => {
            let d = p.d as f64;
            out.push(mem("binary", 2.0 * r * d, r * d));
            Some(d)
        }
        Layer::RmsNorm(n) => {
            let d = w.unwrap_or(n.dim as f64);
            out.push(
                mem("rms_norm", r * d, r * d + r)
                    .with_evals(Transcendental::Exp, r)
                    .per_row(r),
            );
            if n.gain.is_some() {
                out.push(mem("binary", r * d + d, r * d));
            }
            Some(d)
        }
        Layer::LayerNorm(n) => {
            let d = w.unwrap_or(n.d as f64);
            out.push(
                mem("layer_norm", r * d, r * d + 2.0 * r)
                    .with_evals(Transcendental::Exp, r)
                    .per_row(r),
            );
            out.push(mem("binary", r * d + d, r * d));
            out.push(mem("binary", r * d + d, r * d));
            Some(d)
        }
        Layer::Dropout(_) => {
            out.push(mem("binary", 2.0 * r * width, r * width));
            out.push(mem("binary", 2.0 * r * width, r * width));
            w
        }
        Layer::Rope(_) => {
            for _ in 0..4 {
                out.push(mem("binary", 2.0 * r * width, r * width));
            }
            w
        }
        Layer::Attention(a) => {
            let (d, h, kv, hd, q) = attention_sizes(a);
            out.push(gemm("matmul", 1.0, r, d, q));
            out.push(gemm("matmul", 1.0, r, d, kv * hd));
            out.push(gemm("matmul", 1.0, r, d, kv * hd));
            if a.bias {
                out.push(mem("binary", r * q, r * q));
                out.push(mem("binary", r * kv * hd, r * kv * hd));
                out.push(mem("binary", r * kv * hd, r * kv * hd));
            }
            if a.rope.is_some() {
                for _ in 0..8 {
                    out.push(mem("binary", 2.0 * r * q, r * q));
                }
            }
            out.push(mem("permute", r * q, r * q));
            out.push(mem("permute", r * kv * hd, r * kv * hd));
            out.push(mem("permute", r * kv * hd, r * kv * hd));
            if fused_attention(s) {
                // Scores and weighted values tile by tile; out and lse written.
                out.push(Kernel {
                    name: "attention",
                    work: attention_work(a, b, s, false),
                    out_elems: r * q + b * h * s,
                    evals: b * h * attention_pairs(a, s),
                    func: Transcendental::Exp,
                    rows: 0.0,
                });
            } else {
                // q·kᵀ, the keys read transposed in place.
                out.push(gemm_laid_out(
                    "matmul_t",
                    b * h,
                    s,
                    hd,
                    s,
                    GemmLayout::TransposedB,
                ));
                let scores = b * h * s * s;
                out.push(
                    mem(
                        if a.causal {
                            "masked_softmax"
                        } else {
                            "softmax"
                        },
                        scores,
                        scores,
                    )
                    .with_evals(Transcendental::Exp, scores)
                    .per_row(b * h * s),
                );
                out.push(gemm("matmul", b * h, s, s, hd));
            }
            out.push(mem("permute", r * q, r * q));
            out.push(gemm("matmul", 1.0, r, q, d));
            if a.bias {
                out.push(mem("binary", r * d, r * d));
            }
            Some(d)
        }
        Layer::SwiGlu(sw) => {
            let (d, hid) = (sw.d as f64, sw.hidden as f64);
            out.push(gemm("matmul", 1.0, r, d, hid));
            out.push(gemm("matmul", 1.0, r, d, hid));
            out.push(mem("unary", r * hid, r * hid).with_evals(Transcendental::Silu, r * hid));
            out.push(mem("binary", 2.0 * r * hid, r * hid));
            out.push(gemm("matmul", 1.0, r, hid, d));
            Some(d)
        }
        Layer::Moe(m) => {
            // Only the routed rows reach the experts (nn/moe.rs), laid out per
            // block of tokens and expert, padded to the busiest expert's count
            // ([`moe_layout`]): `pos` positions, C·E products of `width` rows.
            let (d, e, hid) = (m.d as f64, m.experts as f64, m.hidden as f64);
            let rk = r * m.top_k as f64;
            let (blocks, width) = moe_layout(r, m.experts, m.top_k);
            let (be, pos) = (blocks * e, blocks * e * width);
            let biases = if m.bias { 1.0 } else { 0.0 };
            out.push(gemm("matmul", 1.0, r, d, e));
            if m.bias {
                out.push(mem("binary", 2.0 * r * e, r * e));
            }
            out.push(
                mem("softmax", r * e, r * e)
                    .with_evals(Transcendental::Exp, r * e)
                    .per_row(r),
            );
            out.push(mem("binary", 2.0 * r * e, r * e));
            if m.softmax_after {
                out.push(mem("binary", 2.0 * r * e, r * e));
                out.push(
                    mem("softmax", r * e, r * e)
                        .with_evals(Transcendental::Exp, r * e)
                        .per_row(r),
                );
            } else if m.top_k >= 2 {
                out.push(mem("reduce", r * e, r));
                out.push(mem("binary", 2.0 * r * e, r * e));
            }
            for _ in 0..2 {
                out.push(mem("gather_rows", pos * d, pos * d));
                out.push(gemm("matmul", be, width, d, hid));
            }
            let gate_passes = match m.gate {
                MoeGate::Silu => 1.0,
                // Two clamps (a max and a min each), ·alpha, g·sigmoid, +1, ·up.
                MoeGate::Clamped { .. } => 8.0,
            };
            let gate = match m.gate {
                MoeGate::Silu => Transcendental::Silu,
                // g·sigmoid(alpha·g): an exponential.
                MoeGate::Clamped { .. } => Transcendental::Exp,
            };
            out.push(mem("unary", pos * hid, pos * hid).with_evals(gate, pos * hid));
            for _ in 0..(gate_passes + 2.0 * biases) as usize {
                out.push(mem("binary", 2.0 * pos * hid, pos * hid));
            }
            out.push(gemm("matmul", be, width, hid, d));
            // The gates of the positions, the gated outputs, each token's sum
            // of its k copies.
            out.push(mem("gather_rows", pos, pos));
            for _ in 0..(1.0 + biases) as usize {
                out.push(mem("binary", 2.0 * pos * d, pos * d));
            }
            out.push(mem("gather_rows", rk * d, rk * d));
            out.push(mem("reduce", rk * d, r * d));
            // The load-balancing loss.
            out.push(mem("reduce", r * e, e));
            out.push(mem("binary", 2.0 * e, e));
            out.push(mem("reduce", e, 1.0));
            Some(d)
        }
        Layer::Chain(children) => {
            let mut w = w;
            let mut prev_biased_linear = false;
            for ch in children {
                let fuse = prev_biased_linear
                    && matches!(**ch, Layer::Activation(a) if a != Activation::Softmax);
                if fuse {
                    // The linear's bias add and this activation are one `bias_act`.
                    if let (Some(k), Layer::Activation(a)) = (out.last_mut(), &**ch) {
                        k.name = "bias_act";
                        *k = k.evaluating(Transcendental::forward_of(*a));
                    }
                }
                w = forward(ch, st, w, fuse, out);
                prev_biased_linear = biased_linear(ch);
            }
            w
        }
        Layer::Residual(inner) => {
            let o = forward(inner, st, w, false, out);
            let d = o.or(w).unwrap_or(0.0);
            out.push(mem("binary", 2.0 * r * d, r * d));
            o.or(w)
        }
        other => generic(other, st, w, out),
    }
}

/// Whether `l` routes rows on the host each step (a mixture of experts): its
/// step's shapes change from step to step, so the step is not captured and its
/// buffers are not reused from one step to the next.
pub fn routes_on_host(l: &Layer) -> bool {
    match l {
        Layer::Moe(_) => true,
        Layer::Chain(ch) => ch.iter().any(|c| routes_on_host(c)),
        Layer::Residual(inner) => routes_on_host(inner),
        _ => false,
    }
}

/// The layout a mixture of experts computes on for `r` tokens (`nn/route.rs`):
/// `C` blocks of up to `KC` tokens (the CPU GEMM's block of `k`), and in each
/// block every expert's tokens padded to `width`, the most any expert gets in
/// any block. Without data to route, each expert's count in a block is taken
/// as binomial (each of the block's `n` tokens picks it with chance k/E, as a
/// router at initialisation does), and `width` as the expected largest of the
/// C·E counts: the mean plus √(2·ln(C·E)) standard deviations, at most `n`.
pub fn moe_layout(r: f64, experts: usize, top_k: usize) -> (f64, f64) {
    let kc = mlpl_devices::cpu::KC as f64;
    let r = r.max(1.0);
    let blocks = (r / kc).ceil().max(1.0);
    let n = r.min(kc);
    let e = experts.max(1) as f64;
    let p = (top_k.min(experts) as f64 / e).min(1.0);
    let sd = (n * p * (1.0 - p)).sqrt();
    let z = (2.0 * math::log(blocks * e)).max(0.0).sqrt();
    let width = (n * p + z * sd).ceil().clamp(1.0, n);
    (blocks, width)
}

/// Layers without a kernel list of their own: their GEMM work from the FLOP
/// formula of `nn::estimate::cost`, one product, plus element-wise passes over
/// their activations.
fn generic(layer: &Layer, st: &StepShape, w: Option<f64>, out: &mut Vec<Kernel>) -> Option<f64> {
    let r = st.batch * st.seq;
    let c = cost(layer, st.batch, st.seq);
    let o = match layer {
        Layer::Engram(g) => Some(g.d as f64),
        _ => w,
    };
    if c.flops > 0.0 {
        let width = o.unwrap_or(1.0).max(1.0);
        out.push(gemm("matmul", 1.0, r, c.flops / (2.0 * r * width), width));
    }
    let act = c.activations * r;
    out.push(mem("binary", act, act));
    o
}

/// Appends the backward kernels of `layer` in forward order (the caller
/// reverses the whole list); `first` when no gradient flows to the input.
fn backward(
    layer: &Layer,
    st: &StepShape,
    w: Option<f64>,
    first: bool,
    out: &mut Vec<Kernel>,
) -> Option<f64> {
    let (b, s) = (st.batch, st.seq);
    let r = b * s;
    let width = w.unwrap_or(0.0);
    match layer {
        Layer::Linear(l) => {
            let (i, o) = (l.inp as f64, l.out as f64);
            // Reversed later: dW = xᵀ·g, then dx = g·Wᵀ, then the bias sum.
            out.push(gemm_ta(i, r, o));
            if !first {
                out.push(gemm_tb(r, o, i));
            }
            if l.bias {
                out.push(mem("sum_to_shape", r * o, o));
            }
            Some(o)
        }
        Layer::Lora(l) => {
            // Reversed later: the base's dW and dx, the scale's gradient, dB and
            // d(x·A), dA and the adapters' dx, the two dx summed, the bias sum.
            let (i, o, k) = (l.base.inp as f64, l.base.out as f64, l.rank as f64);
            out.push(gemm_ta(i, r, o));
            if !first {
                out.push(gemm_tb(r, o, i));
            }
            out.push(mem("binary", r * o, r * o));
            out.push(gemm_ta(k, r, o));
            out.push(gemm_tb(r, o, k));
            out.push(gemm_ta(i, r, k));
            if !first {
                out.push(gemm_tb(r, k, i));
                out.push(mem("binary", 2.0 * r * i, r * i));
            }
            if l.base.bias {
                out.push(mem("sum_to_shape", r * o, o));
            }
            Some(o)
        }
        Layer::Activation(a) => {
            out.push(
                mem("binary", 2.0 * r * width, r * width)
                    .evaluating(Transcendental::backward_of(*a)),
            );
            out.push(mem("binary", 2.0 * r * width, r * width));
            w
        }
        Layer::Embed(e) => {
            out.push(mem("scatter_add_rows", r * e.d as f64 + r, r * e.d as f64));
            Some(e.d as f64)
        }
        Layer::Unembed(e) => {
            let (d, v) = (e.d as f64, e.vocab as f64);
            out.push(gemm_ta(v, r, d));
            out.push(gemm_tb(r, v, d));
            Some(v)
        }
        Layer::PosEmbed(p) => {
            let d = p.d as f64;
            out.push(mem("sum_to_shape", r * d, s * d));
            Some(d)
        }
        Layer::RmsNorm(n) => {
            let d = w.unwrap_or(n.dim as f64);
            out.push(mem("rms_norm_backward", 3.0 * r * d, r * d).per_row(r));
            if n.gain.is_some() {
                out.push(mem("sum_to_shape", r * d, d));
                out.push(mem("binary", 2.0 * r * d, r * d));
                out.push(mem("binary", r * d + d, r * d));
            }
            Some(d)
        }
        Layer::LayerNorm(n) => {
            let d = w.unwrap_or(n.d as f64);
            out.push(mem("layer_norm_backward", 3.0 * r * d, r * d).per_row(r));
            out.push(mem("sum_to_shape", r * d, d));
            out.push(mem("binary", 2.0 * r * d, r * d));
            out.push(mem("binary", r * d + d, r * d));
            out.push(mem("sum_to_shape", r * d, d));
            Some(d)
        }
        Layer::Dropout(_) => {
            out.push(mem("binary", 2.0 * r * width, r * width));
            w
        }
        Layer::Rope(_) => {
            for _ in 0..4 {
                out.push(mem("binary", 2.0 * r * width, r * width));
            }
            w
        }
        Layer::Attention(a) => {
            let (d, h, kv, hd, q) = attention_sizes(a);
            let scores = b * h * s * s;
            // In forward order; reversed with the rest.
            out.push(mem("binary", 2.0 * r * d, r * d));
            out.push(mem("binary", 2.0 * r * d, r * d));
            for n in [q, kv * hd, kv * hd] {
                out.push(gemm_ta(d, r, n));
                out.push(gemm_tb(r, n, d));
            }
            if a.bias {
                for n in [q, kv * hd, kv * hd] {
                    out.push(mem("sum_to_shape", r * n, n));
                }
            }
            if a.rope.is_some() {
                for _ in 0..8 {
                    out.push(mem("binary", 2.0 * r * q, r * q));
                }
            }
            if fused_attention(s) {
                for n in [q, kv * hd, kv * hd] {
                    out.push(mem("permute", r * n, r * n));
                }
                // Scores and dP recomputed twice (dq, then dk and dv), and the
                // three gradient products; dq, dk, dv written.
                out.push(Kernel {
                    name: "attention_backward",
                    work: attention_work(a, b, s, true),
                    out_elems: r * q + 2.0 * r * kv * hd,
                    // Probabilities recomputed twice from the logsumexp.
                    evals: 2.0 * b * h * attention_pairs(a, s),
                    func: Transcendental::Exp,
                    rows: 0.0,
                });
            } else {
                for n in [q, kv * hd, kv * hd] {
                    out.push(mem("permute", r * n, r * n));
                }
                // The per-head products' gradients: two before the softmax's
                // backward (one of each transposed layout) and two after it,
                // dq = dS·k plain and dk = dSᵀ·q.
                let per_head = |m, k, n, layout| gemm_laid_out("matmul_t", b * h, m, k, n, layout);
                out.push(per_head(s, hd, s, GemmLayout::TransposedB));
                out.push(per_head(hd, s, s, GemmLayout::TransposedA));
                out.push(
                    mem(
                        if a.causal {
                            "masked_softmax_backward"
                        } else {
                            "softmax_backward"
                        },
                        2.0 * scores,
                        scores,
                    )
                    .per_row(b * h * s),
                );
                out.push(gemm("matmul", b * h, s, s, hd));
                out.push(per_head(s, s, hd, GemmLayout::TransposedA));
            }
            out.push(mem("permute", r * q, r * q));
            out.push(gemm_ta(q, r, d));
            out.push(gemm_tb(r, d, q));
            if a.bias {
                out.push(mem("sum_to_shape", r * d, d));
            }
            Some(d)
        }
        Layer::SwiGlu(sw) => {
            let (d, hid) = (sw.d as f64, sw.hidden as f64);
            for _ in 0..2 {
                out.push(gemm_ta(d, r, hid));
                out.push(gemm_tb(r, hid, d));
            }
            out.push(mem("binary", 2.0 * r * d, r * d));
            // The product's two gradients (gate·up), then SiLU's derivative
            // at the gate (autograd's `unary_backward`: one kernel).
            for _ in 0..2 {
                out.push(mem("binary", 2.0 * r * hid, r * hid));
            }
            out.push(
                mem("unary_backward", 2.0 * r * hid, r * hid)
                    .with_evals(Transcendental::SiluBackward, r * hid),
            );
            out.push(gemm_ta(hid, r, d));
            out.push(gemm_tb(r, d, hid));
            Some(d)
        }
        Layer::Moe(m) => {
            // The routed positions only (see the forward arm). The extra
            // element-wise passes of GPT-OSS's clamped gate are not counted here.
            let (d, e, hid) = (m.d as f64, m.experts as f64, m.hidden as f64);
            let rk = r * m.top_k as f64;
            let (blocks, width) = moe_layout(r, m.experts, m.top_k);
            let (be, pos) = (blocks * e, blocks * e * width);
            if m.bias {
                out.push(mem("sum_to_shape", r * e, e));
                out.push(mem("sum_to_shape", pos * hid, e * hid));
                out.push(mem("sum_to_shape", pos * hid, e * hid));
                out.push(mem("sum_to_shape", pos * d, e * d));
            }
            out.push(gemm_ta(d, r, e));
            if !first {
                out.push(gemm_tb(r, e, d));
            }
            out.push(mem("softmax_backward", 2.0 * r * e, r * e).per_row(r));
            out.push(mem("binary", 2.0 * r * e, r * e));
            // Each token's sum back to its copies (expanded when k ≥ 2) and
            // into the positions; the gates' and outputs' gradients.
            if m.top_k >= 2 {
                out.push(mem("binary", rk * d, rk * d));
            }
            out.push(mem("scatter_add_rows", rk * d, pos * d));
            for _ in 0..2 {
                out.push(mem("binary", 2.0 * pos * d, pos * d));
            }
            out.push(mem("sum_to_shape", pos * d, pos));
            out.push(mem("scatter_add_rows", pos, r * e));
            // Weight gradients sum each expert's positions over the blocks.
            // An expert's weight gradient (its positions over the blocks)
            // and a block's input gradient.
            let weight_grad =
                |i, o| gemm_laid_out("matmul_t", e, i, blocks * width, o, GemmLayout::TransposedA);
            let input_grad =
                |i, o| gemm_laid_out("matmul_t", be, width, i, o, GemmLayout::TransposedB);
            out.push(weight_grad(hid, d));
            out.push(input_grad(d, hid));
            for _ in 0..2 {
                out.push(mem("binary", 2.0 * pos * hid, pos * hid));
            }
            let gate = match m.gate {
                MoeGate::Silu => Transcendental::SiluBackward,
                MoeGate::Clamped { .. } => Transcendental::Exp,
            };
            out.push(mem("unary_backward", 2.0 * pos * hid, pos * hid).with_evals(gate, pos * hid));
            for _ in 0..2 {
                out.push(weight_grad(d, hid));
                if !first {
                    out.push(input_grad(hid, d));
                    // Each token's copies summed (`dispatch`).
                    out.push(mem("gather_rows", rk * d, rk * d));
                    out.push(mem("reduce", rk * d, r * d));
                }
            }
            if !first {
                for _ in 0..2 {
                    out.push(mem("binary", 2.0 * r * d, r * d));
                }
            }
            Some(d)
        }
        Layer::Chain(children) => {
            let mut w = w;
            let mut first = first;
            let mut prev_biased_linear = false;
            for ch in children {
                let fuse = prev_biased_linear
                    && matches!(**ch, Layer::Activation(a) if a != Activation::Softmax);
                if fuse && matches!(**ch, Layer::Activation(Activation::Relu)) {
                    // ReLU is differentiated from its output alone
                    // (`unary_backward`), before the linear's bias sum.
                    if let Some(sum) = out.pop() {
                        let n = sum.out_elems * r;
                        out.push(mem("unary_backward", 2.0 * n, n));
                        out.push(sum);
                    }
                } else if fuse {
                    // `bias_act_backward` replaces the activation's backward and
                    // the bias sum of the linear before it.
                    if let (Some(k), Layer::Activation(a)) = (out.last_mut(), &**ch) {
                        let n = k.out_elems * r;
                        let fused = mem("bias_act_backward", 3.0 * n, n + k.out_elems);
                        *k = match Transcendental::backward_of(*a) {
                            Some(f) => fused.with_evals(f, n),
                            None => fused,
                        };
                    }
                    // An activation keeps the width.
                } else {
                    w = backward(ch, st, w, first, out);
                }
                first &= !has_params(ch);
                prev_biased_linear = biased_linear(ch);
            }
            w
        }
        Layer::Residual(inner) => {
            let o = backward(inner, st, w, first, out);
            let d = o.or(w).unwrap_or(0.0);
            out.push(mem("binary", 2.0 * r * d, r * d));
            o.or(w)
        }
        other => {
            let mut tmp = Vec::new();
            let o = generic(other, st, w, &mut tmp);
            for k in tmp {
                out.push(k);
                out.push(k);
            }
            o
        }
    }
}

/// Whether `l` is a (LoRA-wrapped) linear layer with a bias, whose bias add
/// fuses with an activation after it (`bias_act`).
fn biased_linear(l: &Layer) -> bool {
    match l {
        Layer::Linear(l) => l.bias,
        Layer::Lora(l) => l.base.bias,
        _ => false,
    }
}

fn has_params(l: &Layer) -> bool {
    !l.param_specs().is_empty()
}

/// Sums of a kernel list: count, GEMM FLOPs, bytes of the memory-bound
/// kernels and elements of all outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    /// Kernel calls.
    pub kernels: f64,
    /// GEMM FLOPs.
    pub flops: f64,
    /// Bytes moved by the memory-bound kernels.
    pub bytes: f64,
    /// Output elements of all kernels.
    pub out_elems: f64,
}

/// The [`Totals`] of `ks`.
pub fn totals(ks: &[Kernel]) -> Totals {
    let mut t = Totals::default();
    for k in ks {
        t.kernels += 1.0;
        t.flops += k.flops();
        if let Work::Memory { bytes } = k.work {
            t.bytes += bytes;
        }
        t.out_elems += k.out_elems;
    }
    t
}
