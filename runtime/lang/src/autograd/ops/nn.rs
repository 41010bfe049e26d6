//! Softmax, log-softmax, logsumexp and the fused cross-entropy loss.
//!
//! Backward: softmax → the backend's `softmax_backward(y, g)`; log-softmax →
//! `g − exp(y)·sum(g, axis)` (composed: `exp`, `reduce`, `mul`, `sub`);
//! logsumexp → `exp(x − y)·g`, `y` and `g` with the axis kept as 1 (the softmax
//! of `x` times the incoming gradient);
//! cross-entropy → the `dlogits` the fused forward kernel returned, times `g`.

use crate::autograd::tape::{Ctx, Reads, Rule, Tape, Var};
use mlpl_devices::{ReduceOp, Result, Tensor, UnaryOp};

/// Backward of [`Tape::softmax`] and [`Tape::log_softmax`].
#[derive(Debug)]
struct SoftmaxRule {
    axis: usize,
    log: bool,
}

impl Rule for SoftmaxRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let y = cx.out()?;
        let dx = if self.log {
            let mut keep = y.shape().to_vec();
            keep[self.axis] = 1;
            let s = k.reduce(ReduceOp::Sum, g, Some(self.axis))?.reshape(keep);
            k.sub(g, &k.mul(&k.un(UnaryOp::Exp, y)?, &s)?)?
        } else {
            k.0.softmax_backward(y, g, self.axis)?
        };
        Ok(vec![Some(dx)])
    }
}

/// Backward of [`Tape::logsumexp`].
#[derive(Debug)]
struct LogSumExpRule {
    axis: usize,
}

impl Rule for LogSumExpRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let x = cx.input(0)?;
        let mut keep = x.shape().to_vec();
        keep[self.axis] = 1;
        let y = cx.out()?.reshape(keep.clone());
        let softmax = k.un(UnaryOp::Exp, &k.sub(x, &y)?)?;
        Ok(vec![Some(k.mul(&softmax, &g.reshape(keep))?)])
    }
}

/// Backward of [`Tape::cross_entropy`]: the saved gradient of the mean loss.
#[derive(Debug)]
struct CrossEntropyRule {
    dlogits: Tensor,
}

impl Rule for CrossEntropyRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(cx.k.mul(&self.dlogits, g)?)])
    }

    fn reads(&self) -> Reads {
        Reads::NONE
    }
}

impl Tape {
    /// Records softmax or log-softmax along `axis`.
    fn softmax_op(&mut self, x: Var, axis: usize, log: bool) -> Result<Var> {
        let s = self.shape(x);
        assert!(
            axis < s.len(),
            "softmax: axis {axis} out of range for shape {s:?}"
        );
        let be = self.backend();
        let xv = &self.value(x)?;
        let y = if log {
            be.log_softmax(xv, axis)?
        } else {
            be.softmax(xv, axis)?
        };
        Ok(self.record(y, &[x], Box::new(SoftmaxRule { axis, log })))
    }

    /// `exp(x − max) / Σ exp(x − max)` along `axis` (LANGUAGE §10.5; the
    /// language's one-argument form uses the last axis).
    pub fn softmax(&mut self, x: Var, axis: usize) -> Result<Var> {
        self.softmax_op(x, axis, false)
    }

    /// `x − max − log Σ exp(x − max)` along `axis`.
    pub fn log_softmax(&mut self, x: Var, axis: usize) -> Result<Var> {
        self.softmax_op(x, axis, true)
    }

    /// `log Σ exp(x)` along `axis`, which is removed from the shape: the
    /// backend's `logsumexp` kernel (LANGUAGE reference: docs/language.md).
    pub fn logsumexp(&mut self, x: Var, axis: usize) -> Result<Var> {
        let s = self.shape(x);
        assert!(
            axis < s.len(),
            "logsumexp: axis {axis} out of range for shape {s:?}"
        );
        let y = self.backend().logsumexp(&self.value(x)?, axis)?;
        Ok(self.record(y, &[x], Box::new(LogSumExpRule { axis })))
    }

    /// The mean cross-entropy (shape `[]`) of `logits: [N, V]` (or `[B, T, V]`,
    /// whose leading axes are rows) against the constant integer-valued
    /// `targets` (N, or B·T, elements in `[0, V)`, validated by the caller).
    ///
    /// Runs the backend's fused kernel once; when `logits` needs a gradient the
    /// kernel's `dlogits = (softmax − onehot) / N` is kept for backward.
    pub fn cross_entropy(&mut self, logits: Var, targets: &Tensor) -> Result<Var> {
        let s = self.shape(logits);
        assert!(!s.is_empty(), "cross_entropy: scalar logits");
        let rows: usize = s[..s.len() - 1].iter().product();
        assert_eq!(
            targets.numel(),
            rows,
            "cross_entropy: {} targets for logits {s:?}",
            targets.numel()
        );
        let want = self.requires_grad(logits);
        let (loss, dlogits) = self
            .backend()
            .cross_entropy(&self.value(logits)?, targets, want)?;
        // Without `want`, nothing is saved: `record` drops the rule at once.
        let dlogits = dlogits.unwrap_or_else(|| Tensor::scalar(0.0));
        let rule = Box::new(CrossEntropyRule { dlogits });
        Ok(self.record(loss, &[logits], rule))
    }
}
