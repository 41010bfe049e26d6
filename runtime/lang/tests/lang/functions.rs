//! User-defined functions (docs/language.md, "Functions"): calls, scoping,
//! signatures checked at run time and statically, recursion, autograd and
//! training through functions.

use crate::common::{error_of, eval, Session};
use mlpl_diag::Diagnostic;
use mlpl_lang::check::{assignment_values, check_source, Dim};
use mlpl_syntax::parse;

fn label_texts<'a>(src: &'a str, d: &Diagnostic) -> Vec<(&'a str, String)> {
    d.secondary
        .iter()
        .map(|l| (&src[l.span.start..l.span.end], l.message.clone()))
        .collect()
}

fn primary_text<'a>(src: &'a str, d: &Diagnostic) -> &'a str {
    let s = d.primary.as_ref().unwrap().span;
    &src[s.start..s.end]
}

/// The checker's errors and warnings as (code, text of the primary span).
fn static_codes(src: &str) -> Vec<(&'static str, String)> {
    check_source(src)
        .diagnostics
        .iter()
        .map(|d| (d.code, primary_text(src, d).to_string()))
        .collect()
}

// ----- the interpreter ---------------------------------------------------------

#[test]
fn a_call_returns_the_value_of_the_bodys_last_statement() {
    assert_eq!(eval("fn add1(x) { x + 1 }\nadd1(2)"), "3");
    assert_eq!(
        eval("fn f(x, y) {\n  z = x * 2\n  z + y\n}\nf([1, 2], 10)"),
        "12 14"
    );
    // A definition's own value is 0; an empty body gives 0.
    assert_eq!(eval("fn f() { }\nf()"), "0");
    assert_eq!(eval("fn f(x) { x }"), "0");
}

#[test]
fn functions_call_builtins_and_other_functions_even_ones_defined_later() {
    let src = "fn a(x) { b(x) + sum(x) }\nfn b(x) { x * 2 }\na([1, 2])";
    assert_eq!(eval(src), "5 7");
}

#[test]
fn a_body_sees_no_caller_variable() {
    let src = "scale = 2\nfn double(x) {\n  x * scale\n}\ndouble(3)";
    let d = error_of(src);
    assert_eq!(d.code, "E0111");
    assert_eq!(primary_text(src, &d), "scale");
    // The read is the body's on every call: reported there, as statically.
    assert!(!d
        .secondary
        .iter()
        .any(|l| l.message.contains("in this call")));
    // Assignments inside a body stay there.
    let mut s = Session::new(None, None);
    assert_eq!(s.eval("fn f(x) { inner = x + 1; inner }\nf(1)"), "2");
    assert_eq!(s.error_code("inner"), "E0101");
    // A parameter shadows a workspace variable of the same name.
    assert_eq!(s.eval("x = 100\nfn g(x) { x + 1 }\ng(1)"), "2");
    assert_eq!(s.eval("x"), "100");
}

#[test]
fn a_body_cannot_read_step_or_call_by_name_builtins() {
    let src = "W = param[2]\nfn f(w) {\n  grad(sum(w * w), w)\n}\nf(W)";
    let d = error_of(src);
    assert_eq!(d.code, "E0111");
    assert_eq!(primary_text(src, &d), "grad");
    let src = "train 2 { step }\nfn f(x) { x + step }\nf(1)";
    assert_eq!(error_of(src).code, "E0111");
}

#[test]
fn a_function_may_not_take_a_builtins_name() {
    let src = "fn relu(x) { x * 2 }";
    let d = error_of(src);
    assert_eq!(d.code, "E0112");
    assert_eq!(primary_text(src, &d), "relu");
    assert_eq!(static_codes(src), [("E0112", "relu".to_string())]);
}

#[test]
fn wrong_argument_counts_are_e0103_both_ways() {
    let src = "fn f(x, y) { x + y }\nf(1)";
    let d = error_of(src);
    assert_eq!(d.code, "E0103");
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("`f` takes 2 arguments, got 1")),
        "{:?}",
        d.notes
    );
    assert_eq!(static_codes(src), [("E0103", "f(1)".to_string())]);
}

#[test]
fn a_signature_binds_dimension_names_at_the_call() {
    let ok = "fn proj(x : [n, d], w : [d, k]) -> [n, k] { matmul(x, w) }\nshape(proj(ones([4, 3]), ones([3, 2])))";
    assert_eq!(eval(ok), "4 2");
    let src = "fn proj(x : [n, d], w : [d, k]) -> [n, k] { matmul(x, w) }\ny = proj(ones([4, 3]), ones([5, 2]))";
    let d = error_of(src);
    assert_eq!(d.code, "E0219");
    assert!(
        d.message.contains("argument `w`") && d.message.contains("`proj`"),
        "{}",
        d.message
    );
    assert_eq!(primary_text(src, &d), "ones([5, 2])");
    assert!(d
        .primary
        .as_ref()
        .unwrap()
        .message
        .contains("axis 0 (`d`) has size 5, and `d` is 3"));
    assert!(label_texts(src, &d).contains(&("w : [d, k]", "parameter `w` declared here".into())));
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("`d` was bound to 3 by `x` (axis 1)")),
        "{:?}",
        d.notes
    );
}

#[test]
fn ranks_fixed_sizes_and_kinds_are_checked() {
    let f = "fn f(x : [n, 3]) { x }\n";
    assert_eq!(error_of(&format!("{f}f(ones([3]))")).code, "E0219");
    assert_eq!(error_of(&format!("{f}f(ones([2, 4]))")).code, "E0219");
    assert_eq!(error_of(&format!("{f}f(\"text\")")).code, "E0219");
    assert_eq!(eval(&format!("{f}shape(f(ones([2, 3])))")), "2 3");
    // `_` accepts any size; an unannotated parameter anything.
    assert_eq!(
        eval("fn g(x : [_, _], y) { y }\ng(ones([5, 7]), \"s\")"),
        "s"
    );
}

#[test]
fn arithmetic_dimensions_are_checked_once_their_names_are_bound() {
    let f = "fn f(x : [2 * d], y : [d], z : [d / h, h]) { sum(x) + sum(y) + sum(z) }\n";
    assert_eq!(
        eval(&format!("{f}f(ones([6]), ones([3]), ones([1, 3]))")),
        "12"
    );
    let d = error_of(&format!("{f}f(ones([5]), ones([3]), ones([1, 3]))"));
    assert_eq!(d.code, "E0219");
    assert!(
        d.primary.as_ref().unwrap().message.contains("`2 * d` = 6"),
        "{:?}",
        d.primary
    );
    assert_eq!(
        error_of(&format!("{f}f(ones([6]), ones([3]), ones([2, 3]))")).code,
        "E0219"
    );
}

#[test]
fn axis_names_unify_like_sizes() {
    let f = "fn mix(x : [n, d], w : [d, d]) { matmul(x, w) }\n";
    let ok = format!("{f}X : [batch, feat] = ones([2, 3])\nW = ones([3, 3])\nlabels(mix(X, W))");
    assert_eq!(eval(&ok), "batch,");
    let src =
        format!("{f}X : [batch, feat] = ones([2, 3])\nW : [hidden, out] = ones([3, 3])\nmix(X, W)");
    let d = error_of(&src);
    assert_eq!(d.code, "E0219");
    assert!(
        d.primary
            .as_ref()
            .unwrap()
            .message
            .contains("named `hidden`"),
        "{:?}",
        d.primary
    );
    assert_eq!(static_codes(&src), [("E0219", "W".to_string())]);
}

#[test]
fn the_declared_result_is_checked_at_run_time() {
    let src = "fn f(x : [n, d]) -> [d, n] { x }\nf(ones([2, 3]))";
    let d = error_of(src);
    assert_eq!(d.code, "E0219");
    assert!(d.message.contains("result of `f`"));
    assert_eq!(primary_text(src, &d), "x");
    assert!(label_texts(src, &d).iter().any(|(t, _)| *t == "[d, n]"));
    assert!(label_texts(src, &d)
        .iter()
        .any(|(t, m)| *t == "f(ones([2, 3]))" && m.contains("in this call")));
}

/// Runs `src` on a thread with a 2 MiB stack (Rust's default for spawned
/// threads), so the depth limit is shown to stop well before the stack ends.
fn on_small_stack(src: &'static str) -> Diagnostic {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || error_of(src))
        .unwrap()
        .join()
        .expect("no stack overflow")
}

#[test]
fn recursion_is_stopped_by_the_depth_limit_not_the_stack() {
    let d = on_small_stack("fn forever(x) {\n  forever(x + 1)\n}\nforever(0)");
    assert_eq!(d.code, "E0412");
    assert!(d.message.contains("64"), "{}", d.message);
    // Deep expressions in each frame too.
    let d = on_small_stack(
        "fn f(x) { y = relu(tanh(sum(softmax(x + [1, 2] * 3, 0)))); f(((((y + 1))))) }\nf([1, 2])",
    );
    assert_eq!(d.code, "E0412");
    // Mutual recursion counts every call.
    let d = on_small_stack("fn a(x) { b(x) }\nfn b(x) { a(x) }\na(1)");
    assert_eq!(d.code, "E0412");
    // Bounded recursion under the limit works.
    assert_eq!(
        eval("fn a(x) { x + 1 }\nfn b(x) { a(a(x)) }\nfn c(x) { b(b(x)) }\nc(0)"),
        "4"
    );
}

#[test]
fn functions_defined_in_one_cell_are_callable_in_later_cells() {
    let mut s = Session::new(None, None);
    s.eval("fn sq(x) { x * x }");
    assert_eq!(s.eval("sq(3)"), "9");
    // Redefining replaces it.
    s.eval("fn sq(x) { x * x * x }");
    assert_eq!(s.eval("sq(2)"), "8");
}

#[test]
fn a_model_built_and_applied_inside_a_function() {
    let src = "fn make(d) { chain(linear(d, 4, 0), relu_layer()) }\nfn run(m, x : [n, d]) -> [n, 4] { apply(m, x) }\nm = make(3)\nshape(run(m, ones([2, 3])))";
    assert_eq!(eval(src), "2 4");
}

const INLINE: &str = "X = reshape(iota(12), [4, 3]) / 10
Y = [1, 0, 1, 0]
W = param[3, 2]
W = randn(3, [3, 2]) * 0.5
train 8 {
  adam(mean(tanh(matmul(X, W)) * tanh(matmul(X, W))), [W], 0.05, 0.9, 0.999, 1e-8)
  loss_metric = mean(tanh(matmul(X, W)) * tanh(matmul(X, W)))
}
G = grad(mean(tanh(matmul(X, W)) * tanh(matmul(X, W))), W)";

const WITH_FUNCTIONS: &str = "fn hidden(x : [n, d], w : [d, h]) -> [n, h] { tanh(matmul(x, w)) }
fn square(z : [n, h]) -> [n, h] { z * z }
fn loss(x, w, y : [n]) { mean(square(hidden(x, w))) }
X = reshape(iota(12), [4, 3]) / 10
Y = [1, 0, 1, 0]
W = param[3, 2]
W = randn(3, [3, 2]) * 0.5
train 8 {
  adam(loss(X, W, Y), [W], 0.05, 0.9, 0.999, 1e-8)
  loss_metric = loss(X, W, Y)
}
G = grad(loss(X, W, Y), W)";

#[test]
fn a_loss_through_functions_trains_exactly_like_the_inline_loss() {
    let mut a = Session::new(None, None);
    a.eval(INLINE);
    let mut b = Session::new(None, None);
    b.eval(WITH_FUNCTIONS);
    for name in ["last_losses", "W", "G"] {
        let bits = |s: &Session| {
            let v = s.it.ws.get(name).unwrap().as_array().unwrap().tensor();
            v.host().iter().map(|x| x.to_bits()).collect::<Vec<u32>>()
        };
        assert_eq!(bits(&a), bits(&b), "{name}");
    }
    // The loss went down.
    let l = b.eval("last_losses");
    let first: f64 = l.split_whitespace().next().unwrap().parse().unwrap();
    let last: f64 = l.split_whitespace().last().unwrap().parse().unwrap();
    assert!(last < first, "{l}");
    assert!(
        check_source(WITH_FUNCTIONS).diagnostics.is_empty(),
        "{:?}",
        check_source(WITH_FUNCTIONS).diagnostics
    );
}

#[test]
fn a_train_loop_calling_functions_is_still_captured() {
    let mut s = Session::new(None, None);
    s.eval(INLINE);
    assert_eq!(s.it.loop_stats[0].eager_reason, None, "inline");
    let mut s = Session::new(None, None);
    s.eval(WITH_FUNCTIONS);
    let stats = &s.it.loop_stats;
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].eager_reason, None);
    assert!(stats[0].replayed > 0, "{:?}", stats[0]);
    // An effectful builtin inside a called function keeps the loop interpreted.
    let mut s = Session::new(None, None);
    s.eval("fn noisy(w) { t = load_preloaded(\"tiny_corpus\"); sum(w * w) }\nW = param[2]\ntrain 4 { adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8); noisy(W) }");
    let reason = s.it.loop_stats[0].eager_reason.clone().unwrap_or_default();
    assert!(reason.contains("in function `noisy`"), "{reason}");
}

// ----- the checker ---------------------------------------------------------------

#[test]
fn a_mismatch_is_reported_at_the_call_with_the_declaration_related() {
    let src = "fn attend(x : [batch, T, d], w : [d, d]) -> [batch, T, d] {\n  matmul(x, w)\n}\nX = ones([2, 5, 4])\nW = ones([3, 3])\ny = attend(X, W)\n";
    let c = check_source(src);
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let d = &c.diagnostics[0];
    assert_eq!(d.code, "E0219");
    assert_eq!(primary_text(src, d), "W");
    assert!(label_texts(src, d).contains(&("w : [d, d]", "parameter `w` declared here".into())));
    // The runtime reports the same at the same place.
    let r = error_of(src);
    assert_eq!((r.code, r.message.clone()), (d.code, d.message.clone()));
    assert_eq!(r.primary, d.primary);
}

#[test]
fn a_clean_program_with_functions_has_no_diagnostics_and_known_shapes() {
    let src = "fn proj(x : [n, d], w : [d, k]) -> [n, k] { matmul(x, w) }\nX = ones([4, 3])\nW = ones([3, 2])\ny = proj(X, W)\nz = proj(y, ones([2, 7]))\n";
    assert!(
        check_source(src).diagnostics.is_empty(),
        "{:?}",
        check_source(src).diagnostics
    );
    let vals = assignment_values(&parse(src).program);
    let z = vals.iter().find(|v| v.name == "z").unwrap();
    let mlpl_lang::check::AbsValue::Array(a) = &z.value else {
        panic!("{:?}", z.value)
    };
    assert_eq!(a.dims, Some(vec![Dim::Known(4), Dim::Known(7)]));
}

#[test]
fn a_body_error_that_only_one_call_triggers_is_reported_in_the_body_with_the_call() {
    let src = "fn plus(x, y) {\n  x + y\n}\na = plus(ones([2]), ones([2]))\nb = plus(ones([2]), ones([3]))\n";
    let c = check_source(src);
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let d = &c.diagnostics[0];
    assert_eq!(d.code, "E0201");
    eprintln!("{d:?}");
    assert_eq!(primary_text(src, d), "y");
    assert!(
        label_texts(src, d).iter().any(
            |(t, m)| *t == "plus(ones([2]), ones([3]))" && m.contains("in this call of `plus`")
        ),
        "{:?}",
        label_texts(src, d)
    );
}

#[test]
fn a_body_is_checked_once_with_symbolic_dimensions() {
    // Wrong for every call: reported without any call.
    let src = "fn f(x : [n, 2]) {\n  x + ones([3])\n}\n";
    assert_eq!(static_codes(src), [("E0201", "ones([3])".to_string())]);
    // A rank that disagrees with the declared result.
    let src = "fn f(x : [n, d]) -> [n] {\n  x * 2\n}\n";
    assert_eq!(static_codes(src), [("E0219", "x * 2".to_string())]);
    // Symbols never mismatch on their own: no false alarm.
    assert!(static_codes("fn f(x : [n, d], y : [d, n]) -> [n, n] { matmul(x, y) }").is_empty());
}

#[test]
fn unknown_stays_unknown() {
    let src = "fn inner(x : [n, 3]) { x }\nfn outer(a) { inner(a) }\nb = outer(ones([2, 3]))\n";
    assert!(
        check_source(src).diagnostics.is_empty(),
        "{:?}",
        check_source(src).diagnostics
    );
    // A file of unknown shape passes any signature statically.
    assert!(static_codes("fn f(x : [n, 3]) { x }\nfn g(y) { f(y) }").is_empty());
}

#[test]
fn the_checker_reports_hidden_reads_and_keeps_functions_scopes_apart() {
    let src = "scale = 2\nfn double(x) {\n  x * scale\n}\n";
    assert_eq!(static_codes(src), [("E0111", "scale".to_string())]);
    // Locals of a body are not variables of the program.
    let src = "fn f(x) { inner = x; inner }\ny = inner\n";
    assert_eq!(static_codes(src), [("E0101", "inner".to_string())]);
    // A function defined later in the file is not an unknown function.
    assert!(static_codes("fn a(x) { b(x) }\nfn b(x) { x }\na(1)").is_empty());
    // Recursion does not loop the checker.
    assert!(static_codes("fn f(x) { f(x) }\nf(1)").is_empty());
}

#[test]
fn static_and_runtime_values_agree_through_calls() {
    let src = "fn proj(x : [n, d], w : [d, k]) -> [n, k] { matmul(x, w) }\nfn twice(v) { v * 2 }\nX : [batch, feat] = ones([4, 3])\nW = ones([3, 2])\ny = proj(X, W)\nz = twice(y)\nt = twice(3)\n";
    let known = crate::check_support::check_agreement("functions", src, None);
    assert!(known >= 4, "{known}");
}

#[test]
fn the_functions_example_checks_clean_and_trains() {
    let src = include_str!("../../../../examples/functions_block.mlpl");
    let c = check_source(src);
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    let mut s = Session::new(None, None);
    let shown = s.eval(src);
    eprintln!("example value: {shown}");
    assert_eq!(s.it.loop_stats[0].eager_reason, None, "captured");
    assert!(s.it.loop_stats[0].replayed > 0);
    let first: f64 = s.eval("first_loss").parse().unwrap();
    let last: f64 = s.eval("loss_metric").parse().unwrap();
    assert!(last < first / 2.0, "{first} -> {last}");
}

// ----- a transformer block: DSL layers vs functions ---------------------------

/// The data and the loss both programs train on.
const BLOCK_DATA: &str = "X = randn(1, [8, 16]) * 0.5\nY = tanh(X) * 0.5\n";

/// A pre-norm transformer block built from DSL layers.
const BLOCK_DSL: &str = "m = chain(residual(chain(rms_norm(16), causal_attention(16, 2, 7))), residual(chain(rms_norm(16), linear(16, 64, 8), gelu_layer(), linear(64, 16, 9))))
train 12 {
  adam(mean((apply(m, X) - Y) * (apply(m, X) - Y)), m, 0.01, 0.9, 0.999, 1e-8)
  loss_metric = mean((apply(m, X) - Y) * (apply(m, X) - Y))
}
last_losses";

/// The same block written as functions: the residual structure and the MLP
/// from primitives (`matmul`, `+`, `gelu` on the linear layers' own weight and
/// bias), the norms and the attention applied as layers. The layers are built
/// with the same seeds, so they start from the same values.
const BLOCK_FNS: &str = "fn attention_part(x : [T, d], norm, attn) -> [T, d] {
  x + apply(attn, apply(norm, x))
}
fn mlp(x : [T, d], w1 : [d, 4 * d], b1 : [1, 4 * d], w2 : [4 * d, d], b2 : [1, d]) -> [T, d] {
  matmul(gelu(matmul(x, w1) + b1), w2) + b2
}
fn block(x : [T, d], n1, attn, n2, w1, b1, w2, b2) -> [T, d] {
  h = attention_part(x, n1, attn)
  h + mlp(apply(n2, h), w1, b1, w2, b2)
}
fn mse(a : [T, d], b : [T, d]) {
  mean((a - b) * (a - b))
}
n1 = rms_norm(16)
attn = causal_attention(16, 2, 7)
n2 = rms_norm(16)
up = linear(16, 64, 8)
down = linear(64, 16, 9)
params = chain(n1, attn, n2, up, down)
train 12 {
  adam(mse(block(X, n1, attn, n2, __linear_W_1, __linear_b_1, __linear_W_2, __linear_b_2), Y), params, 0.01, 0.9, 0.999, 1e-8)
  loss_metric = mse(block(X, n1, attn, n2, __linear_W_1, __linear_b_1, __linear_W_2, __linear_b_2), Y)
}
last_losses";

#[test]
fn a_transformer_block_written_as_functions_trains_bit_identically_to_dsl_layers_captured() {
    let run = |body: &str| {
        let src = format!("{BLOCK_DATA}{body}");
        let c = check_source(&src);
        assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
        let mut s = Session::new(None, None);
        let printed = s.eval(&src);
        let stats = &s.it.loop_stats;
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].eager_reason, None, "captured");
        assert!(stats[0].replayed > 0, "{:?}", stats[0]);
        let losses =
            s.it.ws
                .get("last_losses")
                .unwrap()
                .as_array()
                .unwrap()
                .tensor();
        let bits: Vec<u32> = losses.host().iter().map(|x| x.to_bits()).collect();
        (printed, bits)
    };
    let (dsl_printed, dsl_bits) = run(BLOCK_DSL);
    let (fns_printed, fns_bits) = run(BLOCK_FNS);
    assert_eq!(dsl_bits.len(), 12);
    assert_eq!(fns_printed, dsl_printed);
    assert_eq!(fns_bits, dsl_bits);
    // It trained.
    assert!(f32::from_bits(dsl_bits[11]) < f32::from_bits(dsl_bits[0]) / 2.0);
}

#[test]
fn an_unknown_function_suggests_a_defined_one_statically_and_at_run_time() {
    let src = "fn project(x) { x }\ny = porject(1)";
    let c = check_source(src);
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let d = &c.diagnostics[0];
    assert_eq!(d.code, "E0102");
    assert_eq!(
        d.help.as_deref(),
        Some("a function with a similar name is defined: `project`")
    );
    assert!(
        d.notes.iter().any(|n| n.contains("defined with `fn")),
        "{:?}",
        d.notes
    );
    let r = error_of(src);
    assert_eq!((r.code, &r.help, &r.notes), (d.code, &d.help, &d.notes));
    // A builtin closer than any function is suggested instead.
    let d = &check_source("fn project(x) { x }\ny = sofmax(1)").diagnostics[0];
    assert_eq!(
        d.help.as_deref(),
        Some("a builtin with a similar name exists: `softmax`")
    );
}

/// An error inside a function defined by an earlier cell points at the call in
/// the running cell (whose text the spans index), and names the line, column
/// and text of the body where it happened; nested calls of earlier functions
/// are followed to the outermost call.
#[test]
fn an_error_in_a_function_from_an_earlier_cell_points_at_the_call_and_names_the_body_line() {
    let mut s = Session::new(None, None);
    let defs = "# some text first, so offsets differ from the later cell's\n\
                fn proj(x, w) {\n  h = x * 2\n  matmul(h, w)\n}\n\
                fn outer(x) {\n  proj(x, ones([5, 2]))\n}\n";
    s.eval(defs);
    let later = "a = ones([2, 3])\nouter(a)";
    let d = match s.run(later).result {
        Err(d) => d,
        Ok(_) => panic!("the call should fail"),
    };
    assert_eq!(d.code, "E0203", "{d:?}");
    assert_eq!(primary_text(later, &d), "outer(a)");
    assert!(d.secondary.is_empty(), "{d:?}");
    let proj = d
        .notes
        .iter()
        .find(|n| n.starts_with("in `proj`"))
        .unwrap_or_else(|| panic!("a note on proj's body: {:?}", d.notes));
    assert!(proj.contains("line 3, column "), "{proj}");
    assert!(proj.ends_with("  matmul(h, w)"), "{proj}");
    let outer = d
        .notes
        .iter()
        .find(|n| n.starts_with("in `outer`"))
        .expect("a note on outer");
    assert!(
        outer.contains("line 2, column 3") && outer.ends_with("proj(x, ones([5, 2]))"),
        "{outer}"
    );
    // Within the defining cell itself, spans stay the body's own.
    let same = format!("{defs}outer(ones([2, 3]))");
    let d = match Session::new(None, None).run(&same).result {
        Err(d) => d,
        Ok(_) => panic!("the call should fail"),
    };
    let at = d.primary.as_ref().expect("a place").span;
    let body = same.find("matmul(h, w)").unwrap();
    assert!(
        at.start >= body && at.end <= body + "matmul(h, w)".len(),
        "{d:?}"
    );
}
