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
    assert!(c.diagnostics.iter().all(|d| !d.is_error()), "{:?}", c.diagnostics);
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
    let op = run_in("x = ones([300, 300])\ny = matmul(zeros([600, 300]), x)", None).result;
    let ctor = run_in("w = param[1000, 1000]", None).result;
    ops::set_memory_budget(None);
    assert!(small.is_ok(), "{small:?}");
    for r in [big, op, ctor] {
        let d = r.unwrap_err();
        assert_eq!(d.code, "E0410");
        assert!(
            d.notes.iter().any(|n| n.contains("budget") && n.contains("1048576")),
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
