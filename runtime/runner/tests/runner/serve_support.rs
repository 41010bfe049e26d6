//! Helpers for the `mlpl serve` integration tests: start the real binary on a
//! loopback port, call its routes and read its SSE streams.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any single wait in these tests may take.
pub const WAIT: Duration = Duration::from_secs(60);

/// The token the tests start servers with.
pub const TOKEN: &str = "test-token-0123";

/// A running `mlpl serve` process (killed on drop).
pub struct Server {
    child: Child,
    pub base: String,
    pub token: String,
    agent: ureq::Agent,
}

/// One SSE event.
#[derive(Clone, Debug)]
pub struct Sse {
    pub id: u64,
    pub event: String,
    pub data: Value,
}

fn agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(timeout)
        .build()
        .into()
}

impl Server {
    /// Starts `mlpl serve --bind 127.0.0.1:0 --token TOKEN` plus `extra`.
    pub fn start(extra: &[&str]) -> Server {
        let mut args = vec!["serve", "--bind", "127.0.0.1:0"];
        if !extra.iter().any(|a| a.starts_with("--token")) {
            args.extend(["--token", TOKEN]);
        }
        args.extend(extra);
        Server::spawn(&args)
    }

    /// Starts `mlpl` with exactly `args`.
    pub fn spawn(args: &[&str]) -> Server {
        Server::spawn_env::<&str>(args, &[])
    }

    /// Starts `mlpl` with exactly `args` and the environment variables `env`
    /// added to this process's.
    pub fn spawn_env<V: AsRef<std::ffi::OsStr>>(args: &[&str], env: &[(&str, V)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mlpl"))
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_ref())))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("mlpl starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(WAIT)
            .expect("the server prints its address");
        let base = first
            .strip_prefix("mlpl serve listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first}"))
            .to_string();
        let token = if args.iter().any(|a| a.starts_with("--token")) {
            args.iter()
                .position(|a| *a == "--token")
                .map(|i| args[i + 1].to_string())
                .unwrap_or_default()
        } else {
            let line = rx.recv_timeout(WAIT).expect("the token line");
            line.strip_prefix("token: ")
                .expect("token: ...")
                .to_string()
        };
        Server {
            child,
            base,
            token,
            agent: agent(Some(WAIT)),
        }
    }

    /// A request with the server's token.
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        self.call_with(method, path, body, Some(&self.token), &[])
    }

    /// A request with any token (or none) and extra headers.
    pub fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let auth = token.map(|t| format!("Bearer {t}"));
        macro_rules! with_headers {
            ($req:expr) => {{
                let mut r = $req;
                if let Some(a) = &auth {
                    r = r.header("Authorization", a.as_str());
                }
                for (k, v) in headers {
                    r = r.header(*k, *v);
                }
                r
            }};
        }
        let resp = match method {
            "GET" => with_headers!(self.agent.get(&url)).call(),
            "DELETE" => with_headers!(self.agent.delete(&url)).call(),
            "POST" => {
                let r = with_headers!(self.agent.post(&url)).content_type("application/json");
                match body {
                    Some(b) => r.send(b),
                    None => r.send_empty(),
                }
            }
            "PUT" => with_headers!(self.agent.put(&url)).send_empty(),
            other => panic!("method {other}"),
        };
        let mut resp = resp.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, json)
    }

    /// A request without a body (`OPTIONS` too) with extra headers: its
    /// status and its headers (names lower-cased).
    pub fn headers_of(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Vec<(String, String)>) {
        let url = format!("{}{path}", self.base);
        let mut req = match method {
            "OPTIONS" => self.agent.options(&url),
            "GET" => self.agent.get(&url),
            other => panic!("method {other}"),
        };
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req
            .call()
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let named = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        (resp.status().as_u16(), named)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("POST", path, Some(&body.to_string()))
    }

    /// Creates a session and returns its id.
    pub fn session(&self) -> String {
        let (status, body) = self.call("POST", "/v1/sessions", None);
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().expect("id").to_string()
    }

    /// Starts a run of `code` and returns its id.
    pub fn run(&self, session: &str, code: &str) -> String {
        let (status, body) = self.post(
            &format!("/v1/sessions/{session}/runs"),
            &serde_json::json!({ "code": code }),
        );
        assert_eq!(status, 202, "{body}");
        body["run"].as_str().expect("run").to_string()
    }

    /// Opens the session's event stream (after `last_event_id`, if given).
    pub fn events(&self, session: &str, last_event_id: Option<u64>) -> Events {
        let url = format!("{}/v1/sessions/{session}/events", self.base);
        let mut req = agent(None)
            .get(&url)
            .header("Authorization", format!("Bearer {}", self.token));
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = req.call().expect("the stream opens");
        assert_eq!(resp.status().as_u16(), 200);
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        let reader = BufReader::new(resp.into_body().into_reader());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || parse_sse(reader, tx));
        Events { rx }
    }

    /// Stops the server and waits for it.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_sse(reader: impl BufRead, tx: mpsc::Sender<Sse>) {
    let (mut id, mut event, mut data) = (0u64, String::new(), String::new());
    for line in reader.lines() {
        let Ok(line) = line else { return };
        if line.is_empty() {
            if !data.is_empty() {
                let value = serde_json::from_str(&data).unwrap_or(Value::String(data.clone()));
                let e = Sse {
                    id,
                    event: std::mem::take(&mut event),
                    data: value,
                };
                if tx.send(e).is_err() {
                    return;
                }
            }
            data.clear();
            event.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => id = value.parse().unwrap_or(0),
            "event" => event = value.to_string(),
            "data" => {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
            _ => {}
        }
    }
}

/// A session's event stream.
pub struct Events {
    rx: mpsc::Receiver<Sse>,
}

impl Events {
    /// The next event, or `None` after `timeout`.
    pub fn next(&self, timeout: Duration) -> Option<Sse> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Events up to and including the first for which `stop` holds (panics after
    /// [`WAIT`]).
    pub fn until(&self, stop: impl Fn(&Sse) -> bool) -> Vec<Sse> {
        let deadline = Instant::now() + WAIT;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let e = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("timed out; got {:?}", kinds(&out)));
            let done = stop(&e);
            out.push(e);
            if done {
                return out;
            }
        }
    }

    /// Whether the stream ends within [`WAIT`] (events before the end are skipped).
    pub fn wait_closed(&self) -> bool {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    /// Events up to the `run_finished` of `run`.
    pub fn until_finished(&self, run: &str) -> Vec<Sse> {
        self.until(|e| e.event == "run_finished" && e.data["run"] == run)
    }
}

/// The event names, in order.
pub fn kinds(events: &[Sse]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

/// Polls `f` until it returns `Some` (panics after [`WAIT`]).
pub fn poll<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out polling");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A fresh temporary directory.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mlpl-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The path as a `&str`.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
