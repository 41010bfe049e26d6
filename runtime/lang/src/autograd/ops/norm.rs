//! RMS norm and layer norm over the last axis (no affine part: the caller
//! multiplies by a gain and adds a bias with the element-wise ops).
//!
//! Both use the backend's fused forward and backward kernels; the forward's
//! per-row statistics are all the rules keep.

use crate::autograd::tape::{Ctx, Reads, Rule, Tape, Var};
use mlpl_devices::{Result, Tensor};

/// Backward of [`Tape::rms_norm`]: the saved `inv_rms` per row.
#[derive(Debug)]
struct RmsNormRule {
    inv_rms: Tensor,
}

impl Rule for RmsNormRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let dx = cx.k.0.rms_norm_backward(cx.input(0)?, &self.inv_rms, g)?;
        Ok(vec![Some(dx)])
    }

    fn reads(&self) -> Reads {
        Reads::inputs(&[0])
    }
}

/// Backward of [`Tape::layer_norm`]: the saved mean and `inv_std` per row.
#[derive(Debug)]
struct LayerNormRule {
    mean: Tensor,
    inv_std: Tensor,
}

impl Rule for LayerNormRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let dx =
            cx.k.0
                .layer_norm_backward(cx.input(0)?, &self.mean, &self.inv_std, g)?;
        Ok(vec![Some(dx)])
    }

    fn reads(&self) -> Reads {
        Reads::inputs(&[0])
    }
}

impl Tape {
    /// `x / √(mean(x²) + eps)` over the last axis.
    pub fn rms_norm(&mut self, x: Var, eps: f32) -> Result<Var> {
        let (y, inv_rms) = self.backend().rms_norm(&self.value(x)?, eps)?;
        Ok(self.record(y, &[x], Box::new(RmsNormRule { inv_rms })))
    }

    /// `(x − mean) / √(var + eps)` over the last axis (biased variance).
    pub fn layer_norm(&mut self, x: Var, eps: f32) -> Result<Var> {
        let (y, mean, inv_std) = self.backend().layer_norm(&self.value(x)?, eps)?;
        Ok(self.record(y, &[x], Box::new(LayerNormRule { mean, inv_std })))
    }
}
