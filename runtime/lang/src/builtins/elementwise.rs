//! Element-wise functions (LANGUAGE §10.3): unary maps keep names; binary ones
//! broadcast with name unification (§9).

use super::site::CallSite;
use mlpl_devices::{BinaryOp, UnaryOp};

use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::eval::{ops, Call};
use crate::value::Value;
use mlpl_diag::Diagnostic;

/// The array operation an arithmetic operator (`+ - * /`) applies.
pub fn operator_op(op: mlpl_syntax::BinOp) -> BinaryOp {
    use mlpl_syntax::BinOp::*;
    match op {
        Add => BinaryOp::Add,
        Sub => BinaryOp::Sub,
        Mul => BinaryOp::Mul,
        Div => BinaryOp::Div,
    }
}

macro_rules! unary_builtin {
    ($fn_name:ident, $name:literal, $summary:literal, $doc:literal, $example:literal) => {
        unary_builtin!($fn_name, $fn_name, $name, $summary, $doc, $example)
    };
    ($fn_name:ident, $rule:ident, $name:literal, $summary:literal, $doc:literal, $example:literal) => {
        Builtin {
            name: $name,
            params: &[req("x", Array)],
            summary: $summary,
            doc: $doc,
            example: $example,
            diff: Diff::Yes,
            facts: Facts::NONE,
            section: "10.3",
            run: $fn_name,
            shape: Some(super::elementwise_shapes::$rule),
        }
    };
}

macro_rules! binary_builtin {
    ($fn_name:ident, $name:literal, $diff:expr, $summary:literal, $doc:literal, $example:literal) => {
        Builtin {
            name: $name,
            params: &[req("a", Array), req("b", Array)],
            summary: $summary,
            doc: $doc,
            example: $example,
            diff: $diff,
            facts: Facts::NONE,
            section: "10.3",
            run: $fn_name,
            shape: Some(super::elementwise_shapes::$fn_name),
        }
    };
}

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    unary_builtin!(neg, "neg", "−x element-wise", "`neg(x)` negates every element; the same as unary `-`.", "neg([1, -2])"),
    unary_builtin!(exp, "exp", "eˣ element-wise", "`exp(x)` applies the exponential to every element.", "exp(1)"),
    unary_builtin!(log, "log", "natural logarithm element-wise", "`log(x)`: natural logarithm; `log(0)` is `-inf`, negative input gives NaN.", "log([1, 10])"),
    unary_builtin!(sqrt, "sqrt", "square root element-wise", "`sqrt(x)`: square root; negative input gives NaN.", "sqrt([4, 9])"),
    unary_builtin!(abs, "abs", "absolute value element-wise", "`abs(x)`: absolute value of every element.", "abs([-1, 2])"),
    unary_builtin!(sigmoid, "sigmoid", "1 / (1 + e^(−x)) element-wise", "`sigmoid(x)`: the logistic function of every element.", "sigmoid([0, 2])"),
    unary_builtin!(tanh, "tanh", "hyperbolic tangent element-wise", "`tanh(x)`: hyperbolic tangent of every element.", "tanh([0, 1])"),
    unary_builtin!(tanh, "tanh_fn", "hyperbolic tangent (same as tanh)", "`tanh_fn(x)`: the original MLPL's documented spelling of `tanh`.", "tanh_fn([0, 1])"),
    unary_builtin!(relu, "relu", "max(x, 0) element-wise", "`relu(x)`: max(x, 0) for every element.", "relu([-1, 2])"),
    unary_builtin!(gelu, "gelu", "GELU (tanh approximation) element-wise", "`gelu(x)` = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the GPT-2 form.", "gelu([-1, 0, 1])"),
    unary_builtin!(silu, "silu", "x·sigmoid(x) element-wise", "`silu(x)` = x·sigmoid(x), also called swish.", "silu([-1, 0, 1])"),
    unary_builtin!(sin, "sin", "sine element-wise (radians)", "`sin(x)`: the sine of every element, in radians; correctly rounded on the CPU, so the same bits on every machine.", "sin([0, 1.5707964])"),
    unary_builtin!(cos, "cos", "cosine element-wise (radians)", "`cos(x)`: the cosine of every element, in radians; correctly rounded on the CPU, so the same bits on every machine.", "cos([0, 3.1415927])"),
    unary_builtin!(erf, "erf", "error function element-wise", "`erf(x)` = (2/√π)·∫₀ˣ e^(−t²) dt for every element; correctly rounded on the CPU.", "erf([-1, 0, 1])"),
    unary_builtin!(gelu_erf, "gelu_erf", "exact GELU (erf form) element-wise", "`gelu_erf(x)` = 0.5·x·(1 + erf(x/√2)), the exact GELU: PyTorch's default `gelu` and BERT's; `gelu` is the tanh approximation of GPT-2 (`gelu_new`). They differ by up to about 5e-4.", "gelu_erf([-1, 0, 1])"),
    binary_builtin!(add, "add", Diff::Yes, "a + b with broadcasting", "`add(a, b)` is `a + b`: NumPy-style broadcasting with axis-name unification (E0201, E0202).", "add([1, 2], 10)"),
    binary_builtin!(sub, "sub", Diff::Yes, "a − b with broadcasting", "`sub(a, b)` is `a - b`: element-wise subtraction with broadcasting and axis-name unification (E0201, E0202).", "sub([1, 2], [3, 4])"),
    binary_builtin!(mul, "mul", Diff::Yes, "a · b with broadcasting", "`mul(a, b)` is `a * b`: element-wise product with broadcasting and axis-name unification (E0201, E0202).", "mul([[1], [2]], [3, 4])"),
    binary_builtin!(div, "div", Diff::Yes, "a / b with broadcasting", "`div(a, b)` is `a / b`; division by zero gives inf, -inf or NaN.", "div([1, 2], 4)"),
    binary_builtin!(pow, "pow", Diff::Yes, "aᵇ with broadcasting", "`pow(a, b)` raises a to the power b; a negative base with a non-integer exponent gives NaN.", "pow([2, 3], 2)"),
    binary_builtin!(gt, "gt", Diff::Zero, "1 where a > b, else 0", "`gt(a, b)` compares element-wise with broadcasting.", "gt([1, 5], 2)"),
    binary_builtin!(lt, "lt", Diff::Zero, "1 where a < b, else 0", "`lt(a, b)` compares element-wise with broadcasting.", "lt([1, 5], 2)"),
    binary_builtin!(maximum, "maximum", Diff::Yes, "element-wise maximum with broadcasting", "`maximum(a, b)` is the larger of a and b element by element, with broadcasting and axis-name unification (E0201, E0202); NaN propagates. The gradient goes to the larger operand, split in half on ties (as PyTorch).", "maximum([1, 5, 3], 2)"),
    binary_builtin!(minimum, "minimum", Diff::Yes, "element-wise minimum with broadcasting", "`minimum(a, b)` is the smaller of a and b element by element, with broadcasting and axis-name unification (E0201, E0202); NaN propagates. The gradient goes to the smaller operand, split in half on ties (as PyTorch).", "minimum([1, 5, 3], 2)"),
    binary_builtin!(eq, "eq", Diff::Zero, "1 where a equals b, else 0", "`eq(a, b)` is 1 where |a − b| < 2⁻⁵² (computed in float64), else 0.", "eq([1, 2], 2)"),
];

fn un(c: &mut Call, op: UnaryOp) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    Ok(Value::Array(ops::unary(c.it, op, &x, c.span)?))
}

fn neg(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Neg)
}
fn exp(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Exp)
}
fn log(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Log)
}
fn sqrt(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Sqrt)
}
fn abs(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Abs)
}
fn sigmoid(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Sigmoid)
}
fn tanh(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Tanh)
}
fn relu(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Relu)
}
fn gelu(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Gelu)
}
fn silu(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Silu)
}
fn sin(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Sin)
}
fn cos(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Cos)
}
fn erf(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::Erf)
}
fn gelu_erf(c: &mut Call) -> Result<Value, Diagnostic> {
    un(c, UnaryOp::GeluErf)
}

fn bin(c: &mut Call, op: BinaryOp) -> Result<Value, Diagnostic> {
    let a = c.array(0)?.clone();
    let b = c.array(1)?.clone();
    let operands = ops::Operands {
        left: &a,
        left_expr: c.args[0].expr,
        right: &b,
        right_expr: c.args[1].expr,
    };
    let name = c.name();
    Ok(Value::Array(ops::binary(
        c.it,
        op,
        name,
        &operands,
        c.name_span,
    )?))
}

fn add(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Add)
}
fn sub(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Sub)
}
fn mul(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Mul)
}
fn div(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Div)
}
fn pow(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Pow)
}
fn gt(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Gt)
}
fn lt(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Lt)
}
fn eq(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Eq)
}
fn maximum(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Max)
}
fn minimum(c: &mut Call) -> Result<Value, Diagnostic> {
    bin(c, BinaryOp::Min)
}
