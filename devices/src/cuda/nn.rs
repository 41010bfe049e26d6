//! Neural-network kernels on the GPU: softmax's backward, fused cross-entropy, RMS norm and layer norm forward and backward.

use cudarc::driver::PushKernelArg;

use super::backend::{row_grid, CudaBackend};
use super::layout::split_at_axis;
use crate::backend::Result;
use crate::shape::rows_of;
use crate::tensor::Tensor;

impl CudaBackend {
    pub(super) fn softmax_backward_op(
        &self,
        y: &Tensor,
        dy: &Tensor,
        axis: usize,
    ) -> Result<Tensor> {
        let (outer, len, inner) = split_at_axis(y.shape(), axis);
        if y.numel() == 0 {
            return Ok(Tensor::zeros(y.shape().to_vec()));
        }
        let op = "softmax_backward";
        let (yin, gin) = (self.operand(y, op)?, self.operand(dy, op)?);
        let mut out = self.alloc(y.numel(), op)?;
        let (o, l, i) = (outer as u64, len as u64, inner as u64);
        let mut args = self.stream().launch_builder(self.function("softmax_bwd")?);
        args.arg(yin.slice())
            .arg(gin.slice())
            .arg(out.slice_mut())
            .arg(&o)
            .arg(&l)
            .arg(&i);
        self.launch(args, row_grid(outer * inner, len), op)?;
        Ok(self.tensor(y.shape().to_vec(), out))
    }

    pub(super) fn cross_entropy_op(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        want_grad: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let op = "cross_entropy";
        let (rows, v) = rows_of(logits.shape());
        if rows == 0 || v == 0 {
            let grad = want_grad.then(|| Tensor::zeros(logits.shape().to_vec()));
            return Ok((Tensor::scalar(0.0), grad));
        }
        let (lin, tin) = (self.operand(logits, op)?, self.operand(targets, op)?);
        let mut row_loss = self.alloc(rows, op)?;
        let mut grad = self.alloc(if want_grad { rows * v } else { 0 }, op)?;
        let (r64, v64) = (rows as u64, v as u64);
        let (flag, scale) = (i32::from(want_grad), 1.0f32 / rows as f32);
        let mut args = self
            .stream()
            .launch_builder(self.function("cross_entropy_fwd_bwd")?);
        args.arg(lin.slice())
            .arg(tin.slice())
            .arg(row_loss.slice_mut())
            .arg(grad.slice_mut())
            .arg(&r64)
            .arg(&v64)
            .arg(&flag)
            .arg(&scale);
        self.launch(args, row_grid(rows, v), op)?;
        // The mean over rows, accumulated in f64 like the CPU's.
        let mut loss = self.alloc(1, op)?;
        let one = 1u64;
        let mut args = self.stream().launch_builder(self.function("reduce_mean")?);
        args.arg(row_loss.slice())
            .arg(loss.slice_mut())
            .arg(&one)
            .arg(&r64)
            .arg(&one);
        self.launch(args, row_grid(1, rows), op)?;
        let grad = want_grad.then(|| self.tensor(logits.shape().to_vec(), grad));
        Ok((self.tensor(vec![], loss), grad))
    }

    pub(super) fn rms_norm_op(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
        let op = "rms_norm";
        let (rows, d) = rows_of(x.shape());
        if x.numel() == 0 {
            return Ok((Tensor::zeros(x.shape().to_vec()), Tensor::zeros(vec![rows])));
        }
        let xin = self.operand(x, op)?;
        let (mut y, mut inv) = (self.alloc(x.numel(), op)?, self.alloc(rows, op)?);
        let (r64, d64) = (rows as u64, d as u64);
        let mut args = self.stream().launch_builder(self.function("rms_norm_fwd")?);
        args.arg(xin.slice())
            .arg(y.slice_mut())
            .arg(inv.slice_mut())
            .arg(&r64)
            .arg(&d64)
            .arg(&eps);
        self.launch(args, row_grid(rows, d), op)?;
        Ok((
            self.tensor(x.shape().to_vec(), y),
            self.tensor(vec![rows], inv),
        ))
    }

    pub(super) fn rms_norm_backward_op(
        &self,
        x: &Tensor,
        inv_rms: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        let op = "rms_norm_backward";
        let (rows, d) = rows_of(x.shape());
        if x.numel() == 0 {
            return Ok(Tensor::zeros(x.shape().to_vec()));
        }
        let (xin, rin, gin) = (
            self.operand(x, op)?,
            self.operand(inv_rms, op)?,
            self.operand(dy, op)?,
        );
        let mut dx = self.alloc(x.numel(), op)?;
        let (r64, d64) = (rows as u64, d as u64);
        let mut args = self.stream().launch_builder(self.function("rms_norm_bwd")?);
        args.arg(xin.slice())
            .arg(rin.slice())
            .arg(gin.slice())
            .arg(dx.slice_mut())
            .arg(&r64)
            .arg(&d64);
        self.launch(args, row_grid(rows, d), op)?;
        Ok(self.tensor(x.shape().to_vec(), dx))
    }

    pub(super) fn layer_norm_op(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor, Tensor)> {
        let op = "layer_norm";
        let (rows, d) = rows_of(x.shape());
        if x.numel() == 0 {
            let stats = Tensor::zeros(vec![rows]);
            return Ok((Tensor::zeros(x.shape().to_vec()), stats.clone(), stats));
        }
        let xin = self.operand(x, op)?;
        let mut y = self.alloc(x.numel(), op)?;
        let (mut mean, mut inv) = (self.alloc(rows, op)?, self.alloc(rows, op)?);
        let (r64, d64) = (rows as u64, d as u64);
        let mut args = self
            .stream()
            .launch_builder(self.function("layer_norm_fwd")?);
        args.arg(xin.slice())
            .arg(y.slice_mut())
            .arg(mean.slice_mut())
            .arg(inv.slice_mut())
            .arg(&r64)
            .arg(&d64)
            .arg(&eps);
        self.launch(args, row_grid(rows, d), op)?;
        Ok((
            self.tensor(x.shape().to_vec(), y),
            self.tensor(vec![rows], mean),
            self.tensor(vec![rows], inv),
        ))
    }

    pub(super) fn layer_norm_backward_op(
        &self,
        x: &Tensor,
        mean: &Tensor,
        inv_std: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        let op = "layer_norm_backward";
        let (rows, d) = rows_of(x.shape());
        if x.numel() == 0 {
            return Ok(Tensor::zeros(x.shape().to_vec()));
        }
        let (xin, min, sin, gin) = (
            self.operand(x, op)?,
            self.operand(mean, op)?,
            self.operand(inv_std, op)?,
            self.operand(dy, op)?,
        );
        let mut dx = self.alloc(x.numel(), op)?;
        let (r64, d64) = (rows as u64, d as u64);
        let mut args = self
            .stream()
            .launch_builder(self.function("layer_norm_bwd")?);
        args.arg(xin.slice())
            .arg(min.slice())
            .arg(sin.slice())
            .arg(gin.slice())
            .arg(dx.slice_mut())
            .arg(&r64)
            .arg(&d64);
        self.launch(args, row_grid(rows, d), op)?;
        Ok(self.tensor(x.shape().to_vec(), dx))
    }
}
