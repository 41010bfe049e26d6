//! Every `Backend` op on CUDA against the CPU backend within float32 tolerance,
//! forward and backward, plus residency, exact counters, copy-on-write, visible
//! CPU fallbacks and out-of-memory. Needs a GPU: elsewhere each test says why it
//! skips, unless `MLPL_REQUIRE_GPU=1` (set by `scripts/gpu-check.sh`), which makes
//! a missing GPU a failure.
#![cfg(feature = "cuda")]

use std::sync::Arc;

use mlpl_devices::{cpu, Backend, BinaryOp, DeviceError, ReduceOp, Tensor, UnaryOp};

use crate::parity::{self, assert_close, ids, rand};

/// The CUDA backend of device 0, or `None` after saying why there is none.
fn gpu(test: &str) -> Option<Arc<dyn Backend>> {
    match mlpl_devices::cuda::open(0) {
        Ok(b) => Some(b),
        Err(why) => {
            let required = std::env::var("MLPL_REQUIRE_GPU").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "MLPL_REQUIRE_GPU=1 but CUDA is unavailable: {why}"
            );
            eprintln!("SKIPPED {test}: no CUDA device ({why})");
            None
        }
    }
}

/// A backend of its own (own counters), for tests that count exactly while other
/// tests run in parallel on the shared one.
fn private_gpu(test: &str) -> Option<Arc<dyn Backend>> {
    gpu(test)?;
    match mlpl_devices::cuda::CudaBackend::open(0) {
        Ok(b) => Some(Arc::new(b)),
        Err(why) => panic!("device 0 opened once but not twice: {why}"),
    }
}

#[test]
fn unary_ops_match_the_cpu() {
    if let Some(g) = gpu("unary_ops_match_the_cpu") {
        parity::unary_ops_match_the_cpu(&*g);
    }
}

#[test]
fn binary_ops_broadcast_like_the_cpu() {
    if let Some(g) = gpu("binary_ops_broadcast_like_the_cpu") {
        parity::binary_ops_broadcast_like_the_cpu(&*g);
    }
}

#[test]
fn matmul_matches_the_cpu_with_batch_broadcasting() {
    if let Some(g) = gpu("matmul_matches_the_cpu_with_batch_broadcasting") {
        parity::matmul_matches_the_cpu_with_batch_broadcasting(&*g);
    }
}

#[test]
fn transposed_matmul_matches_the_cpu() {
    if let Some(g) = gpu("transposed_matmul_matches_the_cpu") {
        parity::transposed_matmul_matches_the_cpu(&*g);
    }
}

#[test]
fn reductions_and_argmax_match_the_cpu() {
    if let Some(g) = gpu("reductions_and_argmax_match_the_cpu") {
        parity::reductions_and_argmax_match_the_cpu(&*g);
    }
}

#[test]
fn softmax_family_forward_and_backward_match_the_cpu() {
    if let Some(g) = gpu("softmax_family_forward_and_backward_match_the_cpu") {
        parity::softmax_family_forward_and_backward_match_the_cpu(&*g);
    }
}

#[test]
fn cross_entropy_loss_and_gradient_match_the_cpu() {
    if let Some(g) = gpu("cross_entropy_loss_and_gradient_match_the_cpu") {
        parity::cross_entropy_loss_and_gradient_match_the_cpu(&*g);
    }
}

#[test]
fn select_and_slices_match_the_cpu() {
    if let Some(g) = gpu("select_and_slices_match_the_cpu") {
        parity::select_and_slices_match_the_cpu(&*g);
    }
}

#[test]
fn layout_ops_match_the_cpu() {
    if let Some(g) = gpu("layout_ops_match_the_cpu") {
        parity::layout_ops_match_the_cpu(&*g);
    }
}

#[test]
fn embedding_gather_and_scatter_add_match_the_cpu() {
    if let Some(g) = gpu("embedding_gather_and_scatter_add_match_the_cpu") {
        parity::embedding_gather_and_scatter_add_match_the_cpu(&*g);
    }
}

/// Engram's kernels give the CPU's bits: the hash is integer arithmetic, the
/// convolution sums exact products in f64 in the CPU's order.
#[test]
fn engram_hash_and_causal_conv_are_the_cpus_bits() {
    let Some(g) = gpu("engram_hash_and_causal_conv_are_the_cpus_bits") else {
        return;
    };
    let c = cpu();
    let idx = ids(40, 300, 110).reshape(vec![4, 10]);
    let (hg, hc) = (
        g.engram_hash(&idx, &[2, 3], 4, 997, 9).unwrap(),
        c.engram_hash(&idx, &[2, 3], 4, 997, 9).unwrap(),
    );
    assert_eq!(hg.shape(), hc.shape());
    assert_eq!(hg.host(), hc.host(), "engram_hash");
    let x = rand(&[3, 9, 6], 111);
    let w = rand(&[4, 6], 112);
    let dy = rand(&[3, 9, 6], 113);
    assert_eq!(
        g.causal_conv(&x, &w).unwrap().host(),
        c.causal_conv(&x, &w).unwrap().host(),
        "causal_conv"
    );
    let (gx, gw) = g.causal_conv_backward(&x, &w, &dy).unwrap();
    let (cx, cw) = c.causal_conv_backward(&x, &w, &dy).unwrap();
    assert_eq!(gx.host(), cx.host(), "causal_conv_backward dx");
    assert_eq!(gw.host(), cw.host(), "causal_conv_backward dw");
}

#[test]
fn norms_forward_and_backward_match_the_cpu() {
    if let Some(g) = gpu("norms_forward_and_backward_match_the_cpu") {
        parity::norms_forward_and_backward_match_the_cpu(&*g);
    }
}

#[test]
fn adam_and_adamw_steps_match_the_cpu_and_copy_on_write() {
    if let Some(g) = gpu("adam_and_adamw_steps_match_the_cpu_and_copy_on_write") {
        parity::adam_and_adamw_steps_match_the_cpu_and_copy_on_write(&*g);
    }
}

#[test]
fn tensors_stay_resident_and_counters_are_exact() {
    let Some(g) = private_gpu("tensors_stay_resident_and_counters_are_exact") else {
        return;
    };
    let x = rand(&[64, 32], 140);
    let w = rand(&[32, 16], 141);
    let before = g.counters();
    let (xd, wd) = (g.upload(&x).unwrap(), g.upload(&w).unwrap());
    assert!(!xd.is_host() && !wd.is_host(), "uploads live on the GPU");
    let h = g.matmul(&xd, &wd).unwrap();
    let a = g.unary(UnaryOp::Relu, &h).unwrap();
    let s = g.reduce(ReduceOp::Sum, &a, None).unwrap();
    assert!(!s.is_host(), "results stay on the GPU");
    let mid = g.counters();
    assert_eq!(mid.uploads - before.uploads, 2);
    assert_eq!(mid.bytes_up - before.bytes_up, 4 * (64 * 32 + 32 * 16));
    assert_eq!(
        mid.downloads - before.downloads,
        0,
        "nothing crossed to the host yet"
    );
    assert_eq!(mid.kernel_launches - before.kernel_launches, 3);
    assert!(mid.memory_bytes >= 4 * (64 * 32 + 32 * 16 + 64 * 16 * 2 + 1));
    // Reading a result downloads it once; reading again uses the host copy.
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
    let end = g.counters();
    assert_eq!(end.downloads - before.downloads, 1);
    assert_eq!(end.bytes_down - before.bytes_down, 4);
    // A one-element host operand goes to the kernel by value: no upload.
    let scaled = g.binary(BinaryOp::Mul, &a, &Tensor::scalar(0.5)).unwrap();
    let halved = g
        .binary(BinaryOp::Div, &Tensor::scalar(1.0), &scaled)
        .unwrap();
    assert_eq!(g.counters().uploads - end.uploads, 0);
    let expect_a = cpu()
        .unary(UnaryOp::Relu, &cpu().matmul(&x, &w).unwrap())
        .unwrap();
    let expect = cpu()
        .binary(
            BinaryOp::Div,
            &Tensor::scalar(1.0),
            &cpu()
                .binary(BinaryOp::Mul, &expect_a, &Tensor::scalar(0.5))
                .unwrap(),
        )
        .unwrap();
    assert_close("by-value scalars", &halved, &expect);
    let end = g.counters();
    // A host input is uploaded for the call and counted, once while it lives.
    let _ = g.unary(UnaryOp::Exp, &x).unwrap();
    let _ = g.unary(UnaryOp::Tanh, &x.reshape(vec![32, 64])).unwrap();
    assert_eq!(g.counters().uploads - end.uploads, 1);
    // New host data is a new upload; changed data is never served from the old copy.
    let mut y = x.clone();
    y.host_mut()[0] = 100.0;
    let e = g.unary(UnaryOp::Neg, &y).unwrap();
    assert_eq!(g.counters().uploads - end.uploads, 2);
    assert_eq!(e.host()[0], -100.0);
    assert_eq!(g.counters().cpu_fallbacks - before.cpu_fallbacks, 0);
}

#[test]
fn ops_without_a_kernel_fall_back_visibly() {
    let Some(g) = private_gpu("ops_without_a_kernel_fall_back_visibly") else {
        return;
    };
    let _ = g.take_fallbacks();
    let before = g.counters().cpu_fallbacks;
    // Ten axes whose broadcast pattern alternates cannot be merged to 8.
    let sa: Vec<usize> = (0..10).map(|i| if i % 2 == 0 { 2 } else { 1 }).collect();
    let sb: Vec<usize> = (0..10).map(|i| if i % 2 == 0 { 1 } else { 2 }).collect();
    let (a, b) = (rand(&sa, 150), rand(&sb, 151));
    let got = g.binary(BinaryOp::Add, &a, &b).unwrap();
    assert_close(
        "fallback add",
        &got,
        &cpu().binary(BinaryOp::Add, &a, &b).unwrap(),
    );
    assert_eq!(g.counters().cpu_fallbacks - before, 1);
    assert_eq!(g.take_fallbacks(), vec!["binary_add"]);
    assert!(g.take_fallbacks().is_empty());
}

#[test]
fn out_of_memory_reports_bytes_asked_and_free() {
    let Some(g) = gpu("out_of_memory_reports_bytes_asked_and_free") else {
        return;
    };
    // [n, 1] · [1, n] asks for 4·n² bytes (about 1.4 TB), more than any GPU has.
    let n = 600_000;
    let a = Tensor::zeros(vec![n, 1]);
    let b = Tensor::zeros(vec![1, n]);
    match g.matmul(&a, &b) {
        Err(DeviceError::OutOfMemory {
            requested_bytes,
            free_bytes,
            ..
        }) => {
            assert_eq!(requested_bytes, 4 * (n as u64) * (n as u64));
            assert!(free_bytes.is_some_and(|f| f < requested_bytes));
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    // The device still works afterwards.
    let x = rand(&[4], 160);
    assert_close(
        "after OOM",
        &g.unary(UnaryOp::Neg, &x).unwrap(),
        &cpu().unary(UnaryOp::Neg, &x).unwrap(),
    );
}
