//! Engram's kernels on the GPU (`kernels/engram.cu`): hashed n-gram rows and
//! the causal convolution with its gradient, the CPU's bits.

use cudarc::driver::PushKernelArg;

use super::backend::{grid, CudaBackend};
use crate::backend::Result;
use crate::tensor::Tensor;

/// `(sequences, T, C)` of `x [.., T, C]`.
fn conv_dims(x: &[usize]) -> (u64, u64, u64) {
    let r = x.len();
    let lead: usize = x[..r.saturating_sub(2)].iter().product();
    let at = |i: usize| x.get(r.wrapping_sub(i)).copied().unwrap_or(1) as u64;
    (lead as u64, at(2), at(1))
}

impl CudaBackend {
    pub(super) fn engram_hash_op(
        &self,
        ids: &Tensor,
        orders: &[usize],
        heads: usize,
        rows: usize,
        seed: u64,
    ) -> Result<Tensor> {
        if orders.len() > 8 || orders.iter().any(|&o| o > 255) {
            return Err(self.failure("engram_hash", "at most 8 orders, each at most 255"));
        }
        let slots = orders.len() * heads;
        let mut shape = ids.shape().to_vec();
        shape.push(slots);
        let n = ids.numel() * slots;
        if n == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let t_len = ids.shape().last().copied().unwrap_or(1) as u64;
        let n_seq = ids.numel() as u64 / t_len;
        let packed = orders
            .iter()
            .enumerate()
            .fold(0u64, |p, (i, &o)| p | ((o as u64) << (8 * i)));
        let (n_orders, heads, rows) = (orders.len() as u64, heads as u64, rows as u64);
        let iin = self.operand(ids, "engram_hash")?;
        let mut out = self.alloc(n, "engram_hash")?;
        let mut args = self.stream().launch_builder(self.function("engram_hash")?);
        args.arg(iin.slice())
            .arg(out.slice_mut())
            .arg(&n_seq)
            .arg(&t_len)
            .arg(&packed)
            .arg(&n_orders)
            .arg(&heads)
            .arg(&rows)
            .arg(&seed);
        self.launch(args, grid(n), "engram_hash")?;
        Ok(self.tensor(shape, out))
    }

    pub(super) fn causal_conv_op(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        let (n_seq, t_len, c) = conv_dims(x.shape());
        let k = w.shape().first().copied().unwrap_or(0) as u64;
        let n = x.numel();
        if n == 0 {
            return Ok(Tensor::zeros(x.shape().to_vec()));
        }
        let (xin, win) = (
            self.operand(x, "causal_conv")?,
            self.operand(w, "causal_conv")?,
        );
        let mut out = self.alloc(n, "causal_conv")?;
        let mut args = self.stream().launch_builder(self.function("causal_conv")?);
        args.arg(xin.slice())
            .arg(win.slice())
            .arg(out.slice_mut())
            .arg(&n_seq)
            .arg(&t_len)
            .arg(&c)
            .arg(&k);
        self.launch(args, grid(n), "causal_conv")?;
        Ok(self.tensor(x.shape().to_vec(), out))
    }

    pub(super) fn causal_conv_backward_op(
        &self,
        x: &Tensor,
        w: &Tensor,
        dy: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let (n_seq, t_len, c) = conv_dims(x.shape());
        let k = w.shape().first().copied().unwrap_or(0) as u64;
        let (n, nw) = (x.numel(), w.numel());
        if n == 0 || nw == 0 {
            return Ok((
                Tensor::zeros(x.shape().to_vec()),
                Tensor::zeros(w.shape().to_vec()),
            ));
        }
        let (xin, win, din) = (
            self.operand(x, "causal_conv_backward")?,
            self.operand(w, "causal_conv_backward")?,
            self.operand(dy, "causal_conv_backward")?,
        );
        let mut dx = self.alloc(n, "causal_conv_backward")?;
        let mut dw = self.alloc(nw, "causal_conv_backward")?;
        let mut args = self
            .stream()
            .launch_builder(self.function("causal_conv_dx")?);
        args.arg(win.slice())
            .arg(din.slice())
            .arg(dx.slice_mut())
            .arg(&n_seq)
            .arg(&t_len)
            .arg(&c)
            .arg(&k);
        self.launch(args, grid(n), "causal_conv_backward")?;
        let mut args = self
            .stream()
            .launch_builder(self.function("causal_conv_dw")?);
        args.arg(xin.slice())
            .arg(din.slice())
            .arg(dw.slice_mut())
            .arg(&n_seq)
            .arg(&t_len)
            .arg(&c)
            .arg(&k);
        self.launch(args, grid(nw), "causal_conv_backward")?;
        Ok((
            self.tensor(x.shape().to_vec(), dx),
            self.tensor(w.shape().to_vec(), dw),
        ))
    }
}
