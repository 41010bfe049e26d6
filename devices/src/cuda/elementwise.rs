//! Element-wise ops on the GPU: unary functions, broadcasting binary ops, and
//! strided copies (permutations and broadcasts).

use cudarc::driver::PushKernelArg;

use super::backend::{grid, CudaBackend};
use super::buffer::CudaBuffer;
use super::layout::{broadcast_strides, layout, layout3, strides};
use crate::backend::{BinaryOp, Result, UnaryOp};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

fn unary_kernel(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "unary_neg",
        UnaryOp::Exp => "unary_exp",
        UnaryOp::Log => "unary_log",
        UnaryOp::Sqrt => "unary_sqrt",
        UnaryOp::Abs => "unary_abs",
        UnaryOp::Sigmoid => "unary_sigmoid",
        UnaryOp::Tanh => "unary_tanh",
        UnaryOp::Relu => "unary_relu",
        UnaryOp::Gelu => "unary_gelu",
        UnaryOp::Silu => "unary_silu",
        UnaryOp::Sin => "unary_sin",
        UnaryOp::Cos => "unary_cos",
        UnaryOp::Erf => "unary_erf",
        UnaryOp::GeluErf => "unary_gelu_erf",
    }
}

fn binary_kernel(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "binary_add",
        BinaryOp::Sub => "binary_sub",
        BinaryOp::Mul => "binary_mul",
        BinaryOp::Div => "binary_div",
        BinaryOp::Pow => "binary_pow",
        BinaryOp::Gt => "binary_gt",
        BinaryOp::Lt => "binary_lt",
        BinaryOp::Eq => "binary_eq",
        BinaryOp::Max => "binary_max",
        BinaryOp::Min => "binary_min",
    }
}

impl CudaBackend {
    pub(super) fn unary_op(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        let name = unary_kernel(op);
        let n = x.numel();
        if n == 0 {
            return Ok(Tensor::zeros(x.shape().to_vec()));
        }
        let xin = self.operand(x, name)?;
        let mut out = self.alloc(n, name)?;
        let n64 = n as u64;
        let mut args = self.stream().launch_builder(self.function(name)?);
        args.arg(xin.slice()).arg(out.slice_mut()).arg(&n64);
        self.launch(args, grid(n), name)?;
        Ok(self.tensor(x.shape().to_vec(), out))
    }

    pub(super) fn binary_op(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let name = binary_kernel(op);
        let shape = broadcast_shapes(a.shape(), b.shape())
            .ok_or_else(|| self.failure(name, "operand shapes do not broadcast"))?;
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let (sa, sb) = (
            broadcast_strides(a.shape(), &shape),
            broadcast_strides(b.shape(), &shape),
        );
        let Some(l) = layout(&shape, &sa, &sb) else {
            return self.on_cpu(name, |cpu| crate::Backend::binary(cpu, op, a, b));
        };
        // One-element host operands go by value (no upload); if both are, b is uploaded.
        let by_value = |t: &Tensor| t.is_host() && t.numel() == 1;
        let ka = by_value(a).then(|| a.host()[0]);
        let kb = (by_value(b) && ka.is_none()).then(|| b.host()[0]);
        let konst = i32::from(ka.is_some()) | (i32::from(kb.is_some()) << 1);
        let ain = if ka.is_some() {
            None
        } else {
            Some(self.operand(a, name)?)
        };
        let bin = if kb.is_some() {
            None
        } else {
            Some(self.operand(b, name)?)
        };
        // A by-value operand's pointer is never read; pass the other one's.
        let (pa, pb) = match (&ain, &bin) {
            (Some(x), Some(y)) => (x.slice(), y.slice()),
            (Some(x), None) => (x.slice(), x.slice()),
            (None, Some(y)) => (y.slice(), y.slice()),
            (None, None) => return Err(self.failure(name, "no device operand")),
        };
        let mut out = self.alloc(n, name)?;
        let n64 = n as u64;
        let (va, vb) = (ka.unwrap_or(0.0), kb.unwrap_or(0.0));
        let mut args = self.stream().launch_builder(self.function(name)?);
        args.arg(pa)
            .arg(pb)
            .arg(out.slice_mut())
            .arg(&n64)
            .arg(&l)
            .arg(&va)
            .arg(&vb)
            .arg(&konst);
        self.launch(args, grid(n), name)?;
        Ok(self.tensor(shape, out))
    }

    pub(super) fn permute_op(&self, x: &Tensor, perm: &[usize]) -> Result<Tensor> {
        let own = strides(x.shape());
        let shape: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
        let sa: Vec<i64> = perm.iter().map(|&p| own[p]).collect();
        if x.numel() == 0 {
            return Ok(Tensor::zeros(shape));
        }
        match self.copy_strided(x, &shape, &sa, 0, "permute")? {
            Some(buf) => Ok(self.tensor(shape, buf)),
            None => self.on_cpu("permute", |cpu| crate::Backend::permute(cpu, x, perm)),
        }
    }

    /// `x` broadcast to `shape` as a new contiguous buffer (for batched GEMM
    /// operands whose batch axes broadcast partially). `None` when the layout has
    /// too many axes for the kernels.
    pub(super) fn broadcast_to(&self, x: &Tensor, shape: &[usize]) -> Result<Option<CudaBuffer>> {
        let sa = broadcast_strides(x.shape(), shape);
        self.copy_strided(x, shape, &sa, 0, "broadcast")
    }

    /// out[i] = x[base + offset(i)] over `shape` with input strides `sa`.
    fn copy_strided(
        &self,
        x: &Tensor,
        shape: &[usize],
        sa: &[i64],
        base: i64,
        op: &str,
    ) -> Result<Option<CudaBuffer>> {
        let Some(l) = layout(shape, sa, &vec![0; shape.len()]) else {
            return Ok(None);
        };
        let n: usize = shape.iter().product();
        let xin = self.operand(x, op)?;
        let mut out = self.alloc(n, op)?;
        let n64 = n as u64;
        let mut args = self.stream().launch_builder(self.function("copy_strided")?);
        args.arg(xin.slice())
            .arg(out.slice_mut())
            .arg(&n64)
            .arg(&l)
            .arg(&base);
        self.launch(args, grid(n), op)?;
        Ok(Some(out))
    }

    pub(super) fn slice_axis_op(
        &self,
        x: &Tensor,
        axis: usize,
        start: usize,
        step: usize,
        len: usize,
    ) -> Result<Tensor> {
        let own = strides(x.shape());
        let mut shape = x.shape().to_vec();
        shape[axis] = len;
        let mut sa = own.clone();
        sa[axis] *= step as i64;
        if shape.iter().product::<usize>() == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let base = start as i64 * own[axis];
        match self.copy_strided(x, &shape, &sa, base, "slice")? {
            Some(buf) => Ok(self.tensor(shape, buf)),
            None => self.on_cpu("slice", |cpu| {
                crate::Backend::slice_axis(cpu, x, axis, start, step, len)
            }),
        }
    }

    pub(super) fn unslice_axis_op(
        &self,
        g: &Tensor,
        shape: &[usize],
        axis: usize,
        start: usize,
        step: usize,
    ) -> Result<Tensor> {
        let name = "unslice";
        let n_out: usize = shape.iter().product();
        let mut out = self.zeros(n_out, name)?;
        let n = g.numel();
        if n > 0 {
            let own = strides(shape);
            let mut sb = own.clone();
            sb[axis] *= step as i64;
            let Some(l) = layout(g.shape(), &strides(g.shape()), &sb) else {
                return self.on_cpu(name, |cpu| {
                    crate::Backend::unslice_axis(cpu, g, shape, axis, start, step)
                });
            };
            let base = start as i64 * own[axis];
            let gin = self.operand(g, name)?;
            let n64 = n as u64;
            let mut args = self
                .stream()
                .launch_builder(self.function("place_strided")?);
            args.arg(gin.slice())
                .arg(out.slice_mut())
                .arg(&n64)
                .arg(&l)
                .arg(&base);
            self.launch(args, grid(n), name)?;
        }
        Ok(self.tensor(shape.to_vec(), out))
    }

    pub(super) fn select_op(&self, c: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let name = "select";
        let shape = crate::kernels::select_shape(&[c.shape(), a.shape(), b.shape()])
            .map_err(|e| self.failure(name, &e))?;
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let st = [c, a, b].map(|t| broadcast_strides(t.shape(), &shape));
        let Some((l, m)) = layout3(&shape, [&st[0], &st[1], &st[2]]) else {
            return self.on_cpu(name, |cpu| crate::Backend::select(cpu, c, a, b));
        };
        let (cin, ain, bin) = (
            self.operand(c, name)?,
            self.operand(a, name)?,
            self.operand(b, name)?,
        );
        let mut out = self.alloc(n, name)?;
        let n64 = n as u64;
        let mut args = self
            .stream()
            .launch_builder(self.function("select_strided")?);
        args.arg(cin.slice())
            .arg(ain.slice())
            .arg(bin.slice())
            .arg(out.slice_mut())
            .arg(&n64)
            .arg(&l)
            .arg(&m);
        self.launch(args, grid(n), name)?;
        Ok(self.tensor(shape, out))
    }
}
