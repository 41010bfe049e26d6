//! `llm_call` (LANGUAGE §16.5) over real HTTP: a small server on 127.0.0.1 that
//! speaks Ollama's `/api/generate` (Ollama itself is not installed where these
//! tests run) answers sessions and `mlpl run`: a reply, a non-2xx status with a
//! long body, a body that is not JSON, one without `response`, a refused
//! connection, and a slow reply that the session cancels while it waits.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use mlpl_runner::session::{Event, EventBody, RunRequest, RunStatus, Session};

/// One request as the server read it.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
    content_type: String,
    body: String,
}

/// How the server answers.
enum Answer {
    /// At once, with this status and body.
    Now(u16, String),
    /// Says on `arrived` that the request came, then waits on `release` before
    /// answering with the body.
    After {
        arrived: mpsc::Sender<()>,
        release: mpsc::Receiver<()>,
        body: String,
    },
}

/// A one-connection server on an ephemeral port of 127.0.0.1; its thread hands
/// back the request it read.
struct Server {
    base: String,
    request: mpsc::Receiver<Request>,
}

fn serve(answer: Answer) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let req = read_request(&stream);
        let _ = tx.send(req);
        let (status, body) = match answer {
            Answer::Now(s, b) => (s, b),
            Answer::After {
                arrived,
                release,
                body,
            } => {
                arrived.send(()).unwrap();
                let _ = release.recv();
                (200, body)
            }
        };
        let mut stream = stream;
        let _ = write!(
            stream,
            "HTTP/1.1 {status} Status\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.flush();
    });
    Server { base, request: rx }
}

fn read_request(stream: &TcpStream) -> Request {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let (mut len, mut content_type) = (0, String::new());
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').unwrap();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => len = v.trim().parse().unwrap(),
            "content-type" => content_type = v.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    Request {
        method,
        path,
        content_type,
        body: String::from_utf8(body).unwrap(),
    }
}

fn session() -> (Session, Arc<Mutex<Vec<Event>>>) {
    Session::collecting("llm")
}

fn req(code: &str) -> RunRequest {
    RunRequest::code(code)
}

fn call(base: &str) -> String {
    format!(
        "reply = llm_call(\"{base}/\", \"Summarize MLPL in one sentence.\", \"llama3.2\")\nreply"
    )
}

#[test]
fn a_session_gets_the_reply_and_a_warning_event() {
    let server = serve(Answer::Now(
        200,
        r#"{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","response":"MLPL is an array language for ML.","done":true}"#.into(),
    ));
    let (mut s, events) = session();
    let out = s.run("r1", &req(&call(&server.base)));
    assert_eq!(out.status, RunStatus::Ok, "{:?}", out.diagnostic);
    assert_eq!(
        out.value.unwrap().display(),
        "MLPL is an array language for ML."
    );
    let got = server.request.recv().unwrap();
    assert_eq!(got.method, "POST");
    assert_eq!(got.path, "/api/generate");
    assert_eq!(got.content_type, "application/json");
    let body: serde_json::Value = serde_json::from_str(&got.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"model": "llama3.2", "prompt": "Summarize MLPL in one sentence.", "stream": false})
    );
    let ev = events.lock().unwrap();
    let warnings: Vec<&serde_json::Value> = ev
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Warning { diagnostic } => Some(diagnostic),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{ev:?}");
    assert_eq!(warnings[0]["code"], "W0404");
    let text = warnings[0].to_string();
    assert!(
        text.contains(&format!("{}/api/generate", server.base)),
        "{text}"
    );
}

/// Runs one call against a server answering `status` and `body`; the E0408 message.
fn failure(status: u16, body: &str) -> (String, String) {
    let server = serve(Answer::Now(status, body.to_string()));
    let (mut s, _) = session();
    let out = s.run("r1", &req(&call(&server.base)));
    assert_eq!(out.status, RunStatus::Error);
    let d = out.diagnostic.unwrap();
    assert_eq!(d.code, "E0408", "{}", d.message);
    assert!(
        d.message.contains(&format!("{}/api/generate", server.base)),
        "{}",
        d.message
    );
    server.request.recv().unwrap();
    (d.message, server.base)
}

#[test]
fn a_non_2xx_status_is_e0408_with_the_start_of_the_body() {
    let body = format!("{}{}", "x".repeat(200), "y".repeat(5000));
    let (m, _) = failure(500, &body);
    assert!(m.contains("status 500"), "{m}");
    assert!(m.contains(&"x".repeat(200)), "{m}");
    assert!(
        !m.contains('y'),
        "more than 200 characters of the body: {m}"
    );
    let (m, _) = failure(404, r#"{"error":"model 'llama3.2' not found"}"#);
    assert!(m.contains("status 404") && m.contains("not found"), "{m}");
}

#[test]
fn a_reply_that_is_not_json_is_e0408() {
    let (m, _) = failure(200, "<html>hello</html>");
    assert!(m.contains("not JSON"), "{m}");
}

#[test]
fn a_reply_without_response_is_e0408() {
    let (m, _) = failure(200, r#"{"model":"llama3.2","done":true}"#);
    assert!(m.contains("no `response`"), "{m}");
}

#[test]
fn a_refused_connection_is_e0408_naming_the_address() {
    // A port that was just free: nothing listens on it any more.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (mut s, _) = session();
    let out = s.run("r1", &req(&call(&format!("http://127.0.0.1:{port}"))));
    let d = out.diagnostic.unwrap();
    assert_eq!(d.code, "E0408");
    assert!(
        d.message
            .contains(&format!("http://127.0.0.1:{port}/api/generate")),
        "{}",
        d.message
    );
}

#[test]
fn cancelling_a_session_stops_waiting_for_a_slow_reply() {
    let (arrived_tx, arrived) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let server = serve(Answer::After {
        arrived: arrived_tx,
        release: release_rx,
        body: r#"{"response":"too late"}"#.into(),
    });
    let (mut s, _) = session();
    let cancel = s.cancel_handle();
    let code = call(&server.base);
    let worker = std::thread::spawn(move || {
        let out = s.run("slow", &req(&code));
        (s, out)
    });
    // The request is at the server, which holds its reply until released.
    arrived.recv().unwrap();
    cancel.cancel();
    let (mut s, out) = worker.join().unwrap();
    assert_eq!(out.status, RunStatus::Cancelled);
    assert_eq!(out.diagnostic.unwrap().code, "E0409");
    assert!(s.workspace().get("reply").is_none());
    release.send(()).unwrap();
    // The session runs again, not cancelled.
    assert_eq!(s.run("after", &req("1 + 1")).status, RunStatus::Ok);
}

/// The original's `demos/llm_tool.mlpl`, its address pointed at the local server.
const LLM_TOOL: &str = r#"# LLM-as-tool REST integration.
reply = llm_call("http://localhost:11434", "Summarize MLPL in one sentence.", "llama3.2")
reply
reply_tokens = tokenize_bytes(reply)
reply_tokens
"#;

#[test]
fn the_llm_tool_demo_runs_against_a_local_server() {
    let server = serve(Answer::Now(
        200,
        r#"{"response":"MLPL: arrays.","done":true}"#.into(),
    ));
    let dir = std::env::temp_dir().join(format!("mlpl-llm-tool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let demo = LLM_TOOL.replace("http://localhost:11434", &server.base);
    std::fs::write(dir.join("llm_tool.mlpl"), demo).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mlpl"))
        .args(["run", "llm_tool.mlpl"])
        .current_dir(&dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "77 76 80 76 58 32 97 114 114 97 121 115 46\n");
    assert!(stderr.contains("W0404"), "{stderr}");
    assert!(
        stderr.contains(&format!("{}/api/generate", server.base)),
        "{stderr}"
    );
    assert_eq!(server.request.recv().unwrap().path, "/api/generate");
}
