//! Helpers that compose the backend's primitive kernels into the small
//! operations backward rules need (constants, broadcasting a gradient up to a
//! shape, summing it back down). Everything runs through the backend; the only
//! host data created are constants (scalars, zeros, ones, index lists), which
//! are uploaded.

use mlpl_devices::{Backend, BinaryOp, ReduceOp, Result, Tensor, UnaryOp};

/// The kernels of one backend, with shorthand for the common calls.
#[derive(Clone, Copy, Debug)]
pub struct K<'a>(pub &'a dyn Backend);

impl<'a> K<'a> {
    /// A broadcasting binary op.
    pub fn bin(self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.0.binary(op, a, b)
    }

    /// `a + b` (broadcasting).
    pub fn add(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.bin(BinaryOp::Add, a, b)
    }

    /// `a − b` (broadcasting).
    pub fn sub(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.bin(BinaryOp::Sub, a, b)
    }

    /// `a · b` (broadcasting).
    pub fn mul(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.bin(BinaryOp::Mul, a, b)
    }

    /// `a / b` (broadcasting).
    pub fn div(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.bin(BinaryOp::Div, a, b)
    }

    /// An element-wise function.
    pub fn un(self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        self.0.unary(op, x)
    }

    /// `−x`.
    pub fn neg(self, x: &Tensor) -> Result<Tensor> {
        self.un(UnaryOp::Neg, x)
    }

    /// The scalar `v` (shape `[]`) on the device.
    pub fn constant(self, v: f32) -> Result<Tensor> {
        self.0.upload(&Tensor::scalar(v))
    }

    /// `x · c` for a constant `c`.
    pub fn mul_s(self, x: &Tensor, c: f32) -> Result<Tensor> {
        self.mul(x, &self.constant(c)?)
    }

    /// `x + c` for a constant `c`.
    pub fn add_s(self, x: &Tensor, c: f32) -> Result<Tensor> {
        self.add(x, &self.constant(c)?)
    }

    /// `c − x` for a constant `c`.
    pub fn rsub_s(self, c: f32, x: &Tensor) -> Result<Tensor> {
        self.sub(&self.constant(c)?, x)
    }

    /// Zeros of `shape` on the device.
    pub fn zeros(self, shape: &[usize]) -> Result<Tensor> {
        self.0.upload(&Tensor::zeros(shape.to_vec()))
    }

    /// Ones of `shape` on the device.
    pub fn ones(self, shape: &[usize]) -> Result<Tensor> {
        self.0.upload(&Tensor::full(shape.to_vec(), 1.0))
    }

    /// `g` broadcast up to `shape` (which `g`'s shape must broadcast to).
    /// Composed as `g + zeros(shape)`: the backend has no broadcast-copy kernel.
    pub fn expand(self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        if g.shape() == shape {
            return Ok(g.clone());
        }
        self.add(g, &self.zeros(shape)?)
    }

    /// `g` summed down to `shape` (over stretched and missing leading axes);
    /// no kernel runs when the shapes already agree.
    pub fn reduce_to(self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        if g.shape() == shape {
            return Ok(g.clone());
        }
        self.0.sum_to_shape(g, shape)
    }

    /// A reduction along `axis`, or over everything.
    pub fn reduce(self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.0.reduce(op, x, axis)
    }

    /// `x` with its last two axes swapped (rank ≥ 2).
    pub fn transpose_last2(self, x: &Tensor) -> Result<Tensor> {
        let r = x.rank();
        assert!(r >= 2, "transpose_last2: rank {r} < 2");
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        self.0.permute(x, &perm)
    }
}

/// `shape` with axis `axis` set to 1 (the "keepdims" shape of a reduction),
/// or all ones when `axis` is `None` (a full reduction).
pub fn keepdim_shape(shape: &[usize], axis: Option<usize>) -> Vec<usize> {
    match axis {
        Some(a) => {
            let mut s = shape.to_vec();
            s[a] = 1;
            s
        }
        None => vec![1; shape.len()],
    }
}
