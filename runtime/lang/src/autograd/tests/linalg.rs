//! Gradient checks of matmul, including broadcast batch axes and the vector
//! forms built with reshape.

use super::{check, Rng};

#[test]
fn matmul_shapes() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 4], &[4, 5]),
        (&[2, 3, 4], &[4, 5]),
        (&[2, 1, 3, 4], &[5, 4, 2]),
        (&[3, 4], &[2, 4, 5]),
        (&[1, 3, 4], &[2, 4, 5]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[1, 1], &[1, 3]),
    ];
    for (sa, sb) in cases {
        let name = format!("matmul {sa:?} {sb:?}");
        let mut r = Rng::named(&name);
        let (a, b) = (r.tensor(sa, -1.0, 1.0), r.tensor(sb, -1.0, 1.0));
        check(&name, &[(a.clone(), true), (b.clone(), true)], &|t, v| {
            t.matmul(v[0], v[1])
        });
        check(
            &format!("{name} a"),
            &[(a.clone(), true), (b.clone(), false)],
            &|t, v| t.matmul(v[0], v[1]),
        );
        check(&format!("{name} b"), &[(a, false), (b, true)], &|t, v| {
            t.matmul(v[0], v[1])
        });
    }
}

#[test]
fn matmul_vector_forms_through_reshape() {
    let name = "matmul vectors";
    let mut r = Rng::named(name);
    let (v, m, w) = (
        r.tensor(&[4], -1.0, 1.0),
        r.tensor(&[4, 3], -1.0, 1.0),
        r.tensor(&[4], -1.0, 1.0),
    );
    // [k]·[k, n] → [n]
    check(
        "vec·mat",
        &[(v.clone(), true), (m.clone(), true)],
        &|t, x| {
            let a = t.reshape(x[0], vec![1, 4])?;
            let y = t.matmul(a, x[1])?;
            t.reshape(y, vec![3])
        },
    );
    // [m, k]·[k] → [m]
    let mt = r.tensor(&[3, 4], -1.0, 1.0);
    check("mat·vec", &[(mt, true), (v.clone(), true)], &|t, x| {
        let b = t.reshape(x[1], vec![4, 1])?;
        let y = t.matmul(x[0], b)?;
        t.reshape(y, vec![3])
    });
    // [k]·[k] → [] (dot)
    check("dot", &[(v, true), (w, true)], &|t, x| {
        let a = t.reshape(x[0], vec![1, 4])?;
        let b = t.reshape(x[1], vec![4, 1])?;
        let y = t.matmul(a, b)?;
        t.reshape(y, vec![])
    });
}

#[test]
#[should_panic(expected = "rank >= 2")]
fn matmul_rejects_vectors() {
    let mut t = crate::autograd::Tape::new(mlpl_devices::cpu());
    let a = t.leaf(mlpl_devices::Tensor::zeros(vec![4]), true);
    let b = t.leaf(mlpl_devices::Tensor::zeros(vec![4, 2]), true);
    let _ = t.matmul(a, b);
}

#[test]
fn matmul_nt_shapes() {
    // `b` is `[..., n, k]`: read transposed. Broadcast batch axes as
    // attention's grouped heads have them (`[B, kv, g, T, hd]·[B, kv, 1, T, hd]ᵀ`).
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 4], &[5, 4]),
        (&[2, 3, 4], &[5, 4]),
        (&[2, 1, 3, 4], &[5, 2, 4]),
        (&[1, 2, 3, 3, 4], &[1, 2, 1, 3, 4]),
    ];
    for (sa, sb) in cases {
        let name = format!("matmul_nt {sa:?} {sb:?}");
        let mut r = Rng::named(&name);
        let (a, b) = (r.tensor(sa, -1.0, 1.0), r.tensor(sb, -1.0, 1.0));
        check(&name, &[(a.clone(), true), (b.clone(), true)], &|t, v| {
            t.matmul_nt(v[0], v[1])
        });
        check(&format!("{name} b"), &[(a, false), (b, true)], &|t, v| {
            t.matmul_nt(v[0], v[1])
        });
    }
}

#[test]
fn matmul_nt_is_bit_for_bit_matmul_of_the_transpose() {
    use crate::autograd::Tape;
    use mlpl_devices::Tensor;
    // Long enough inner sizes for two blocks of the GEMM's k, and a batch
    // axis that broadcasts (its gradient summed back).
    let (sa, sb) = ([2, 2, 37, 300], [2, 1, 29, 300]);
    let mut r = Rng::named("matmul_nt bits");
    let (a, b) = (r.tensor(&sa, -1.0, 1.0), r.tensor(&sb, -1.0, 1.0));
    let run = |nt: bool| -> Vec<Tensor> {
        let mut t = Tape::new(mlpl_devices::cpu());
        let (va, vb) = (t.leaf(a.clone(), true), t.leaf(b.clone(), true));
        let y = if nt {
            t.matmul_nt(va, vb).unwrap()
        } else {
            let bt = t.transpose_last2(vb).unwrap();
            t.matmul(va, bt).unwrap()
        };
        let proj = Rng::named("matmul_nt bits projection").tensor(t.shape(y), -1.0, 1.0);
        let p = t.constant(proj);
        let yp = t.mul(y, p).unwrap();
        let loss = t.sum(yp, None).unwrap();
        let g = t.backward(loss).unwrap();
        vec![t.value(y).unwrap(), g[va].clone(), g[vb].clone()]
    };
    let bits = |x: &Tensor| x.host().iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
    for (i, (x, y)) in run(true).iter().zip(&run(false)).enumerate() {
        assert_eq!(x.shape(), y.shape(), "output {i}");
        assert!(bits(x) == bits(y), "output {i} (y, da, db) differs");
    }
}
