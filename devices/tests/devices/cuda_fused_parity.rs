//! The CUDA backend's fused kernels (`unary_backward`, `bias_act` and its
//! backward, `masked_softmax` and its backward): the same bits as the trait's
//! composed defaults on the same GPU (`Unfused`), and the CPU's results within
//! float32 tolerance. Needs a GPU: elsewhere each test says why it skips, unless
//! `MLPL_REQUIRE_GPU=1` (set by `scripts/gpu-check.sh`), which makes a missing
//! GPU a failure.
#![cfg(feature = "cuda")]

use mlpl_devices::cuda::CudaBackend;
use mlpl_devices::{Backend, CpuBackend, Tensor, Unfused};

use crate::cpu_program_support;
use cpu_program_support::{tensor as rand, ACTIVATIONS as ACTS};

/// Two backends of device 0 (fused, and composed from its primitives), or
/// `None` after saying why there is no GPU.
fn gpus(test: &str) -> Option<(CudaBackend, Unfused<CudaBackend>)> {
    match (CudaBackend::open(0), CudaBackend::open(0)) {
        (Ok(a), Ok(b)) => Some((a, Unfused(b))),
        (Err(why), _) | (_, Err(why)) => {
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

/// Same shape and bits (every NaN counted as one).
#[track_caller]
fn assert_same(what: &str, fused: &Tensor, composed: &Tensor) {
    assert_eq!(fused.shape(), composed.shape(), "{what}: shapes differ");
    let bits = |t: &Tensor| -> Vec<u32> {
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
    };
    let (a, b) = (bits(fused), bits(composed));
    if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
        panic!(
            "{what}: element {i} is {} fused, {} composed",
            fused.host()[i],
            composed.host()[i]
        );
    }
}

/// Same shape and every element within `1e-4·|cpu| + 1e-5`.
#[track_caller]
fn assert_close(what: &str, gpu: &Tensor, cpu: &Tensor) {
    assert_eq!(gpu.shape(), cpu.shape(), "{what}: shapes differ");
    for (i, (&g, &c)) in gpu.host().iter().zip(cpu.host()).enumerate() {
        let ok = (g.is_nan() && c.is_nan()) || g == c || (g - c).abs() <= 1e-4 * c.abs() + 1e-5;
        assert!(ok, "{what}: element {i} is {g} on the GPU, {c} on the CPU");
    }
}

#[test]
fn bias_act_and_unary_backward_match_the_composition() {
    let Some((f, u)) = gpus("bias_act_and_unary_backward_match_the_composition") else {
        return;
    };
    let cpu = CpuBackend::new();
    for (xs, bs) in [
        (&[7, 5][..], &[1, 5][..]),
        (&[2, 3, 130][..], &[130][..]),
        (&[300, 257][..], &[1, 257][..]),
    ] {
        let x = rand(xs, 1, 3.0);
        let b = rand(bs, 2, 0.5);
        let dy = rand(xs, 3, 1.0);
        for act in ACTS {
            let what = format!("{act:?} {xs:?} + {bs:?}");
            let y = f.bias_act(&x, &b, act).unwrap();
            assert_same(&what, &y, &u.bias_act(&x, &b, act).unwrap());
            assert_close(&what, &y, &cpu.bias_act(&x, &b, act).unwrap());
            let (dx, db) = f.bias_act_backward(&x, &b, &y, &dy, act, true).unwrap();
            let (rdx, rdb) = u.bias_act_backward(&x, &b, &y, &dy, act, true).unwrap();
            assert_same(&format!("dx {what}"), &dx, &rdx);
            assert_same(&format!("dbias {what}"), &db.unwrap(), &rdb.unwrap());
            let yh = Tensor::from_vec(y.shape().to_vec(), y.host().to_vec());
            let (cdx, _) = cpu.bias_act_backward(&x, &b, &yh, &dy, act, false).unwrap();
            assert_close(&format!("dx {what}"), &dx, &cdx);
            assert_same(
                &format!("unary_backward {what}"),
                &f.unary_backward(act, &x, &y, &dy).unwrap(),
                &u.unary_backward(act, &x, &y, &dy).unwrap(),
            );
        }
    }
}

#[test]
fn masked_softmax_matches_the_composition() {
    let Some((f, u)) = gpus("masked_softmax_matches_the_composition") else {
        return;
    };
    let cpu = CpuBackend::new();
    let div = (3f64).sqrt() as f32;
    for shape in [
        &[4, 4][..],
        &[3, 7],
        &[6, 2],
        &[2, 1, 2, 33, 33],
        &[8, 2, 64, 600],
    ] {
        let x = rand(shape, 4, 6.0);
        let dy = rand(shape, 5, 1.0);
        for causal in [false, true] {
            let what = format!("{shape:?} causal={causal}");
            let y = f.masked_softmax(&x, div, causal).unwrap();
            assert_same(&what, &y, &u.masked_softmax(&x, div, causal).unwrap());
            assert_close(&what, &y, &cpu.masked_softmax(&x, div, causal).unwrap());
            let dx = f.masked_softmax_backward(&y, &dy, div, causal).unwrap();
            assert_same(
                &format!("d{what}"),
                &dx,
                &u.masked_softmax_backward(&y, &dy, div, causal).unwrap(),
            );
            let yh = Tensor::from_vec(y.shape().to_vec(), y.host().to_vec());
            assert_close(
                &format!("d{what}"),
                &dx,
                &cpu.masked_softmax_backward(&yh, &dy, div, causal).unwrap(),
            );
        }
    }
}
