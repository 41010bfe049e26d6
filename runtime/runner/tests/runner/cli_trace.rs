//! `mlpl run --trace FILE.json` (LANGUAGE §19, the original's format) and
//! `mlpl run --timeline FILE.json` (Chrome Trace Event Format), checked against
//! the trace event format's rules: required fields per phase, known phases,
//! times in order, complete events nested per track.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{json, Value};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlpl-cli-trace-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn mlpl(dir: &PathBuf, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn read_json(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The original's `demos/trace_demo.mlpl`.
const TRACE_DEMO: &str = "# MLPL Trace Demo\n# Run with: cargo run -p mlpl-repl -- -f demos/trace_demo.mlpl --trace\na = [1, 2, 3]\nb = [4, 5, 6]\nc = a + b\nresult = reduce_add(c)\nresult\n";

#[test]
fn the_trace_demo_writes_the_evaluation_trace() {
    let d = temp_dir("demo");
    std::fs::write(d.join("trace_demo.mlpl"), TRACE_DEMO).unwrap();
    let out = mlpl(&d, &["run", "trace_demo.mlpl", "--trace", "trace.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "21\n");
    let text = std::fs::read_to_string(d.join("trace.json")).unwrap();
    assert!(
        text.starts_with("{\n  \"source\": "),
        "not pretty-printed: {text}"
    );
    let t: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(t["source"], TRACE_DEMO);
    let events = t["events"].as_array().unwrap();
    let ops: Vec<&str> = events.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(ops.len(), 18, "{ops:?}");
    assert_eq!(&ops[10..14], ["ident", "ident", "add", "assign"]);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i);
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 5, "{keys:?}");
        for k in ["seq", "op", "span", "inputs", "output"] {
            assert!(keys.contains(&k), "{keys:?}");
        }
        let (s, end) = (
            e["span"]["start"].as_u64().unwrap(),
            e["span"]["end"].as_u64().unwrap(),
        );
        assert!(s <= end && end as usize <= TRACE_DEMO.len());
    }
    let c = &events[12];
    assert_eq!(
        &TRACE_DEMO[c["span"]["start"].as_u64().unwrap() as usize
            ..c["span"]["end"].as_u64().unwrap() as usize],
        "a + b"
    );
    assert_eq!(
        c["inputs"],
        json!([{"Array": {"shape": [3], "data": [1.0, 2.0, 3.0]}}, {"Array": {"shape": [3], "data": [4.0, 5.0, 6.0]}}])
    );
    assert_eq!(events[17]["output"], json!({"Scalar": {"value": 21.0}}));
}

#[test]
fn a_failing_traced_run_still_writes_its_trace() {
    let d = temp_dir("fail");
    std::fs::write(d.join("f.mlpl"), "a = [1, 2]\nb = a + [1, 2, 3]\n").unwrap();
    let out = mlpl(&d, &["run", "f.mlpl", "--trace", "t.json"]);
    assert_eq!(out.status.code(), Some(1));
    let t = read_json(d.join("t.json"));
    assert_eq!(t["events"].as_array().unwrap().len(), 9);
}

#[test]
fn help_explains_trace_and_timeline() {
    let d = temp_dir("help");
    let help = String::from_utf8_lossy(&mlpl(&d, &["run", "--help"]).stdout).into_owned();
    for s in [
        "--trace",
        "--timeline",
        "LANGUAGE §19",
        "Chrome Trace Event Format",
        "Perfetto",
    ] {
        assert!(help.contains(s), "run --help lacks {s}:\n{help}");
    }
    assert_eq!(
        mlpl(
            &d,
            &["run", "x.mlpl", "--trace", "t.json", "--events", "jsonl"]
        )
        .status
        .code(),
        Some(2)
    );
}

/// Checks `t` against the Trace Event Format: the object form with a
/// `traceEvents` array; every event has a known phase, a name, integer pid and
/// tid and a non-negative `ts`; complete events (`X`) a non-negative `dur`;
/// counters (`C`) numeric `args`; non-metadata events appear in time order;
/// complete events on one track nest. Returns the events by phase.
fn validate_trace_event_format(t: &Value) -> Vec<Value> {
    let events = t["traceEvents"].as_array().expect("traceEvents array");
    assert!(matches!(
        t["displayTimeUnit"].as_str(),
        Some("ms") | Some("ns")
    ));
    let mut last_ts = f64::MIN;
    let mut open: std::collections::HashMap<(u64, u64), Vec<f64>> = Default::default();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(["X", "C", "M"].contains(&ph), "unexpected phase {ph}: {e}");
        assert!(e["name"].is_string(), "{e}");
        let pid = e["pid"].as_u64().expect("pid");
        let tid = e["tid"].as_u64().expect("tid");
        let ts = e["ts"].as_f64().expect("ts");
        assert!(ts >= 0.0, "{e}");
        match ph {
            "M" => {
                assert!(["process_name", "thread_name"].contains(&e["name"].as_str().unwrap()));
                assert!(e["args"]["name"].is_string(), "{e}");
                continue;
            }
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(!args.is_empty());
                assert!(args.values().all(Value::is_number), "{e}");
            }
            _ => {
                let dur = e["dur"].as_f64().expect("dur");
                assert!(dur >= 0.0, "{e}");
                let stack = open.entry((pid, tid)).or_default();
                while stack.last().is_some_and(|&end| end <= ts) {
                    stack.pop();
                }
                if let Some(&end) = stack.last() {
                    assert!(
                        ts + dur <= end + 1e-3,
                        "{e} overlaps its enclosing event on track {tid}"
                    );
                }
                stack.push(ts + dur);
            }
        }
        assert!(ts >= last_ts, "ts not monotonic at {e}");
        last_ts = ts;
    }
    events.clone()
}

#[test]
fn the_timeline_is_a_chrome_trace_with_statements_steps_and_counters() {
    let d = temp_dir("timeline");
    let src = "W = param[2]\ntrain 5 {\n  adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8)\n  sum((W - [1, 2]) * (W - [1, 2]))\n}\nx = matmul(ones([4, 4]), ones([4, 4]))\nsum(x)\n";
    std::fs::write(d.join("t.mlpl"), src).unwrap();
    let out = mlpl(&d, &["run", "t.mlpl", "--timeline", "tl.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "64\n");
    let t = read_json(d.join("tl.json"));
    let events = validate_trace_event_format(&t);
    let cat = |c: &str| -> Vec<&Value> { events.iter().filter(|e| e["cat"] == c).collect() };
    let statements = cat("statement");
    assert_eq!(statements.len(), 4);
    assert_eq!(statements[0]["name"], "W = param[2]");
    assert_eq!(statements[1]["name"], "train 5 { …");
    assert_eq!(statements[1]["args"]["line"], 2);
    assert_eq!(statements[1]["args"]["end_line"], 5);
    assert!(statements.iter().all(|s| s["args"]["ok"] == true));
    assert!(statements[2]["args"]["kernel_launches"].as_u64().unwrap() >= 1);
    let steps = cat("train_step");
    assert_eq!(steps.len(), 5);
    assert_eq!(steps[4]["args"]["step"], 5);
    assert!(steps.iter().all(|s| s["args"]["loss"].is_number()));
    let loops = cat("train");
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0]["args"]["completed"], 5);
    // The loop lies within its statement, and its steps within the loop.
    let within = |inner: &Value, outer: &Value| {
        let (a, b) = (inner["ts"].as_f64().unwrap(), outer["ts"].as_f64().unwrap());
        a >= b && a + inner["dur"].as_f64().unwrap() <= b + outer["dur"].as_f64().unwrap() + 1e-3
    };
    assert!(within(loops[0], statements[1]));
    assert!(steps.iter().all(|s| within(s, loops[0])));
    let counters: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    for name in ["kernels", "transfers", "transfer bytes", "device memory"] {
        assert!(
            counters.iter().any(|c| c["name"] == name),
            "no {name} counter"
        );
    }
    let launches: Vec<u64> = counters
        .iter()
        .filter(|c| c["name"] == "kernels")
        .map(|c| c["args"]["kernel_launches"].as_u64().unwrap())
        .collect();
    assert!(launches.windows(2).all(|w| w[0] <= w[1]), "{launches:?}");
    assert!(launches.last().unwrap() > &0);
    assert_eq!(t["otherData"]["source"], "t.mlpl");
}

/// Every kernel call is an event of the "kernels" track with the shapes of its
/// inputs: interpreting every iteration (`--no-capture`), the kernel events
/// other than uploads and downloads (which the CPU does not count) are exactly
/// the kernel launches the counters report, and Engram's kernels appear with
/// the shapes they were called with.
#[test]
fn the_timeline_lists_every_kernel_with_its_input_shapes() {
    let d = temp_dir("timeline-kernels");
    let src = "m = engram_embed(16, 8, 4, 1, 0)
X = [[1, 2, 3], [4, 5, 6]]
train 3 {
  adam(sum(apply(m, X) * apply(m, X)), m, 0.01, 0.9, 0.999, 1e-8)
  sum(apply(m, X) * apply(m, X))
}
sum(matmul(ones([2, 3]), ones([3, 5])))
";
    std::fs::write(d.join("k.mlpl"), src).unwrap();
    let out = mlpl(
        &d,
        &["run", "k.mlpl", "--no-capture", "--timeline", "tl.json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = read_json(d.join("tl.json"));
    let events = validate_trace_event_format(&t);
    let kernels: Vec<&Value> = events.iter().filter(|e| e["cat"] == "kernel").collect();
    assert!(kernels
        .iter()
        .all(|k| k["tid"] == 3 && k["args"]["inputs"].is_array()));
    let counted = kernels
        .iter()
        .filter(|k| k["name"] != "upload" && k["name"] != "download")
        .count() as u64;
    let launches = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "kernels")
        .map(|c| c["args"]["kernel_launches"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(counted, launches);
    let shapes_of = |name: &str| -> Vec<Value> {
        kernels
            .iter()
            .filter(|k| k["name"] == name)
            .map(|k| k["args"]["inputs"].clone())
            .collect()
    };
    assert!(shapes_of("matmul").contains(&serde_json::json!([[2, 3], [3, 5]])));
    let hashes = shapes_of("engram_hash");
    assert!(!hashes.is_empty() && hashes.iter().all(|s| s == &serde_json::json!([[2, 3]])));
    assert!(shapes_of("causal_conv").contains(&serde_json::json!([[2, 3, 8], [4, 8]])));
    assert!(!shapes_of("causal_conv_backward").is_empty());
    let names = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect::<Vec<_>>();
    assert!(names.contains(&"kernels".to_string()), "{names:?}");
    assert_eq!(t["otherData"]["kernel_events_dropped"], 0);
    // Eager, no kernel is a replayed one.
    assert!(kernels.iter().all(|k| k["args"]["replayed"] == false));
}

#[test]
fn the_timeline_lists_the_kernels_of_every_replayed_iteration() {
    let d = temp_dir("timeline-replayed");
    let src = "m = engram_embed(16, 8, 4, 1, 0)
X = [[1, 2, 3], [4, 5, 6]]
train 5 {
  adam(sum(apply(m, X) * apply(m, X)), m, 0.01, 0.9, 0.999, 1e-8)
  sum(apply(m, X) * apply(m, X))
}
";
    std::fs::write(d.join("k.mlpl"), src).unwrap();
    let out = mlpl(&d, &["run", "k.mlpl", "--timeline", "tc.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = read_json(d.join("tc.json"));
    let events = validate_trace_event_format(&t);
    let loops: Vec<&Value> = events.iter().filter(|e| e["cat"] == "train").collect();
    assert_eq!(loops[0]["args"]["step_mode"], "captured");
    let kernels: Vec<&Value> = events.iter().filter(|e| e["cat"] == "kernel").collect();
    // Every launch is an event, the replayed ones included.
    let counted = kernels
        .iter()
        .filter(|k| k["name"] != "upload" && k["name"] != "download")
        .count() as u64;
    let launches = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "kernels")
        .map(|c| c["args"]["kernel_launches"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(counted, launches);
    // Two iterations are recorded (interpreted), three replayed: the replayed
    // kernels are three equal runs of calls, each with its shapes, each inside
    // its own iteration on the train track.
    let replayed: Vec<&&Value> = kernels
        .iter()
        .filter(|k| k["args"]["replayed"] == true)
        .collect();
    assert!(
        !replayed.is_empty() && replayed.len().is_multiple_of(3),
        "{}",
        replayed.len()
    );
    let per_step = replayed.len() / 3;
    let calls = |i: usize| -> Vec<(Value, Value)> {
        replayed[i * per_step..(i + 1) * per_step]
            .iter()
            .map(|k| (k["name"].clone(), k["args"]["inputs"].clone()))
            .collect()
    };
    assert_eq!(calls(0), calls(1));
    assert_eq!(calls(0), calls(2));
    assert!(calls(0).contains(&(
        serde_json::json!("engram_hash"),
        serde_json::json!([[2, 3]])
    )));
    assert!(calls(0).iter().any(|(n, _)| n == "adam_update"));
    let steps: Vec<&Value> = events.iter().filter(|e| e["cat"] == "train_step").collect();
    assert_eq!(steps.len(), 5);
    let f = |v: &Value| v.as_f64().unwrap();
    for i in 0..3 {
        let (step, prev) = (steps[i + 2], steps[i + 1]);
        let first = replayed[i * per_step];
        let last = replayed[(i + 1) * per_step - 1];
        // Within a few microseconds of clock granularity.
        assert!(
            f(&first["ts"]) + 5.0 >= f(&prev["ts"]) + f(&prev["dur"]),
            "replay {i} began before its iteration"
        );
        assert!(
            f(&last["ts"]) + f(&last["dur"]) <= f(&step["ts"]) + f(&step["dur"]) + 5.0,
            "replay {i} ended after its iteration"
        );
    }
}

#[test]
fn a_failing_run_still_writes_its_timeline() {
    let d = temp_dir("timeline-fail");
    std::fs::write(d.join("f.mlpl"), "a = [1, 2]\nb = a + [1, 2, 3]\n").unwrap();
    let out = mlpl(&d, &["run", "f.mlpl", "--timeline", "tl.json"]);
    assert_eq!(out.status.code(), Some(1));
    let events = validate_trace_event_format(&read_json(d.join("tl.json")));
    let statements: Vec<&Value> = events.iter().filter(|e| e["cat"] == "statement").collect();
    assert_eq!(statements.len(), 2);
    assert_eq!(statements[1]["args"]["ok"], false);
}

#[test]
fn a_session_run_with_a_timeline_sends_it_as_an_artifact() {
    use mlpl_runner::session::{CellRef, Event, EventBody, RunRequest, Session, SessionOptions};
    use std::sync::{Arc, Mutex};
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let e = events.clone();
    let mut s = Session::new(
        "tl",
        SessionOptions::default(),
        Box::new(move |ev| e.lock().unwrap().push(ev.clone())),
    );
    let req = RunRequest {
        code: "W = param[2]\ntrain 4 { adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8); sum(W * W) }\nsum(W)\n".into(),
        cell: Some(CellRef {
            uri: "file:///nb.mlpl".into(),
            index: 1,
            start_line: 7,
        }),
        device: None,
        timeline: true,
    };
    assert_eq!(
        s.run("r1", &req).status,
        mlpl_runner::session::RunStatus::Ok
    );
    // Without `timeline`, no artifact.
    s.run(
        "r2",
        &RunRequest {
            code: "1".into(),
            ..RunRequest::default()
        },
    );
    let ev = events.lock().unwrap();
    let artifacts: Vec<(&str, &str)> = ev
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Artifact { kind, content, .. } => {
                Some((e.run.as_str(), kind.as_str())).filter(|_| content.is_some())
            }
            _ => None,
        })
        .collect();
    assert_eq!(artifacts, vec![("r1", "timeline")]);
    let content = ev
        .iter()
        .find_map(|e| match &e.body {
            EventBody::Artifact { content, .. } => content.clone(),
            _ => None,
        })
        .unwrap();
    let kinds: Vec<&str> = ev
        .iter()
        .filter(|e| e.run == "r1")
        .map(Event::kind)
        .collect();
    let at = kinds.iter().position(|k| *k == "artifact").unwrap();
    assert!(at < kinds.iter().position(|k| *k == "run_finished").unwrap());
    let t: Value = serde_json::from_str(&content).unwrap();
    let events = validate_trace_event_format(&t);
    let lines: Vec<u64> = events
        .iter()
        .filter(|e| e["cat"] == "statement")
        .map(|e| e["args"]["line"].as_u64().unwrap())
        .collect();
    // The document's lines (the cell starts on 0-based line 7).
    assert_eq!(lines, vec![8, 9, 10]);
    assert_eq!(
        events.iter().filter(|e| e["cat"] == "train_step").count(),
        4
    );
    assert_eq!(t["otherData"]["source"], "file:///nb.mlpl");
}
