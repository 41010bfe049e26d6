//! Gradient checks of reshape, permute, transpose and concat.

use super::{check, Rng};
use mlpl_devices::Tensor;

#[test]
fn reshape_and_permute() {
    let name = "layout";
    let x = Rng::named(name).tensor(&[2, 3, 4], -1.0, 1.0);
    check("reshape", &[(x.clone(), true)], &|t, v| {
        t.reshape(v[0], vec![4, 6])
    });
    for perm in [[2, 0, 1], [1, 0, 2], [0, 2, 1], [2, 1, 0]] {
        check(
            &format!("permute {perm:?}"),
            &[(x.clone(), true)],
            &|t, v| {
                // Multiply afterwards so that a wrong inverse permutation shows.
                let y = t.permute(v[0], &perm)?;
                let y = t.exp(y)?;
                t.reshape(y, vec![24])
            },
        );
    }
    check("transpose", &[(x.clone(), true)], &|t, v| t.transpose(v[0]));
    check("transpose_last2", &[(x, true)], &|t, v| {
        t.transpose_last2(v[0])
    });
    let m = Rng::named("m").tensor(&[3, 5], -1.0, 1.0);
    check("transpose 2d", &[(m, true)], &|t, v| t.transpose(v[0]));
}

#[test]
fn concat_vectors() {
    let mut r = Rng::named("concat");
    let a = r.tensor(&[3], -1.0, 1.0);
    let b = r.tensor(&[2], -1.0, 1.0);
    let s = r.tensor(&[], -1.0, 1.0);
    let e = Tensor::zeros(vec![0]);
    check(
        "concat [3] [2]",
        &[(a.clone(), true), (b.clone(), true)],
        &|t, v| t.concat(v[0], v[1]),
    );
    check("concat [] [3]", &[(s, true), (a, true)], &|t, v| {
        t.concat(v[0], v[1])
    });
    check("concat [0] [2]", &[(e, true), (b, true)], &|t, v| {
        t.concat(v[0], v[1])
    });
    // The value is a's elements then b's.
    let mut t = crate::autograd::Tape::new(mlpl_devices::cpu());
    let x = t.leaf(Tensor::from_vec(vec![2], vec![1.0, 2.0]), false);
    let y = t.leaf(Tensor::from_vec(vec![3], vec![3.0, 4.0, 5.0]), false);
    let c = t.concat(x, y).unwrap();
    assert_eq!(t.value(c).unwrap().shape(), &[5]);
    assert_eq!(t.value(c).unwrap().host(), &[1.0, 2.0, 3.0, 4.0, 5.0]);
}
