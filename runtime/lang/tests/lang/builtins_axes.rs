//! Axis-name builtins (LANGUAGE §8, §10.11): label, relabel, reshape_labeled,
//! labels.

use crate::common;

use common::{error_code, eval, warning_codes};

#[test]
fn label_with_a_list() {
    assert_eq!(
        eval("labels(label(zeros([2, 3]), [\"batch\", \"feat\"]))"),
        "batch,feat"
    );
    // The value is unchanged.
    assert_eq!(
        eval("label(reshape(iota(6), [2, 3]), [\"batch\", \"feat\"])"),
        "0 1 2\n3 4 5"
    );
    // Entries are any string expressions; "" leaves an axis unnamed.
    assert_eq!(
        eval("f = \"feat\"\nlabels(label(zeros([2, 3]), [\"batch\", f]))"),
        "batch,feat"
    );
    assert_eq!(
        eval("labels(label(zeros([2, 3]), [\"batch\", \"\"]))"),
        "batch,"
    );
    assert_eq!(
        eval("labels(label(zeros([2, 3]), [\"\", \"feat\"]))"),
        ",feat"
    );
    assert_eq!(eval("labels(label(zeros([2, 3]), [\"\", \"\"]))"), ",");
    assert_eq!(eval("labels(label(iota(3), [\"t\"]))"), "t");
    assert_eq!(eval("labels(label(5, []))"), "");
    assert_eq!(eval("label(5, [])"), "5");
    // Names are case-sensitive.
    assert_eq!(
        eval("x = label(reshape(iota(6), [2, 3]), [\"A\", \"a\"])\nsum(x, \"a\")"),
        "3 12"
    );
}

#[test]
fn label_with_one_comma_separated_string() {
    assert_eq!(
        eval("labels(label(zeros([2, 3]), \"batch,feat\"))"),
        "batch,feat"
    );
    assert_eq!(eval("labels(label(zeros([2, 3]), \"batch,\"))"), "batch,");
    assert_eq!(eval("labels(label(zeros([2, 3]), \",feat\"))"), ",feat");
    assert_eq!(eval("labels(label(5, \"\"))"), "");
    assert_eq!(eval("labels(label(iota(3), \"t\"))"), "t");
    // The form `labels` returns is accepted back, for every rank.
    assert_eq!(
        eval("x : [a, b] = zeros([2, 3])\nlabels(label(ones([2, 3]), labels(x)))"),
        "a,b"
    );
    assert_eq!(eval("labels(label(iota(3), labels(iota(3))))"), "");
    assert_eq!(
        eval("labels(label(zeros([2, 2]), labels(zeros([2, 2]))))"),
        ","
    );
    assert_eq!(eval("labels(label(7, labels(7)))"), "");
}

#[test]
fn label_replaces_existing_names() {
    assert_eq!(
        eval("x : [a, b] = zeros([2, 3])\nlabels(label(x, [\"c\", \"d\"]))"),
        "c,d"
    );
    assert_eq!(
        eval("x : [a, b] = zeros([2, 3])\nlabels(label(x, [\"\", \"d\"]))"),
        ",d"
    );
}

#[test]
fn relabel_is_label() {
    assert_eq!(
        eval("x : [a, b] = zeros([2, 3])\nlabels(relabel(x, [\"rows\", \"\"]))"),
        "rows,"
    );
    assert_eq!(eval("labels(relabel(zeros([2, 3]), \"p,q\"))"), "p,q");
    assert_eq!(eval("relabel([1, 2], [\"v\"])"), "1 2");
    assert_eq!(error_code("relabel(zeros([2, 3]), [\"a\"])"), "E0209");
    assert!(warning_codes("relabel(zeros([2, 3]), [\"a\", \"a\"])").contains(&"W0201"));
}

#[test]
fn label_errors() {
    assert_eq!(error_code("label(zeros([2, 3]), [\"a\"])"), "E0209");
    assert_eq!(
        error_code("label(zeros([2, 3]), [\"a\", \"b\", \"c\"])"),
        "E0209"
    );
    assert_eq!(error_code("label(iota(3), [\"a\", \"b\"])"), "E0209");
    assert_eq!(error_code("label(5, [\"a\"])"), "E0209");
    assert_eq!(error_code("label(zeros([2, 3]), \"a\")"), "E0209");
    assert_eq!(error_code("label(zeros([2, 3]), \"a,b,c\")"), "E0209");
    assert_eq!(error_code("label(zeros([2, 3]), [])"), "E0209");
    assert_eq!(error_code("label(zeros([2, 3]), [\"a\", 1])"), "E0302");
    assert_eq!(error_code("label(zeros([2, 3]), 5)"), "E0302");
    assert_eq!(error_code("label(\"s\", [\"a\"])"), "E0301");
    assert_eq!(error_code("label(zeros([2, 3]))"), "E0103");
}

#[test]
fn duplicate_names_warn_and_lookups_find_the_first() {
    assert!(warning_codes("label(zeros([2, 3]), [\"a\", \"a\"])").contains(&"W0201"));
    assert!(warning_codes("label(zeros([2, 3]), \"a,a\")").contains(&"W0201"));
    assert!(warning_codes("x : [a, a] = zeros([2, 3])").contains(&"W0201"));
    assert!(warning_codes("label(zeros([2, 3]), [\"a\", \"b\"])").is_empty());
    assert!(warning_codes("label(zeros([2, 3]), [\"\", \"\"])").is_empty());
    assert_eq!(
        eval("x = label(reshape(iota(6), [2, 3]), [\"a\", \"a\"])\nsum(x, \"a\")"),
        "3 5 7"
    );
    assert_eq!(
        eval("x = label(reshape(iota(6), [2, 3]), [\"a\", \"a\"])\nlabels(x)"),
        "a,a"
    );
}

#[test]
fn reshape_labeled_reshapes_then_names() {
    assert_eq!(
        eval("labels(reshape_labeled(iota(6), [2, 3], [\"r\", \"c\"]))"),
        "r,c"
    );
    assert_eq!(
        eval("reshape_labeled(iota(6), [2, 3], [\"r\", \"c\"])"),
        "0 1 2\n3 4 5"
    );
    assert_eq!(
        eval("shape(reshape_labeled(iota(6), [3, -1], \"r,c\"))"),
        "3 2"
    );
    assert_eq!(eval("labels(reshape_labeled(iota(6), [6], \"\"))"), "");
    assert_eq!(eval("labels(reshape_labeled(iota(6), [6], [\"t\"]))"), "t");
    assert_eq!(eval("labels(reshape_labeled([4], [], []))"), "");
    assert_eq!(
        error_code("reshape_labeled(iota(6), [4], [\"a\"])"),
        "E0210"
    );
    assert_eq!(
        error_code("reshape_labeled(iota(6), [-1, -1], [\"a\", \"b\"])"),
        "E0213"
    );
    assert_eq!(
        error_code("reshape_labeled(iota(6), [2, 3], [\"a\"])"),
        "E0209"
    );
    assert!(warning_codes("reshape_labeled(iota(6), [2, 3], [\"a\", \"a\"])").contains(&"W0201"));
    assert_eq!(error_code("reshape_labeled(iota(6), [2, 3])"), "E0103");
}

#[test]
fn labels_returns_a_comma_separated_string() {
    assert_eq!(eval("labels(5)"), "");
    assert_eq!(eval("labels(iota(3))"), "");
    assert_eq!(eval("labels(zeros([2, 3]))"), ",");
    assert_eq!(eval("labels(zeros([2, 3, 4]))"), ",,");
    assert_eq!(eval("x : [a, b, c] = zeros([1, 2, 3])\nlabels(x)"), "a,b,c");
    assert_eq!(
        eval("x = label(zeros([1, 2, 3]), [\"\", \"b\", \"\"])\nlabels(x)"),
        ",b,"
    );
    assert_eq!(error_code("labels(\"abc\")"), "E0301");
    assert_eq!(error_code("labels()"), "E0103");
}
