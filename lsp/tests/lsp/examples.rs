//! Every example checks clean in the editor too: the server (which reports the
//! runtime checker's diagnostics) shows no error on `examples/*.mlpl` and
//! `examples/hf/*.mlpl` (DESIGN §8),
//! and knows the shapes of their main variables.

use mlpl_lsp::analysis::Analysis;

fn examples() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut out: Vec<(String, String)> = [dir.to_string(), format!("{dir}/hf")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "mlpl"))
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn examples_have_no_static_errors() {
    let all = examples();
    assert!(all.len() >= 5);
    for (path, text) in all {
        let a = Analysis::new(&text);
        let errors: Vec<String> = a
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{} {} {:?}", d.code, d.message, d.primary))
            .collect();
        assert!(errors.is_empty(), "{path}: {errors:?}");
        if std::env::var_os("MLPL_LSP_DUMP").is_some() {
            eprintln!("== {path}");
            for b in &a.facts.assignments {
                eprintln!("  {} = {}", b.name, mlpl_lsp::values::describe(&b.value));
            }
            for d in &a.diagnostics {
                eprintln!("  {} {}", d.code, d.message);
            }
        }
    }
}

#[test]
fn example_shapes_are_known() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/named_axes.mlpl"
    ))
    .unwrap();
    let a = Analysis::new(&text);
    let shape = |n: &str| {
        let b = a.facts.assignments.iter().rev().find(|b| b.name == n);
        mlpl_lsp::values::describe(&b.unwrap().value)
    };
    assert_eq!(shape("X"), "[batch=4, feat=3]");
    assert_eq!(shape("H"), "[batch=4, hidden=2]");
    assert_eq!(shape("per_feature"), "[feat=3]");
    assert_eq!(shape("Y"), "[batch=4, feat=3]");
}

#[test]
fn train_hover_of_the_language_model_example() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/tiny_lm.mlpl"
    ))
    .unwrap();
    let a = Analysis::new(&text);
    let cfg = mlpl_lsp::features::FeatureConfig {
        devices: mlpl_lsp::feasibility::profiles(None, "a100-80gb", "m2", Some(16e9)),
        snippets: true,
    };
    let at = text.find("train 200").unwrap() + 2;
    let h = mlpl_lsp::features::hover(&a, at, &cfg).unwrap();
    let lsp_types::HoverContents::Markup(m) = h.contents else {
        panic!()
    };
    if std::env::var_os("MLPL_LSP_DUMP").is_some() {
        eprintln!("{}", m.value);
    }
    // 32,044 parameters; the checker trains the BPE tokenizer on the preloaded
    // text, so it knows the number of windows (76 of 16 tokens).
    assert!(m.value.contains("parameters: 32,044"), "{}", m.value);
    assert!(
        m.value.contains("B = 76, S = 16, inferred by the checker"),
        "{}",
        m.value
    );
    assert!(
        m.value.contains("NVIDIA A100 80GB") && m.value.contains("Apple M2"),
        "{}",
        m.value
    );
}

/// Every `.mlpl` file under `dir`.
fn scripts_in(dir: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "mlpl"))
        .map(|p| {
            let text = std::fs::read(&p).unwrap();
            (
                p.display().to_string(),
                String::from_utf8_lossy(&text).into_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn diagnostics_are_exactly_mlpl_checks() {
    // The examples, the checker's error corpus and its valid scripts: the server
    // publishes what `mlpl check` (`check_source`) reports, in the same order.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut n = 0;
    for dir in [
        "examples",
        "runtime/lang/tests/check_corpus",
        "runtime/lang/tests/check_valid",
    ] {
        for (path, text) in scripts_in(&format!("{root}/{dir}")) {
            let a = Analysis::new(&text);
            let want = mlpl_lang::check::check_source(&text).diagnostics;
            assert_eq!(a.diagnostics, want, "{path}");
            n += 1;
        }
    }
    assert!(n > 150, "only {n} scripts");
}
