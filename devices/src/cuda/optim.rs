//! Optimizer updates and training-time masks on the GPU.

use cudarc::driver::PushKernelArg;

use super::backend::{grid, CudaBackend};
use crate::backend::{AdamConstants, Result};
use crate::tensor::Tensor;

impl CudaBackend {
    /// One fused Adam/AdamW step. The new `p`, `m`, `v` are fresh device buffers,
    /// so clones taken before the step keep their values (copy-on-write).
    pub(super) fn adam_update_op(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        h: AdamConstants,
    ) -> Result<()> {
        let op = "adam_update";
        let n = p.numel();
        if n == 0 {
            return Ok(());
        }
        let (pin, gin, min, vin) = (
            self.operand(p, op)?,
            self.operand(g, op)?,
            self.operand(m, op)?,
            self.operand(v, op)?,
        );
        let (mut po, mut mo, mut vo) = (self.alloc(n, op)?, self.alloc(n, op)?, self.alloc(n, op)?);
        let n64 = n as u64;
        let (ib1, ib2) = (1.0 / h.bc1, 1.0 / h.bc2);
        let mut args = self.stream().launch_builder(self.function("adam_update")?);
        args.arg(pin.slice())
            .arg(gin.slice())
            .arg(min.slice())
            .arg(vin.slice())
            .arg(po.slice_mut())
            .arg(mo.slice_mut())
            .arg(vo.slice_mut())
            .arg(&n64)
            .arg(&h.lr)
            .arg(&h.b1)
            .arg(&h.b2)
            .arg(&h.eps)
            .arg(&ib1)
            .arg(&ib2)
            .arg(&h.wd);
        self.launch(args, grid(n), op)?;
        drop((pin, gin, min, vin));
        *p = self.tensor(p.shape().to_vec(), po);
        *m = self.tensor(m.shape().to_vec(), mo);
        *v = self.tensor(v.shape().to_vec(), vo);
        Ok(())
    }

    /// The dropout mask (see [`Backend::dropout_mask`](crate::Backend::dropout_mask)).
    pub(super) fn dropout_mask_op(&self, shape: &[usize], key: u64, p: f64) -> Result<Tensor> {
        let op = "dropout_mask";
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(Tensor::zeros(shape.to_vec()));
        }
        let scale = (1.0 / (1.0 - p)) as f32;
        let mut out = self.alloc(n, op)?;
        let n64 = n as u64;
        let mut args = self.stream().launch_builder(self.function("dropout_mask")?);
        args.arg(out.slice_mut())
            .arg(&n64)
            .arg(&key)
            .arg(&p)
            .arg(&scale);
        self.launch(args, grid(n), op)?;
        Ok(self.tensor(shape.to_vec(), out))
    }
}
