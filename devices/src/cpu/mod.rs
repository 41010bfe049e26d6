//! The CPU backend: contiguous row-major f32 on the host, a multithreaded GEMM
//! and fused kernels for the training hot paths, parallelised with rayon.
//!
//! Counters: every kernel call adds one to `kernel_launches`; `upload` and
//! `download` are identities (the data already is host memory) and count
//! nothing; `cpu_fallbacks` stays 0 (this *is* the CPU); `memory_bytes` and
//! `peak_memory_bytes` stay 0 because host allocations are not tracked.

mod elementwise;
mod fused_products;
mod gemm;
mod isa;
pub mod lane_sum;
mod layout;
pub mod line_aligned;
mod nn;
mod pool;
pub mod program;
mod reduce;
mod select;
mod simd_act;
mod simd_exp;
mod subnormals;
#[cfg(test)]
mod tests;
mod transpose;
mod warm_workers;

pub use gemm::{gemm_blocking, gemm_tile, set_gemm_blocking, GemmBlocking, KC};
pub use isa::{best_isa, force_isa, isa, supported_isas, Isa};
pub use line_aligned::LineAligned;
pub use pool::SWEEP_MIN_BYTES as POOL_SWEEP_MIN_BYTES;
pub use subnormals::flushing_subnormals;
pub use warm_workers::WarmWorkers;

use crate::attention::AttentionSpec;
use crate::backend::{
    AdamStep, Backend, BinaryOp, Counters, DeviceKind, ReduceOp, Result, UnaryOp,
};
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Element count from which element-wise kernels split their work across
/// rayon threads; below it, thread hand-off costs more than it saves.
pub const PAR_THRESHOLD: usize = 32 * 1024;

/// Elements per parallel work item (big enough to amortise scheduling).
pub(crate) const PAR_CHUNK: usize = 16 * 1024;

/// Runs `f(start, chunk)` over `out` split into pieces of `chunk` elements
/// (`chunk` > 0), in parallel on the kernels' threads when `parallel` is set
/// and there is more than one piece. `start` is the element index of the
/// piece's first element.
pub fn for_chunks<T, F>(out: &mut [T], chunk: usize, parallel: bool, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    if parallel && out.len() > chunk {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, c)| f(i * chunk, c));
    } else {
        for (i, c) in out.chunks_mut(chunk).enumerate() {
            f(i * chunk, c);
        }
    }
}

/// A chunk length for `n` elements made of whole rows of `row` elements: about
/// [`PAR_CHUNK`] elements, at least one row.
pub(crate) fn row_chunk(row: usize) -> usize {
    let row = row.max(1);
    row * (PAR_CHUNK / row).max(1)
}

/// The CPU backend. Cheap to create; use [`cpu()`] for the shared process-wide one.
#[derive(Debug, Default)]
pub struct CpuBackend {
    /// Shared with the step programs compiled by this backend, which count
    /// their kernels here too.
    kernel_launches: Arc<AtomicU64>,
}

impl CpuBackend {
    /// A CPU backend with its own zeroed counters.
    pub fn new() -> CpuBackend {
        CpuBackend::default()
    }

    fn launch(&self) {
        subnormals::flush_in_this_pool();
        self.kernel_launches.fetch_add(1, Ordering::Relaxed);
        crate::counter_scope::count_in_scopes(DeviceKind::Cpu, crate::counter_scope::Count::Kernel);
    }
}

/// Frees the kernel output buffers the CPU backend keeps for reuse that no
/// tensor holds any more (see the buffer pool in this module's sources). The
/// runtime calls it when a `train` loop ends.
pub fn release_unused_buffers() {
    pool::release_free();
}

/// Makes kernel outputs on this thread come from the allocator (`true`), not
/// from the reuse pool, or from the pool again (`false`): step capture records
/// so (see the pool's module).
pub(crate) fn bypass_buffer_pool(on: bool) {
    pool::unpooled(on);
}

/// Sets up, on every thread of the current rayon pool, the per-thread buffers
/// the matrix products use (the GEMM's packing buffers, for the current
/// instruction-set level and blocking), which would
/// otherwise be allocated the first time each thread takes part in a product.
/// Compiling a captured step calls it; callers may call it earlier.
pub fn warm_threads() {
    rayon::broadcast(|_| gemm::warm_thread());
}

/// The shared process-wide CPU backend (one set of counters for the process).
pub fn cpu() -> Arc<dyn Backend> {
    static CPU: OnceLock<Arc<CpuBackend>> = OnceLock::new();
    CPU.get_or_init(|| Arc::new(CpuBackend::new())).clone()
}

impl Backend for CpuBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn counters(&self) -> Counters {
        Counters {
            kernel_launches: self.kernel_launches.load(Ordering::Relaxed),
            ..Counters::default()
        }
    }

    fn reset_counters(&self) {
        self.kernel_launches.store(0, Ordering::Relaxed);
    }

    fn upload(&self, t: &Tensor) -> Result<Tensor> {
        Ok(t.clone())
    }

    fn compile_step(
        &self,
        plan: &crate::capture::StepPlan,
    ) -> Option<Result<Box<dyn crate::capture::StepProgram>>> {
        // Every thread's GEMM buffers now, not on a replayed step.
        warm_threads();
        Some(
            program::compile(plan, self.kernel_launches.clone())
                .map(|p| Box::new(p) as Box<dyn crate::capture::StepProgram>),
        )
    }

    fn dropout_mask(
        &self,
        shape: &[usize],
        key: crate::DropoutKey,
        p: f64,
    ) -> Result<Option<Tensor>> {
        self.launch();
        Ok(Some(nn::dropout_mask(shape, key.key(), p)))
    }

    fn download(&self, t: &Tensor) -> Result<Tensor> {
        Ok(t.clone())
    }

    fn unary(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(elementwise::unary(op, x))
    }

    fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(elementwise::binary(op, a, b))
    }

    fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(gemm::matmul(a, b))
    }

    fn matmul_t(
        &self,
        a: &Tensor,
        b: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Tensor> {
        self.launch();
        Ok(gemm::matmul_op(a, transpose_a, b, transpose_b))
    }

    fn reduce(&self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.launch();
        Ok(reduce::reduce(op, x, axis))
    }

    fn argmax(&self, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.launch();
        Ok(reduce::argmax(x, axis))
    }

    fn softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.launch();
        Ok(nn::softmax(x, axis, false))
    }

    fn log_softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.launch();
        Ok(nn::softmax(x, axis, true))
    }

    fn logsumexp(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.launch();
        Ok(nn::logsumexp(x, axis))
    }

    fn softmax_backward(&self, y: &Tensor, dy: &Tensor, axis: usize) -> Result<Tensor> {
        self.launch();
        Ok(nn::softmax_backward(y, dy, axis))
    }

    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        want_grad: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.launch();
        Ok(nn::cross_entropy(logits, targets, want_grad))
    }

    fn permute(&self, x: &Tensor, perm: &[usize]) -> Result<Tensor> {
        self.launch();
        Ok(layout::permute(x, perm))
    }

    fn gather_rows(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(nn::gather_rows(table, ids))
    }

    fn scatter_add_rows(&self, ids: &Tensor, src: &Tensor, vocab: usize) -> Result<Tensor> {
        self.launch();
        Ok(nn::scatter_add_rows(ids, src, vocab))
    }

    fn engram_hash(
        &self,
        ids: &Tensor,
        orders: &[usize],
        heads: usize,
        rows: usize,
        seed: u64,
    ) -> Result<Tensor> {
        self.launch();
        Ok(nn::engram_hash(ids, orders, heads, rows, seed))
    }

    fn causal_conv(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(nn::causal_conv(x, w))
    }

    fn causal_conv_backward(
        &self,
        x: &Tensor,
        w: &Tensor,
        dy: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        self.launch();
        Ok(nn::causal_conv_backward(x, w, dy))
    }

    fn sum_to_shape(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        self.launch();
        Ok(layout::sum_to_shape(g, shape))
    }

    fn rms_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
        self.launch();
        Ok(nn::rms_norm(x, eps))
    }

    fn rms_norm_backward(&self, x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(nn::rms_norm_backward(x, inv_rms, dy))
    }

    fn layer_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor, Tensor)> {
        self.launch();
        Ok(nn::layer_norm(x, eps))
    }

    fn layer_norm_backward(
        &self,
        x: &Tensor,
        mean: &Tensor,
        inv_std: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        self.launch();
        Ok(nn::layer_norm_backward(x, mean, inv_std, dy))
    }

    fn unary_backward(&self, op: UnaryOp, x: &Tensor, y: &Tensor, dy: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(nn::unary_backward(op, x, y, dy))
    }

    fn bias_act(&self, x: &Tensor, bias: &Tensor, act: UnaryOp) -> Result<Tensor> {
        self.launch();
        Ok(nn::bias_act(x, bias, act))
    }

    fn bias_act_backward(
        &self,
        x: &Tensor,
        bias: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        act: UnaryOp,
        want_bias: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.launch();
        Ok(nn::bias_act_backward(x, bias, y, dy, act, want_bias))
    }

    fn masked_softmax(&self, x: &Tensor, divisor: f32, causal: bool) -> Result<Tensor> {
        self.launch();
        Ok(nn::masked_softmax(x, divisor, causal))
    }

    fn masked_softmax_backward(
        &self,
        y: &Tensor,
        dy: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        self.launch();
        Ok(nn::masked_softmax_backward(y, dy, divisor, causal))
    }

    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        sinks: &Tensor,
        spec: AttentionSpec,
    ) -> Result<(Tensor, Tensor)> {
        self.launch();
        Ok(nn::attention(q, k, v, sinks, &spec))
    }

    fn attention_backward(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        out: &Tensor,
        lse: &Tensor,
        dout: &Tensor,
        spec: AttentionSpec,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        self.launch();
        Ok(nn::attention_backward(q, k, v, out, lse, dout, &spec))
    }

    fn select(&self, cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.launch();
        Ok(select::select(cond, a, b))
    }

    fn slice_axis(
        &self,
        x: &Tensor,
        axis: usize,
        start: usize,
        step: usize,
        len: usize,
    ) -> Result<Tensor> {
        self.launch();
        Ok(select::slice_axis(x, axis, start, step, len))
    }

    fn unslice_axis(
        &self,
        g: &Tensor,
        shape: &[usize],
        axis: usize,
        start: usize,
        step: usize,
    ) -> Result<Tensor> {
        self.launch();
        Ok(select::unslice_axis(g, shape, axis, start, step))
    }

    fn adam_update(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        step: AdamStep,
    ) -> Result<()> {
        self.launch();
        nn::adam_update(p, g, m, v, step.constants());
        Ok(())
    }
}

/// Whether the CPU's `attention_backward` on `a` runs in one pass per
/// key/value head on this thread pool (five products per key tile) rather
/// than two (seven); cost models count its work from it.
pub fn attention_backward_in_one_pass(a: &crate::AttentionDims) -> bool {
    nn::backward_in_one_pass(a)
}
