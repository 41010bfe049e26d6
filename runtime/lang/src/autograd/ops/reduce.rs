//! Reductions: sum, mean and product, over everything or along one axis
//! (max-like reductions are not differentiable here).
//!
//! Backward (g reshaped to the "keepdims" shape, then broadcast to x's shape):
//!
//! - sum: `dx = expand(g)`.
//! - mean: `dx = expand(g) / max(n, 1)`.
//! - prod: zero-safe, without dividing by zero. With `z = [x == 0]` (the
//!   backend's `Eq`, |x| < 2⁻⁵²), `s = x + z` (zeros replaced by ones),
//!   `p = prod(s)` and `c = sum(z)` along the reduced axes:
//!   `dx = g · ((1 − z)·[c == 0]·p/s + z·[c == 1]·p)`, i.e. `y/x` when no
//!   factor is zero, the product of the others for the only zero factor, and 0
//!   everywhere when two or more factors are zero. A nonzero factor smaller
//!   than 2⁻⁵² counts as zero (its own gradient is still exact; the others'
//!   are then reported as 0 instead of a value below 2⁻⁵²·|product of the rest|).

use crate::autograd::kernels::keepdim_shape;
use crate::autograd::tape::{Ctx, Rule, Tape, Var};
use mlpl_devices::{BinaryOp, ReduceOp, Result, Tensor};

/// Backward of [`Tape::sum`], [`Tape::mean`] and [`Tape::prod`].
#[derive(Debug)]
struct ReduceRule {
    op: ReduceOp,
    axis: Option<usize>,
}

impl Rule for ReduceRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let x = cx.input(0)?;
        let keep = keepdim_shape(x.shape(), self.axis);
        let gk = g.reshape(keep.clone());
        let dx = match self.op {
            ReduceOp::Sum => k.expand(&gk, x.shape())?,
            ReduceOp::Mean => {
                let n = match self.axis {
                    Some(a) => x.shape()[a],
                    None => x.numel(),
                };
                k.expand(&k.mul_s(&gk, 1.0 / n.max(1) as f32)?, x.shape())?
            }
            ReduceOp::Prod => {
                let z = k.bin(BinaryOp::Eq, x, &k.constant(0.0)?)?;
                let s = k.add(x, &z)?;
                let p = k
                    .reduce(ReduceOp::Prod, &s, self.axis)?
                    .reshape(keep.clone());
                let c = k.reduce(ReduceOp::Sum, &z, self.axis)?.reshape(keep);
                let none_zero = k.bin(BinaryOp::Eq, &c, &k.constant(0.0)?)?;
                let one_zero = k.bin(BinaryOp::Eq, &c, &k.constant(1.0)?)?;
                let others = k.mul(&k.div(&p, &s)?, &k.rsub_s(1.0, &z)?)?;
                let others = k.mul(&others, &none_zero)?;
                let at_zero = k.mul(&z, &k.mul(&p, &one_zero)?)?;
                k.mul(&k.add(&others, &at_zero)?, &gk)?
            }
            ReduceOp::Max => unreachable!("max is not differentiable on the tape"),
        };
        Ok(vec![Some(dx)])
    }
}

impl Tape {
    /// Records a reduction: along `axis` (removed from the shape) or, with
    /// `None`, over everything (result shape `[]`).
    fn reduction(&mut self, op: ReduceOp, x: Var, axis: Option<usize>) -> Result<Var> {
        if let Some(a) = axis {
            let s = self.shape(x);
            assert!(a < s.len(), "{op:?}: axis {a} out of range for shape {s:?}");
        }
        let y = self.k().reduce(op, &self.value(x)?, axis)?;
        Ok(self.record(y, &[x], Box::new(ReduceRule { op, axis })))
    }

    /// The sum along `axis`, or of every element with `None` (0 when empty).
    pub fn sum(&mut self, x: Var, axis: Option<usize>) -> Result<Var> {
        self.reduction(ReduceOp::Sum, x, axis)
    }

    /// The mean along `axis`, or of every element with `None` (sum / max(n, 1)).
    pub fn mean(&mut self, x: Var, axis: Option<usize>) -> Result<Var> {
        self.reduction(ReduceOp::Mean, x, axis)
    }

    /// The product along `axis`, or of every element with `None` (1 when empty).
    /// The gradient is exact in the presence of zeros (see the module docs).
    pub fn prod(&mut self, x: Var, axis: Option<usize>) -> Result<Var> {
        self.reduction(ReduceOp::Prod, x, axis)
    }
}
