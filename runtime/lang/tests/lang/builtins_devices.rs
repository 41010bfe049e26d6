//! Devices (LANGUAGE §10.18, §14): to_device, placement checks and `device`
//! blocks. "cuda" (no GPU in CI) and, unless the build includes the MLX
//! backend, "mlx" are unavailable: placements are recorded (W0504) and blocks
//! run on the CPU (W0501). With MLX built, `mlx_training` tests it available.

/// The warnings an unavailable MLX gives (`code`), or none when this build
/// includes the MLX backend.
fn unless_mlx_built(code: &'static str) -> Vec<&'static str> {
    match mlpl_devices::mlx::open() {
        Ok(_) => Vec::new(),
        Err(_) => vec![code],
    }
}

use crate::common;

use common::{error_code, error_of, eval, run_in, warning_codes};

#[test]
fn to_device_returns_the_array() {
    assert_eq!(eval("to_device([1, 2, 3], \"cpu\")"), "1 2 3");
    // Either argument order.
    assert_eq!(eval("to_device(\"cpu\", [1, 2])"), "1 2");
    assert_eq!(eval("x = to_device([1, 2, 3], \"cpu\")\nx * 2"), "2 4 6");
    assert_eq!(eval("to_device([[1, 2]], \"cuda\")"), "1 2");
    assert_eq!(eval("to_device([1], \"cuda:1\")"), "1");
    assert_eq!(eval("to_device([1], \"mlx\")"), "1");
    // Names are kept; the target may be any string expression.
    assert_eq!(
        eval("x : [a] = [1, 2]\nt = \"cpu\"\nlabels(to_device(x, t))"),
        "a"
    );
    assert!(warning_codes("to_device([1], \"cpu\")").is_empty());
}

#[test]
fn unavailable_targets_warn_w0504_once_per_call_site() {
    assert_eq!(warning_codes("to_device([1], \"cuda\")"), vec!["W0504"]);
    assert_eq!(
        warning_codes("to_device([1], \"mlx\")"),
        unless_mlx_built("W0504")
    );
    assert_eq!(
        warning_codes("repeat 3 { to_device([1], \"cuda\") }"),
        vec!["W0504"]
    );
    assert_eq!(
        warning_codes("to_device([1], \"cuda\")\nto_device([1], \"cuda\")"),
        vec!["W0504", "W0504"]
    );
}

#[test]
fn to_device_errors() {
    assert_eq!(error_code("to_device([1], \"gpu\")"), "E0502");
    assert_eq!(error_code("to_device([1], \"cuda:x\")"), "E0502");
    assert_eq!(error_code("to_device([1], \"CPU\")"), "E0502");
    assert_eq!(error_code("to_device(\"a\", \"cpu\")"), "E0311");
    assert_eq!(error_code("to_device(tokenizer(), \"cpu\")"), "E0311");
    assert_eq!(error_code("to_device(\"cpu\", tokenizer())"), "E0311");
    assert_eq!(error_code("to_device([1], [2])"), "E0302");
    assert_eq!(error_code("to_device([1])"), "E0103");
}

#[test]
fn a_bare_variable_is_rebound_to_the_placed_array() {
    // x is re-bound to its placement on cuda, so it meets y on mlx: E0501.
    let d = error_of("x = [1, 2]\nto_device(x, \"cuda\")\ny = to_device([3, 4], \"mlx\")\nx + y");
    assert_eq!(d.code, "E0501");
    assert_eq!(
        d.message,
        "device mismatch in `+`: left operand is on cuda, right operand is on mlx"
    );
    // Without the re-binding the operands are floating and combine freely.
    assert_eq!(
        eval("x = [1, 2]\nz = to_device([5, 6], \"cuda\")\ny = to_device([3, 4], \"mlx\")\nx + y"),
        "4 6"
    );
}

#[test]
fn placement_checks() {
    // Same placement: fine, and the result keeps it.
    assert_eq!(
        eval("a = to_device([1, 2], \"cuda\")\nb = to_device([3, 4], \"cuda\")\na + b"),
        "4 6"
    );
    assert_eq!(
        error_code(
            "a = to_device([1, 2], \"cuda\")\nb = to_device([3, 4], \"mlx\")\nc = a * 2\nc + b"
        ),
        "E0501"
    );
    // Floating operands move freely.
    assert_eq!(
        eval("a = to_device([1, 2], \"cuda\")\na + [10, 20]"),
        "11 22"
    );
    // cuda:0 and cuda:1 are different devices.
    assert_eq!(
        error_code("a = to_device([1], \"cuda:0\")\nb = to_device([1], \"cuda:1\")\nadd(a, b)"),
        "E0501"
    );
    let d = error_of("a = to_device([1], \"cuda\")\nb = to_device([[1]], \"mlx\")\nmatmul(a, b)");
    assert_eq!(d.code, "E0501");
    assert!(d.message.contains("`matmul`"), "{}", d.message);
    // Rank-0 arrays are never placed.
    assert_eq!(
        eval("s = to_device(5, \"cuda\")\nb = to_device([1], \"mlx\")\ns + b"),
        "6"
    );
    assert_eq!(
        eval("s = to_device(sum([5]), \"cuda\")\nb = to_device([1], \"mlx\")\ns + b"),
        "6"
    );
}

#[test]
fn device_blocks() {
    assert_eq!(eval("device(\"cpu\") { 1 + 1 }"), "2");
    assert_eq!(eval("x = device(\"cpu\") { [1, 2] * 2 }\nx"), "2 4");
    assert_eq!(eval("device(\"cpu\") { }"), "0");
    // Blocks do not create a scope.
    assert_eq!(eval("device(\"cpu\") { y = 3 }\ny + 1"), "4");
    // Any string expression is a target.
    assert_eq!(eval("t = \"cpu\"\ndevice(t) { 5 }"), "5");
    assert_eq!(error_code("device(5) { 1 }"), "E0302");
    assert!(warning_codes("device(\"cpu\") { 1 }").is_empty());
}

#[test]
fn unavailable_block_targets_warn_w0501_once_per_block() {
    let o = run_in("device(\"cuda\") { 3 }", None);
    assert_eq!(o.warning_codes(), vec!["W0501"]);
    assert_eq!(o.shown(), "3");
    assert_eq!(
        warning_codes("device(\"mlx\") { 1 }"),
        unless_mlx_built("W0501")
    );
    assert_eq!(warning_codes("device(\"cuda:2\") { 1 }"), vec!["W0501"]);
    assert_eq!(
        warning_codes("repeat 3 { device(\"cuda\") { 1 } }"),
        vec!["W0501"]
    );
    assert_eq!(
        warning_codes("device(\"cuda\") { 1 }\ndevice(\"cuda\") { 2 }"),
        vec!["W0501", "W0501"]
    );
    // Nested blocks: the innermost wins, each block warns for itself.
    assert_eq!(
        eval("device(\"cuda\") { device(\"cpu\") { [1] + 1 } }"),
        "2"
    );
}

#[test]
fn unknown_block_targets_warn_w0502() {
    let o = run_in("device(\"gpu\") { 2 }", None);
    assert_eq!(o.warning_codes(), vec!["W0502"]);
    assert_eq!(o.shown(), "2");
    assert_eq!(warning_codes("device(\"tpu\") { [1] * 2 }"), vec!["W0502"]);
}
