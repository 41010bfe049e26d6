//! `mlpl serve`'s limits (docs/limits.md): a session's memory budget, clients
//! that send their requests slowly, and restoring a damaged snapshot.

use crate::serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_support::*;

fn address(srv: &Server) -> String {
    srv.base.trim_start_matches("http://").to_string()
}

fn finished(srv: &Server, events: &Events, id: &str, code: &str) -> Value {
    let run = srv.run(id, code);
    events.until_finished(&run).pop().unwrap().data
}

#[test]
fn a_session_past_its_memory_budget_gets_e0410_naming_what_it_holds() {
    let srv = Server::start(&["--session-memory-budget", "1000000"]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let fin = finished(&srv, &events, &id, "a = zeros([200000])");
    assert_eq!(fin["status"], "ok", "{fin}");
    assert_eq!(
        fin["memory"],
        json!({"live_bytes": 800000, "budget_bytes": 1000000})
    );
    // 400,000 bytes more would pass the budget: refused before allocating, in
    // the cell that asked, with what the session holds and the flag to raise.
    let (status, body) = srv.post(
        &format!("/v1/sessions/{id}/runs"),
        &json!({"code": "b = zeros([100000])", "cell": {"uri": "file:///nb.mlpl", "index": 2, "start_line": 4}}),
    );
    assert_eq!(status, 202, "{body}");
    let fin = events
        .until_finished(body["run"].as_str().unwrap())
        .pop()
        .unwrap()
        .data;
    assert_eq!(fin["status"], "error", "{fin}");
    let d = &fin["diagnostic"];
    assert_eq!(d["code"], "E0410", "{d}");
    assert_eq!(
        (d["file"].as_str(), d["line"].as_u64()),
        (Some("file:///nb.mlpl"), Some(5))
    );
    let notes = d["notes"].to_string();
    assert!(notes.contains("400000 bytes asked"), "{notes}");
    assert!(notes.contains("`a` 800000"), "{notes}");
    assert!(notes.contains("budget is 1000000 bytes"), "{notes}");
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("--session-memory-budget"),
        "{d}"
    );
    assert_eq!(fin["memory"]["live_bytes"], 800000);
    // The session lives on; freeing `a` makes room.
    let fin = finished(&srv, &events, &id, "a = 0\nb = zeros([100000])");
    assert_eq!(fin["status"], "ok", "{fin}");
    assert_eq!(fin["memory"]["live_bytes"], 400000);
    let (_, list) = srv.get("/v1/sessions");
    assert_eq!(list["sessions"][0]["memory"]["live_bytes"], 400000);
    // Other sessions have budgets of their own.
    let other = srv.session();
    let ev2 = srv.events(&other, None);
    assert_eq!(
        finished(&srv, &ev2, &other, "c = zeros([200000])")["status"],
        "ok"
    );
}

/// Whether the server closes `tcp` within `within` while the client sends one
/// more byte of `bytes` every 100 ms.
fn closed_while_trickling(tcp: &mut TcpStream, bytes: &[u8], within: Duration) -> bool {
    tcp.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 512];
    let mut sent = 0;
    while started.elapsed() < within {
        if sent < bytes.len() {
            if tcp.write_all(&bytes[sent..sent + 1]).is_err() {
                return true;
            }
            sent += 1;
        }
        match tcp.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {} // an error answer before the close
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn a_client_sending_its_headers_slowly_is_disconnected() {
    let srv = Server::start(&["--header-timeout", "1"]);
    // One byte every 100 ms: the whole request would take over 10 s.
    let request = format!(
        "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: {}\r\n\r\n",
        "x".repeat(100)
    );
    let mut tcp = TcpStream::connect(address(&srv)).unwrap();
    assert!(
        closed_while_trickling(&mut tcp, request.as_bytes(), Duration::from_secs(8)),
        "the slow connection was still open after 8 s"
    );
    // A connection that sends nothing at all is closed too.
    let mut idle = TcpStream::connect(address(&srv)).unwrap();
    assert!(closed_while_trickling(
        &mut idle,
        b"",
        Duration::from_secs(8)
    ));
    // Everyone else is still served.
    assert_eq!(srv.get("/v1/health").0, 200);
}

#[test]
fn a_body_that_does_not_arrive_gets_408() {
    let srv = Server::start(&["--body-timeout", "1"]);
    let id = srv.session();
    let mut tcp = TcpStream::connect(address(&srv)).unwrap();
    let head = format!(
        "POST /v1/sessions/{id}/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"code\":"
    );
    tcp.write_all(head.as_bytes()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tcp.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"timeout\""), "{answer}");
    assert_eq!(srv.get("/v1/health").0, 200);
}

fn variable_names(srv: &Server, id: &str) -> Vec<String> {
    let (_, body) = srv.get(&format!("/v1/sessions/{id}/variables"));
    body["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_damaged_snapshot_loses_only_the_damaged_values_and_names_them() {
    let state = temp_dir("state-damaged");
    let srv = Server::start(&["--state-dir", s(&state)]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let code = "a = iota(3)\nc = zeros([4])\nm = linear(2, 2, 0)\nname = \"kept\"\nk = 7";
    assert_eq!(finished(&srv, &events, &id, code)["saved"], true);
    srv.stop();

    // One tensor key points nowhere; the model's layer is 10^12 wide.
    let file = state.join(&id).join("session.json");
    let mut saved: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    for b in saved["bindings"].as_array_mut().unwrap() {
        if b["name"] == "c" {
            b["tensor"] = json!("b/nowhere");
        }
    }
    for node in saved["models"].as_array_mut().unwrap() {
        if node.get("inp").is_some() {
            node["inp"] = json!(1_000_000);
            node["out"] = json!(1_000_000);
        }
    }
    std::fs::write(&file, serde_json::to_vec(&saved).unwrap()).unwrap();

    let srv = Server::start(&["--state-dir", s(&state)]);
    let names = variable_names(&srv, &id);
    for kept in ["a", "name", "k", "__linear_W_0", "__linear_b_0"] {
        assert!(
            names.iter().any(|n| n == kept),
            "{kept} missing from {names:?}"
        );
    }
    assert!(!names.iter().any(|n| n == "c" || n == "m"), "{names:?}");
    // Asked again, the restore names what it left out, and why.
    let (status, body) = srv.post(&format!("/v1/sessions/{id}/restore"), &json!({}));
    assert_eq!(status, 200, "{body}");
    let lost = body["not_restored"].to_string();
    assert!(
        lost.contains("`c` was not restored: tensor `b/nowhere` is missing"),
        "{lost}"
    );
    assert!(
        lost.contains("`m` was not restored: model node 0: its parameters"),
        "{lost}"
    );
    // The session works on.
    let events = srv.events(&id, None);
    let fin = finished(&srv, &events, &id, "sum(a) + k");
    assert_eq!(fin["status"], "ok", "{fin}");
    srv.stop();

    // A tensor file that is not one: the values in it are lost, the rest kept.
    // (The run saved the session again, under a new tensor file.)
    let saved: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let tensors = saved["tensors"].as_str().unwrap().to_string();
    std::fs::write(state.join(&id).join(&tensors), b"not a safetensors file").unwrap();
    let srv = Server::start(&["--state-dir", s(&state)]);
    let names = variable_names(&srv, &id);
    assert!(
        names.iter().any(|n| n == "name") && names.iter().any(|n| n == "k"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n == "a"), "{names:?}");
    let (_, body) = srv.post(&format!("/v1/sessions/{id}/restore"), &json!({}));
    assert!(
        body["not_restored"]
            .to_string()
            .contains("is not a safetensors file"),
        "{body}"
    );
    let _ = std::fs::remove_dir_all(&state);
}
