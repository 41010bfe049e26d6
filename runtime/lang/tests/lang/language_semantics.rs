//! Language semantics of LANGUAGE §5–§9: statement values, loops and their
//! implicit bindings, display of numbers and arrays, named axes, axis arguments
//! and broadcasting. Also checks that every registered builtin has tests.

use crate::common;

use common::{error_code, error_of, eval, run_in, warning_codes, Session};

// ---------------------------------------------------------------- §6.1 values

#[test]
fn an_empty_program_has_no_value() {
    for src in ["", "\n\n", "# just a comment\n", ";;"] {
        let o = run_in(src, None);
        assert!(matches!(o.result, Ok(None)), "{src:?}");
    }
}

#[test]
fn the_value_of_a_program_is_its_last_statement() {
    assert_eq!(eval("1\n2\n3"), "3");
    assert_eq!(eval("x = 1; x + 1"), "2");
}

#[test]
fn assignment_values() {
    assert_eq!(eval("x = [1, 2]"), "1 2");
    assert_eq!(eval("x = 0.1 + 0.2"), "0.30000000000000004");
    assert_eq!(eval("x : [a] = [1, 2]"), "1 2");
    // Assigning a string or tokenizer gives the exact scalar 0.
    assert_eq!(eval("s = \"hi\""), "0");
    assert_eq!(eval("t = tokenizer()"), "0");
    assert_eq!(eval("s = \"hi\"\ns"), "hi");
    // Rebinding changes the kind.
    assert_eq!(eval("x = [1]\nx = \"text\"\nx"), "text");
    assert_eq!(eval("x = \"text\"\nx = 5\nx"), "5");
}

#[test]
fn repeat_values() {
    assert_eq!(eval("repeat 3 { x = 1; x + 1 }"), "2");
    assert_eq!(eval("i = 0\nrepeat 3 { i = i + 1 }"), "3");
    assert_eq!(eval("i = 0\nrepeat 4 { i = i + 1 }\ni"), "4");
    assert_eq!(eval("repeat 0 { 5 }"), "0");
    assert_eq!(eval("repeat 2 { }"), "0");
    // Earlier statements may have any kind; only the last value counts.
    assert_eq!(eval("repeat 2 { s = \"x\"; t = tokenizer(); 7 }"), "7");
    // The count is evaluated once.
    assert_eq!(eval("n = 3\ni = 0\nrepeat n { n = 10; i = i + 1 }\ni"), "3");
}

#[test]
fn repeat_counts() {
    assert_eq!(eval("i = 0\nrepeat 2.9 { i = i + 1 }\ni"), "2");
    assert!(warning_codes("repeat 2.9 { 1 }").contains(&"W0202"));
    assert_eq!(eval("repeat -1 { 5 }"), "0");
    assert!(warning_codes("repeat -1 { 5 }").contains(&"W0203"));
    assert_eq!(eval("repeat 0 / 0 { 5 }"), "0");
    assert_eq!(error_code("repeat [3] { 1 }"), "E0205");
    assert_eq!(error_code("repeat \"3\" { 1 }"), "E0301");
}

#[test]
fn blocks_do_not_create_scopes() {
    assert_eq!(eval("repeat 1 { y = 5 }\ny"), "5");
    assert_eq!(eval("train 1 { z = 2; z }\nz"), "2");
    assert_eq!(eval("for i in iota(2) { w = i }\nw"), "1");
    assert_eq!(eval("experiment \"e\" { v = 4 }\nv"), "4");
    assert_eq!(eval("device(\"cpu\") { u = 6 }\nu"), "6");
}

#[test]
fn errors_keep_earlier_bindings() {
    let mut s = Session::new(None, None);
    assert_eq!(s.error_code("a = 1\nb = iota(\"x\")\nc = 3"), "E0301");
    assert_eq!(s.eval("a"), "1");
    assert_eq!(s.error_code("c"), "E0101");
    assert_eq!(s.error_code("b"), "E0101");
    // Later cells see earlier cells' bindings.
    assert_eq!(s.eval("a + 1"), "2");
}

// ------------------------------------------------------------------ §6.3 train

#[test]
fn train_binds_step_and_last_losses() {
    assert_eq!(eval("train 3 { step }"), "2");
    assert_eq!(eval("train 3 { step }\nlast_losses"), "0 1 2");
    assert_eq!(eval("train 3 { step }\nstep"), "2");
    assert_eq!(eval("train 3 { step }\nshape(last_losses)"), "3");
    assert_eq!(eval("train 3 { step }\nlabels(last_losses)"), "");
    // step is an exact scalar.
    assert_eq!(eval("train 4 { step * 0.1 }"), "0.30000000000000004");
    // The recorded losses are float32 values.
    assert_eq!(eval("train 4 { step * 0.1 }\nlast_losses"), "0 0.1 0.2 0.3");
}

#[test]
fn train_records_the_mean_of_non_scalar_values() {
    assert_eq!(eval("train 2 { [step, step + 1] }\nlast_losses"), "0.5 1.5");
    assert_eq!(
        eval("train 2 { reshape(iota(4), [2, 2]) * step }\nlast_losses"),
        "0 1.5"
    );
    assert_eq!(eval("train 2 { [step, step + 1] }"), "1 2");
}

#[test]
fn train_zero_times() {
    assert_eq!(eval("train 0 { 1 }"), "0");
    assert_eq!(eval("train 0 { 1 }\nshape(last_losses)"), "0");
    assert_eq!(eval("train 0 { 1 }\nlast_losses"), "[]");
    // step keeps its old value.
    assert_eq!(eval("step = 7\ntrain 0 { 1 }\nstep"), "7");
    assert_eq!(eval("train -2 { 1 }"), "0");
    assert!(warning_codes("train -2 { 1 }").contains(&"W0203"));
    assert!(warning_codes("train 1.5 { 1 }").contains(&"W0202"));
    assert_eq!(eval("train 1.5 { 1 }\nlast_losses"), "1");
}

#[test]
fn train_errors() {
    assert_eq!(error_code("train 1 { \"s\" }"), "E0307");
    assert_eq!(error_code("train 1 { tokenizer() }"), "E0307");
    assert_eq!(error_code("train 2 { s = \"x\" ; s }"), "E0307");
    assert_eq!(error_code("train [2] { 1 }"), "E0205");
    assert_eq!(error_code("train \"2\" { 1 }"), "E0301");
    // A body ending in an assignment of a string has the value 0: fine.
    assert_eq!(eval("train 2 { s = \"x\" }\nlast_losses"), "0 0");
}

#[test]
fn last_losses_is_kept_when_a_train_loop_fails() {
    let mut s = Session::new(None, None);
    s.eval("train 2 { 1 }");
    // The third iteration fails (index 2 is out of range).
    assert_eq!(
        s.error_code("train 3 { scatter(zeros([2]), step, 1); 5 }"),
        "E0402"
    );
    assert_eq!(s.eval("last_losses"), "1 1");
    // Bindings made before the error persist: step is 2.
    assert_eq!(s.eval("step"), "2");
}

#[test]
fn a_later_or_nested_train_overwrites_last_losses() {
    assert_eq!(eval("train 2 { 1 }\ntrain 3 { 2 }\nlast_losses"), "2 2 2");
    assert_eq!(eval("train 2 { train 3 { step }; 5 }\nlast_losses"), "5 5");
    assert_eq!(eval("train 2 { train 3 { step }; last_losses }"), "0 1 2");
}

// -------------------------------------------------------------------- §6.3 for

#[test]
fn for_binds_rows_and_last_rows() {
    assert_eq!(eval("for r in reshape(iota(6), [3, 2]) { r * 2 }"), "8 10");
    assert_eq!(
        eval("for r in reshape(iota(6), [3, 2]) { r * 2 }\nlast_rows"),
        "0 2\n4 6\n8 10"
    );
    // x stays bound to the last slice.
    assert_eq!(
        eval("for r in reshape(iota(6), [3, 2]) { r * 2 }\nr"),
        "4 5"
    );
    assert_eq!(eval("for i in iota(3) { i * i }\nlast_rows"), "0 1 4");
    assert_eq!(eval("for i in iota(3) { i * i }\ni"), "2");
    assert_eq!(eval("for i in iota(3) { i * i }\nshape(last_rows)"), "3");
    // Rows of a rank-3 array are matrices; the stacked result has rank 3.
    assert_eq!(
        eval("for m in zeros([2, 3, 4]) { m }\nshape(last_rows)"),
        "2 3 4"
    );
    // Each iteration's value may be a matrix.
    assert_eq!(
        eval("for i in [1, 2] { [[i, 0], [0, i]] }\nlast_rows"),
        "1 0\n0 1\n\n2 0\n0 2"
    );
}

#[test]
fn for_over_no_rows() {
    assert_eq!(eval("for i in zeros([0]) { i }"), "0");
    assert_eq!(eval("for i in zeros([0]) { i }\nshape(last_rows)"), "0");
    assert_eq!(eval("for i in zeros([0, 3]) { i }\nlast_rows"), "[]");
}

#[test]
fn for_slices_keep_the_names_of_the_remaining_axes() {
    assert_eq!(
        eval("M : [r, c] = zeros([2, 3])\nfor row in M { n = labels(row); row }\nn"),
        "c"
    );
    // last_rows is unnamed.
    assert_eq!(
        eval("M : [r, c] = zeros([2, 3])\nfor row in M { row }\nlabels(last_rows)"),
        ","
    );
}

#[test]
fn for_errors() {
    assert_eq!(error_code("for i in iota(3) { iota(i + 1) }"), "E0215");
    assert_eq!(error_code("for i in iota(2) { \"s\" }"), "E0307");
    assert_eq!(error_code("for i in iota(2) { tokenizer() }"), "E0307");
    assert_eq!(error_code("for i in 5 { i }"), "E0205");
    assert_eq!(error_code("for i in \"abc\" { i }"), "E0301");
    // A scalar and a one-element vector are different shapes.
    assert_eq!(
        error_code("for i in iota(2) { reshape(zeros(1), iota(1 - i) + 1) }"),
        "E0215"
    );
}

// ------------------------------------------------------------- §7 display

#[test]
fn display_of_exact_scalars_and_float32() {
    assert_eq!(eval("0.1 + 0.2"), "0.30000000000000004");
    assert_eq!(eval("[0.1] + [0.2]"), "0.3");
    assert_eq!(eval("123456789"), "123456789");
    assert_eq!(eval("[123456789]"), "123456792");
    assert_eq!(eval("exp(1)"), "2.718281828459045");
    assert_eq!(eval("exp([1])"), "2.7182817");
    assert_eq!(eval("log(0)"), "-inf");
    assert_eq!(eval("[16777217]"), "16777216");
    assert_eq!(eval("2 * 4503599627370496 + 2"), "9007199254740994");
}

#[test]
fn display_of_numbers() {
    assert_eq!(eval("1"), "1");
    assert_eq!(eval("-12"), "-12");
    assert_eq!(eval("149520384"), "149520384");
    assert_eq!(eval("0.1"), "0.1");
    assert_eq!(eval("1.5"), "1.5");
    assert_eq!(eval("0.000057344"), "0.000057344");
    assert_eq!(eval("906.8756"), "906.8756");
    assert_eq!(eval("1e24"), "1000000000000000000000000");
    assert_eq!(eval("[1e24]"), "1000000000000000000000000");
    assert_eq!(eval("1e-7"), "0.0000001");
    assert_eq!(eval("[0.000057344]"), "0.000057344");
    assert_eq!(eval("[906.8756]"), "906.8756");
    assert_eq!(eval("[-12]"), "-12");
}

#[test]
fn display_of_special_values() {
    assert_eq!(eval("-0"), "-0");
    assert_eq!(eval("0 * -1"), "-0");
    assert_eq!(eval("[-0]"), "-0");
    assert_eq!(eval("[0] * -1"), "-0");
    assert_eq!(eval("1 / 0"), "inf");
    assert_eq!(eval("-1 / 0"), "-inf");
    assert_eq!(eval("[1] / 0"), "inf");
    assert_eq!(eval("[-1] / 0"), "-inf");
    assert_eq!(eval("0 / 0"), "NaN");
    assert_eq!(eval("[0] / [0]"), "NaN");
    assert_eq!(eval("[1, 0, -1] / 0"), "inf NaN -inf");
}

#[test]
fn display_layout_by_rank() {
    assert_eq!(eval("[1, 2, 3]"), "1 2 3");
    assert_eq!(eval("[[1, 2], [3, 4]]"), "1 2\n3 4");
    assert_eq!(eval("[[1.5, -2]]"), "1.5 -2");
    assert_eq!(eval("[[1], [2]]"), "1\n2");
    assert_eq!(
        eval("reshape(iota(12), [2, 2, 3])"),
        "0 1 2\n3 4 5\n\n6 7 8\n9 10 11"
    );
    // One blank line when the innermost leading index changes, two when the one
    // before it changes too.
    assert_eq!(
        eval("reshape(iota(16), [2, 2, 2, 2])"),
        "0 1\n2 3\n\n4 5\n6 7\n\n\n8 9\n10 11\n\n12 13\n14 15"
    );
    assert_eq!(
        eval("reshape(iota(8), [2, 1, 2, 1, 2])"),
        "0 1\n\n2 3\n\n\n4 5\n\n6 7"
    );
    assert_eq!(eval("reshape(iota(3), [3, 1, 1])"), "0\n\n1\n\n2");
}

#[test]
fn display_of_empty_arrays() {
    assert_eq!(eval("[]"), "[]");
    assert_eq!(eval("zeros([0])"), "[]");
    assert_eq!(eval("zeros([2, 0, 3])"), "[]");
    assert_eq!(eval("zeros([0, 5])"), "[]");
    assert_eq!(eval("shape([])"), "0");
}

#[test]
fn display_of_other_kinds() {
    assert_eq!(eval("\"a\\tb\""), "a\tb");
    assert_eq!(eval("\"line\\nnext\""), "line\nnext");
    assert_eq!(eval("\"\""), "");
    assert_eq!(eval("labels(zeros([2, 2]))"), ",");
}

#[test]
fn exact_scalars_and_float32_scalars() {
    // Builtins whose array arguments are all exact scalars give exact scalars.
    assert_eq!(eval("sqrt(2)"), "1.4142135623730951");
    assert_eq!(eval("pow(2, 0.5)"), "1.4142135623730951");
    assert_eq!(eval("sum(0.1 + 0.2)"), "0.30000000000000004");
    // A float32 operand makes the result float32.
    assert_eq!(eval("sum([0.1]) + 0.2"), "0.3");
    assert_eq!(eval("mean([0.1, 0.3]) * 3"), "0.6");
    // An exact scalar meeting an array is rounded to float32 first.
    assert_eq!(eval("[1] * 0.1"), "0.1");
    assert_eq!(eval("[0] + 16777217"), "16777216");
}

#[test]
fn integer_arguments_truncate_toward_zero() {
    assert_eq!(eval("iota(2.9)"), "0 1");
    assert_eq!(eval("iota(7 / 2)"), "0 1 2");
    assert_eq!(eval("shape(iota(-0.5))"), "0");
    assert_eq!(eval("shape(iota(0 / 0))"), "0");
    assert!(warning_codes("iota(0 / 0)").is_empty());
}

#[test]
fn param_and_tensor_constructors() {
    assert_eq!(eval("param[2, 3]"), "0 0 0\n0 0 0");
    assert_eq!(eval("tensor[2]"), "0 0");
    assert_eq!(eval("param[]"), "0");
    assert_eq!(eval("shape(param[])"), "[]");
    assert_eq!(eval("shape(tensor[0, 2])"), "0 2");
    assert_eq!(eval("n = 3\nshape(param[n, n - 1])"), "3 2");
    assert_eq!(error_code("param[-1]"), "E0213");
    assert_eq!(error_code("tensor[1.5]"), "E0213");
    assert_eq!(error_code("param[[2]]"), "E0213");
    assert_eq!(error_code("tensor[\"a\"]"), "E0213");
}

// --------------------------------------------------------------- §8 axes

#[test]
fn annotations_name_axes() {
    assert_eq!(
        eval("x : [batch, feat] = zeros([32, 10])\nlabels(x)"),
        "batch,feat"
    );
    assert_eq!(eval("s : [] = 5\ns"), "5");
    assert_eq!(eval("s : [] = 5\nlabels(s)"), "");
    assert_eq!(eval("v : [t,] = iota(3)\nlabels(v)"), "t");
    assert_eq!(error_code("x : [a] = zeros([2, 3])"), "E0209");
    assert_eq!(error_code("x : [a, b] = \"s\""), "E0301");
    assert!(warning_codes("x : [a, a] = zeros([2, 2])").contains(&"W0201"));
}

#[test]
fn names_propagate_as_in_section_8_3() {
    let m = "M : [b, f] = reshape(iota(6), [2, 3])\n";
    let lab = |src: &str| eval(&format!("{m}labels({src})"));
    // Array literals drop element names.
    assert_eq!(lab("[M, M]"), ",,");
    assert_eq!(lab("[sum(M, \"b\")]"), ",");
    // Kept by unary functions and unary minus; merged by binary operations.
    assert_eq!(lab("-M"), "b,f");
    assert_eq!(lab("relu(M)"), "b,f");
    assert_eq!(lab("M * M"), "b,f");
    assert_eq!(lab("M - 1"), "b,f");
    assert_eq!(lab("pow(M, 2)"), "b,f");
    assert_eq!(lab("gt(M, 2)"), "b,f");
    // Cleared by reshape; reversed by transpose.
    assert_eq!(lab("reshape(M, [3, 2])"), ",");
    assert_eq!(lab("transpose(M)"), "f,b");
    // Reductions with an axis remove that axis's name; full ones give none.
    assert_eq!(lab("sum(M, \"f\")"), "b");
    assert_eq!(lab("mean(M, 0)"), "f");
    assert_eq!(lab("argmax(M, 1)"), "b");
    assert_eq!(lab("reduce_mul(M)"), "");
    // Dropped by softmax; axis 0 unnamed by shuffle; kept by top_k.
    assert_eq!(lab("softmax(M)"), ",");
    assert_eq!(lab("shuffle(M, 1)"), ",f");
    assert_eq!(lab("batch(M, 2)"), ",,f");
    assert_eq!(lab("top_k(sum(M, \"b\"), 1)"), "f");
    assert_eq!(lab("sinusoidal_encoding(2, 2)"), "time,dim");
    // Constructors give none.
    assert_eq!(lab("param[2, 3]"), ",");
    assert_eq!(lab("tensor[2]"), "");
    assert_eq!(lab("one_hot([0], 2)"), ",");
    // device and experiment blocks have no effect.
    assert_eq!(lab("device(\"cpu\") { M }"), "b,f");
}

#[test]
fn axis_arguments_count_from_the_end_when_negative() {
    let x = "x = reshape(iota(24), [2, 3, 4])\n";
    let f = |src: &str| eval(&format!("{x}{src}"));
    assert_eq!(f("shape(sum(x, -1))"), "2 3");
    assert_eq!(f("shape(sum(x, -2))"), "2 4");
    assert_eq!(f("shape(sum(x, -3))"), "3 4");
    assert_eq!(f("sum(x, -3)"), f("sum(x, 0)"));
    assert_eq!(f("mean(x, -2)"), f("mean(x, 1)"));
    assert_eq!(f("argmax(x, -1)"), f("argmax(x, 2)"));
    assert_eq!(f("reduce_mul(x, -1)"), f("reduce_mul(x, 2)"));
    assert_eq!(f("softmax(x, -3)"), f("softmax(x, 0)"));
    assert_eq!(f("log_softmax(x, -2)"), f("log_softmax(x, 1)"));
    assert_eq!(f("softmax(x)"), f("softmax(x, 2)"));
    for fun in [
        "sum",
        "reduce_add",
        "reduce_mul",
        "mean",
        "argmax",
        "softmax",
        "log_softmax",
    ] {
        assert_eq!(error_code(&format!("{x}{fun}(x, 3)")), "E0206", "{fun}");
        assert_eq!(error_code(&format!("{x}{fun}(x, -4)")), "E0206", "{fun}");
        assert_eq!(error_code(&format!("{x}{fun}(x, \"a\")")), "E0208", "{fun}");
        assert_eq!(
            error_code(&format!("{x}y : [a, b, c] = x\n{fun}(y, \"d\")")),
            "E0207",
            "{fun}"
        );
        assert_eq!(
            error_code(&format!("{x}y : [a, b, c] = x\n{fun}(y, \"\")")),
            "E0208",
            "{fun}"
        );
        assert_eq!(
            eval(&format!("{x}y : [a, b, c] = x\n{fun}(y, \"b\")")),
            f(&format!("{fun}(x, 1)")),
            "{fun}"
        );
    }
}

// ---------------------------------------------------------- §9 broadcasting

const X: &str = "x : [batch, feat] = zeros([32, 10])\n";

fn shape_and_names(src: &str) -> (String, String) {
    (
        eval(&format!("{X}r = {src}\nshape(r)")),
        eval(&format!("{X}r = {src}\nlabels(r)")),
    )
}

#[test]
fn broadcasting_table_of_section_9_3() {
    let batch_feat = ("32 10".to_string(), "batch,feat".to_string());
    assert_eq!(shape_and_names("x + 1"), batch_feat);
    assert_eq!(shape_and_names("x + zeros([10])"), batch_feat);
    assert_eq!(
        shape_and_names("x + label(zeros([10]), [\"feat\"])"),
        batch_feat
    );
    assert_eq!(
        eval(&format!(
            "{X}b : [feat] = zeros([10])\nr = x + b\nlabels(r)"
        )),
        "batch,feat"
    );
    assert_eq!(shape_and_names("x * zeros([32, 1])"), batch_feat);
    assert_eq!(
        shape_and_names("zeros([32, 1]) + zeros([1, 10])"),
        ("32 10".to_string(), ",".to_string())
    );
    assert_eq!(
        shape_and_names(
            "label(zeros([32, 10]), [\"batch\", \"\"]) + label(zeros([32, 10]), [\"\", \"feat\"])"
        ),
        batch_feat
    );
    assert_eq!(error_code(&format!("{X}x + zeros([3])")), "E0201");
    assert_eq!(
        error_code(&format!("{X}h : [hidden] = zeros([10])\nx + h")),
        "E0202"
    );
    assert_eq!(
        error_code(&format!(
            "{X}x + label(zeros([1, 10]), [\"sample\", \"feat\"])"
        )),
        "E0202"
    );
}

#[test]
fn broadcasting_more_cases() {
    // Operand order does not matter; missing leading axes take the other's names.
    assert_eq!(
        shape_and_names("zeros([10]) + x"),
        ("32 10".to_string(), "batch,feat".to_string())
    );
    assert_eq!(
        shape_and_names("1 - x"),
        ("32 10".to_string(), "batch,feat".to_string())
    );
    // Stretched axes keep the name of the size-1 side.
    assert_eq!(
        eval("a = label(zeros([1, 3]), [\"s\", \"\"])\nlabels(a + zeros([4, 3]))"),
        "s,"
    );
    assert_eq!(eval("shape(zeros([4, 1, 3]) + zeros([2, 1]))"), "4 2 3");
    assert_eq!(eval("[[1], [2]] + [10, 20, 30]"), "11 21 31\n12 22 32");
    assert_eq!(eval("zeros([0, 3]) + zeros([3])"), "[]");
    assert_eq!(eval("shape(zeros([0, 3]) + zeros([1, 3]))"), "0 3");
    assert_eq!(error_code("zeros([0, 3]) + zeros([2, 3])"), "E0201");
    // Names are checked on aligned axes even where the sizes broadcast.
    assert_eq!(
        error_code("label(zeros([1, 2]), [\"a\", \"\"]) + label(zeros([5, 2]), [\"b\", \"\"])"),
        "E0202"
    );
    // When both sizes and names conflict, E0201 wins.
    assert_eq!(
        error_code(&format!("{X}x + label(zeros([3]), [\"hidden\"])")),
        "E0201"
    );
}

#[test]
fn broadcast_errors_say_which_axis() {
    let d = error_of(&format!("{X}w = zeros([3])\ny = x + w"));
    assert_eq!(d.code, "E0201");
    assert_eq!(d.message, "shapes do not broadcast in `+`");
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("axis -1 has size 10 on the left and 3 on the right")),
        "{:?}",
        d.notes
    );
    let text = format!("{:?} {:?}", d.primary, d.secondary);
    assert!(text.contains("[batch=32, feat=10]"), "{text}");
    assert!(text.contains("[3]"), "{text}");

    let d = error_of(&format!("{X}h : [hidden] = zeros([10])\ny = x + h"));
    assert_eq!(d.code, "E0202");
    assert_eq!(d.message, "axis names conflict in `+`");
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("axis -1 is named `feat` on the left and `hidden` on the right")),
        "{:?}",
        d.notes
    );
    let text = format!("{:?} {:?}", d.primary, d.secondary);
    assert!(text.contains("[hidden=10]"), "{text}");
    assert!(text.contains("[batch=32, feat=10]"), "{text}");

    // The first conflicting axis counting from the end.
    let d = error_of("zeros([2, 3, 4]) * zeros([5, 3, 4])");
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("axis -3 has size 2 on the left and 5 on the right")),
        "{:?}",
        d.notes
    );
    let d = error_of("label(zeros([2, 3]), [\"a\", \"b\"]) / label(zeros([2, 3]), [\"c\", \"b\"])");
    assert_eq!(d.message, "axis names conflict in `/`");
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("axis -2 is named `a` on the left and `c` on the right")),
        "{:?}",
        d.notes
    );
    for (op, name) in [("+", "+"), ("-", "-"), ("*", "*"), ("/", "/")] {
        assert_eq!(
            error_of(&format!("[1, 2] {op} [1, 2, 3]")).message,
            format!("shapes do not broadcast in `{name}`")
        );
    }
}

#[test]
fn absurd_results_are_e0410_not_a_crash() {
    // §6.5: internal failures end the run with a diagnostic.
    assert_eq!(error_code("zeros([1e5, 1]) + zeros([1, 1e5])"), "E0410");
    assert_eq!(error_code("gt(zeros([1e5, 1]), zeros([1e5]))"), "E0410");
}

#[test]
fn operators_reject_strings() {
    assert_eq!(error_code("\"a\" + 1"), "E0301");
    assert_eq!(error_code("1 * \"a\""), "E0301");
    assert_eq!(error_code("-\"a\""), "E0301");
    assert_eq!(error_code("[\"a\", \"b\"]"), "E0305");
    assert_eq!(error_code("[tokenizer()]"), "E0301");
}

#[test]
fn unknown_builtins_do_not_evaluate_their_arguments() {
    assert_eq!(error_code("nosuch(iota(\"x\"))"), "E0102");
    assert_eq!(error_code("sqrtt(4)"), "E0102");
    assert_eq!(error_code("undefined_var + 1"), "E0101");
}

// ------------------------------------------------------- coverage of builtins

#[test]
fn every_registered_builtin_has_tests() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lang");
    let mut text = String::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().into_string().unwrap();
        if (name.starts_with("builtins_")
            || name.starts_with("models_")
            || name == "optimizers.rs"
            || name == "gradients.rs")
            && name.ends_with(".rs")
        {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap());
        }
    }
    let missing: Vec<&str> = mlpl_lang::builtins::all()
        .map(|b| b.name)
        .filter(|name| !text.contains(&format!("{name}(")))
        .collect();
    assert!(missing.is_empty(), "builtins without tests: {missing:?}");
}
