//! Property test: random programs built from every registered builtin and small
//! arguments never crash the interpreter and never hit an internal failure
//! (E0504 from a panicking builtin); they either produce a value or a diagnostic.

use crate::common;

use mlpl_lang::builtins;
use proptest::prelude::*;

fn atom() -> impl Strategy<Value = String> {
    prop_oneof![
        (-3i32..12).prop_map(|n| n.to_string()),
        Just("0.5".to_string()),
        Just("-1.5".to_string()),
        Just("[1, 2, 3]".to_string()),
        Just("[[1, 0], [0, 1], [2, 2]]".to_string()),
        Just("[]".to_string()),
        Just("reshape(iota(24), [2, 3, 4])".to_string()),
        Just("label(zeros([2, 3]), [\"a\", \"b\"])".to_string()),
        Just("\"a\"".to_string()),
        Just("\"tiny_corpus\"".to_string()),
        Just("\"cuda\"".to_string()),
        Just("tokenizer()".to_string()),
        Just("x".to_string()),
    ]
}

fn candidates() -> Vec<&'static builtins::Builtin> {
    builtins::all()
        .filter(|b| !matches!(b.name, "calibrate_device" | "tsne"))
        .collect()
}

/// A call with an accepted number of arguments (mostly), so that calls get past
/// arity checks and exercise the builtins themselves.
fn call_with(arg: BoxedStrategy<String>) -> impl Strategy<Value = String> {
    prop::sample::select(candidates()).prop_flat_map(move |b| {
        let lo = b.min_args();
        // (A variadic builtin such as `chain` accepts any number: try a few.)
        let hi = b.max_args().min(lo + 4) + 1;
        prop::collection::vec(arg.clone(), lo..hi.max(lo + 1))
            .prop_map(move |args| format!("{}({})", b.name, args.join(", ")))
    })
}

fn call() -> impl Strategy<Value = String> {
    call_with(atom().boxed())
}

fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![atom(), call()];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/"])
            )
                .prop_map(|(a, b, op)| format!("({a} {op} {b})")),
            call_with(inner.boxed()),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_never_crash(e1 in expr(), e2 in expr()) {
        let src = format!("x = [4, 5, 6]\ny = {e1}\n{e2}\n");
        let dir = std::env::temp_dir().join("mlpl-props");
        std::fs::create_dir_all(&dir).unwrap();
        let out = common::run_in(&src, Some(&dir));
        if std::env::var_os("MLPL_PROPS_VERBOSE").is_some() { eprintln!("{src:?} -> {:?}", out.result.as_ref().map(|v| v.as_ref().map(|v| v.display().len())).map_err(|d| d.code)); }
        if let Err(d) = &out.result {
            prop_assert_ne!(d.code, "E0504", "internal failure for {}: {} {:?}", src, d.message, d.notes);
        }
    }
}
