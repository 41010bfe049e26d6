//! Reductions and selection (LANGUAGE §10.2, §8.5): reduce_add, sum, reduce_mul,
//! mean, argmax, argtop_k.

use crate::common;

use common::{error_code, eval};

const X: &str = "x = reshape(iota(6), [2, 3])\n"; // [[0, 1, 2], [3, 4, 5]]
const M: &str = "M : [batch, feat] = reshape(iota(6), [2, 3])\n";

fn with(prefix: &str, src: &str) -> String {
    eval(&format!("{prefix}{src}"))
}

fn code_with(prefix: &str, src: &str) -> &'static str {
    error_code(&format!("{prefix}{src}"))
}

#[test]
fn full_sums() {
    assert_eq!(with(X, "reduce_add(x)"), "15");
    assert_eq!(with(X, "sum(x)"), "15");
    assert_eq!(eval("sum([0.5, 0.25])"), "0.75");
    assert_eq!(eval("reduce_add(zeros([0]))"), "0");
    assert_eq!(eval("sum(zeros([3, 0]))"), "0");
    assert_eq!(eval("shape(sum(zeros([2, 3])))"), "[]");
    // Exact scalars stay exact.
    assert_eq!(eval("sum(0.1 + 0.2)"), "0.30000000000000004");
    // float32 elements accumulate to a float32 result.
    assert_eq!(eval("sum([0.1, 0.2])"), "0.3");
    // Full reductions drop names.
    assert_eq!(with(M, "labels(sum(M))"), "");
}

#[test]
fn sums_along_an_axis() {
    assert_eq!(with(X, "reduce_add(x, 0)"), "3 5 7");
    assert_eq!(with(X, "reduce_add(x, 1)"), "3 12");
    assert_eq!(with(X, "sum(x, -1)"), "3 12");
    assert_eq!(with(X, "sum(x, -2)"), "3 5 7");
    assert_eq!(eval("sum(reshape(iota(12), [2, 3, 2]), 1)"), "6 9\n24 27");
    assert_eq!(
        eval("sum(reshape(iota(12), [2, 3, 2]), -1)"),
        "1 5 9\n13 17 21"
    );
    assert_eq!(eval("sum(zeros([2, 0]), 1)"), "0 0");
    assert_eq!(eval("shape(sum(zeros([2, 0]), 0))"), "0");
}

#[test]
fn sums_by_axis_name_remove_that_name() {
    assert_eq!(with(M, "sum(M, \"batch\")"), "3 5 7");
    assert_eq!(with(M, "labels(sum(M, \"batch\"))"), "feat");
    assert_eq!(with(M, "reduce_add(M, \"feat\")"), "3 12");
    assert_eq!(with(M, "labels(reduce_add(M, \"feat\"))"), "batch");
    assert_eq!(with(M, "labels(sum(M, 0))"), "feat");
    assert_eq!(with(M, "labels(sum(M, -1))"), "batch");
    // A name held in a variable (§5.8).
    assert_eq!(with(M, "s = \"feat\"\nsum(M, s)"), "3 12");
    // Partly named: only the named axis can be found by name.
    assert_eq!(
        eval("y = label(reshape(iota(6), [2, 3]), [\"\", \"c\"])\nsum(y, \"c\")"),
        "3 12"
    );
    assert_eq!(
        error_code("y = label(reshape(iota(6), [2, 3]), [\"\", \"c\"])\nsum(y, \"r\")"),
        "E0207"
    );
}

#[test]
fn axis_errors() {
    for f in ["reduce_add", "sum", "reduce_mul", "mean", "argmax"] {
        assert_eq!(code_with(X, &format!("{f}(x, 2)")), "E0206", "{f}");
        assert_eq!(code_with(X, &format!("{f}(x, -3)")), "E0206", "{f}");
        assert_eq!(code_with(X, &format!("{f}(x, \"batch\")")), "E0208", "{f}");
        assert_eq!(code_with(M, &format!("{f}(M, \"nope\")")), "E0207", "{f}");
        assert_eq!(code_with(M, &format!("{f}(M, \"\")")), "E0208", "{f}");
        assert_eq!(code_with(X, &format!("{f}(x, [0])")), "E0205", "{f}");
        assert_eq!(code_with(X, &format!("{f}()")), "E0103", "{f}");
        assert_eq!(code_with(X, &format!("{f}(x, 0, 1)")), "E0103", "{f}");
        assert_eq!(code_with(X, &format!("{f}(\"x\")")), "E0301", "{f}");
    }
    assert_eq!(error_code("sum(5, 0)"), "E0206");
    assert_eq!(error_code("sum([1, 2], 1)"), "E0206");
}

#[test]
fn products() {
    assert_eq!(eval("reduce_mul([1, 2, 3, 4])"), "24");
    assert_eq!(with(X, "reduce_mul(x + 1)"), "720");
    assert_eq!(with(X, "reduce_mul(x + 1, 1)"), "6 120");
    assert_eq!(with(X, "reduce_mul(x + 1, 0)"), "4 10 18");
    assert_eq!(with(X, "reduce_mul(x + 1, -1)"), "6 120");
    assert_eq!(eval("reduce_mul(zeros([0]))"), "1");
    assert_eq!(eval("reduce_mul(zeros([2, 0]), 1)"), "1 1");
    assert_eq!(eval("reduce_mul([0.5, -4])"), "-2");
    assert_eq!(with(M, "labels(reduce_mul(M, \"batch\"))"), "feat");
    assert_eq!(with(M, "reduce_mul(M + 1, \"batch\")"), "4 10 18");
    assert_eq!(with(M, "labels(reduce_mul(M))"), "");
}

#[test]
fn means() {
    assert_eq!(with(X, "mean(x)"), "2.5");
    assert_eq!(with(X, "mean(x, 0)"), "1.5 2.5 3.5");
    assert_eq!(with(X, "mean(x, 1)"), "1 4");
    assert_eq!(with(X, "mean(x, -1)"), "1 4");
    assert_eq!(eval("mean([1, 2, 3, 4], 0)"), "2.5");
    assert_eq!(eval("mean([[1, 2], [3, 4]], 0)"), "2 3");
    // sum / max(n, 1): empty arrays and empty axes give 0.
    assert_eq!(eval("mean(zeros([0]))"), "0");
    assert_eq!(eval("mean(zeros([2, 0]), 1)"), "0 0");
    assert_eq!(eval("mean(zeros([0, 2]), 0)"), "0 0");
    assert_eq!(eval("mean([0.1, 0.2])"), "0.15");
    assert_eq!(eval("mean(7)"), "7");
    assert_eq!(with(M, "mean(M, \"feat\")"), "1 4");
    assert_eq!(with(M, "labels(mean(M, \"feat\"))"), "batch");
    assert_eq!(with(M, "labels(mean(M))"), "");
}

#[test]
fn argmax_of_everything() {
    assert_eq!(eval("argmax([1, 5, 2, 5])"), "1");
    assert_eq!(with(X, "argmax(x)"), "5");
    assert_eq!(eval("argmax([[1, 9], [9, 0]])"), "1");
    assert_eq!(eval("argmax([-3, -1, -2])"), "1");
    assert_eq!(eval("argmax(7)"), "0");
    assert_eq!(eval("shape(argmax([1, 2]))"), "[]");
    assert_eq!(with(M, "labels(argmax(M))"), "");
    assert_eq!(error_code("argmax(zeros([0]))"), "E0216");
    assert_eq!(error_code("argmax(zeros([2, 0]))"), "E0216");
}

#[test]
fn argmax_along_an_axis() {
    assert_eq!(eval("argmax([[1, 5, 2], [7, 0, 3]], 1)"), "1 0");
    assert_eq!(eval("argmax([[1, 5, 2], [7, 0, 3]], 0)"), "1 0 1");
    assert_eq!(eval("argmax([[1, 5, 2], [7, 0, 3]], -1)"), "1 0");
    // The first maximum along the axis.
    assert_eq!(eval("argmax([[4, 4, 1], [2, 3, 3]], 1)"), "0 1");
    assert_eq!(
        eval("M : [b, f] = [[1, 5, 2], [7, 0, 3]]\nargmax(M, \"f\")"),
        "1 0"
    );
    assert_eq!(
        eval("M : [b, f] = [[1, 5, 2], [7, 0, 3]]\nlabels(argmax(M, \"f\"))"),
        "b"
    );
    assert_eq!(
        eval("M : [b, f] = [[1, 5, 2], [7, 0, 3]]\nlabels(argmax(M, 0))"),
        "f"
    );
    assert_eq!(error_code("argmax(zeros([2, 0]), 1)"), "E0216");
    assert_eq!(error_code("argmax(zeros([0, 2]), 0)"), "E0216");
    assert_eq!(eval("shape(argmax(zeros([0, 2]), 1))"), "0");
}

#[test]
fn argtop_k_indices_by_descending_value() {
    assert_eq!(eval("argtop_k([0.1, 2, -1, 0.5], 2)"), "1 3");
    assert_eq!(eval("argtop_k([0.1, 2, -1, 0.5], 4)"), "1 3 0 2");
    assert_eq!(eval("argtop_k([0.1, 2, -1, 0.5], 0)"), "[]");
    assert_eq!(eval("shape(argtop_k([0.1, 2, -1, 0.5], 0))"), "0");
    // Equal values keep index order.
    assert_eq!(eval("argtop_k([1, 3, 3, 2], 2)"), "1 2");
    assert_eq!(eval("argtop_k([1, 3, 3, 2], 3)"), "1 2 3");
    assert_eq!(eval("argtop_k([5, 5, 5], 3)"), "0 1 2");
    assert_eq!(eval("x : [v] = [1, 2]\nlabels(argtop_k(x, 1))"), "");
}

#[test]
fn argtop_k_errors() {
    assert_eq!(error_code("argtop_k([1, 2, 3], 4)"), "E0401");
    assert_eq!(error_code("argtop_k([1, 2, 3], -1)"), "E0401");
    assert_eq!(error_code("argtop_k([1, 2, 3], 1.5)"), "E0401");
    assert_eq!(error_code("argtop_k(zeros([2, 2]), 1)"), "E0205");
    assert_eq!(error_code("argtop_k(3, 1)"), "E0205");
    assert_eq!(error_code("argtop_k([1, 2], [1])"), "E0205");
    assert_eq!(error_code("argtop_k([1, 2])"), "E0103");
}
