//! The short causal depthwise convolution of Engram layers.
//!
//! Backward: the backend's `causal_conv_backward`, which gives the gradients of
//! both the input and the taps.

use crate::autograd::tape::{Ctx, Rule, Tape, Var};
use mlpl_devices::{Result, Tensor};

/// Backward of [`Tape::causal_conv`]: everything it needs is on the tape.
#[derive(Debug)]
struct CausalConvRule;

impl Rule for CausalConvRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (dx, dw) = cx.k.0.causal_conv_backward(cx.input(0)?, cx.input(1)?, g)?;
        Ok(vec![Some(dx), Some(dw)])
    }
}

impl Tape {
    /// `y[.., t, c] = Σ_{j<K, j≤t} w[j, c]·x[.., t−j, c]` for `x [.., T, C]` and
    /// `w [K, C]` (shapes validated by the caller).
    pub fn causal_conv(&mut self, x: Var, w: Var) -> Result<Var> {
        let y = self
            .backend()
            .causal_conv(&self.value(x)?, &self.value(w)?)?;
        Ok(self.record(y, &[x, w], Box::new(CausalConvRule)))
    }
}
