//! Gradient checks of the element-wise ops.

use super::{assert_close, check, Rng};
use crate::autograd::Tape;
use mlpl_devices::{cpu, BinaryOp, Tensor, UnaryOp};

/// Operand shape pairs: equal, trailing-vector broadcast both ways, the
/// `[2,1,3]` with `[4,1]` case (both stretched), scalar and size-1 axes.
const PAIRS: &[(&[usize], &[usize])] = &[
    (&[2, 3], &[2, 3]),
    (&[2, 3], &[3]),
    (&[3], &[2, 3]),
    (&[2, 1, 3], &[4, 1]),
    (&[], &[2, 3]),
    (&[2, 3], &[1, 1]),
];

#[test]
fn add_sub_mul_with_broadcasting() {
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul] {
        for (sa, sb) in PAIRS {
            let name = format!("{op:?} {sa:?} {sb:?}");
            let mut r = Rng::named(&name);
            let (a, b) = (r.tensor(sa, -2.0, 2.0), r.tensor(sb, -2.0, 2.0));
            check(&name, &[(a, true), (b, true)], &|t, v| {
                t.binary(op, v[0], v[1])
            });
        }
    }
}

#[test]
fn div_with_broadcasting() {
    for (sa, sb) in PAIRS {
        let name = format!("div {sa:?} {sb:?}");
        let mut r = Rng::named(&name);
        // |b| ≥ 0.5 keeps the pole at 0 far from the step.
        let (a, b) = (r.tensor(sa, -2.0, 2.0), r.signed(sb, 0.5, 2.0));
        check(&name, &[(a, true), (b, true)], &|t, v| t.div(v[0], v[1]));
    }
}

#[test]
fn pow_with_broadcasting() {
    for (sa, sb) in PAIRS {
        let name = format!("pow {sa:?} {sb:?}");
        let mut r = Rng::named(&name);
        let (a, b) = (r.tensor(sa, 0.5, 2.0), r.tensor(sb, -1.5, 1.5));
        check(&name, &[(a.clone(), true), (b.clone(), true)], &|t, v| {
            t.pow(v[0], v[1])
        });
        // Only one operand trainable: the other's rule branch is skipped.
        check(
            &format!("{name} base"),
            &[(a.clone(), true), (b.clone(), false)],
            &|t, v| t.pow(v[0], v[1]),
        );
        check(&format!("{name} exp"), &[(a, false), (b, true)], &|t, v| {
            t.pow(v[0], v[1])
        });
    }
}

#[test]
fn pow_exponent_gradient_is_zero_where_base_is_not_positive() {
    let mut t = Tape::new(cpu());
    let a = t.leaf(
        Tensor::from_vec(vec![5], vec![-2.0, 0.0, 3.0, -1.5, 0.0]),
        true,
    );
    let b = t.leaf(
        Tensor::from_vec(vec![5], vec![2.0, 2.0, 2.0, 3.0, -1.0]),
        true,
    );
    let y = t.pow(a, b).unwrap();
    let g = t.backward(y).unwrap();
    // d/db: a^b ln a where a > 0, else exactly 0 (even where a^b = inf).
    let want_b = [0.0, 0.0, 9.0 * 3f32.ln(), 0.0, 0.0];
    assert_close("d/db", g[b].host(), &want_b, 1e-5);
    // d/da = b a^(b−1): at 0^-1 that is −inf, mathematically right.
    let want_a = [-4.0, 0.0, 6.0, 6.75];
    assert_close("d/da", &g[a].host()[..4], &want_a, 1e-5);
    assert_eq!(g[a].host()[4], f32::NEG_INFINITY);
}

/// Inputs for `op` that keep away from its kinks and outside its domain's edges.
fn unary_input(op: UnaryOp, r: &mut Rng, shape: &[usize]) -> Tensor {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt => r.tensor(shape, 0.5, 2.0),
        UnaryOp::Abs | UnaryOp::Relu => r.signed(shape, 0.1, 2.0),
        _ => r.tensor(shape, -2.5, 2.5),
    }
}

#[test]
fn unary_functions() {
    let ops = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Abs,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Silu,
    ];
    for op in ops {
        for shape in [&[][..], &[7], &[2, 3], &[2, 1, 3]] {
            let name = format!("{op:?} {shape:?}");
            let x = unary_input(op, &mut Rng::named(&name), shape);
            check(&name, &[(x, true)], &|t, v| t.unary(op, v[0]));
        }
    }
}

#[test]
fn relu_and_abs_have_zero_gradient_at_zero() {
    let mut t = Tape::new(cpu());
    let x = t.leaf(Tensor::from_vec(vec![3], vec![-1.0, 0.0, 2.0]), true);
    let r = t.relu(x).unwrap();
    let a = t.abs(x).unwrap();
    let s = t.add(r, a).unwrap();
    let g = t.backward(s).unwrap();
    assert_eq!(g[x].host(), &[-1.0, 0.0, 2.0]);
}

#[test]
fn scalar_helpers() {
    let name = "scalar helpers";
    let x = Rng::named(name).tensor(&[2, 3], 0.5, 2.0);
    check(name, &[(x, true)], &|t, v| {
        let a = t.add_scalar(v[0], 1.5)?;
        let b = t.sub_scalar(a, 0.25)?;
        let c = t.mul_scalar(b, -2.0)?;
        let d = t.rsub_scalar(0.5, c)?;
        let e = t.div_scalar(d, 3.0)?;
        let f = t.pow_scalar(e, 1.5)?;
        let g = t.pow_scalar(v[0], -0.5)?;
        t.add(f, g)
    });
}
