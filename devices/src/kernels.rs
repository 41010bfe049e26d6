//! The kernel table: every kernel of the [`Backend`] trait, declared once.
//!
//! Each entry is the trait method (docs, signature, default body where it has
//! one) and, after `=>`, what a recorded call of it stores and the element
//! counts of its outputs. [`declare_backend!`](crate::declare) generates from
//! it the trait, the recorded [`Op`], the capture `Recorder`, `Unfused` and the
//! replay, so a new kernel is one entry here, and every device then fails to
//! compile until it implements it.

use crate::attention::{self, AttentionDims, AttentionSpec};
use crate::backend::{composed, AdamStep, BinaryOp, DropoutKey, ReduceOp, UnaryOp};
use crate::shape::{broadcast_shapes, reduced_shape, rows_of};
use crate::tensor::Tensor;

declare_backend! {
    /// Copy host data to this device (identity on the CPU, still counted as 0 uploads there).
    kernel fn upload(&self, t: &Tensor) -> Result<Tensor>
        => Upload [t]
        sizes(ins) { vec![n(ins[0])] };

    /// Copy a tensor to host memory (identity on the CPU, counted as 0 downloads there).
    kernel fn download(&self, t: &Tensor) -> Result<Tensor>
        => Download [t]
        sizes(ins) { vec![n(ins[0])] };

    /// Applies an element-wise function; the result has `x`'s shape.
    kernel fn unary(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor>
        => Unary { op: UnaryOp } [x]
        sizes(ins) { vec![n(ins[0])] };

    /// NumPy-broadcasting binary op; the result has shape `broadcast_shapes(a, b)`.
    /// `Gt`/`Lt` give 1.0/0.0. `Eq` gives 1.0 where `|a-b| < 2^-52` computed in f64 (LANGUAGE §10.3).
    /// `Pow` is `powf`. `Max`/`Min` element-wise (NaN propagates).
    kernel fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor>
        => Binary { op: BinaryOp } [a, b]
        sizes(ins) {
            let out = broadcast_shapes(ins[0], ins[1])
                .ok_or_else(|| format!("shapes {:?} and {:?} do not broadcast", ins[0], ins[1]))?;
            vec![n(&out)]
        };

    /// `a: [..., m, k]`, `b: [..., k, n]`, both rank >= 2; leading batch axes broadcast (NumPy).
    /// Result `[batch..., m, n]`.
    kernel fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor>
        => Matmul [a, b]
        sizes(ins) { product_size(ins[0], false, ins[1], false)? };

    /// [`Backend::matmul`] of `a` and `b` with the last two axes of `a` swapped
    /// first when `transpose_a` is set, and likewise for `b`: the products of
    /// matmul's backward pass (`g·bᵀ`, `aᵀ·g`). The default permutes and then
    /// multiplies; a backend whose GEMM reads strided operands skips the copies.
    kernel fn matmul_t(&self, a: &Tensor, b: &Tensor, transpose_a: bool, transpose_b: bool) -> Result<Tensor> {
        composed::matmul_t(self, a, b, transpose_a, transpose_b)
    }
        => MatmulT { transpose_a: bool, transpose_b: bool } [a, b]
        sizes(ins) { product_size(ins[0], *transpose_a, ins[1], *transpose_b)? };

    /// Reduce along `axis` (removed from the shape) or over everything (-> shape `[]`).
    /// Sum of empty = 0, Prod of empty = 1, Mean = sum / max(n,1), Max of empty = -inf
    /// (NaN propagates). Sum/Mean accumulate in f64.
    kernel fn reduce(&self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Result<Tensor>
        => Reduce { op: ReduceOp, axis: Option<usize> } [x]
        sizes(ins) { reduced(ins[0], *axis)? };

    /// Index (as f32) of the first maximum along `axis`, or the row-major flat index over
    /// everything. NaN is treated as never greater.
    kernel fn argmax(&self, x: &Tensor, axis: Option<usize>) -> Result<Tensor>
        => Argmax { axis: Option<usize> } [x]
        sizes(ins) { reduced(ins[0], *axis)? };

    /// `exp(x - max) / sum exp(x - max)` along `axis`.
    kernel fn softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor>
        => Softmax { axis: usize } [x]
        sizes(ins) { axis_ok(ins[0], *axis)?; vec![n(ins[0])] };

    /// `x - max - log sum exp(x - max)` along `axis`.
    kernel fn log_softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor>
        => LogSoftmax { axis: usize } [x]
        sizes(ins) { axis_ok(ins[0], *axis)?; vec![n(ins[0])] };

    /// `log Σ exp(x)` along `axis`, which is removed from the shape: the axis
    /// maximum plus the log of Σ exp(x − max), summed in f64 (the shift
    /// `log_softmax` subtracts, so `log_softmax(x) = x − logsumexp(x)`).
    kernel fn logsumexp(&self, x: &Tensor, axis: usize) -> Result<Tensor>
        => LogSumExp { axis: usize } [x]
        sizes(ins) { reduced(ins[0], Some(*axis))? };

    /// Given `y = softmax(x)` along `axis` and `dy`, returns `dx = y * (dy - sum(dy*y, axis))`.
    kernel fn softmax_backward(&self, y: &Tensor, dy: &Tensor, axis: usize) -> Result<Tensor>
        => SoftmaxBackward { axis: usize } [y, dy]
        sizes(ins) {
            axis_ok(ins[0], *axis)?;
            same_shapes(ins)?;
            vec![n(ins[0])]
        };

    /// `logits [N, V]`, `targets [N]` (integer-valued f32, validated by the caller). Fused:
    /// returns (loss scalar `[]` = `mean_r (logsumexp(l_r) - l_r[t_r])`,
    /// dlogits `[N, V]` = `(softmax - onehot) / N`). `want_grad = false` skips the
    /// gradient (returns `None`). Leading axes of a rank > 2 `logits` are flattened into rows.
    kernel fn cross_entropy(&self, logits: &Tensor, targets: &Tensor, want_grad: bool) -> Result<(Tensor, Option<Tensor>)>
        => CrossEntropy { want_grad: bool } [logits, targets]
        sizes(ins) {
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
        };

    /// General axis permutation: result axis `i` is input axis `perm[i]`.
    kernel fn permute(&self, x: &Tensor, perm: &[usize]) -> Result<Tensor>
        => Permute { perm: Vec<usize> } [x]
        sizes(ins) {
            let mut seen = vec![false; perm.len()];
            let ok = perm.len() == ins[0].len()
                && perm.iter().all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
            if !ok {
                return Err(format!("{perm:?} does not permute the axes of {:?}", ins[0]));
            }
            vec![n(ins[0])]
        };

    /// Rows of `table [V, d]` selected by integer-valued `ids` (any shape, validated by the
    /// caller) -> `[ids.shape..., d]`.
    kernel fn gather_rows(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor>
        => GatherRows [table, ids]
        sizes(ins) {
            match ins[0] {
                &[_, d] => vec![n(ins[1]) * d],
                t => return Err(format!("table {t:?} is not [V, d]")),
            }
        };

    /// `out [vocab, d]` zeros, `out[ids[i]] += src[i]` (`src` is `[ids.numel(), d]` or
    /// `[ids.shape..., d]`). Rows are summed in index order (deterministic).
    kernel fn scatter_add_rows(&self, ids: &Tensor, src: &Tensor, vocab: usize) -> Result<Tensor>
        => ScatterAddRows { vocab: usize } [ids, src]
        sizes(ins) {
            let d = ins[1].last().copied().unwrap_or(0);
            if ins[1].is_empty() || n(ins[1]) != n(ins[0]) * d {
                return Err(format!("src {:?} is not one row per id of {:?}", ins[1], ins[0]));
            }
            vec![vocab * d]
        };

    // Engram conditional memory (docs/language.md, "Engram conditional memory").

    /// Engram's hashed n-gram rows: `ids [.., T]` (integer-valued, validated by
    /// the caller; sequences along the last axis) -> `[.., T, orders.len()·heads]`
    /// where element `(t, o·heads + h)` is
    /// [`engram::row`](crate::engram::row)`(ids, t, orders[o], o·heads + h,
    /// key(seed, orders[o], h), rows)`: the row of slot `o·heads + h`'s block of
    /// `rows` rows in one table of `orders.len()·heads·rows` rows.
    kernel fn engram_hash(&self, ids: &Tensor, orders: &[usize], heads: usize, rows: usize, seed: u64) -> Result<Tensor>
        => EngramHash { orders: Vec<usize>, heads: usize, rows: usize, seed: u64 } [ids]
        sizes(ins) {
            if ins[0].is_empty() || orders.contains(&0) || *rows == 0 {
                return Err(format!("engram_hash of ids {:?} with orders {orders:?} and {rows} rows", ins[0]));
            }
            vec![n(ins[0]) * orders.len() * heads]
        };

    /// Short causal depthwise convolution along the second-to-last axis:
    /// `x [.., T, C]`, `w [K, C]` -> `y [.., T, C]` with
    /// `y[t, c] = Σ_{j<K, j≤t} w[j, c]·x[t−j, c]`, the exact products summed in
    /// f64 for j ascending and rounded once to f32.
    kernel fn causal_conv(&self, x: &Tensor, w: &Tensor) -> Result<Tensor>
        => CausalConv [x, w]
        sizes(ins) { conv_operands(ins)?; vec![n(ins[0])] };

    /// Gradients of [`Backend::causal_conv`] given `dy` (`x`'s shape): `dx`
    /// (`dx[t, c] = Σ_j w[j, c]·dy[t+j, c]`, j ascending) and `dw`
    /// (`dw[j, c] = Σ_{.., t≥j} dy[t, c]·x[t−j, c]`, leading rows then t
    /// ascending), each summed in f64 and rounded once.
    kernel fn causal_conv_backward(&self, x: &Tensor, w: &Tensor, dy: &Tensor) -> Result<(Tensor, Tensor)>
        => CausalConvBackward [x, w, dy]
        sizes(ins) {
            conv_operands(ins)?;
            if ins[2] != ins[0] {
                return Err(format!("dy {:?} is not x's shape {:?}", ins[2], ins[0]));
            }
            vec![n(ins[0]), n(ins[1])]
        };

    /// Sum a broadcast gradient `g` back down to `shape` (sum over stretched axes and missing leading axes).
    kernel fn sum_to_shape(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor>
        => SumToShape { shape: Vec<usize> } [g]
        sizes(ins) {
            let g = ins[0];
            let fits = shape.len() <= g.len()
                && shape.iter().zip(&g[g.len() - shape.len()..]).all(|(&t, &d)| t == d || t == 1);
            if !fits {
                return Err(format!("{shape:?} does not broadcast to {g:?}"));
            }
            vec![n(shape)]
        };

    /// RMS norm over the last axis: `y = x / sqrt(mean(x^2) + eps)`. Returns `(y, inv_rms [rows])`.
    kernel fn rms_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor)>
        => RmsNorm { eps: f32 } [x]
        sizes(ins) { vec![n(ins[0]), rows(ins[0])] };

    /// Gradient of [`Backend::rms_norm`] with respect to `x`, given the saved `inv_rms` and `dy`.
    kernel fn rms_norm_backward(&self, x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Result<Tensor>
        => RmsNormBackward [x, inv_rms, dy]
        sizes(ins) { norm_backward(ins)? };

    /// Layer norm over the last axis without affine: `y = (x-mu)/sqrt(var+eps)` (biased
    /// variance). Returns `(y, mean [rows], inv_std [rows])`.
    kernel fn layer_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor, Tensor)>
        => LayerNorm { eps: f32 } [x]
        sizes(ins) { vec![n(ins[0]), rows(ins[0]), rows(ins[0])] };

    /// Gradient of [`Backend::layer_norm`] with respect to `x`, given the saved `mean`, `inv_std` and `dy`.
    kernel fn layer_norm_backward(&self, x: &Tensor, mean: &Tensor, inv_std: &Tensor, dy: &Tensor) -> Result<Tensor>
        => LayerNormBackward [x, mean, inv_std, dy]
        sizes(ins) { norm_backward(ins)? };

    /// Gradient of [`Backend::unary`]: given the input `x`, the output
    /// `y = op(x)` and `dy`, returns `dx` (all of `x`'s shape). The default
    /// composes the derivative from element-wise kernels (the table in the
    /// runtime's autograd element-wise ops); a backend may fuse it into one pass
    /// with the same per-element operations in the same order.
    fused fn unary_backward(&self, op: UnaryOp, x: &Tensor, y: &Tensor, dy: &Tensor) -> Result<Tensor> {
        composed::unary_backward(self, op, x, y, dy)
    }
        => UnaryBackward { op: UnaryOp } [x, y, dy]
        sizes(ins) { same_shapes(ins)?; vec![n(ins[0])] };

    /// `act(x + bias)`: `x` is `[.., n]` and `bias` has `n` elements (shape `[n]`
    /// or `[1, .., n]`), added to every row. The default runs `binary(Add)` then
    /// `unary(act)`; a fused kernel gives the same bits in one pass.
    fused fn bias_act(&self, x: &Tensor, bias: &Tensor, act: UnaryOp) -> Result<Tensor> {
        composed::bias_act(self, x, bias, act)
    }
        => BiasAct { act: UnaryOp } [x, bias]
        sizes(ins) { bias_rows(ins)?; vec![n(ins[0])] };

    /// Gradients of [`Backend::bias_act`] given its inputs, its output `y` and
    /// `dy`: `dx` (`x`'s shape) and, when `want_bias`, `dbias` (`bias`'s shape,
    /// `dx` summed over the rows exactly as [`Backend::sum_to_shape`] sums).
    /// The default recomputes `x + bias` and composes
    /// [`Backend::unary_backward`] and `sum_to_shape`.
    fused fn bias_act_backward(&self, x: &Tensor, bias: &Tensor, y: &Tensor, dy: &Tensor, act: UnaryOp, want_bias: bool) -> Result<(Tensor, Option<Tensor>)> {
        composed::bias_act_backward(self, x, bias, y, dy, act, want_bias)
    }
        => BiasActBackward { act: UnaryOp, want_bias: bool } [x, bias, y, dy]
        sizes(ins) {
            bias_rows(ins)?;
            if *want_bias {
                vec![n(ins[0]), n(ins[1])]
            } else {
                vec![n(ins[0])]
            }
        };

    /// Attention probabilities from scores `x: [.., T, S]` (rank >= 2): softmax
    /// over the last axis of `x / divisor`, where, when `causal`, entries with
    /// column > row are first replaced by [`CAUSAL_FILL`](crate::CAUSAL_FILL). The
    /// default composes `binary(Div)`, the mask (`x·(1 − m) + m·fill`) and
    /// `softmax`; a fused kernel computes the same bits in one pass per row.
    fused fn masked_softmax(&self, x: &Tensor, divisor: f32, causal: bool) -> Result<Tensor> {
        composed::masked_softmax(self, x, divisor, causal)
    }
        => MaskedSoftmax { divisor: f32, causal: bool } [x]
        sizes(ins) {
            if ins[0].is_empty() || (*causal && ins[0].len() < 2) {
                return Err(format!("scores {:?} have too low a rank", ins[0]));
            }
            vec![n(ins[0])]
        };

    /// Gradient of [`Backend::masked_softmax`] with respect to its scores, given
    /// its output `y` and `dy`: `softmax_backward(y, dy)`, zero at the masked
    /// entries, divided by `divisor` (the default composes exactly that).
    fused fn masked_softmax_backward(&self, y: &Tensor, dy: &Tensor, divisor: f32, causal: bool) -> Result<Tensor> {
        composed::masked_softmax_backward(self, y, dy, divisor, causal)
    }
        => MaskedSoftmaxBackward { divisor: f32, causal: bool } [y, dy]
        sizes(ins) { same_shapes(ins)?; vec![n(ins[0])] };

    /// Scaled dot-product attention of queries `q [B, H, T, D]` over keys and
    /// values `k`, `v` `[B, KV, S, D]` (each `H / KV` consecutive query heads
    /// share one key/value head, read in place), masked and scaled as `spec`
    /// says ([`AttentionSpec`]), with each head's sink logit (`sinks [H]`, or
    /// `[0]` for none) joining the softmax's denominator. Returns
    /// `(out [B, H, T, D], lse [B, H, T])`, `lse` the log of each row's
    /// denominator (sink included), which the backward pass recomputes the
    /// probabilities from. The default composes batched products, the mask and
    /// softmax, materialising `[T, S]` per head; the CPU's tiled kernel never
    /// does (its bits differ from the default's in the last places).
    fused fn attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, sinks: &Tensor, spec: AttentionSpec) -> Result<(Tensor, Tensor)> {
        attention::composed_attention(self, q, k, v, sinks, &spec)
    }
        => Attention { spec: AttentionSpec } [q, k, v, sinks]
        sizes(ins) { AttentionDims::of(ins[0], ins[1], ins[2], ins[3], spec)?.forward_sizes() };

    /// Gradients `(dq, dk, dv)` of [`Backend::attention`] (without sinks; the
    /// caller forms a sink's gradient, `−Σ exp(sink − lse)·Σ dout∘out`) given
    /// its inputs, its outputs `out` and `lse` and `dout` (out's shape). The
    /// probabilities are recomputed from `lse`; key and value gradients sum
    /// over the query heads of a group.
    fused fn attention_backward(&self, q: &Tensor, k: &Tensor, v: &Tensor, out: &Tensor, lse: &Tensor, dout: &Tensor, spec: AttentionSpec) -> Result<(Tensor, Tensor, Tensor)> {
        attention::composed_attention_backward(self, q, k, v, out, lse, dout, &spec)
    }
        => AttentionBackward { spec: AttentionSpec } [q, k, v, out, lse, dout]
        sizes(ins) {
            let a = AttentionDims::of(ins[0], ins[1], ins[2], &[0], spec)?;
            if ins[3] != ins[0] || ins[5] != ins[0] || n(ins[4]) != a.b * a.h * a.t {
                return Err(format!(
                    "attention_backward of q {:?} with out {:?}, lse {:?} and dout {:?}",
                    ins[0], ins[3], ins[4], ins[5]
                ));
            }
            a.backward_sizes()
        };

    /// The dropout mask of LANGUAGE §13.7 for an input of `shape`, made on this
    /// device: element i is `1/(1-p)` (as f32) when
    /// `(splitmix64(k + i·0x9E3779B97F4A7C15) >> 11)·2⁻⁵³ >= p`, else 0, with
    /// `k = key.key()` (the layer's stream and the step, [`DropoutKey`]; a replayed
    /// step counts the step on). `None` (the default) means the caller builds
    /// the mask in host memory.
    kernel fn dropout_mask(&self, shape: &[usize], key: DropoutKey, p: f64) -> Result<Option<Tensor>> {
        let _ = (shape, key, p);
        Ok(None)
    }
        => DropoutMask { shape: Vec<usize>, key: DropoutKey, p: f64 } []
        sizes(ins) { vec![n(shape)] };

    // Selection and slicing (`where`, `slice`, axis `concat`).

    /// `a` where `cond` ≠ 0 (NaN counts as true), else `b`; the three operands
    /// broadcast together (NumPy) and the result has their broadcast shape.
    /// Only the chosen operand is read, so an infinite or NaN `b` where `cond`
    /// holds does not reach the result.
    kernel fn select(&self, cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor>
        => Select [cond, a, b]
        sizes(ins) { vec![n(&select_shape(ins)?)] };

    /// The `len` elements `start, start + step, …` of `x` along `axis` (`step`
    /// ≥ 1, every index in range): `x`'s shape with that axis of size `len`.
    kernel fn slice_axis(&self, x: &Tensor, axis: usize, start: usize, step: usize, len: usize) -> Result<Tensor>
        => SliceAxis { axis: usize, start: usize, step: usize, len: usize } [x]
        sizes(ins) {
            let s = ins[0];
            axis_ok(s, *axis)?;
            strided_ok(s[*axis], *start, *step, *len)?;
            vec![n(s) / s[*axis].max(1) * len]
        };

    /// The gradient of [`Backend::slice_axis`]: zeros of `shape` with `g`
    /// written at positions `start, start + step, …` along `axis` (`g` has
    /// `shape` with that axis of `g`'s length). Two such results added are
    /// a concatenation.
    kernel fn unslice_axis(&self, g: &Tensor, shape: &[usize], axis: usize, start: usize, step: usize) -> Result<Tensor>
        => UnsliceAxis { shape: Vec<usize>, axis: usize, start: usize, step: usize } [g]
        sizes(ins) {
            let g = ins[0];
            axis_ok(shape, *axis)?;
            let fits = g.len() == shape.len()
                && g.iter().zip(shape.iter()).enumerate().all(|(i, (a, b))| i == *axis || a == b);
            if !fits {
                return Err(format!("{g:?} is not {shape:?} along axis {axis}"));
            }
            strided_ok(shape[*axis], *start, *step, g[*axis])?;
            vec![n(shape)]
        };

    /// One fused Adam/AdamW step in place: `m = b1 m + (1-b1) g`; `v = b2 v + (1-b2) g^2`;
    /// `p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)` with the constants of
    /// [`AdamStep::constants`]. Copy-on-write: clones of `p`, `m`, `v` taken before the
    /// call keep their old values. Replays of a captured step add one to `step.t`
    /// each run.
    in_place fn adam_update(&self, p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, step: AdamStep) -> Result<()>
        => AdamUpdate { step: AdamStep } [p, g, m, v] -> [p, m, v]
        sizes(ins) {
            if ins.iter().any(|s| n(s) != n(ins[0])) {
                return Err(format!("p, g, m and v sizes differ: {ins:?}"));
            }
            vec![n(ins[0]); 3]
        };
}

impl Op {
    /// Checks that a call of this op with inputs of shapes `ins` and outputs of
    /// shapes `outs` is one the eager kernel accepts and that its outputs have the
    /// element counts the kernel writes, so that building a kernel plan for it
    /// and running it cannot fail.
    pub fn check_output_sizes(&self, ins: &[&[usize]], outs: &[&[usize]]) -> Result<(), String> {
        let expected = self.output_sizes(ins)?;
        let got: Vec<usize> = outs.iter().map(|s| n(s)).collect();
        if got != expected {
            return Err(format!(
                "outputs of {got:?} elements recorded where the kernel writes {expected:?}"
            ));
        }
        Ok(())
    }
}

/// The element count of a shape.
fn n(s: &[usize]) -> usize {
    s.iter().product()
}

/// The rows of a shape whose last axis is the row (1 for a scalar).
fn rows(s: &[usize]) -> usize {
    rows_of(s).0
}

/// `Ok` when `a` is an axis of `s`.
fn axis_ok(s: &[usize], a: usize) -> Result<(), String> {
    if a < s.len() {
        Ok(())
    } else {
        Err(format!("axis {a} is out of range for shape {s:?}"))
    }
}

/// The size of `s` reduced along `axis` (or entirely).
fn reduced(s: &[usize], axis: Option<usize>) -> Result<Vec<usize>, String> {
    if let Some(a) = axis {
        axis_ok(s, a)?;
    }
    Ok(vec![n(&reduced_shape(s, axis))])
}

/// `Ok` when `ins[0]` is `[.., T, C]` (rank >= 2) and `ins[1]` is `[K, C]`.
fn conv_operands(ins: &[&[usize]]) -> Result<(), String> {
    let (x, w) = (ins[0], ins[1]);
    if x.len() < 2 || w.len() != 2 || w[1] != x[x.len() - 1] {
        return Err(format!(
            "causal_conv of x {x:?} with w {w:?} (need [.., T, C] and [K, C])"
        ));
    }
    Ok(())
}

/// `Ok` when every operand has the first one's shape.
fn same_shapes(ins: &[&[usize]]) -> Result<(), String> {
    if ins.iter().any(|s| *s != ins[0]) {
        return Err(format!("the operands' shapes {ins:?} differ"));
    }
    Ok(())
}

/// The gradient of a norm: `x`, one statistic per row for each middle input, and `dy` like `x`.
fn norm_backward(ins: &[&[usize]]) -> Result<Vec<usize>, String> {
    let last = ins.len() - 1;
    let stats_ok = ins[1..last].iter().all(|s| n(s) == rows(ins[0]));
    if !stats_ok || n(ins[last]) != n(ins[0]) {
        return Err(format!(
            "x {:?} and its statistics or dy {:?} differ",
            ins[0],
            &ins[1..]
        ));
    }
    Ok(vec![n(ins[0])])
}

/// `Ok` when `ins[1]` is one row of `ins[0]` and the rest have `ins[0]`'s shape.
fn bias_rows(ins: &[&[usize]]) -> Result<(), String> {
    let (x, b) = (ins[0], ins[1]);
    let fits = x.last().is_some_and(|&w| {
        b.len() <= x.len() && b.last() == Some(&w) && b[..b.len() - 1].iter().all(|&d| d == 1)
    });
    if !fits || ins[2..].iter().any(|s| *s != x) {
        return Err(format!("bias {b:?} is not one row of x {x:?}"));
    }
    Ok(())
}

/// The broadcast shape of the three operands of [`Backend::select`].
pub(crate) fn select_shape(ins: &[&[usize]]) -> Result<Vec<usize>, String> {
    broadcast_shapes(ins[0], ins[1])
        .and_then(|s| broadcast_shapes(&s, ins[2]))
        .ok_or_else(|| format!("shapes {ins:?} do not broadcast"))
}

/// `Ok` when `len` positions from `start` by `step` (≥ 1) lie in an axis of `size`.
fn strided_ok(size: usize, start: usize, step: usize, len: usize) -> Result<(), String> {
    let last = (len > 0).then(|| start + (len - 1) * step);
    if step == 0 || last.is_some_and(|l| l >= size) {
        return Err(format!(
            "{len} positions from {start} by {step} do not fit an axis of {size}"
        ));
    }
    Ok(())
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
