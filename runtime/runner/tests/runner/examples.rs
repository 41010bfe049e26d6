//! Every `examples/*.mlpl` and `examples/hf/*.mlpl` (the Hugging Face
//! checkpoints, their folders beside them) runs with `mlpl run`, checks clean
//! with `mlpl check`, and its output (standard output and the warnings on
//! standard error) is snapshot-tested.

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut v: Vec<PathBuf> = [dir.clone(), dir.join("hf")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mlpl"))
        .collect();
    v.sort();
    assert!(v.len() >= 5, "expected the examples in {}", dir.display());
    v
}

fn mlpl(args: &[&str], cwd: &Path) -> std::process::Output {
    mlpl_with(args, cwd, &[])
}

/// `mlpl ARGS` in `cwd` with the environment variables `env` set.
fn mlpl_with(args: &[&str], cwd: &Path, env: &[(&str, String)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("MLPL_CPU_ISA")
        .env_remove("MLPL_GEMM_BLOCKING")
        .env_remove("RAYON_NUM_THREADS")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap()
}

/// Why CUDA is unavailable depends on the build and the machine (feature off, no
/// driver, no GPU): snapshots hold a placeholder instead of the reason.
fn without_device_reason(stderr: &str) -> String {
    let cuda = mlpl_lang::value::DeviceTarget::parse("cuda").unwrap();
    match mlpl_lang::eval::DeviceContext::new().availability(cuda) {
        Err(why) => stderr.replace(&why.reason(), "<why CUDA is not available here>"),
        Ok(()) => stderr.to_string(),
    }
}

#[test]
fn every_example_runs_and_matches_its_snapshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exp_dir = std::env::temp_dir().join(format!("mlpl-examples-{}", std::process::id()));
    for path in examples() {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let out = mlpl(
            &["run", &rel, "--exp-dir", exp_dir.to_str().unwrap()],
            &root,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = without_device_reason(&String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{rel} failed:\n{stderr}");
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let name = match path.parent().and_then(|p| p.file_name()) {
            Some(folder) if folder == "hf" => format!("hf_{stem}"),
            _ => stem.to_string(),
        };
        insta::assert_snapshot!(name, format!("--- stdout\n{stdout}--- stderr\n{stderr}"));
    }
}

/// The machine-dependent settings a run can have: every instruction-set level
/// this CPU supports, each with 1 thread and the default blocking and with 2
/// threads and small GEMM blocks (many blocks, every product split across
/// threads).
fn machine_variants() -> Vec<(String, Vec<(&'static str, String)>)> {
    let mut v = Vec::new();
    for isa in mlpl_devices::cpu::supported_isas() {
        v.push((
            format!("{isa}, 1 thread"),
            vec![
                ("MLPL_CPU_ISA", isa.to_string()),
                ("RAYON_NUM_THREADS", "1".to_string()),
            ],
        ));
        v.push((
            format!("{isa}, 2 threads, GEMM blocks 12 x 48"),
            vec![
                ("MLPL_CPU_ISA", isa.to_string()),
                ("RAYON_NUM_THREADS", "2".to_string()),
                ("MLPL_GEMM_BLOCKING", "12,48".to_string()),
            ],
        ));
    }
    v
}

/// Same program, same numbers: every example prints exactly what it prints by
/// default (standard output and warnings) under every [`machine_variants`]
/// setting, so its snapshot holds on every x86-64 CPU.
#[test]
fn every_example_prints_the_same_numbers_on_every_isa_thread_count_and_blocking() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let variants = machine_variants();
    assert!(variants.len() >= 2, "at least the scalar level runs");
    for path in examples() {
        let rel = path.strip_prefix(&root).unwrap().to_str().unwrap();
        let run = |env: &[(&str, String)], tag: &str| {
            let exp_dir =
                std::env::temp_dir().join(format!("mlpl-variant-{}-{tag}", std::process::id()));
            let out = mlpl_with(
                &["run", rel, "--exp-dir", exp_dir.to_str().unwrap()],
                &root,
                env,
            );
            let _ = std::fs::remove_dir_all(&exp_dir);
            assert!(out.status.success(), "{rel} failed under {tag}");
            (
                out.stdout,
                without_device_reason(&String::from_utf8_lossy(&out.stderr)),
            )
        };
        let base = run(&[], "default");
        for (i, (label, env)) in variants.iter().enumerate() {
            let got = run(env, &format!("v{i}"));
            assert!(
                got == base,
                "{rel} prints other numbers with {label}:\n--- default\n{}{}\n--- {label}\n{}{}",
                String::from_utf8_lossy(&base.0),
                base.1,
                String::from_utf8_lossy(&got.0),
                got.1
            );
        }
    }
}

#[test]
fn every_example_checks_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for path in examples() {
        let out = mlpl(&["check", path.to_str().unwrap()], &root);
        assert!(
            out.status.success(),
            "{} has check errors:\n{}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("error["), "{}:\n{stderr}", path.display());
    }
}

/// The training examples print their first and last recorded losses; the loss
/// must fall (the snapshot pins the exact numbers, this states the intent).
#[test]
fn training_examples_reduce_their_loss() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // (example, index of the first loss, index of the last loss) in the printed vector
    for (name, first, last) in [
        ("tiny_lm", 1, 2),
        ("tiny_mlp", 0, 1),
        ("gpt2_block", 0, 1),
        ("llama_block", 0, 1),
        ("moe_block", 0, 1),
        ("logistic_regression", 0, 1),
    ] {
        let out = mlpl(&["run", &format!("examples/{name}.mlpl")], &root);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let values: Vec<f64> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(
            values[last] < 0.7 * values[first],
            "{name}: loss {} → {}",
            values[first],
            values[last]
        );
    }
}
