//! Gradient checks of sum, mean and prod, over everything and along each axis.

use super::{assert_close, check, Rng};
use crate::autograd::Tape;
use mlpl_devices::{cpu, Tensor};

#[test]
fn sum_mean_prod_every_axis() {
    for shape in [&[2, 3, 4][..], &[5], &[]] {
        let mut axes = vec![None];
        axes.extend((0..shape.len()).map(Some));
        for axis in axes {
            let name = format!("reduce {shape:?} {axis:?}");
            let mut r = Rng::named(&name);
            let x = r.tensor(shape, -2.0, 2.0);
            check(&format!("sum {name}"), &[(x.clone(), true)], &|t, v| {
                t.sum(v[0], axis)
            });
            check(&format!("mean {name}"), &[(x, true)], &|t, v| {
                t.mean(v[0], axis)
            });
            // Factors near 1 keep the product O(1).
            let p = r.signed(shape, 0.6, 1.4);
            check(&format!("prod {name}"), &[(p, true)], &|t, v| {
                t.prod(v[0], axis)
            });
        }
    }
}

#[test]
fn prod_with_zero_factors() {
    // Row 0: one zero; row 1: two zeros; row 2: none. The product is linear in
    // each factor, so central differences are exact here, zeros included.
    let x = Tensor::from_vec(
        vec![3, 4],
        vec![0.5, 0.0, 1.5, -2.0, 0.0, 1.2, 0.0, 0.7, 1.1, -0.9, 1.3, 0.8],
    );
    for axis in [Some(1), Some(0), None] {
        check(
            &format!("prod zeros {axis:?}"),
            &[(x.clone(), true)],
            &|t, v| t.prod(v[0], axis),
        );
    }
    let mut t = Tape::new(cpu());
    let v = t.leaf(x, true);
    let p = t.prod(v, Some(1)).unwrap();
    let g = t.backward(p).unwrap();
    let want = [
        0.0,
        0.5 * 1.5 * -2.0,
        0.0,
        0.0, // only the zero factor gets the others' product
        0.0,
        0.0,
        0.0,
        0.0, // two zeros: all 0
        -0.9 * 1.3 * 0.8,
        1.1 * 1.3 * 0.8,
        1.1 * -0.9 * 0.8,
        1.1 * -0.9 * 1.3,
    ];
    assert_close("prod grad", g[v].host(), &want, 1e-6);
}
