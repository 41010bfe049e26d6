//! Malformed frames against the `mlpl-lsp` binary: invalid JSON, a lone surrogate
//! escape in a `didChange`, a wrong `Content-Length`, JSON that is no JSON-RPC
//! message. Each is answered with a JSON-RPC error (or repaired) and the server
//! keeps serving the same connection (docs/limits.md).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

fn frame(body: &str) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

struct Lsp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: mpsc::Receiver<Value>,
}

impl Lsp {
    fn start() -> Lsp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mlpl-lsp"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut len = None;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length:") {
                        len = v.trim().parse::<usize>().ok();
                    }
                }
                let mut buf = vec![0; len.unwrap()];
                r.read_exact(&mut buf).unwrap();
                if tx.send(serde_json::from_slice(&buf).unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut lsp = Lsp { child, stdin, rx };
        lsp.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": null, "rootUri": null, "capabilities": {},
                       "initializationOptions": {"debounceMs": 0}}}));
        lsp.response(1);
        lsp.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        lsp
    }

    fn raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, v: &Value) {
        self.raw(&frame(&v.to_string()));
    }

    /// Messages until one satisfies `pred` (a generous guard against a hang,
    /// not a timing assertion).
    fn until(&self, what: &str, pred: impl Fn(&Value) -> bool) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let v = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {what}; got {before:?}"));
            if pred(&v) {
                return (before, v);
            }
            before.push(v);
        }
    }

    fn response(&self, id: i64) -> Value {
        self.until(&format!("response {id}"), |v| {
            v["id"] == id && v.get("method").is_none()
        })
        .1
    }

    /// Checks the server still answers, then ends it and returns its exit status.
    fn finish(mut self, id: i64) -> std::process::ExitStatus {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "shutdown"}));
        assert_eq!(self.response(id)["result"], Value::Null);
        self.send(&json!({"jsonrpc": "2.0", "method": "exit"}));
        drop(self.stdin);
        self.child.wait().unwrap()
    }
}

/// `shutdown` then `exit` end the server even while the client keeps its
/// input open (an editor does not close the pipe first).
#[test]
fn exit_ends_the_server_while_its_input_stays_open() {
    let mut lsp = Lsp::start();
    lsp.send(&json!({"jsonrpc": "2.0", "id": 90, "method": "shutdown"}));
    assert_eq!(lsp.response(90)["result"], Value::Null);
    lsp.send(&json!({"jsonrpc": "2.0", "method": "exit"}));
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = lsp.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still running 30 s after exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    drop(lsp.stdin);
}

fn errors(msgs: &[Value]) -> Vec<i64> {
    msgs.iter()
        .filter_map(|m| m["error"]["code"].as_i64())
        .collect()
}

#[test]
fn invalid_json_is_answered_and_the_server_keeps_serving() {
    let mut lsp = Lsp::start();
    lsp.raw(&frame("{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": "));
    lsp.raw(&frame("[1, 2"));
    lsp.raw(&frame(r#"{"not": "a message"}"#));
    lsp.raw(&frame(r#"{"jsonrpc":"2.0","id":3,"method":7}"#));
    lsp.raw(b"Content-Length: twelve\r\n\r\n{}");
    lsp.raw(b"Content-Type: text/plain\r\n\r\n");
    lsp.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover",
        "params": {"textDocument": {"uri": "file:///none.mlpl"}, "position": {"line": 0, "character": 0}}}));
    let (before, hover) = lsp.until("hover", |v| v["id"] == 4);
    assert!(hover.get("error").is_none(), "{hover}");
    let codes = errors(&before);
    assert!(codes.len() >= 6, "{before:?}");
    assert_eq!(&codes[..4], &[-32700, -32700, -32600, -32600], "{before:?}");
    assert!(
        before.iter().any(|m| m["id"] == 3),
        "the refused request's id is kept: {before:?}"
    );
    assert!(lsp.finish(5).success());
}

#[test]
fn a_lone_surrogate_in_did_change_is_repaired() {
    let mut lsp = Lsp::start();
    let uri = "file:///s.mlpl";
    lsp.send(&json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "mlpl", "version": 1, "text": "x = 1\n"}}}));
    // serde_json cannot write a lone surrogate: the frame is written by hand.
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"textDocument/didChange","params":{{"textDocument":{{"uri":"{uri}","version":2}},"contentChanges":[{{"text":"y = \ud800 1\nz = zeros([2, 3])\n"}}]}}}}"#
    );
    lsp.raw(&frame(&body));
    let (_, diags) = lsp.until("diagnostics of v2", |v| {
        v["method"] == "textDocument/publishDiagnostics" && v["params"]["version"] == 2
    });
    assert_eq!(diags["params"]["uri"], uri);
    lsp.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover",
        "params": {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 0}}}),
    );
    let hover = lsp.response(2);
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("[2, 3]") || text.contains("2 × 3") || text.contains('3'),
        "{hover}"
    );
    assert!(lsp.finish(3).success());
}

#[test]
fn wrong_content_lengths_do_not_end_the_server() {
    let mut lsp = Lsp::start();
    let hover = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": "file:///none.mlpl"}, "position": {"line": 0, "character": 0}}})
        .to_string()
    };
    // Too short: the rest of the body is bytes outside any frame.
    let b = hover(2);
    lsp.raw(format!("Content-Length: {}\r\n\r\n{b}", b.len() - 7).as_bytes());
    lsp.raw(&frame(&hover(3)));
    assert!(lsp.response(3).get("error").is_none());
    // Too long: the next frame's header follows a complete message.
    let b = hover(4);
    lsp.raw(format!("Content-Length: {}\r\n\r\n{b}", b.len() + 100).as_bytes());
    lsp.raw(&frame(&hover(5)));
    assert!(lsp.response(5).get("error").is_none());
    // Absurd: refused without being buffered.
    lsp.raw(b"Content-Length: 99999999999999999\r\n\r\n");
    lsp.raw(b"Content-Length: -1\r\n\r\n");
    lsp.raw(&frame(&hover(6)));
    let (before, last) = lsp.until("response 6", |v| v["id"] == 6);
    assert!(last.get("error").is_none());
    assert!(errors(&before).len() >= 2, "{before:?}");
    assert!(lsp.finish(7).success());
}

#[test]
fn documents_with_absurd_sizes_and_models_are_analysed() {
    let mut lsp = Lsp::start();
    let text = "p = param[1e7, 1e7]\nq = param[8467440737095516165]\ns = sum(zeros([1e20, 0]), 1)\nr = reshape(iota(4), zeros([1e9]))\nm = linear(2, 2, 0)\nrepeat 100000 { m = residual(m) }\nk = linear(2, 2, 0)\nrepeat 40 { k = chain(k, k) }\ny = apply(k, ones([1, 2]))\n";
    let uri = "file:///huge.mlpl";
    lsp.send(&json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "mlpl", "version": 1, "text": text}}}));
    lsp.until("diagnostics", |v| {
        v["method"] == "textDocument/publishDiagnostics" && v["params"]["uri"] == uri
    });
    for (id, line) in [(2, 0), (3, 5), (4, 8)] {
        lsp.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}}}),
        );
        assert!(lsp.response(id).get("error").is_none());
    }
    assert!(lsp.finish(5).success());
}
