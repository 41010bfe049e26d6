//! `mlpl calibrate`: runs the calibration suite on the CPU, writes the cache the
//! editor's estimates, `mlpl estimate` and `estimate_train` read, keeps entries
//! of devices it did not measure, and uses $MLPL_CACHE_DIR by default.

use std::process::Command;

use mlpl_lang::step_cost::kernels::Transcendental;
use mlpl_lang::train_loops::measure::{GEMM_SHAPES, GEMM_SIZES, TRANSCENDENTAL_SIZES};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mlpl-calibrate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn writes_the_calibration_cache() {
    let d = dir("out");
    let file = d.join("calibration.json");
    // A runner-measured entry that `calibrate` must keep.
    std::fs::write(
        &file,
        r#"{"version":1,"devices":[{"device":"cuda:0","gflops":1234,"source":"runner"},{"device":"cpu","gflops":1}]}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["calibrate", "--output"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("cpu: GEMM ") && stdout.contains("µs per kernel replayed"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["version"], 2);
    let devices = v["devices"].as_array().unwrap();
    let cpu = devices.iter().find(|e| e["device"] == "cpu").unwrap();
    assert!(cpu["gflops"].as_f64().unwrap() > 0.0);
    assert_eq!(cpu["size"], 1024);
    // The suite's fixed shapes (the squares, then the step-like ones), and a
    // median with its percentiles for each.
    let model = &cpu["model"];
    let shapes: Vec<(u64, u64, u64, u64, bool, bool)> = model["gemm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let u = |k: &str| p[k].as_u64();
            let b = |k: &str| p[k].as_bool().unwrap_or(false);
            let (m, k, n) = (u("m").unwrap(), u("k").unwrap(), u("n").unwrap());
            (u("batch").unwrap_or(1), m, k, n, b("ta"), b("tb"))
        })
        .collect();
    let squares = GEMM_SIZES.iter().map(|&s| (1, s, s, s, false, false));
    let expected: Vec<(u64, u64, u64, u64, bool, bool)> = squares
        .chain(GEMM_SHAPES.iter().copied())
        .map(|(b, m, k, n, ta, tb)| (b as u64, m as u64, k as u64, n as u64, ta, tb))
        .collect();
    assert_eq!(shapes, expected);
    assert_eq!(GEMM_SIZES.last(), Some(&1024));
    for p in model["gemm"].as_array().unwrap() {
        let g = &p["gflops"];
        let (lo, mid, hi) = (
            g["lo"].as_f64().unwrap(),
            g["median"].as_f64().unwrap(),
            g["hi"].as_f64().unwrap(),
        );
        assert!(0.0 < lo && lo <= mid && mid <= hi, "{p}");
    }
    assert!(model["dispatch_s"]["median"].as_f64().unwrap() > 0.0);
    assert!(model["baseline_bytes"].as_f64().unwrap() > 1e6);
    assert!(model["arena_factor"].as_f64().unwrap() > 0.0);
    // The per-kernel parts: transcendental cost, the GEMM tile, kernel factors.
    assert!(model["transcendental_s"]["median"].as_f64().unwrap() > 0.0);
    // Every function at every size, in the suite's order, each positive.
    let points: Vec<(String, u64, f64)> = model["transcendentals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = p["seconds"]["median"].as_f64().unwrap();
            (
                p["func"].as_str().unwrap().to_string(),
                p["elems"].as_u64().unwrap(),
                s,
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = TRANSCENDENTAL_SIZES
        .iter()
        .flat_map(|&n| Transcendental::ALL.map(|f| (f.name().to_string(), n as u64)))
        .collect();
    assert_eq!(
        points
            .iter()
            .map(|p| (p.0.clone(), p.1))
            .collect::<Vec<_>>(),
        expected
    );
    assert!(points.iter().all(|p| p.2 > 0.0 && p.2 < 1e-5), "{points:?}");
    let tile: Vec<u64> = model["tile"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert!(tile.len() == 2 && tile[0] >= 4 && tile[1] >= 8, "{tile:?}");
    let factors = model["kernel_factors"].as_object().unwrap();
    for name in ["cross_entropy", "adam_update", "bias_act"] {
        assert!(factors[name].as_f64().unwrap() > 0.0, "{name}: {factors:?}");
    }
    // Plain products take no factor: their shapes are calibrated.
    for name in ["matmul", "matmul_t"] {
        assert!(!factors.contains_key(name), "{name}: {factors:?}");
    }
    assert!(devices
        .iter()
        .any(|e| e["device"] == "cuda:0" && e["gflops"].as_f64() == Some(1234.0)));
    // One entry per device: the CPU, the kept runner entry, and MLX when this
    // build has it and `calibrate` measured it (its stdout line says which).
    let mlx_measured = stdout
        .lines()
        .any(|l| l.starts_with("mlx:") && !l.contains("not available"));
    let mut names: Vec<&str> = devices
        .iter()
        .map(|e| e["device"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    let expected: &[&str] = if mlx_measured {
        &["cpu", "cuda:0", "mlx"]
    } else {
        &["cpu", "cuda:0"]
    };
    assert_eq!(names, expected, "{stdout}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn defaults_to_the_cache_dir_and_checks_its_arguments() {
    let d = dir("default");
    let out = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["calibrate", "--device", "cpu"])
        .env("MLPL_CACHE_DIR", &d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(d.join("calibration.json").exists());
    // `--device cpu` measures only the CPU.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("cpu: GEMM "), "{stdout}");
    assert!(
        !stdout.contains("mlx:") && !stdout.contains("cuda:"),
        "{stdout}"
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["calibrate", "--size", "64"])
        .env("MLPL_CACHE_DIR", &d)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "the suite's shapes are fixed");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn estimate_prints_every_train_loop() {
    let d = dir("estimate");
    let file = d.join("mlp.mlpl");
    std::fs::write(
        &file,
        "X = randn(1, [64, 32])\ny = argmax(randn(2, [64, 8]), 1)\nmodel = chain(linear(32, 128, 1), relu_layer(), linear(128, 8, 2))\ntrain 100 {\n  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)\n}\ndevice(\"cuda\") {\n  train 10 {\n    adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)\n  }\n}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["estimate", "--json", "--calibration"])
        .arg(d.join("missing.json"))
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let loops: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(loops.len(), 2);
    let (cpu, cuda) = (&loops[0], &loops[1]);
    assert_eq!(
        (cpu["line"].as_u64(), cpu["device"].as_str()),
        (Some(4), Some("cpu"))
    );
    assert_eq!(cuda["device"], "cuda");
    assert_eq!(cpu["calibrated"], false);
    // 3 forward + 3 loss + 7 backward (the ReLU's from its output, then the
    // bias's sum) + 4 Adam updates, as a recorded step lists them.
    assert_eq!(cpu["kernels"], 17.0);
    assert_eq!(
        (cpu["batch"].as_f64(), cpu["batch_known"].as_bool()),
        (Some(64.0), Some(true))
    );
    let t = cpu["captured_seconds"].as_array().unwrap();
    assert!(t[0].as_f64() <= t[1].as_f64() && t[1].as_f64() <= t[2].as_f64());
    // Interpreted steps cost more than replayed ones; this loop will be captured.
    assert!(cpu["interpreted_seconds"][1].as_f64() > t[1].as_f64());
    assert_eq!(cpu["captured"], true);
    assert_eq!(cpu["seconds"], cpu["captured_seconds"]);
    std::fs::remove_dir_all(&d).ok();
}
