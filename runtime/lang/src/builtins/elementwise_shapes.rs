//! Shape rules of the element-wise builtins (LANGUAGE §10.3), next to their
//! runtime implementations in `elementwise.rs`: unary maps keep shape and names;
//! binary ones broadcast with name unification (§9), as the operators do.

use super::site::CallSite;
use mlpl_devices::{BinaryOp, UnaryOp};

use crate::check::abstract_value::{AbsArray, AbsValue};
use crate::check::broadcast::{self, Operand};
use crate::check::ctx::ShapeCtx;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

fn un(c: &mut ShapeCtx, op: UnaryOp) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    let folded = broadcast::fold_unary(op, &x);
    Ok(AbsValue::Array(x.with_constant(folded)))
}

fn bin(c: &mut ShapeCtx, op: BinaryOp) -> Rule {
    let a = c.array(0)?.unwrap_or_else(AbsArray::unknown);
    let b = c.array(1)?.unwrap_or_else(AbsArray::unknown);
    let left = Operand {
        array: &a,
        expr: c.args[0].expr,
    };
    let right = Operand {
        array: &b,
        expr: c.args[1].expr,
    };
    Ok(AbsValue::Array(broadcast::binary(
        op,
        c.name(),
        left,
        right,
    )?))
}

macro_rules! rules {
    ($kind:ident, $f:ident: $($name:ident => $op:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: see LANGUAGE §10.3.")]
            pub fn $name(c: &mut ShapeCtx) -> Rule {
                $f(c, $kind::$op)
            }
        )*
    };
}

rules!(UnaryOp, un: neg => Neg, exp => Exp, log => Log, sqrt => Sqrt, abs => Abs,
    sigmoid => Sigmoid, tanh => Tanh, relu => Relu, gelu => Gelu, silu => Silu,
    sin => Sin, cos => Cos, erf => Erf, gelu_erf => GeluErf);
rules!(BinaryOp, bin: add => Add, sub => Sub, mul => Mul, div => Div, pow => Pow,
    gt => Gt, lt => Lt, eq => Eq, maximum => Max, minimum => Min);
