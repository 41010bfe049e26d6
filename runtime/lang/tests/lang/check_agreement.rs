//! The static/dynamic agreement test (DESIGN §3): for every example and every
//! valid checker script, each top-level assignment whose value the checker knows
//! (kind; shape when fully known; axis names when known; constant elements) must
//! match the value the interpreter binds when it runs that statement.

use std::path::{Path, PathBuf};

use crate::check_support;

use check_support::check_agreement;

fn scripts(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mlpl"))
        .collect();
    v.sort();
    v
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[test]
fn examples_agree_with_the_runtime() {
    let mut total = 0;
    for path in scripts(&root().join("../../examples")) {
        let src = std::fs::read_to_string(&path).unwrap();
        total += check_agreement(&path.display().to_string(), &src, None);
    }
    // The Hugging Face examples read their checkpoints beside them.
    let hf = root().join("../../examples/hf");
    for path in scripts(&hf) {
        let src = std::fs::read_to_string(&path).unwrap();
        total += check_agreement(&path.display().to_string(), &src, Some(&hf));
    }
    assert!(
        total >= 40,
        "only {total} statically known values in the examples"
    );
}

#[test]
fn valid_scripts_agree_with_the_runtime() {
    let dir = root().join("tests/check_valid");
    let data = dir.join("data");
    let mut total = 0;
    let files = scripts(&dir);
    assert!(files.len() >= 15, "expected the valid checker scripts");
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap();
        total += check_agreement(&path.display().to_string(), &src, Some(&data));
    }
    assert!(total >= 100, "only {total} statically known values");
}
