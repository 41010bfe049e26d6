//! Reductions on the GPU: sum / mean / product / max along an axis or over
//! everything, argmax, the launcher of every kernel along an axis, and summing a broadcast gradient back to a shape.

use cudarc::driver::PushKernelArg;

use super::backend::{grid, row_grid, CudaBackend};
use super::layout::{layout, split_at_axis, strides};
use crate::backend::{ReduceOp, Result};
use crate::tensor::Tensor;

/// The output shape and `(outer, len, inner)` view of a reduction.
pub(super) fn reduction_view(
    shape: &[usize],
    axis: Option<usize>,
) -> (Vec<usize>, (usize, usize, usize)) {
    match axis {
        Some(ax) => {
            let mut out = shape.to_vec();
            out.remove(ax);
            (out, split_at_axis(shape, ax))
        }
        None => (vec![], (1, shape.iter().product(), 1)),
    }
}

impl CudaBackend {
    pub(super) fn reduce_op(
        &self,
        op: ReduceOp,
        x: &Tensor,
        axis: Option<usize>,
    ) -> Result<Tensor> {
        let name = match op {
            ReduceOp::Sum => "reduce_sum",
            ReduceOp::Mean => "reduce_mean",
            ReduceOp::Prod => "reduce_prod",
            ReduceOp::Max => "reduce_max",
        };
        let (shape, (outer, len, inner)) = reduction_view(x.shape(), axis);
        self.along_axis(name, x, shape, (outer, len, inner), true)
    }

    pub(super) fn argmax_op(&self, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        let (shape, view) = reduction_view(x.shape(), axis);
        self.along_axis("argmax", x, shape, view, false)
    }

    /// Launches a `(x, out, outer, len, inner)` kernel over the `outer · inner`
    /// lanes of `x` along an axis of `len` (reductions, argmax, softmax,
    /// log-softmax, logsumexp), writing an output of `shape`: one block per lane
    /// when `per_block`, else one thread per lane.
    pub(super) fn along_axis(
        &self,
        name: &'static str,
        x: &Tensor,
        shape: Vec<usize>,
        (outer, len, inner): (usize, usize, usize),
        per_block: bool,
    ) -> Result<Tensor> {
        let n_out: usize = shape.iter().product();
        if n_out == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let lanes = outer * inner;
        let xin = self.operand(x, name)?;
        let mut out = self.alloc(n_out, name)?;
        let (o, l, i) = (outer as u64, len as u64, inner as u64);
        let mut args = self.stream().launch_builder(self.function(name)?);
        args.arg(xin.slice())
            .arg(out.slice_mut())
            .arg(&o)
            .arg(&l)
            .arg(&i);
        let cfg = if per_block {
            row_grid(lanes, len)
        } else {
            grid(lanes)
        };
        self.launch(args, cfg, name)?;
        Ok(self.tensor(shape, out))
    }

    pub(super) fn sum_to_shape_op(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        if g.shape() == shape {
            return Ok(g.clone());
        }
        let n_out: usize = shape.iter().product();
        if n_out == 0 || g.numel() == 0 {
            return Ok(Tensor::zeros(shape.to_vec()));
        }
        let gs = strides(g.shape());
        let lead = g.rank() - shape.len();
        let (mut kd, mut ks, mut rd, mut rs) = (vec![], vec![], vec![], vec![]);
        for (ax, &size) in g.shape().iter().enumerate() {
            let target = if ax < lead { 1 } else { shape[ax - lead] };
            if target == size {
                kd.push(size);
                ks.push(gs[ax]);
            } else {
                rd.push(size);
                rs.push(gs[ax]);
            }
        }
        let (Some(kept), Some(summed)) = (
            layout(&kd, &ks, &vec![0; kd.len()]),
            layout(&rd, &rs, &vec![0; rd.len()]),
        ) else {
            return self.on_cpu("sum_to_shape", |cpu| {
                crate::Backend::sum_to_shape(cpu, g, shape)
            });
        };
        let n_red = g.numel() / n_out;
        let gin = self.operand(g, "sum_to_shape")?;
        let mut out = self.alloc(n_out, "sum_to_shape")?;
        let (no, nr) = (n_out as u64, n_red as u64);
        let mut args = self.stream().launch_builder(self.function("sum_to")?);
        args.arg(gin.slice())
            .arg(out.slice_mut())
            .arg(&no)
            .arg(&nr)
            .arg(&kept)
            .arg(&summed);
        self.launch(args, grid(n_out), "sum_to_shape")?;
        Ok(self.tensor(shape.to_vec(), out))
    }
}
