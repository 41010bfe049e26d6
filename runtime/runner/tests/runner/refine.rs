//! Refinement from measurement: `step_measured` events of `train` loops and
//! the per-device correction a run stores in the calibration cache, which the
//! next estimate uses (docs/estimates.md, "Refinement from measurement").

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mlpl_lang::estimate::calibration::{Calibration, Correction, DeviceModel, Measured};
use mlpl_lang::step_cost::cost::estimate_step;
use mlpl_lang::train_loops::loops::train_loops;
use mlpl_runner::session::{
    CellRef, Event, EventBody, RefineOptions, RunRequest, Session, SessionOptions,
};
use serde_json::Value;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlpl-refine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A cache whose CPU model is absurdly fast (1 ps per kernel, 10⁹ GFLOP/s,
/// 10⁹ GB/s): every real step is more than 10× slower than it predicts.
fn fast_cache() -> Calibration {
    let mut m = DeviceModel::assumed("cpu", 1e9);
    m.dispatch_s = Measured::exact(1e-12);
    m.interp_s = Measured::exact(1e-12);
    m.cache_bandwidth_gbs = Measured::exact(1e9);
    m.bandwidth_gbs = Measured::exact(1e9);
    m.transcendental_s = Measured::exact(0.0);
    let mut c = Calibration::default();
    let e = c.entry_mut("cpu");
    e.gflops = 1e9;
    e.model = Some(m);
    c
}

/// A training loop in the second cell of a notebook (its first line is the
/// document's line 7).
const CELL: &str = "X = randn(1, [64, 32])\ny = argmax(randn(2, [64, 8]), 1)\nmodel = chain(linear(32, 64, 1), relu_layer(), linear(64, 8, 2))\ntrain 30 {\n  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)\n}\n";

fn session(cache: &Path, capture: bool) -> (Session, Arc<std::sync::Mutex<Vec<Event>>>) {
    let events: Arc<std::sync::Mutex<Vec<Event>>> = Arc::default();
    let sink = events.clone();
    let opts = SessionOptions {
        calibration: Calibration::load(cache).map(Arc::new),
        refine: RefineOptions {
            cache: Some(cache.to_path_buf()),
            own_process: false,
        },
        capture_steps: capture,
        ..SessionOptions::default()
    };
    let s = Session::new(
        "t",
        opts,
        Box::new(move |e| sink.lock().unwrap().push(e.clone())),
    );
    (s, events)
}

fn run_cell(s: &mut Session, run: &str) {
    let req = RunRequest {
        code: CELL.into(),
        cell: Some(CellRef {
            uri: "file:///nb.mlpl".into(),
            index: 1,
            start_line: 6,
        }),
        device: None,
        timeline: false,
    };
    let out = s.run(run, &req);
    assert!(out.diagnostic.is_none(), "{:?}", out.diagnostic);
}

/// The `step_measured` events of run `run`.
fn measured(events: &[Event], run: &str) -> Vec<EventBody> {
    events
        .iter()
        .filter(|e| e.run == run)
        .filter(|e| matches!(e.body, EventBody::StepMeasured { .. }))
        .map(|e| e.body.clone())
        .collect()
}

/// The uncorrected estimate of `CELL`'s loop on `cal`'s CPU model, seconds.
fn uncorrected(cal: &Calibration) -> f64 {
    let (checked, facts) = mlpl_lang::check::query::check_with_facts(CELL);
    let lp = &train_loops(&checked.program, &facts)[0];
    let mut m = cal.devices[0].model.clone().unwrap();
    m.correction = Correction::default();
    estimate_step(&lp.model, &lp.frozen, &lp.step, true, &m)
        .seconds
        .mid
}

#[test]
fn a_run_stores_the_correction_and_the_next_estimate_uses_it() {
    let d = temp_dir("learn");
    let cache = d.join("calibration.json");
    fast_cache().save(&cache).unwrap();
    let (mut s, events) = session(&cache, true);
    run_cell(&mut s, "r1");
    let evs = events.lock().unwrap().clone();
    let m = measured(&evs, "r1");
    // At least one report while running, then exactly one at the end.
    assert!(m.len() >= 2, "{m:?}");
    let EventBody::StepMeasured {
        loop_index,
        start_line,
        end_line,
        device,
        mode,
        step,
        total,
        measured_steps,
        step_ms,
        step_ms_lo,
        step_ms_hi,
        peak_rss_bytes,
        device_peak_bytes,
        eta_s,
        done,
        estimate,
        correction,
        ..
    } = m.last().unwrap().clone()
    else {
        unreachable!()
    };
    assert_eq!((loop_index, start_line, end_line), (0, 10, 12));
    assert_eq!((device.as_str(), mode.as_str()), ("cpu", "captured"));
    assert_eq!((step, total, done, eta_s), (30, 30, true, 0.0));
    // Two recorded iterations are not measured; the 28 replayed ones are.
    assert_eq!(measured_steps, 28);
    assert!(step_ms_lo <= step_ms && step_ms <= step_ms_hi && step_ms > 0.0);
    assert!(peak_rss_bytes.is_some_and(|b| b > 0));
    assert_eq!(device_peak_bytes, None);
    // What the editor showed before: the uncorrected estimate.
    let before = estimate.unwrap();
    let cal = Calibration::load(&cache).unwrap();
    let plain = uncorrected(&cal);
    assert!((before.step_ms - plain * 1e3).abs() <= plain * 1e3 * 1e-9);
    // Measured ÷ estimated is far above 10: one run moves the correction by 2×
    // at most. A `mlpl serve`-like session learns no memory correction.
    let c = correction.unwrap();
    assert_eq!((c.time, c.memory, c.runs), (2.0, 1.0, 1));
    let stored = cal.devices[0].model.as_ref().unwrap().correction;
    assert_eq!(stored, c);
    // Every earlier report is a running one with an ETA.
    for e in &m[..m.len() - 1] {
        let EventBody::StepMeasured {
            done,
            step,
            eta_s,
            step_ms,
            correction,
            ..
        } = e
        else {
            unreachable!()
        };
        assert!(!done && *step < 30 && correction.is_none());
        assert!((eta_s - (30 - step) as f64 * step_ms / 1e3).abs() < 1e-9);
    }
    // The next estimate uses it: the editor's (the LSP reads this file), the
    // event's, and a second run learns from there (geometric mean 4.5, moved
    // by 2× at most: 4).
    let (model, _) = mlpl_lang::estimate::calibration::device_model(Some(&cal), "cpu", 50.0);
    let (checked, facts) = mlpl_lang::check::query::check_with_facts(CELL);
    let lp = &train_loops(&checked.program, &facts)[0];
    let next = estimate_step(&lp.model, &lp.frozen, &lp.step, true, &model);
    assert!((next.seconds.mid - 2.0 * plain).abs() <= plain * 1e-9);
    run_cell(&mut s, "r2");
    let evs = events.lock().unwrap().clone();
    let EventBody::StepMeasured {
        estimate,
        correction,
        ..
    } = measured(&evs, "r2").last().unwrap().clone()
    else {
        unreachable!()
    };
    assert!((estimate.unwrap().step_ms - 2.0 * plain * 1e3).abs() <= plain * 1e-6);
    let c = correction.unwrap();
    assert_eq!((c.time, c.runs), (4.0, 2));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn interpreted_loops_are_measured_after_their_first_iteration() {
    let d = temp_dir("eager");
    let cache = d.join("calibration.json");
    fast_cache().save(&cache).unwrap();
    let (mut s, events) = session(&cache, false);
    run_cell(&mut s, "r1");
    let evs = events.lock().unwrap().clone();
    let EventBody::StepMeasured {
        mode,
        measured_steps,
        step_peak_bytes,
        correction,
        ..
    } = measured(&evs, "r1").last().unwrap().clone()
    else {
        unreachable!()
    };
    assert_eq!((mode.as_str(), measured_steps), ("eager", 29));
    assert_eq!(step_peak_bytes, None);
    assert_eq!(correction.map(|c| c.runs), Some(1));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn without_a_cache_nothing_is_written_and_short_loops_are_not_reported() {
    let d = temp_dir("none");
    let cache = d.join("calibration.json");
    let (mut s, events) = session(&cache, true);
    run_cell(&mut s, "r1");
    let evs = events.lock().unwrap().clone();
    let m = measured(&evs, "r1");
    let EventBody::StepMeasured {
        estimate,
        correction,
        ..
    } = m.last().unwrap()
    else {
        unreachable!()
    };
    // Measured and reported, but no cache: no estimate, nothing stored, no file.
    assert!(estimate.is_none() && correction.is_none());
    assert!(!cache.exists());
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    // A loop of 4 iterations has 2 replayed: too few to report.
    let req = RunRequest::code(CELL.replace("train 30", "train 4"));
    s.run("r2", &req);
    assert!(measured(&events.lock().unwrap(), "r2").is_empty());
    std::fs::remove_dir_all(&d).ok();
}

fn mlpl_run(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mlpl"));
    cmd.args(["run", "t.mlpl"])
        .args(extra)
        .current_dir(dir)
        .env("MLPL_CACHE_DIR", dir.join("cache"))
        .env_remove("MLPL_NO_REFINE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn runs_in(cache: &Path) -> u32 {
    Calibration::load(cache).unwrap().devices[0]
        .model
        .as_ref()
        .unwrap()
        .correction
        .runs
}

#[test]
fn mlpl_run_learns_unless_switched_off() {
    let d = temp_dir("cli");
    std::fs::write(d.join("t.mlpl"), CELL).unwrap();
    let cache = d.join("cache").join("calibration.json");
    fast_cache().save(&cache).unwrap();
    // `mlpl run --events jsonl`: the event, and the correction stored.
    let events = mlpl_run(&d, &["--events", "jsonl"], &[]);
    let last = events
        .iter()
        .rev()
        .find(|e| e["type"] == "step_measured")
        .unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(
        (last["start_line"].as_u64(), last["end_line"].as_u64()),
        (Some(4), Some(6))
    );
    assert_eq!(last["correction"]["runs"], 1);
    assert_eq!(runs_in(&cache), 1);
    // Plain `mlpl run` (no terminal, no events) learns through the same code.
    mlpl_run(&d, &[], &[]);
    assert_eq!(runs_in(&cache), 2);
    // Switched off: the flag, or the environment.
    mlpl_run(&d, &["--no-refine"], &[]);
    mlpl_run(&d, &["--events", "jsonl"], &[("MLPL_NO_REFINE", "1")]);
    assert_eq!(runs_in(&cache), 2);
    // No cache: none is made.
    std::fs::remove_dir_all(d.join("cache")).unwrap();
    let events = mlpl_run(&d, &["--events", "jsonl"], &[]);
    assert!(events.iter().any(|e| e["type"] == "step_measured"));
    assert!(!d.join("cache").exists());
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn mlpl_serve_sessions_report_measurements_and_learn_time_only() {
    use crate::serve_support::{Server, TOKEN};
    let d = temp_dir("serve");
    let cache = d.join("calibration.json");
    fast_cache().save(&cache).unwrap();
    let srv = Server::spawn_env(
        &["serve", "--bind", "127.0.0.1:0", "--token", TOKEN],
        &[("MLPL_CACHE_DIR", d.to_str().unwrap())],
    );
    let id = srv.session();
    let events = srv.events(&id, None);
    let (status, body) = srv.post(
        &format!("/v1/sessions/{id}/runs"),
        &serde_json::json!({"code": CELL, "cell": {"uri": "file:///nb.mlpl", "index": 1, "start_line": 6}}),
    );
    assert_eq!(status, 202, "{body}");
    let got = events.until_finished(body["run"].as_str().unwrap());
    let last = got
        .iter()
        .rev()
        .find(|e| e.event == "step_measured")
        .unwrap();
    assert_eq!(last.data["done"], true);
    assert_eq!(last.data["start_line"], 10);
    // The server's peak memory is every session's: time is learnt, memory not.
    assert_eq!(last.data["correction"]["time"], 2.0);
    assert_eq!(last.data["correction"]["memory"], 1.0);
    assert_eq!(runs_in(&cache), 1);
    srv.stop();
    std::fs::remove_dir_all(&d).ok();
}
