//! `mlpl calibrate`: measures the CPU with `calibrate_device`, writes the cache the
//! editor's estimates read, keeps entries of devices it did not measure, and uses
//! $MLPL_CACHE_DIR by default.

use std::process::Command;

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
        .args(["calibrate", "--size", "64", "--output"])
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
        stdout.contains("cpu: ") && stdout.contains("GFLOPS (calibrate_device(64))"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["version"], 1);
    let devices = v["devices"].as_array().unwrap();
    let cpu = devices.iter().find(|e| e["device"] == "cpu").unwrap();
    assert!(cpu["gflops"].as_f64().unwrap() > 1.0);
    assert_eq!(cpu["size"], 64);
    assert!(devices
        .iter()
        .any(|e| e["device"] == "cuda:0" && e["gflops"] == 1234));
    assert_eq!(devices.len(), 2);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn defaults_to_the_cache_dir_and_checks_the_size() {
    let d = dir("default");
    let out = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["calibrate", "--size", "32"])
        .env("MLPL_CACHE_DIR", &d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(d.join("calibration.json").exists());
    let bad = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["calibrate", "--size", "0"])
        .env("MLPL_CACHE_DIR", &d)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    std::fs::remove_dir_all(&d).ok();
}
