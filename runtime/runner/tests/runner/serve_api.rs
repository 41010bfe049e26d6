//! `mlpl serve`: health, sessions, tokens and input errors (docs/runner-protocol.md).

use crate::serve_support;

use serde_json::json;
use serve_support::*;

#[test]
fn health_needs_no_token_and_everything_else_does() {
    let srv = Server::start(&[]);
    let (status, body) = srv.call_with("GET", "/v1/health", None, None, &[]);
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["schema"], 1);
    // Whether MLX can run here, as this build and machine say.
    assert_eq!(body["mlx"], mlpl_devices::mlx::open().is_ok());
    for (method, path) in [
        ("GET", "/v1/sessions"),
        ("POST", "/v1/sessions"),
        ("DELETE", "/v1/sessions/x"),
        ("POST", "/v1/sessions/x/runs"),
        ("GET", "/v1/sessions/x/events"),
        ("GET", "/v1/sessions/x/variables"),
        ("POST", "/v1/sessions/x/save"),
        ("POST", "/v1/sessions/x/restore"),
        ("GET", "/v1/runs/x"),
        ("POST", "/v1/runs/x/cancel"),
    ] {
        let (status, body) = srv.call_with(method, path, None, None, &[]);
        assert_eq!(status, 401, "{method} {path}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized");
        let (status, body) = srv.call_with(method, path, None, Some("wrong"), &[]);
        assert_eq!(status, 401, "{method} {path}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("wrong"));
    }
}

#[test]
fn sessions_are_created_listed_and_deleted() {
    let srv = Server::start(&[]);
    let a = srv.session();
    let b = srv.session();
    assert_ne!(a, b);
    let (status, body) = srv.get("/v1/sessions");
    assert_eq!(status, 200);
    let ids: Vec<&str> = body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![a.as_str(), b.as_str()]);
    assert_eq!(body["sessions"][0]["busy"], false);
    let (status, body) = srv.call("DELETE", &format!("/v1/sessions/{a}"), None);
    assert_eq!((status, &body["deleted"]), (200, &json!(true)));
    let (status, body) = srv.call("DELETE", &format!("/v1/sessions/{a}"), None);
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found");
    let (_, body) = srv.get("/v1/sessions");
    assert_eq!(body["sessions"].as_array().unwrap().len(), 1);
    let (_, body) = srv.call_with("GET", "/v1/health", None, None, &[]);
    assert_eq!(body["sessions"], 1);
}

#[test]
fn unknown_sessions_and_runs_are_404() {
    let srv = Server::start(&[]);
    for (method, path) in [
        ("POST", "/v1/sessions/nope/runs"),
        ("GET", "/v1/sessions/nope/events"),
        ("GET", "/v1/sessions/nope/variables"),
        ("POST", "/v1/sessions/nope/save"),
        ("GET", "/v1/runs/nope"),
        ("POST", "/v1/runs/nope/cancel"),
        ("GET", "/v1/nothing-here"),
    ] {
        let (status, body) = srv.call(method, path, Some("{\"code\": \"1\"}"));
        assert_eq!(status, 404, "{method} {path}: {body}");
        assert!(body["error"]["message"].is_string(), "{body}");
    }
    let (status, body) = srv.call("PUT", "/v1/sessions", None);
    assert_eq!(status, 405, "{body}");
}

#[test]
fn bad_input_is_400_with_a_message() {
    let srv = Server::start(&["--max-body-bytes", "1000"]);
    let id = srv.session();
    let runs = format!("/v1/sessions/{id}/runs");
    for body in ["{not json", "[]", "{}", "{\"code\": 5}", ""] {
        let (status, resp) = srv.call("POST", &runs, Some(body));
        assert_eq!(status, 400, "{body:?}: {resp}");
        assert_eq!(resp["error"]["code"], "bad_request");
        assert!(!resp["error"]["message"].as_str().unwrap().is_empty());
    }
    let (status, resp) = srv.post(&runs, &json!({"code": "1", "device": "tpu"}));
    assert_eq!(status, 400);
    assert!(resp["error"]["message"].as_str().unwrap().contains("tpu"));
    let big = json!({ "code": "x".repeat(5000) }).to_string();
    let (status, resp) = srv.call("POST", &runs, Some(&big));
    assert_eq!(status, 413, "{resp}");
    assert_eq!(resp["error"]["code"], "too_large");
    let (status, resp) = srv.call_with(
        "GET",
        &format!("/v1/sessions/{id}/events"),
        None,
        Some(TOKEN),
        &[("Last-Event-ID", "abc")],
    );
    assert_eq!(status, 400, "{resp}");
    // The server still works.
    let (status, _) = srv.post(&runs, &json!({"code": "1"}));
    assert_eq!(status, 202);
}

#[test]
fn a_generated_token_is_printed_and_a_token_file_is_read() {
    let srv = Server::spawn(&["serve", "--bind", "127.0.0.1:0"]);
    assert_eq!(srv.token.len(), 32);
    let (status, _) = srv.get("/v1/sessions");
    assert_eq!(status, 200);
    let dir = temp_dir("tokenfile");
    let f = dir.join("token");
    std::fs::write(&f, "from-a-file\n").unwrap();
    let mut srv2 = Server::spawn(&["serve", "--bind", "127.0.0.1:0", "--token-file", s(&f)]);
    srv2.token = "from-a-file".into();
    let (status, _) = srv2.get("/v1/sessions");
    assert_eq!(status, 200);
}

#[test]
fn non_loopback_binds_need_a_token() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["serve", "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["serve", "--bind", "nonsense"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn file_access_stays_inside_the_data_directory() {
    let root = temp_dir("datadir");
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("inside.txt"), "hello").unwrap();
    std::fs::write(root.join("secret.txt"), "secret").unwrap();
    let srv = Server::start(&["--data-dir", s(&data)]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let run = srv.run(&id, "load(\"inside.txt\")");
    let got = events.until_finished(&run);
    let value = got.iter().find(|e| e.event == "value").unwrap();
    assert_eq!(value.data["text"], "hello");
    let run = srv.run(&id, "load(\"../secret.txt\")");
    let got = events.until_finished(&run);
    let fin = got.last().unwrap();
    assert_eq!(fin.data["status"], "error");
    assert!(!got.iter().any(|e| e.event == "value"));
    // Without --data-dir file builtins fail.
    let srv = Server::start(&[]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let run = srv.run(&id, &format!("load(\"{}\")", s(&data.join("inside.txt"))));
    let got = events.until_finished(&run);
    assert_eq!(got.last().unwrap().data["status"], "error");
}

/// `--exit-with-stdin`: the server stops when its standard input closes (an
/// editor that started it went away), and keeps serving while it stays open.
#[test]
fn exit_with_stdin_stops_the_server_when_its_input_closes() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--token",
            "t0ken",
            "--exit-with-stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mlpl starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("mlpl serve listening on "), "{first}");
    assert!(child.try_wait().unwrap().is_none(), "still serving");
    drop(child.stdin.take());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the server stops after its input closes")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_loopback_server_refuses_foreign_hosts_and_origins() {
    let srv = Server::start(&[]);
    let token = srv.token.clone();
    let (status, _) = srv.call_with(
        "GET",
        "/v1/sessions",
        None,
        Some(&token),
        &[("Host", "localhost:1")],
    );
    assert_eq!(status, 200);
    for headers in [
        [("Host", "evil.example:80")],
        [("Origin", "https://evil.example")],
    ] {
        let (status, body) = srv.call_with("GET", "/v1/sessions", None, Some(&token), &headers);
        assert_eq!(status, 403, "{headers:?}: {body}");
        assert_eq!(body["error"]["code"], "forbidden_host");
    }
    let (status, _) = srv.call_with(
        "GET",
        "/v1/sessions",
        None,
        Some(&token),
        &[("Origin", "vscode-webview://abc")],
    );
    assert_eq!(status, 200);
}

#[test]
fn the_allowed_page_origin_gets_cors_answers_and_every_other_page_is_refused() {
    let page = "http://127.0.0.1:8000";
    let srv = Server::start(&["--allow-origin", "HTTP://127.0.0.1:8000/"]);
    let header = |hs: &[(String, String)], name: &str| {
        hs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    };
    // The page's preflight is answered before the token is checked.
    let (status, hs) = srv.headers_of(
        "OPTIONS",
        "/v1/sessions",
        &[
            ("Origin", page),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization,content-type",
            ),
        ],
    );
    assert_eq!(status, 200, "{hs:?}");
    assert_eq!(
        header(&hs, "access-control-allow-origin").as_deref(),
        Some(page)
    );
    let allowed = header(&hs, "access-control-allow-headers").unwrap_or_default();
    assert!(allowed.contains("authorization"), "{allowed}");
    // Its requests are answered with the header; a wrong token is still 401.
    let (status, hs) = srv.headers_of("GET", "/v1/health", &[("Origin", page)]);
    assert_eq!(status, 200);
    assert_eq!(
        header(&hs, "access-control-allow-origin").as_deref(),
        Some(page)
    );
    let (status, _) = srv.call_with(
        "GET",
        "/v1/sessions",
        None,
        Some("wrong"),
        &[("Origin", page)],
    );
    assert_eq!(status, 401);
    let (status, _) = srv.call_with(
        "GET",
        "/v1/sessions",
        None,
        Some(&srv.token),
        &[("Origin", page)],
    );
    assert_eq!(status, 200);
    // Every other page, on this machine or not, and its preflight: 403, no CORS.
    for other in [
        "http://127.0.0.1:8001",
        "http://localhost:8000",
        "https://127.0.0.1:8000",
        "null",
        "https://evil.example",
    ] {
        let (status, body) = srv.call_with(
            "GET",
            "/v1/sessions",
            None,
            Some(&srv.token),
            &[("Origin", other)],
        );
        assert_eq!(status, 403, "{other}: {body}");
        assert_eq!(body["error"]["code"], "forbidden_origin", "{other}");
        let (status, hs) = srv.headers_of(
            "OPTIONS",
            "/v1/sessions",
            &[("Origin", other), ("Access-Control-Request-Method", "POST")],
        );
        assert_eq!(status, 403, "{other}");
        assert_eq!(header(&hs, "access-control-allow-origin"), None, "{other}");
    }
    // Clients that are not web pages (no Origin, an editor's) are unchanged.
    let (status, _) = srv.call_with("GET", "/v1/sessions", None, Some(&srv.token), &[]);
    assert_eq!(status, 200);
    let (status, _) = srv.call_with(
        "GET",
        "/v1/sessions",
        None,
        Some(&srv.token),
        &[("Origin", "vscode-webview://abc")],
    );
    assert_eq!(status, 200);
}

#[test]
fn without_allow_origin_no_page_gets_cors_answers_and_a_bad_origin_is_refused() {
    let srv = Server::start(&[]);
    let (_, hs) = srv.headers_of(
        "OPTIONS",
        "/v1/sessions",
        &[
            ("Origin", "http://127.0.0.1:8000"),
            ("Access-Control-Request-Method", "POST"),
        ],
    );
    assert!(
        !hs.iter().any(|(k, _)| k.starts_with("access-control-")),
        "{hs:?}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--allow-origin",
            "127.0.0.1:8000",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--allow-origin") && err.contains("http://127.0.0.1:8000"),
        "{err}"
    );
}
