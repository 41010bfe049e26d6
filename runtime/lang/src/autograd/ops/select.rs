//! Selection, clamping and slicing: [`Tape::select`] (the language's `where`),
//! [`Tape::maximum`] / [`Tape::minimum`], [`Tape::clamp`], [`Tape::slice_axis`]
//! and [`Tape::concat_axis`].
//!
//! Backward rules (g is the output gradient; operands' gradients are summed
//! back to their shapes with `sum_to_shape`):
//!
//! | Op | Gradient(s) |
//! |---|---|
//! | select(c, a, b) | none for c; `select(c, g, 0)`; `select(c, 0, g)` |
//! | maximum(a, b) | g·m, g·(1 − m) with m = ½(1 + [a > b] − [a < b]) (ties split in half, as PyTorch) |
//! | minimum(a, b) | g·m, g·(1 − m) with m = ½(1 + [a < b] − [a > b]) |
//! | clamp(x, lo, hi) | g·(1 − [x < lo])·(1 − [x > hi]) (g where lo ≤ x ≤ hi, as PyTorch) |
//! | slice_axis | `unslice_axis(g)`: g written into zeros of the input's shape |
//! | concat_axis(a, b) | the two slices of g |

use crate::autograd::tape::{Ctx, Rule, Tape, Var};
use mlpl_devices::{BinaryOp, Result, Tensor};

/// Backward of [`Tape::select`].
#[derive(Debug)]
struct SelectRule;

impl Rule for SelectRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (k, c) = (cx.k, cx.input(0)?);
        let part = |i: usize| -> Result<Option<Tensor>> {
            if !cx.need[i] {
                return Ok(None);
            }
            let zero = k.constant(0.0)?;
            let d = if i == 1 {
                k.0.select(c, g, &zero)?
            } else {
                k.0.select(c, &zero, g)?
            };
            Ok(Some(k.reduce_to(&d, cx.shape(i))?))
        };
        Ok(vec![None, part(1)?, part(2)?])
    }
}

/// Backward of [`Tape::maximum`] and [`Tape::minimum`].
#[derive(Debug)]
struct ExtremumRule {
    /// `Max` or `Min`.
    op: BinaryOp,
}

impl Rule for ExtremumRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let (a, b) = (cx.input(0)?, cx.input(1)?);
        // `wins` is 1 where a is chosen outright, `loses` where b is.
        let (gt, lt) = (k.bin(BinaryOp::Gt, a, b)?, k.bin(BinaryOp::Lt, a, b)?);
        let (wins, loses) = match self.op {
            BinaryOp::Max => (gt, lt),
            _ => (lt, gt),
        };
        let m = k.mul_s(&k.add_s(&k.sub(&wins, &loses)?, 1.0)?, 0.5)?;
        let da = if cx.need[0] {
            Some(k.reduce_to(&k.mul(g, &m)?, a.shape())?)
        } else {
            None
        };
        let db = if cx.need[1] {
            Some(k.reduce_to(&k.mul(g, &k.rsub_s(1.0, &m)?)?, b.shape())?)
        } else {
            None
        };
        Ok(vec![da, db])
    }
}

/// Backward of [`Tape::clamp`]: the bounds.
#[derive(Debug)]
struct ClampRule {
    lo: f32,
    hi: f32,
}

impl Rule for ClampRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (k, x) = (cx.k, cx.input(0)?);
        let below = k.bin(BinaryOp::Lt, x, &k.constant(self.lo)?)?;
        let above = k.bin(BinaryOp::Gt, x, &k.constant(self.hi)?)?;
        let keep = k.mul(&k.rsub_s(1.0, &below)?, &k.rsub_s(1.0, &above)?)?;
        Ok(vec![Some(k.mul(g, &keep)?)])
    }
}

/// Backward of [`Tape::slice_axis`]: where the slice came from.
#[derive(Debug)]
struct SliceRule {
    axis: usize,
    start: usize,
    step: usize,
}

impl Rule for SliceRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let shape = cx.shape(0);
        let dx =
            cx.k.0
                .unslice_axis(g, shape, self.axis, self.start, self.step)?;
        Ok(vec![Some(dx)])
    }
}

/// Backward of [`Tape::concat_axis`]: the axis.
#[derive(Debug)]
struct ConcatAxisRule {
    axis: usize,
}

impl Rule for ConcatAxisRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let be = cx.k.0;
        let na = cx.shape(0)[self.axis];
        let nb = cx.shape(1)[self.axis];
        Ok(vec![
            if cx.need[0] {
                Some(be.slice_axis(g, self.axis, 0, 1, na)?)
            } else {
                None
            },
            if cx.need[1] {
                Some(be.slice_axis(g, self.axis, na, 1, nb)?)
            } else {
                None
            },
        ])
    }
}

impl Tape {
    /// `a` where `cond` ≠ 0, else `b`, the three broadcast together; `cond`
    /// gets no gradient. Panics for shapes that do not broadcast.
    pub fn select(&mut self, cond: Var, a: Var, b: Var) -> Result<Var> {
        let y = self
            .backend()
            .select(&self.value(cond)?, &self.value(a)?, &self.value(b)?)?;
        Ok(self.record(y, &[cond, a, b], Box::new(SelectRule)))
    }

    /// The element-wise maximum of `a` and `b`, broadcasting (NaN propagates).
    pub fn maximum(&mut self, a: Var, b: Var) -> Result<Var> {
        self.extremum(BinaryOp::Max, a, b)
    }

    /// The element-wise minimum of `a` and `b`, broadcasting (NaN propagates).
    pub fn minimum(&mut self, a: Var, b: Var) -> Result<Var> {
        self.extremum(BinaryOp::Min, a, b)
    }

    fn extremum(&mut self, op: BinaryOp, a: Var, b: Var) -> Result<Var> {
        let y = self.k().bin(op, &self.value(a)?, &self.value(b)?)?;
        Ok(self.record(y, &[a, b], Box::new(ExtremumRule { op })))
    }

    /// `minimum(maximum(x, lo), hi)` for constant bounds, with PyTorch's
    /// gradient (`g` where lo ≤ x ≤ hi, else 0).
    pub fn clamp(&mut self, x: Var, lo: f32, hi: f32) -> Result<Var> {
        let k = self.k();
        let low = k.bin(BinaryOp::Max, &self.value(x)?, &k.constant(lo)?)?;
        let y = k.bin(BinaryOp::Min, &low, &k.constant(hi)?)?;
        Ok(self.record(y, &[x], Box::new(ClampRule { lo, hi })))
    }

    /// The `len` positions `start, start + step, …` of `x` along `axis`.
    /// Panics when they are not all inside the axis or `step` is 0.
    pub fn slice_axis(
        &mut self,
        x: Var,
        axis: usize,
        start: usize,
        step: usize,
        len: usize,
    ) -> Result<Var> {
        let y = self
            .backend()
            .slice_axis(&self.value(x)?, axis, start, step, len)?;
        Ok(self.record(y, &[x], Box::new(SliceRule { axis, start, step })))
    }

    /// `a` and `b` joined along `axis` (every other axis equal): composed as
    /// two `unslice_axis` into the result's shape and an `add`.
    /// Panics when the other axes differ.
    pub fn concat_axis(&mut self, a: Var, b: Var, axis: usize) -> Result<Var> {
        let (sa, sb) = (self.shape(a).to_vec(), self.shape(b).to_vec());
        let mut shape = sa.clone();
        shape[axis] = sa[axis] + sb[axis];
        let k = self.k();
        let pa = k.0.unslice_axis(&self.value(a)?, &shape, axis, 0, 1)?;
        let pb =
            k.0.unslice_axis(&self.value(b)?, &shape, axis, sa[axis], 1)?;
        let y = k.add(&pa, &pb)?;
        Ok(self.record(y, &[a, b], Box::new(ConcatAxisRule { axis })))
    }
}
