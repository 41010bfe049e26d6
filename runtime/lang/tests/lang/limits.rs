//! Sizes a program asks for are the program's, never the tools': the checker
//! reasons about them without allocating, and the interpreter refuses with E0410
//! before allocating (docs/limits.md).

use crate::common::{error_of, run_in};
use mlpl_lang::check::check_source;
use mlpl_lang::eval::ops;

/// Programs whose sizes once made the checker allocate them (an abort or a
/// capacity-overflow panic in `mlpl check` and the language server).
const HUGE: &[&str] = &[
    "p = param[1e7, 1e7]",
    "p = tensor[1e7, 1e7]\nq = p + 1",
    "p = param[8467440737095516165]",
    "p = param[1e30, 1e30]\ns = sum(p, 0)",
    "s = sum(zeros([1e20, 0]), 1)",
    "s = mean(zeros([0, 1e20]), 0)",
    "s = sum(zeros([1e19, 1e19, 0]), 2)",
    "x = reshape(iota(4), zeros([1e9]))",
    "x = zeros(zeros([1e9]))",
    "x = reshape(iota(4), [1e10, 1e10, 0])",
    "for r in zeros([0, 1e19]) { y = r }",
    "x = transpose(zeros([1e19, 0]))",
];

#[test]
fn the_checker_never_allocates_by_the_programs_sizes() {
    for src in HUGE {
        let r = std::panic::catch_unwind(|| check_source(src));
        assert!(r.is_ok(), "the checker panicked on {src:?}");
    }
}

#[test]
fn the_checker_keeps_the_shape_it_can_say() {
    let c = check_source("p = param[1e7, 1e7]\nq = p + 1");
    assert!(
        c.diagnostics.iter().all(|d| !d.is_error()),
        "{:?}",
        c.diagnostics
    );
    let c = check_source("p = param[2, 3]\nq = p + [[1, 2, 3]]\nr = p + [1, 2]");
    assert!(
        c.diagnostics.iter().any(|d| d.code == "E0201"),
        "a small parameter still has its shape: {:?}",
        c.diagnostics
    );
}

#[test]
fn param_and_tensor_refuse_absurd_sizes_with_e0410() {
    for src in [
        "w = param[4096, 4096, 4096, 4096]",
        "w = tensor[8467440737095516165]",
        "w = param[1e7, 1e7]",
    ] {
        let d = error_of(src);
        assert_eq!(d.code, "E0410", "{src}: {} {:?}", d.message, d.primary);
        assert_eq!(d.message, "out of host memory");
        let label = &d.primary.as_ref().unwrap().message;
        assert!(label.contains("elements"), "{label}");
    }
    // Small ones still work.
    assert!(run_in("w = param[2, 3]\nsum(w)", None).result.is_ok());
}

#[test]
fn concat_doubling_ends_with_e0410() {
    // Past the 1 MiB budget of this thread at 2^18 elements, long before 2^40.
    ops::set_memory_budget(Some(1 << 20));
    let d = error_of("x = [1]\nrepeat 40 { x = concat(x, x) }");
    ops::set_memory_budget(None);
    assert_eq!(d.code, "E0410", "{} {:?}", d.message, d.primary);
    assert!(d.primary.as_ref().unwrap().message.contains("concat"));
}

#[test]
fn a_thread_budget_refuses_large_results() {
    // The budget is per thread: this test's thread only.
    ops::set_memory_budget(Some(1 << 20));
    let small = run_in("x = zeros([100, 100])\ny = x + 1\nsum(y)", None).result;
    let big = run_in("x = zeros([1000, 1000])", None).result;
    let op = run_in("y = matmul(ones([600, 300]), ones([300, 600]))", None).result;
    let ctor = run_in("w = param[1000, 1000]", None).result;
    ops::set_memory_budget(None);
    assert!(small.is_ok(), "{small:?}");
    for r in [big, op, ctor] {
        let d = r.unwrap_err();
        assert_eq!(d.code, "E0410");
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("budget") && n.contains("1048576")),
            "{:?}",
            d.notes
        );
    }
    assert!(run_in("x = zeros([1000, 1000])", None).result.is_ok());
}

#[test]
fn reductions_of_empty_arrays_with_huge_axes_are_refused() {
    let r = run_in("s = sum(zeros([1e20, 0]), 1)", None).result;
    assert_eq!(r.unwrap_err().code, "E0410");
}

#[test]
fn deep_models_are_refused_at_the_depth_limit_with_e0411() {
    let d = error_of("m = linear(4, 4, 0)\nrepeat 100000 { m = residual(m) }");
    assert_eq!(d.code, "E0411", "{} {:?}", d.message, d.primary);
    assert_eq!(d.message, "model too deep or too large");
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains(&mlpl_lang::nn::MAX_MODEL_DEPTH.to_string())),
        "the limit is named: {:?}",
        d.notes
    );
    let d = error_of("m = linear(4, 4, 0)\nrepeat 100000 { m = chain(m, relu_layer()) }");
    assert_eq!(d.code, "E0411");
}

#[test]
fn a_model_at_the_depth_limit_applies_displays_and_drops() {
    // One level below the limit (the innermost linear layer is a level too);
    // this runs on the test harness's thread (2 MiB of stack, unoptimised).
    let depth = mlpl_lang::nn::MAX_MODEL_DEPTH - 1;
    let src = format!(
        "m = linear(2, 2, 0)\nrepeat {depth} {{ m = residual(m) }}\ny = apply(m, ones([1, 2]))\nshape(y)"
    );
    let o = run_in(&src, None);
    match o.result {
        Ok(Some(v)) => assert_eq!(v.display(), "1 2"),
        other => panic!("{other:?}"),
    }
    let c = check_source(&src);
    assert!(
        c.diagnostics.iter().all(|d| !d.is_error()),
        "{:?}",
        c.diagnostics
    );
}

#[test]
fn shared_sub_models_are_counted_per_use_and_refused_past_the_layer_limit() {
    let d = error_of("m = linear(2, 2, 0)\nrepeat 40 { m = chain(m, m) }");
    assert_eq!(d.code, "E0411");
    assert!(
        d.primary.as_ref().unwrap().message.contains("layers"),
        "{:?}",
        d.primary
    );
    // Below the limit sharing is fine: 2^10 applications of one linear layer.
    let o = run_in(
        "m = linear(2, 2, 0)\nrepeat 10 { m = chain(m, m) }\nshape(apply(m, ones([3, 2])))",
        None,
    );
    assert_eq!(o.result.unwrap().unwrap().display(), "3 2");
    // The checker follows the same rule and stays fast on the same program.
    let c = check_source(
        "m = linear(2, 2, 0)\nrepeat 40 { m = chain(m, m) }\ny = apply(m, ones([3, 2]))",
    );
    assert!(
        c.diagnostics.iter().all(|d| d.code != "E0212"),
        "{:?}",
        c.diagnostics
    );
}

#[test]
fn extent_visits_shared_nodes_once() {
    use mlpl_lang::nn::{Extent, Layer};
    use std::sync::Arc;
    let mut m = Arc::new(Layer::Activation(mlpl_lang::nn::Activation::Relu));
    for _ in 0..200 {
        m = Arc::new(Layer::Chain(vec![m.clone(), m]));
    }
    // 2^200 applications, computed over 201 distinct nodes; saturating.
    assert_eq!(
        m.extent(),
        Extent {
            depth: 201,
            layers: usize::MAX
        }
    );
}

#[test]
fn a_residual_of_an_embedding_is_no_error_until_applied() {
    let c = check_source("m = residual(embed(4, 2, 1))");
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    assert!(run_in("m = residual(embed(4, 2, 1))", None).result.is_ok());
}

#[test]
fn a_loss_naming_generated_parameters_is_no_w0103() {
    for src in [
        "m = linear(2, 1, 0)\nX = ones([4, 2])\ntrain 3 { adam(sum(matmul(X, __linear_W_0)), m, 0.1, 0.9, 0.999, 1e-8) }",
        "m = linear(2, 1, 0)\nX = ones([4, 2])\ntrain 3 { adam(sum(matmul(X, __linear_W_0) + __linear_b_0), [__linear_W_0, __linear_b_0], 0.1, 0.9, 0.999, 1e-8) }",
        "m = chain(linear(2, 3, 0), relu_layer(), linear(3, 1, 1))\nX = ones([4, 2])\ntrain 3 { adam(sum(apply(m, X)) + sum(__linear_W_0 * __linear_W_0), m, 0.1, 0.9, 0.999, 1e-8) }",
        "m = linear(2, 1, 0)\nX = ones([4, 2])\nl = sum(matmul(X, __linear_W_0))\ntrain 3 { adam(sum(matmul(X, __linear_W_0)), __linear_W_0, 0.1, 0.9, 0.999, 1e-8) }",
    ] {
        let c = check_source(src);
        let codes: Vec<&str> = c.diagnostics.iter().map(|d| d.code).collect();
        assert!(!codes.contains(&"W0103") && !codes.iter().any(|c| c.starts_with('E')), "{src}: {codes:?}");
        let o = run_in(src, None);
        assert!(o.result.is_ok(), "{src}: {:?}", o.result);
        let w: Vec<&str> = o.warnings.iter().map(|d| d.code).collect();
        assert!(!w.contains(&"W0103"), "{src}: {w:?}");
    }
}

#[test]
fn the_checker_refuses_a_model_a_repeat_loop_grows_past_the_limits() {
    for (src, what) in [
        (
            "m = linear(4, 4, 0)\nrepeat 100000 { m = residual(m) }",
            "levels deep",
        ),
        (
            "m = linear(2, 2, 0)\nrepeat 40 { m = chain(m, m) }",
            "layers",
        ),
        (
            "m = linear(4, 4, 0)\nrepeat 1000 { m = chain(m, relu_layer()) }",
            "levels deep",
        ),
    ] {
        let c = check_source(src);
        let e: Vec<_> = c.diagnostics.iter().filter(|d| d.code == "E0411").collect();
        assert_eq!(e.len(), 1, "{src}: {:?}", c.diagnostics);
        let label = &e[0].primary.as_ref().unwrap().message;
        assert!(label.contains(what), "{src}: {label}");
        // The same program ends with the same error at run time.
        assert_eq!(error_of(src).code, "E0411", "{src}");
    }
    // Within the limits, and with an unknown count, nothing is reported.
    for src in [
        "m = linear(4, 4, 0)\nrepeat 100 { m = residual(m) }",
        "m = linear(2, 2, 0)\nrepeat 19 { m = chain(m, m) }",
        "m = linear(4, 4, 0)\nn = sum(iota(3))\nrepeat n { m = residual(m) }",
    ] {
        let c = check_source(src);
        assert!(
            c.diagnostics.iter().all(|d| d.code != "E0411"),
            "{src}: {:?}",
            c.diagnostics
        );
    }
}

#[test]
fn a_loss_through_a_model_updating_its_generated_parameters_is_no_w0103() {
    let src = "m = linear(2, 1, 0)\nX = ones([4, 2])\ntrain 3 { adam(mean(apply(m, X)), [__linear_W_0, __linear_b_0], 0.1, 0.9, 0.999, 1e-8) }";
    let c = check_source(src);
    assert!(
        c.diagnostics.iter().all(|d| d.code != "W0103"),
        "{:?}",
        c.diagnostics
    );
    let o = run_in(src, None);
    assert!(o.result.is_ok(), "{:?}", o.result);
    assert!(
        o.warnings.iter().all(|d| d.code != "W0103"),
        "{:?}",
        o.warnings
    );
    // A loss that reads neither the parameters nor any model still gets it.
    let c = check_source("W = param[3]\nx = zeros([3])\nadam(sum(x), W, 0.1, 0.9, 0.999, 1e-8)");
    assert!(
        c.diagnostics.iter().any(|d| d.code == "W0103"),
        "{:?}",
        c.diagnostics
    );
}

#[test]
fn a_session_budget_counts_every_live_value() {
    use mlpl_lang::eval::{Interp, Workspace};
    ops::set_session_budget(Some(ops::SessionBudget {
        limit: 1_000_000,
        raise: "`--more`".into(),
    }));
    let mut it = Interp::new(Workspace::new());
    let mut run = |src: &str| it.run(&mlpl_syntax::parse(src).program);
    // Each result fits; together they would not.
    assert!(run("a = zeros([100000])\nb = a\nc = zeros([100000])").is_ok());
    let d = run("d = zeros([100000])").unwrap_err();
    assert_eq!(d.code, "E0410");
    let note = d.notes.join("\n");
    assert!(
        note.contains("400000 bytes asked; the session holds 800000 bytes"),
        "{note}"
    );
    assert!(
        note.contains("`a` 400000") && note.contains("`c` 400000"),
        "{note}"
    );
    assert!(
        d.help.as_deref().unwrap_or("").contains("`--more`"),
        "{:?}",
        d.help
    );
    // Inside one cell, a loop's results count as they are bound.
    let d = run(
        "a = 0\nb = 0\nrepeat 3 { e = zeros([50000]) + 1\nf = concat(e, e) }\nx = zeros([150000])",
    )
    .unwrap_err();
    assert_eq!(d.code, "E0410", "{} {:?}", d.message, d.notes);
    // The note names what the loop bound, not only what the cell began with.
    assert!(d.notes.join("\n").contains("`f` 400000"), "{:?}", d.notes);
    // Freeing a value makes room again.
    assert!(run("c = 0\nf = 0\nd = zeros([100000])").is_ok());
    assert_eq!(ops::live_memory(&it.ws).bytes, 400_000 + 200_000);
    ops::set_session_budget(None);
}

#[test]
fn a_function_calls_locals_count_against_the_session_budget_until_it_returns() {
    use mlpl_lang::eval::{Interp, Workspace};
    ops::set_session_budget(Some(ops::SessionBudget {
        limit: 1_000_000,
        raise: "`--more`".into(),
    }));
    let mut it = Interp::new(Workspace::new());
    let mut run = |src: &str| it.run(&mlpl_syntax::parse(src).program);
    // The parameter (400,000 bytes) and `a` (600,000) fit; `b` does not.
    let d = run(
        "fn f(x) {\n a = zeros([150000])\n b = zeros([150000])\n sum(a) + sum(b) + sum(x)\n}\ny = f(zeros([100000]))",
    )
    .unwrap_err();
    assert_eq!(d.code, "E0410", "{} {:?}", d.message, d.notes);
    let note = d.notes.join("\n");
    assert!(note.contains("the session holds 1000000 bytes"), "{note}");
    assert!(
        note.contains("`a` (local to `f`) 600000") && note.contains("`x` (local to `f`) 400000"),
        "{note}"
    );
    // A call's locals are given back when it returns: a loop of calls, each
    // holding 800,000 bytes while it runs, fits.
    assert!(run(
        "fn g(x) {\n a = zeros([100000])\n sum(a) + sum(x)\n}\nrepeat 3 { y = g(zeros([100000])) }"
    )
    .is_ok());
    assert!(
        ops::live_memory(&it.ws).bytes <= 4,
        "only the scalar `y` is left"
    );
    ops::set_session_budget(None);
}

/// Runs `f` on a thread with a small stack (1 MiB, unoptimised): walks over a
/// long chain must not recurse once per operator.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .expect("no stack overflow");
}

#[test]
fn a_flat_chain_of_ten_thousand_terms_parses_checks_runs_traces_and_differentiates() {
    on_small_stack(|| {
        let n = 10_000;
        // Every level of operator, with names, a tracked parameter and its gradient.
        let sum = vec!["1"; n].join(" + ");
        let src = format!(
            "x = {sum}\nw = param[3]\ng = grad(sum({}), w)\ny = {} - 1\nx + sum(g) + y",
            vec!["w"; n].join(" + "),
            vec!["1"; n].join(" * 2 / 2 * "),
        );
        let c = check_source(&src);
        assert!(c.diagnostics.is_empty(), "{:?}", &c.diagnostics);
        let o = run_in(&src, None);
        match o.result {
            // x = 10000, sum(g) = 3 × 10000, y = 1 - 1.
            Ok(Some(v)) => assert_eq!(v.display(), "40000"),
            other => panic!("{other:?}"),
        }
        // The trace has one node per operator, as nested binary nodes would.
        let mut it = mlpl_lang::eval::Interp::new(mlpl_lang::eval::Workspace::new());
        let src = format!("{sum}\n");
        it.trace = Some(mlpl_lang::eval::Trace::new(&src));
        it.run(&mlpl_syntax::parse(&src).program).unwrap();
        let t = it.trace.take().unwrap();
        let adds: Vec<_> = t.events.iter().filter(|e| e.op == "add").collect();
        assert_eq!(adds.len(), n - 1);
        // Each add covers the chain so far and ends at its own right operand.
        assert_eq!((adds[0].span.start, adds[0].span.end), (0, 5));
        assert_eq!(adds[n - 2].span.end, src.len() - 1);
        assert_eq!(t.events.len(), n + n - 1);
    });
}

#[test]
fn a_shape_error_in_a_long_chain_points_at_the_link() {
    let src = "a = [1, 2]\nb = a + a + a + [1, 2, 3]";
    let d = error_of(src);
    assert_eq!(d.code, "E0201");
    let left = d
        .secondary
        .iter()
        .map(|l| &src[l.span.start..l.span.end])
        .collect::<Vec<_>>();
    assert!(left.contains(&"a + a + a"), "{left:?}");
    let c = check_source(src);
    assert!(
        c.diagnostics.iter().any(|d| d.code == "E0201"),
        "{:?}",
        c.diagnostics
    );
}
