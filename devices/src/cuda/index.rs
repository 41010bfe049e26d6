//! Embedding rows on the GPU: gather and scatter-add (its gradient).

use cudarc::driver::PushKernelArg;

use super::backend::{grid, CudaBackend};
use crate::backend::Result;
use crate::tensor::Tensor;

impl CudaBackend {
    pub(super) fn gather_rows_op(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
        let d = table.shape().get(1).copied().unwrap_or(0);
        let mut shape = ids.shape().to_vec();
        shape.push(d);
        let n = ids.numel() * d;
        if n == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let (tin, iin) = (
            self.operand(table, "gather_rows")?,
            self.operand(ids, "gather_rows")?,
        );
        let mut out = self.alloc(n, "gather_rows")?;
        let (ni, d64) = (ids.numel() as u64, d as u64);
        let mut args = self.stream().launch_builder(self.function("gather_rows")?);
        args.arg(tin.slice())
            .arg(iin.slice())
            .arg(out.slice_mut())
            .arg(&ni)
            .arg(&d64);
        self.launch(args, grid(n), "gather_rows")?;
        Ok(self.tensor(shape, out))
    }

    pub(super) fn scatter_add_rows_op(
        &self,
        ids: &Tensor,
        src: &Tensor,
        vocab: usize,
    ) -> Result<Tensor> {
        let d = src.shape().last().copied().unwrap_or(0);
        let shape = vec![vocab, d];
        if vocab * d == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let mut out = self.zeros(vocab * d, "scatter_add_rows")?;
        if ids.numel() > 0 {
            let (iin, sin) = (
                self.operand(ids, "scatter_add_rows")?,
                self.operand(src, "scatter_add_rows")?,
            );
            let (ni, d64) = (ids.numel() as u64, d as u64);
            let mut args = self
                .stream()
                .launch_builder(self.function("scatter_add_rows")?);
            args.arg(iin.slice())
                .arg(sin.slice())
                .arg(out.slice_mut())
                .arg(&ni)
                .arg(&d64);
            self.launch(args, grid(d), "scatter_add_rows")?;
        }
        Ok(self.tensor(shape, out))
    }
}
