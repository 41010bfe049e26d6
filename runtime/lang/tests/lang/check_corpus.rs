//! The checker's corpus of erroneous scripts (`tests/check_corpus/*.mlpl`): each
//! file's first line is `# expect: CODE line N[, CODE line M ...]`. The checker
//! must report every expected code on its line, and no error that is not
//! expected (no false alarms). Warnings are checked when expected.

use std::path::Path;

use mlpl_diag::Diagnostic;
use mlpl_lang::check::check_source;
use mlpl_syntax::lexer::decode_source;

/// 1-based line of byte `offset` (LF, CR LF or CR breaks).
fn line_of(text: &[u8], offset: usize) -> usize {
    let mut line = 1;
    let mut i = 0;
    while i < offset.min(text.len()) {
        match text[i] {
            b'\n' => line += 1,
            b'\r' if text.get(i + 1) != Some(&b'\n') => line += 1,
            _ => {}
        }
        i += 1;
    }
    line
}

fn expectations(first_line: &str) -> Vec<(String, usize)> {
    let spec = first_line
        .strip_prefix("# expect:")
        .unwrap_or_else(|| panic!("first line must be `# expect: ...`: {first_line}"));
    spec.split(',')
        .map(|item| {
            let parts: Vec<&str> = item.split_whitespace().collect();
            assert!(
                parts.len() == 3 && parts[1] == "line",
                "bad expectation `{item}`"
            );
            (parts[0].to_string(), parts[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn every_corpus_script_reports_exactly_its_expected_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mlpl"))
        .collect();
    files.sort();
    assert!(files.len() >= 60, "the corpus has {} scripts", files.len());
    let function_scripts = files
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("fn_"))
        })
        .count();
    assert!(
        function_scripts >= 30,
        "the corpus has {function_scripts} function scripts (`fn_*.mlpl`)"
    );
    let mut codes = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let first =
            String::from_utf8_lossy(bytes.split(|&b| b == b'\n').next().unwrap()).to_string();
        let expected = expectations(first.trim_end());
        let (text, diagnostics): (Vec<u8>, Vec<Diagnostic>) = match decode_source(&bytes) {
            Ok(t) => {
                let d = check_source(&t).diagnostics;
                (t.into_bytes(), d)
            }
            Err(d) => (bytes.clone(), vec![d]),
        };
        let got: Vec<(String, usize, bool)> = diagnostics
            .iter()
            .map(|d| {
                let at = d.primary.as_ref().map_or(0, |l| l.span.start);
                (d.code.to_string(), line_of(&text, at), d.is_error())
            })
            .collect();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        for (code, line) in &expected {
            codes.insert(code.clone());
            if !got.iter().any(|(c, l, _)| c == code && l == line) {
                failures.push(format!(
                    "{name}: expected {code} on line {line}, got {got:?}"
                ));
            }
        }
        for (code, line, is_error) in &got {
            if *is_error && !expected.iter().any(|(c, l)| c == code && l == line) {
                failures.push(format!("{name}: unexpected {code} on line {line}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every code of LANGUAGE §20 whose phase includes S.
    let static_codes = [
        "E0001", "E0002", "E0003", "E0004", "E0005", "E0006", "E0007", "E0008", "E0009", "E0010",
        "E0011", "E0012", "E0101", "E0102", "E0103", "E0104", "E0105", "E0106", "E0107", "E0109",
        "E0110", "E0201", "E0202", "E0203", "E0204", "E0205", "E0206", "E0207", "E0208", "E0209",
        "E0210", "E0211", "E0212", "E0213", "E0214", "E0215", "E0216", "E0218", "E0301", "E0302",
        "E0303", "E0304", "E0305", "E0306", "E0307", "E0308", "E0309", "E0310", "E0311", "E0401",
        "E0402", "E0404", "E0501", "E0502", "W0001", "W0002", "W0003", "W0101", "W0102", "W0103",
        "W0104", "W0105", "W0106", "W0201", "W0202", "W0203", "W0204", "W0301", "W0302", "W0502",
    ];
    let missing: Vec<&&str> = static_codes
        .iter()
        .filter(|c| !codes.contains(**c))
        .collect();
    assert!(missing.is_empty(), "no corpus script for {missing:?}");
}

/// Where the interpreter stops with the same code at the same place as the
/// checker, both must say the same thing: headline, labels, notes and help (the
/// checker may add labels pointing at where axis names came from).
#[test]
fn static_and_runtime_diagnostics_read_the_same() {
    use mlpl_lang::eval::{Interp, Workspace};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_corpus");
    let mut compared = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(src) = std::fs::read_to_string(&path) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "mlpl") {
            continue;
        }
        let checked = check_source(&src);
        if checked
            .diagnostics
            .iter()
            .any(|d| d.code.starts_with("E00"))
        {
            continue;
        }
        let mut it = Interp::new(Workspace::new());
        let Err(rt) = it.run(&checked.program) else {
            continue;
        };
        let Some(st) = checked.diagnostics.iter().find(|d| {
            d.code == rt.code
                && d.primary.as_ref().map(|l| l.span) == rt.primary.as_ref().map(|l| l.span)
        }) else {
            continue;
        };
        if st.code == "E0101" {
            // The name checker says "not bound before this point" on purpose.
            continue;
        }
        compared += 1;
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if st.message != rt.message
            || st.primary != rt.primary
            || st.notes != rt.notes
            || st.help != rt.help
        {
            failures.push(format!("{name}:\n  static:  {st:?}\n  runtime: {rt:?}"));
        }
        for l in &rt.secondary {
            if !st.secondary.contains(l) {
                failures.push(format!("{name}: runtime label {l:?} missing statically"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared >= 40, "only {compared} diagnostics compared");
    eprintln!("{compared} diagnostics compared");
}

/// W0103 for a model is only reported when no other model or tracked array can
/// share its parameters: losses that read one stay silent.
#[test]
fn losses_reaching_a_model_through_another_value_are_not_flagged() {
    let scripts = [
        // `outer` contains `m`: the loss depends on m's parameters.
        "m = linear(2, 1, 0)\nouter = chain(m, relu_layer())\nX = [[1, 2], [3, 4]]\nadam(mean(apply(outer, X)), m, 0.01, 0.9, 0.999, 1e-8)\n",
        // The loss reads a tracked array listed nowhere: not provably independent.
        "m = linear(2, 1, 0)\nW = param[2]\nadam(sum(W), m, 0.01, 0.9, 0.999, 1e-8)\n",
        // The loss reads the model itself.
        "m = linear(2, 1, 0)\nX = [[1, 2], [3, 4]]\nadam(mean(apply(m, X)), m, 0.01, 0.9, 0.999, 1e-8)\n",
    ];
    for src in scripts {
        let checked = check_source(src);
        let w0103: Vec<&Diagnostic> = checked
            .diagnostics
            .iter()
            .filter(|d| d.code == "W0103")
            .collect();
        assert!(w0103.is_empty(), "unexpected W0103 for:\n{src}\n{w0103:?}");
        assert!(
            checked.diagnostics.iter().all(|d| !d.is_error()),
            "script should check clean:\n{src}\n{:?}",
            checked.diagnostics
        );
    }
}
