//! The CPU's fused kernels (`unary_backward`, `bias_act` and its backward,
//! `masked_softmax` and its backward) against the trait's composed defaults
//! (`Unfused`): bit for bit, on fixed edge cases and on random shapes.

use mlpl_devices::{Backend, CpuBackend, Tensor, UnaryOp, Unfused, CAUSAL_FILL};
use proptest::prelude::*;

use crate::cpu_program_support;
use cpu_program_support::ACTIVATIONS as ACTS;

/// A deterministic pseudo-random tensor of `shape` (values in about ±`scale`),
/// with a few exact zeros, negative zeros and, when `special`, ±inf and NaN.
fn tensor(shape: &[usize], seed: u64, scale: f32, special: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data = (0..n)
        .map(|i| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
            match (i % 17, special) {
                (3, _) => 0.0,
                (5, _) => -0.0,
                (7, true) => f32::INFINITY,
                (11, true) => f32::NAN,
                (13, true) => f32::NEG_INFINITY,
                _ => (2.0 * u - 1.0) * scale,
            }
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), data)
}

/// The bits of `t`'s elements, every NaN as one canonical NaN (which NaN an
/// operation returns depends on its operand order, not on the value; zero
/// signs and everything else must match).
fn bits(t: &Tensor) -> Vec<u32> {
    t.host()
        .iter()
        .map(|v| {
            if v.is_nan() {
                f32::NAN.to_bits()
            } else {
                v.to_bits()
            }
        })
        .collect()
}

fn same(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    let (g, w) = (bits(got), bits(want));
    if let Some(i) = g.iter().zip(&w).position(|(a, b)| a != b) {
        panic!(
            "{what}: element {i} is {} (fused), {} (composed)",
            got.host()[i],
            want.host()[i]
        );
    }
}

fn backends() -> (CpuBackend, Unfused<CpuBackend>) {
    (CpuBackend::new(), Unfused(CpuBackend::new()))
}

fn check_unary_backward(shape: &[usize], seed: u64, special: bool) {
    let (f, c) = backends();
    for op in ACTS {
        let x = tensor(shape, seed, 4.0, special);
        let y = f.unary(op, &x).unwrap();
        let g = tensor(shape, seed + 1, 2.0, special);
        let what = format!("unary_backward {op:?} {shape:?}");
        same(
            &what,
            &f.unary_backward(op, &x, &y, &g).unwrap(),
            &c.unary_backward(op, &x, &y, &g).unwrap(),
        );
    }
}

fn check_bias_act(shape: &[usize], bias_shape: &[usize], seed: u64, special: bool) {
    let (f, c) = backends();
    for op in ACTS {
        let what = format!("bias_act {op:?} {shape:?} + {bias_shape:?}");
        let x = tensor(shape, seed, 3.0, special);
        let b = tensor(bias_shape, seed + 7, 1.0, false);
        let y = f.bias_act(&x, &b, op).unwrap();
        same(&what, &y, &c.bias_act(&x, &b, op).unwrap());
        // Same as the element-wise unary kernel of x + b.
        let pre = f.binary(mlpl_devices::BinaryOp::Add, &x, &b).unwrap();
        same(&what, &y, &f.unary(op, &pre).unwrap());
        let g = tensor(shape, seed + 3, 2.0, special);
        for want_bias in [true, false] {
            let (dx, db) = f.bias_act_backward(&x, &b, &y, &g, op, want_bias).unwrap();
            let (rdx, rdb) = c.bias_act_backward(&x, &b, &y, &g, op, want_bias).unwrap();
            same(&format!("d{what}"), &dx, &rdx);
            assert_eq!(db.is_some(), want_bias, "{what}: dbias wanted {want_bias}");
            if let (Some(db), Some(rdb)) = (db, rdb) {
                assert_eq!(db.shape(), bias_shape, "{what}: dbias shape");
                same(&format!("dbias {what}"), &db, &rdb);
            }
        }
    }
}

fn check_masked_softmax(shape: &[usize], divisor: f32, seed: u64, special: bool) {
    let (f, c) = backends();
    for causal in [false, true] {
        if causal && shape.len() < 2 {
            continue;
        }
        let what = format!("masked_softmax {shape:?} / {divisor} causal={causal}");
        let x = tensor(shape, seed, 6.0, special);
        let y = f.masked_softmax(&x, divisor, causal).unwrap();
        same(&what, &y, &c.masked_softmax(&x, divisor, causal).unwrap());
        let g = tensor(shape, seed + 5, 1.0, special);
        same(
            &format!("d{what}"),
            &f.masked_softmax_backward(&y, &g, divisor, causal).unwrap(),
            &c.masked_softmax_backward(&y, &g, divisor, causal).unwrap(),
        );
    }
}

#[test]
fn unary_backward_is_bit_identical_to_the_composed_rule() {
    check_unary_backward(&[3, 7], 1, false);
    check_unary_backward(&[5, 11], 2, true);
    check_unary_backward(&[1], 3, false);
    check_unary_backward(&[0, 4], 4, false);
    // Above the parallel threshold.
    check_unary_backward(&[300, 130], 5, true);
}

#[test]
fn bias_act_is_bit_identical_to_add_then_activation() {
    check_bias_act(&[4, 6], &[1, 6], 1, false);
    check_bias_act(&[4, 6], &[6], 2, true);
    check_bias_act(&[2, 3, 5], &[1, 5], 3, false);
    // One row (the bias gradient is the row itself) and one column.
    check_bias_act(&[1, 9], &[1, 9], 4, true);
    check_bias_act(&[9, 1], &[1, 1], 5, false);
    check_bias_act(&[0, 3], &[1, 3], 6, false);
    // Above the parallel threshold, and a single column of more than one
    // reduction chunk (16 Ki rows).
    check_bias_act(&[512, 96], &[1, 96], 7, true);
    check_bias_act(&[40_000, 1], &[1, 1], 8, false);
}

#[test]
fn masked_softmax_is_bit_identical_to_divide_mask_softmax() {
    let div = 3f32.sqrt();
    check_masked_softmax(&[4, 4], div, 1, false);
    check_masked_softmax(&[1, 1], div, 2, false);
    check_masked_softmax(&[1, 5], div, 3, false);
    check_masked_softmax(&[3, 7], 2.0, 4, true);
    check_masked_softmax(&[6, 2], div, 5, false);
    check_masked_softmax(&[2, 1, 2, 5, 5], div, 6, true);
    check_masked_softmax(&[7], div, 7, false);
    check_masked_softmax(&[2, 0, 3], div, 8, false);
    // Above the parallel threshold.
    check_masked_softmax(&[8, 2, 64, 64], 8.0, 9, false);
}

#[test]
fn masked_softmax_rows_sum_to_one_with_zeros_above_the_diagonal() {
    let b = CpuBackend::new();
    let x = tensor(&[2, 5, 3], 11, 4.0, false);
    let y = b.masked_softmax(&x, 1.5, true).unwrap();
    for (r, row) in y.host().chunks(3).enumerate() {
        let i = r % 5;
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-6, "row {r} sums to {sum}");
        for (j, &v) in row.iter().enumerate() {
            if j > i {
                assert_eq!(v.to_bits(), 0, "row {r} column {j} is {v}, not +0");
            } else {
                assert!(v > 0.0, "row {r} column {j} is {v}");
            }
        }
    }
    // Scores near the fill value: masked entries then take part in the sum
    // (their exponential is not 0), still as in the composed form.
    let near = Tensor::from_vec(vec![2, 2], vec![CAUSAL_FILL * 1.5, 0.0, CAUSAL_FILL, 0.0]);
    let c = Unfused(CpuBackend::new());
    same(
        "near the fill",
        &b.masked_softmax(&near, 1.0, true).unwrap(),
        &c.masked_softmax(&near, 1.0, true).unwrap(),
    );
}

#[test]
fn fused_kernels_count_one_launch_each() {
    let b = CpuBackend::new();
    let x = tensor(&[4, 3], 1, 1.0, false);
    let bias = tensor(&[1, 3], 2, 1.0, false);
    let y = b.bias_act(&x, &bias, UnaryOp::Gelu).unwrap();
    b.bias_act_backward(&x, &bias, &y, &x, UnaryOp::Gelu, true)
        .unwrap();
    let p = b.masked_softmax(&x, 2.0, true).unwrap();
    b.masked_softmax_backward(&p, &x, 2.0, true).unwrap();
    b.unary_backward(UnaryOp::Silu, &x, &y, &x).unwrap();
    assert_eq!(b.counters().kernel_launches, 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn bias_act_matches_on_random_shapes(
        lead in prop::collection::vec(1usize..5, 0..3),
        n in 1usize..9,
        flat_bias in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let mut shape = lead;
        shape.push(n);
        let bias_shape = if flat_bias || shape.len() == 1 { vec![n] } else { vec![1, n] };
        check_bias_act(&shape, &bias_shape, seed, seed % 3 == 0);
    }

    #[test]
    fn masked_softmax_matches_on_random_shapes(
        lead in prop::collection::vec(1usize..4, 0..3),
        t in 1usize..7,
        s in 1usize..7,
        divisor in 0.5f32..9.0,
        seed in 0u64..1000,
    ) {
        let mut shape = lead;
        shape.extend([t, s]);
        check_masked_softmax(&shape, divisor, seed, seed % 4 == 0);
    }
}
