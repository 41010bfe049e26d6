//! `mlpl run --events jsonl`: the raw telemetry events of a run, one per line.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlpl-cli-events-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(dir: &PathBuf, file: &str, extra: &[&str]) -> (Output, Vec<Value>) {
    let out = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["run", file, "--events", "jsonl"])
        .args(extra)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (out, events)
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn a_training_script_prints_its_events() {
    let d = temp_dir("train");
    std::fs::write(
        d.join("t.mlpl"),
        "W = param[2]\ntrain 40 { adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8); sum((W - [1, 2]) * (W - [1, 2])) }\nW\n",
    )
    .unwrap();
    let (out, events) = run(&d, "t.mlpl", &[]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = types(&events);
    assert_eq!(t[0], "run_started");
    assert_eq!(*t.last().unwrap(), "run_finished");
    assert!(t.contains(&"step") && t.contains(&"value") && t.contains(&"output"));
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1);
        assert_eq!(e["v"], 1);
        assert_eq!(e["session"], "cli");
    }
    let last_step = events.iter().rev().find(|e| e["type"] == "step").unwrap();
    assert_eq!(
        (last_step["step"].as_u64(), last_step["total"].as_u64()),
        (Some(40), Some(40))
    );
    let value = events.iter().find(|e| e["type"] == "value").unwrap();
    assert_eq!(value["shape"], serde_json::json!([2]));
    assert_eq!(events.last().unwrap()["status"], "ok");
}

#[test]
fn errors_end_the_run_with_a_diagnostic_and_exit_1() {
    let d = temp_dir("error");
    std::fs::write(d.join("e.mlpl"), "x = 1\ny = x + nope\n").unwrap();
    let (out, events) = run(&d, "e.mlpl", &[]);
    assert_eq!(out.status.code(), Some(1));
    let fin = events.last().unwrap();
    assert_eq!(fin["status"], "error");
    assert_eq!(fin["diagnostic"]["code"], "E0101");
    assert_eq!(fin["diagnostic"]["line"], 2);
    assert_eq!(fin["diagnostic"]["file"], "e.mlpl");
}

#[test]
fn charts_become_artifacts_with_a_path() {
    let d = temp_dir("svg");
    std::fs::write(
        d.join("c.mlpl"),
        "\"<svg xmlns='http://www.w3.org/2000/svg'></svg>\"\n",
    )
    .unwrap();
    let svg = d.join("charts");
    let (out, events) = run(&d, "c.mlpl", &["--svg-out", svg.to_str().unwrap()]);
    assert!(out.status.success());
    let a = events.iter().find(|e| e["type"] == "artifact").unwrap();
    assert_eq!(a["kind"], "svg");
    let path = a["path"].as_str().unwrap();
    assert!(std::path::Path::new(path).is_file());
    let o = events.iter().find(|e| e["type"] == "output").unwrap();
    assert_eq!(o["text"], format!("viz: {path}\n"));
}

#[test]
fn device_events_say_whether_train_steps_are_captured_and_why_not() {
    let d = temp_dir("step-mode");
    let body = "adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8); sum(W * W)";
    std::fs::write(
        d.join("c.mlpl"),
        format!("W = param[2]\ntrain 30 {{ {body} }}\nW\n"),
    )
    .unwrap();
    std::fs::write(
        d.join("g.mlpl"),
        format!("W = param[2]\nk = 0\ntrain 30 {{ k = k + 1; {body} }}\nW\n"),
    )
    .unwrap();
    let mode = |events: &[Value]| {
        let last = events.iter().rev().find(|e| e["type"] == "device").unwrap();
        (
            last["step_mode"].as_str().map(str::to_string),
            last["step_mode_reason"].as_str().map(str::to_string),
        )
    };
    let value =
        |events: &[Value]| events.iter().find(|e| e["type"] == "value").unwrap()["text"].clone();
    let (out, captured) = run(&d, "c.mlpl", &[]);
    assert!(out.status.success());
    assert_eq!(mode(&captured), (Some("captured".into()), None));
    let (_, eager) = run(&d, "c.mlpl", &["--no-capture"]);
    let (m, why) = mode(&eager);
    assert_eq!(m.as_deref(), Some("eager"));
    assert!(why.unwrap().contains("turned off"));
    assert_eq!(
        value(&captured),
        value(&eager),
        "the same result either way"
    );
    // A guard that fails after recording is also a `warning` event at the loop.
    let (out, guarded) = run(&d, "g.mlpl", &[]);
    assert!(out.status.success());
    assert_eq!(mode(&guarded).0.as_deref(), Some("eager"));
    let w = guarded
        .iter()
        .find(|e| e["type"] == "warning" && e["diagnostic"]["code"] == "capture")
        .expect("a capture warning");
    assert_eq!(w["diagnostic"]["line"], 3);
    assert!(
        w["diagnostic"]["label"].as_str().unwrap().contains("`k`"),
        "{w}"
    );
}
