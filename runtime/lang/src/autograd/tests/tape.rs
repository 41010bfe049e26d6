//! The tape's own behaviour: accumulation over shared uses, non-scalar losses,
//! which leaves get gradients, and that backward runs on the tape's backend.

use super::assert_close;
use crate::autograd::{Tape, Var};
use mlpl_devices::{cpu, Backend, CpuBackend, Tensor};
use std::sync::Arc;

#[test]
fn shared_leaf_accumulates_every_use() {
    let mut t = Tape::new(cpu());
    let x = t.leaf(Tensor::from_vec(vec![3], vec![1.0, 2.0, 3.0]), true);
    // x is used twice by one op and once more by another: d(x² + x)/dx = 2x + 1.
    let sq = t.mul(x, x).unwrap();
    let y = t.add(sq, x).unwrap();
    let l = t.sum(y, None).unwrap();
    let g = t.backward(l).unwrap();
    assert_eq!(g[x].host(), &[3.0, 5.0, 7.0]);

    // Two branches through different ops: d(Σ eˣ + Σ tanh x)/dx = eˣ + 1 − tanh²x.
    let mut t = Tape::new(cpu());
    let x0 = [0.3f32, -0.7];
    let x = t.leaf(Tensor::from_vec(vec![2], x0.to_vec()), true);
    let e = t.exp(x).unwrap();
    let th = t.tanh(x).unwrap();
    let a = t.sum(e, None).unwrap();
    let b = t.sum(th, None).unwrap();
    let l = t.add(a, b).unwrap();
    let g = t.backward(l).unwrap();
    let want: Vec<f32> = x0
        .iter()
        .map(|v| v.exp() + 1.0 - v.tanh() * v.tanh())
        .collect();
    assert_close("branches", g[x].host(), &want, 1e-6);
}

#[test]
fn non_scalar_loss_is_summed() {
    let mut t = Tape::new(cpu());
    let x = t.leaf(
        Tensor::from_vec(vec![2, 2], vec![1.0, -2.0, 3.0, 0.5]),
        true,
    );
    let y = t.mul(x, x).unwrap();
    let g = t.backward(y).unwrap();
    assert_eq!(g[x].host(), &[2.0, -4.0, 6.0, 1.0]);
}

#[test]
fn which_leaves_get_gradients() {
    let mut t = Tape::new(cpu());
    let a = t.leaf(Tensor::from_vec(vec![2], vec![1.0, 2.0]), true);
    let c = t.constant(Tensor::from_vec(vec![2], vec![3.0, 4.0]));
    let unused = t.leaf(Tensor::full(vec![2, 3], 5.0), true);
    let y = t.mul(a, c).unwrap();
    let l = t.sum(y, None).unwrap();
    let late = t.leaf(Tensor::full(vec![4], 1.0), true);
    assert!(t.requires_grad(l) && !t.requires_grad(c) && t.is_leaf(a) && !t.is_leaf(y));
    let g = t.backward(l).unwrap();
    assert_eq!(g.vars(), vec![a, unused, late]);
    assert_eq!(g[a].host(), &[3.0, 4.0]);
    assert!(g.get(c).is_none());
    assert_eq!(g[unused].shape(), &[2, 3]);
    assert!(g[unused].host().iter().all(|&v| v == 0.0));
    assert_eq!(g[late].host(), &[0.0; 4]);
    // Backward can run again, with the same result.
    let g2 = t.backward(l).unwrap();
    assert_eq!(g2[a].host(), g[a].host());

    // A loss that depends on no trainable leaf: zeros, and no rules recorded.
    let mut t = Tape::new(cpu());
    let p = t.leaf(Tensor::scalar(2.0), true);
    let k = t.constant(Tensor::scalar(3.0));
    let l = t.exp(k).unwrap();
    assert!(!t.requires_grad(l));
    assert!(t.nodes[l.index()].rule.is_none());
    let g = t.backward(l).unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[p].host(), &[0.0]);
}

#[test]
fn backward_runs_on_the_tape_backend() {
    let be = Arc::new(CpuBackend::new());
    let mut t = Tape::new(be.clone() as Arc<dyn Backend>);
    let x = t.leaf(Tensor::from_vec(vec![2, 3], vec![0.1; 6]), true);
    let w = t.leaf(Tensor::from_vec(vec![3, 2], vec![0.2; 6]), true);
    let y = t.matmul(x, w).unwrap();
    let y = t.softmax(y, 1).unwrap();
    let l = t.sum(y, None).unwrap();
    let before = be.counters().kernel_launches;
    t.backward(l).unwrap();
    // sum → expand (1), softmax_backward (1), matmul: 2 GEMMs on transposed
    // operands (`matmul_t`, which reads or copies the transpose itself).
    assert!(be.counters().kernel_launches - before >= 4);
}

/// `relu(x·w + b)·w2`, summed, with every op's value taken by the caller as
/// the interpreter takes it (`Tape::take_value`); returns the tape, the
/// leaves, the loss, the values of the matrix product, of the bias
/// activation and of the second product, and the caller's handles.
#[allow(clippy::type_complexity)]
fn mlp_taken() -> (Tape, [Var; 4], Var, [Var; 3], Vec<Tensor>) {
    let mut t = Tape::new(cpu());
    let x = t.leaf(
        Tensor::from_vec(vec![2, 3], vec![0.5, -1.0, 2.0, 0.0, 1.5, -0.5]),
        true,
    );
    let w = t.leaf(
        Tensor::from_vec(vec![3, 4], (0..12).map(|i| 0.1 * i as f32 - 0.5).collect()),
        true,
    );
    let b = t.leaf(
        Tensor::from_vec(vec![1, 4], vec![0.1, -0.2, 0.0, 0.3]),
        true,
    );
    let w2 = t.leaf(
        Tensor::from_vec(vec![4, 2], (0..8).map(|i| 0.2 - 0.05 * i as f32).collect()),
        true,
    );
    let mut held = Vec::new();
    let y = t.matmul(x, w).unwrap();
    held.push(t.take_value(y).unwrap());
    let h = t.bias_act(y, b, mlpl_devices::UnaryOp::Relu).unwrap();
    held.push(t.take_value(h).unwrap());
    let z = t.matmul(h, w2).unwrap();
    held.push(t.take_value(z).unwrap());
    let l = t.sum(z, None).unwrap();
    held.push(t.take_value(l).unwrap());
    (t, [x, w, b, w2], l, [y, h, z], held)
}

#[test]
fn the_tape_keeps_only_what_backward_rules_read() {
    let (t, _, _, [y, h, z], held) = mlp_taken();
    // While the caller holds them, every value is there.
    assert!(t.value(y).is_ok() && t.value(h).is_ok() && t.value(z).is_ok());
    drop(held);
    // The products' rules read their inputs, not their results; ReLU's
    // reads only its result: `x·w` is freed, `h` is kept for the second
    // product's (and ReLU's own) rule, `h·w2` for the sum's (which reads
    // everything, the default).
    assert!(t.value(y).is_err(), "x·w is read by no rule");
    assert_eq!(t.value(h).unwrap().shape(), &[2, 4]);
    assert_eq!(t.value(z).unwrap().shape(), &[2, 2]);
    assert_eq!(t.shape(y), &[2, 4]);
}

#[test]
fn a_releasing_backward_gives_the_same_gradients_as_a_retained_one() {
    let (t, leaves, l, _, held) = mlp_taken();
    drop(held);
    let kept = t.backward(l).unwrap();
    let released = t.backward_releasing(l).unwrap();
    for v in leaves {
        assert_eq!(kept[v].shape(), released[v].shape());
        let bits = |g: &Tensor| g.host().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&kept[v]), bits(&released[v]), "{v:?}");
    }
}

#[test]
fn relu_differentiated_from_its_output_matches_the_fused_kernel_bit_for_bit() {
    // x + b hits +0, -0, tiny, negative and NaN values.
    let x = Tensor::from_vec(
        vec![2, 4],
        vec![0.0, -0.0, 1e-30, -2.0, f32::NAN, 3.0, -1e-30, 0.5],
    );
    let b = Tensor::from_vec(vec![1, 4], vec![0.0, 0.0, 0.0, 1.0]);
    let g = Tensor::from_vec(
        vec![2, 4],
        vec![1.0, f32::INFINITY, -2.0, f32::NAN, 4.0, 5.0, 6.0, -7.0],
    );
    let be = cpu();
    let y = be.bias_act(&x, &b, mlpl_devices::UnaryOp::Relu).unwrap();
    let (dx, db) = be
        .bias_act_backward(&x, &b, &y, &g, mlpl_devices::UnaryOp::Relu, true)
        .unwrap();
    let dx2 = be
        .unary_backward(mlpl_devices::UnaryOp::Relu, &y, &y, &g)
        .unwrap();
    let db2 = be.sum_to_shape(&dx2, &[1, 4]).unwrap();
    let bits = |t: &Tensor| t.host().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&dx), bits(&dx2));
    assert_eq!(bits(&db.unwrap()), bits(&db2));
}
