//! Fused kernels on the GPU (`kernels/fused.cu`): an activation's gradient,
//! bias + activation forward and backward, and attention probabilities (scale,
//! causal mask, softmax) forward and backward.

use cudarc::driver::PushKernelArg;

use super::backend::{grid, row_grid, CudaBackend};
use crate::backend::{Result, UnaryOp, CAUSAL_FILL};
use crate::tensor::Tensor;

/// The code of `op` in the kernels (`mlpl_unary` in `common.cuh`).
fn act_code(op: UnaryOp) -> i32 {
    match op {
        UnaryOp::Neg => 0,
        UnaryOp::Exp => 1,
        UnaryOp::Log => 2,
        UnaryOp::Sqrt => 3,
        UnaryOp::Abs => 4,
        UnaryOp::Sigmoid => 5,
        UnaryOp::Tanh => 6,
        UnaryOp::Relu => 7,
        UnaryOp::Gelu => 8,
        UnaryOp::Silu => 9,
        UnaryOp::Sin => 10,
        UnaryOp::Cos => 11,
        UnaryOp::Erf => 12,
        UnaryOp::GeluErf => 13,
    }
}

/// `(rows, T, S)` of scores of `shape` (`[.., T, S]`; a vector is one row).
fn score_dims(shape: &[usize]) -> (usize, usize, usize) {
    let r = shape.len();
    let t = if r >= 2 { shape[r - 2] } else { 1 };
    let s = shape.last().copied().unwrap_or(1);
    (shape[..r.saturating_sub(1)].iter().product(), t, s)
}

impl CudaBackend {
    pub(super) fn unary_backward_op(
        &self,
        op: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        let name = "unary_backward";
        let n = x.numel();
        if n == 0 {
            return Ok(Tensor::zeros(x.shape().to_vec()));
        }
        let (xin, yin, gin) = (
            self.operand(x, name)?,
            self.operand(y, name)?,
            self.operand(dy, name)?,
        );
        let mut out = self.alloc(n, name)?;
        let (n64, code) = (n as u64, act_code(op));
        let mut args = self.stream().launch_builder(self.function("unary_bwd")?);
        args.arg(xin.slice())
            .arg(yin.slice())
            .arg(gin.slice())
            .arg(out.slice_mut())
            .arg(&n64)
            .arg(&code);
        self.launch(args, grid(n), name)?;
        Ok(self.tensor(x.shape().to_vec(), out))
    }

    pub(super) fn bias_act_op(&self, x: &Tensor, bias: &Tensor, act: UnaryOp) -> Result<Tensor> {
        let name = "bias_act";
        let (n, width) = (x.numel(), bias.numel());
        if n == 0 || width == 0 {
            return Ok(Tensor::zeros(x.shape().to_vec()));
        }
        let (xin, bin) = (self.operand(x, name)?, self.operand(bias, name)?);
        let mut out = self.alloc(n, name)?;
        let (n64, w64, code) = (n as u64, width as u64, act_code(act));
        let mut args = self.stream().launch_builder(self.function("bias_act_fwd")?);
        args.arg(xin.slice())
            .arg(bin.slice())
            .arg(out.slice_mut())
            .arg(&n64)
            .arg(&w64)
            .arg(&code);
        self.launch(args, grid(n), name)?;
        Ok(self.tensor(x.shape().to_vec(), out))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn bias_act_backward_op(
        &self,
        x: &Tensor,
        bias: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        act: UnaryOp,
        want_bias: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let name = "bias_act_backward";
        let (n, width) = (x.numel(), bias.numel());
        let dx = if n == 0 || width == 0 {
            Tensor::zeros(x.shape().to_vec())
        } else {
            let (xin, bin, yin, gin) = (
                self.operand(x, name)?,
                self.operand(bias, name)?,
                self.operand(y, name)?,
                self.operand(dy, name)?,
            );
            let mut out = self.alloc(n, name)?;
            let (n64, w64, code) = (n as u64, width as u64, act_code(act));
            let mut args = self.stream().launch_builder(self.function("bias_act_bwd")?);
            args.arg(xin.slice())
                .arg(bin.slice())
                .arg(yin.slice())
                .arg(gin.slice())
                .arg(out.slice_mut())
                .arg(&n64)
                .arg(&w64)
                .arg(&code);
            self.launch(args, grid(n), name)?;
            self.tensor(x.shape().to_vec(), out)
        };
        let dbias = if want_bias {
            Some(self.sum_to_shape_op(&dx, bias.shape())?)
        } else {
            None
        };
        Ok((dx, dbias))
    }

    pub(super) fn masked_softmax_op(
        &self,
        x: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        let name = "masked_softmax";
        if x.numel() == 0 {
            return Ok(Tensor::zeros(x.shape().to_vec()));
        }
        let (rows, t, s) = score_dims(x.shape());
        let xin = self.operand(x, name)?;
        let mut out = self.alloc(x.numel(), name)?;
        let (r64, t64, s64) = (rows as u64, t as u64, s as u64);
        let (flag, fill) = (i32::from(causal), CAUSAL_FILL);
        let mut args = self
            .stream()
            .launch_builder(self.function("masked_softmax_fwd")?);
        args.arg(xin.slice())
            .arg(out.slice_mut())
            .arg(&r64)
            .arg(&t64)
            .arg(&s64)
            .arg(&divisor)
            .arg(&flag)
            .arg(&fill);
        self.launch(args, row_grid(rows, s), name)?;
        Ok(self.tensor(x.shape().to_vec(), out))
    }

    pub(super) fn masked_softmax_backward_op(
        &self,
        y: &Tensor,
        dy: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        let name = "masked_softmax_backward";
        if y.numel() == 0 {
            return Ok(Tensor::zeros(y.shape().to_vec()));
        }
        let (rows, t, s) = score_dims(y.shape());
        let (yin, gin) = (self.operand(y, name)?, self.operand(dy, name)?);
        let mut out = self.alloc(y.numel(), name)?;
        let (r64, t64, s64) = (rows as u64, t as u64, s as u64);
        let flag = i32::from(causal);
        let mut args = self
            .stream()
            .launch_builder(self.function("masked_softmax_bwd")?);
        args.arg(yin.slice())
            .arg(gin.slice())
            .arg(out.slice_mut())
            .arg(&r64)
            .arg(&t64)
            .arg(&s64)
            .arg(&divisor)
            .arg(&flag);
        self.launch(args, row_grid(rows, s), name)?;
        Ok(self.tensor(y.shape().to_vec(), out))
    }
}
