//! Conformance with the original MLPL (LANGUAGE §2): every case of
//! `tests/data/original-mlpl.json` (a copy of the shared reference file) must give
//! the same shape and values. Random draws must equal the expected values rounded
//! to float32; other values agree within 1e-5·(1 + |expected|).

use crate::common;

use serde_json::Value as Json;

/// Cases whose values are random draws and must match exactly after rounding.
const EXACT: &[&str] = &[
    "randn_vec",
    "random_vec",
    "randn_mat",
    "moons",
    "circles",
    "blobs",
    "shuffle",
    "split",
    "sample",
];

fn cases() -> Vec<Json> {
    let text = include_str!("../data/original-mlpl.json");
    let doc: Json = serde_json::from_str(text).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

fn numbers(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn parse_num(s: &str) -> f64 {
    match s {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        _ => s.parse().unwrap_or_else(|_| panic!("not a number: {s}")),
    }
}

#[test]
fn outputs_match_the_original() {
    let mut checked = 0;
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let program = case["program"].as_str().unwrap();
        let expected = case["expected"].as_str().unwrap();
        let got = common::eval(program);
        let (want, have) = (numbers(expected), numbers(&got));
        if want
            .iter()
            .flatten()
            .any(|s| s.parse::<f64>().is_err() && !matches!(s.as_str(), "inf" | "-inf" | "NaN"))
        {
            assert_eq!(got.trim(), expected.trim(), "case {name}");
            checked += 1;
            continue;
        }
        assert_eq!(
            want.len(),
            have.len(),
            "case {name}: row count\nexpected:\n{expected}\ngot:\n{got}"
        );
        for (wr, hr) in want.iter().zip(&have) {
            assert_eq!(
                wr.len(),
                hr.len(),
                "case {name}: row length\nexpected:\n{expected}\ngot:\n{got}"
            );
            for (w, h) in wr.iter().zip(hr) {
                let (w, h) = (parse_num(w), parse_num(h));
                if EXACT.contains(&name) {
                    assert_eq!(
                        w as f32, h as f32,
                        "case {name}: random draws must match exactly after rounding"
                    );
                } else if w.is_finite() {
                    assert!(
                        (h - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "case {name}: {h} vs expected {w}"
                    );
                } else {
                    assert_eq!(w.is_nan(), h.is_nan(), "case {name}");
                    if !w.is_nan() {
                        assert_eq!(w, h, "case {name}");
                    }
                }
            }
        }
        checked += 1;
    }
    eprintln!("conformance: {checked} cases checked");
    assert!(checked >= 30, "only {checked} cases were checked");
}
