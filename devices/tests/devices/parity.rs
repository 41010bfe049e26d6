//! The device-parity cases: every `Backend` op on a device against the CPU
//! backend within float32 tolerance, forward and backward, shared by the CUDA
//! and MLX parity tests (each case takes the device's backend).

use mlpl_devices::{cpu, Backend, BinaryOp, ReduceOp, Tensor, UnaryOp};

/// Deterministic values in [-scale, scale).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

pub fn rand(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(shape.to_vec(), values(n, seed, 2.0))
}

pub fn positive(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    let v = values(n, seed, 1.0)
        .into_iter()
        .map(|x| x.abs() + 0.1)
        .collect();
    Tensor::from_vec(shape.to_vec(), v)
}

pub fn ids(n: usize, vocab: usize, seed: u64) -> Tensor {
    let v = values(n, seed, 1.0)
        .into_iter()
        .map(|x| (((x + 1.0) / 2.0 * vocab as f32) as usize).min(vocab - 1) as f32)
        .collect();
    Tensor::from_vec(vec![n], v)
}

/// Same shape, and every element within `1e-4·|cpu| + 1e-5` (NaN matches NaN).
#[track_caller]
pub fn assert_close(what: &str, gpu: &Tensor, cpu: &Tensor) {
    assert_eq!(gpu.shape(), cpu.shape(), "{what}: shapes differ");
    let device = gpu
        .device_buffer()
        .map_or("host".to_string(), |b| b.device());
    for (i, (&g, &c)) in gpu.host().iter().zip(cpu.host()).enumerate() {
        let ok = (g.is_nan() && c.is_nan()) || g == c || (g - c).abs() <= 1e-4 * c.abs() + 1e-5;
        assert!(ok, "{what}: element {i}: {device} {g} vs cpu {c}");
    }
}

pub fn unary_ops_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    let x = rand(&[3, 5, 7], 1);
    let p = positive(&[3, 5, 7], 2);
    for op in [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Abs,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Silu,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Erf,
        UnaryOp::GeluErf,
    ] {
        assert_close(
            &format!("{op:?}"),
            &g.unary(op, &x).unwrap(),
            &c.unary(op, &x).unwrap(),
        );
    }
    for op in [UnaryOp::Log, UnaryOp::Sqrt] {
        assert_close(
            &format!("{op:?}"),
            &g.unary(op, &p).unwrap(),
            &c.unary(op, &p).unwrap(),
        );
    }
}

pub fn binary_ops_broadcast_like_the_cpu(g: &dyn Backend) {
    let c = cpu();
    let pairs = [
        (vec![4, 6], vec![4, 6]),
        (vec![2, 3, 4], vec![4]),
        (vec![2, 1, 4], vec![3, 1]),
        (vec![5], vec![]),
        (vec![], vec![2, 2]),
        (vec![1, 1], vec![3, 2]),
        (vec![2, 1, 3, 1, 2], vec![1, 4, 1, 5, 2]),
    ];
    for (k, (sa, sb)) in pairs.iter().enumerate() {
        let (a, b) = (rand(sa, 10 + k as u64), positive(sb, 20 + k as u64));
        for op in [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Gt,
            BinaryOp::Lt,
            BinaryOp::Eq,
            BinaryOp::Max,
            BinaryOp::Min,
        ] {
            let what = format!("{op:?} {sa:?} {sb:?}");
            assert_close(
                &what,
                &g.binary(op, &a, &b).unwrap(),
                &c.binary(op, &a, &b).unwrap(),
            );
        }
        let pa = positive(sa, 30 + k as u64);
        let what = format!("Pow {sa:?} {sb:?}");
        assert_close(
            &what,
            &g.binary(BinaryOp::Pow, &pa, &b).unwrap(),
            &c.binary(BinaryOp::Pow, &pa, &b).unwrap(),
        );
    }
    // Eq is exact equality up to 2^-52 and NaN propagates through Max.
    let a = Tensor::from_vec(vec![3], vec![1.0, f32::NAN, 2.0]);
    let b = Tensor::from_vec(vec![3], vec![1.0, 0.0, 3.0]);
    assert_close(
        "Eq exact",
        &g.binary(BinaryOp::Eq, &a, &b).unwrap(),
        &c.binary(BinaryOp::Eq, &a, &b).unwrap(),
    );
    assert_close(
        "Max NaN",
        &g.binary(BinaryOp::Max, &a, &b).unwrap(),
        &c.binary(BinaryOp::Max, &a, &b).unwrap(),
    );
}

pub fn matmul_matches_the_cpu_with_batch_broadcasting(g: &dyn Backend) {
    let c = cpu();
    let cases = [
        (vec![7, 5], vec![5, 3]),
        (vec![4, 7, 5], vec![4, 5, 3]),
        (vec![4, 7, 5], vec![5, 3]),
        (vec![7, 5], vec![2, 5, 3]),
        (vec![2, 1, 7, 5], vec![3, 5, 4]),
        (vec![64, 128], vec![128, 96]),
        (vec![3, 0], vec![0, 4]),
    ];
    for (k, (sa, sb)) in cases.iter().enumerate() {
        let (a, b) = (rand(sa, 40 + k as u64), rand(sb, 50 + k as u64));
        assert_close(
            &format!("matmul {sa:?} {sb:?}"),
            &g.matmul(&a, &b).unwrap(),
            &c.matmul(&a, &b).unwrap(),
        );
    }
}

pub fn transposed_matmul_matches_the_cpu(g: &dyn Backend) {
    let c = cpu();
    // (a, b) as stored; matmul_t reads the flagged ones with their last two axes swapped.
    let cases = [
        (vec![5, 7], vec![5, 3], true, false),
        (vec![7, 5], vec![3, 5], false, true),
        (vec![5, 7], vec![3, 5], true, true),
        (vec![4, 5, 7], vec![5, 3], true, false),
        (vec![2, 1, 7, 5], vec![3, 4, 5], false, true),
    ];
    for (k, (sa, sb, ta, tb)) in cases.iter().enumerate() {
        let (a, b) = (rand(sa, 170 + k as u64), rand(sb, 180 + k as u64));
        assert_close(
            &format!("matmul_t {sa:?} {ta} {sb:?} {tb}"),
            &g.matmul_t(&a, &b, *ta, *tb).unwrap(),
            &c.matmul_t(&a, &b, *ta, *tb).unwrap(),
        );
    }
}

pub fn reductions_and_argmax_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    let x = rand(&[4, 5, 6], 60);
    let small = Tensor::from_vec(vec![2, 3], values(6, 61, 1.5));
    for axis in [None, Some(0), Some(1), Some(2)] {
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
            let what = format!("{op:?} {axis:?}");
            assert_close(
                &what,
                &g.reduce(op, &x, axis).unwrap(),
                &c.reduce(op, &x, axis).unwrap(),
            );
        }
        assert_close(
            &format!("argmax {axis:?}"),
            &g.argmax(&x, axis).unwrap(),
            &c.argmax(&x, axis).unwrap(),
        );
    }
    for axis in [None, Some(0), Some(1)] {
        let what = format!("Prod {axis:?}");
        assert_close(
            &what,
            &g.reduce(ReduceOp::Prod, &small, axis).unwrap(),
            &c.reduce(ReduceOp::Prod, &small, axis).unwrap(),
        );
    }
    // Empty reductions: sum 0, prod 1, max -inf.
    let empty = Tensor::zeros(vec![3, 0]);
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Mean, ReduceOp::Max] {
        assert_close(
            &format!("{op:?} empty"),
            &g.reduce(op, &empty, Some(1)).unwrap(),
            &c.reduce(op, &empty, Some(1)).unwrap(),
        );
    }
    let big = rand(&[100_000], 62);
    assert_close(
        "sum of 1e5",
        &g.reduce(ReduceOp::Sum, &big, None).unwrap(),
        &c.reduce(ReduceOp::Sum, &big, None).unwrap(),
    );
}

pub fn softmax_family_forward_and_backward_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    let x = rand(&[3, 4, 50], 70);
    let dy = rand(&[3, 4, 50], 71);
    for axis in 0..3 {
        let (ys, yc) = (g.softmax(&x, axis).unwrap(), c.softmax(&x, axis).unwrap());
        assert_close(&format!("softmax {axis}"), &ys, &yc);
        assert_close(
            &format!("log_softmax {axis}"),
            &g.log_softmax(&x, axis).unwrap(),
            &c.log_softmax(&x, axis).unwrap(),
        );
        assert_close(
            &format!("softmax_backward {axis}"),
            &g.softmax_backward(&yc, &dy, axis).unwrap(),
            &c.softmax_backward(&yc, &dy, axis).unwrap(),
        );
        assert_close(
            &format!("logsumexp {axis}"),
            &g.logsumexp(&x, axis).unwrap(),
            &c.logsumexp(&x, axis).unwrap(),
        );
    }
}

pub fn cross_entropy_loss_and_gradient_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    for (rows, v) in [(8, 5), (64, 280), (3, 2000)] {
        let logits = rand(&[rows, v], 80 + v as u64);
        let t = ids(rows, v, 81);
        let (lg, gg) = g.cross_entropy(&logits, &t, true).unwrap();
        let (lc, gc) = c.cross_entropy(&logits, &t, true).unwrap();
        assert_close(&format!("ce loss {rows}x{v}"), &lg, &lc);
        assert_close(&format!("ce grad {rows}x{v}"), &gg.unwrap(), &gc.unwrap());
        let (l2, none) = g.cross_entropy(&logits, &t, false).unwrap();
        assert!(none.is_none());
        assert_close("ce loss without grad", &l2, &lc);
    }
    // Leading axes are flattened into rows.
    let logits = rand(&[2, 3, 7], 82);
    let t = ids(6, 7, 83);
    let (lg, gg) = g.cross_entropy(&logits, &t, true).unwrap();
    let (lc, gc) = c.cross_entropy(&logits, &t, true).unwrap();
    assert_close("ce rank 3", &lg, &lc);
    assert_close("ce rank 3 grad", &gg.unwrap(), &gc.unwrap());
}

pub fn select_and_slices_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    let x = rand(&[3, 4, 5], 95);
    let y = rand(&[4, 1], 96);
    let cond = c
        .binary(BinaryOp::Gt, &rand(&[3, 1, 5], 97), &Tensor::scalar(0.0))
        .unwrap();
    for (a, b) in [(&x, &y), (&y, &x)] {
        assert_close(
            "select",
            &g.select(&cond, a, b).unwrap(),
            &c.select(&cond, a, b).unwrap(),
        );
    }
    for axis in 0..3 {
        let size = x.shape()[axis];
        for (start, step) in [(0, 1), (1, 2), (size - 1, 1)] {
            let len = (size - start).div_ceil(step);
            let what = format!("slice_axis {axis} {start} {step}");
            let (sg, sc) = (
                g.slice_axis(&x, axis, start, step, len).unwrap(),
                c.slice_axis(&x, axis, start, step, len).unwrap(),
            );
            assert_close(&what, &sg, &sc);
            assert_close(
                &format!("un{what}"),
                &g.unslice_axis(&sc, x.shape(), axis, start, step).unwrap(),
                &c.unslice_axis(&sc, x.shape(), axis, start, step).unwrap(),
            );
        }
    }
}

pub fn layout_ops_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    let x = rand(&[2, 3, 4, 5], 90);
    for perm in [[0, 1, 2, 3], [3, 2, 1, 0], [0, 2, 1, 3], [1, 0, 3, 2]] {
        assert_close(
            &format!("permute {perm:?}"),
            &g.permute(&x, &perm).unwrap(),
            &c.permute(&x, &perm).unwrap(),
        );
    }
    let grad = rand(&[4, 3, 5], 91);
    for shape in [
        vec![4, 3, 5],
        vec![3, 5],
        vec![5],
        vec![],
        vec![1, 5],
        vec![4, 1, 5],
        vec![3, 1],
    ] {
        let what = format!("sum_to_shape {shape:?}");
        assert_close(
            &what,
            &g.sum_to_shape(&grad, &shape).unwrap(),
            &c.sum_to_shape(&grad, &shape).unwrap(),
        );
    }
}

pub fn embedding_gather_and_scatter_add_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    let table = rand(&[11, 6], 100);
    let idx = ids(40, 11, 101).reshape(vec![5, 8]);
    assert_close(
        "gather_rows",
        &g.gather_rows(&table, &idx).unwrap(),
        &c.gather_rows(&table, &idx).unwrap(),
    );
    let src = rand(&[5, 8, 6], 102);
    assert_close(
        "scatter_add_rows",
        &g.scatter_add_rows(&idx, &src, 11).unwrap(),
        &c.scatter_add_rows(&idx, &src, 11).unwrap(),
    );
}

pub fn norms_forward_and_backward_match_the_cpu(g: &dyn Backend) {
    let c = cpu();
    for shape in [vec![6, 32], vec![2, 3, 100], vec![4, 1]] {
        let x = rand(&shape, 110);
        let dy = rand(&shape, 111);
        let (yg, rg) = g.rms_norm(&x, 1e-5).unwrap();
        let (yc, rc) = c.rms_norm(&x, 1e-5).unwrap();
        assert_close("rms_norm y", &yg, &yc);
        assert_close("rms_norm inv_rms", &rg, &rc);
        assert_close(
            "rms_norm backward",
            &g.rms_norm_backward(&x, &rc, &dy).unwrap(),
            &c.rms_norm_backward(&x, &rc, &dy).unwrap(),
        );
        let (yg, mg, sg) = g.layer_norm(&x, 1e-5).unwrap();
        let (yc, mc, sc) = c.layer_norm(&x, 1e-5).unwrap();
        assert_close("layer_norm y", &yg, &yc);
        assert_close("layer_norm mean", &mg, &mc);
        assert_close("layer_norm inv_std", &sg, &sc);
        assert_close(
            "layer_norm backward",
            &g.layer_norm_backward(&x, &mc, &sc, &dy).unwrap(),
            &c.layer_norm_backward(&x, &mc, &sc, &dy).unwrap(),
        );
    }
}

pub fn adam_and_adamw_steps_match_the_cpu_and_copy_on_write(g: &dyn Backend) {
    let c = cpu();
    for wd in [0.0, 0.01] {
        let (mut pg, mut mg, mut vg) = (
            g.upload(&rand(&[300], 120)).unwrap(),
            g.upload(&Tensor::zeros(vec![300])).unwrap(),
            g.upload(&Tensor::zeros(vec![300])).unwrap(),
        );
        let (mut pc, mut mc, mut vc) = (
            rand(&[300], 120),
            Tensor::zeros(vec![300]),
            Tensor::zeros(vec![300]),
        );
        let before = pg.clone();
        for step in 1..=3 {
            let grad = rand(&[300], 130 + step);
            let h = mlpl_devices::AdamStep {
                lr: 0.01,
                b1: 0.9,
                b2: 0.999,
                eps: 1e-8,
                wd,
                t: step,
            };
            g.adam_update(&mut pg, &grad, &mut mg, &mut vg, h).unwrap();
            c.adam_update(&mut pc, &grad, &mut mc, &mut vc, h).unwrap();
        }
        assert_close("adam p", &pg, &pc);
        assert_close("adam m", &mg, &mc);
        assert_close("adam v", &vg, &vc);
        assert_close("clone before the steps", &before, &rand(&[300], 120));
    }
}
