//! A bias added to every row followed by an activation, fused:
//! [`Tape::bias_act`] records `act(x + bias)` as one op.
//!
//! Forward: the backend's `bias_act`. Backward: its `bias_act_backward`, which
//! recomputes `x + bias` (the sum is not kept) and returns `dx` and the bias
//! gradient summed over the rows. The values are those of `add` followed by
//! `unary`, without the intermediate node.

use crate::autograd::tape::{Ctx, Rule, Tape, Var};
use mlpl_devices::{Result, Tensor, UnaryOp};

/// Backward of [`Tape::bias_act`]: the activation.
#[derive(Debug)]
struct BiasActRule {
    act: UnaryOp,
}

impl Rule for BiasActRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (x, bias) = (cx.inputs[0], cx.inputs[1]);
        let (dx, dbias) =
            cx.k.0
                .bias_act_backward(x, bias, cx.out, g, self.act, cx.need[1])?;
        Ok(vec![cx.need[0].then_some(dx), dbias])
    }
}

impl Tape {
    /// `act(x + bias)` for `x: [..., n]` and a `bias` of `n` elements (shape
    /// `[n]` or `[1, n]`) added to every row.
    ///
    /// Panics when `bias` is not one row of `x`.
    pub fn bias_act(&mut self, x: Var, bias: Var, act: UnaryOp) -> Result<Var> {
        let (sx, sb) = (self.shape(x), self.shape(bias));
        let n = sx.last().copied().unwrap_or(1);
        assert!(
            !sx.is_empty()
                && sb.len() <= sx.len()
                && sb.last() == Some(&n)
                && sb[..sb.len() - 1].iter().all(|&d| d == 1),
            "bias_act: bias {sb:?} is not one row of {sx:?}"
        );
        let y = self
            .backend()
            .bias_act(self.value(x), self.value(bias), act)?;
        Ok(self.record(y, &[x, bias], Box::new(BiasActRule { act })))
    }
}
