//! A binary built with the MLX backend starts without MLX's library
//! (docs/devices.md, "Loading MLX at run time"): with `MLPL_MLX_LIB` naming a
//! file that does not exist (and, being set, it is the only place searched),
//! `device("mlx")`, `to_device(x, "mlx")`, `mlpl run --device mlx` and a
//! `mlpl serve` session run on the CPU with W0501 saying which library could
//! not be loaded, from where, and how to fix it; the run exits 0 with the
//! CPU's output. Without the feature the reason is that the build lacks MLX.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::serve_support::{temp_dir, Server};

/// A program using MLX in each way a program can, and its CPU twin.
const PROGRAM: &str = r#"x = to_device([1, 2, 3], "mlx")
y = device("mlx") { matmul(reshape(x, [1, 3]), ones([3, 2])) * 2 }
y
"#;

/// Where `MLPL_MLX_LIB` points: a file that does not exist.
fn missing_library(dir: &Path) -> PathBuf {
    dir.join("no-such-mlx").join("libmlx.so")
}

/// `mlpl args` in `dir` with MLX's library made unloadable.
fn mlpl_without_mlx(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(args)
        .current_dir(dir)
        .env("MLPL_MLX_LIB", missing_library(dir))
        .output()
        .expect("mlpl starts")
}

/// Asserts that `text` gives the reason MLX is unavailable in this build.
#[track_caller]
fn assert_says_why(text: &str, dir: &Path) {
    if mlpl_devices::mlx::BUILT {
        for part in [
            "libmlx.so could not be loaded",
            "$MLPL_MLX_LIB",
            &missing_library(dir).display().to_string(),
            "No such file or directory",
            "bash scripts/mlx-venv.sh",
        ] {
            assert!(text.contains(part), "`{part}` missing from:\n{text}");
        }
    } else {
        assert!(
            text.contains("this build does not include the MLX backend"),
            "{text}"
        );
    }
}

#[test]
fn without_mlxs_library_mlx_runs_on_the_cpu_with_w0501() {
    let dir = temp_dir("mlx_unloadable_run");
    std::fs::write(dir.join("p.mlpl"), PROGRAM).unwrap();
    std::fs::write(dir.join("cpu.mlpl"), PROGRAM.replace("\"mlx\"", "\"cpu\"")).unwrap();
    let cpu = mlpl_without_mlx(&["run", "cpu.mlpl"], &dir);
    assert!(cpu.status.success(), "{cpu:?}");
    assert_eq!(String::from_utf8_lossy(&cpu.stdout), "12 12\n");
    for args in [
        &["run", "p.mlpl"][..],
        &["run", "--device", "mlx", "cpu.mlpl"][..],
    ] {
        let out = mlpl_without_mlx(args, &dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(out.stdout, cpu.stdout, "{args:?}: not the CPU's output");
        assert!(stderr.contains("W0501"), "{args:?}: {stderr}");
        assert_says_why(&stderr, &dir);
    }
}

#[test]
fn without_mlxs_library_a_serve_session_runs_on_the_cpu_with_w0501() {
    let dir = temp_dir("mlx_unloadable_serve");
    let lib = missing_library(&dir);
    let srv = Server::spawn_env(
        &["serve", "--bind", "127.0.0.1:0", "--token", "t0ken"],
        &[("MLPL_MLX_LIB", lib.as_os_str())],
    );
    let (status, health) = srv.call_with("GET", "/v1/health", None, None, &[]);
    assert_eq!((status, &health["mlx"]), (200, &serde_json::json!(false)));
    let id = srv.session();
    let events = srv.events(&id, None);
    let run = srv.run(&id, PROGRAM);
    let got = events.until_finished(&run);
    assert_eq!(got.last().unwrap().data["status"], "ok", "{got:?}");
    let warning = got
        .iter()
        .find(|e| e.event == "warning" && e.data["diagnostic"]["code"] == "W0501")
        .unwrap_or_else(|| panic!("no W0501 in {got:?}"));
    assert_says_why(&warning.data["diagnostic"].to_string(), &dir);
    // The session goes on, on the CPU.
    let run = srv.run(&id, "y + 1");
    let got = events.until_finished(&run);
    assert_eq!(got.last().unwrap().data["status"], "ok", "{got:?}");
}
