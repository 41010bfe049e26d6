//! A small LSP client for tests and benchmarks: it runs the server in-process on a
//! duplex pipe (the same framing as stdio), sends requests and notifications,
//! answers the server's own requests, and collects notifications.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::{oneshot, Mutex, Notify};

/// A connected client.
pub struct TestClient {
    writer: Mutex<WriteHalf<DuplexStream>>,
    pending: Arc<std::sync::Mutex<HashMap<i64, oneshot::Sender<Value>>>>,
    /// Every notification received, in order.
    pub notifications: Arc<std::sync::Mutex<Vec<(Instant, Value)>>>,
    notified: Arc<Notify>,
    next_id: std::sync::atomic::AtomicI64,
}

async fn read_message<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let mut buf = vec![0; len?];
    r.read_exact(&mut buf).await.ok()?;
    serde_json::from_slice(&buf).ok()
}

impl TestClient {
    /// Starts a server and sends `initialize` (with `options` as initialization
    /// options) and `initialized`.
    pub async fn start(options: Value) -> (Arc<TestClient>, Value) {
        let (client_side, server_side) = tokio::io::duplex(1 << 20);
        let (sr, sw) = tokio::io::split(server_side);
        tokio::spawn(mlpl_lsp::framing::serve(sr, sw));
        let (cr, cw) = tokio::io::split(client_side);
        let client = Arc::new(TestClient {
            writer: Mutex::new(cw),
            pending: Arc::new(std::sync::Mutex::new(HashMap::new())),
            notifications: Arc::new(std::sync::Mutex::new(Vec::new())),
            notified: Arc::new(Notify::new()),
            next_id: std::sync::atomic::AtomicI64::new(1),
        });
        let reader_client = client.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(cr);
            while let Some(msg) = read_message(&mut r).await {
                let has_id = msg.get("id").is_some();
                let has_method = msg.get("method").is_some();
                if has_id && has_method {
                    // A request from the server (refreshes, …): answer with null.
                    let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": null});
                    reader_client.send(&reply).await;
                } else if has_id {
                    let id = msg["id"].as_i64().unwrap_or(-1);
                    if let Some(tx) = reader_client.pending.lock().unwrap().remove(&id) {
                        let _ = tx.send(msg);
                    }
                } else {
                    reader_client
                        .notifications
                        .lock()
                        .unwrap()
                        .push((Instant::now(), msg));
                    reader_client.notified.notify_waiters();
                }
            }
        });
        let init = client
            .request(
                "initialize",
                json!({
                    "processId": null,
                    "rootUri": null,
                    "capabilities": {
                        "textDocument": {"completion": {"completionItem": {"snippetSupport": true}}},
                        "workspace": {"inlayHint": {"refreshSupport": true}, "codeLens": {"refreshSupport": true}}
                    },
                    "initializationOptions": options,
                }),
            )
            .await;
        client.notify("initialized", json!({})).await;
        (client, init)
    }

    async fn send(&self, v: &Value) {
        let body = serde_json::to_vec(v).unwrap();
        let mut w = self.writer.lock().await;
        w.write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
            .await
            .unwrap();
        w.write_all(&body).await.unwrap();
        w.flush().await.unwrap();
    }

    /// Sends a request and returns the whole response (`result` or `error`).
    pub async fn request_raw(&self, method: &str, params: Value) -> Value {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send(&msg).await;
        tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .unwrap_or_else(|_| panic!("no response to {method}"))
            .unwrap()
    }

    /// Sends a request and returns its `result`.
    pub async fn request(&self, method: &str, params: Value) -> Value {
        let r = self.request_raw(method, params).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Waits for a notification satisfying `pred` (already received or future).
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let wait = self.notified.notified();
            if let Some((_, v)) = self
                .notifications
                .lock()
                .unwrap()
                .iter()
                .find(|(_, v)| pred(v))
            {
                return v.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!(
                    "timed out waiting for {what}; got {:?}",
                    self.notifications.lock().unwrap()
                );
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(100)), wait).await;
        }
    }

    /// Waits for the diagnostics of `uri` at `version`.
    pub async fn diagnostics(&self, uri: &str, version: i64) -> Value {
        self.wait_for(&format!("diagnostics of {uri} v{version}"), |v| {
            v["method"] == "textDocument/publishDiagnostics"
                && v["params"]["uri"] == uri
                && v["params"]["version"] == version
        })
        .await["params"]
            .clone()
    }

    /// All diagnostics notifications for `uri`, in order.
    pub fn published(&self, uri: &str) -> Vec<Value> {
        self.notifications
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, v)| {
                v["method"] == "textDocument/publishDiagnostics" && v["params"]["uri"] == uri
            })
            .map(|(_, v)| v["params"].clone())
            .collect()
    }

    /// Opens a document.
    pub async fn open(&self, uri: &str, text: &str, version: i64) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "mlpl", "version": version, "text": text}}),
        )
        .await;
    }

    /// Sends one incremental change.
    pub async fn change(&self, uri: &str, version: i64, range: [u32; 4], text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": range[0], "character": range[1]}, "end": {"line": range[2], "character": range[3]}}, "text": text}]
            }),
        )
        .await;
    }

    /// `{textDocument, position}` parameters.
    pub fn at(uri: &str, line: u32, character: u32) -> Value {
        json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
    }
}

/// The (line, UTF-16 column) of the first occurrence of `needle` in `text`, plus `extra` columns.
pub fn pos_of(text: &str, needle: &str, extra: u32) -> (u32, u32) {
    let i = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in text"));
    let before = &text[..i];
    let line = before.matches('\n').count() as u32;
    let start = before.rfind('\n').map_or(0, |j| j + 1);
    let col = text[start..i].encode_utf16().count() as u32;
    (line, col + extra)
}
