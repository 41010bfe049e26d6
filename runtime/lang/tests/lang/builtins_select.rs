//! The primitives of docs/language.md "Builtins beyond the reference":
//! `sin`, `cos`, `erf`, `gelu_erf`, `maximum`, `minimum`, `clamp`, `where`,
//! `slice` and `permute` — values against formulas, names, the checker's
//! shapes and errors (the same codes as the run), and captured training loops.

use crate::common;

use common::{assert_close, error_code, error_of, eval, nums};
use mlpl_lang::check::check_source;

/// The error codes the checker reports for `src`, in order.
fn static_codes(src: &str) -> Vec<&'static str> {
    check_source(src)
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code)
        .collect()
}

/// `src` fails with `code` both in the checker and at run time.
fn both(src: &str, code: &str) {
    assert_eq!(static_codes(src), vec![code], "checker on {src}");
    assert_eq!(error_code(src), code, "run of {src}");
}

/// Points at which the element-wise functions are compared.
const XS: [f64; 7] = [-3.0, -1.25, -0.5, 0.0, 0.3, 1.0, 2.75];

fn vec_text(xs: &[f64]) -> String {
    let items: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn sin_cos_erf_and_exact_gelu_match_their_formulas() {
    let x = vec_text(&XS);
    let sin: Vec<f64> = XS.iter().map(|&v| v.sin()).collect();
    let cos: Vec<f64> = XS.iter().map(|&v| v.cos()).collect();
    assert_close(&format!("sin({x})"), &sin, 1e-7);
    assert_close(&format!("cos({x})"), &cos, 1e-7);
    // erf by its Maclaurin series (converges for these |x| ≤ 3 in f64).
    let erf = |v: f64| {
        let (mut term, mut sum) = (v, v);
        for n in 1..200 {
            term *= -v * v / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    };
    let want: Vec<f64> = XS.iter().map(|&v| erf(v)).collect();
    assert_close(&format!("erf({x})"), &want, 2e-7);
    let gelu: Vec<f64> = XS
        .iter()
        .map(|&v| 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2)))
        .collect();
    assert_close(&format!("gelu_erf({x})"), &gelu, 2e-7);
    // The two GELUs differ (the tanh form is an approximation) but not by much.
    let diff = nums(&format!("abs(gelu({x}) - gelu_erf({x}))"));
    assert!(diff.iter().any(|&d| d > 1e-5), "{diff:?}");
    assert!(diff.iter().all(|&d| d < 1e-3), "{diff:?}");
    // Exact scalars compute in float64; names are kept.
    assert_eq!(eval("sin(0)"), "0");
    assert_eq!(eval("cos(0)"), "1");
    for f in ["sin", "cos", "erf", "gelu_erf"] {
        assert_eq!(eval(&format!("x : [t] = [0, 1]\nlabels({f}(x))")), "t");
    }
}

#[test]
fn maximum_and_minimum_broadcast_with_names_and_propagate_nan() {
    assert_eq!(eval("maximum([1, 5, 3], 2)"), "2 5 3");
    assert_eq!(eval("minimum([1, 5, 3], 2)"), "1 2 2");
    assert_eq!(eval("maximum([[1], [4]], [0, 2, 5])"), "1 2 5\n4 4 5");
    assert_eq!(eval("maximum(2, 7)"), "7");
    assert_eq!(eval("minimum(0 / 0, 1)"), "NaN");
    assert_eq!(eval("maximum([0 / 0, 1], 0)"), "NaN 1");
    assert_eq!(
        eval("x : [b, f] = zeros([2, 3])\nlabels(maximum(x, [1, 2, 3]))"),
        "b,f"
    );
    both(
        "x : [b, f] = zeros([2, 3])\ny = minimum(x, zeros([4]))",
        "E0201",
    );
}

#[test]
fn clamp_limits_and_keeps_names() {
    assert_eq!(eval("clamp([-3, 0.5, 9], -1, 1)"), "-1 0.5 1");
    assert_eq!(eval("clamp(7, 0, 2)"), "2");
    // hi wins when lo > hi (PyTorch's order of the two limits).
    assert_eq!(eval("clamp([0, 5], 3, 1)"), "1 1");
    assert_eq!(eval("x : [t] = [1, 2]\nlabels(clamp(x, 0, 1))"), "t");
    both("y = clamp([1, 2], [0, 1], 2)", "E0205");
}

#[test]
fn where_picks_broadcasts_and_reads_only_the_chosen_side() {
    assert_eq!(eval("where([1, 0, 1], [1, 2, 3], [7, 8, 9])"), "1 8 3");
    assert_eq!(eval("where([[1], [0]], [1, 2], -1)"), "1 2\n-1 -1");
    // NaN counts as true; an infinite unchosen side does not leak.
    assert_eq!(eval("where([0 / 0, 0], 1, 2)"), "1 2");
    let inf = "where([1, 0], [1, 2], -1 / 0)";
    assert_eq!(eval(inf), "1 -inf");
    // A NaN on the side not taken stays out (a·m + b·(1 − m) would not).
    assert_eq!(eval("where([1, 1], [1, 2], 0 / 0)"), "1 2");
    assert_eq!(eval("where(1, 2, 3)"), "2");
    let s = "m : [b, t] = [[1, 0], [0, 1]]\nx : [t] = [5, 6]\n";
    assert_eq!(eval(&format!("{s}labels(where(m, x, 0))")), "b,t");
    assert_eq!(eval(&format!("{s}where(m, x, 0)")), "5 0\n0 6");
    // Each pair broadcasts: a–b, then cond with each.
    both("y = where([1, 0], [1, 2], [1, 2, 3])", "E0201");
    both("y = where([1, 0, 1], [1, 2], 0)", "E0201");
    both(
        "c : [b] = [1, 0]\nx : [t] = [5, 6]\ny = where(c, x, 0)",
        "E0202",
    );
}

#[test]
fn slice_takes_python_ranges_along_a_named_or_numbered_axis() {
    let x = "x : [time, feat] = reshape(iota(12), [4, 3])\n";
    assert_eq!(eval(&format!("{x}slice(x, 0, 1, 3)")), "3 4 5\n6 7 8");
    assert_eq!(
        eval(&format!("{x}slice(x, \"time\", 1, -1)")),
        "3 4 5\n6 7 8"
    );
    assert_eq!(
        eval(&format!("{x}slice(x, -1, 0, 3, 2)")),
        "0 2\n3 5\n6 8\n9 11"
    );
    assert_eq!(
        eval(&format!("{x}slice(x, \"feat\", -2, 3)")),
        "1 2\n4 5\n7 8\n10 11"
    );
    assert_eq!(eval(&format!("{x}shape(slice(x, 0, 2, 2))")), "0 3");
    assert_eq!(eval(&format!("{x}shape(slice(x, 0, 0, 4, 3))")), "2 3");
    assert_eq!(eval(&format!("{x}labels(slice(x, 1, 0, 1))")), "time,feat");
    assert_eq!(eval("slice(iota(10), 0, 7, 10, 2)"), "7 9");
}

#[test]
fn slice_errors_name_the_bound_and_the_axis_size() {
    let x = "x : [time, feat] = zeros([5, 4])\n";
    both(&format!("{x}y = slice(x, \"time\", 1, 7)"), "E0220");
    let d = error_of(&format!("{x}y = slice(x, \"time\", 1, 7)"));
    let text = format!("{} {:?} {:?}", d.message, d.primary, d.notes);
    assert!(text.contains("stop 7") && text.contains("size 5"), "{text}");
    both(&format!("{x}y = slice(x, 0, -6, 2)"), "E0220");
    both(&format!("{x}y = slice(x, 0, 3, 1)"), "E0220");
    both(&format!("{x}y = slice(x, 0, 0, 2, 0)"), "E0401");
    both(&format!("{x}y = slice(x, 0, 0.5, 2)"), "E0401");
    both(&format!("{x}y = slice(x, 2, 0, 1)"), "E0206");
    both(&format!("{x}y = slice(x, \"batch\", 0, 1)"), "E0207");
}

#[test]
fn permute_reorders_axes_with_their_names() {
    let x = "x : [batch, time, feat] = reshape(iota(24), [2, 3, 4])\n";
    assert_eq!(eval(&format!("{x}shape(permute(x, 2, 0, 1))")), "4 2 3");
    assert_eq!(
        eval(&format!("{x}labels(permute(x, \"time\", 0, -1))")),
        "time,batch,feat"
    );
    // Result axis i is the i-th axis given: element [f, b, t] = x[b, t, f].
    let p = nums(&format!("{x}permute(x, \"feat\", \"batch\", \"time\")"));
    let want: Vec<f64> = (0..4)
        .flat_map(|f| (0..2).flat_map(move |b| (0..3).map(move |t| (b * 12 + t * 4 + f) as f64)))
        .collect();
    assert_eq!(p, want);
    assert_eq!(eval(&format!("{x}sum(permute(x, 0, 1, 2) - x)")), "0");
    both(&format!("{x}y = permute(x, \"time\", \"batch\")"), "E0221");
    both(&format!("{x}y = permute(x, 0, 1, 1)"), "E0221");
    both(&format!("{x}y = permute(x, 0, 1, 2, 0)"), "E0221");
    both(&format!("{x}y = permute(x, 0, 1, \"width\")"), "E0207");
}

#[test]
fn the_checker_knows_the_new_shapes_and_names() {
    let src = r#"
x : [batch, time, feat] = zeros([2, 6, 4])
a = slice(x, "time", 1, -1, 2)
b = permute(a, "feat", "batch", "time")
c = where(gt(b, 0), b, clamp(b, -1, 1))
d = maximum(c, sin(c)) + minimum(cos(c), gelu_erf(c))
"#;
    let n = crate::check_support::check_agreement("primitives", src, None);
    assert!(n >= 1, "{n}");
    let q = check_source(src);
    assert!(q.diagnostics.iter().all(|d| !d.is_error()));
}

#[test]
fn concat_joins_along_an_axis_with_names() {
    let x = "x : [time, feat] = reshape(iota(6), [2, 3])\n";
    assert_eq!(
        eval(&format!("{x}concat(x, x * 10, 0)")),
        "0 1 2\n3 4 5\n0 10 20\n30 40 50"
    );
    assert_eq!(
        eval(&format!("{x}concat(x, [[9], [8]], \"feat\")")),
        "0 1 2 9\n3 4 5 8"
    );
    assert_eq!(eval(&format!("{x}labels(concat(x, x, -1))")), "time,feat");
    // rotate_half of rotary embeddings: (−x₂, x₁) of the two halves.
    let r = "v : [t, d] = [[1, 2, 3, 4]]\nconcat(-slice(v, -1, 2, 4), slice(v, -1, 0, 2), -1)";
    assert_eq!(eval(r), "-3 -4 1 2");
    // The vector form is unchanged.
    assert_eq!(eval("concat([1, 2], 3)"), "1 2 3");
    both(&format!("{x}y = concat(x, zeros([2, 2]), 0)"), "E0222");
    both(&format!("{x}y = concat(x, zeros([3]), 0)"), "E0222");
    both(
        &format!("{x}b : [batch, feat] = zeros([1, 3])\ny = concat(x, b, 1)"),
        "E0222",
    );
    both(&format!("{x}y = concat(x, x, 2)"), "E0206");
}
