//! Finite-difference checks of `grad` for every differentiable builtin (∂ = ✓ in
//! LANGUAGE §10), through the real interpreter, on several shapes including
//! broadcasting and batched matmul.
//!
//! Each case differentiates L = sum(e ⊙ e) for an expression e of a parameter W
//! and compares with central differences (step 1e-2, evaluated in float32), with
//! the checker of `finite_differences.rs`.

use crate::finite_differences::Check;

/// Checks d/dW sum(e ⊙ e) where `e` is written in terms of W (shape `shape`),
/// at every element of W.
fn check(shape: &str, expr: &str) {
    Check {
        setup: &format!("W = param{shape}\nW = randn(11, {shape}) * 0.8 + 0.05\nK = 0"),
        loss: format!("sum(({expr}) * ({expr}))"),
        wrt: &["W"],
        training: false,
        h: 1e-2,
        points: usize::MAX,
        nonzero: false,
    }
    .run();
}

#[test]
fn unary_builtins() {
    for f in [
        "neg", "exp", "sigmoid", "tanh", "tanh_fn", "relu", "gelu", "silu", "abs", "sin", "cos",
        "erf", "gelu_erf",
    ] {
        check("[2, 3]", &format!("{f}(W)"));
    }
    check("[4]", "log(W * W + 1)");
    check("[4]", "sqrt(W * W + 1)");
    check("[2, 2]", "-W");
}

#[test]
fn binary_builtins_with_broadcasting() {
    for f in ["add", "sub", "mul", "div"] {
        check("[2, 3]", &format!("{f}(W, [1, 2, 3])"));
        check("[3]", &format!("{f}([[1, 2, 3], [4, 5, 6]], W)"));
        check("[2, 1]", &format!("{f}(W, [[1, 2, 3], [4, 5, 6]])"));
    }
    check("[2, 3]", "W + W * W - W / (W * W + 2)");
    check("[3]", "pow(W * W + 1, [1.5, 2, 0.5])");
    check("[3]", "pow([1.5, 2, 3], W)");
    check("[2, 3]", "W * 3 - 1");
}

#[test]
fn selection_clamping_and_extrema() {
    check("[2, 3]", "maximum(W, 0.3)");
    check("[2, 3]", "minimum(W, [0.1, -0.2, 0.5])");
    check("[3]", "maximum([[0.2, -1, 3], [1, 1, -2]], W)");
    check("[2, 3]", "minimum(W, W * W) + maximum(W * 0.5, sin(W))");
    check("[2, 3]", "clamp(W, -0.5, 0.5)");
    check("[2, 3]", "where(gt(W, 0), W * 2, sin(W))");
    check("[3]", "where([[1, 0, 1], [0, 1, 1]], W, [[1], [2]])");
    check("[2, 1]", "where([1, 0, 1], [[1, 2, 3], [4, 5, 6]], W * W)");
}

#[test]
fn slicing_and_permutation() {
    check("[2, 5]", "slice(W, 1, 0, 5, 2)");
    check("[4, 3]", "slice(W, 0, -3, -1) * [1, 2, 3]");
    check("[3, 4]", "slice(label(W, [\"t\", \"f\"]), \"f\", 1, 3)");
    check("[2, 3]", "permute(W, 1, 0) * [[1, 2], [3, 4], [5, 6]]");
    check("[2, 3, 2]", "permute(W, 2, 0, 1) * [1, 2, 3]");
    check("[2, 3]", "concat(W, W * W, 0) * [1, 2, 3]");
    check("[2, 3]", "concat([[1], [2]], sin(W), -1) * [1, 2, 3, 4]");
}

#[test]
fn linear_algebra() {
    check("[3]", "dot(W, [1, -2, 0.5])");
    check("[2, 3]", "matmul(W, [[1, 2], [0, 1], [-1, 1]])");
    check("[3, 2]", "matmul([[1, 2, 3], [0, 1, -1]], W)");
    check("[3]", "matmul([[1, 2, 3], [0, 1, -1]], W)");
    check("[2]", "matmul(W, [[1, 2, 3], [0, 1, -1]])");
    check("[2, 2, 3]", "matmul(W, reshape(iota(6), [3, 2]) / 6)");
    check("[3, 2]", "matmul(reshape(iota(12), [2, 2, 3]) / 12, W)");
}

#[test]
fn reductions() {
    for f in ["reduce_add", "sum", "mean", "reduce_mul"] {
        check("[2, 3]", &format!("{f}(W)"));
        check("[2, 3]", &format!("{f}(W, 0)"));
        check("[2, 3]", &format!("{f}(W, -1)"));
    }
    check("[2, 3]", "sum(label(W, [\"r\", \"c\"]), \"c\")");
}

#[test]
fn ml_primitives() {
    check("[2, 3]", "softmax(W)");
    check("[2, 3]", "softmax(W, 0)");
    check("[2, 3]", "log_softmax(W)");
    check("[2, 3]", "log_softmax(W, 0)");
    check("[2, 3]", "logsumexp(W)");
    check("[2, 3]", "logsumexp(W, 0)");
    check("[2, 3, 2]", "logsumexp(W, 1) * [1, -2]");
    check("[3, 4]", "cross_entropy(W, [0, 3, 1])");
    check("[2, 2, 3]", "cross_entropy(W, [[0, 2], [1, 1]])");
}

#[test]
fn structure_builtins() {
    check("[2, 3]", "reshape(W, [3, 2])");
    check("[2, 3]", "reshape(W, [-1])");
    check("[2, 3]", "transpose(W) * [[1], [2], [3]]");
    check("[2, 3]", "label(W, [\"a\", \"b\"])");
    check("[2, 3]", "relabel(W, \"a,b\")");
    check("[2, 3]", "reshape_labeled(W, [3, 2], [\"x\", \"y\"])");
    check("[2]", "fill([2, 2], sum(W))");
    check("[3]", "concat(W, [1, 2])");
    check("[3]", "concat([1, 2], W)");
    check("[3, 2]", "last_row(W)");
    check("[4]", "scatter(W, 2, sum(W))");
    check("[5]", "softmax(top_k(W, 3))");
}

#[test]
fn composite_two_layer_network() {
    check("[2, 4]", "cross_entropy(matmul(tanh(matmul([[1, 2], [0.5, -1], [0, 1]], W)), [[1, 0], [0, 1], [1, 1], [0.5, 0.5]]), [0, 1, 1])");
}
