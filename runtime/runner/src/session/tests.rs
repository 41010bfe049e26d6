//! Session tests: cells share state, events, throttling, cancel, persistence.

use mlpl_diag::code;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

const TRAIN: &str = "W = param[2]\ntrain 50 { adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8); sum((W - [1, 2]) * (W - [1, 2])) }\n";

fn session() -> (Session, Arc<Mutex<Vec<Event>>>) {
    Session::collecting("s1")
}

fn req(code: &str) -> RunRequest {
    RunRequest::code(code)
}

fn kinds(events: &[Event], run: &str) -> Vec<&'static str> {
    events
        .iter()
        .filter(|e| e.run == run)
        .map(Event::kind)
        .collect()
}

#[test]
fn cells_share_state_and_rerunning_replaces_bindings() {
    let (mut s, events) = session();
    assert_eq!(s.run("r1", &req("x = 2")).status, RunStatus::Ok);
    let out = s.run("r2", &req("y = x * 3\ny"));
    assert_eq!(out.status, RunStatus::Ok);
    assert_eq!(out.value.unwrap().display(), "6");
    s.run("r3", &req("x = 10"));
    assert_eq!(s.run("r4", &req("x + 1")).value.unwrap().display(), "11");
    let ev = events.lock().unwrap();
    // Sequence numbers are consecutive across runs.
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
        assert_eq!(e.session, "s1");
    }
    assert_eq!(
        kinds(&ev, "r2"),
        vec!["run_started", "device", "value", "output", "run_finished"]
    );
    let value = ev
        .iter()
        .find(|e| e.run == "r1" && e.kind() == "value")
        .unwrap();
    match &value.body {
        EventBody::Value { name, text, .. } => {
            assert_eq!(name.as_deref(), Some("x"));
            assert_eq!(text, "2");
        }
        other => panic!("{other:?}"),
    }
    let vars = s.variables();
    assert_eq!(
        vars.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        vec!["x", "y"]
    );
}

#[test]
fn training_streams_ordered_steps_with_the_last_one_exact() {
    let (mut s, events) = session();
    let out = s.run("r1", &req(TRAIN));
    assert_eq!(out.status, RunStatus::Ok, "{:?}", out.diagnostic);
    let ev = events.lock().unwrap();
    let steps: Vec<(u64, u64, Option<f64>)> = ev
        .iter()
        .filter_map(|e| match e.body {
            EventBody::Step {
                step, total, loss, ..
            } => Some((step, total, loss)),
            _ => None,
        })
        .collect();
    assert!(!steps.is_empty());
    assert_eq!(steps[0].0, 1);
    assert!(steps.windows(2).all(|w| w[0].0 < w[1].0));
    let last = steps.last().unwrap();
    assert_eq!((last.0, last.1), (50, 50));
    // The last step's loss is exactly the last recorded loss.
    let losses = s
        .workspace()
        .get("last_losses")
        .unwrap()
        .as_array()
        .unwrap()
        .to_f32();
    assert_eq!(last.2, Some(f64::from(losses[49])));
    assert!(losses[49] < losses[0]);
}

#[test]
fn fast_loops_are_throttled() {
    let (mut s, events) = session();
    let out = s.run("r1", &req("x = 0\ntrain 20000 { x = x + 1; x }"));
    assert_eq!(out.status, RunStatus::Ok);
    let ev = events.lock().unwrap();
    let n = ev.iter().filter(|e| e.kind() == "step").count();
    let secs = out.elapsed.as_secs_f64();
    // At most ~20 per second, plus the first and the last.
    assert!(
        (n as f64) <= secs * 20.0 + 3.0,
        "{n} step events in {secs} s"
    );
    let last = ev.iter().rev().find(|e| e.kind() == "step").unwrap();
    assert!(matches!(last.body, EventBody::Step { step: 20000, .. }));
}

#[test]
fn an_error_maps_to_document_lines_and_the_session_lives_on() {
    let (mut s, events) = session();
    let r = RunRequest {
        code: "a = 1\nb = nope + 1\n".into(),
        cell: Some(CellRef {
            uri: "file:///t.mlpl".into(),
            index: 2,
            start_line: 10,
        }),
        device: None,
        timeline: false,
    };
    let out = s.run("bad", &r);
    assert_eq!(out.status, RunStatus::Error);
    let d = out.diagnostic_json.unwrap();
    assert_eq!(d["code"], code::E0101);
    assert_eq!(d["line"], 12);
    assert_eq!(d["file"], "file:///t.mlpl");
    // Statements before the error ran.
    assert!(s.workspace().get("a").is_some());
    assert_eq!(s.run("good", &req("a + 1")).status, RunStatus::Ok);
    let ev = events.lock().unwrap();
    match &ev.iter().find(|e| e.run == "bad").unwrap().body {
        EventBody::RunStarted {
            start_line,
            end_line,
            ..
        } => assert_eq!((*start_line, *end_line), (11, 12)),
        other => panic!("{other:?}"),
    }
    let fin = ev
        .iter()
        .find(|e| e.run == "bad" && e.kind() == "run_finished");
    assert!(matches!(
        fin.unwrap().body,
        EventBody::RunFinished {
            status: RunStatus::Error,
            ..
        }
    ));
}

#[test]
fn parse_errors_and_warnings_become_events() {
    let (mut s, events) = session();
    let out = s.run("r1", &req("x = (1 +"));
    assert_eq!(out.status, RunStatus::Error);
    let out = s.run("r2", &req("repeat 2.5 { 1 }"));
    assert_eq!(out.status, RunStatus::Ok);
    let out = s.run("r3", &req("1"));
    assert_eq!(out.status, RunStatus::Ok);
    let ev = events.lock().unwrap();
    let w = ev.iter().find(|e| e.kind() == "warning").unwrap();
    match &w.body {
        EventBody::Warning { diagnostic } => assert_eq!(diagnostic["code"], code::W0202),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cancel_stops_training_at_a_step_boundary() {
    let (tx, rx) = mpsc::channel::<Event>();
    let tx = Mutex::new(tx);
    let mut s = Session::new(
        "s1",
        SessionOptions::default(),
        Box::new(move |e| {
            let _ = tx.lock().unwrap().send(e.clone());
        }),
    );
    s.run("setup", &req("W = param[2]"));
    let cancel = s.cancel_handle();
    let worker = std::thread::spawn(move || {
        let out = s.run(
            "long",
            &req("train 1000000 { adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8); sum((W - [1, 2]) * (W - [1, 2])) }"),
        );
        (s, out)
    });
    // Wait for the first step, then cancel.
    loop {
        let e = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a step event");
        if e.kind() == "step" {
            break;
        }
    }
    let asked = std::time::Instant::now();
    cancel.cancel();
    let mut last_step = 0;
    loop {
        let e = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("run_finished");
        match e.body {
            EventBody::Step { step, .. } => last_step = step,
            EventBody::RunFinished { status, .. } => {
                assert_eq!(status, RunStatus::Cancelled);
                break;
            }
            _ => {}
        }
    }
    assert!(asked.elapsed() < Duration::from_secs(2));
    let (mut s, out) = worker.join().unwrap();
    assert_eq!(out.status, RunStatus::Cancelled);
    // The last completed step is reported and matches the workspace.
    let step = s.workspace().get("step").unwrap().as_array().unwrap();
    assert_eq!(step.scalar_value(), Some(last_step as f64 - 1.0));
    let st = &s.workspace().optim[&("adam".to_string(), "W".to_string())];
    assert_eq!(st.steps, last_step);
    // The session is usable again, and a new run is not cancelled.
    let after = s.run("after", &req("sum(W)"));
    assert_eq!(after.status, RunStatus::Ok, "{after:?}");
}

#[test]
fn a_cancel_requested_before_the_run_starts_takes_effect() {
    let (mut s, _events) = session();
    s.cancel_handle().cancel();
    assert_eq!(s.run("r1", &req("1 + 1")).status, RunStatus::Cancelled);
    assert_eq!(s.run("r2", &req("1 + 1")).status, RunStatus::Ok);
}

#[test]
fn save_and_restore_keep_variables_and_continue_the_sequence() {
    let dir = std::env::temp_dir().join(format!("mlpl-session-save-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut s, events) = session();
    s.run("r1", &req(TRAIN));
    s.run("r2", &req("name = \"hello\"\nk = 3"));
    s.save(&dir).unwrap();
    let last = events.lock().unwrap().last().unwrap().seq;
    let (mut r, skipped) =
        Session::restore(&dir, SessionOptions::default(), Box::new(|_| {})).unwrap();
    assert!(skipped.is_empty());
    assert_eq!(r.id(), "s1");
    assert_eq!(r.emitter().last_seq(), last);
    assert_eq!(r.variables(), s.variables());
    // Optimizer state came back: one more step continues from step 51.
    let out = r.run("r3", &req("adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\nk"));
    assert_eq!(out.status, RunStatus::Ok);
    let st = &r.workspace().optim[&("adam".to_string(), "W".to_string())];
    assert_eq!(st.steps, 51);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn autosave_is_reported_in_run_finished() {
    let dir = std::env::temp_dir().join(format!("mlpl-session-auto-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let e = events.clone();
    let opts = SessionOptions {
        autosave_dir: Some(dir.clone()),
        ..SessionOptions::default()
    };
    let mut s = Session::new(
        "s2",
        opts,
        Box::new(move |ev| e.lock().unwrap().push(ev.clone())),
    );
    s.run("r1", &req("x = [1, 2, 3]"));
    assert!(matches!(
        events.lock().unwrap().last().unwrap().body,
        EventBody::RunFinished {
            saved: Some(true),
            ..
        }
    ));
    assert!(dir.join("session.json").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn svg_values_become_artifacts() {
    let (mut s, events) = session();
    let out = s.run(
        "r1",
        &req("\"<svg xmlns='http://www.w3.org/2000/svg'></svg>\""),
    );
    assert_eq!(out.status, RunStatus::Ok);
    let ev = events.lock().unwrap();
    let a = ev.iter().find(|e| e.kind() == "artifact").unwrap();
    match &a.body {
        EventBody::Artifact { kind, content, .. } => {
            assert_eq!(kind, "svg");
            assert!(content.as_deref().unwrap().starts_with("<svg"));
        }
        other => panic!("{other:?}"),
    }
    // The chart travels once: the output line only names it.
    let o = ev.iter().find(|e| e.kind() == "output").unwrap();
    match &o.body {
        EventBody::Output { text, .. } => {
            assert!(text.starts_with("viz: svg chart ("), "{text}");
            assert!(!text.contains("<svg"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ids() {
    let a = new_id("s");
    assert_eq!(a.len(), 17);
    assert!(valid_id(&a));
    assert_ne!(a, new_id("s"));
    assert!(!valid_id("../x"));
    assert!(!valid_id(""));
}

#[test]
fn panic_diagnostics_carry_the_message() {
    let payload: Box<dyn std::any::Any + Send> = Box::new("boom");
    let d = panic_diagnostic(payload.as_ref());
    assert_eq!(d.code, code::E0504);
    assert!(d.notes[0].contains("boom"));
}

#[test]
fn models_survive_save_and_restore_with_shared_layers() {
    let dir = std::env::temp_dir().join(format!("mlpl-session-model-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut s, _events) = session();
    let build = "e = moe(3, 2, 1, 4, 5)\nm = chain(linear(2, 3, 1), residual(e), tanh_layer(), linear(3, 1, 2))\nX = [[1, 2], [3, 4]]";
    assert_eq!(s.run("r1", &req(build)).status, RunStatus::Ok);
    let rep = s.save(&dir).unwrap();
    assert!(rep.not_restorable.is_empty());
    let (mut r, skipped) =
        Session::restore(&dir, SessionOptions::default(), Box::new(|_| {})).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    let m = r.variables().into_iter().find(|v| v.name == "m").unwrap();
    assert_eq!(m.kind, "model");
    let params = s.variables().into_iter().find(|v| v.name == "m").unwrap();
    assert_eq!(m.parameters, params.parameters);
    // The restored model computes what the original computes, and `e` is still
    // the moe layer inside `m`: applying `m` records the loss `aux_loss(e)` reads.
    let probe = "y = apply(m, X)\n[sum(y), aux_loss(e)]";
    let want = s.run("r2", &req(probe)).value.unwrap().display();
    let got = r.run("r2", &req(probe));
    assert_eq!(got.status, RunStatus::Ok, "{:?}", got.diagnostic);
    assert_eq!(got.value.unwrap().display(), want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn models_saved_without_structure_restore_as_their_parameters() {
    let dir = std::env::temp_dir().join(format!("mlpl-session-oldmodel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut s, _events) = session();
    s.run("r1", &req("m = linear(2, 3, 1)"));
    s.save(&dir).unwrap();
    // A file of an older build: the model binding has no node.
    let path = dir.join("session.json");
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    state["bindings"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .filter(|b| b["kind"] == "model")
        .for_each(|b| b["node"] = serde_json::Value::Null);
    std::fs::write(&path, serde_json::to_vec(&state).unwrap()).unwrap();
    let (r, skipped) = Session::restore(&dir, SessionOptions::default(), Box::new(|_| {})).unwrap();
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].contains("`m` is a model"), "{}", skipped[0]);
    assert!(r.workspace().get("m").is_none());
    // Its parameters are ordinary bindings and came back, still trainable.
    let w = r
        .workspace()
        .names()
        .into_iter()
        .find(|n| n.starts_with("__linear_W_"));
    assert!(r.workspace().tracked.contains(w.unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn functions_survive_save_and_restore_and_a_broken_saved_definition_is_reported() {
    let dir = std::env::temp_dir().join(format!("mlpl-session-fn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut s, _events) = session();
    let define = "fn twice(x : [n]) -> [n] {\n  x * 2\n}\nfn four(x) { twice(twice(x)) }";
    assert_eq!(s.run("r1", &req(define)).status, RunStatus::Ok);
    // A later cell calls them.
    let call = "four([1, 2, 3])";
    let want = s.run("r2", &req(call)).value.unwrap().display();
    assert_eq!(want, "4 8 12");
    s.save(&dir).unwrap();
    let (mut r, skipped) =
        Session::restore(&dir, SessionOptions::default(), Box::new(|_| {})).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    let got = r.run("r3", &req(call));
    assert_eq!(got.status, RunStatus::Ok, "{:?}", got.diagnostic);
    assert_eq!(got.value.unwrap().display(), want);
    // The restored signature is still checked at the call (E0219).
    let bad = r.run("r4", &req("twice([[1, 2]])"));
    assert_eq!(bad.diagnostic.unwrap().code, code::E0219);

    // A saved text that does not parse as that function is not restored, and
    // says so; the other one is.
    let path = dir.join("session.json");
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    state["functions"][1]["source"] = serde_json::json!("fn twice(x) {");
    std::fs::write(&path, serde_json::to_vec(&state).unwrap()).unwrap();
    let (r, skipped) = Session::restore(&dir, SessionOptions::default(), Box::new(|_| {})).unwrap();
    assert_eq!(
        skipped,
        ["function `twice`: its saved definition does not parse"]
    );
    assert!(r.workspace().functions.contains_key("four"));
    assert!(!r.workspace().functions.contains_key("twice"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sessions_estimate_with_their_calibration_cache() {
    use mlpl_lang::estimate::calibration::{Calibration, DeviceModel};
    let src = "m = chain(linear(32, 128, 1), relu_layer(), linear(128, 8, 2))\nestimate_train(m, 100, 64, 1)";
    let mut cal = Calibration::default();
    let e = cal.entry_mut("cpu");
    e.gflops = 3.0;
    let mut model = DeviceModel::assumed("cpu", 3.0);
    model.baseline_bytes = 7e8;
    e.model = Some(model);
    let cal = Arc::new(cal);
    let run = |calibration: Option<Arc<Calibration>>| {
        let opts = SessionOptions {
            calibration,
            ..SessionOptions::default()
        };
        let mut s = Session::new("est", opts, Box::new(|_| {}));
        s.run("r1", &req(src)).value.unwrap().display()
    };
    let nominal = run(None);
    let calibrated = run(Some(cal.clone()));
    assert_ne!(nominal, calibrated);
    // The same figures as an interpreter given the cache the way `mlpl run` gives it.
    let mut ws = Workspace::new();
    ws.calibration = Some(cal);
    let mut it = Interp::new(ws);
    let prog = mlpl_syntax::parse(src).program;
    let direct = it.run(&prog).unwrap().unwrap().display();
    assert_eq!(calibrated, direct);
    // Its peak memory includes the cache's 700 MB baseline.
    let mem: f64 = calibrated
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(mem > 7e8, "{calibrated}");
}
