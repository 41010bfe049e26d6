//! The evaluation trace (LANGUAGE §19): one event per evaluated node, children
//! before parents, each op named as the reference lists, every value encoding,
//! and nothing recorded (or changed) when tracing is off.

use mlpl_lang::eval::{Interp, Trace, TraceValue, Workspace};
use serde_json::json;

fn traced(src: &str) -> Trace {
    let mut it = Interp::new(Workspace::new());
    it.trace = Some(Trace::new(src));
    let p = mlpl_syntax::parse(src);
    it.run(&p.program).unwrap();
    it.trace.take().unwrap()
}

fn ops(t: &Trace) -> Vec<&str> {
    t.events.iter().map(|e| e.op).collect()
}

#[test]
fn the_original_trace_demo() {
    let src = "a = [1, 2, 3]\nb = [4, 5, 6]\nc = a + b\nresult = reduce_add(c)\nresult\n";
    let t = traced(src);
    assert_eq!(
        ops(&t),
        vec![
            "literal",
            "literal",
            "literal",
            "array_lit",
            "assign", // a
            "literal",
            "literal",
            "literal",
            "array_lit",
            "assign", // b
            "ident",
            "ident",
            "add",
            "assign", // c
            "ident",
            "fncall",
            "assign", // result
            "ident",
        ]
    );
    for (i, e) in t.events.iter().enumerate() {
        assert_eq!(e.seq, i as u64);
    }
    let j: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
    assert_eq!(j["source"], src);
    assert_eq!(
        j["events"][0],
        json!({"seq": 0, "op": "literal", "span": {"start": 5, "end": 6},
               "inputs": [], "output": {"Scalar": {"value": 1.0}}})
    );
    assert_eq!(
        j["events"][3]["output"],
        json!({"Array": {"shape": [3], "data": [1.0, 2.0, 3.0]}})
    );
    assert_eq!(j["events"][3]["span"], json!({"start": 4, "end": 13}));
    // `a = [1, 2, 3]`: the whole statement, its value as input and output.
    assert_eq!(j["events"][4]["span"], json!({"start": 0, "end": 13}));
    assert_eq!(j["events"][4]["inputs"], json!([j["events"][3]["output"]]));
    let add = &j["events"][12];
    assert_eq!(add["inputs"].as_array().unwrap().len(), 2);
    assert_eq!(add["output"]["Array"]["data"], json!([5.0, 7.0, 9.0]));
    assert_eq!(
        &src[add["span"]["start"].as_u64().unwrap() as usize
            ..add["span"]["end"].as_u64().unwrap() as usize],
        "a + b"
    );
    assert_eq!(j["events"][15]["inputs"], json!([add["output"]]));
    assert_eq!(
        j["events"][17]["output"],
        json!({"Scalar": {"value": 21.0}})
    );
    // Pretty-printed, fields in the original's order.
    let text = t.to_json();
    assert!(text.starts_with("{\n  \"source\": "), "{text}");
    let seq = text.find("\"seq\"").unwrap();
    let op = text.find("\"op\"").unwrap();
    let span = text.find("\"span\"").unwrap();
    let inputs = text.find("\"inputs\"").unwrap();
    let output = text.find("\"output\"").unwrap();
    assert!(seq < op && op < span && span < inputs && inputs < output);
}

#[test]
fn every_value_kind_has_its_encoding() {
    let t = traced(
        "M : [batch, feat] = reshape(iota(4), [2, 2])\ns = \"hé\"\nm = linear(3, 2, 0)\ntok = tokenizer()\ns",
    );
    let assigns: Vec<&TraceValue> = t
        .events
        .iter()
        .filter(|e| e.op.starts_with("assign"))
        .map(|e| &e.output)
        .collect();
    let labelled = t.events.iter().find(|e| e.op == "assign").unwrap();
    assert_eq!(
        serde_json::to_value(&labelled.output).unwrap(),
        json!({"Array": {"shape": [2, 2], "data": [0.0, 1.0, 2.0, 3.0], "labels": ["batch", "feat"]}})
    );
    assert_eq!(assigns.len(), 4);
    assert_eq!(
        ops(&t)
            .into_iter()
            .filter(|o| o.starts_with("assign"))
            .collect::<Vec<_>>(),
        vec![
            "assign",
            "assign_string",
            "assign_model",
            "assign_tokenizer"
        ]
    );
    // A non-array assignment's value is 0, with no inputs (as in the original).
    for e in t.events.iter().filter(|e| e.op.starts_with("assign_")) {
        assert_eq!(e.output, TraceValue::Scalar { value: 0.0 });
        assert!(e.inputs.is_empty());
    }
    let outputs: Vec<serde_json::Value> = t
        .events
        .iter()
        .filter(|e| e.op == "fncall" || e.op == "ident")
        .map(|e| serde_json::to_value(&e.output).unwrap())
        .collect();
    assert!(
        outputs.contains(&json!({"Model": {"params": 8}})),
        "{outputs:?}"
    );
    assert!(
        outputs.contains(&json!({"Tokenizer": {"vocab": 256}})),
        "{outputs:?}"
    );
    assert_eq!(
        t.events.last().unwrap().output,
        TraceValue::String { len: 3 }
    );
}

#[test]
fn operators_calls_loops_and_constructors_have_their_ops() {
    let t = traced(
        "W = param[2]\nx = -[1, 2]\ny = matmul([[1, 2]], [[3], [4]])\nz = (W - 1) * 2 / 4\nrepeat 2 { k = 1 }\nfor r in [[1], [2]] { r }\ntrain 3 { adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8); sum(W * W) }\nq = tensor[1]",
    );
    let o = ops(&t);
    for op in [
        "param_ctor",
        "negate",
        "matmul",
        "sub",
        "mul",
        "div",
        "repeat",
        "for",
        "train",
        "adam",
        "tensor_ctor",
    ] {
        assert!(o.contains(&op), "no {op} in {o:?}");
    }
    let matmul = t.events.iter().find(|e| e.op == "matmul").unwrap();
    assert_eq!(matmul.inputs.len(), 2);
    // The optimizer shows no inputs, as in the original; the loss it evaluates
    // each step is traced (every iteration is evaluated while tracing).
    assert!(t
        .events
        .iter()
        .filter(|e| e.op == "adam")
        .all(|e| e.inputs.is_empty()));
    assert_eq!(t.events.iter().filter(|e| e.op == "adam").count(), 3);
    let negate = t.events.iter().find(|e| e.op == "negate").unwrap();
    assert_eq!(negate.inputs.len(), 1);
    // Parentheses are not a node: `(W - 1)` is the `sub`.
    assert!(!o.contains(&"paren"));
}

#[test]
fn events_are_children_before_parents_and_spans_lie_in_the_source() {
    let src = "x = sum([1, 2] * 3) + 1";
    let t = traced(src);
    assert_eq!(
        ops(&t),
        vec![
            "literal",
            "literal",
            "array_lit",
            "literal",
            "mul",
            "fncall",
            "literal",
            "add",
            "assign"
        ]
    );
    for e in &t.events {
        assert!(e.span.start <= e.span.end && e.span.end <= src.len());
    }
}

#[test]
fn a_failing_run_keeps_the_events_before_the_error() {
    let mut it = Interp::new(Workspace::new());
    let src = "a = [1, 2]\nb = a + [1, 2, 3]";
    it.trace = Some(Trace::new(src));
    let p = mlpl_syntax::parse(src);
    assert_eq!(it.run(&p.program).unwrap_err().code, "E0201");
    let t = it.trace.take().unwrap();
    assert_eq!(
        ops(&t),
        vec![
            "literal",
            "literal",
            "array_lit",
            "assign",
            "ident",
            "literal",
            "literal",
            "literal",
            "array_lit"
        ]
    );
}

#[test]
fn tracing_changes_no_value() {
    let src = "W = param[3]\ntrain 5 { adam(sum((W - [1, 2, 3]) * (W - [1, 2, 3])), W, 0.1, 0.9, 0.999, 1e-8); sum((W - [1, 2, 3]) * (W - [1, 2, 3])) }\nW";
    let p = mlpl_syntax::parse(src);
    let mut plain = Interp::new(Workspace::new());
    let a = plain.run(&p.program).unwrap().unwrap().display();
    assert!(plain.trace.is_none());
    let mut it = Interp::new(Workspace::new());
    it.trace = Some(Trace::new(src));
    let b = it.run(&p.program).unwrap().unwrap().display();
    assert_eq!(a, b);
}
