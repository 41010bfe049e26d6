//! A real, independent LSP client: headless Neovim opens a file with a shape
//! error through `lsp/tests/nvim/run.sh` and must receive the E0203 diagnostic
//! with its code and a hover with the named shape.
//!
//! The test skips (passes with a message) when `nvim` is not installed and cannot
//! be installed: the script installs Neovim with `apt-get install -y neovim` only
//! when the environment variable `CI` is set (CI runs as root with apt).

use std::process::Command;

#[test]
fn neovim_gets_the_diagnostic_code_and_the_hover() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nvim/run.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_mlpl-lsp"))
        .output()
        .expect("bash runs the Neovim test script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(77) {
        eprintln!(
            "SKIPPED neovim_gets_the_diagnostic_code_and_the_hover: {}",
            stderr.trim()
        );
        return;
    }
    assert!(
        out.status.success(),
        "the Neovim test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ok: diagnostic code E0203"), "{stdout}");
    assert!(
        stdout.contains("ok: hover shows the named shape"),
        "{stdout}"
    );
}
