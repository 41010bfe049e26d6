//! Gradient checks of softmax, log-softmax, cross-entropy, gather_rows, the
//! norms and masking.

use super::{check, Rng};
use crate::autograd::{Tape, CAUSAL_FILL};
use mlpl_devices::{cpu, Tensor};

#[test]
fn softmax_and_log_softmax_on_every_axis() {
    for shape in [&[2, 3, 4][..], &[5]] {
        for axis in 0..shape.len() {
            let name = format!("softmax {shape:?} {axis}");
            let x = Rng::named(&name).normal_tensor(shape, 1.5);
            check(&name, &[(x.clone(), true)], &|t, v| t.softmax(v[0], axis));
            check(&format!("log_{name}"), &[(x, true)], &|t, v| {
                t.log_softmax(v[0], axis)
            });
        }
    }
}

#[test]
fn cross_entropy_rows_and_sequences() {
    let mut r = Rng::named("ce");
    let logits = r.normal_tensor(&[5, 7], 2.0);
    let targets = Tensor::from_vec(vec![5], vec![0.0, 3.0, 3.0, 6.0, 1.0]);
    check("ce [5,7]", &[(logits, true)], &|t, v| {
        t.cross_entropy(v[0], &targets)
    });
    let logits = r.normal_tensor(&[2, 3, 7], 2.0);
    let targets = r.ids(&[2, 3], 7);
    check("ce [2,3,7]", &[(logits, true)], &|t, v| {
        t.cross_entropy(v[0], &targets)
    });
    // Through a scaled loss: the rule multiplies the saved dlogits by g.
    let logits = r.normal_tensor(&[4, 3], 1.0);
    let targets = r.ids(&[4], 3);
    check("ce scaled", &[(logits, true)], &|t, v| {
        let l = t.cross_entropy(v[0], &targets)?;
        let l2 = t.mul(l, l)?;
        t.mul_scalar(l2, 0.5)
    });
}

#[test]
fn gather_rows_with_repeated_ids() {
    let mut r = Rng::named("gather");
    let table = r.tensor(&[5, 3], -1.0, 1.0);
    let ids = Tensor::from_vec(vec![2, 3], vec![1.0, 4.0, 1.0, 0.0, 1.0, 4.0]);
    check("gather", &[(table.clone(), true)], &|t, v| {
        t.gather_rows(v[0], &ids)
    });
    // Each row's gradient is the number of times it was picked (times 1).
    let mut t = Tape::new(cpu());
    let tv = t.leaf(table, true);
    let y = t.gather_rows(tv, &ids).unwrap();
    assert_eq!(t.shape(y), &[2, 3, 3]);
    let g = t.backward(y).unwrap();
    let counts = [1.0, 3.0, 0.0, 0.0, 2.0];
    let want: Vec<f32> = counts.iter().flat_map(|&c| [c; 3]).collect();
    assert_eq!(g[tv].host(), &want[..]);
}

#[test]
fn rms_norm_and_layer_norm() {
    for shape in [&[2, 3, 5][..], &[4], &[3, 2]] {
        let name = format!("norm {shape:?}");
        let x = Rng::named(&name).normal_tensor(shape, 1.0);
        check(&format!("rms {name}"), &[(x.clone(), true)], &|t, v| {
            t.rms_norm(v[0], 1e-5)
        });
        check(&format!("layer {name}"), &[(x, true)], &|t, v| {
            t.layer_norm(v[0], 1e-5)
        });
    }
}

#[test]
fn mask_fill_and_causal_mask() {
    let mut r = Rng::named("mask");
    let x = r.tensor(&[2, 4, 4], -1.0, 1.0);
    // A [4, 4] mask broadcast over the leading axis, arbitrary pattern.
    let m = Tensor::from_vec(
        vec![4, 4],
        (0..16).map(|i| ((i * 7) % 3 == 0) as u8 as f32).collect(),
    );
    check("mask_fill", &[(x.clone(), true)], &|t, v| {
        t.mask_fill(v[0], &m, -5.0)
    });
    check("causal [2,4,4]", &[(x.clone(), true)], &|t, v| {
        t.causal_mask(v[0])
    });
    let y = r.tensor(&[3, 5], -1.0, 1.0);
    check("causal [3,5]", &[(y, true)], &|t, v| t.causal_mask(v[0]));

    let mut t = Tape::new(cpu());
    let v = t.leaf(x.clone(), true);
    let c = t.causal_mask(v).unwrap();
    let g = t.backward(c).unwrap();
    for b in 0..2 {
        for row in 0..4 {
            for col in 0..4 {
                let i = b * 16 + row * 4 + col;
                let (want_v, want_g) = if col > row {
                    (CAUSAL_FILL, 0.0)
                } else {
                    (x.host()[i], 1.0)
                };
                assert_eq!(t.value(c).unwrap().host()[i], want_v);
                assert_eq!(g[v].host()[i], want_g);
            }
        }
    }
}
