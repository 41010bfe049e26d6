//! Data set preparation and language-model windows (LANGUAGE §10.8, §13.4):
//! shuffle, batch, batch_mask, split, val_split, shift_pairs_x, shift_pairs_y.
//! Permutations were computed from §13.4 (Fisher–Yates over xorshift64).

use crate::common;

use common::{error_code, eval};

/// Rows r = [2r, 2r + 1] for r in 0..6.
const X: &str = "x = reshape(iota(12), [6, 2])\n";
/// The same with names.
const M: &str = "M : [row, col] = reshape(iota(12), [6, 2])\n";

fn with(prefix: &str, src: &str) -> String {
    eval(&format!("{prefix}{src}"))
}

#[test]
fn shuffle_permutes_rows() {
    // perm(6, seed 9) = [2, 5, 0, 4, 1, 3].
    assert_eq!(eval("shuffle(iota(6), 9)"), "2 5 0 4 1 3");
    assert_eq!(with(X, "shuffle(x, 9)"), "4 5\n10 11\n0 1\n8 9\n2 3\n6 7");
    // perm(6, seed 1) = [4, 5, 2, 1, 0, 3]; perm(3, seed 0) = [1, 2, 0].
    assert_eq!(eval("shuffle(iota(6), 1)"), "4 5 2 1 0 3");
    assert_eq!(eval("shuffle([10, 20, 30], 0)"), "20 30 10");
    assert_eq!(eval("shuffle([7], 3)"), "7");
    assert_eq!(eval("shape(shuffle(zeros([0, 2]), 3))"), "0 2");
    assert_eq!(eval("shape(shuffle(zeros([4, 2, 3]), 3))"), "4 2 3");
    // Axis 0 unnamed, the others kept.
    assert_eq!(with(M, "labels(shuffle(M, 9))"), ",col");
    assert_eq!(eval("v : [t] = iota(3)\nlabels(shuffle(v, 1))"), "");
}

#[test]
fn shuffle_errors() {
    assert_eq!(error_code("shuffle(5, 1)"), "E0205");
    assert_eq!(error_code("shuffle(iota(3), [1])"), "E0205");
    assert_eq!(error_code("shuffle(\"abc\", 1)"), "E0301");
    assert_eq!(error_code("shuffle(iota(3))"), "E0103");
}

#[test]
fn batch_groups_rows_and_pads_with_zeros() {
    assert_eq!(eval("batch(iota(5), 2)"), "0 1\n2 3\n4 0");
    assert_eq!(eval("batch(iota(4), 2)"), "0 1\n2 3");
    assert_eq!(eval("shape(batch(iota(5), 2))"), "3 2");
    assert_eq!(eval("batch(iota(3), 5)"), "0 1 2 0 0");
    assert_eq!(with(X, "shape(batch(x, 4))"), "2 4 2");
    assert_eq!(
        with(X, "batch(x, 4)"),
        "0 1\n2 3\n4 5\n6 7\n\n8 9\n10 11\n0 0\n0 0"
    );
    assert_eq!(eval("shape(batch(zeros([0, 3]), 2))"), "0 2 3");
    // The two leading axes are unnamed, the others kept.
    assert_eq!(with(M, "labels(batch(M, 4))"), ",,col");
}

#[test]
fn batch_mask_marks_real_rows() {
    assert_eq!(eval("batch_mask(iota(5), 2)"), "1 1\n1 1\n1 0");
    assert_eq!(eval("batch_mask(iota(4), 2)"), "1 1\n1 1");
    assert_eq!(with(X, "batch_mask(x, 4)"), "1 1 1 1\n1 1 0 0");
    assert_eq!(with(M, "labels(batch_mask(M, 4))"), ",");
    assert_eq!(eval("shape(batch_mask(zeros([0]), 3))"), "0 3");
}

#[test]
fn batch_errors() {
    for f in ["batch", "batch_mask"] {
        assert_eq!(error_code(&format!("{f}(iota(4), 0)")), "E0401", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(4), -1)")), "E0401", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(4), 1.5)")), "E0401", "{f}");
        assert_eq!(error_code(&format!("{f}(5, 2)")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(4), [2])")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(4))")), "E0103", "{f}");
    }
}

#[test]
fn split_and_val_split_partition_the_shuffle() {
    // perm(10, seed 3) = [4, 1, 0, 2, 8, 5, 7, 9, 6, 3]; n_tr = ⌊10 · 0.7⌋ = 7.
    assert_eq!(eval("split(iota(10), 0.7, 3)"), "4 1 0 2 8 5 7");
    assert_eq!(eval("val_split(iota(10), 0.7, 3)"), "9 6 3");
    // n_tr = clamp(⌊n·frac⌋, 1, n − 1).
    assert_eq!(eval("shape(split(iota(10), 0.01, 3))"), "1");
    assert_eq!(eval("split(iota(10), 0.01, 3)"), "4");
    assert_eq!(eval("shape(val_split(iota(10), 0.99, 3))"), "1");
    assert_eq!(eval("val_split(iota(10), 0.99, 3)"), "3");
    // perm(3, seed 0) = [1, 2, 0]; ⌊1.5⌋ = 1.
    assert_eq!(eval("split(iota(3), 0.5, 0)"), "1");
    assert_eq!(eval("val_split(iota(3), 0.5, 0)"), "2 0");
    // Rows of a matrix; axis 0 unnamed, the others kept. perm(6, seed 1) = [4, 5, 2, 1, 0, 3].
    assert_eq!(with(X, "split(x, 0.5, 1)"), "8 9\n10 11\n4 5");
    assert_eq!(with(X, "val_split(x, 0.5, 1)"), "2 3\n0 1\n6 7");
    assert_eq!(with(M, "labels(split(M, 0.5, 1))"), ",col");
    assert_eq!(with(M, "labels(val_split(M, 0.5, 1))"), ",col");
}

#[test]
fn split_errors() {
    for f in ["split", "val_split"] {
        assert_eq!(error_code(&format!("{f}(iota(1), 0.5, 0)")), "E0216", "{f}");
        assert_eq!(
            error_code(&format!("{f}(zeros([0, 2]), 0.5, 0)")),
            "E0216",
            "{f}"
        );
        assert_eq!(error_code(&format!("{f}(iota(5), 0, 0)")), "E0401", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(5), 1, 0)")), "E0401", "{f}");
        assert_eq!(
            error_code(&format!("{f}(iota(5), -0.5, 0)")),
            "E0401",
            "{f}"
        );
        assert_eq!(error_code(&format!("{f}(5, 0.5, 0)")), "E0205", "{f}");
        assert_eq!(
            error_code(&format!("{f}(iota(5), [0.5], 0)")),
            "E0205",
            "{f}"
        );
        assert_eq!(error_code(&format!("{f}(iota(5), 0.5)")), "E0103", "{f}");
    }
}

#[test]
fn shift_pairs_cut_non_overlapping_windows() {
    // B = ⌊8 / 4⌋ = 2 windows of 4 tokens: [0..3], [4..7].
    assert_eq!(eval("shift_pairs_x(iota(8), 3)"), "0 1 2\n4 5 6");
    assert_eq!(eval("shift_pairs_y(iota(8), 3)"), "1 2 3\n5 6 7");
    // Leftover tokens are ignored.
    assert_eq!(eval("shift_pairs_x(iota(11), 3)"), "0 1 2\n4 5 6");
    assert_eq!(eval("shift_pairs_y(iota(11), 3)"), "1 2 3\n5 6 7");
    assert_eq!(eval("shift_pairs_x([5, 6, 7, 8, 9], 1)"), "5\n7");
    assert_eq!(eval("shift_pairs_y([5, 6, 7, 8, 9], 1)"), "6\n8");
    assert_eq!(eval("shape(shift_pairs_x(iota(4), 3))"), "1 3");
    assert_eq!(eval("v : [t] = iota(8)\nlabels(shift_pairs_x(v, 3))"), ",");
    assert_eq!(eval("v : [t] = iota(8)\nlabels(shift_pairs_y(v, 3))"), ",");
}

#[test]
fn shift_pairs_errors() {
    for f in ["shift_pairs_x", "shift_pairs_y"] {
        assert_eq!(error_code(&format!("{f}(iota(8), 0)")), "E0401", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(8), 1.5)")), "E0401", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(3), 3)")), "E0401", "{f}");
        assert_eq!(
            error_code(&format!("{f}(zeros([2, 4]), 1)")),
            "E0205",
            "{f}"
        );
        assert_eq!(error_code(&format!("{f}(5, 1)")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(8), [3])")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}(iota(8))")), "E0103", "{f}");
    }
}
