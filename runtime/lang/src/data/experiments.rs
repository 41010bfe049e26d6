//! Experiment run records (LANGUAGE §17): their JSON storage under an
//! experiment directory, merging the in-memory log with the records on disk, and
//! the `compare(a, b)` report.

use mlpl_diag::code;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::display::format_f64;

/// One recorded run of an `experiment NAME { body }` block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The experiment's name.
    pub name: String,
    /// Wall-clock nanoseconds since the Unix epoch, taken on entry.
    pub timestamp_ns: u128,
    /// Every `*_metric` scalar, by name (sorted).
    #[serde(
        serialize_with = "serialize_metrics",
        deserialize_with = "deserialize_metrics"
    )]
    pub metrics: BTreeMap<String, f64>,
    /// Shape and axis names of every tracked parameter, by name.
    pub params_snapshot: BTreeMap<String, ParamInfo>,
}

/// The shape and axis names of one tracked parameter at the end of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamInfo {
    /// The sizes of the axes.
    pub shape: Vec<usize>,
    /// `None` when no axis is named, otherwise one entry per axis.
    pub labels: Option<Vec<Option<String>>>,
}

/// A metric value as stored: a number, or `"NaN"`, `"inf"`, `"-inf"` (JSON has
/// no non-finite numbers).
#[derive(Deserialize)]
#[serde(untagged)]
enum StoredMetric {
    Number(f64),
    Text(String),
}

fn serialize_metrics<S: Serializer>(
    metrics: &BTreeMap<String, f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(metrics.len()))?;
    for (key, &value) in metrics {
        if value.is_finite() {
            map.serialize_entry(key, &value)?;
        } else {
            map.serialize_entry(key, &format_f64(value))?;
        }
    }
    map.end()
}

fn deserialize_metrics<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, f64>, D::Error> {
    let raw = BTreeMap::<String, StoredMetric>::deserialize(deserializer)?;
    raw.into_iter()
        .map(|(key, value)| {
            let number = match value {
                StoredMetric::Number(x) => x,
                StoredMetric::Text(text) => match text.as_str() {
                    "NaN" => f64::NAN,
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    _ => {
                        return Err(serde::de::Error::custom(format!(
                            "metric {key:?} is not a number: {text:?}"
                        )))
                    }
                },
            };
            Ok((key, number))
        })
        .collect()
}

/// The pretty-printed JSON of a record as written to `run.json`: metric values
/// are JSON numbers in the display format of LANGUAGE §7.2 (`0.5`, `3`,
/// `1000000000000000000000000`); non-finite values, which JSON cannot hold as
/// numbers, are the strings `"NaN"`, `"inf"` and `"-inf"`.
pub fn record_json(rec: &RunRecord) -> String {
    let mut out = String::from("{\n");
    out.push_str(&format!("  \"name\": {},\n", json_string(&rec.name)));
    out.push_str(&format!("  \"timestamp_ns\": {},\n", rec.timestamp_ns));
    if rec.metrics.is_empty() {
        out.push_str("  \"metrics\": {},\n");
    } else {
        out.push_str("  \"metrics\": {\n");
        let last = rec.metrics.len() - 1;
        for (i, (key, &value)) in rec.metrics.iter().enumerate() {
            let text = if value.is_finite() {
                format_f64(value)
            } else {
                json_string(&format_f64(value))
            };
            let comma = if i < last { "," } else { "" };
            out.push_str(&format!("    {}: {text}{comma}\n", json_string(key)));
        }
        out.push_str("  },\n");
    }
    let params = serde_json::to_string_pretty(&rec.params_snapshot)
        .unwrap_or_else(|_| "{}".to_string())
        .replace('\n', "\n  ");
    out.push_str(&format!("  \"params_snapshot\": {params}\n}}\n"));
    out
}

/// A JSON string literal (quotes and escapes included).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

/// A directory name for a run name: the name itself when it is a plain file
/// name, otherwise with `%`, path separators, `:`, control characters and a
/// leading `.` percent-encoded (the record's `name` field keeps the real name).
fn dir_name(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        let encode = matches!(
            c,
            '%' | '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|'
        ) || c.is_control()
            || (i == 0 && c == '.');
        if encode {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    out
}

/// Writes `rec` to `DIR/NAME/TIMESTAMP_NS/run.json` (creating the directories)
/// and returns the file's path. Names that are not plain file names are
/// percent-encoded in the directory name, so a record never lands outside `dir`.
pub fn write_record(dir: &Path, rec: &RunRecord) -> io::Result<PathBuf> {
    let run_dir = dir
        .join(dir_name(&rec.name))
        .join(rec.timestamp_ns.to_string());
    std::fs::create_dir_all(&run_dir)?;
    let path = run_dir.join("run.json");
    std::fs::write(&path, record_json(rec))?;
    Ok(path)
}

/// Every record under `DIR/*/*/run.json` that reads and parses, sorted by
/// timestamp then name; unreadable entries are ignored, and a missing directory
/// gives no records.
pub fn read_records(dir: &Path) -> Vec<RunRecord> {
    let mut out = Vec::new();
    let Ok(names) = std::fs::read_dir(dir) else {
        return out;
    };
    for name_entry in names.flatten() {
        let Ok(stamps) = std::fs::read_dir(name_entry.path()) else {
            continue;
        };
        for stamp_entry in stamps.flatten() {
            let Ok(text) = std::fs::read_to_string(stamp_entry.path().join("run.json")) else {
                continue;
            };
            if let Ok(rec) = serde_json::from_str::<RunRecord>(&text) {
                out.push(rec);
            }
        }
    }
    sort_records(&mut out);
    out
}

fn sort_records(records: &mut [RunRecord]) {
    records.sort_by(|a, b| {
        a.timestamp_ns
            .cmp(&b.timestamp_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// The list of runs: the log's records and the disk's, a record present in both
/// (same name and timestamp) counted once (the log's copy is kept), sorted by
/// timestamp then name (stable, so log order breaks remaining ties).
pub fn merge_runs(log: &[RunRecord], disk: &[RunRecord]) -> Vec<RunRecord> {
    let mut seen: BTreeSet<(&str, u128)> = BTreeSet::new();
    let mut out = Vec::with_capacity(log.len() + disk.len());
    for rec in log.iter().chain(disk) {
        if seen.insert((rec.name.as_str(), rec.timestamp_ns)) {
            out.push(rec.clone());
        }
    }
    sort_records(&mut out);
    out
}

/// The most recent run named `name` (largest timestamp; the later one in `runs`
/// on equal timestamps), or `None` (E0108 `no run named "x"`).
pub fn latest<'a>(runs: &'a [RunRecord], name: &str) -> Option<&'a RunRecord> {
    runs.iter()
        .filter(|r| r.name == name)
        .fold(None, |best: Option<&RunRecord>, r| match best {
            Some(b) if b.timestamp_ns > r.timestamp_ns => Some(b),
            _ => Some(r),
        })
}

/// A run name that `compare` could not find (E0108).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoSuchRun {
    /// The name asked for.
    pub name: String,
}

impl NoSuchRun {
    /// The diagnostic code of LANGUAGE §20 this error is reported with.
    pub fn code(&self) -> &'static str {
        code::E0108
    }
}

impl fmt::Display for NoSuchRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no run named {}", json_string(&self.name))
    }
}

impl std::error::Error for NoSuchRun {}

/// `compare(a, b)` over a list of runs: the report of [`compare_report`] for the
/// most recent run of each name, or [`NoSuchRun`] for the first missing name.
pub fn compare_runs(runs: &[RunRecord], a: &str, b: &str) -> Result<String, NoSuchRun> {
    let missing = |name: &str| NoSuchRun {
        name: name.to_string(),
    };
    let ra = latest(runs, a).ok_or_else(|| missing(a))?;
    let rb = latest(runs, b).ok_or_else(|| missing(b))?;
    Ok(compare_report(a, ra, b, rb))
}

/// The `compare(a, b)` report of LANGUAGE §17.3:
///
/// ```text
/// compare a vs b
///   key: VA vs VB (delta +D)
/// ```
///
/// one line per metric key of either run, sorted; a metric missing from one run
/// shows `-` there and has no delta; D = VB − VA in float64 with an explicit sign.
/// Without metrics on either run: `compare a vs b -- (no metrics on either run)`.
/// No trailing newline.
pub fn compare_report(a_name: &str, a: &RunRecord, b_name: &str, b: &RunRecord) -> String {
    let keys: BTreeSet<&String> = a.metrics.keys().chain(b.metrics.keys()).collect();
    if keys.is_empty() {
        return format!("compare {a_name} vs {b_name} -- (no metrics on either run)");
    }
    let mut out = format!("compare {a_name} vs {b_name}");
    for key in keys {
        let va = a.metrics.get(key).copied();
        let vb = b.metrics.get(key).copied();
        let shown = |v: Option<f64>| v.map_or_else(|| "-".to_string(), format_f64);
        out.push_str(&format!("\n  {key}: {} vs {}", shown(va), shown(vb)));
        if let (Some(x), Some(y)) = (va, vb) {
            out.push_str(&format!(" (delta {})", signed(y - x)));
        }
    }
    out
}

/// A number in the display format with an explicit sign (`+0.5`, `-0.25`, `+0`,
/// `+inf`); NaN has no sign.
fn signed(x: f64) -> String {
    let text = format_f64(x);
    if x.is_nan() || text.starts_with('-') {
        text
    } else {
        format!("+{text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, ts: u128, metrics: &[(&str, f64)]) -> RunRecord {
        RunRecord {
            name: name.to_string(),
            timestamp_ns: ts,
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            params_snapshot: BTreeMap::new(),
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        std::env::temp_dir().join(format!("mlpl-exp-{tag}-{}-{nanos}", std::process::id()))
    }

    #[test]
    fn json_matches_the_storage_format() {
        let mut rec = record("baseline", 1767225600000000000, &[("loss_metric", 0.5)]);
        rec.params_snapshot.insert(
            "W".to_string(),
            ParamInfo {
                shape: vec![2, 3],
                labels: None,
            },
        );
        let json = record_json(&rec);
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "name": "baseline",
                "timestamp_ns": 1767225600000000000u64,
                "metrics": { "loss_metric": 0.5 },
                "params_snapshot": { "W": { "shape": [2, 3], "labels": null } }
            })
        );
        assert_eq!(
            json,
            "{\n  \"name\": \"baseline\",\n  \"timestamp_ns\": 1767225600000000000,\n  \
             \"metrics\": {\n    \"loss_metric\": 0.5\n  },\n  \"params_snapshot\": {\n    \
             \"W\": {\n      \"shape\": [\n        2,\n        3\n      ],\n      \
             \"labels\": null\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn metric_numbers_use_the_display_format() {
        let rec = record(
            "r",
            1,
            &[
                ("a", 3.0),
                ("b", 0.5),
                ("c", 1e24),
                ("d", 0.000057344),
                ("e", -0.0),
                ("f", 0.1),
            ],
        );
        let json = record_json(&rec);
        assert!(json.contains("\"a\": 3,"));
        assert!(json.contains("\"b\": 0.5,"));
        assert!(json.contains("\"c\": 1000000000000000000000000,"));
        assert!(json.contains("\"d\": 0.000057344,"));
        assert!(json.contains("\"e\": -0,"));
        assert!(json.contains("\"f\": 0.1\n"));
        assert!(json.contains("\"params_snapshot\": {}\n"));
        let back: RunRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rec);
        assert!(back.metrics["e"].is_sign_negative());
        assert_eq!(back.metrics["c"], 1e24);
    }

    #[test]
    fn non_finite_metrics_round_trip() {
        let rec = record(
            "r",
            2,
            &[
                ("n", f64::NAN),
                ("p", f64::INFINITY),
                ("q", f64::NEG_INFINITY),
            ],
        );
        let json = record_json(&rec);
        assert!(json.contains("\"n\": \"NaN\""));
        let back: RunRecord = serde_json::from_str(&json).unwrap();
        assert!(back.metrics["n"].is_nan());
        assert_eq!(back.metrics["p"], f64::INFINITY);
        assert_eq!(back.metrics["q"], f64::NEG_INFINITY);
        let via_serde = serde_json::to_string(&rec).unwrap();
        let again: RunRecord = serde_json::from_str(&via_serde).unwrap();
        assert_eq!(again.metrics["p"], f64::INFINITY);
        assert!(serde_json::from_str::<RunRecord>(
            r#"{"name":"x","timestamp_ns":1,"metrics":{"m":"lots"},"params_snapshot":{}}"#
        )
        .is_err());
    }

    #[test]
    fn write_then_read_back() {
        let dir = temp_dir("rw");
        let mut a = record("baseline", 10, &[("loss_metric", 0.25)]);
        a.params_snapshot.insert(
            "E".into(),
            ParamInfo {
                shape: vec![5, 3],
                labels: Some(vec![Some("vocab".into()), None]),
            },
        );
        let b = record("other", 5, &[]);
        let path = write_record(&dir, &a).unwrap();
        assert_eq!(path, dir.join("baseline").join("10").join("run.json"));
        write_record(&dir, &b).unwrap();
        // Junk that must be ignored.
        std::fs::create_dir_all(dir.join("junk/1")).unwrap();
        std::fs::write(dir.join("junk/1/run.json"), "{not json").unwrap();
        std::fs::write(dir.join("stray.txt"), "x").unwrap();
        std::fs::create_dir_all(dir.join("empty/2")).unwrap();
        assert_eq!(read_records(&dir), vec![b, a]);
        assert!(read_records(&dir.join("missing")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unsafe_names_stay_inside_the_directory() {
        let dir = temp_dir("names");
        for name in ["../escape", "a/b", "", ".", "..", "c:d", "100%"] {
            let rec = record(name, 3, &[]);
            let path = write_record(&dir, &rec).unwrap();
            assert_eq!(
                path.parent().unwrap().parent().unwrap().parent().unwrap(),
                dir
            );
        }
        let names: BTreeSet<String> = read_records(&dir).into_iter().map(|r| r.name).collect();
        assert_eq!(names.len(), 7);
        assert!(names.contains("../escape"));
        assert_eq!(dir_name("plain_name"), "plain_name");
        assert_eq!(dir_name("a/b"), "a%2Fb");
        assert_eq!(dir_name(".."), "%2E.");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn merge_counts_shared_records_once() {
        let a = record("a", 1, &[("m_metric", 1.0)]);
        let b = record("b", 2, &[]);
        let c = record("a", 3, &[]);
        let merged = merge_runs(&[c.clone(), a.clone()], &[a.clone(), b.clone()]);
        assert_eq!(merged, vec![a.clone(), b, c.clone()]);
        assert_eq!(latest(&merged, "a"), Some(&c));
        assert_eq!(latest(&merged, "zzz"), None);
        assert!(merge_runs(&[], &[]).is_empty());
    }

    #[test]
    fn compare_report_format() {
        let a = record(
            "a",
            1,
            &[("loss_metric", 0.5), ("acc_metric", 0.75), ("only_a", 2.0)],
        );
        let b = record(
            "b",
            2,
            &[("loss_metric", 0.25), ("acc_metric", 1.25), ("only_b", 3.0)],
        );
        assert_eq!(
            compare_report("a", &a, "b", &b),
            "compare a vs b\n  acc_metric: 0.75 vs 1.25 (delta +0.5)\n  \
             loss_metric: 0.5 vs 0.25 (delta -0.25)\n  only_a: 2 vs -\n  only_b: - vs 3"
        );
        let same = record("s", 1, &[("x_metric", 3.0)]);
        assert_eq!(
            compare_report("s", &same, "s", &same),
            "compare s vs s\n  x_metric: 3 vs 3 (delta +0)"
        );
        let empty = record("e", 1, &[]);
        assert_eq!(
            compare_report("e", &empty, "f", &empty),
            "compare e vs f -- (no metrics on either run)"
        );
        let inf = record("i", 1, &[("m", f64::INFINITY)]);
        let one = record("o", 1, &[("m", 1.0)]);
        assert_eq!(
            compare_report("o", &one, "i", &inf),
            "compare o vs i\n  m: 1 vs inf (delta +inf)"
        );
        assert_eq!(
            compare_report("i", &inf, "i", &inf),
            "compare i vs i\n  m: inf vs inf (delta NaN)"
        );
        assert_eq!(signed(-0.0), "-0");
        assert_eq!(signed(0.1 + 0.2), "+0.30000000000000004");
    }

    #[test]
    fn compare_runs_finds_latest_or_reports_missing() {
        let runs = vec![
            record("a", 1, &[("m", 1.0)]),
            record("a", 5, &[("m", 2.0)]),
            record("b", 3, &[("m", 4.0)]),
        ];
        assert_eq!(
            compare_runs(&runs, "a", "b").unwrap(),
            "compare a vs b\n  m: 2 vs 4 (delta +2)"
        );
        let err = compare_runs(&runs, "a", "x").unwrap_err();
        assert_eq!(err.to_string(), "no run named \"x\"");
        assert_eq!(err.code(), code::E0108);
        assert_eq!(compare_runs(&runs, "y", "x").unwrap_err().name, "y");
    }
}
