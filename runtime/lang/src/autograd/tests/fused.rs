//! The fused ops `masked_softmax` and `bias_act`: gradient checks, and the
//! same values and gradients, bit for bit, as the unfused ops they replace on
//! the tape (`div` by the scale, `causal_mask`, `softmax`; `add`, activation).

use super::{check, Rng};
use crate::autograd::{Tape, Var};
use mlpl_devices::{cpu, Result, Tensor, UnaryOp};

const ACTS: [UnaryOp; 5] = [
    UnaryOp::Relu,
    UnaryOp::Gelu,
    UnaryOp::Silu,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
];

#[test]
fn masked_softmax_gradients() {
    let div = 3f32.sqrt();
    for shape in [&[2, 4, 4][..], &[3, 5], &[5, 3], &[1, 3], &[2, 1, 2, 3, 3]] {
        for causal in [false, true] {
            let name = format!("masked_softmax {shape:?} causal={causal}");
            let x = Rng::named(&name).normal_tensor(shape, 1.5);
            check(&name, &[(x, true)], &|t, v| {
                t.masked_softmax(v[0], div, causal)
            });
        }
    }
}

#[test]
fn bias_act_gradients() {
    for act in ACTS {
        for (xs, bs) in [
            (&[3, 4][..], &[1, 4][..]),
            (&[2, 3, 4], &[4]),
            (&[1, 2], &[1, 2]),
        ] {
            let name = format!("bias_act {act:?} {xs:?} {bs:?}");
            let mut r = Rng::named(&name);
            // |x| >= 0.2 and |b| < 0.05 keep x + b away from relu's kink.
            let x = r.signed(xs, 0.2, 1.5);
            let b = r.tensor(bs, -0.05, 0.05);
            check(&name, &[(x, true), (b, true)], &|t, v| {
                t.bias_act(v[0], v[1], act)
            });
        }
    }
}

/// The value of `y` and the gradients of `sum(y · proj)` with respect to
/// `leaves`, built on a fresh CPU tape from `inputs` (all trainable).
fn run(inputs: &[Tensor], f: &dyn Fn(&mut Tape, &[Var]) -> Result<Var>) -> Vec<Tensor> {
    let mut t = Tape::new(cpu());
    let vs: Vec<Var> = inputs.iter().map(|x| t.leaf(x.clone(), true)).collect();
    let y = f(&mut t, &vs).unwrap();
    let proj = Rng::named("projection").normal_tensor(t.shape(y), 1.0);
    let p = t.constant(proj);
    let yp = t.mul(y, p).unwrap();
    let loss = t.sum(yp, None).unwrap();
    let g = t.backward(loss).unwrap();
    let mut out = vec![t.value(y).unwrap()];
    out.extend(vs.iter().map(|v| g[*v].clone()));
    out
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.host().iter().map(|v| v.to_bits()).collect()
}

fn assert_same(what: &str, fused: &[Tensor], unfused: &[Tensor]) {
    for (i, (a, b)) in fused.iter().zip(unfused).enumerate() {
        let part = if i == 0 {
            "value".to_string()
        } else {
            format!("gradient {}", i - 1)
        };
        assert_eq!(a.shape(), b.shape(), "{what}: {part} shape");
        assert!(
            bits(a) == bits(b),
            "{what}: {part} differs: {:?} vs {:?}",
            a.host(),
            b.host()
        );
    }
}

#[test]
fn masked_softmax_equals_divide_mask_softmax_on_the_tape() {
    let div = (16f64).sqrt() as f32;
    let div3 = (3f64).sqrt() as f32;
    for (shape, d) in [
        (&[2, 1, 2, 6, 6][..], div),
        (&[4, 7], div3),
        (&[3, 3], div3),
    ] {
        for causal in [false, true] {
            let x = Rng::named("scores").normal_tensor(shape, 3.0);
            let fused = run(std::slice::from_ref(&x), &|t, v| {
                t.masked_softmax(v[0], d, causal)
            });
            let unfused = run(&[x], &|t, v| {
                let s = t.div_scalar(v[0], d)?;
                let s = if causal { t.causal_mask(s)? } else { s };
                let axis = t.shape(s).len() - 1;
                t.softmax(s, axis)
            });
            assert_same(&format!("{shape:?} causal={causal}"), &fused, &unfused);
        }
    }
}

#[test]
fn bias_act_equals_add_then_activation_on_the_tape() {
    for act in ACTS {
        for (xs, bs) in [
            (&[6, 5][..], &[1, 5][..]),
            (&[2, 3, 4], &[4]),
            (&[1, 3], &[1, 3]),
        ] {
            let mut r = Rng::named("bias act");
            let x = r.normal_tensor(xs, 2.0);
            let b = r.normal_tensor(bs, 0.5);
            let inputs = [x, b];
            let fused = run(&inputs, &|t, v| t.bias_act(v[0], v[1], act));
            let unfused = run(&inputs, &|t, v| {
                let s = t.add(v[0], v[1])?;
                t.unary(act, s)
            });
            assert_same(&format!("{act:?} {xs:?} + {bs:?}"), &fused, &unfused);
        }
    }
}

#[test]
fn bias_act_skips_the_bias_gradient_of_a_constant_bias() {
    let mut t = Tape::new(cpu());
    let x = t.leaf(
        Tensor::from_vec(vec![2, 2], vec![1.0, -1.0, 2.0, -2.0]),
        true,
    );
    let b = t.constant(Tensor::from_vec(vec![1, 2], vec![0.5, 0.5]));
    let y = t.bias_act(x, b, UnaryOp::Relu).unwrap();
    assert_eq!(t.value(y).unwrap().host(), &[1.5, 0.0, 2.5, 0.0]);
    let g = t.backward(y).unwrap();
    assert_eq!(g[x].host(), &[1.0, 0.0, 1.0, 0.0]);
}
