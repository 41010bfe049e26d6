//! The kernels of the MLX backend: each [`Backend`](crate::Backend) kernel as
//! MLX operations on lazy arrays, with the same per-element formulas as the
//! CPU's (sums in f32, so results agree within float32 tolerance, not bit for
//! bit). `dropout_mask` and `engram_hash` are exact: their 64-bit integer
//! hashes run on MLX's `uint64` arrays (`integer`), giving the CPU's bits. A
//! kernel left out here takes the [`CpuFallback`](crate::CpuFallback) path.

use mlx_rs::error::Exception;
use mlx_rs::ops::indexing::{argmax, argmax_axis, take_along_axis};
use mlx_rs::ops::{
    abs, add, concatenate, cos, divide, erf, exp, log, matmul, maximum, minimum, multiply,
    negative, power, select, sigmoid, sin, softmax_axis, sqrt, stack, subtract, tanh,
};
use mlx_rs::{Array, Dtype};

use super::backend::{dims, locked, Fail, MlxBackend};
use crate::backend::{
    composed, AdamConstants, AdamStep, BinaryOp, Counters, DeviceKind, ReduceOp, Result, UnaryOp,
    CAUSAL_FILL,
};
use crate::shape::{reduced_shape, rows_of};
use crate::tensor::Tensor;

/// An MLX result.
type A = std::result::Result<Array, Exception>;

/// A scalar constant (broadcast by MLX, never a counted upload).
fn c(v: f32) -> Array {
    Array::from_f32(v)
}

/// `0..n` as int32 indices, stepping by `step` from `start`.
fn positions(start: usize, step: usize, n: usize) -> Array {
    let idx: Vec<i32> = (0..n).map(|k| (start + k * step) as i32).collect();
    Array::from_slice(&idx, &[n as i32])
}

/// Integer-valued f32 ids as int32.
fn ids(a: &Array) -> A {
    a.as_dtype(Dtype::Int32)
}

/// A boolean (or any) array as f32 0/1.
fn f32s(a: &Array) -> A {
    a.as_dtype(Dtype::Float32)
}

/// The element-wise function `op` (LANGUAGE §10.3).
fn unary_op(op: UnaryOp, x: &Array) -> A {
    match op {
        UnaryOp::Neg => negative(x),
        UnaryOp::Exp => exp(x),
        UnaryOp::Log => log(x),
        UnaryOp::Sqrt => sqrt(x),
        UnaryOp::Abs => abs(x),
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Tanh => tanh(x),
        UnaryOp::Relu => maximum(x, c(0.0)),
        UnaryOp::Gelu => {
            // 0.5·x·(1 + tanh(√(2/π)·(x + κx³))).
            let x3 = multiply(multiply(x, x)?, x)?;
            let inner = multiply(
                add(x, multiply(x3, c(composed::GELU_KAPPA))?)?,
                c(composed::SQRT_2_OVER_PI),
            )?;
            multiply(multiply(x, c(0.5))?, add(tanh(inner)?, c(1.0))?)
        }
        UnaryOp::Silu => multiply(x, sigmoid(x)?),
        UnaryOp::Sin => sin(x),
        UnaryOp::Cos => cos(x),
        UnaryOp::Erf => erf(x),
        UnaryOp::GeluErf => {
            let e = erf(multiply(x, c(composed::FRAC_1_SQRT_2))?)?;
            multiply(multiply(x, c(0.5))?, add(e, c(1.0))?)
        }
    }
}

/// `dx` of `y = op(x)` given `g`: the derivative table of
/// `composed::unary_backward`, as MLX operations.
fn unary_grad(op: UnaryOp, x: &Array, y: &Array, g: &Array) -> A {
    let one_minus = |a: &Array| subtract(c(1.0), a);
    match op {
        UnaryOp::Neg => negative(g),
        UnaryOp::Exp => multiply(g, y),
        UnaryOp::Log => divide(g, x),
        UnaryOp::Sqrt => multiply(divide(g, y)?, c(0.5)),
        UnaryOp::Abs => {
            let sign = subtract(f32s(&x.gt(c(0.0))?)?, f32s(&x.lt(c(0.0))?)?)?;
            multiply(g, sign)
        }
        UnaryOp::Sigmoid => multiply(g, multiply(y, one_minus(y)?)?),
        UnaryOp::Tanh => multiply(g, one_minus(&multiply(y, y)?)?),
        UnaryOp::Relu => multiply(g, f32s(&x.gt(c(0.0))?)?),
        UnaryOp::Gelu => {
            let x2 = multiply(x, x)?;
            let inner = multiply(x, add(multiply(&x2, c(composed::GELU_KAPPA))?, c(1.0))?)?;
            let t = tanh(multiply(inner, c(composed::SQRT_2_OVER_PI))?)?;
            let du = multiply(
                add(multiply(&x2, c(3.0 * composed::GELU_KAPPA))?, c(1.0))?,
                c(composed::SQRT_2_OVER_PI),
            )?;
            let sech2 = one_minus(&multiply(&t, &t)?)?;
            let second = multiply(multiply(x, sech2)?, du)?;
            let d = multiply(add(add(&t, c(1.0))?, second)?, c(0.5))?;
            multiply(g, d)
        }
        UnaryOp::Silu => {
            let s = sigmoid(x)?;
            let d = multiply(&s, add(multiply(x, one_minus(&s)?)?, c(1.0))?)?;
            multiply(g, d)
        }
        UnaryOp::Sin => multiply(g, cos(x)?),
        UnaryOp::Cos => multiply(g, negative(sin(x)?)?),
        UnaryOp::Erf => {
            let e = exp(negative(multiply(x, x)?)?)?;
            multiply(g, multiply(e, c(composed::TWO_OVER_SQRT_PI))?)
        }
        UnaryOp::GeluErf => {
            let e = erf(multiply(x, c(composed::FRAC_1_SQRT_2))?)?;
            let cdf = multiply(add(e, c(1.0))?, c(0.5))?;
            let pdf = multiply(
                exp(multiply(multiply(x, x)?, c(-0.5))?)?,
                c(composed::INV_SQRT_2PI),
            )?;
            multiply(g, add(cdf, multiply(x, pdf)?)?)
        }
    }
}

/// The binary function `op` with NumPy broadcasting.
fn binary_op(op: BinaryOp, a: &Array, b: &Array) -> A {
    match op {
        BinaryOp::Add => add(a, b),
        BinaryOp::Sub => subtract(a, b),
        BinaryOp::Mul => multiply(a, b),
        BinaryOp::Div => divide(a, b),
        BinaryOp::Pow => power(a, b),
        BinaryOp::Gt => f32s(&a.gt(b)?),
        BinaryOp::Lt => f32s(&a.lt(b)?),
        // |a − b| < 2⁻⁵²: for f32 operands the difference is exact where it is that small.
        BinaryOp::Eq => f32s(&abs(subtract(a, b)?)?.lt(c(2f32.powi(-52)))?),
        BinaryOp::Max => maximum(a, b),
        BinaryOp::Min => minimum(a, b),
    }
}

/// `g` summed down to `shape` (over missing leading axes and stretched ones).
fn sum_to(g: &Array, shape: &[usize]) -> A {
    let gs = g.shape().to_vec();
    let lead = gs.len() - shape.len();
    let mut axes: Vec<i32> = (0..lead as i32).collect();
    for (i, &t) in shape.iter().enumerate() {
        if t == 1 && gs[lead + i] != 1 {
            axes.push((lead + i) as i32);
        }
    }
    let summed = if axes.is_empty() {
        g.clone()
    } else {
        g.sum_axes(&axes, true)?
    };
    summed.reshape(&dims(shape))
}

/// The 0/1 (boolean) causal mask of scores `[.., T, S]`: true where column > row.
fn causal_mask(shape: &[i32]) -> A {
    let r = shape.len();
    let (t, s) = (shape[r - 2] as usize, shape[r - 1] as usize);
    let rows = positions(0, 1, t).reshape(&[t as i32, 1])?;
    let cols = positions(0, 1, s).reshape(&[1, s as i32])?;
    cols.gt(rows)
}

/// `x` shifted by `j` along axis `-2` (`x[t − j]`, 0 before the start) from
/// `padded`, which is `x` with `k − 1` zero rows in front.
fn shifted(padded: &Array, k: usize, j: usize, t: usize) -> A {
    let axis = padded.ndim() as i32 - 2;
    padded.take_axis(positions(k - 1 - j, 1, t), axis)
}

/// `x` with `k − 1` zero rows before (`front`) or after it along axis `-2`.
fn pad_rows(x: &Array, k: usize, front: bool) -> A {
    if k <= 1 {
        return Ok(x.clone());
    }
    let mut zshape = x.shape().to_vec();
    let r = zshape.len();
    zshape[r - 2] = (k - 1) as i32;
    let z = Array::zeros::<f32>(&zshape)?;
    let parts = if front {
        [z, x.clone()]
    } else {
        [x.clone(), z]
    };
    concatenate(&parts, r as i32 - 2)
}

/// One Adam/AdamW step (the formulas of
/// [`Backend::adam_update`](crate::Backend::adam_update)) on `[p, g, m, v]`:
/// the new `(p, m, v)`. The bias corrections are arrays, so a compiled step
/// takes them as inputs (they change every step); the other constants are
/// the same every step.
pub(super) fn adam_arrays(
    k: &AdamConstants,
    bc1: &Array,
    bc2: &Array,
    [p, g, m, v]: [&Array; 4],
) -> std::result::Result<(Array, Array, Array), Exception> {
    let m2 = add(multiply(c(k.b1), m)?, multiply(c(1.0 - k.b1), g)?)?;
    let v2 = add(
        multiply(c(k.b2), v)?,
        multiply(multiply(c(1.0 - k.b2), g)?, g)?,
    )?;
    let mhat = divide(&m2, bc1)?;
    let denom = add(sqrt(divide(&v2, bc2)?)?, c(k.eps))?;
    let upd = add(divide(mhat, denom)?, multiply(c(k.wd), p)?)?;
    let p2 = subtract(p, multiply(c(k.lr), upd)?)?;
    Ok((p2, m2, v2))
}

/// Row `j` of `w [K, C]` as `[C]`.
fn row(w: &Array, j: usize) -> A {
    w.take_axis(positions(j, 1, 1), 0)?.reshape(&[w.shape()[1]])
}

impl MlxBackend {
    /// `x` as `[rows, d]` (its last axis the row).
    fn rows(&self, x: &Tensor) -> std::result::Result<(Array, usize), Fail> {
        let (rows, d) = rows_of(x.shape());
        Ok((self.array(x)?.reshape(&[rows as i32, d as i32])?, d))
    }

    /// `a` as `[rows, 1]` (one statistic per row).
    fn per_row(&self, a: &Tensor) -> std::result::Result<Array, Fail> {
        Ok(self.array(a)?.reshape(&[a.numel() as i32, 1])?)
    }

    /// A tensor of `a` reshaped to `shape`.
    fn shaped(&self, a: Array, shape: &[usize]) -> std::result::Result<Tensor, Fail> {
        Ok(self.tensor(a.reshape(&dims(shape))?)?)
    }
}

impl crate::kernels::PartialBackend for MlxBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Mlx
    }

    fn counters(&self) -> Counters {
        self.stats.snapshot()
    }

    fn reset_counters(&self) {
        self.stats.reset()
    }

    fn take_fallbacks(&self) -> Vec<&'static str> {
        self.take_noted_fallbacks()
    }

    fn compile_step(
        &self,
        plan: &crate::capture::StepPlan,
    ) -> Option<Result<Box<dyn crate::capture::StepProgram>>> {
        Some(super::step::compile_step(self, plan))
    }

    fn fell_back(&self, kernel: &'static str) {
        self.note_fallback(kernel)
    }

    fn to_device(&self, t: Tensor) -> Result<Tensor> {
        if t.numel() == 0 {
            return Ok(t);
        }
        locked(|| {
            let a = self.array(&t)?;
            self.tensor(a)
        })
    }

    fn upload(&self, t: &Tensor) -> Option<Result<Tensor>> {
        if t.numel() == 0
            || t.device_buffer()
                .is_some_and(|b| b.as_any().is::<super::buffer::MlxBuffer>())
        {
            return Some(Ok(t.clone()));
        }
        Some(crate::kernels::PartialBackend::to_device(self, t.clone()))
    }

    fn download(&self, t: &Tensor) -> Option<Result<Tensor>> {
        Some(Ok(crate::declare::host_copy(t)))
    }

    fn unary(&self, op: UnaryOp, x: &Tensor) -> Option<Result<Tensor>> {
        self.run("unary", || Ok(self.tensor(unary_op(op, &self.array(x)?)?)?))
    }

    fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Option<Result<Tensor>> {
        self.run("binary", || {
            Ok(self.tensor(binary_op(op, &self.array(a)?, &self.array(b)?)?)?)
        })
    }

    fn matmul(&self, a: &Tensor, b: &Tensor) -> Option<Result<Tensor>> {
        self.run("matmul", || {
            Ok(self.tensor(matmul(self.array(a)?, self.array(b)?)?)?)
        })
    }

    fn matmul_t(
        &self,
        a: &Tensor,
        b: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Option<Result<Tensor>> {
        self.run("matmul_t", || {
            let t = |x: Array, yes: bool| if yes { x.swap_axes(-1, -2) } else { Ok(x) };
            let a = t(self.array(a)?, transpose_a)?;
            let b = t(self.array(b)?, transpose_b)?;
            Ok(self.tensor(matmul(a, b)?)?)
        })
    }

    fn reduce(&self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Option<Result<Tensor>> {
        if x.numel() == 0 {
            let fill = match op {
                ReduceOp::Sum | ReduceOp::Mean => 0.0,
                ReduceOp::Prod => 1.0,
                ReduceOp::Max => f32::NEG_INFINITY,
            };
            return Some(Ok(Tensor::full(reduced_shape(x.shape(), axis), fill)));
        }
        self.run("reduce", || {
            let a = self.array(x)?;
            let r = match (op, axis) {
                (ReduceOp::Sum, Some(ax)) => a.sum_axis(ax as i32, false)?,
                (ReduceOp::Sum, None) => a.sum(false)?,
                (ReduceOp::Prod, Some(ax)) => a.prod_axis(ax as i32, false)?,
                (ReduceOp::Prod, None) => a.prod(false)?,
                (ReduceOp::Mean, Some(ax)) => a.mean_axis(ax as i32, false)?,
                (ReduceOp::Mean, None) => a.mean(false)?,
                (ReduceOp::Max, Some(ax)) => a.max_axis(ax as i32, false)?,
                (ReduceOp::Max, None) => a.max(false)?,
            };
            Ok(self.tensor(r)?)
        })
    }

    fn argmax(&self, x: &Tensor, axis: Option<usize>) -> Option<Result<Tensor>> {
        if x.numel() == 0 {
            return Some(Ok(Tensor::zeros(reduced_shape(x.shape(), axis))));
        }
        self.run("argmax", || {
            let a = self.array(x)?;
            let r = match axis {
                Some(ax) => argmax_axis(&a, ax as i32, false)?,
                None => argmax(&a, false)?,
            };
            Ok(self.tensor(r)?)
        })
    }

    fn softmax(&self, x: &Tensor, axis: usize) -> Option<Result<Tensor>> {
        self.run("softmax", || {
            Ok(self.tensor(softmax_axis(self.array(x)?, axis as i32, true)?)?)
        })
    }

    fn log_softmax(&self, x: &Tensor, axis: usize) -> Option<Result<Tensor>> {
        self.run("log_softmax", || {
            let a = self.array(x)?;
            let lse = a.logsumexp_axis(axis as i32, true)?;
            Ok(self.tensor(subtract(&a, lse)?)?)
        })
    }

    fn logsumexp(&self, x: &Tensor, axis: usize) -> Option<Result<Tensor>> {
        self.run("logsumexp", || {
            Ok(self.tensor(self.array(x)?.logsumexp_axis(axis as i32, false)?)?)
        })
    }

    fn softmax_backward(&self, y: &Tensor, dy: &Tensor, axis: usize) -> Option<Result<Tensor>> {
        self.run("softmax_backward", || {
            let (y, dy) = (self.array(y)?, self.array(dy)?);
            let s = multiply(&dy, &y)?.sum_axis(axis as i32, true)?;
            Ok(self.tensor(multiply(&y, subtract(&dy, s)?)?)?)
        })
    }

    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        want_grad: bool,
    ) -> Option<Result<(Tensor, Option<Tensor>)>> {
        self.run("cross_entropy", || {
            let (l, v) = self.rows(logits)?;
            let rows = l.shape()[0];
            let t = ids(&self.array(targets)?.reshape(&[rows, 1])?)?;
            let lse = l.logsumexp_axis(1, false)?;
            let picked = take_along_axis(&l, &t, 1)?.reshape(&[rows])?;
            let loss = self.tensor(subtract(lse, picked)?.mean(false)?)?;
            let grad = if want_grad {
                let onehot = f32s(&positions(0, 1, v).reshape(&[1, v as i32])?.eq(&t)?)?;
                let g = divide(
                    subtract(softmax_axis(&l, 1, true)?, onehot)?,
                    c(rows.max(1) as f32),
                )?;
                Some(self.shaped(g, logits.shape())?)
            } else {
                None
            };
            Ok((loss, grad))
        })
    }

    fn permute(&self, x: &Tensor, perm: &[usize]) -> Option<Result<Tensor>> {
        self.run("permute", || {
            let p: Vec<i32> = perm.iter().map(|&a| a as i32).collect();
            Ok(self.tensor(self.array(x)?.transpose_axes(&p)?)?)
        })
    }

    fn gather_rows(&self, table: &Tensor, ids_t: &Tensor) -> Option<Result<Tensor>> {
        self.run("gather_rows", || {
            let i = ids(&self.array(ids_t)?)?;
            Ok(self.tensor(self.array(table)?.take_axis(i, 0)?)?)
        })
    }

    fn scatter_add_rows(
        &self,
        ids_t: &Tensor,
        src: &Tensor,
        vocab: usize,
    ) -> Option<Result<Tensor>> {
        let d = src.shape().last().copied().unwrap_or(0);
        if ids_t.numel() == 0 || vocab * d == 0 {
            return Some(Ok(Tensor::zeros(vec![vocab, d])));
        }
        self.run("scatter_add_rows", || {
            let n = ids_t.numel() as i32;
            let i = ids(&self.array(ids_t)?.reshape(&[n])?)?;
            let upd = self.array(src)?.reshape(&[n, 1, d as i32])?;
            let zeros = Array::zeros::<f32>(&[vocab as i32, d as i32])?;
            Ok(self.tensor(mlx_rs::ops::indexing::scatter_add_single(zeros, i, upd, 0)?)?)
        })
    }

    fn causal_conv(&self, x: &Tensor, w: &Tensor) -> Option<Result<Tensor>> {
        self.run("causal_conv", || {
            let (xa, wa) = (self.array(x)?, self.array(w)?);
            let (k, t) = (w.shape()[0], x.shape()[x.rank() - 2]);
            let padded = pad_rows(&xa, k, true)?;
            let mut y = Array::zeros::<f32>(xa.shape())?;
            for j in 0..k {
                y = add(y, multiply(shifted(&padded, k, j, t)?, row(&wa, j)?)?)?;
            }
            Ok(self.tensor(y)?)
        })
    }

    fn causal_conv_backward(
        &self,
        x: &Tensor,
        w: &Tensor,
        dy: &Tensor,
    ) -> Option<Result<(Tensor, Tensor)>> {
        self.run("causal_conv_backward", || {
            let (xa, wa, ga) = (self.array(x)?, self.array(w)?, self.array(dy)?);
            let (k, t) = (w.shape()[0], x.shape()[x.rank() - 2]);
            let axis = xa.ndim() as i32 - 2;
            // dx[t] = Σ_j w[j]·dy[t + j]: dy padded after, read from j.
            let gpad = pad_rows(&ga, k, false)?;
            let mut dx = Array::zeros::<f32>(xa.shape())?;
            for j in 0..k {
                let ahead = gpad.take_axis(positions(j, 1, t), axis)?;
                dx = add(dx, multiply(ahead, row(&wa, j)?)?)?;
            }
            // dw[j] = Σ_{.., t} dy[t]·x[t − j].
            let xpad = pad_rows(&xa, k, true)?;
            let lead: Vec<i32> = (0..xa.ndim() as i32 - 1).collect();
            let mut dws = Vec::with_capacity(k);
            for j in 0..k {
                dws.push(multiply(&ga, shifted(&xpad, k, j, t)?)?.sum_axes(&lead, false)?);
            }
            Ok((self.tensor(dx)?, self.tensor(stack(&dws, 0)?)?))
        })
    }

    fn sum_to_shape(&self, g: &Tensor, shape: &[usize]) -> Option<Result<Tensor>> {
        self.run("sum_to_shape", || {
            Ok(self.tensor(sum_to(&self.array(g)?, shape)?)?)
        })
    }

    fn rms_norm(&self, x: &Tensor, eps: f32) -> Option<Result<(Tensor, Tensor)>> {
        self.run("rms_norm", || {
            let (a, _) = self.rows(x)?;
            let inv = add(multiply(&a, &a)?.mean_axis(1, true)?, c(eps))?.rsqrt()?;
            let rows = a.shape()[0] as usize;
            Ok((
                self.shaped(multiply(&a, &inv)?, x.shape())?,
                self.shaped(inv, &[rows])?,
            ))
        })
    }

    fn rms_norm_backward(
        &self,
        x: &Tensor,
        inv_rms: &Tensor,
        dy: &Tensor,
    ) -> Option<Result<Tensor>> {
        self.run("rms_norm_backward", || {
            let (a, d) = self.rows(x)?;
            let (g, _) = self.rows(dy)?;
            let ri = self.per_row(inv_rms)?;
            let dot = multiply(&a, &g)?.sum_axis(1, true)?;
            let k = divide(multiply(power(&ri, c(3.0))?, dot)?, c(d.max(1) as f32))?;
            let dx = subtract(multiply(&ri, &g)?, multiply(k, &a)?)?;
            self.shaped(dx, x.shape())
        })
    }

    fn layer_norm(&self, x: &Tensor, eps: f32) -> Option<Result<(Tensor, Tensor, Tensor)>> {
        self.run("layer_norm", || {
            let (a, _) = self.rows(x)?;
            let mu = a.mean_axis(1, true)?;
            let xc = subtract(&a, &mu)?;
            let inv = add(multiply(&xc, &xc)?.mean_axis(1, true)?, c(eps))?.rsqrt()?;
            let rows = a.shape()[0] as usize;
            Ok((
                self.shaped(multiply(&xc, &inv)?, x.shape())?,
                self.shaped(mu, &[rows])?,
                self.shaped(inv, &[rows])?,
            ))
        })
    }

    fn layer_norm_backward(
        &self,
        x: &Tensor,
        mean: &Tensor,
        inv_std: &Tensor,
        dy: &Tensor,
    ) -> Option<Result<Tensor>> {
        self.run("layer_norm_backward", || {
            let (a, _) = self.rows(x)?;
            let (g, _) = self.rows(dy)?;
            let (m, s) = (self.per_row(mean)?, self.per_row(inv_std)?);
            let xhat = multiply(subtract(&a, &m)?, &s)?;
            let mg = g.mean_axis(1, true)?;
            let mgx = multiply(&g, &xhat)?.mean_axis(1, true)?;
            let dx = multiply(&s, subtract(subtract(&g, mg)?, multiply(&xhat, mgx)?)?)?;
            self.shaped(dx, x.shape())
        })
    }

    fn unary_backward(
        &self,
        op: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
    ) -> Option<Result<Tensor>> {
        self.run("unary_backward", || {
            let d = unary_grad(op, &self.array(x)?, &self.array(y)?, &self.array(dy)?)?;
            Ok(self.tensor(d)?)
        })
    }

    fn bias_act(&self, x: &Tensor, bias: &Tensor, act: UnaryOp) -> Option<Result<Tensor>> {
        self.run("bias_act", || {
            let pre = add(self.array(x)?, self.array(bias)?)?;
            Ok(self.tensor(unary_op(act, &pre)?)?)
        })
    }

    fn bias_act_backward(
        &self,
        x: &Tensor,
        bias: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        act: UnaryOp,
        want_bias: bool,
    ) -> Option<Result<(Tensor, Option<Tensor>)>> {
        self.run("bias_act_backward", || {
            let pre = add(self.array(x)?, self.array(bias)?)?;
            let dx = unary_grad(act, &pre, &self.array(y)?, &self.array(dy)?)?;
            let dbias = if want_bias {
                Some(self.tensor(sum_to(&dx, bias.shape())?)?)
            } else {
                None
            };
            Ok((self.tensor(dx)?, dbias))
        })
    }

    fn masked_softmax(&self, x: &Tensor, divisor: f32, causal: bool) -> Option<Result<Tensor>> {
        self.run("masked_softmax", || {
            let mut v = divide(self.array(x)?, c(divisor))?;
            if causal {
                v = select(causal_mask(v.shape())?, c(CAUSAL_FILL), &v)?;
            }
            Ok(self.tensor(softmax_axis(v, -1, true)?)?)
        })
    }

    fn masked_softmax_backward(
        &self,
        y: &Tensor,
        dy: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Option<Result<Tensor>> {
        self.run("masked_softmax_backward", || {
            let (y, dy) = (self.array(y)?, self.array(dy)?);
            let s = multiply(&dy, &y)?.sum_axis(-1, true)?;
            let mut d = multiply(&y, subtract(&dy, s)?)?;
            if causal {
                d = select(causal_mask(d.shape())?, c(0.0), &d)?;
            }
            Ok(self.tensor(divide(d, c(divisor))?)?)
        })
    }

    fn dropout_mask(
        &self,
        shape: &[usize],
        key: crate::DropoutKey,
        p: f64,
    ) -> Option<Result<Option<Tensor>>> {
        let n: usize = shape.iter().product();
        if n == 0 {
            return Some(Ok(Some(Tensor::zeros(shape.to_vec()))));
        }
        self.run("dropout_mask", || {
            let mask = super::integer::dropout_mask(n, &super::integer::u64s(key.key()), p)?;
            Ok(Some(self.shaped(mask, shape)?))
        })
    }

    fn engram_hash(
        &self,
        ids_t: &Tensor,
        orders: &[usize],
        heads: usize,
        rows: usize,
        seed: u64,
    ) -> Option<Result<Tensor>> {
        let t = ids_t.shape().last().copied().unwrap_or(1);
        let slots = orders.len() * heads;
        let mut shape = ids_t.shape().to_vec();
        shape.push(slots);
        if ids_t.numel() == 0 || slots == 0 {
            return Some(Ok(Tensor::zeros(shape)));
        }
        self.run("engram_hash", || {
            let b = (ids_t.numel() / t.max(1)) as i32;
            let ids = self.array(ids_t)?.reshape(&[b, t as i32])?;
            let r = super::integer::engram_rows(&ids, orders, heads, rows, seed)?;
            self.shaped(r, &shape)
        })
    }

    fn select(&self, cond: &Tensor, a: &Tensor, b: &Tensor) -> Option<Result<Tensor>> {
        self.run("select", || {
            let keep = self.array(cond)?.ne(c(0.0))?;
            Ok(self.tensor(select(keep, self.array(a)?, self.array(b)?)?)?)
        })
    }

    fn slice_axis(
        &self,
        x: &Tensor,
        axis: usize,
        start: usize,
        step: usize,
        len: usize,
    ) -> Option<Result<Tensor>> {
        if len == 0 || x.numel() == 0 {
            let mut shape = x.shape().to_vec();
            shape[axis] = len;
            return Some(Ok(Tensor::zeros(shape)));
        }
        self.run("slice_axis", || {
            Ok(self.tensor(
                self.array(x)?
                    .take_axis(positions(start, step, len), axis as i32)?,
            )?)
        })
    }

    fn unslice_axis(
        &self,
        g: &Tensor,
        shape: &[usize],
        axis: usize,
        start: usize,
        step: usize,
    ) -> Option<Result<Tensor>> {
        let glen = g.shape()[axis];
        if glen == 0 || shape.iter().product::<usize>() == 0 {
            return Some(Ok(Tensor::zeros(shape.to_vec())));
        }
        self.run("unslice_axis", || {
            let ga = self.array(g)?;
            let mut zshape = ga.shape().to_vec();
            zshape[axis] = 1;
            let with_zero = concatenate(&[ga, Array::zeros::<f32>(&zshape)?], axis as i32)?;
            // Output position i reads g's element k where i = start + k·step, else the zero.
            let idx: Vec<i32> = (0..shape[axis])
                .map(|i| {
                    let k = i
                        .checked_sub(start)
                        .filter(|o| o % step == 0)
                        .map(|o| o / step);
                    k.filter(|&k| k < glen).unwrap_or(glen) as i32
                })
                .collect();
            let idx = Array::from_slice(&idx, &[shape[axis] as i32]);
            Ok(self.tensor(with_zero.take_axis(idx, axis as i32)?)?)
        })
    }

    fn adam_update(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        step: AdamStep,
    ) -> Option<Result<()>> {
        let k = step.constants();
        let updated = self.run("adam_update", || {
            let (pa, ga, ma, va) = (
                self.array(p)?,
                self.array(g)?,
                self.array(m)?,
                self.array(v)?,
            );
            Ok(adam_arrays(&k, &c(k.bc1), &c(k.bc2), [&pa, &ga, &ma, &va])?)
        })?;
        let result = updated.and_then(|(p2, m2, v2)| {
            // The step's state is settled with the optimizer call's other
            // updates (one evaluation for all of them), by the next kernel or
            // host read, so the graph does not grow across steps (MLX's own
            // training loops evaluate the same).
            super::backend::defer([p2.clone(), m2.clone(), v2.clone()]);
            let shape = p.shape().to_vec();
            let wrap = |a: Array| {
                locked(|| -> Result<Tensor> {
                    let a = a
                        .reshape(&dims(&shape))
                        .map_err(|e| super::backend::mlx_error("adam_update", e))?;
                    self.tensor(a)
                })
            };
            *p = wrap(p2)?;
            *m = wrap(m2)?;
            *v = wrap(v2)?;
            Ok(())
        });
        Some(result)
    }
}
