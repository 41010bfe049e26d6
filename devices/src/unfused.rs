//! [`Unfused`]: a backend that runs another backend's primitive kernels and
//! the composed default of every fused method, the reference that fused
//! kernels are tested and measured against.

use crate::backend::{
    AdamStep, Backend, BinaryOp, Counters, DeviceKind, ReduceOp, Result, UnaryOp,
};
use crate::tensor::Tensor;

/// Runs every primitive kernel on the wrapped backend, but the fused methods
/// (`unary_backward`, `bias_act`, `bias_act_backward`, `masked_softmax`,
/// `masked_softmax_backward`) through the [`Backend`] trait's defaults, which
/// compose them from those primitives. A fused kernel must give the same bits
/// as `Unfused` of its backend.
#[derive(Debug, Default)]
pub struct Unfused<B>(pub B);

impl<B: Backend> Backend for Unfused<B> {
    fn kind(&self) -> DeviceKind {
        self.0.kind()
    }
    fn counters(&self) -> Counters {
        self.0.counters()
    }
    fn reset_counters(&self) {
        self.0.reset_counters()
    }
    fn take_fallbacks(&self) -> Vec<&'static str> {
        self.0.take_fallbacks()
    }
    fn upload(&self, t: &Tensor) -> Result<Tensor> {
        self.0.upload(t)
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        self.0.download(t)
    }
    fn unary(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        self.0.unary(op, x)
    }
    fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.0.binary(op, a, b)
    }
    fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.0.matmul(a, b)
    }
    fn matmul_t(&self, a: &Tensor, b: &Tensor, ta: bool, tb: bool) -> Result<Tensor> {
        self.0.matmul_t(a, b, ta, tb)
    }
    fn reduce(&self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.0.reduce(op, x, axis)
    }
    fn argmax(&self, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.0.argmax(x, axis)
    }
    fn softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.0.softmax(x, axis)
    }
    fn log_softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.0.log_softmax(x, axis)
    }
    fn logsumexp(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.0.logsumexp(x, axis)
    }
    fn softmax_backward(&self, y: &Tensor, dy: &Tensor, axis: usize) -> Result<Tensor> {
        self.0.softmax_backward(y, dy, axis)
    }
    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        want_grad: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.0.cross_entropy(logits, targets, want_grad)
    }
    fn permute(&self, x: &Tensor, perm: &[usize]) -> Result<Tensor> {
        self.0.permute(x, perm)
    }
    fn gather_rows(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
        self.0.gather_rows(table, ids)
    }
    fn scatter_add_rows(&self, ids: &Tensor, src: &Tensor, vocab: usize) -> Result<Tensor> {
        self.0.scatter_add_rows(ids, src, vocab)
    }
    fn sum_to_shape(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        self.0.sum_to_shape(g, shape)
    }
    fn rms_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
        self.0.rms_norm(x, eps)
    }
    fn rms_norm_backward(&self, x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Result<Tensor> {
        self.0.rms_norm_backward(x, inv_rms, dy)
    }
    fn layer_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor, Tensor)> {
        self.0.layer_norm(x, eps)
    }
    fn layer_norm_backward(
        &self,
        x: &Tensor,
        mean: &Tensor,
        inv_std: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        self.0.layer_norm_backward(x, mean, inv_std, dy)
    }
    fn dropout_mask(&self, shape: &[usize], key: u64, p: f64) -> Result<Option<Tensor>> {
        self.0.dropout_mask(shape, key, p)
    }
    fn adam_update(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        step: &AdamStep,
    ) -> Result<()> {
        self.0.adam_update(p, g, m, v, step)
    }
}
