//! Element-wise ops: broadcasting binary arithmetic, unary functions and
//! helpers that combine a tensor with a constant scalar.
//!
//! Backward rules (g is the output gradient, y the output; every binary
//! operand's gradient is summed back to its shape with `sum_to_shape`):
//!
//! | Op | Gradient(s) |
//! |---|---|
//! | a + b | g, g |
//! | a − b | g, −g |
//! | a · b | g·b, g·a |
//! | a / b | g/b, −(g/b)·y |
//! | aᵇ | g·b·a^(b−1); g·s^b·ln s with s = a where a > 0, else 1 (so 0 where a ≤ 0) |
//! | −x | −g |
//! | eˣ | g·y |
//! | ln x | g/x |
//! | √x | (g/y)·½ |
//! | \|x\| | g·sign x (0 at 0) |
//! | sigmoid | g·y·(1−y) |
//! | tanh | g·(1−y²) |
//! | relu | g·[x > 0] (0 at 0) |
//! | gelu (tanh form) | g·(½(1+t) + ½x(1−t²)·c(1+3κx²)), t = tanh(c(x+κx³)), c = √(2/π), κ = 0.044715 |
//! | silu | g·s(1 + x(1−s)), s = sigmoid x |
//! | sin | g·cos x |
//! | cos | g·(−sin x) |
//! | erf | g·(2/√π)·e^(−x²) |
//! | gelu_erf (exact) | g·(Φ(x) + x·φ(x)), Φ(x) = ½(1 + erf(x/√2)), φ(x) = e^(−x²/2)/√(2π) |

use crate::autograd::tape::{Ctx, Reads, Rule, Tape, Var};
use mlpl_devices::{broadcast_shapes, Backend, BinaryOp, Result, Tensor, UnaryOp};

/// Backward of a differentiable binary op.
#[derive(Debug)]
struct BinaryRule {
    op: BinaryOp,
}

impl Rule for BinaryRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let (sa, sb) = (cx.shape(0), cx.shape(1));
        let (na, nb) = (cx.need[0], cx.need[1]);
        let (da, db) = match self.op {
            BinaryOp::Add => (na.then(|| g.clone()), nb.then(|| g.clone())),
            BinaryOp::Sub => (
                na.then(|| g.clone()),
                if nb { Some(k.neg(g)?) } else { None },
            ),
            BinaryOp::Mul => (
                if na {
                    Some(k.mul(g, cx.input(1)?)?)
                } else {
                    None
                },
                if nb {
                    Some(k.mul(g, cx.input(0)?)?)
                } else {
                    None
                },
            ),
            BinaryOp::Div => {
                let gb = k.div(g, cx.input(1)?)?;
                let db = if nb {
                    Some(k.neg(&k.mul(&gb, cx.out()?)?)?)
                } else {
                    None
                };
                (na.then_some(gb), db)
            }
            BinaryOp::Pow => {
                let (a, b) = (cx.input(0)?, cx.input(1)?);
                let da = if na {
                    let p = k.bin(BinaryOp::Pow, a, &k.add_s(b, -1.0)?)?;
                    Some(k.mul(g, &k.mul(b, &p)?)?)
                } else {
                    None
                };
                let db = if nb {
                    // s = a where a > 0, else 1: then s^b · ln s is a^b · ln a
                    // where a > 0 and exactly 0 elsewhere (no inf · 0).
                    let pos = k.bin(BinaryOp::Gt, a, &k.constant(0.0)?)?;
                    let pos_part = k.bin(BinaryOp::Max, a, &k.constant(0.0)?)?;
                    let s = k.add(&pos_part, &k.rsub_s(1.0, &pos)?)?;
                    let ys = k.bin(BinaryOp::Pow, &s, b)?;
                    let t = k.mul(&ys, &k.un(UnaryOp::Log, &s)?)?;
                    Some(k.mul(g, &t)?)
                } else {
                    None
                };
                (da, db)
            }
            op => unreachable!("{op:?} is not differentiable"),
        };
        Ok(vec![
            da.map(|d| k.reduce_to(&d, sa)).transpose()?,
            db.map(|d| k.reduce_to(&d, sb)).transpose()?,
        ])
    }

    fn reads(&self) -> Reads {
        match self.op {
            BinaryOp::Add | BinaryOp::Sub => Reads::NONE,
            BinaryOp::Mul => Reads::inputs(&[0, 1]),
            BinaryOp::Div => Reads::inputs(&[1]).and_out(),
            _ => Reads::ALL,
        }
    }
}

/// Backward of a unary function: the backend's `unary_backward` (a fused
/// kernel on the CPU; composed from element-wise kernels elsewhere).
#[derive(Debug)]
struct UnaryRule {
    op: UnaryOp,
}

impl Rule for UnaryRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let dx = match self.op {
            UnaryOp::Relu => relu_backward(cx.k.0, cx.out()?, g)?,
            op => cx.k.0.unary_backward(op, cx.input(0)?, cx.out()?, g)?,
        };
        Ok(vec![Some(dx)])
    }

    fn reads(&self) -> Reads {
        match self.op {
            UnaryOp::Relu => Reads::NONE.and_out(),
            _ => Reads::ALL,
        }
    }
}

/// ReLU's `dx` from its output `y` alone: `g·[x > 0]` is `g·[y > 0]` for every
/// `x` (NaN and ±0 included, since `y` is `x` where `x > 0` and 0 elsewhere),
/// so `unary_backward` given `y` for `x` gives the same bits.
pub(super) fn relu_backward(be: &dyn Backend, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    be.unary_backward(UnaryOp::Relu, y, y, g)
}

impl Tape {
    /// A differentiable broadcasting binary op (`Add`, `Sub`, `Mul`, `Div` or
    /// `Pow`); the result has the broadcast shape of the operands (LANGUAGE §9).
    ///
    /// Panics for the comparison and min/max ops (∂ = 0 or max-like: record
    /// those results as constants instead) and for shapes that do not broadcast.
    pub fn binary(&mut self, op: BinaryOp, a: Var, b: Var) -> Result<Var> {
        assert!(
            matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow
            ),
            "{op:?} is not a differentiable op"
        );
        let (sa, sb) = (self.shape(a), self.shape(b));
        assert!(
            broadcast_shapes(sa, sb).is_some(),
            "{op:?}: shapes {sa:?} and {sb:?} do not broadcast"
        );
        let y = self.k().bin(op, &self.value(a)?, &self.value(b)?)?;
        Ok(self.record(y, &[a, b], Box::new(BinaryRule { op })))
    }

    /// `a + b`, broadcasting.
    pub fn add(&mut self, a: Var, b: Var) -> Result<Var> {
        self.binary(BinaryOp::Add, a, b)
    }

    /// `a − b`, broadcasting.
    pub fn sub(&mut self, a: Var, b: Var) -> Result<Var> {
        self.binary(BinaryOp::Sub, a, b)
    }

    /// `a · b` element-wise, broadcasting.
    pub fn mul(&mut self, a: Var, b: Var) -> Result<Var> {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// `a / b`, broadcasting.
    pub fn div(&mut self, a: Var, b: Var) -> Result<Var> {
        self.binary(BinaryOp::Div, a, b)
    }

    /// `aᵇ`, broadcasting. The gradient with respect to `b` is `aᵇ·ln a` where
    /// `a > 0` and 0 elsewhere (LANGUAGE §10.3).
    pub fn pow(&mut self, a: Var, b: Var) -> Result<Var> {
        self.binary(BinaryOp::Pow, a, b)
    }

    /// A unary element-wise function (every [`UnaryOp`] is differentiable).
    pub fn unary(&mut self, op: UnaryOp, x: Var) -> Result<Var> {
        let y = self.k().un(op, &self.value(x)?)?;
        Ok(self.record(y, &[x], Box::new(UnaryRule { op })))
    }

    /// `−x`.
    pub fn neg(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Neg, x)
    }

    /// `eˣ`.
    pub fn exp(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Exp, x)
    }

    /// Natural logarithm.
    pub fn log(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Log, x)
    }

    /// Square root.
    pub fn sqrt(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Sqrt, x)
    }

    /// `|x|` (gradient 0 at 0).
    pub fn abs(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Abs, x)
    }

    /// `1 / (1 + e^(−x))`.
    pub fn sigmoid(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Sigmoid, x)
    }

    /// Hyperbolic tangent.
    pub fn tanh(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Tanh, x)
    }

    /// `max(x, 0)` (gradient 0 at 0).
    pub fn relu(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Relu, x)
    }

    /// GELU, tanh approximation (the GPT-2 form).
    pub fn gelu(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Gelu, x)
    }

    /// `x · sigmoid(x)` (swish).
    pub fn silu(&mut self, x: Var) -> Result<Var> {
        self.unary(UnaryOp::Silu, x)
    }

    /// `x + c` for a constant scalar `c`.
    pub fn add_scalar(&mut self, x: Var, c: f32) -> Result<Var> {
        let c = self.scalar(c)?;
        self.add(x, c)
    }

    /// `x − c` for a constant scalar `c`.
    pub fn sub_scalar(&mut self, x: Var, c: f32) -> Result<Var> {
        let c = self.scalar(c)?;
        self.sub(x, c)
    }

    /// `c − x` for a constant scalar `c`.
    pub fn rsub_scalar(&mut self, c: f32, x: Var) -> Result<Var> {
        let c = self.scalar(c)?;
        self.sub(c, x)
    }

    /// `x · c` for a constant scalar `c`.
    pub fn mul_scalar(&mut self, x: Var, c: f32) -> Result<Var> {
        let c = self.scalar(c)?;
        self.mul(x, c)
    }

    /// `x / c` for a constant scalar `c`.
    pub fn div_scalar(&mut self, x: Var, c: f32) -> Result<Var> {
        let c = self.scalar(c)?;
        self.div(x, c)
    }

    /// `xᶜ` for a constant scalar exponent `c`.
    pub fn pow_scalar(&mut self, x: Var, c: f32) -> Result<Var> {
        let c = self.scalar(c)?;
        self.pow(x, c)
    }
}
