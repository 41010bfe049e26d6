//! A bias added to every row followed by an activation, fused:
//! [`Tape::bias_act`] records `act(x + bias)` as one op.
//!
//! Forward: the backend's `bias_act`. Backward: its `bias_act_backward`, which
//! recomputes `x + bias` (the sum is not kept) and returns `dx` and the bias
//! gradient summed over the rows. The values are those of `add` followed by
//! `unary`, without the intermediate node. ReLU's derivative is a function of
//! its output, so for ReLU only the output is kept (`unary_backward` on it and
//! `sum_to_shape`, which the fused kernel's bias gradient matches bit for
//! bit), as PyTorch's ReLU saves only its result.

use super::elementwise::relu_backward;
use crate::autograd::tape::{Ctx, Reads, Rule, Tape, Var};
use mlpl_devices::{Result, Tensor, UnaryOp};

/// Backward of [`Tape::bias_act`]: the activation.
#[derive(Debug)]
struct BiasActRule {
    act: UnaryOp,
}

impl Rule for BiasActRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        if self.act == UnaryOp::Relu {
            // relu′(x + b) = [x + b > 0] = [y > 0]: the same bits from the
            // output alone, so neither `x` nor the bias is kept for backward.
            let be = cx.k.0;
            let dx = relu_backward(be, cx.out()?, g)?;
            let dbias = if cx.need[1] {
                Some(be.sum_to_shape(&dx, cx.shape(1))?)
            } else {
                None
            };
            return Ok(vec![cx.need[0].then_some(dx), dbias]);
        }
        let (x, bias) = (cx.input(0)?, cx.input(1)?);
        let (dx, dbias) =
            cx.k.0
                .bias_act_backward(x, bias, cx.out()?, g, self.act, cx.need[1])?;
        Ok(vec![cx.need[0].then_some(dx), dbias])
    }

    fn reads(&self) -> Reads {
        if self.act == UnaryOp::Relu {
            Reads::NONE.and_out()
        } else {
            Reads::ALL
        }
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
            .bias_act(&self.value(x)?, &self.value(bias)?, act)?;
        Ok(self.record(y, &[x, bias], Box::new(BiasActRule { act })))
    }
}
