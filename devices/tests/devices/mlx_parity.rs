//! Every `Backend` op on MLX against the CPU backend within float32 tolerance,
//! forward and backward (the shared cases of `parity`), plus Engram's kernels,
//! residency, exact counters (uploads, downloads, bytes, kernel calls,
//! evaluations), visible CPU fallbacks and the fused layers. Needs a build with
//! `--features mlpl-devices/mlx` (MLX's CPU backend on Linux, see
//! scripts/mlx-venv.sh): elsewhere each test says why it skips, unless
//! `MLPL_REQUIRE_MLX=1` (set by scripts/test-all.sh when MLX is built), which
//! makes a missing MLX a failure.

use std::sync::Arc;

use mlpl_devices::{cpu, Backend, BinaryOp, DeviceKind, ReduceOp, Tensor, UnaryOp};

use crate::parity::{self, assert_close, ids, rand};

/// The MLX backend, or `None` after saying why there is none.
fn mlx(test: &str) -> Option<Arc<dyn Backend>> {
    match mlpl_devices::mlx::open() {
        Ok(b) => Some(b),
        Err(why) => {
            let required = std::env::var("MLPL_REQUIRE_MLX").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "MLPL_REQUIRE_MLX=1 but MLX is unavailable: {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// The first Adam step with the usual rates, as the optimizer tests take it.
fn adam_step() -> mlpl_devices::AdamStep {
    mlpl_devices::AdamStep {
        lr: 0.01,
        b1: 0.9,
        b2: 0.999,
        eps: 1e-8,
        wd: 0.0,
        t: 1,
    }
}

/// Runs a shared parity case on MLX.
macro_rules! parity_on_mlx {
    ($($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            if let Some(g) = mlx(stringify!($case)) {
                parity::$case(&*g);
            }
        }
    )*};
}

parity_on_mlx!(
    unary_ops_match_the_cpu,
    binary_ops_broadcast_like_the_cpu,
    matmul_matches_the_cpu_with_batch_broadcasting,
    transposed_matmul_matches_the_cpu,
    reductions_and_argmax_match_the_cpu,
    softmax_family_forward_and_backward_match_the_cpu,
    cross_entropy_loss_and_gradient_match_the_cpu,
    select_and_slices_match_the_cpu,
    layout_ops_match_the_cpu,
    embedding_gather_and_scatter_add_match_the_cpu,
    norms_forward_and_backward_match_the_cpu,
    adam_and_adamw_steps_match_the_cpu_and_copy_on_write,
);

#[test]
fn mlx_reports_its_kind() {
    if let Some(g) = mlx("mlx_reports_its_kind") {
        assert_eq!(g.kind(), DeviceKind::Mlx);
    }
}

/// Engram on MLX: the causal convolution and its gradients as MLX sums (float32
/// tolerance); the 64-bit n-gram hash on MLX's integers (the CPU's bits).
#[test]
fn engram_kernels_match_the_cpu() {
    let Some(g) = mlx("engram_kernels_match_the_cpu") else {
        return;
    };
    let c = cpu();
    let x = rand(&[3, 9, 6], 111);
    let w = rand(&[4, 6], 112);
    let dy = rand(&[3, 9, 6], 113);
    assert_close(
        "causal_conv",
        &g.causal_conv(&x, &w).unwrap(),
        &c.causal_conv(&x, &w).unwrap(),
    );
    let (gx, gw) = g.causal_conv_backward(&x, &w, &dy).unwrap();
    let (cx, cw) = c.causal_conv_backward(&x, &w, &dy).unwrap();
    assert_close("causal_conv_backward dx", &gx, &cx);
    assert_close("causal_conv_backward dw", &gw, &cw);
    // A kernel longer than the sequence, and one tap.
    for k in [12, 1] {
        let w = rand(&[k, 6], 114);
        assert_close(
            &format!("causal_conv K={k}"),
            &g.causal_conv(&x, &w).unwrap(),
            &c.causal_conv(&x, &w).unwrap(),
        );
        let (gx, gw) = g.causal_conv_backward(&x, &w, &dy).unwrap();
        let (cx, cw) = c.causal_conv_backward(&x, &w, &dy).unwrap();
        assert_close(&format!("dx K={k}"), &gx, &cx);
        assert_close(&format!("dw K={k}"), &gw, &cw);
    }
    let idx = ids(40, 300, 110).reshape(vec![4, 10]);
    let (hg, hc) = (
        g.engram_hash(&idx, &[2, 3], 4, 997, 9).unwrap(),
        c.engram_hash(&idx, &[2, 3], 4, 997, 9).unwrap(),
    );
    assert_eq!(hg.shape(), hc.shape());
    assert_eq!(hg.host(), hc.host(), "engram_hash");
}

/// The fused layers (bias + activation, masked attention softmax, the
/// element-wise gradients) against the CPU's.
#[test]
fn fused_layers_forward_and_backward_match_the_cpu() {
    let Some(g) = mlx("fused_layers_forward_and_backward_match_the_cpu") else {
        return;
    };
    let c = cpu();
    let x = rand(&[6, 10], 200);
    let bias = rand(&[10], 201);
    let dy = rand(&[6, 10], 202);
    for act in [
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::GeluErf,
        UnaryOp::Silu,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
    ] {
        let (yg, yc) = (
            g.bias_act(&x, &bias, act).unwrap(),
            c.bias_act(&x, &bias, act).unwrap(),
        );
        assert_close(&format!("bias_act {act:?}"), &yg, &yc);
        let (dg, bg) = g.bias_act_backward(&x, &bias, &yc, &dy, act, true).unwrap();
        let (dc, bc) = c.bias_act_backward(&x, &bias, &yc, &dy, act, true).unwrap();
        assert_close(&format!("bias_act_backward dx {act:?}"), &dg, &dc);
        assert_close(
            &format!("bias_act_backward dbias {act:?}"),
            &bg.unwrap(),
            &bc.unwrap(),
        );
    }
    let p = parity::positive(&[6, 10], 203);
    for op in [
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
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Erf,
        UnaryOp::GeluErf,
    ] {
        let y = c.unary(op, &p).unwrap();
        assert_close(
            &format!("unary_backward {op:?}"),
            &g.unary_backward(op, &p, &y, &dy).unwrap(),
            &c.unary_backward(op, &p, &y, &dy).unwrap(),
        );
    }
    let scores = rand(&[2, 3, 5, 5], 204);
    let dscores = rand(&[2, 3, 5, 5], 205);
    for causal in [false, true] {
        let (yg, yc) = (
            g.masked_softmax(&scores, 2.0, causal).unwrap(),
            c.masked_softmax(&scores, 2.0, causal).unwrap(),
        );
        assert_close(&format!("masked_softmax causal={causal}"), &yg, &yc);
        assert_close(
            &format!("masked_softmax_backward causal={causal}"),
            &g.masked_softmax_backward(&yc, &dscores, 2.0, causal)
                .unwrap(),
            &c.masked_softmax_backward(&yc, &dscores, 2.0, causal)
                .unwrap(),
        );
    }
}

/// Uploads, downloads, bytes, kernel calls and evaluations counted exactly;
/// results stay MLX arrays until read. Counted in a counter scope, so tests
/// running in parallel on the shared backend do not disturb the counts.
#[test]
fn tensors_stay_resident_and_counters_are_exact() {
    let Some(g) = mlx("tensors_stay_resident_and_counters_are_exact") else {
        return;
    };
    let scope = mlpl_devices::CounterScope::enter();
    let counts = scope.counts();
    let now = || counts.snapshot(DeviceKind::Mlx);
    let x = rand(&[64, 32], 140);
    let w = rand(&[32, 16], 141);
    let (xd, wd) = (g.upload(&x).unwrap(), g.upload(&w).unwrap());
    assert!(!xd.is_host() && !wd.is_host(), "uploads live in MLX arrays");
    let h = g.matmul(&xd, &wd).unwrap();
    let a = g.unary(UnaryOp::Relu, &h).unwrap();
    let s = g.reduce(ReduceOp::Sum, &a, None).unwrap();
    assert!(!s.is_host(), "results stay MLX arrays");
    let mid = now();
    assert_eq!(mid.uploads, 2);
    assert_eq!(mid.bytes_up, 4 * (64 * 32 + 32 * 16));
    assert_eq!(mid.downloads, 0, "nothing crossed to the host yet");
    assert_eq!(mid.evaluations, 0, "nothing was evaluated yet (lazy)");
    assert_eq!(mid.kernel_launches, 3);
    // Reading a result evaluates and downloads it once; reading again uses the host copy.
    let expect = cpu()
        .reduce(
            ReduceOp::Sum,
            &cpu()
                .unary(UnaryOp::Relu, &cpu().matmul(&x, &w).unwrap())
                .unwrap(),
            None,
        )
        .unwrap();
    assert_close("chain", &s, &expect);
    let _ = s.host();
    let end = now();
    assert_eq!((end.downloads, end.bytes_down, end.evaluations), (1, 4, 1));
    // A host input is copied in once while it lives, also under another
    // shape (`x` was uploaded above: no new copy).
    let _ = g.unary(UnaryOp::Exp, &x).unwrap();
    assert_eq!(now().uploads - end.uploads, 0);
    let z = rand(&[64, 32], 142);
    let _ = g.unary(UnaryOp::Exp, &z).unwrap();
    let _ = g.unary(UnaryOp::Tanh, &z.reshape(vec![32, 64])).unwrap();
    assert_eq!(now().uploads - end.uploads, 1);
    // Changed host data is a new upload, never served from the old copy.
    let mut y = z.clone();
    y.host_mut()[0] = 100.0;
    let e = g.unary(UnaryOp::Neg, &y).unwrap();
    assert_eq!(now().uploads - end.uploads, 2);
    assert_eq!(e.host()[0], -100.0);
    assert_eq!(now().cpu_fallbacks, 0);
    // An optimizer call settles its state: one evaluation for all its
    // parameters, no transfer.
    let before = now();
    let (mut p, mut m, mut v) = (
        xd.clone(),
        g.upload(&Tensor::zeros(vec![64, 32])).unwrap(),
        g.upload(&Tensor::zeros(vec![64, 32])).unwrap(),
    );
    let after_zeros = now();
    let grad = g.binary(BinaryOp::Mul, &xd, &xd).unwrap();
    let step = adam_step();
    g.adam_update(&mut p, &grad, &mut m, &mut v, step).unwrap();
    // A second parameter of the same optimizer call.
    let (mut q, mut qm, mut qv) = (h.clone(), h.clone(), h.clone());
    g.adam_update(&mut q, &h, &mut qm, &mut qv, step).unwrap();
    assert_eq!(
        now().evaluations,
        after_zeros.evaluations,
        "the updates wait for the end of the optimizer call"
    );
    // The next other kernel settles both updates together: one evaluation.
    let _ = g.unary(UnaryOp::Neg, &q).unwrap();
    let _ = g.unary(UnaryOp::Neg, &p).unwrap();
    let done = now();
    assert_eq!(after_zeros.uploads - before.uploads, 2);
    assert_eq!(
        done.uploads, after_zeros.uploads,
        "the step uploads nothing"
    );
    assert_eq!(
        done.downloads, after_zeros.downloads,
        "the step downloads nothing"
    );
    assert_eq!(done.evaluations - after_zeros.evaluations, 1);
    assert!(!p.is_host() && !m.is_host() && !v.is_host());
}

/// Engram's 64-bit n-gram hash runs on MLX's `uint64` arrays with the CPU's
/// bits: no fallback, no download of the ids, the result an MLX tensor.
/// (The generic fallback path, for kernels a device lacks, is tested in
/// `devices/src/fallback.rs` on a device that implements nothing.)
#[test]
fn engram_hash_runs_on_mlx_with_the_cpus_bits() {
    let Some(g) = mlx("engram_hash_runs_on_mlx_with_the_cpus_bits") else {
        return;
    };
    let scope = mlpl_devices::CounterScope::enter();
    let counts = scope.counts();
    let host_ids = ids(36, 50_000, 7).reshape(vec![3, 2, 6]);
    let idx = g.upload(&host_ids).unwrap();
    // Orders longer than the sequence, one head and several, seeds with high bits.
    for (orders, heads, rows, seed) in [
        (vec![2], 2, 101, 3u64),
        (vec![1, 2, 3, 8], 3, 65_521, u64::MAX - 5),
        (vec![4], 1, 1, 0x9E37_79B9_7F4A_7C15),
    ] {
        let got = g.engram_hash(&idx, &orders, heads, rows, seed).unwrap();
        assert!(!got.is_host(), "the rows are an MLX tensor");
        let want = cpu()
            .engram_hash(&host_ids, &orders, heads, rows, seed)
            .unwrap();
        assert_eq!(got.shape(), want.shape());
        assert_eq!(
            got.host(),
            want.host(),
            "engram_hash {orders:?} {heads} {rows} {seed}"
        );
    }
    let c = counts.snapshot(DeviceKind::Mlx);
    assert_eq!(c.cpu_fallbacks, 0);
    assert_eq!(c.uploads, 1, "only the ids were uploaded");
    assert_eq!(c.downloads, 3, "only the three results were read");
    assert!(g.take_fallbacks().is_empty());
}

/// Dropout masks are made on MLX from the same key with the CPU's bits (the
/// eager masks of LANGUAGE §13.7), with nothing uploaded.
#[test]
fn dropout_masks_are_made_on_mlx_with_the_cpus_bits() {
    let Some(g) = mlx("dropout_masks_are_made_on_mlx_with_the_cpus_bits") else {
        return;
    };
    let scope = mlpl_devices::CounterScope::enter();
    let counts = scope.counts();
    for (shape, stream, p) in [
        (vec![4, 5], 1u64, 0.5),
        (vec![10_007], 0xDEAD_BEEF_0123_4567, 0.1),
        (vec![3, 33, 7], u64::MAX, 0.9),
        (vec![64], 42, 0.0),
        (vec![64], 42, 1.0),
        (vec![2, 512], 7, 1.0 / 3.0),
    ] {
        let key = mlpl_devices::DropoutKey { stream, counter: 3 };
        let got = g
            .dropout_mask(&shape, key, p)
            .unwrap()
            .expect("a mask made on MLX");
        assert!(!got.is_host(), "the mask is an MLX tensor");
        let want = cpu().dropout_mask(&shape, key, p).unwrap().unwrap();
        assert_eq!(got.shape(), want.shape());
        let bits = |t: &Tensor| t.host().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&got),
            bits(&want),
            "dropout_mask {shape:?} {key:?} {p}"
        );
    }
    let c = counts.snapshot(DeviceKind::Mlx);
    assert_eq!((c.uploads, c.cpu_fallbacks), (0, 0));
}

/// An array larger than MLX's memory limit is out of memory (E0503 in the
/// language) when the operation asks for it, with the bytes asked and free,
/// and MLX works on afterwards.
#[test]
fn out_of_memory_reports_bytes_asked_and_free() {
    let Some(g) = mlx("out_of_memory_reports_bytes_asked_and_free") else {
        return;
    };
    // [n, 1] · [1, n] asks for 4·n² bytes (about 1.4 TB).
    let n = 600_000;
    let (a, b) = (Tensor::zeros(vec![n, 1]), Tensor::zeros(vec![1, n]));
    match g.matmul(&a, &b) {
        Err(mlpl_devices::DeviceError::OutOfMemory {
            requested_bytes,
            free_bytes,
            ..
        }) => {
            assert_eq!(requested_bytes, 4 * (n as u64) * (n as u64));
            assert!(free_bytes.is_some_and(|f| f < requested_bytes));
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    let x = rand(&[4], 160);
    assert_close(
        "after OOM",
        &g.unary(UnaryOp::Neg, &x).unwrap(),
        &cpu().unary(UnaryOp::Neg, &x).unwrap(),
    );
}

/// MLX's streams belong to the thread that made them (an array made on one
/// thread cannot be evaluated on another: "There is no Stream(cpu, N) in
/// current thread"). So an optimizer update left pending on one thread is
/// settled there, never by the next kernel of another thread, and a host
/// tensor used on two threads is uploaded on each rather than shared.
#[test]
fn pending_updates_and_uploads_stay_on_their_thread() {
    let Some(g) = mlx("pending_updates_and_uploads_stay_on_their_thread") else {
        return;
    };
    let shared = rand(&[8, 4], 41);
    let step = adam_step();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (g, shared) = (&*g, &shared);
    std::thread::scope(|s| {
        let first = s.spawn(move || {
            // Uploads `shared` on this thread and leaves an update pending.
            let neg = g.unary(UnaryOp::Neg, shared).unwrap();
            let mut p = g.upload(&rand(&[8, 4], 42)).unwrap();
            let mut m = g.upload(&Tensor::zeros(vec![8, 4])).unwrap();
            let mut v = g.upload(&Tensor::zeros(vec![8, 4])).unwrap();
            g.adam_update(&mut p, &neg, &mut m, &mut v, step).unwrap();
            ready_tx.send(()).unwrap();
            done_rx.recv().unwrap();
            // Settled here, by this thread, and equal to the CPU's update.
            let c = cpu();
            let mut want = rand(&[8, 4], 42);
            let (mut wm, mut wv) = (Tensor::zeros(vec![8, 4]), Tensor::zeros(vec![8, 4]));
            let wneg = c.unary(UnaryOp::Neg, shared).unwrap();
            c.adam_update(&mut want, &wneg, &mut wm, &mut wv, step)
                .unwrap();
            assert_close("the update settled on its own thread", &p, &want);
        });
        let second = s.spawn(move || {
            ready_rx.recv().unwrap();
            // Another thread's kernel on the same host tensor while the first
            // thread's update is pending.
            let r = g.unary(UnaryOp::Neg, shared).map(|t| t.host().to_vec());
            done_tx.send(()).unwrap();
            let r = r.expect("a kernel on a second thread");
            let want = cpu().unary(UnaryOp::Neg, shared).unwrap();
            assert_eq!(r, want.host(), "neg on the second thread");
        });
        second.join().unwrap();
        first.join().unwrap();
    });
}
