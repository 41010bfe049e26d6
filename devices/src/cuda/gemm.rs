//! Batched matrix multiplication through cuBLAS (`sgemm_strided_batched`).

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{Gemm, GemmConfig, StridedBatchedConfig};

use super::backend::{CudaBackend, Operand};
use crate::backend::Result;
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

/// How one GEMM operand's batch is laid out for a strided batched call.
enum Batch<'a> {
    /// Every output batch reads this operand's batch of the same index (or the only one).
    Strided(Operand<'a>, i64),
    /// Broadcast along some batch axes: materialised at the output's batch shape.
    Expanded(super::buffer::CudaBuffer, i64),
}

impl Batch<'_> {
    fn slice(&self) -> &cudarc::driver::CudaSlice<f32> {
        match self {
            Batch::Strided(o, _) => o.slice(),
            Batch::Expanded(b, _) => b.slice(),
        }
    }

    fn stride(&self) -> i64 {
        match self {
            Batch::Strided(_, s) | Batch::Expanded(_, s) => *s,
        }
    }
}

impl CudaBackend {
    /// `a [..., m, k] · b [..., k, n]` with NumPy batch broadcasting; with
    /// `ta` / `tb` the stored operand holds the last two axes swapped (`[..., k, m]`
    /// / `[..., n, k]`) and cuBLAS reads it transposed, without a copy.
    pub(super) fn matmul_op(&self, a: &Tensor, b: &Tensor, ta: bool, tb: bool) -> Result<Tensor> {
        let op = "matmul";
        let (ra, rb) = (a.rank(), b.rank());
        if ra < 2 || rb < 2 {
            return Err(self.failure(op, "operands must have rank >= 2"));
        }
        let (sa, sb) = (&a.shape()[ra - 2..], &b.shape()[rb - 2..]);
        let (m, k) = if ta { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
        let n = if tb { sb[0] } else { sb[1] };
        let batch = broadcast_shapes(&a.shape()[..ra - 2], &b.shape()[..rb - 2])
            .ok_or_else(|| self.failure(op, "batch axes do not broadcast"))?;
        let nb: usize = batch.iter().product();
        let mut shape = batch.clone();
        shape.extend([m, n]);
        let on_cpu = || self.on_cpu(op, |cpu| crate::Backend::matmul_t(cpu, a, b, ta, tb));
        if nb * m * n == 0 {
            return Ok(Tensor::zeros(shape));
        }
        let fits = |v: usize| i32::try_from(v).is_ok();
        if ![m, n, k, nb].into_iter().all(fits) {
            return on_cpu();
        }
        if k == 0 {
            let zeros = self.zeros(nb * m * n, op)?;
            return Ok(self.tensor(shape, zeros));
        }
        let (Some(pa), Some(pb)) = (
            self.batch_operand(a, &batch, m * k)?,
            self.batch_operand(b, &batch, k * n)?,
        ) else {
            return on_cpu();
        };
        let mut out = self.alloc(nb * m * n, op)?;
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: pass b first. A row-major
        // [r, c] matrix is a column-major c×r one with leading dimension c.
        let trans = |t: bool| {
            if t {
                cublasOperation_t::CUBLAS_OP_T
            } else {
                cublasOperation_t::CUBLAS_OP_N
            }
        };
        let cfg = StridedBatchedConfig {
            gemm: GemmConfig {
                transa: trans(tb),
                transb: trans(ta),
                m: n as i32,
                n: m as i32,
                k: k as i32,
                alpha: 1.0f32,
                lda: if tb { k } else { n } as i32,
                ldb: if ta { m } else { k } as i32,
                beta: 0.0f32,
                ldc: n as i32,
            },
            batch_size: nb as i32,
            stride_a: pb.stride(),
            stride_b: pa.stride(),
            stride_c: (m * n) as i64,
        };
        // SAFETY: the buffers hold nb (or 1, with stride 0) matrices of the sizes in `cfg`.
        unsafe {
            self.blas
                .gemm_strided_batched(cfg, pb.slice(), pa.slice(), out.slice_mut())
        }
        .map_err(|e| self.failure(op, format!("cuBLAS: {e}")))?;
        self.stats.kernel();
        Ok(self.tensor(shape, out))
    }

    /// One GEMM operand (`mat` elements per matrix) for the output batch `batch`:
    /// its own batch when that matches or is a single matrix (stride 0), else a
    /// broadcast copy. `None` when the copy needs more axes than the kernels take.
    fn batch_operand<'a>(
        &self,
        x: &'a Tensor,
        batch: &[usize],
        mat: usize,
    ) -> Result<Option<Batch<'a>>> {
        let own = &x.shape()[..x.rank() - 2];
        let own_n: usize = own.iter().product();
        let nb: usize = batch.iter().product();
        if own_n == 1 || own_n == nb {
            let stride = if own_n == 1 { 0 } else { mat as i64 };
            return Ok(Some(Batch::Strided(self.operand(x, "matmul")?, stride)));
        }
        let mut full = batch.to_vec();
        full.extend_from_slice(&x.shape()[x.rank() - 2..]);
        Ok(self
            .broadcast_to(x, &full)?
            .map(|buf| Batch::Expanded(buf, mat as i64)))
    }
}
