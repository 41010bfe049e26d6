//! A bounded fuzz harness (stable Rust, proptest): programs stitched from
//! fragments that once killed a tool (absurd sizes, deep and shared models,
//! empty arrays with huge axes, unbalanced brackets) go through the parser, the
//! checker and the interpreter. None may panic; the interpreter runs on this
//! thread under a 16 MiB budget per result, so nothing it is asked for is
//! allocated. CI runs 200 cases from a fixed seed; a longer run is
//! `PROPTEST_CASES=1000000 cargo test -p mlpl-lang --release --test lang fuzz::`
//! (docs/limits.md records one).

use mlpl_lang::check::check_source;
use mlpl_lang::eval::{ops, Interp, Workspace};
use mlpl_syntax::parse;
use proptest::prelude::*;

const STATEMENTS: &[&str] = &[
    "p = param[1e7, 1e7]",
    "p = param[8467440737095516165]",
    "p = tensor[3, 2]",
    "p = param[2, 2]",
    "q = p + 1",
    "q = p * p",
    "s = sum(zeros([1e20, 0]), 1)",
    "s = sum(p, 0)",
    "s = mean(zeros([0, 1e19]), 0)",
    "x = zeros([30000, 30000])",
    "x = zeros([2, 3])",
    "x = reshape(iota(6), [3, 2])",
    "x = reshape(iota(4), zeros([1e9]))",
    "x = reshape(x, [-1])",
    "x = concat(x, x)",
    "x = concat([1], [2, 3])",
    "y = x + x",
    "y = transpose(x)",
    "y = matmul(x, transpose(x))",
    "m = linear(2, 2, 0)",
    "m = residual(m)",
    "m = chain(m, m)",
    "m = chain(m, relu_layer())",
    "m = residual(embed(4, 2, 1))",
    "y = apply(m, ones([1, 2]))",
    "repeat 30 { m = chain(m, m) }",
    "repeat 600 { m = residual(m) }",
    "repeat 3 { x = concat(x, x) }",
    "for r in zeros([0, 1e19]) { y = r }",
    "for r in x { y = r }",
    "train 2 { adam(sum(apply(m, ones([1, 2]))), m, 0.1, 0.9, 0.999, 1e-8) }",
    "z = [[1, 2], [3]]",
    "z = ones(zeros([1e9]))",
    "z = iota(1e12)",
    "z = grid([0, 1, 0, 1], 99999999999)",
    "z = shape(x)",
    "z = x[0]",
];

const NOISE: &[&str] = &[
    "(", ")", "[", "]", "{", "}", ",", "\n", " + ", "-", "1e400", "\"", "#",
];

fn program() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            6 => prop::sample::select(STATEMENTS).prop_map(|s| format!("{s}\n")),
            1 => prop::sample::select(NOISE).prop_map(String::from),
        ],
        0..12,
    )
    .prop_map(|v| v.concat())
}

/// Parses, checks and runs `src`; the interpreter's own panic net (a builtin
/// that panics ends the run with "internal failure", E0504) counts as a crash.
fn run(src: &str) -> Result<(), String> {
    let parsed = parse(src);
    let _ = check_source(src);
    if parsed.diagnostics.iter().any(|d| d.is_error()) {
        return Ok(());
    }
    let mut it = Interp::new(Workspace::new());
    let r = it.run(&parsed.program);
    // The workspace's values are shown, as a session lists them.
    for v in it.ws.bindings.values() {
        let _ = v.display();
    }
    match r {
        Err(d) if d.message.starts_with("internal failure") => {
            Err(format!("{}: {:?} {:?}", d.message, d.primary, d.notes))
        }
        _ => Ok(()),
    }
}

proptest! {
    // A fixed seed: CI runs the same 200 programs every time (PROPTEST_CASES and
    // PROPTEST_RNG_SEED override both, for a longer run).
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(16),
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_program_panics_the_parser_checker_or_interpreter(src in program()) {
        ops::set_memory_budget(Some(16 << 20));
        let r = std::panic::catch_unwind(|| run(&src));
        ops::set_memory_budget(None);
        match r {
            Ok(Ok(())) => {}
            Ok(Err(why)) => prop_assert!(false, "internal failure on {:?}: {}", src, why),
            Err(_) => prop_assert!(false, "panicked on {:?}", src),
        }
    }
}

#[test]
fn the_fragments_each_run_alone() {
    ops::set_memory_budget(Some(16 << 20));
    for s in STATEMENTS {
        let r = std::panic::catch_unwind(|| run(s));
        assert!(
            matches!(r, Ok(Ok(()))),
            "failed on {s:?}: {:?}",
            r.map_err(|_| "panic")
        );
    }
    ops::set_memory_budget(None);
}
