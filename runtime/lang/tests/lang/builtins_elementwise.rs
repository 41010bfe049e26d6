//! Element-wise functions (LANGUAGE §10.3): unary maps keep shape and names;
//! binary ones broadcast (§9).

use crate::common;

use common::{assert_close, error_code, error_of, eval};

const M: &str = "M : [batch, feat] = [[1, -2, 0], [0.5, 3, -4]]\n";

#[test]
fn neg_and_unary_minus() {
    assert_eq!(eval("neg([1, -2])"), "-1 2");
    assert_eq!(eval("neg(3)"), "-3");
    assert_eq!(eval("neg(0)"), "-0");
    assert_eq!(eval("neg([0])"), "-0");
    assert_eq!(eval("x = [1, 2]\n-x"), "-1 -2");
    assert_eq!(eval("neg([[1, 2], [3, 4]])"), "-1 -2\n-3 -4");
}

#[test]
fn exp_and_log() {
    assert_eq!(eval("exp(0)"), "1");
    assert_eq!(eval("exp(1)"), "2.718281828459045");
    assert_eq!(eval("exp([0, 1])"), "1 2.7182817");
    assert_eq!(eval("exp([[0], [0]])"), "1\n1");
    assert_eq!(eval("log(1)"), "0");
    assert_eq!(eval("log(0)"), "-inf");
    assert_eq!(eval("log(-1)"), "NaN");
    assert_eq!(eval("log([1, 0, -1])"), "0 -inf NaN");
    assert_eq!(eval("log(exp(2))"), "2");
    assert_close("log([10])", &[std::f64::consts::LN_10], 1e-7);
}

#[test]
fn sqrt_and_abs() {
    assert_eq!(eval("sqrt([4, 9, 0])"), "2 3 0");
    assert_eq!(eval("sqrt(2)"), "1.4142135623730951");
    assert_eq!(eval("sqrt([2])"), "1.4142135");
    assert_eq!(eval("sqrt(-1)"), "NaN");
    assert_eq!(eval("sqrt([-4])"), "NaN");
    assert_eq!(eval("abs([-1, 2, -0.5, 0])"), "1 2 0.5 0");
    assert_eq!(eval("abs(-3)"), "3");
}

#[test]
fn sigmoid_tanh_and_relu() {
    assert_eq!(eval("sigmoid(0)"), "0.5");
    assert_eq!(eval("sigmoid([0])"), "0.5");
    assert_eq!(eval("sigmoid(2)"), "0.8807970779778823");
    // float32 element-wise math: within float32 tolerance (§2).
    assert_close(
        "sigmoid([2, -2])",
        &[0.8807970779778823, 0.11920292202211755],
        1e-6,
    );
    assert_eq!(eval("tanh(0)"), "0");
    assert_eq!(eval("tanh(1)"), "0.7615941559557649");
    assert_close(
        "tanh([1, -1])",
        &[0.7615941559557649, -0.7615941559557649],
        1e-6,
    );
    // tanh_fn is the same function.
    assert_eq!(eval("tanh_fn(1)"), "0.7615941559557649");
    assert_close(
        "tanh_fn([1, -1])",
        &[0.7615941559557649, -0.7615941559557649],
        1e-6,
    );
    assert_eq!(eval("relu([-1, 2, 0, -0.5])"), "0 2 0 0");
    assert_eq!(eval("relu(-0.5)"), "0");
    assert_eq!(eval("relu(1.5)"), "1.5");
}

#[test]
fn gelu_is_the_tanh_approximation() {
    // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    assert_eq!(eval("gelu(0)"), "0");
    assert_close("gelu(1)", &[0.8411919906082768], 1e-15);
    assert_close("gelu(-1)", &[-0.15880800939172324], 1e-15);
    assert_close(
        "gelu([1, -1, 2])",
        &[0.8411919906082768, -0.15880800939172324, 1.954597694087775],
        1e-6,
    );
}

#[test]
fn silu_is_x_sigmoid_x() {
    assert_eq!(eval("silu(0)"), "0");
    assert_close("silu(1)", &[0.7310585786300049], 1e-15);
    assert_close(
        "silu([1, -1])",
        &[0.7310585786300049, -0.2689414213699951],
        1e-6,
    );
}

#[test]
fn unary_functions_keep_names_and_shape() {
    for f in [
        "neg", "exp", "log", "sqrt", "abs", "sigmoid", "tanh", "tanh_fn", "relu", "gelu", "silu",
    ] {
        assert_eq!(
            eval(&format!("{M}labels({f}(M))")),
            "batch,feat",
            "{f} keeps names"
        );
        assert_eq!(eval(&format!("{M}shape({f}(M))")), "2 3", "{f} keeps shape");
        assert_eq!(error_code(&format!("{f}(\"a\")")), "E0301", "{f}");
        assert_eq!(error_code(&format!("{f}(1, 2)")), "E0103", "{f}");
        assert_eq!(eval(&format!("{f}(zeros([0]))")), "[]", "{f} of empty");
    }
    assert_eq!(eval(&format!("{M}labels(-M)")), "batch,feat");
}

#[test]
fn arithmetic_builtins() {
    assert_eq!(eval("add([1, 2], 10)"), "11 12");
    assert_eq!(eval("sub([1, 2], [3, 4])"), "-2 -2");
    assert_eq!(eval("mul([[1], [2]], [3, 4])"), "3 4\n6 8");
    assert_eq!(eval("div([1, 2], 4)"), "0.25 0.5");
    assert_eq!(eval("add(0.1, 0.2)"), "0.30000000000000004");
    assert_eq!(eval("add([0.1], [0.2])"), "0.3");
    // Operators and builtins agree.
    assert_eq!(eval("[1, 2] + 10"), "11 12");
    assert_eq!(eval("[[1], [2]] * [3, 4]"), "3 4\n6 8");
    assert_eq!(eval("[1, 2] / 4"), "0.25 0.5");
    assert_eq!(eval("[1, 2] - [3, 4]"), "-2 -2");
}

#[test]
fn division_by_zero_gives_ieee_values() {
    assert_eq!(eval("div(1, 0)"), "inf");
    assert_eq!(eval("div(-1, 0)"), "-inf");
    assert_eq!(eval("div(0, 0)"), "NaN");
    assert_eq!(eval("div([1, -1, 0], 0)"), "inf -inf NaN");
    assert_eq!(eval("[1, -1, 0] / [0, 0, 0]"), "inf -inf NaN");
}

#[test]
fn pow_raises_to_a_power() {
    assert_eq!(eval("pow([2, 3], 2)"), "4 9");
    assert_eq!(eval("pow(2, 10)"), "1024");
    assert_eq!(eval("pow(2, 0.5)"), "1.4142135623730951");
    assert_eq!(eval("pow([-2], [3])"), "-8");
    assert_eq!(eval("pow(-8, 1 / 3)"), "NaN");
    assert_eq!(eval("pow([-8], 0.5)"), "NaN");
    assert_eq!(eval("pow([4, 9], 0.5)"), "2 3");
    assert_eq!(eval("pow(0, 0)"), "1");
    assert_eq!(eval("pow([[2], [3]], [1, 2])"), "2 4\n3 9");
}

#[test]
fn comparisons() {
    assert_eq!(eval("gt([1, 5], 2)"), "0 1");
    assert_eq!(eval("lt([1, 5], 2)"), "1 0");
    assert_eq!(eval("gt(2, 2)"), "0");
    assert_eq!(eval("lt(2, 2)"), "0");
    assert_eq!(eval("gt(3, 2)"), "1");
    assert_eq!(eval("eq([1, 2], 2)"), "0 1");
    assert_eq!(eval("eq([[1, 2], [2, 1]], [1, 1])"), "1 0\n0 1");
    assert_eq!(eval("gt([[1], [3]], [2, 0])"), "0 1\n1 1");
}

#[test]
fn eq_uses_an_absolute_tolerance_of_two_to_the_minus_52() {
    // |0.1 + 0.2 − 0.3| ≈ 5.6e-17 < 2^-52.
    assert_eq!(eval("eq(0.1 + 0.2, 0.3)"), "1");
    // |1 − (1 + 1e-15)| ≈ 1.1e-15 > 2^-52 ≈ 2.2e-16.
    assert_eq!(eval("eq(1, 1 + 1e-15)"), "0");
    // In float32, 1.0000001 rounds to 1 + 2^-23, which differs from 1 by more.
    assert_eq!(eval("eq([1], 1.0000001)"), "0");
    // 1 + 1e-9 rounds to exactly 1 in float32.
    assert_eq!(eval("eq([1], 1 + 1e-9)"), "1");
    assert_eq!(eval("eq([0.1], [0.1])"), "1");
}

#[test]
fn binary_builtins_broadcast_and_merge_names() {
    for f in ["add", "sub", "mul", "div", "pow", "gt", "lt", "eq"] {
        assert_eq!(
            eval(&format!("{M}labels({f}(M, [1, 2, 3]))")),
            "batch,feat",
            "{f}"
        );
        assert_eq!(
            eval(&format!("{M}labels({f}([[1], [2]], M))")),
            "batch,feat",
            "{f}"
        );
        assert_eq!(eval(&format!("{M}shape({f}(M, 2))")), "2 3", "{f}");
        assert_eq!(
            eval(&format!("shape({f}(zeros([3, 1]), zeros([1, 4])))")),
            "3 4",
            "{f}"
        );
    }
}

#[test]
fn binary_builtin_errors_name_the_builtin() {
    for f in ["add", "sub", "mul", "div", "pow", "gt", "lt", "eq"] {
        let d = error_of(&format!("{f}([1, 2], [1, 2, 3])"));
        assert_eq!(d.code, "E0201", "{f}");
        assert_eq!(d.message, format!("shapes do not broadcast in `{f}`"));
        let d = error_of(&format!("a : [x] = [1, 2]\nb : [y] = [1, 2]\n{f}(a, b)"));
        assert_eq!(d.code, "E0202", "{f}");
        assert_eq!(d.message, format!("axis names conflict in `{f}`"));
        assert_eq!(error_code(&format!("{f}(\"a\", 1)")), "E0301", "{f}");
        assert_eq!(error_code(&format!("{f}(1, tokenizer())")), "E0301", "{f}");
        assert_eq!(error_code(&format!("{f}(1)")), "E0103", "{f}");
    }
}

#[test]
fn exact_and_float32_operands() {
    // Exact scalars compute in float64; anything float32 makes the result float32.
    assert_eq!(eval("mul(0.1, 3)"), "0.30000000000000004");
    assert_eq!(eval("mul([0.1], 3)"), "0.3");
    assert_eq!(eval("sum([0.1]) + 0.2"), "0.3");
    assert_eq!(eval("shape(add(1, [2]))"), "1");
    assert_eq!(eval("shape(add(1, 2))"), "[]");
}
