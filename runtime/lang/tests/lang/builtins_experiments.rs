//! Experiments (LANGUAGE §10.16, §17): `experiment` records, their storage in the
//! experiment directory, and the `compare` report.

use crate::common;

use common::{error_code, error_of, eval, run_with, temp_dir, Session};

#[test]
fn compare_reports_each_metric() {
    assert_eq!(
        eval("experiment \"a\" { loss_metric = 0.5 }\nexperiment \"b\" { loss_metric = 0.25 }\ncompare(\"a\", \"b\")"),
        "compare a vs b\n  loss_metric: 0.5 vs 0.25 (delta -0.25)"
    );
    assert_eq!(
        eval("experiment \"a\" { loss_metric = 0.25 }\nexperiment \"b\" { loss_metric = 0.75 }\ncompare(\"a\", \"b\")"),
        "compare a vs b\n  loss_metric: 0.25 vs 0.75 (delta +0.5)"
    );
    // Equal values: +0. Deltas are computed in float64.
    assert_eq!(
        eval("experiment \"a\" { x_metric = 3 }\nexperiment \"b\" { x_metric = 3 }\ncompare(\"a\", \"b\")"),
        "compare a vs b\n  x_metric: 3 vs 3 (delta +0)"
    );
    assert_eq!(
        eval("experiment \"a\" { x_metric = 0.1 }\nexperiment \"b\" { x_metric = 0.3 }\ncompare(\"a\", \"b\")"),
        "compare a vs b\n  x_metric: 0.1 vs 0.3 (delta +0.19999999999999998)"
    );
}

#[test]
fn compare_lists_the_union_of_keys_sorted() {
    // Metrics are workspace variables: "new" sees acc_metric and loss_metric from
    // before, drops x_metric by re-binding it to a string, and adds f1_metric.
    let src = "experiment \"base\" { loss_metric = 1; x_metric = 0.5 }\n\
               experiment \"new\" { loss_metric = 0.5; f1_metric = 2; x_metric = \"gone\" }\n\
               compare(\"base\", \"new\")";
    assert_eq!(
        eval(src),
        "compare base vs new\n  f1_metric: - vs 2\n  loss_metric: 1 vs 0.5 (delta -0.5)\n  x_metric: 0.5 vs -"
    );
}

#[test]
fn compare_without_metrics() {
    assert_eq!(
        eval("experiment \"a\" { x = 1 }\nexperiment \"b\" { }\ncompare(\"a\", \"b\")"),
        "compare a vs b -- (no metrics on either run)"
    );
}

#[test]
fn metrics_are_scalar_arrays_ending_in_metric() {
    // Metrics assigned before the block are recorded too; strings, non-scalars and
    // other names are not.
    let src = "old_metric = 4\n\
               experiment \"a\" {\n\
                 name_metric = \"text\"\n\
                 vec_metric = [1, 2]\n\
                 loss = 9\n\
                 acc_metric = mean([0.1, 0.2])\n\
               }\n\
               experiment \"b\" { old_metric = 5 }\n\
               compare(\"a\", \"b\")";
    assert_eq!(
        eval(src),
        "compare a vs b\n  acc_metric: 0.15 vs 0.15 (delta +0)\n  old_metric: 4 vs 5 (delta +1)"
    );
}

#[test]
fn compare_uses_the_most_recent_run() {
    let src = "experiment \"a\" { m_metric = 1 }\n\
               experiment \"b\" { m_metric = 2 }\n\
               experiment \"a\" { m_metric = 10 }\n\
               compare(\"a\", \"b\")";
    assert_eq!(eval(src), "compare a vs b\n  m_metric: 10 vs 2 (delta -8)");
    // A run compared with itself.
    assert_eq!(
        eval("experiment \"a\" { m_metric = 1.5 }\ncompare(\"a\", \"a\")"),
        "compare a vs a\n  m_metric: 1.5 vs 1.5 (delta +0)"
    );
    // Names are any string expressions.
    assert_eq!(
        eval("n = \"run\"\nexperiment n { m_metric = 1 }\ncompare(n, \"run\")"),
        "compare run vs run\n  m_metric: 1 vs 1 (delta +0)"
    );
}

#[test]
fn compare_errors() {
    let d = error_of("experiment \"a\" { m_metric = 1 }\ncompare(\"a\", \"x\")");
    assert_eq!(d.code, "E0108");
    assert_eq!(d.message, "no run named \"x\"");
    assert_eq!(error_code("compare(\"a\", \"b\")"), "E0108");
    assert_eq!(error_code("compare(1, \"b\")"), "E0302");
    assert_eq!(error_code("compare(\"a\")"), "E0103");
}

#[test]
fn a_failing_body_records_nothing() {
    let mut s = Session::new(None, None);
    assert_eq!(
        s.error_code("experiment \"bad\" { m_metric = 1; iota(\"x\") }"),
        "E0301"
    );
    assert_eq!(s.error_code("compare(\"bad\", \"bad\")"), "E0108");
    // The bindings made before the error persist.
    assert_eq!(s.eval("m_metric"), "1");
}

#[test]
fn experiment_values_and_scope() {
    assert_eq!(eval("experiment \"e\" { 7 }"), "7");
    assert_eq!(eval("experiment \"e\" { }"), "0");
    assert_eq!(eval("experiment \"e\" { y = [1, 2] }\ny * 2"), "2 4");
    assert_eq!(error_code("experiment 5 { }"), "E0302");
}

#[test]
fn records_are_written_and_read_back() {
    let dir = temp_dir("exp");
    let out = run_with(
        "W : [rows, cols] = param[2, 3]\nb = param[3]\nexperiment \"baseline\" { loss_metric = 0.5 }",
        None,
        Some(&dir),
    );
    assert_eq!(out.shown(), "0.5");
    let runs: Vec<_> = std::fs::read_dir(dir.join("baseline"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    let stamp = runs[0].file_name().into_string().unwrap();
    let text = std::fs::read_to_string(runs[0].path().join("run.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["name"], "baseline");
    assert_eq!(json["timestamp_ns"].to_string(), stamp);
    assert_eq!(json["metrics"], serde_json::json!({ "loss_metric": 0.5 }));
    assert_eq!(
        json["params_snapshot"],
        serde_json::json!({
            "W": { "shape": [2, 3], "labels": ["rows", "cols"] },
            "b": { "shape": [3], "labels": null }
        })
    );
    // A new workspace with the same directory sees the run; a run present in the
    // log and on disk is counted once.
    let mut s = Session::new(None, Some(&dir));
    assert_eq!(
        s.eval("experiment \"next\" { loss_metric = 0.25 }\ncompare(\"baseline\", \"next\")"),
        "compare baseline vs next\n  loss_metric: 0.5 vs 0.25 (delta -0.25)"
    );
    assert_eq!(std::fs::read_dir(dir.join("next")).unwrap().count(), 1);
}

#[test]
fn float32_metrics_are_written_as_displayed() {
    let dir = temp_dir("exp-f32");
    run_with(
        "experiment \"r\" { acc_metric = mean([0.1, 0.2]) }",
        None,
        Some(&dir),
    )
    .shown();
    let run = std::fs::read_dir(dir.join("r"))
        .unwrap()
        .flatten()
        .next()
        .unwrap();
    let text = std::fs::read_to_string(run.path().join("run.json")).unwrap();
    assert!(text.contains("\"acc_metric\": 0.15"), "{text}");
}

#[test]
fn params_snapshot_follows_the_tracking_rules() {
    // §5.7: param[…] tracks (also through an annotation); re-binding to an array
    // keeps tracking; binding a string removes it; tensor[…] is never tracked.
    let dir = temp_dir("exp-tracking");
    run_with(
        "W = param[2]\nW = W + 1\nV : [v] = param[3]\nS = param[1]\nS = \"s\"\nS = [1, 2]\nT = tensor[4]\n\
         experiment \"t\" { }",
        None,
        Some(&dir),
    )
    .shown();
    let run = std::fs::read_dir(dir.join("t"))
        .unwrap()
        .flatten()
        .next()
        .unwrap();
    let text = std::fs::read_to_string(run.path().join("run.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json["params_snapshot"],
        serde_json::json!({
            "V": { "shape": [3], "labels": ["v"] },
            "W": { "shape": [2], "labels": null }
        })
    );
    assert_eq!(json["metrics"], serde_json::json!({}));
}
