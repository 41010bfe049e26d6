//! Running the training examples on a device other than the CPU, shared by
//! the CUDA and MLX training tests: a program run with a default device, the
//! examples' sources, and loss curves compared with the CPU's.

use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::{DeviceTarget, Value};

/// Runs `src` with `device` as the default device; the last value's elements.
pub fn run_on(src: &str, device: DeviceTarget) -> Vec<f32> {
    let parsed = mlpl_syntax::parse(src);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    let mut ws = Workspace::new();
    ws.default_device = Some(device);
    let mut it = Interp::new(ws);
    match it.run(&parsed.program) {
        Ok(Some(Value::Array(a))) => a.tensor().to_vec(),
        other => panic!("expected an array, got {other:?}"),
    }
}

/// The repository root: `MLPL_REPO_ROOT` (a prebuilt test binary run elsewhere,
/// see `scripts/gpu-check.sh`) or where this crate was built.
pub fn repo_root() -> String {
    std::env::var("MLPL_REPO_ROOT")
        .unwrap_or_else(|_| format!("{}/../..", env!("CARGO_MANIFEST_DIR")))
}

pub fn example(name: &str) -> String {
    let path = format!("{}/examples/{name}", repo_root());
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The tiny transformer LM of `bench/train` at width `d` for `steps` steps.
pub fn tiny_lm(d: usize, steps: usize) -> String {
    let path = format!("{}/bench/train/tiny_lm.mlpl.in", repo_root());
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .replace("@D@", &d.to_string())
        .replace("@STEPS@", &steps.to_string())
}

#[track_caller]
pub fn assert_curves_match(what: &str, gpu: &[f32], cpu: &[f32]) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: curve lengths differ");
    assert!(!cpu.is_empty(), "{what}: no losses recorded");
    for (step, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        assert!(
            (g - c).abs() <= 1e-3 + 1e-2 * c.abs(),
            "{what}: step {step}: device loss {g} vs cpu {c}"
        );
    }
    assert!(
        gpu[gpu.len() - 1] < gpu[0],
        "{what}: the loss did not fall on the device"
    );
}
