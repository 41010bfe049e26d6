//! The value of an element-wise operation on exact float64 numbers (LANGUAGE §6):
//! what the interpreter computes for exact scalars and what the checker folds for
//! known constants.

use mlpl_devices::math;
use mlpl_devices::{BinaryOp, UnaryOp};

/// The value of a unary op on a float64 number.
pub fn unary_f64(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => math::exp(x),
        UnaryOp::Log => math::log(x),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + math::exp(-x)),
        UnaryOp::Tanh => math::tanh(x),
        UnaryOp::Relu => {
            if x > 0.0 {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => {
            0.5 * x
                * (1.0
                    + math::tanh((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)))
        }
        UnaryOp::Silu => x / (1.0 + math::exp(-x)),
        UnaryOp::Sin => math::sin(x),
        UnaryOp::Cos => math::cos(x),
        UnaryOp::Erf => math::erf(x),
        UnaryOp::GeluErf => 0.5 * x * (1.0 + math::erf(x * std::f64::consts::FRAC_1_SQRT_2)),
    }
}

/// The value of a binary op on float64 numbers.
pub fn binary_f64(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => math::pow(a, b),
        BinaryOp::Gt => f64::from(u8::from(a > b)),
        BinaryOp::Lt => f64::from(u8::from(a < b)),
        BinaryOp::Eq => f64::from(u8::from((a - b).abs() < 2f64.powi(-52))),
        // NaN propagates, as in the kernels (NumPy's `maximum`, not `fmax`).
        BinaryOp::Max | BinaryOp::Min if a.is_nan() || b.is_nan() => a + b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
    }
}
