//! Training on CUDA matches the CPU: the loss curves (`last_losses`) of the
//! training examples agree within float32 tolerance, and parameters stay on the
//! GPU across steps (only about one download per step, the loss). Needs a GPU and
//! a build with `--features mlpl-devices/cuda`: elsewhere each test says why it
//! skips, unless `MLPL_REQUIRE_GPU=1` (set by `scripts/gpu-check.sh`).

use mlpl_lang::eval::DeviceContext;
use mlpl_lang::value::DeviceTarget;

use crate::device_training::{assert_curves_match, example, run_on, tiny_lm};

fn cuda() -> DeviceTarget {
    DeviceTarget::parse("cuda").unwrap()
}

/// Whether CUDA can run here; says why not otherwise.
fn have_gpu(test: &str) -> bool {
    match DeviceContext::new().availability(cuda()) {
        Ok(()) => true,
        Err(why) => {
            let required = std::env::var("MLPL_REQUIRE_GPU").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "MLPL_REQUIRE_GPU=1 but CUDA is unavailable: {}",
                why.reason()
            );
            eprintln!("SKIPPED {test}: {}", why.reason());
            false
        }
    }
}

#[test]
fn tiny_mlp_loss_curve_matches_the_cpu() {
    if !have_gpu("tiny_mlp_loss_curve_matches_the_cpu") {
        return;
    }
    let src = example("tiny_mlp.mlpl") + "\nlast_losses\n";
    let (g, c) = (run_on(&src, cuda()), run_on(&src, DeviceTarget::CPU));
    assert_curves_match("tiny_mlp", &g, &c);
}

#[test]
fn tiny_lm_loss_curve_matches_the_cpu() {
    if !have_gpu("tiny_lm_loss_curve_matches_the_cpu") {
        return;
    }
    let src = tiny_lm(64, 30) + "\nlast_losses\n";
    let (g, c) = (run_on(&src, cuda()), run_on(&src, DeviceTarget::CPU));
    assert_curves_match("tiny_lm d=64", &g, &c);
}

#[test]
fn training_keeps_parameters_on_the_gpu() {
    if !have_gpu("training_keeps_parameters_on_the_gpu") {
        return;
    }
    let backend = DeviceContext::new().backend(cuda());
    let steps = 40;
    let short = tiny_lm(64, 10) + "\nlast_losses\n";
    let long = tiny_lm(64, 10 + steps) + "\nlast_losses\n";
    // Per-step transfers: the difference between a long and a short run.
    let c0 = backend.counters();
    run_on(&short, cuda());
    let c1 = backend.counters();
    run_on(&long, cuda());
    let c2 = backend.counters();
    let per_step = |a: u64, b: u64, c: u64| ((c - b) as f64 - (b - a) as f64) / steps as f64;
    let downloads = per_step(c0.downloads, c1.downloads, c2.downloads);
    let bytes_up = per_step(c0.bytes_up, c1.bytes_up, c2.bytes_up);
    let launches = per_step(c0.kernel_launches, c1.kernel_launches, c2.kernel_launches);
    eprintln!(
        "tiny_lm d=64 per step: {downloads:.1} downloads, {bytes_up:.0} bytes up, {launches:.0} kernel launches, {} CPU fallbacks in all",
        c2.cpu_fallbacks - c0.cpu_fallbacks
    );
    assert!(
        downloads <= 2.0,
        "{downloads} downloads per step: something reads device data on the host"
    );
    // The parameters (about 200k floats at d=64) must not be uploaded every step.
    assert!(bytes_up < 100_000.0, "{bytes_up} bytes uploaded per step");
    assert_eq!(
        c2.cpu_fallbacks - c0.cpu_fallbacks,
        0,
        "CPU fallbacks while training"
    );
}

#[test]
fn gpu_dropout_masks_equal_the_host_masks() {
    if !have_gpu("gpu_dropout_masks_equal_the_host_masks") {
        return;
    }
    use mlpl_lang::data::rng;
    let backend = DeviceContext::new().backend(cuda());
    for (seed, step, p) in [(0u64, 1u64, 0.1f64), (7, 42, 0.5), (u64::MAX, 3, 0.9)] {
        let key = mlpl_devices::DropoutKey {
            stream: rng::mix(seed),
            counter: step,
        };
        let gpu = backend
            .dropout_mask(&[37, 29], key, p)
            .unwrap()
            .expect("the CUDA backend makes dropout masks");
        let scale = (1.0 / (1.0 - p)) as f32;
        for (i, &v) in gpu.host().iter().enumerate() {
            let want = if rng::dropout_keep(seed, step, i as u64, p) {
                scale
            } else {
                0.0
            };
            assert_eq!(v, want, "seed {seed} step {step} p {p}: element {i}");
        }
    }
}
