//! The `mlpl` command line: exit codes, help, `check` in both formats, `explain`,
//! and the data directory default.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mlpl(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlpl-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_explains_every_subcommand() {
    let d = temp_dir("help");
    let out = mlpl(&["--help"], &d);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for sub in ["run", "check", "explain"] {
        assert!(help.contains(sub), "--help lacks {sub}:\n{help}");
    }
    let run_help = text(&mlpl(&["run", "--help"], &d).stdout);
    for opt in [
        "--data-dir",
        "--exp-dir",
        "--svg-out",
        "--device",
        "--no-capture",
        "--profile",
        "--memory-budget",
        "MLPL_CPU_ISA",
        "RAYON_NUM_THREADS",
    ] {
        assert!(run_help.contains(opt), "run --help lacks {opt}");
    }
}

#[test]
fn usage_errors_exit_2() {
    let d = temp_dir("usage");
    assert_eq!(mlpl(&["frobnicate"], &d).status.code(), Some(2));
    assert_eq!(mlpl(&["run"], &d).status.code(), Some(2));
    assert_eq!(mlpl(&["run", "missing.mlpl"], &d).status.code(), Some(2));
    std::fs::write(d.join("ok.mlpl"), "1").unwrap();
    assert_eq!(
        mlpl(&["run", "ok.mlpl", "--device", "tpu"], &d)
            .status
            .code(),
        Some(2)
    );
    assert_eq!(mlpl(&["explain", "E9999"], &d).status.code(), Some(2));
}

#[test]
fn run_prints_the_last_value_and_exits_0() {
    let d = temp_dir("run");
    std::fs::write(d.join("a.mlpl"), "x = reshape(iota(6), [2, 3])\nx * 2\n").unwrap();
    let out = mlpl(&["run", "a.mlpl"], &d);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "0 2 4\n6 8 10\n");
}

#[test]
fn a_runtime_error_exits_1_with_a_rendered_diagnostic() {
    let d = temp_dir("rterr");
    std::fs::write(
        d.join("bad.mlpl"),
        "x : [batch, feat] = zeros([32, 10])\ny = x + zeros([3])\n",
    )
    .unwrap();
    let out = mlpl(&["run", "bad.mlpl"], &d);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("error[E0201]: shapes do not broadcast in `+`"),
        "{err}"
    );
    assert!(err.contains(" --> bad.mlpl:2:"), "{err}");
    assert!(err.contains("left operand: [batch=32, feat=10]"), "{err}");
    assert!(err.contains("right operand: [3]"), "{err}");
}

#[test]
fn check_reports_every_syntax_error_with_positions_in_json() {
    let d = temp_dir("check");
    let src = "a = (1 + 2\nb = 3\nc = [1,,2]\nd = 1.\ne = undefined_thing + 1\nf = nosuchfn(2)\ng = iota(1, 2)\n";
    std::fs::write(d.join("many.mlpl"), src).unwrap();
    let out = mlpl(&["check", "many.mlpl", "--format", "json"], &d);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let items = json.as_array().unwrap();
    let found: Vec<(String, u64)> = items
        .iter()
        .map(|i| {
            (
                i["code"].as_str().unwrap().to_string(),
                i["line"].as_u64().unwrap(),
            )
        })
        .collect();
    for (code, line) in [
        ("E0007", 1),
        ("E0012", 3),
        ("E0002", 4),
        ("E0101", 5),
        ("E0102", 6),
        ("E0103", 7),
    ] {
        assert!(
            found.iter().any(|(c, l)| c == code && *l == line),
            "missing {code} at line {line}: {found:?}"
        );
    }
    for i in items {
        for key in [
            "code",
            "severity",
            "line",
            "column",
            "end_line",
            "end_column",
            "message",
        ] {
            assert!(!i[key].is_null(), "field {key} missing in {i}");
        }
        assert!(i["column"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn check_human_format_and_clean_files() {
    let d = temp_dir("check-human");
    std::fs::write(d.join("clean.mlpl"), "x = iota(3)\nsum(x)\n").unwrap();
    std::fs::write(d.join("warn.mlpl"), "x = 1\nz = 2x\n").unwrap();
    let clean = mlpl(&["check", "clean.mlpl"], &d);
    assert_eq!(clean.status.code(), Some(0));
    assert!(text(&clean.stderr).is_empty());
    let warn = mlpl(&["check", "warn.mlpl"], &d);
    assert_eq!(warn.status.code(), Some(0), "warnings do not fail a check");
    assert!(
        text(&warn.stderr).contains("warning[W0001]"),
        "{}",
        text(&warn.stderr)
    );
}

#[test]
fn explain_prints_the_catalog_text() {
    let d = temp_dir("explain");
    let out = mlpl(&["explain", "E0201"], &d);
    assert!(out.status.success());
    let t = text(&out.stdout);
    assert!(t.contains("shapes do not broadcast"), "{t}");
    assert!(mlpl(&["explain", "w0001"], &d).status.success());
}

/// `mlpl explain E0201 | head -1`: output into a closed pipe ends the process
/// quietly (status 141, as a tool killed by SIGPIPE), never with a panic.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let d = temp_dir("pipe");
    std::fs::write(d.join("big.mlpl"), "iota(100000)").unwrap();
    for args in [
        &["explain", "E0201"][..],
        &["run", "big.mlpl"][..],
        &["check", "--format", "json", "big.mlpl", "missing.mlpl"][..],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_mlpl"))
            .args(args)
            .current_dir(&d)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("failed printing"),
            "{args:?}: {err}"
        );
        // `explain` prints with the print macros; `run` and `check` ignore a
        // failed write and end as they would have.
        let expected: &[i32] = if args[0] == "explain" {
            &[141]
        } else {
            &[0, 1, 2, 141]
        };
        assert!(
            out.status.code().is_some_and(|c| expected.contains(&c)),
            "{args:?}: {:?} {err}",
            out.status
        );
    }
}

#[test]
fn load_uses_the_script_directory_by_default_and_stays_inside_it() {
    let d = temp_dir("data");
    std::fs::create_dir_all(d.join("proj")).unwrap();
    std::fs::write(d.join("proj/t.csv"), "a,b\n1,2\n3,4\n").unwrap();
    std::fs::write(d.join("proj/s.mlpl"), "sum(load(\"t.csv\"), 0)\n").unwrap();
    let out = mlpl(&["run", "proj/s.mlpl"], &d);
    assert_eq!(text(&out.stdout), "4 6\n", "{}", text(&out.stderr));
    std::fs::write(d.join("proj/esc.mlpl"), "load(\"../secret.txt\")\n").unwrap();
    std::fs::write(d.join("secret.txt"), "no").unwrap();
    let out = mlpl(&["run", "proj/esc.mlpl"], &d);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("E0404"), "{}", text(&out.stderr));
}

#[test]
fn warnings_go_to_stderr_and_do_not_fail_the_run() {
    let d = temp_dir("warn");
    std::fs::write(d.join("w.mlpl"), "device(\"gpu\") { iota(2) }\n").unwrap();
    let out = mlpl(&["run", "w.mlpl"], &d);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "0 1\n");
    assert!(
        text(&out.stderr).contains("warning[W0502]"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn invalid_utf8_and_long_lines_are_reported_where_they_are() {
    let d = temp_dir("utf8");
    std::fs::write(d.join("u.mlpl"), b"x = 1\ny = \xff 2\n").unwrap();
    for cmd in ["run", "check"] {
        let out = mlpl(&[cmd, "u.mlpl"], &d);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let err = text(&out.stderr);
        // The line of the invalid byte is shown, the caret under it.
        assert!(err.contains(" --> u.mlpl:2:5\n"), "{cmd}: {err}");
        assert!(err.contains("2 | y = \u{fffd} 2\n"), "{cmd}: {err}");
        assert!(err.contains("    ^ byte 0xff on line 2"), "{cmd}: {err}");
    }
    // An error on a generated 200 KB line prints a window of it, not all of it.
    let line = format!("x = {}q\n", "1 + ".repeat(50_000));
    std::fs::write(d.join("l.mlpl"), &line).unwrap();
    let out = mlpl(&["run", "l.mlpl"], &d);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("error[E0101]"), "{err}");
    assert!(err.len() < 2000, "{} bytes of diagnostics", err.len());
}

#[test]
fn a_chart_value_is_written_to_a_file() {
    let d = temp_dir("svg");
    std::fs::write(d.join("c.mlpl"), "loss_curve([3, 2, 1])\n").unwrap();
    let out = mlpl(&["run", "c.mlpl", "--svg-out", "charts"], &d);
    assert_eq!(out.status.code(), Some(0));
    let line = text(&out.stdout);
    let path = line
        .trim()
        .strip_prefix("viz: ")
        .unwrap_or_else(|| panic!("{line}"));
    let chart = std::fs::read_to_string(d.join(path))
        .or_else(|_| std::fs::read_to_string(path))
        .unwrap();
    assert!(chart.starts_with("<svg"));
    assert!(path.ends_with(".svg") && path.contains("charts"));
}

#[test]
fn profile_says_how_each_train_loop_ran() {
    let d = temp_dir("profile");
    std::fs::write(
        d.join("t.mlpl"),
        "W = param[3]\ntrain 20 { adam(sum(W * W - W), W, 0.1, 0.9, 0.999, 1e-8); sum(W) }\ntrain 5 { adam(sum(W * W) * step, W, 0.1, 0.9, 0.999, 1e-8); sum(W) }\nW\n",
    )
    .unwrap();
    let out = mlpl(&["run", "t.mlpl", "--profile"], &d);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("train loop at line 2: 20 iterations"), "{err}");
    assert!(
        err.contains("18 replayed from the captured step (arena)"),
        "{err}"
    );
    assert!(err.contains("inside kernels"), "{err}");
    assert!(err.contains("train loop at line 3: 5 iterations"), "{err}");
    assert!(err.contains("not captured: the body reads `step`"), "{err}");
    let eager = mlpl(&["run", "t.mlpl", "--profile", "--no-capture"], &d);
    assert_eq!(
        text(&eager.stdout),
        text(&out.stdout),
        "the same value either way"
    );
    assert!(text(&eager.stderr).contains("not captured: step capture is turned off"));
    let quiet = mlpl(&["run", "t.mlpl"], &d);
    assert!(quiet.stderr.is_empty(), "no profile unless asked");
}

#[test]
fn check_json_keeps_the_other_files_when_one_is_unreadable_or_not_utf8() {
    let d = temp_dir("check-unreadable");
    std::fs::write(d.join("good.mlpl"), "x = zeros([2, 3]) + zeros([4])\n").unwrap();
    std::fs::write(d.join("latin1.mlpl"), b"x = 1\n# caf\xe9\n").unwrap();
    let out = mlpl(
        &[
            "check",
            "good.mlpl",
            "latin1.mlpl",
            "missing.mlpl",
            "--format",
            "json",
        ],
        &d,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let items = json.as_array().unwrap();
    let of = |file: &str| -> Vec<&str> {
        items
            .iter()
            .filter(|i| i["file"] == file)
            .map(|i| i["code"].as_str().unwrap())
            .collect()
    };
    assert_eq!(of("good.mlpl"), vec!["E0201"], "{json}");
    assert_eq!(of("latin1.mlpl").len(), 1, "{json}");
    assert_eq!(
        items.iter().find(|i| i["file"] == "latin1.mlpl").unwrap()["line"],
        2
    );
    assert_eq!(of("missing.mlpl"), vec!["E0405"], "{json}");
    // Only unreadable files: still a JSON array.
    let out = mlpl(&["check", "missing.mlpl", "--format", "json"], &d);
    assert_eq!(out.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(json.as_array().unwrap().len(), 1);
}

#[test]
fn check_survives_sizes_and_depths_that_once_killed_it() {
    let d = temp_dir("check-huge");
    let src = "p = param[1e7, 1e7]\nq = tensor[8467440737095516165]\ns = sum(zeros([1e20, 0]), 1)\nr = reshape(iota(4), zeros([1e9]))\nm = linear(2, 2, 0)\nrepeat 100000 { m = residual(m) }\nk = linear(2, 2, 0)\nrepeat 40 { k = chain(k, k) }\n";
    std::fs::write(d.join("huge.mlpl"), src).unwrap();
    let out = mlpl(&["check", "huge.mlpl", "--format", "json"], &d);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("JSON output; stderr {}", text(&out.stderr)));
    assert!(json.is_array());
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn run_refuses_concat_doubling_past_its_memory_budget_with_e0410() {
    let d = temp_dir("run-budget");
    std::fs::write(
        d.join("double.mlpl"),
        "x = ones([1000])\nrepeat 40 { x = concat(x, x, 0) }\nshape(x)\n",
    )
    .unwrap();
    let out = mlpl(&["run", "double.mlpl", "--memory-budget", "1200000"], &d);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("error[E0410]: out of host memory"), "{err}");
    assert!(err.contains(" --> double.mlpl:2:"), "{err}");
    // What the script holds (`x`, 512,000 bytes) and the budget are named,
    // and how to raise it.
    assert!(
        err.contains("the session holds 512000 bytes (largest: `x` 512000)"),
        "{err}"
    );
    assert!(err.contains("`mlpl run --memory-budget BYTES`"), "{err}");
}

/// The session budget a `mlpl run --events jsonl` run reports in `run_finished`.
fn reported_budget(extra: &[&str]) -> serde_json::Value {
    let d = temp_dir("run-budget-default");
    std::fs::write(d.join("one.mlpl"), "1\n").unwrap();
    let mut args = vec!["run", "one.mlpl", "--events", "jsonl"];
    args.extend_from_slice(extra);
    let out = mlpl(&args, &d);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let finished = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "run_finished")
        .expect("a run_finished event");
    finished["memory"]["budget_bytes"].clone()
}

#[test]
fn run_has_the_default_budget_of_serve_unless_told_otherwise() {
    // Half the machine's memory, as `mlpl serve`, where the system says.
    let expected = mlpl_runner::serve::default_memory_budget()
        .map_or(serde_json::Value::Null, |b| serde_json::json!(b));
    assert_eq!(reported_budget(&[]), expected);
    assert_eq!(
        reported_budget(&["--memory-budget", "123456"]),
        serde_json::json!(123456)
    );
    assert_eq!(
        reported_budget(&["--memory-budget", "0"]),
        serde_json::Value::Null
    );
}
