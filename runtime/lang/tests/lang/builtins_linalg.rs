//! Linear algebra (LANGUAGE §10.4): dot and every form of matmul, with the naming
//! rules for results and contracted axes.

use crate::common;

use common::{error_code, error_of, eval};

const A: &str = "a = reshape(iota(6), [2, 3])\nb = reshape(iota(6), [3, 2])\n";

fn with(src: &str) -> String {
    eval(&format!("{A}{src}"))
}

#[test]
fn dot_of_two_vectors() {
    assert_eq!(eval("dot([1, 2, 3], [4, 5, 6])"), "32");
    assert_eq!(eval("dot([0.5, 0.25], [2, 4])"), "2");
    assert_eq!(eval("shape(dot([1, 2], [3, 4]))"), "[]");
    assert_eq!(eval("dot(zeros([0]), zeros([0]))"), "0");
    assert_eq!(
        eval("u : [k] = [1, 2]\nv : [j] = [3, 4]\nlabels(dot(u, v))"),
        ""
    );
}

#[test]
fn dot_errors() {
    let d = error_of("dot([1, 2], [1, 2, 3])");
    assert_eq!(d.code, "E0203");
    assert_eq!(d.message, "inner dimensions differ in `dot`");
    assert_eq!(error_code("dot(zeros([2, 2]), [1, 2])"), "E0205");
    assert_eq!(error_code("dot([1, 2], zeros([2, 1]))"), "E0205");
    assert_eq!(error_code("dot(1, 2)"), "E0205");
    assert_eq!(error_code("dot([1], \"a\")"), "E0301");
    assert_eq!(error_code("dot([1])"), "E0103");
}

#[test]
fn matrix_times_matrix() {
    // [[0,1,2],[3,4,5]] · [[0,1],[2,3],[4,5]].
    assert_eq!(with("matmul(a, b)"), "10 13\n28 40");
    assert_eq!(with("matmul(b, a)"), "3 4 5\n9 14 19\n15 24 33");
    assert_eq!(with("shape(matmul(a, b))"), "2 2");
    assert_eq!(
        eval("matmul([[1, 0], [0, 1]], [[2, 3], [4, 5]])"),
        "2 3\n4 5"
    );
    assert_eq!(eval("shape(matmul(zeros([2, 0]), zeros([0, 3])))"), "2 3");
    assert_eq!(eval("matmul(zeros([2, 0]), zeros([0, 3]))"), "0 0 0\n0 0 0");
}

#[test]
fn matrix_and_vector_forms() {
    // [m, k] · [k] → [m].
    assert_eq!(with("matmul(a, [1, 1, 1])"), "3 12");
    assert_eq!(with("shape(matmul(a, [1, 1, 1]))"), "2");
    // [k] · [k, n] → [n].
    assert_eq!(eval("matmul([1, 1], reshape(iota(6), [2, 3]))"), "3 5 7");
    assert_eq!(eval("shape(matmul([1, 1], reshape(iota(6), [2, 3])))"), "3");
    // [k] · [k] → [].
    assert_eq!(eval("matmul([1, 2, 3], [4, 5, 6])"), "32");
    assert_eq!(eval("shape(matmul([1, 2, 3], [4, 5, 6]))"), "[]");
}

#[test]
fn batched_forms() {
    // [2, 2, 3] · [3, 2]: the batch axes of `b` are missing and broadcast.
    assert_eq!(
        with("matmul(reshape(iota(12), [2, 2, 3]), b)"),
        "10 13\n28 40\n\n46 67\n64 94"
    );
    // [2, 2, 3] · [2, 3, 2]: each batch element multiplied separately.
    assert_eq!(
        eval("matmul(reshape(iota(12), [2, 2, 3]), reshape(concat(iota(6), iota(6)), [2, 3, 2]))"),
        "10 13\n28 40\n\n46 67\n64 94"
    );
    // Batch axes broadcast NumPy-style.
    assert_eq!(
        eval("shape(matmul(zeros([2, 1, 2, 3]), zeros([3, 3, 2])))"),
        "2 3 2 2"
    );
    assert_eq!(
        eval("shape(matmul(zeros([1, 4, 3]), zeros([5, 3, 2])))"),
        "5 4 2"
    );
    // [..., m, k] · [k] → [..., m].
    assert_eq!(
        eval("matmul(reshape(iota(12), [2, 2, 3]), [1, 1, 1])"),
        "3 12\n21 30"
    );
    assert_eq!(
        eval("shape(matmul(reshape(iota(12), [2, 2, 3]), [1, 1, 1]))"),
        "2 2"
    );
}

#[test]
fn result_names() {
    let named = "A : [m, k] = reshape(iota(6), [2, 3])\nB : [k, n] = reshape(iota(6), [3, 2])\n";
    assert_eq!(eval(&format!("{named}labels(matmul(A, B))")), "m,n");
    assert_eq!(eval(&format!("{named}matmul(A, B)")), "10 13\n28 40");
    // A missing name counts as unnamed, on either side.
    assert_eq!(
        eval("A : [m, k] = zeros([2, 3])\nlabels(matmul(A, zeros([3, 4])))"),
        "m,"
    );
    assert_eq!(
        eval("B : [k, n] = zeros([3, 4])\nlabels(matmul(zeros([2, 3]), B))"),
        ",n"
    );
    // [m, k] · [k] keeps a's row name; [k] · [k, n] keeps b's column name.
    assert_eq!(
        eval("A : [m, k] = zeros([2, 3])\nlabels(matmul(A, [1, 2, 3]))"),
        "m"
    );
    assert_eq!(
        eval("B : [k, n] = zeros([3, 4])\nlabels(matmul([1, 2, 3], B))"),
        "n"
    );
    assert_eq!(
        eval("u : [k] = [1, 2]\nv : [k] = [3, 4]\nlabels(matmul(u, v))"),
        ""
    );
    // Batched: batch names merged, then a's row name and b's column name.
    assert_eq!(
        eval("A : [b, m, k] = zeros([2, 2, 3])\nB : [b, k, n] = zeros([2, 3, 4])\nlabels(matmul(A, B))"),
        "b,m,n"
    );
    assert_eq!(
        eval("A : [b, m, k] = zeros([2, 2, 3])\nlabels(matmul(A, zeros([3, 4])))"),
        "b,m,"
    );
    assert_eq!(
        eval("B : [b, k, n] = zeros([2, 3, 4])\nlabels(matmul(zeros([2, 2, 3]), B))"),
        "b,,n"
    );
    assert_eq!(
        eval("A : [b, m, k] = zeros([2, 2, 3])\nlabels(matmul(A, [1, 2, 3]))"),
        "b,m"
    );
}

#[test]
fn contraction_names_must_agree() {
    let d = error_of("A : [m, k] = zeros([2, 3])\nB : [j, n] = zeros([3, 4])\nmatmul(A, B)");
    assert_eq!(d.code, "E0204");
    assert_eq!(d.message, "contraction axes are named differently");
    assert_eq!(
        error_code("A : [m, k] = zeros([2, 3])\nv : [j] = [1, 2, 3]\nmatmul(A, v)"),
        "E0204"
    );
    assert_eq!(
        error_code("u : [j] = [1, 2]\nB : [k, n] = zeros([2, 3])\nmatmul(u, B)"),
        "E0204"
    );
    assert_eq!(
        error_code(
            "A : [b, m, k] = zeros([2, 2, 3])\nB : [b, j, n] = zeros([2, 3, 4])\nmatmul(A, B)"
        ),
        "E0204"
    );
}

#[test]
fn matmul_errors() {
    let d = error_of("matmul(zeros([2, 3]), zeros([2, 3]))");
    assert_eq!(d.code, "E0203");
    assert_eq!(d.message, "inner dimensions differ in `matmul`");
    assert_eq!(error_code("matmul(zeros([2, 3]), [1, 2])"), "E0203");
    assert_eq!(error_code("matmul([1, 2], zeros([3, 2]))"), "E0203");
    assert_eq!(
        error_code("matmul(zeros([2, 2, 3]), zeros([2, 2, 3]))"),
        "E0203"
    );
    assert_eq!(error_code("matmul(5, [1])"), "E0205");
    assert_eq!(error_code("matmul([1], 5)"), "E0205");
    assert_eq!(error_code("matmul(\"a\", [1])"), "E0301");
    assert_eq!(error_code("matmul([1])"), "E0103");
    // Batch axes: sizes (E0201) and names (E0202).
    assert_eq!(
        error_code("matmul(zeros([2, 2, 3]), zeros([3, 3, 4]))"),
        "E0201"
    );
    assert_eq!(
        error_code(
            "A : [b, m, k] = zeros([2, 2, 3])\nB : [c, k, n] = zeros([2, 3, 4])\nmatmul(A, B)"
        ),
        "E0202"
    );
}

#[test]
fn absurd_results_are_e0410() {
    assert_eq!(
        error_code("matmul(zeros([1e5, 1]), zeros([1, 1e5]))"),
        "E0410"
    );
    assert_eq!(
        error_code("matmul(zeros([1e5, 1, 1, 1]), zeros([1e5, 1, 1]))"),
        "E0410"
    );
}
