//! Every CUDA kernel module compiles to PTX with NVRTC, on any machine where an
//! NVRTC library can be found (no GPU needed): `MLPL_NVRTC_LIB`, or the local venv
//! that `scripts/nvrtc-venv.sh` installs. Without one the test says so and skips,
//! unless `MLPL_REQUIRE_NVRTC=1` (set by `scripts/test-all.sh` when the library was
//! installed), which turns the skip into a failure.
#![cfg(feature = "cuda")]

use std::path::PathBuf;

use mlpl_devices::cuda::kernels::MODULES;
use mlpl_devices::cuda::{preload_nvrtc, NVRTC_LIB_VAR};

/// `libnvrtc.so.*` inside the repository's `.venv-nvrtc`, if installed.
fn venv_library() -> Option<PathBuf> {
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv-nvrtc/lib");
    for py in std::fs::read_dir(lib).ok()?.flatten() {
        let dir = py.path().join("site-packages/nvidia/cuda_nvrtc/lib");
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = files
            .flatten()
            .map(|f| f.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                name.starts_with("libnvrtc.so.") && !name.contains("builtins")
            })
            .collect();
        found.sort();
        if let Some(p) = found.into_iter().next() {
            return Some(p);
        }
    }
    None
}

/// Loads NVRTC; `false` (after saying why) when none can be found.
fn load_nvrtc() -> bool {
    if std::env::var_os(NVRTC_LIB_VAR).is_none() {
        match venv_library() {
            // Set before any thread of this test binary reads the environment.
            Some(p) => std::env::set_var(NVRTC_LIB_VAR, p),
            None => {
                // The system's own NVRTC, if any.
                return unsafe { cudarc::nvrtc::sys::is_culib_present() };
            }
        }
    }
    match preload_nvrtc() {
        Ok(_) => true,
        Err(why) => panic!("{why}"),
    }
}

#[test]
fn every_kernel_module_compiles_to_ptx() {
    if !load_nvrtc() {
        let required = std::env::var("MLPL_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
        let msg =
            format!("no NVRTC library found: set {NVRTC_LIB_VAR} or run scripts/nvrtc-venv.sh");
        assert!(!required, "{msg} (MLPL_REQUIRE_NVRTC=1)");
        eprintln!("SKIPPED every_kernel_module_compiles_to_ptx: {msg}");
        return;
    }
    let mut failures = Vec::new();
    let mut compiled = 0;
    // Ampere and Hopper (H100/H200): the GPUs the benchmark targets.
    for arch in ["compute_80", "compute_90"] {
        for m in MODULES {
            match m.compile(arch) {
                Ok(ptx) => {
                    let text = ptx.to_src();
                    for f in m.functions() {
                        if !text.contains(&format!(".entry {f}(")) {
                            failures
                                .push(format!("{arch} {}.cu: no kernel {f} in the PTX", m.name));
                        }
                    }
                    compiled += 1;
                }
                Err(log) => failures.push(format!("{arch} {}.cu:\n{log}", m.name)),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "kernel compile failures:\n{}",
        failures.join("\n")
    );
    assert_eq!(compiled, 2 * MODULES.len());
    eprintln!(
        "compiled {} kernel modules for compute_80 and compute_90",
        MODULES.len()
    );
}
