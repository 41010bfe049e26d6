//! Tests of every `Backend` method of the CPU backend against naive reference
//! implementations, finite differences in f64 for the gradients, and a
//! property test of broadcasting.

use crate::shape::contiguous_strides;
use crate::{broadcast_shapes, Backend, BinaryOp, CpuBackend, ReduceOp, Tensor, UnaryOp};
use proptest::prelude::*;

/// Deterministic pseudo-random values in [-2, 2).
fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64 * 4.0 - 2.0) as f32
        })
        .collect()
}

fn rand_t(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(shape.to_vec(), rand_vec(n, seed))
}

fn be() -> CpuBackend {
    CpuBackend::new()
}

fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "element {i}: got {g}, want {w} (tol {tol})");
    }
}

/// Multi-index of flat row-major `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        idx[a] = i % shape[a];
        i /= shape[a];
    }
    idx
}

/// Flat index into `shape` of the multi-index `idx` of a broadcast shape.
fn bcast_index(idx: &[usize], shape: &[usize]) -> usize {
    let lead = idx.len() - shape.len();
    let st = contiguous_strides(shape);
    (0..shape.len())
        .map(|a| {
            if shape[a] == 1 {
                0
            } else {
                idx[lead + a] * st[a]
            }
        })
        .sum()
}

fn naive_binary(f: impl Fn(f32, f32) -> f32, a: &Tensor, b: &Tensor) -> Tensor {
    let out = broadcast_shapes(a.shape(), b.shape()).unwrap();
    let n: usize = out.iter().product();
    let data = (0..n)
        .map(|i| {
            let idx = unravel(i, &out);
            f(
                a.host()[bcast_index(&idx, a.shape())],
                b.host()[bcast_index(&idx, b.shape())],
            )
        })
        .collect();
    Tensor::from_vec(out, data)
}

fn naive_matmul(a: &Tensor, b: &Tensor) -> Tensor {
    let (sa, sb) = (a.shape(), b.shape());
    let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let batch = broadcast_shapes(ba, bb).unwrap();
    let nb: usize = batch.iter().product();
    let mut out = vec![0.0f32; nb * m * n];
    for bi in 0..nb {
        let idx = unravel(bi, &batch);
        let oa = bcast_index(&idx, ba) * m * k;
        let ob = bcast_index(&idx, bb) * k * n;
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for p in 0..k {
                    s += a.host()[oa + i * k + p] as f64 * b.host()[ob + p * n + j] as f64;
                }
                out[bi * m * n + i * n + j] = s as f32;
            }
        }
    }
    let mut shape = batch;
    shape.extend([m, n]);
    Tensor::from_vec(shape, out)
}

type BinRef = fn(f32, f32) -> f32;
type UnRef = fn(f64) -> f64;

fn ops() -> Vec<(BinaryOp, BinRef)> {
    vec![
        (BinaryOp::Add, |x, y| x + y),
        (BinaryOp::Sub, |x, y| x - y),
        (BinaryOp::Mul, |x, y| x * y),
        (BinaryOp::Div, |x, y| x / y),
        (BinaryOp::Pow, |x, y| x.powf(y)),
        (BinaryOp::Gt, |x, y| if x > y { 1.0 } else { 0.0 }),
        (BinaryOp::Lt, |x, y| if x < y { 1.0 } else { 0.0 }),
        (BinaryOp::Eq, |x, y| if x == y { 1.0 } else { 0.0 }),
        (BinaryOp::Max, |x, y| {
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                x.max(y)
            }
        }),
        (BinaryOp::Min, |x, y| {
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                x.min(y)
            }
        }),
    ]
}

// ---------- unary ----------

#[test]
fn unary_matches_reference() {
    let b = be();
    for n in [0usize, 7, 70_000] {
        let x = rand_t(&[n], 1);
        let cases: Vec<(UnaryOp, UnRef)> = vec![
            (UnaryOp::Neg, |v| -v),
            (UnaryOp::Exp, f64::exp),
            (UnaryOp::Log, f64::ln),
            (UnaryOp::Sqrt, f64::sqrt),
            (UnaryOp::Abs, f64::abs),
            (UnaryOp::Sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
            (UnaryOp::Tanh, f64::tanh),
            (UnaryOp::Relu, |v| v.max(0.0)),
            (UnaryOp::Gelu, |v| {
                0.5 * v
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
            }),
            (UnaryOp::Silu, |v| v / (1.0 + (-v).exp())),
            (UnaryOp::Sin, f64::sin),
            (UnaryOp::Cos, f64::cos),
            (UnaryOp::Erf, core_math::erf),
            (UnaryOp::GeluErf, |v| {
                0.5 * v * (1.0 + core_math::erf(v / std::f64::consts::SQRT_2))
            }),
        ];
        for (op, f) in cases {
            let y = b.unary(op, &x).unwrap();
            assert_eq!(y.shape(), x.shape());
            let want: Vec<f32> = x.host().iter().map(|&v| f(v as f64) as f32).collect();
            assert_close(y.host(), &want, 1e-5);
        }
    }
    let y = b
        .unary(UnaryOp::Log, &Tensor::from_vec(vec![2], vec![0.0, -1.0]))
        .unwrap();
    assert_eq!(y.host()[0], f32::NEG_INFINITY);
    assert!(y.host()[1].is_nan());
    let big = Tensor::from_vec(vec![3], vec![-100.0, 100.0, f32::NAN]);
    let g = b.unary(UnaryOp::Gelu, &big).unwrap();
    assert_eq!(&g.host()[..2], &[0.0, 100.0]);
    assert!(g.host()[2].is_nan());
    let sg = b.unary(UnaryOp::Sigmoid, &big).unwrap();
    assert_eq!(&sg.host()[..2], &[0.0, 1.0]);
    let s = b.unary(UnaryOp::Relu, &Tensor::scalar(-3.0)).unwrap();
    assert_eq!(s.shape(), &[] as &[usize]);
    assert_eq!(s.host(), &[0.0]);
}

// ---------- binary ----------

#[test]
fn binary_broadcast_cases_match_reference() {
    let b = be();
    let shapes: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![2, 1, 3], vec![4, 1]),
        (vec![3, 4], vec![3, 4]),
        (vec![3, 4], vec![]),
        (vec![], vec![3, 4]),
        (vec![5, 4], vec![4]),
        (vec![4], vec![5, 4]),
        (vec![2, 3, 4], vec![3, 4]),
        (vec![3, 1], vec![1, 3]),
        (vec![2, 3, 1], vec![2, 1, 4]),
        (vec![0, 3], vec![3]),
        (vec![1], vec![0]),
        (vec![], vec![]),
        (vec![300, 257], vec![257]),
        (vec![300, 1], vec![300, 257]),
        (vec![128, 2, 130], vec![128, 1, 130]),
        (vec![1, 5, 1], vec![7, 1, 9]),
    ];
    for (sa, sb) in shapes {
        let (ta, tb) = (rand_t(&sa, 3), rand_t(&sb, 4));
        for (op, f) in ops() {
            let got = b.binary(op, &ta, &tb).unwrap();
            let want = naive_binary(f, &ta, &tb);
            assert_eq!(got.shape(), want.shape(), "{op:?} {sa:?} {sb:?}");
            assert_close(got.host(), want.host(), 1e-6);
        }
    }
}

#[test]
fn binary_special_values() {
    let b = be();
    let a = Tensor::from_vec(vec![4], vec![1.0, f32::NAN, 2.0, 1e-30]);
    let c = Tensor::from_vec(vec![4], vec![1.0, 1.0, f32::NAN, 0.0]);
    assert_eq!(
        b.binary(BinaryOp::Eq, &a, &c).unwrap().host()[..2],
        [1.0, 0.0]
    );
    // |1e-30 - 0| < 2^-52: equal under the absolute tolerance.
    assert_eq!(b.binary(BinaryOp::Eq, &a, &c).unwrap().host()[3], 1.0);
    let mx = b.binary(BinaryOp::Max, &a, &c).unwrap();
    assert!(mx.host()[1].is_nan() && mx.host()[2].is_nan());
    let d = b
        .binary(BinaryOp::Div, &Tensor::scalar(1.0), &Tensor::scalar(0.0))
        .unwrap();
    assert_eq!(d.host()[0], f32::INFINITY);
}

fn small_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![Just(1usize), 0usize..4], 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn prop_broadcast_matches_naive(sa in small_shape(), mask in prop::collection::vec(any::<bool>(), 5), drop in 0usize..3) {
        // Derive b from a: some axes set to 1, some leading axes removed.
        let mut sb: Vec<usize> = sa.iter().zip(&mask).map(|(&d, &m)| if m { 1 } else { d }).collect();
        let drop = drop.min(sb.len());
        sb.drain(..drop);
        let (ta, tb) = (rand_t(&sa, 11), rand_t(&sb, 12));
        let b = be();
        for (op, f) in ops().into_iter().take(3) {
            let got = b.binary(op, &ta, &tb).unwrap();
            let want = naive_binary(f, &ta, &tb);
            prop_assert_eq!(got.shape(), want.shape());
            prop_assert_eq!(got.host(), want.host());
            let got = b.binary(op, &tb, &ta).unwrap();
            let want = naive_binary(f, &tb, &ta);
            prop_assert_eq!(got.host(), want.host());
        }
    }
}

// ---------- matmul ----------

#[test]
fn matmul_matches_reference() {
    let b = be();
    let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![2, 3], vec![3, 4]),
        (vec![2, 1, 3, 4], vec![5, 4, 2]),
        (vec![3, 2, 5], vec![5, 4]),
        (vec![2, 5], vec![3, 5, 4]),
        (vec![1, 4, 6], vec![3, 6, 2]),
        (vec![4, 3, 8, 8], vec![4, 1, 8, 8]),
        (vec![130, 70], vec![70, 90]),
        (vec![7, 100, 100], vec![7, 100, 100]),
        (vec![64, 32, 32], vec![64, 32, 32]),
        (vec![64, 32, 32], vec![1, 32, 32]),
        (vec![64, 1, 32, 32], vec![1, 3, 32, 16]),
        (vec![0, 3], vec![3, 4]),
        (vec![2, 0], vec![0, 4]),
        (vec![2, 3], vec![3, 0]),
        (vec![0, 2, 3], vec![3, 2]),
    ];
    for (sa, sb) in cases {
        let (ta, tb) = (rand_t(&sa, 5), rand_t(&sb, 6));
        let got = b.matmul(&ta, &tb).unwrap();
        let want = naive_matmul(&ta, &tb);
        assert_eq!(got.shape(), want.shape(), "{sa:?} x {sb:?}");
        assert_close(got.host(), want.host(), 1e-4);
    }
    let got = b
        .matmul(&rand_t(&[2, 1, 3, 4], 1), &rand_t(&[5, 4, 2], 2))
        .unwrap();
    assert_eq!(got.shape(), &[2, 5, 3, 2]);
    let z = b.matmul(&rand_t(&[2, 0], 1), &rand_t(&[0, 4], 2)).unwrap();
    assert_eq!(z.host(), &[0.0; 8]);
}

#[test]
fn matmul_large_parallel() {
    let b = be();
    let (ta, tb) = (rand_t(&[200, 300], 7), rand_t(&[300, 150], 8));
    assert_close(
        b.matmul(&ta, &tb).unwrap().host(),
        naive_matmul(&ta, &tb).host(),
        1e-4,
    );
}

// ---------- reductions ----------

/// The swap of the last two axes, through the backend's `permute`.
fn swap_last2(b: &CpuBackend, x: &Tensor) -> Tensor {
    let r = x.rank();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    b.permute(x, &perm).unwrap()
}

#[test]
fn matmul_t_is_bit_identical_to_permute_then_matmul() {
    let b = be();
    // (a as stored, b as stored, transpose a, transpose b): layer backward
    // shapes (small and above the threading threshold), batched and broadcast.
    let cases: &[(&[usize], &[usize], bool, bool)] = &[
        (&[7, 5], &[6, 5], false, true),
        (&[5, 7], &[5, 6], true, false),
        (&[5, 7], &[6, 5], true, true),
        (&[2048, 32], &[2048, 128], true, false),
        (&[2048, 128], &[32, 128], false, true),
        (&[300, 200], &[300, 150], true, false),
        (&[4, 9, 8], &[4, 10, 8], false, true),
        (&[3, 1, 8, 9], &[4, 8, 6], true, false),
        (&[9, 8], &[2, 3, 7, 8], false, true),
        (&[64, 32, 32], &[64, 32, 32], true, false),
        (&[0, 3], &[0, 4], true, false),
    ];
    for (i, &(sa, sb, ta, tb)) in cases.iter().enumerate() {
        let (x, y) = (rand_t(sa, 40 + i as u64), rand_t(sb, 80 + i as u64));
        let got = b.matmul_t(&x, &y, ta, tb).unwrap();
        let xa = if ta { swap_last2(&b, &x) } else { x.clone() };
        let yb = if tb { swap_last2(&b, &y) } else { y.clone() };
        let want = b.matmul(&xa, &yb).unwrap();
        assert_eq!(got.shape(), want.shape(), "case {i}: shape");
        let same = got
            .host()
            .iter()
            .zip(want.host())
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(
            same,
            "case {i}: {sa:?} {ta} x {sb:?} {tb} differs from permute + matmul"
        );
        assert_close(got.host(), naive_matmul(&xa, &yb).host(), 1e-4);
    }
}

#[test]
fn matmul_t_is_bit_identical_over_a_sweep_of_sizes() {
    let b = be();
    let sizes = [1usize, 2, 3, 5, 8, 16, 17, 33, 64, 100];
    for &m in &sizes {
        for &n in &sizes {
            for &k in &sizes {
                for (ta, tb) in [(true, false), (false, true), (true, true)] {
                    let sa = if ta { [k, m] } else { [m, k] };
                    let sb = if tb { [n, k] } else { [k, n] };
                    let (x, y) = (rand_t(&sa, 3), rand_t(&sb, 4));
                    let got = b.matmul_t(&x, &y, ta, tb).unwrap();
                    let xa = if ta { swap_last2(&b, &x) } else { x.clone() };
                    let yb = if tb { swap_last2(&b, &y) } else { y.clone() };
                    let want = b.matmul(&xa, &yb).unwrap();
                    let same = got
                        .host()
                        .iter()
                        .zip(want.host())
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                    assert!(same, "m={m} n={n} k={k} ta={ta} tb={tb}: bits differ");
                }
            }
        }
    }
}

fn naive_reduce(op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Tensor {
    let fold = |vals: Vec<f32>| -> f32 {
        let n = vals.len();
        match op {
            ReduceOp::Sum => vals.iter().map(|&v| v as f64).sum::<f64>() as f32,
            ReduceOp::Mean => {
                (vals.iter().map(|&v| v as f64).sum::<f64>() / n.max(1) as f64) as f32
            }
            ReduceOp::Prod => vals.iter().map(|&v| v as f64).product::<f64>() as f32,
            ReduceOp::Max => vals.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        }
    };
    match axis {
        None => Tensor::scalar(fold(x.to_vec())),
        Some(ax) => {
            let mut out_shape = x.shape().to_vec();
            out_shape.remove(ax);
            let n_out: usize = out_shape.iter().product();
            let data = (0..n_out)
                .map(|o| {
                    let oi = unravel(o, &out_shape);
                    let vals = (0..x.shape()[ax])
                        .map(|j| {
                            let mut idx = oi.clone();
                            idx.insert(ax, j);
                            x.host()[bcast_index(&idx, x.shape())]
                        })
                        .collect();
                    fold(vals)
                })
                .collect();
            Tensor::from_vec(out_shape, data)
        }
    }
}

#[test]
fn reduce_every_axis_matches_reference() {
    let b = be();
    for shape in [
        vec![3, 4, 5],
        vec![0, 3],
        vec![3, 0],
        vec![2, 3, 0],
        vec![6],
        vec![40, 1100],
        vec![1100, 40],
    ] {
        let x = rand_t(&shape, 9);
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Prod, ReduceOp::Max] {
            let mut axes: Vec<Option<usize>> = (0..shape.len()).map(Some).collect();
            axes.push(None);
            for ax in axes {
                let got = b.reduce(op, &x, ax).unwrap();
                let want = naive_reduce(op, &x, ax);
                assert_eq!(got.shape(), want.shape(), "{op:?} {shape:?} {ax:?}");
                assert_close(got.host(), want.host(), 1e-5);
            }
        }
    }
    let e = Tensor::zeros(vec![0]);
    assert_eq!(b.reduce(ReduceOp::Sum, &e, None).unwrap().host(), &[0.0]);
    assert_eq!(b.reduce(ReduceOp::Prod, &e, None).unwrap().host(), &[1.0]);
    assert_eq!(b.reduce(ReduceOp::Mean, &e, None).unwrap().host(), &[0.0]);
    assert_eq!(
        b.reduce(ReduceOp::Max, &e, None).unwrap().host(),
        &[f32::NEG_INFINITY]
    );
    let s = b.reduce(ReduceOp::Sum, &Tensor::scalar(2.5), None).unwrap();
    assert_eq!((s.shape().len(), s.host()[0]), (0, 2.5));
}

#[test]
fn sum_is_accumulated_in_f64() {
    let b = be();
    let x = Tensor::full(vec![3_000_000], 0.1);
    let s = b.reduce(ReduceOp::Sum, &x, None).unwrap().host()[0];
    assert!((s - 300_000.0).abs() < 0.1, "{s}");
    let m = b
        .reduce(ReduceOp::Mean, &x.reshape(vec![1, 3_000_000]), Some(1))
        .unwrap();
    assert!((m.host()[0] - 0.1).abs() < 1e-6);
}

#[test]
fn argmax_first_maximum_and_nan() {
    let b = be();
    let x = Tensor::from_vec(
        vec![2, 4],
        vec![1.0, 3.0, 3.0, 0.0, f32::NAN, -1.0, 5.0, 5.0],
    );
    assert_eq!(b.argmax(&x, None).unwrap().host(), &[6.0]);
    assert_eq!(b.argmax(&x, Some(1)).unwrap().host(), &[1.0, 2.0]);
    assert_eq!(b.argmax(&x, Some(0)).unwrap().host(), &[0.0, 0.0, 1.0, 1.0]);
    let all_inf = Tensor::full(vec![3], f32::NEG_INFINITY);
    assert_eq!(b.argmax(&all_inf, None).unwrap().host(), &[0.0]);
    // Large: parallel chunks still give the first maximum.
    let mut v = rand_vec(100_000, 3);
    v[70_000] = 10.0;
    v[90_000] = 10.0;
    assert_eq!(
        b.argmax(&Tensor::from_vec(vec![100_000], v), None)
            .unwrap()
            .host(),
        &[70_000.0]
    );
    // Every axis against a naive argmax.
    let x = rand_t(&[3, 4, 5], 2);
    for ax in 0..3 {
        let got = b.argmax(&x, Some(ax)).unwrap();
        let mut out_shape = x.shape().to_vec();
        out_shape.remove(ax);
        for (o, &g) in got.host().iter().enumerate() {
            let oi = unravel(o, &out_shape);
            let vals: Vec<f32> = (0..x.shape()[ax])
                .map(|j| {
                    let mut idx = oi.clone();
                    idx.insert(ax, j);
                    x.host()[bcast_index(&idx, x.shape())]
                })
                .collect();
            let best = (0..vals.len()).fold(0, |bi, j| if vals[j] > vals[bi] { j } else { bi });
            assert_eq!(g, best as f32);
        }
    }
}

// ---------- softmax family (f64 references and finite differences) ----------

/// f64 softmax of `x` (shape) along `axis`.
fn softmax64(x: &[f64], shape: &[usize], axis: usize, log: bool) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let m = (0..n).map(|j| x[at(j)]).fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..n).map(|j| (x[at(j)] - m).exp()).sum();
            for j in 0..n {
                out[at(j)] = if log {
                    x[at(j)] - m - s.ln()
                } else {
                    (x[at(j)] - m).exp() / s
                };
            }
        }
    }
    out
}

/// Central finite-difference gradient of `f` at `x`.
fn fd_grad(x: &[f64], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let h = 1e-6;
    (0..x.len())
        .map(|i| {
            let mut xp = x.to_vec();
            let mut xm = x.to_vec();
            xp[i] += h;
            xm[i] -= h;
            (f(&xp) - f(&xm)) / (2.0 * h)
        })
        .collect()
}

fn to64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

fn to32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

#[test]
fn softmax_and_log_softmax_every_axis() {
    let b = be();
    for shape in [vec![3, 4, 5], vec![2, 7], vec![5], vec![64, 1200]] {
        let x = rand_t(&shape, 21);
        for axis in 0..shape.len() {
            let want = softmax64(&to64(x.host()), &shape, axis, false);
            assert_close(b.softmax(&x, axis).unwrap().host(), &to32(&want), 1e-5);
            let want = softmax64(&to64(x.host()), &shape, axis, true);
            assert_close(b.log_softmax(&x, axis).unwrap().host(), &to32(&want), 1e-5);
        }
    }
    // Stable for large logits.
    let x = Tensor::from_vec(vec![3], vec![1000.0, 1001.0, 1002.0]);
    let y = b.softmax(&x, 0).unwrap();
    assert!(y.host().iter().all(|v| v.is_finite()));
    assert!((y.host().iter().sum::<f32>() - 1.0).abs() < 1e-6);
    assert!(b
        .log_softmax(&x, 0)
        .unwrap()
        .host()
        .iter()
        .all(|v| v.is_finite()));
    assert_eq!(b.softmax(&Tensor::zeros(vec![0, 3]), 1).unwrap().numel(), 0);
    assert_eq!(
        b.softmax(&Tensor::zeros(vec![2, 0]), 1).unwrap().shape(),
        &[2, 0]
    );
    for axis in 0..3 {
        let e = Tensor::zeros(vec![2, 3, 0]);
        assert_eq!(b.softmax(&e, axis).unwrap().shape(), &[2, 3, 0]);
        assert_eq!(b.log_softmax(&e, axis).unwrap().shape(), &[2, 3, 0]);
        assert_eq!(
            b.softmax_backward(&e, &e, axis).unwrap().shape(),
            &[2, 3, 0]
        );
    }
}

/// logsumexp against an f64 reference on every axis; it is exactly the shift
/// log-softmax subtracts; large logits stay finite; empty axes give −∞.
#[test]
fn logsumexp_every_axis() {
    let b = be();
    for shape in [vec![3, 4, 5], vec![2, 7], vec![5], vec![64, 1200]] {
        let x = rand_t(&shape, 22);
        let xs = to64(x.host());
        for axis in 0..shape.len() {
            let (outer, n) = (shape[..axis].iter().product::<usize>(), shape[axis]);
            let inner: usize = shape[axis + 1..].iter().product();
            let want: Vec<f64> = (0..outer * inner)
                .map(|r| {
                    let (o, i) = (r / inner, r % inner);
                    let v: Vec<f64> = (0..n).map(|j| xs[(o * n + j) * inner + i]).collect();
                    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    m + v.iter().map(|a| (a - m).exp()).sum::<f64>().ln()
                })
                .collect();
            let got = b.logsumexp(&x, axis).unwrap();
            let mut out_shape = shape.clone();
            out_shape.remove(axis);
            assert_eq!(got.shape(), &out_shape[..]);
            assert_close(got.host(), &to32(&want), 1e-5);
            // log_softmax(x) = x − logsumexp(x), bit for bit.
            let mut keep = shape.clone();
            keep[axis] = 1;
            let shifted = b.binary(BinaryOp::Sub, &x, &got.reshape(keep)).unwrap();
            assert_eq!(shifted.host(), b.log_softmax(&x, axis).unwrap().host());
        }
    }
    let big = Tensor::from_vec(vec![3], vec![1000.0, 1001.0, 1002.0]);
    let y = b.logsumexp(&big, 0).unwrap();
    assert!((y.host()[0] - 1_002.407_6).abs() < 1e-3, "{:?}", y.host());
    let empty = b.logsumexp(&Tensor::zeros(vec![2, 0]), 1).unwrap();
    assert_eq!(empty.shape(), &[2]);
    assert!(empty.host().iter().all(|v| *v == f32::NEG_INFINITY));
    assert_eq!(
        b.logsumexp(&Tensor::zeros(vec![0, 3]), 1).unwrap().shape(),
        &[0]
    );
}

#[test]
fn softmax_backward_matches_finite_differences() {
    let b = be();
    for (shape, axis) in [(vec![3, 4], 1), (vec![3, 4], 0), (vec![2, 3, 4], 1)] {
        let x = rand_t(&shape, 31);
        let w = rand_t(&shape, 32);
        let y = b.softmax(&x, axis).unwrap();
        let dx = b.softmax_backward(&y, &w, axis).unwrap();
        let w64 = to64(w.host());
        let fd = fd_grad(&to64(x.host()), |xv| {
            softmax64(xv, &shape, axis, false)
                .iter()
                .zip(&w64)
                .map(|(a, b)| a * b)
                .sum()
        });
        assert_close(dx.host(), &to32(&fd), 1e-4);
    }
}

fn xent64(l: &[f64], t: &[f32], v: usize) -> f64 {
    let n = t.len();
    let mut total = 0.0;
    for r in 0..n {
        let row = &l[r * v..(r + 1) * v];
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
        total += lse - row[t[r] as usize];
    }
    total / n.max(1) as f64
}

#[test]
fn cross_entropy_loss_and_gradient() {
    let b = be();
    let (n, v) = (5, 7);
    let logits = rand_t(&[n, v], 41);
    let targets = Tensor::from_vec(vec![n], vec![0.0, 6.0, 3.0, 3.0, 1.0]);
    let (loss, grad) = b.cross_entropy(&logits, &targets, true).unwrap();
    assert_eq!(loss.shape(), &[] as &[usize]);
    let l64 = to64(logits.host());
    assert!((loss.host()[0] as f64 - xent64(&l64, targets.host(), v)).abs() < 1e-5);
    let fd = fd_grad(&l64, |l| xent64(l, targets.host(), v));
    let grad = grad.unwrap();
    assert_eq!(grad.shape(), &[n, v]);
    assert_close(grad.host(), &to32(&fd), 1e-4);
    let (loss2, none) = b.cross_entropy(&logits, &targets, false).unwrap();
    assert!(none.is_none());
    assert_eq!(loss2.host(), loss.host());
    // Large rows in parallel; stable for large logits.
    let (n, v) = (300, 257);
    let logits = Tensor::from_vec(
        vec![n, v],
        rand_vec(n * v, 5).iter().map(|x| x * 500.0).collect(),
    );
    let t: Vec<f32> = (0..n).map(|i| (i * 7 % v) as f32).collect();
    let (loss, grad) = b
        .cross_entropy(&logits, &Tensor::from_vec(vec![n], t.clone()), true)
        .unwrap();
    assert!((loss.host()[0] as f64 - xent64(&to64(logits.host()), &t, v)).abs() < 1e-2);
    let g = grad.unwrap();
    for r in 0..n {
        let s: f32 = g.host()[r * v..(r + 1) * v].iter().sum();
        assert!(s.abs() < 1e-6);
    }
    // Empty batch.
    let (l, g) = b
        .cross_entropy(&Tensor::zeros(vec![0, 4]), &Tensor::zeros(vec![0]), true)
        .unwrap();
    assert_eq!(l.host(), &[0.0]);
    assert_eq!(g.unwrap().shape(), &[0, 4]);
}

// ---------- layout ----------

fn naive_permute(x: &Tensor, perm: &[usize]) -> Tensor {
    let out_shape: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
    let n = x.numel();
    let data = (0..n)
        .map(|i| {
            let oi = unravel(i, &out_shape);
            let mut ii = vec![0; perm.len()];
            for (a, &p) in perm.iter().enumerate() {
                ii[p] = oi[a];
            }
            x.host()[bcast_index(&ii, x.shape())]
        })
        .collect();
    Tensor::from_vec(out_shape, data)
}

#[test]
fn permute_matches_reference() {
    let b = be();
    let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![3, 4], vec![1, 0]),
        (vec![3, 4], vec![0, 1]),
        (vec![2, 3, 4], vec![2, 0, 1]),
        (vec![2, 3, 4], vec![1, 0, 2]),
        (vec![2, 3, 4, 5], vec![0, 2, 1, 3]),
        (vec![2, 3, 4, 5], vec![0, 2, 3, 1]),
        (vec![2, 3, 4, 5], vec![3, 0, 2, 1]),
        (vec![1, 3, 1, 4], vec![3, 2, 1, 0]),
        (vec![0, 3], vec![1, 0]),
        (vec![], vec![]),
        (vec![300, 257], vec![1, 0]),
        (vec![4, 64, 8, 33], vec![0, 2, 1, 3]),
        (vec![4, 64, 8, 33], vec![0, 2, 3, 1]),
        (vec![40, 41, 42], vec![2, 1, 0]),
        // Attention's keys turned for `Q·Kᵀ`: whole 8 x 8 blocks.
        (vec![6, 1, 32, 256], vec![0, 1, 3, 2]),
    ];
    for (shape, perm) in cases {
        let x = rand_t(&shape, 51);
        let got = b.permute(&x, &perm).unwrap();
        let want = naive_permute(&x, &perm);
        assert_eq!(got.shape(), want.shape(), "{shape:?} {perm:?}");
        assert_eq!(got.host(), want.host(), "{shape:?} {perm:?}");
    }
}

#[test]
fn sum_to_shape_matches_reference() {
    let b = be();
    let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![2, 4, 3], vec![2, 1, 3]),
        (vec![2, 4, 3], vec![4, 1]),
        (vec![2, 4, 3], vec![3]),
        (vec![2, 4, 3], vec![]),
        (vec![2, 4, 3], vec![1, 1, 1]),
        (vec![2, 4, 3], vec![2, 4, 3]),
        (vec![2, 4, 3], vec![2, 4, 1]),
        (vec![5, 6, 7, 8], vec![6, 1, 8]),
        (vec![5, 6, 7, 8], vec![5, 1, 7, 1]),
        (vec![3000, 64], vec![64]),
        (vec![64, 3000], vec![64, 1]),
        (vec![0, 3], vec![3]),
        (vec![0, 3], vec![1, 1]),
    ];
    for (gs, ts) in cases {
        let g = rand_t(&gs, 61);
        let got = b.sum_to_shape(&g, &ts).unwrap();
        assert_eq!(got.shape(), &ts[..], "{gs:?} -> {ts:?}");
        // Reference: out[j] = sum of g over every index broadcasting onto j.
        let n_out: usize = ts.iter().product();
        let mut want = vec![0.0f64; n_out];
        for i in 0..g.numel() {
            let idx = unravel(i, &gs);
            want[bcast_index(&idx, &ts)] += g.host()[i] as f64;
        }
        assert_close(got.host(), &to32(&want), 1e-5);
    }
}

// ---------- embeddings ----------

#[test]
fn gather_and_scatter_rows() {
    let b = be();
    let table = rand_t(&[5, 3], 71);
    let ids = Tensor::from_vec(vec![2, 2], vec![4.0, 0.0, 4.0, 2.0]);
    let g = b.gather_rows(&table, &ids).unwrap();
    assert_eq!(g.shape(), &[2, 2, 3]);
    for (i, &id) in ids.host().iter().enumerate() {
        let r = id as usize;
        assert_eq!(&g.host()[i * 3..i * 3 + 3], &table.host()[r * 3..r * 3 + 3]);
    }
    let src = rand_t(&[2, 2, 3], 72);
    let s = b.scatter_add_rows(&ids, &src, 5).unwrap();
    assert_eq!(s.shape(), &[5, 3]);
    let mut want = [0.0f32; 15];
    for (i, &id) in ids.host().iter().enumerate() {
        for c in 0..3 {
            want[id as usize * 3 + c] += src.host()[i * 3 + c];
        }
    }
    assert_eq!(s.host(), &want[..]);
    // Flat src form and a large parallel case equal the serial sum exactly.
    let s2 = b
        .scatter_add_rows(&ids, &src.reshape(vec![4, 3]), 5)
        .unwrap();
    assert_eq!(s2.host(), s.host());
    let (n, v, d) = (5000, 97, 16);
    let ids: Vec<f32> = (0..n).map(|i| ((i * 31) % v) as f32).collect();
    let src = rand_t(&[n, d], 73);
    let got = b
        .scatter_add_rows(&Tensor::from_vec(vec![n], ids.clone()), &src, v)
        .unwrap();
    let mut want = vec![0.0f32; v * d];
    for (i, &id) in ids.iter().enumerate() {
        for c in 0..d {
            want[id as usize * d + c] += src.host()[i * d + c];
        }
    }
    assert_eq!(got.host(), &want[..]);
    let empty = b.gather_rows(&table, &Tensor::zeros(vec![0])).unwrap();
    assert_eq!(empty.shape(), &[0, 3]);
    let z = b
        .scatter_add_rows(&Tensor::zeros(vec![0]), &Tensor::zeros(vec![0, 3]), 4)
        .unwrap();
    assert_eq!(z.host(), &[0.0; 12]);
}

// ---------- norms ----------

fn rms64(x: &[f64], d: usize, eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|r| {
            let inv = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
            r.iter().map(move |v| v * inv).collect::<Vec<_>>()
        })
        .collect()
}

fn ln64(x: &[f64], d: usize, eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|r| {
            let mu = r.iter().sum::<f64>() / d as f64;
            let var = r.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / d as f64;
            let inv = 1.0 / (var + eps).sqrt();
            r.iter().map(move |v| (v - mu) * inv).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn rms_norm_forward_and_backward() {
    let b = be();
    let (shape, d, eps) = (vec![2, 3, 6], 6, 1e-5f32);
    let x = rand_t(&shape, 81);
    let dy = rand_t(&shape, 82);
    let (y, inv) = b.rms_norm(&x, eps).unwrap();
    assert_eq!(inv.shape(), &[6]);
    assert_close(
        y.host(),
        &to32(&rms64(&to64(x.host()), d, eps as f64)),
        1e-5,
    );
    let dx = b.rms_norm_backward(&x, &inv, &dy).unwrap();
    let w = to64(dy.host());
    let fd = fd_grad(&to64(x.host()), |xv| {
        rms64(xv, d, eps as f64)
            .iter()
            .zip(&w)
            .map(|(a, b)| a * b)
            .sum()
    });
    assert_close(dx.host(), &to32(&fd), 1e-3);
    // Large, parallel.
    let x = rand_t(&[100, 512], 83);
    let (y, _) = b.rms_norm(&x, eps).unwrap();
    assert_close(
        y.host(),
        &to32(&rms64(&to64(x.host()), 512, eps as f64)),
        1e-5,
    );
}

#[test]
fn layer_norm_forward_and_backward() {
    let b = be();
    let (shape, d, eps) = (vec![4, 5], 5, 1e-5f32);
    let x = rand_t(&shape, 91);
    let dy = rand_t(&shape, 92);
    let (y, mean, inv) = b.layer_norm(&x, eps).unwrap();
    assert_eq!((mean.shape(), inv.shape()), (&[4][..], &[4][..]));
    assert_close(y.host(), &to32(&ln64(&to64(x.host()), d, eps as f64)), 1e-5);
    for r in 0..4 {
        let m: f32 = x.host()[r * d..(r + 1) * d].iter().sum::<f32>() / d as f32;
        assert!((mean.host()[r] - m).abs() < 1e-6);
    }
    let dx = b.layer_norm_backward(&x, &mean, &inv, &dy).unwrap();
    let w = to64(dy.host());
    let fd = fd_grad(&to64(x.host()), |xv| {
        ln64(xv, d, eps as f64)
            .iter()
            .zip(&w)
            .map(|(a, b)| a * b)
            .sum()
    });
    assert_close(dx.host(), &to32(&fd), 1e-3);
    let x = rand_t(&[100, 512], 93);
    let (y, _, _) = b.layer_norm(&x, eps).unwrap();
    assert_close(
        y.host(),
        &to32(&ln64(&to64(x.host()), 512, eps as f64)),
        1e-5,
    );
}

// ---------- adam ----------

#[test]
fn adam_update_matches_reference() {
    let b = be();
    for n in [10usize, 70_000] {
        let mut p = rand_t(&[n], 101);
        let g = rand_t(&[n], 102);
        let mut m = rand_t(&[n], 103);
        let mut v = Tensor::from_vec(vec![n], rand_vec(n, 104).iter().map(|x| x.abs()).collect());
        let (p0, m0, v0) = (p.clone(), m.clone(), v.clone());
        let (lr, b1, b2, eps, wd) = (1e-3f32, 0.9f32, 0.999f32, 1e-8f32, 0.01f32);
        let t = 3;
        let bc1 = (1.0 - (b1 as f64).powi(t)) as f32;
        let bc2 = (1.0 - (b2 as f64).powi(t)) as f32;
        let step = crate::AdamStep {
            lr: lr as f64,
            b1: b1 as f64,
            b2: b2 as f64,
            eps: eps as f64,
            wd: wd as f64,
            t: t as u64,
        };
        b.adam_update(&mut p, &g, &mut m, &mut v, step).unwrap();
        // Copy-on-write: the clones taken before are untouched.
        assert_ne!(p.host(), p0.host());
        for i in 0..n {
            let gi = g.host()[i];
            let mi = b1 * m0.host()[i] + (1.0 - b1) * gi;
            let vi = b2 * v0.host()[i] + (1.0 - b2) * gi * gi;
            let pi =
                p0.host()[i] - lr * ((mi / bc1) / ((vi / bc2).sqrt() + eps) + wd * p0.host()[i]);
            assert!((m.host()[i] - mi).abs() < 1e-6);
            assert!((v.host()[i] - vi).abs() < 1e-6);
            assert!((p.host()[i] - pi).abs() < 1e-6);
        }
    }
}

// ---------- device plumbing ----------

#[test]
fn counters_upload_download_and_kind() {
    let b = be();
    assert_eq!(b.kind(), crate::DeviceKind::Cpu);
    assert_eq!(b.kind().name(), "cpu");
    let x = rand_t(&[2, 2], 1);
    let up = b.upload(&x).unwrap();
    assert!(up.shares_storage(&x));
    let _ = b.download(&up).unwrap();
    assert_eq!(b.counters(), crate::Counters::default());
    b.unary(UnaryOp::Exp, &x).unwrap();
    b.matmul(&x, &x).unwrap();
    b.reduce(ReduceOp::Sum, &x, None).unwrap();
    let c = b.counters();
    assert_eq!(
        (c.kernel_launches, c.uploads, c.downloads, c.memory_bytes),
        (3, 0, 0, 0)
    );
    b.reset_counters();
    assert_eq!(b.counters().kernel_launches, 0);
    // The shared backend is one object behind a trait object.
    let shared: std::sync::Arc<dyn Backend> = crate::cpu();
    assert!(std::sync::Arc::ptr_eq(&shared, &crate::cpu()));
    assert_eq!(shared.kind(), crate::DeviceKind::Cpu);
}

#[test]
fn device_error_display() {
    let e = crate::DeviceError::OutOfMemory {
        device: "cuda:0".into(),
        op: "matmul".into(),
        requested_bytes: 1024,
        free_bytes: Some(10),
    };
    assert_eq!(
        e.to_string(),
        "out of memory on cuda:0 in matmul: requested 1024 bytes, 10 bytes free"
    );
    let e = crate::DeviceError::Backend {
        device: "mlx".into(),
        message: "boom".into(),
    };
    assert_eq!(e.to_string(), "mlx: boom");
    let _: &dyn std::error::Error = &e;
}

// ---------- selection and slicing ----------

/// `select` against a loop over the broadcast index, for same shapes, a
/// broadcast condition, broadcast operands and scalars; NaN counts as true and
/// the side not taken is never read into the result.
#[test]
fn select_matches_reference() {
    let b = be();
    let cases: [[Vec<usize>; 3]; 5] = [
        [vec![3, 4], vec![3, 4], vec![3, 4]],
        [vec![3, 1], vec![4], vec![]],
        [vec![2, 1, 4], vec![3, 1], vec![2, 3, 4]],
        [vec![], vec![2, 3], vec![2, 3]],
        [vec![70_000], vec![70_000], vec![1]],
    ];
    for (k, [sc, sa, sb]) in cases.into_iter().enumerate() {
        let c = rand_t(&sc, 40 + k as u64);
        let c = b.binary(BinaryOp::Gt, &c, &Tensor::scalar(0.0)).unwrap();
        let (a, x) = (rand_t(&sa, 50 + k as u64), rand_t(&sb, 60 + k as u64));
        let y = b.select(&c, &a, &x).unwrap();
        let out = crate::shape::broadcast_shapes(&sc, &sa)
            .and_then(|s| crate::shape::broadcast_shapes(&s, &sb))
            .unwrap();
        assert_eq!(y.shape(), &out[..]);
        let at = |t: &Tensor, i: usize| {
            let st = crate::shape::broadcast_strides(t.shape(), &out);
            t.host()[crate::shape::offset_of(i, &out, &st)]
        };
        for i in 0..y.numel() {
            let want = if at(&c, i) != 0.0 {
                at(&a, i)
            } else {
                at(&x, i)
            };
            assert_eq!(y.host()[i].to_bits(), want.to_bits(), "case {k} at {i}");
        }
    }
    let c = Tensor::from_vec(vec![3], vec![f32::NAN, 0.0, -0.0]);
    let a = Tensor::from_vec(vec![3], vec![1.0, 2.0, 3.0]);
    let y = b.select(&c, &a, &Tensor::scalar(f32::INFINITY)).unwrap();
    assert_eq!(y.host(), &[1.0, f32::INFINITY, f32::INFINITY]);
}

/// `slice_axis` picks `start + i·step` along every axis of a rank-3 tensor;
/// `unslice_axis` puts them back into zeros, so slicing that again is the
/// identity and everything else is 0.
#[test]
fn slice_and_unslice_match_reference() {
    let b = be();
    let shape = [4usize, 5, 6];
    let x = rand_t(&shape, 70);
    for axis in 0..3 {
        let size = shape[axis];
        for (start, step) in [(0, 1), (1, 2), (size - 1, 3), (2, 1)] {
            let len = (size - start).div_ceil(step);
            let y = b.slice_axis(&x, axis, start, step, len).unwrap();
            let mut want_shape = shape.to_vec();
            want_shape[axis] = len;
            assert_eq!(y.shape(), &want_shape[..]);
            let xs = crate::shape::contiguous_strides(&shape);
            let ys = crate::shape::contiguous_strides(&want_shape);
            for i in 0..y.numel() {
                let mut src = 0;
                for d in 0..3 {
                    let mut idx = (i / ys[d]) % want_shape[d];
                    if d == axis {
                        idx = start + idx * step;
                    }
                    src += idx * xs[d];
                }
                assert_eq!(
                    y.host()[i],
                    x.host()[src],
                    "axis {axis} from {start} by {step}"
                );
            }
            let back = b.unslice_axis(&y, &shape, axis, start, step).unwrap();
            assert_eq!(back.shape(), &shape[..]);
            let again = b.slice_axis(&back, axis, start, step, len).unwrap();
            assert_eq!(again.host(), y.host());
            let total: f32 = back.host().iter().map(|v| v.abs()).sum();
            let kept: f32 = y.host().iter().map(|v| v.abs()).sum();
            assert_eq!(total, kept, "only the sliced positions are non-zero");
        }
    }
    let empty = b.slice_axis(&x, 1, 2, 1, 0).unwrap();
    assert_eq!(empty.shape(), &[4, 0, 6]);
    let z = b.unslice_axis(&empty, &shape, 1, 2, 1).unwrap();
    assert!(z.host().iter().all(|&v| v == 0.0));
}
