//! Cells run in one interpreter, as `mlpl run` runs them: values, warnings and
//! errors rendered as the CLI renders them, every `train` step told to a sink
//! as it happens, and the experiment runs each cell recorded.

use mlpl_diag::SourceFile;
use mlpl_lang::data::experiments::{self, RunRecord};
use mlpl_lang::eval::{Interp, RunObserver, Workspace};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::{diagnostics_json, TRAIN_LIMIT};

/// Where a run reports its `train` steps (the browser build posts them to the
/// page as they happen): the loop (0-based, in the order the run started
/// them), the completed step, the loop's total, the loss and the step's time.
pub type StepSink = fn(train_loop: usize, step: usize, total: usize, loss: f64, step_ms: f64);

/// What a run saw of its `train` loops.
#[derive(Default)]
struct Seen {
    losses: Vec<f64>,
    loops: usize,
    over_limit: Option<usize>,
}

struct Observer {
    seen: Arc<Mutex<Seen>>,
    cancel: Arc<AtomicBool>,
    sink: Option<StepSink>,
}

impl RunObserver for Observer {
    fn on_train_start(&mut self, total: usize, _depth: usize) {
        let mut seen = self.seen.lock().unwrap();
        seen.loops += 1;
        if total > TRAIN_LIMIT {
            seen.over_limit = Some(total);
            self.cancel.store(true, Ordering::SeqCst);
        }
    }

    fn on_step(&mut self, step: usize, total: usize, loss: f64, _lr: Option<f64>, step_ms: f64) {
        let train_loop = {
            let mut seen = self.seen.lock().unwrap();
            seen.losses.push(loss);
            seen.loops.saturating_sub(1)
        };
        if let Some(sink) = self.sink {
            sink(train_loop, step, total, loss, step_ms);
        }
    }
}

/// An interpreter whose workspace lives across runs, as a notebook's cells
/// share theirs.
pub struct Session {
    it: Interp,
    seen: Arc<Mutex<Seen>>,
}

impl Default for Session {
    fn default() -> Self {
        Session::new(None)
    }
}

/// A record as the page keeps it (`run.json`'s fields; non-finite metrics as
/// `"NaN"`, `"inf"`, `"-inf"`).
fn record_value(r: &RunRecord) -> Json {
    serde_json::to_value(r).unwrap_or(Json::Null)
}

impl Session {
    /// A session on the CPU backend; `sink` is told about every `train` step.
    pub fn new(sink: Option<StepSink>) -> Session {
        let mut it = Interp::new(Workspace::new());
        let seen = Arc::new(Mutex::new(Seen::default()));
        it.set_observer(Box::new(Observer {
            seen: seen.clone(),
            cancel: it.cancel.clone(),
            sink,
        }));
        Session { it, seen }
    }

    /// Runs `source` (a cell or a whole file) as `mlpl run` does, in this
    /// session's workspace: `{"ok", "value", "svg", "warnings", "error",
    /// "losses", "experiments"}` (`experiments`: the runs of `experiment`
    /// blocks this text recorded). `first_line` (0-based) is where the text
    /// starts in its file, so rendered messages name the file's lines.
    pub fn run(&mut self, source: &str, first_line: usize) -> String {
        let src = SourceFile::new("playground.mlpl", source).with_line_offset(first_line);
        *self.seen.lock().unwrap() = Seen::default();
        let parsed = mlpl_syntax::parse(src.text());
        if let Some(first) = parsed.diagnostics.iter().find(|d| d.is_error()) {
            return json!({
                "ok": false,
                "value": null,
                "svg": false,
                "warnings": [],
                "error": diagnostics_json(std::slice::from_ref(first), &src)[0],
                "losses": [],
                "experiments": [],
            })
            .to_string();
        }
        let recorded_before = self.it.ws.experiments.len();
        let result = self.it.run(&parsed.program);
        let warnings = self.it.take_warnings();
        let seen = std::mem::take(&mut *self.seen.lock().unwrap());
        let (value, svg, error) = match result {
            Ok(Some(v)) => (Some(v.display()), v.is_svg(), None),
            Ok(None) => (None, false, None),
            Err(d) => {
                let d = match seen.over_limit {
                    Some(n) => d
                        .note(format!(
                            "this loop asks for {n} iterations; the browser playground runs at most {TRAIN_LIMIT} per `train` loop"
                        ))
                        .help("run larger trainings with `mlpl run`"),
                    None => d,
                };
                (None, false, Some(d))
            }
        };
        let error = error.map_or(Json::Null, |d| diagnostics_json(&[d], &src)[0].clone());
        let recorded: Vec<Json> = self.it.ws.experiments
            [recorded_before.min(self.it.ws.experiments.len())..]
            .iter()
            .map(record_value)
            .collect();
        json!({
            "ok": error.is_null(),
            "value": value,
            "svg": svg,
            "warnings": diagnostics_json(&warnings, &src),
            "error": error,
            "losses": seen.losses,
            "experiments": recorded,
        })
        .to_string()
    }
}

/// Runs a whole program in a fresh session (`mlpl run FILE`).
pub fn run(source: &str) -> String {
    Session::new(None).run(source, 0)
}

/// `compare`'s report (LANGUAGE §17.3) of two experiment records the page
/// kept, given as `{"a": record, "b": record}`: `{"report"}`, or `{"error"}`
/// when they are not records.
pub fn compare(request: &str) -> String {
    let parsed: Result<(RunRecord, RunRecord), String> = serde_json::from_str::<Json>(request)
        .map_err(|e| e.to_string())
        .and_then(|v| {
            let get = |k: &str| {
                serde_json::from_value::<RunRecord>(v[k].clone())
                    .map_err(|e| format!("`{k}` is not an experiment record: {e}"))
            };
            Ok((get("a")?, get("b")?))
        });
    match parsed {
        Ok((a, b)) => {
            json!({ "report": experiments::compare_report(&a.name, &a, &b.name, &b) }).to_string()
        }
        Err(e) => json!({ "error": e }).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Json {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn a_session_keeps_its_workspace_and_reports_values_and_errors() {
        let mut s = Session::default();
        let first = parse(&s.run("a = 2\n", 0));
        assert_eq!(first["ok"], true, "{first}");
        let second = parse(&s.run("a * 21\n", 3));
        assert_eq!(second["value"], "42");
        let bad = parse(&s.run("nope + 1\n", 10));
        assert_eq!(bad["ok"], false);
        assert_eq!(bad["error"]["code"], "E0101");
        assert_eq!(bad["error"]["line"], 11);
    }

    #[test]
    fn a_train_loop_over_the_limit_is_stopped_with_the_reason() {
        let out = parse(&run(&format!(
            "w = 0\ntrain {} {{ w = w + 1 }}\n",
            TRAIN_LIMIT + 1
        )));
        assert_eq!(out["ok"], false, "{out}");
        let text = out["error"]["rendered"].as_str().unwrap();
        assert!(text.contains("at most 5000"), "{text}");
    }

    #[test]
    fn each_cell_reports_the_experiment_runs_it_recorded_and_two_compare() {
        let mut s = Session::default();
        let a = parse(&s.run(
            "experiment \"a\" { loss_metric = 0.5\n acc_metric = 0.75 }\n",
            0,
        ));
        let b = parse(&s.run("experiment \"b\" { loss_metric = 0.25 }\n", 1));
        let none = parse(&s.run("x = 1\n", 2));
        assert_eq!(none["experiments"], json!([]));
        let (ra, rb) = (&a["experiments"][0], &b["experiments"][0]);
        assert_eq!(a["experiments"].as_array().unwrap().len(), 1, "{a}");
        assert_eq!(ra["name"], "a");
        assert_eq!(
            ra["metrics"],
            json!({ "acc_metric": 0.75, "loss_metric": 0.5 })
        );
        // The b run also holds the a run's `acc_metric` (still bound).
        assert_eq!(rb["metrics"]["loss_metric"], 0.25);
        let report = parse(&compare(&json!({ "a": ra, "b": rb }).to_string()));
        let in_language = parse(&s.run("compare(\"a\", \"b\")\n", 3));
        assert_eq!(report["report"], in_language["value"], "{report}");
        assert!(parse(&compare("{\"a\": 1}"))["error"].is_string());
    }
}
