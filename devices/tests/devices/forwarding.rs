//! A new `Backend` method cannot go unrecorded: every method of the trait is
//! implemented by the capture `Recorder` (which records it as an `Op`) and by
//! `Unfused` (which forwards it), except the ones listed here with the reason,
//! and every kernel method has an `Op` of its name. A method with a default body
//! would otherwise compile and be silently left out.

use std::collections::BTreeSet;
use std::path::Path;

fn source(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names of the `fn`s in the block of `text` that starts with `header`.
fn fns_in_block(text: &str, header: &str) -> BTreeSet<String> {
    let start = text.find(header).unwrap_or_else(|| panic!("no {header:?}"));
    let block = &text[start..];
    let end = block.find("\n}\n").unwrap_or(block.len());
    block[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("    fn "))
        .map(|l| l.split(['(', '<']).next().unwrap().to_string())
        .collect()
}

fn trait_methods() -> BTreeSet<String> {
    let m = fns_in_block(&source("src/backend.rs"), "pub trait Backend");
    assert!(m.len() > 25, "read the trait: {m:?}");
    m
}

/// Methods about the device rather than kernels: forwarded, never recorded.
const DEVICE_METHODS: &[&str] = &["kind", "counters", "reset_counters", "take_fallbacks"];

/// `compile_step`: a recorder records eager calls and is never compiled itself;
/// `Unfused` replays call by call, so fused kernels are compared against it.
const NOT_FORWARDED: &[&str] = &["compile_step"];

/// The fused methods `Unfused` leaves to the trait's composed defaults: that is
/// what it is for.
const COMPOSED_IN_UNFUSED: &[&str] = &[
    "unary_backward",
    "bias_act",
    "bias_act_backward",
    "masked_softmax",
    "masked_softmax_backward",
];

fn missing(want: &BTreeSet<String>, have: &BTreeSet<String>, except: &[&[&str]]) -> Vec<String> {
    want.iter()
        .filter(|m| !have.contains(*m) && !except.iter().any(|e| e.contains(&m.as_str())))
        .cloned()
        .collect()
}

#[test]
fn the_recorder_implements_every_backend_method() {
    let have = fns_in_block(
        &source("src/capture/recorder.rs"),
        "impl Backend for Recorder",
    );
    let gaps = missing(&trait_methods(), &have, &[NOT_FORWARDED]);
    assert!(gaps.is_empty(), "Recorder does not record {gaps:?}");
}

#[test]
fn unfused_forwards_every_primitive_backend_method() {
    let have = fns_in_block(
        &source("src/unfused.rs"),
        "impl<B: Backend> Backend for Unfused<B>",
    );
    let gaps = missing(
        &trait_methods(),
        &have,
        &[NOT_FORWARDED, COMPOSED_IN_UNFUSED],
    );
    assert!(gaps.is_empty(), "Unfused does not forward {gaps:?}");
    let composed: Vec<&&str> = COMPOSED_IN_UNFUSED
        .iter()
        .filter(|m| have.contains(**m))
        .collect();
    assert!(
        composed.is_empty(),
        "Unfused overrides {composed:?}: it must run their defaults"
    );
}

#[test]
fn every_kernel_method_has_an_op_of_its_name() {
    let op = source("src/capture/op.rs");
    let start = op.find("pub fn name(&self)").expect("Op::name");
    let names: BTreeSet<String> = op[start..op[start..].find("\n    }\n").unwrap() + start]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    let kernels: BTreeSet<String> = trait_methods()
        .into_iter()
        .filter(|m| !DEVICE_METHODS.contains(&m.as_str()) && !NOT_FORWARDED.contains(&m.as_str()))
        .collect();
    let gaps: Vec<&String> = kernels.difference(&names).collect();
    assert!(gaps.is_empty(), "no Op for {gaps:?}");
}
