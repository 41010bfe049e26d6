//! Fused attention: [`Tape::attention`].
//!
//! Forward: the backend's `attention` (scores, mask, softmax with optional
//! sinks and the product with the values in one kernel), whose per-row
//! logsumexp the rule keeps (`[B, H, T]`, no `[T, S]` matrix). Backward: the
//! backend's `attention_backward` for the queries, keys and values; a sink's
//! gradient is `−Σ_{b,t} exp(sink − lse)·Σ_d dout∘out` (the sink's softmax
//! weight times the row's `Σ_j p_j·dp_j`), formed here from primitives.

use crate::autograd::tape::{Ctx, Rule, Tape, Var};
use mlpl_devices::{AttentionSpec, ReduceOp, Result, Tensor};

/// Backward of [`Tape::attention`]: the call's spec and its logsumexp.
#[derive(Debug)]
struct AttentionRule {
    spec: AttentionSpec,
    lse: Tensor,
}

impl Rule for AttentionRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let [q, kk, v] = [cx.input(0)?, cx.input(1)?, cx.input(2)?];
        let mut grads = vec![None; cx.inputs.len()];
        if cx.need[..3].iter().any(|&n| n) {
            let (dq, dk, dv) =
                k.0.attention_backward(q, kk, v, cx.out()?, &self.lse, g, self.spec)?;
            for ((slot, grad), &need) in grads.iter_mut().zip([dq, dk, dv]).zip(cx.need) {
                *slot = need.then_some(grad);
            }
        }
        if cx.inputs.len() > 3 && cx.need.get(3) == Some(&true) {
            let sinks = cx.input(3)?;
            let h = sinks.numel();
            let delta = k.reduce(ReduceOp::Sum, &k.mul(g, cx.out()?)?, Some(3))?;
            let sink_p = k.un(
                mlpl_devices::UnaryOp::Exp,
                &k.sub(&sinks.reshape(vec![1, h, 1]), &self.lse)?,
            )?;
            let ds = k.reduce_to(&k.mul(&sink_p, &delta)?, &[1, h, 1])?;
            grads[3] = Some(k.neg(&ds)?.reshape(vec![h]));
        }
        Ok(grads)
    }
}

impl Tape {
    /// Attention of queries `q [B, H, T, D]` over keys and values `k`, `v`
    /// `[B, KV, S, D]` (KV divides H; a group of query heads shares one key and
    /// value head), masked and scaled by `spec`, with each head's sink logit
    /// `sinks [H]` in the softmax's denominator when given: `[B, H, T, D]`.
    /// Shapes are validated by the caller.
    pub fn attention(
        &mut self,
        q: Var,
        k: Var,
        v: Var,
        sinks: Option<Var>,
        spec: AttentionSpec,
    ) -> Result<Var> {
        let none = Tensor::zeros(vec![0]);
        let sink_t = match sinks {
            Some(s) => self.value(s)?,
            None => self.backend().upload(&none)?,
        };
        let (out, lse) = self.backend().attention(
            &self.value(q)?,
            &self.value(k)?,
            &self.value(v)?,
            &sink_t,
            spec,
        )?;
        let mut inputs = vec![q, k, v];
        inputs.extend(sinks);
        Ok(self.record(out, &inputs, Box::new(AttentionRule { spec, lse })))
    }
}
