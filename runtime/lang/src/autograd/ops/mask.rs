//! Masking attention scores: [`Tape::mask_fill`], the causal mask and the
//! fused [`Tape::masked_softmax`].
//!
//! Mask fill: forward `y = x·(1 − m) + m·value` with a constant 0/1 mask `m`;
//! backward `dx = g·(1 − m)` (zero at the filled entries). `1 − m` is all the
//! rule keeps. Masked softmax: the backend's `masked_softmax` forward and
//! `masked_softmax_backward` from the output; the rule keeps nothing.

use crate::autograd::tape::{Ctx, Rule, Tape, Var};
use mlpl_devices::{broadcast_shapes, Result, Tensor};

/// The value [`Tape::causal_mask`] and [`Tape::masked_softmax`] put above the
/// diagonal: large enough that its softmax weight is exactly 0 in f32, finite
/// so that `0 · fill` stays 0 (the devices crate's constant).
pub use mlpl_devices::CAUSAL_FILL;

/// Backward of [`Tape::mask_fill`]: the kept-entry mask `1 − m`.
#[derive(Debug)]
struct MaskRule {
    keep: Tensor,
}

impl Rule for MaskRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let dx = k.reduce_to(&k.mul(g, &self.keep)?, cx.shape(0))?;
        Ok(vec![Some(dx)])
    }
}

/// Backward of [`Tape::masked_softmax`]: the scale and whether it was causal.
#[derive(Debug)]
struct MaskedSoftmaxRule {
    divisor: f32,
    causal: bool,
}

impl Rule for MaskedSoftmaxRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let dx =
            cx.k.0
                .masked_softmax_backward(cx.out()?, g, self.divisor, self.causal)?;
        Ok(vec![Some(dx)])
    }
}

impl Tape {
    /// Attention probabilities from scores `x: [..., T, S]`: the softmax over
    /// the last axis of `x / divisor`, with the entries of column > row set to
    /// [`CAUSAL_FILL`] first when `causal` (gradient 0 there). One fused kernel
    /// each way; the same values as `div`, [`Tape::causal_mask`] and `softmax`.
    ///
    /// Panics for a scalar `x`, and for rank < 2 when `causal`.
    pub fn masked_softmax(&mut self, x: Var, divisor: f32, causal: bool) -> Result<Var> {
        let s = self.shape(x);
        assert!(
            s.len() >= if causal { 2 } else { 1 },
            "masked_softmax: scores {s:?} have too low a rank"
        );
        let y = self
            .backend()
            .masked_softmax(&self.value(x)?, divisor, causal)?;
        let rule = Box::new(MaskedSoftmaxRule { divisor, causal });
        Ok(self.record(y, &[x], rule))
    }

    /// `x` with the entries where the constant `mask` is 1 replaced by `value`
    /// (`mask` holds 0/1, broadcasts to `x`'s shape and must not enlarge it);
    /// the gradient is 0 at the replaced entries. `value` must be finite.
    pub fn mask_fill(&mut self, x: Var, mask: &Tensor, value: f32) -> Result<Var> {
        let s = self.shape(x);
        assert!(
            broadcast_shapes(s, mask.shape()).as_deref() == Some(s),
            "mask_fill: mask {:?} does not broadcast to {s:?}",
            mask.shape()
        );
        assert!(value.is_finite(), "mask_fill: value {value} is not finite");
        let k = self.k();
        let keep = k.rsub_s(1.0, mask)?;
        let y = k.add(&k.mul(&self.value(x)?, &keep)?, &k.mul_s(mask, value)?)?;
        Ok(self.record(y, &[x], Box::new(MaskRule { keep })))
    }

    /// The causal mask of attention scores `x: [..., T, S]`: entries with
    /// column > row become [`CAUSAL_FILL`] (−1e9), with gradient 0 there.
    ///
    /// Panics for rank < 2.
    pub fn causal_mask(&mut self, x: Var) -> Result<Var> {
        let s = self.shape(x);
        assert!(
            s.len() >= 2,
            "causal_mask: scores {s:?} must have rank >= 2"
        );
        let (t, n) = (s[s.len() - 2], s[s.len() - 1]);
        let m: Vec<f32> = (0..t * n)
            .map(|i| if i % n > i / n { 1.0 } else { 0.0 })
            .collect();
        let mask = self.backend().upload(&Tensor::from_vec(vec![t, n], m))?;
        self.mask_fill(x, &mask, CAUSAL_FILL)
    }
}
