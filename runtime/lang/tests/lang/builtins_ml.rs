//! ML primitives (LANGUAGE §10.5): softmax, log_softmax, logsumexp, one_hot,
//! cross_entropy, sinusoidal_encoding.

use crate::common;

use common::{assert_close, error_code, error_of, eval, warning_codes};

/// softmax([1, 2, 3]) = exp(x − 3) / Σ exp(x − 3).
const SM123: [f64; 3] = [0.09003057317038046, 0.24472847105479764, 0.6652409557748218];
/// log_softmax([1, 2, 3]) = x − 3 − log Σ exp(x − 3).
const LSM123: [f64; 3] = [
    -2.4076059644443806,
    -1.4076059644443806,
    -0.4076059644443806,
];
/// e⁰ / (e⁰ + e²) and e² / (e⁰ + e²).
const S02: [f64; 2] = [0.11920292202211755, 0.8807970779778823];

#[test]
fn softmax_over_the_last_axis() {
    assert_close("softmax([1, 2, 3])", &SM123, 1e-6);
    assert_close(
        "softmax([[1, 2, 3], [1, 1, 1]])",
        &[
            SM123[0],
            SM123[1],
            SM123[2],
            1.0 / 3.0,
            1.0 / 3.0,
            1.0 / 3.0,
        ],
        1e-6,
    );
    // Shifting by the maximum makes large logits safe.
    assert_close("softmax([1000, 1001, 1002])", &SM123, 1e-6);
    // -inf entries get probability 0.
    assert_close("softmax(concat([0], log([0])))", &[1.0, 0.0], 1e-7);
    assert_eq!(eval("shape(softmax(zeros([2, 3, 4])))"), "2 3 4");
    assert_close("sum(softmax(zeros([2, 3, 4])), -1)", &[1.0; 6], 1e-6);
}

#[test]
fn softmax_along_a_given_axis() {
    assert_close(
        "softmax([[1, 2, 3], [1, 1, 1]], 1)",
        &[
            SM123[0],
            SM123[1],
            SM123[2],
            1.0 / 3.0,
            1.0 / 3.0,
            1.0 / 3.0,
        ],
        1e-6,
    );
    assert_close(
        "softmax([[1, 2], [3, 4]], 0)",
        &[S02[0], S02[0], S02[1], S02[1]],
        1e-6,
    );
    assert_close(
        "softmax([[1, 2], [3, 4]], -2)",
        &[S02[0], S02[0], S02[1], S02[1]],
        1e-6,
    );
    assert_close(
        "M : [b, f] = [[1, 2], [3, 4]]\nsoftmax(M, \"b\")",
        &[S02[0], S02[0], S02[1], S02[1]],
        1e-6,
    );
    assert_close(
        "M : [b, f] = [[1, 2], [3, 4]]\nsoftmax(M, \"f\")",
        &[
            0.2689414213699951,
            0.7310585786300049,
            0.2689414213699951,
            0.7310585786300049,
        ],
        1e-6,
    );
}

#[test]
fn log_softmax_values() {
    assert_close("log_softmax([1, 2, 3])", &LSM123, 1e-6);
    assert_close("log_softmax([[1, 2, 3]], 1)", &LSM123, 1e-6);
    assert_close("log_softmax([[1, 2, 3]], -1)", &LSM123, 1e-6);
    assert_close("log_softmax([[1], [2], [3]], 0)", &LSM123, 1e-6);
    // Large logits: within the float32 tolerance of §2.
    assert_close("log_softmax([1000, 1001, 1002])", &LSM123, 1e-5);
    assert_close("log_softmax([2, 2])", &[-std::f64::consts::LN_2; 2], 1e-6);
}

#[test]
fn softmax_drops_names() {
    let m = "M : [b, f] = [[1, 2], [3, 4]]\n";
    for f in ["softmax", "log_softmax"] {
        assert_eq!(eval(&format!("{m}labels({f}(M))")), ",", "{f}");
        assert_eq!(eval(&format!("{m}labels({f}(M, \"b\"))")), ",", "{f}");
    }
}

#[test]
fn softmax_errors() {
    for f in ["softmax", "log_softmax"] {
        assert_eq!(error_code(&format!("{f}(5)")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}([1, 2], 1)")), "E0206", "{f}");
        assert_eq!(error_code(&format!("{f}([[1, 2]], -3)")), "E0206", "{f}");
        assert_eq!(error_code(&format!("{f}([1, 2], \"a\")")), "E0208", "{f}");
        assert_eq!(
            error_code(&format!("v : [a] = [1, 2]\n{f}(v, \"b\")")),
            "E0207",
            "{f}"
        );
        assert_eq!(
            error_code(&format!("v : [a] = [1, 2]\n{f}(v, \"\")")),
            "E0208",
            "{f}"
        );
        assert_eq!(error_code(&format!("{f}(\"x\")")), "E0301", "{f}");
        assert_eq!(error_code(&format!("{f}()")), "E0103", "{f}");
    }
}

/// log Σ exp([1, 2, 3]) = 3 + log(e⁻² + e⁻¹ + 1).
const LSE123: f64 = 3.4076059644443806;

#[test]
fn logsumexp_values_axes_and_names() {
    assert_close("logsumexp([1, 2, 3])", &[LSE123], 1e-6);
    assert_close("logsumexp([[1, 2, 3], [1, 2, 3]], 1)", &[LSE123; 2], 1e-6);
    assert_close("logsumexp([[1, 1], [2, 2], [3, 3]], 0)", &[LSE123; 2], 1e-6);
    assert_close("logsumexp([[1, 2], [3, 4]])", &[4.440189698561196], 1e-6);
    // Stable for large values; a one-element axis is the element itself.
    assert_close(
        "logsumexp([1000, 1001, 1002])",
        &[1000.0 + LSE123 - 1.0],
        1e-3,
    );
    assert_eq!(eval("logsumexp(7)"), "7");
    assert_eq!(eval("logsumexp([[5], [6]], 1)"), "5 6");
    // log_softmax(x) = x − logsumexp(x), exactly.
    assert_eq!(
        eval("x = [0.3, -1.2, 2.5]\nlog_softmax(x) - (x - logsumexp(x))"),
        "0 0 0"
    );
    // The reduced axis goes with its name; the others keep theirs.
    let s = "S : [batch, vocab] = [[1, 2, 3], [0, 0, 0]]\n";
    assert_eq!(
        eval(&format!("{s}labels(logsumexp(S, \"vocab\"))")),
        "batch"
    );
    assert_eq!(
        eval(&format!("{s}labels(logsumexp(S, \"batch\"))")),
        "vocab"
    );
    assert_eq!(eval(&format!("{s}rank(logsumexp(S))")), "0");
    assert_eq!(eval("logsumexp(zeros([2, 0]), 1)"), "-inf -inf");
}

#[test]
fn logsumexp_errors() {
    assert_eq!(error_code("logsumexp([1, 2], 1)"), "E0206");
    assert_eq!(error_code("v : [a] = [1, 2]\nlogsumexp(v, \"b\")"), "E0207");
    assert_eq!(error_code("logsumexp(\"x\")"), "E0301");
    assert_eq!(error_code("logsumexp()"), "E0103");
}

#[test]
fn one_hot_rows() {
    assert_eq!(eval("one_hot([0, 2, 1], 3)"), "1 0 0\n0 0 1\n0 1 0");
    assert_eq!(eval("shape(one_hot([0, 2, 1], 4))"), "3 4");
    // Ids are truncated; negative ids become 0.
    assert_eq!(eval("one_hot([1.7, -2], 3)"), "0 1 0\n1 0 0");
    assert_eq!(eval("shape(one_hot(zeros([0]), 3))"), "0 3");
    assert_eq!(eval("labels(one_hot([0, 1], 2))"), ",");
    // k is a count.
    assert_eq!(eval("one_hot([1], 2.5)"), "0 1");
    assert!(warning_codes("one_hot([1], 2.5)").contains(&"W0202"));
}

#[test]
fn one_hot_errors() {
    assert_eq!(error_code("one_hot([3], 3)"), "E0402");
    assert_eq!(error_code("one_hot([0, 5], 3)"), "E0402");
    assert_eq!(error_code("one_hot(zeros([2, 2]), 2)"), "E0205");
    assert_eq!(error_code("one_hot(1, 2)"), "E0205");
    assert_eq!(error_code("one_hot([1], [2])"), "E0205");
    assert_eq!(error_code("one_hot([1])"), "E0103");
}

#[test]
fn cross_entropy_is_the_mean_of_row_losses() {
    // Row 0: log(e² + e + e^0.1) − 2; row 1: log(e^0.5 + e^2.5 + e^0.3) − 2.5.
    assert_close(
        "cross_entropy([[2, 1, 0.1], [0.5, 2.5, 0.3]], [0, 1])",
        &[0.31853977025261093],
        1e-6,
    );
    assert_close("cross_entropy(zeros([2, 3]), [0, 2])", &[3f64.ln()], 1e-6);
    // Targets may have any shape with N elements.
    assert_close(
        "cross_entropy(zeros([2, 3]), [[0], [1]])",
        &[3f64.ln()],
        1e-6,
    );
    // [B, T, V] logits with [B, T] targets.
    assert_close(
        "cross_entropy(zeros([2, 2, 4]), [[0, 1], [2, 3]])",
        &[4f64.ln()],
        1e-6,
    );
    // A confident correct prediction has a small loss.
    assert_close("cross_entropy([[0, 20]], [1])", &[2.0611536e-9], 1e-6);
    assert_eq!(eval("shape(cross_entropy(zeros([2, 3]), [0, 1]))"), "[]");
    assert_eq!(
        eval("L : [n, v] = zeros([2, 3])\nlabels(cross_entropy(L, [0, 1]))"),
        ""
    );
}

#[test]
fn cross_entropy_errors() {
    let d = error_of("cross_entropy(zeros([2, 3]), [0, 1, 2])");
    assert_eq!(d.code, "E0214");
    let text = format!("{:?}", d);
    assert!(
        text.contains("[2]"),
        "the message shows the expected [N]: {text}"
    );
    assert!(
        text.contains("[3]"),
        "the message shows the target shape: {text}"
    );
    assert_eq!(
        error_code("cross_entropy(zeros([2, 2, 3]), [0, 1])"),
        "E0214"
    );
    assert_eq!(error_code("cross_entropy(zeros([2, 3]), [0, 3])"), "E0402");
    assert_eq!(error_code("cross_entropy(zeros([2, 3]), [0, -1])"), "E0402");
    assert_eq!(
        error_code("cross_entropy(zeros([2, 3]), [0, 0.5])"),
        "E0402"
    );
    assert_eq!(error_code("cross_entropy(zeros([3]), [0])"), "E0205");
    assert_eq!(
        error_code("cross_entropy(zeros([1, 1, 1, 3]), [0])"),
        "E0205"
    );
    assert_eq!(error_code("cross_entropy(5, [0])"), "E0205");
    assert_eq!(error_code("cross_entropy(zeros([1, 3]), \"a\")"), "E0301");
    assert_eq!(error_code("cross_entropy(zeros([1, 3]))"), "E0103");
}

#[test]
fn sinusoidal_encoding_values_and_names() {
    // θ = p / 10000^(2·⌊c/2⌋/d); sin for even c, cos for odd c.
    assert_close(
        "sinusoidal_encoding(3, 4)",
        &[
            0.0,
            1.0,
            0.0,
            1.0,
            0.8414709848078965,
            0.5403023058681398,
            0.009999833334166664,
            0.9999500004166653,
            0.9092974268256817,
            -0.4161468365471424,
            0.01999866669333308,
            0.9998000066665778,
        ],
        1e-7,
    );
    assert_close(
        "sinusoidal_encoding(2, 1)",
        &[0.0, 0.8414709848078965],
        1e-7,
    );
    // d = 3: column 2 uses θ = p / 10000^(2/3).
    assert_close(
        "last_row(sinusoidal_encoding(2, 3))",
        &[
            0.8414709848078965,
            0.5403023058681398,
            (1.0 / 10000f64.powf(2.0 / 3.0)).sin(),
        ],
        1e-7,
    );
    assert_eq!(eval("labels(sinusoidal_encoding(3, 4))"), "time,dim");
    assert_eq!(eval("shape(sinusoidal_encoding(5, 6))"), "5 6");
    assert_eq!(eval("shape(sinusoidal_encoding(0, 4))"), "0 4");
}

#[test]
fn sinusoidal_encoding_errors() {
    assert_eq!(error_code("sinusoidal_encoding(2.5, 4)"), "E0401");
    assert_eq!(error_code("sinusoidal_encoding(-1, 4)"), "E0401");
    assert_eq!(error_code("sinusoidal_encoding(3, 0)"), "E0401");
    assert_eq!(error_code("sinusoidal_encoding(3, 1.5)"), "E0401");
    assert_eq!(error_code("sinusoidal_encoding([3], 4)"), "E0205");
    assert_eq!(error_code("sinusoidal_encoding(3)"), "E0103");
}
