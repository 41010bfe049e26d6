//! Experiments (LANGUAGE §10.16, §17).

use super::site::CallSite;
use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::data::experiments::{self, RunRecord};
use crate::eval::Call;
use crate::value::Value;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[Builtin {
    name: "compare",
    params: &[req("a", Str), req("b", Str)],
    summary: "compare the metrics of two experiment runs",
    doc: "`compare(a, b)` takes the most recent runs named a and b (from this workspace and the experiment directory) and reports each metric as `key: VA vs VB (delta +D)`. E0108 when a run does not exist.",
    example: "experiment \"a\" { loss_metric = 0.5 }\nexperiment \"b\" { loss_metric = 0.25 }\ncompare(\"a\", \"b\")",
    diff: Diff::Effect,
    facts: Facts::NONE,
    section: "10.16",
    run: compare, shape: Some(super::experiments_shapes::compare)
}];

/// Every run this workspace knows: its log merged with the records on disk.
pub fn all_runs(c: &Call) -> Vec<RunRecord> {
    let disk =
        c.it.ws
            .exp_dir
            .as_deref()
            .map(experiments::read_records)
            .unwrap_or_default();
    experiments::merge_runs(&c.it.ws.experiments, &disk)
}

fn compare(c: &mut Call) -> Result<Value, Diagnostic> {
    let (a, b) = (c.string(0)?.to_string(), c.string(1)?.to_string());
    let runs = all_runs(c);
    let latest = |name: &str| {
        runs.iter()
            .filter(|r| r.name == name)
            .max_by_key(|r| r.timestamp_ns)
    };
    let find = |i: usize, name: &str| {
        latest(name).ok_or_else(|| c.error_at(i, code::E0108, format!("no run named \"{name}\""), "no experiment with this name").help("run an `experiment NAME { ... }` block first, or pass --exp-dir to read recorded runs"))
    };
    let (ra, rb) = (find(0, &a)?, find(1, &b)?);
    Ok(Value::string(experiments::compare_report(&a, ra, &b, rb)))
}
