//! Construction and structure builtins (LANGUAGE §10.1): iota, shape, rank,
//! reshape, transpose, zeros, ones, fill, grid, concat, last_row, scatter.

use crate::common;

use common::{error_code, eval, warning_codes};

#[test]
fn iota_counts_from_zero() {
    assert_eq!(eval("iota(5)"), "0 1 2 3 4");
    assert_eq!(eval("iota(1)"), "0");
    assert_eq!(eval("shape(iota(4))"), "4");
    assert_eq!(eval("labels(iota(3))"), "");
}

#[test]
fn iota_reads_a_count() {
    // Empty result, fractions truncate (W0202), negatives are 0 (W0203), NaN is 0.
    assert_eq!(eval("iota(0)"), "[]");
    assert_eq!(eval("shape(iota(0))"), "0");
    assert_eq!(eval("iota(2.9)"), "0 1");
    assert!(warning_codes("iota(2.9)").contains(&"W0202"));
    assert_eq!(eval("iota(-3)"), "[]");
    assert!(warning_codes("iota(-3)").contains(&"W0203"));
    assert_eq!(eval("shape(iota(0 / 0))"), "0");
    assert!(warning_codes("iota(3)").is_empty());
    // A count computed by arithmetic (the `iota(n / 2)` idiom of §6.7).
    assert_eq!(eval("n = 7\niota(n / 2)"), "0 1 2");
}

#[test]
fn iota_errors() {
    assert_eq!(error_code("iota([3])"), "E0205");
    assert_eq!(error_code("iota(zeros([2, 2]))"), "E0205");
    assert_eq!(error_code("iota(\"3\")"), "E0301");
    assert_eq!(error_code("iota()"), "E0103");
    assert_eq!(error_code("iota(1, 2)"), "E0103");
}

#[test]
fn shape_lists_sizes() {
    assert_eq!(eval("shape(zeros([2, 3]))"), "2 3");
    assert_eq!(eval("shape(zeros([4, 0, 2]))"), "4 0 2");
    assert_eq!(eval("shape([1, 2, 3])"), "3");
    // A scalar gives the empty [0].
    assert_eq!(eval("shape(5)"), "[]");
    assert_eq!(eval("shape(shape(5))"), "0");
    assert_eq!(eval("shape(sum([1, 2]))"), "[]");
    // No names.
    assert_eq!(eval("x : [a, b] = zeros([2, 3])\nlabels(shape(x))"), "");
    assert_eq!(error_code("shape(\"abc\")"), "E0301");
    assert_eq!(error_code("shape(tokenizer())"), "E0301");
}

#[test]
fn rank_counts_axes() {
    assert_eq!(eval("rank(zeros([2, 3, 4]))"), "3");
    assert_eq!(eval("rank([1, 2])"), "1");
    assert_eq!(eval("rank(7)"), "0");
    assert_eq!(eval("rank(sum([1, 2]))"), "0");
    assert_eq!(eval("shape(rank(zeros([2, 3])))"), "[]");
    assert_eq!(error_code("rank(\"x\")"), "E0301");
}

#[test]
fn reshape_keeps_row_major_order() {
    assert_eq!(eval("reshape(iota(6), [2, 3])"), "0 1 2\n3 4 5");
    assert_eq!(eval("reshape(iota(6), [3, 2])"), "0 1\n2 3\n4 5");
    assert_eq!(
        eval("reshape(reshape(iota(6), [2, 3]), [6])"),
        "0 1 2 3 4 5"
    );
    // `dims` may have any rank; its elements are read in row-major order.
    assert_eq!(eval("shape(reshape(iota(6), [[2], [3]]))"), "2 3");
    // A scalar and a one-element array.
    assert_eq!(eval("shape(reshape(5, [1, 1]))"), "1 1");
    assert_eq!(eval("reshape(5, [1, 1])"), "5");
    assert_eq!(eval("shape(reshape([5], []))"), "[]");
    assert_eq!(eval("reshape([5], [])"), "5");
    assert_eq!(eval("shape(reshape(zeros([0]), [3, 0]))"), "3 0");
}

#[test]
fn reshape_infers_one_dimension() {
    assert_eq!(eval("shape(reshape(iota(6), [3, -1]))"), "3 2");
    assert_eq!(eval("shape(reshape(iota(6), [-1, 3]))"), "2 3");
    assert_eq!(
        eval("reshape(reshape(iota(6), [2, 3]), [-1])"),
        "0 1 2 3 4 5"
    );
    assert_eq!(eval("shape(reshape(iota(12), [2, -1, 3]))"), "2 2 3");
}

#[test]
fn reshape_clears_names() {
    assert_eq!(eval("x : [a] = iota(6)\nlabels(reshape(x, [2, 3]))"), ",");
    assert_eq!(
        eval("x : [a, b] = zeros([2, 3])\nlabels(reshape(x, [3, 2]))"),
        ","
    );
}

#[test]
fn reshape_errors() {
    assert_eq!(error_code("reshape(iota(6), [4])"), "E0210");
    assert_eq!(error_code("reshape(iota(6), [2, 2])"), "E0210");
    assert_eq!(error_code("reshape(iota(6), [4, -1])"), "E0210");
    assert_eq!(error_code("reshape(iota(6), [0, -1])"), "E0210");
    assert_eq!(error_code("reshape(iota(6), [-1, -1])"), "E0213");
    assert_eq!(error_code("reshape(iota(6), [-1, 2, -1])"), "E0213");
    assert_eq!(error_code("reshape(iota(6), [2, -3])"), "E0213");
    assert_eq!(error_code("reshape(iota(6), [1.5, 4])"), "E0213");
    assert_eq!(error_code("reshape(iota(6))"), "E0103");
    assert_eq!(error_code("reshape(\"abc\", [3])"), "E0301");
}

#[test]
fn transpose_reverses_axes() {
    assert_eq!(eval("transpose(reshape(iota(6), [2, 3]))"), "0 3\n1 4\n2 5");
    assert_eq!(eval("shape(transpose(zeros([2, 3, 4])))"), "4 3 2");
    // t[i, j, k] = x[k, j, i] for x = reshape(iota(24), [2, 3, 4]), x[a, b, c] = 12a + 4b + c.
    assert_eq!(
        eval("transpose(reshape(iota(24), [2, 3, 4]))"),
        "0 12\n4 16\n8 20\n\n1 13\n5 17\n9 21\n\n2 14\n6 18\n10 22\n\n3 15\n7 19\n11 23"
    );
    // Rank 0 and 1 are unchanged.
    assert_eq!(eval("transpose([1, 2, 3])"), "1 2 3");
    assert_eq!(eval("transpose(5)"), "5");
    assert_eq!(error_code("transpose(\"x\")"), "E0301");
}

#[test]
fn transpose_reverses_names() {
    assert_eq!(
        eval("x : [a, b, c] = zeros([2, 3, 4])\nlabels(transpose(x))"),
        "c,b,a"
    );
    assert_eq!(
        eval("x = label(zeros([2, 3]), [\"r\", \"\"])\nlabels(transpose(x))"),
        ",r"
    );
    assert_eq!(eval("x : [v] = zeros([3])\nlabels(transpose(x))"), "v");
}

#[test]
fn zeros_and_ones() {
    assert_eq!(eval("zeros([2, 3])"), "0 0 0\n0 0 0");
    assert_eq!(eval("zeros(3)"), "0 0 0");
    assert_eq!(eval("ones([2, 2])"), "1 1\n1 1");
    assert_eq!(eval("ones(2)"), "1 1");
    assert_eq!(eval("zeros([])"), "0");
    assert_eq!(eval("rank(ones([]))"), "0");
    assert_eq!(eval("shape(zeros([2, 0]))"), "2 0");
    assert_eq!(eval("zeros([2, 0])"), "[]");
    assert_eq!(eval("labels(zeros([2, 3]))"), ",");
    assert_eq!(eval("shape(ones(reshape([2, 3], [1, 2])))"), "2 3");
}

#[test]
fn zeros_and_ones_read_sizes_as_counts() {
    assert_eq!(eval("shape(zeros([2, -1]))"), "2 0");
    assert!(warning_codes("zeros([2, -1])").contains(&"W0203"));
    assert!(warning_codes("ones(-2)").contains(&"W0203"));
    assert_eq!(eval("ones([2.5])"), "1 1");
    assert!(warning_codes("ones([2.5])").contains(&"W0202"));
    assert!(warning_codes("zeros([2.5, 1])").contains(&"W0202"));
    assert!(warning_codes("zeros([2, 1])").is_empty());
}

#[test]
fn zeros_and_ones_errors() {
    assert_eq!(error_code("zeros(\"3\")"), "E0301");
    assert_eq!(error_code("ones(tokenizer())"), "E0301");
    assert_eq!(error_code("zeros()"), "E0103");
    assert_eq!(error_code("ones([1], [2])"), "E0103");
}

#[test]
fn fill_repeats_a_scalar() {
    assert_eq!(eval("fill([2, 2], 7)"), "7 7\n7 7");
    assert_eq!(eval("fill(3, 0.5)"), "0.5 0.5 0.5");
    // Stored as float32: 0.1 prints as the float32 0.1.
    assert_eq!(eval("fill([2], 0.1)"), "0.1 0.1");
    assert_eq!(eval("fill([2], -2.5) + 0"), "-2.5 -2.5");
    assert_eq!(eval("fill([2], sum([1, 2]))"), "3 3");
    assert_eq!(eval("labels(fill([2, 3], 1))"), ",");
    assert!(warning_codes("fill([-1], 1)").contains(&"W0203"));
    assert_eq!(error_code("fill([2], [1, 2])"), "E0205");
    assert_eq!(error_code("fill([2], \"a\")"), "E0301");
    assert_eq!(error_code("fill([2])"), "E0103");
}

#[test]
fn grid_points_in_row_major_order() {
    // Row i·n+j is (xmin + (xmax−xmin)·j/(n−1), ymin + (ymax−ymin)·i/(n−1)).
    assert_eq!(eval("grid([0, 1, 0, 2], 2)"), "0 0\n1 0\n0 2\n1 2");
    assert_eq!(
        eval("grid([0, 1, 0, 1], 3)"),
        "0 0\n0.5 0\n1 0\n0 0.5\n0.5 0.5\n1 0.5\n0 1\n0.5 1\n1 1"
    );
    assert_eq!(
        eval("grid([-1, 1, 10, 20], 3)"),
        "-1 10\n0 10\n1 10\n-1 15\n0 15\n1 15\n-1 20\n0 20\n1 20"
    );
    // n = 1: the denominators are 1, so the only point is (xmin, ymin).
    assert_eq!(eval("grid([2, 5, 3, 7], 1)"), "2 3");
    assert_eq!(eval("shape(grid([0, 1, 0, 1], 4))"), "16 2");
    assert_eq!(eval("labels(grid([0, 1, 0, 1], 2))"), ",");
}

#[test]
fn grid_errors() {
    assert_eq!(error_code("grid([0, 1, 0], 2)"), "E0218");
    assert_eq!(error_code("grid([0, 1, 0, 1, 2], 2)"), "E0218");
    assert_eq!(error_code("grid([0, 1, 0, 1], 0)"), "E0401");
    assert_eq!(error_code("grid([0, 1, 0, 1], -2)"), "E0401");
    assert_eq!(error_code("grid([0, 1, 0, 1], [2])"), "E0205");
    // A fractional n is a count: truncated with W0202.
    assert_eq!(eval("shape(grid([0, 1, 0, 1], 2.5))"), "4 2");
    assert!(warning_codes("grid([0, 1, 0, 1], 2.5)").contains(&"W0202"));
}

#[test]
fn concat_joins_vectors() {
    assert_eq!(eval("concat([1, 2], [3])"), "1 2 3");
    assert_eq!(eval("concat(1, 2)"), "1 2");
    assert_eq!(eval("shape(concat(1, 2))"), "2");
    assert_eq!(eval("concat([1], zeros([0]))"), "1");
    assert_eq!(eval("shape(concat(zeros([0]), zeros([0])))"), "0");
    assert_eq!(eval("concat(0.5, [0.25])"), "0.5 0.25");
    assert_eq!(eval("x : [a] = [1, 2]\nlabels(concat(x, x))"), "");
    assert_eq!(error_code("concat(zeros([2, 2]), [1])"), "E0205");
    assert_eq!(error_code("concat([1], zeros([1, 1]))"), "E0205");
    assert_eq!(error_code("concat([1], \"a\")"), "E0301");
}

#[test]
fn last_row_of_a_matrix() {
    assert_eq!(eval("last_row(reshape(iota(6), [3, 2]))"), "4 5");
    assert_eq!(eval("last_row([[1, 2, 3]])"), "1 2 3");
    assert_eq!(eval("shape(last_row(zeros([2, 0])))"), "0");
    assert_eq!(eval("x : [r, c] = zeros([2, 3])\nlabels(last_row(x))"), "");
    assert_eq!(error_code("last_row(iota(3))"), "E0205");
    assert_eq!(error_code("last_row(zeros([2, 2, 2]))"), "E0205");
    assert_eq!(error_code("last_row(5)"), "E0205");
    assert_eq!(error_code("last_row(zeros([0, 3]))"), "E0216");
}

#[test]
fn scatter_sets_one_element_of_a_copy() {
    assert_eq!(eval("scatter(zeros([4]), 2, 5)"), "0 0 5 0");
    assert_eq!(eval("scatter([1, 2, 3], 0, -1)"), "-1 2 3");
    assert_eq!(eval("scatter([1, 2, 3], 2, 0.5)"), "1 2 0.5");
    // `buf` itself is not modified.
    assert_eq!(eval("b = zeros([3])\nc = scatter(b, 1, 9)\nb"), "0 0 0");
    assert_eq!(eval("b = zeros([3])\nc = scatter(b, 1, 9)\nc"), "0 9 0");
    assert_eq!(eval("x : [v] = zeros([2])\nlabels(scatter(x, 0, 1))"), "");
}

#[test]
fn scatter_errors() {
    assert_eq!(error_code("scatter(zeros([4]), 4, 1)"), "E0402");
    assert_eq!(error_code("scatter(zeros([4]), -1, 1)"), "E0402");
    assert_eq!(error_code("scatter(zeros([4]), 1.5, 1)"), "E0402");
    assert_eq!(error_code("scatter(zeros([0]), 0, 1)"), "E0402");
    assert_eq!(error_code("scatter(zeros([2, 2]), 0, 1)"), "E0205");
    assert_eq!(error_code("scatter(zeros([4]), [1], 1)"), "E0205");
    assert_eq!(error_code("scatter(zeros([4]), 1, [1])"), "E0205");
    assert_eq!(error_code("scatter(zeros([4]), 1)"), "E0103");
}
