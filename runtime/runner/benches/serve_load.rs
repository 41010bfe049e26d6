//! Loopback load test of `mlpl serve` (not part of `cargo test`): several sessions
//! run many small cells concurrently, each client following its session's SSE
//! stream; reports throughput and latency and checks that no event was lost,
//! duplicated or reordered, and that a replay from `Last-Event-ID: 0` matches.
//!
//! Usage: `cargo bench -p mlpl-runner --bench serve_load [-- --sessions 4 --runs 250]`.
//! Bounded: at most 16 sessions, 5,000 runs per session and 300 s in all; it only
//! talks to the server it starts on 127.0.0.1.

#[path = "../tests/runner/serve_support.rs"]
mod serve_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::{Server, Sse};

const LIMIT: Duration = Duration::from_secs(300);

fn arg(name: &str, default: usize, max: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        .clamp(1, max)
}

/// The code of cell `i` (0-based) of a session: a counter, and every tenth cell
/// a small training loop (which emits step events).
fn cell(i: usize) -> String {
    if i == 0 {
        "n = 0\nW = param[2]\nn".to_string()
    } else if i.is_multiple_of(10) {
        "train 20 { adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8); sum((W - [1, 2]) * (W - [1, 2])) }\nn = n + 1\nn".to_string()
    } else {
        "n = n + 1\nn".to_string()
    }
}

struct SessionResult {
    events: Vec<Sse>,
    runs: Vec<String>,
    latencies: Vec<Duration>,
}

fn drive(srv: &Server, runs: usize, deadline: Instant) -> Result<SessionResult, String> {
    let id = srv.session();
    let stream = srv.events(&id, None);
    let mut events = Vec::new();
    let mut ids = Vec::new();
    let mut latencies = Vec::new();
    for i in 0..runs {
        if Instant::now() > deadline {
            return Err("time limit reached".into());
        }
        let t = Instant::now();
        let (status, body) = srv.post(
            &format!("/v1/sessions/{id}/runs"),
            &json!({ "code": cell(i) }),
        );
        if status != 202 {
            return Err(format!("run {i}: HTTP {status}: {body}"));
        }
        let run = body["run"].as_str().unwrap_or_default().to_string();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let e = stream
                .next(left)
                .ok_or_else(|| format!("run {i}: no run_finished in time"))?;
            let done = e.event == "run_finished" && e.data["run"] == run.as_str();
            events.push(e);
            if done {
                break;
            }
        }
        latencies.push(t.elapsed());
        ids.push(run);
    }
    // Replay the whole stream and compare.
    let replay = srv.events(&id, Some(0));
    for (k, original) in events.iter().enumerate() {
        let e = replay
            .next(Duration::from_secs(30))
            .ok_or_else(|| format!("replay ended after {k} events"))?;
        if e.id != original.id || e.data != original.data {
            return Err(format!("replay differs at event {k}"));
        }
    }
    Ok(SessionResult {
        events,
        runs: ids,
        latencies,
    })
}

/// Checks one session's stream; returns the number of step events.
fn verify(r: &SessionResult) -> Result<usize, String> {
    let mut steps = 0;
    for (k, e) in r.events.iter().enumerate() {
        if e.id != k as u64 + 1 || e.data["seq"] != e.id {
            return Err(format!("event {k} has id {} (lost or reordered)", e.id));
        }
    }
    let mut at = 0;
    for (i, run) in r.runs.iter().enumerate() {
        let mine: Vec<&Sse> = r.events[at..]
            .iter()
            .take_while(|e| e.data["run"] == run.as_str())
            .collect();
        at += mine.len();
        let first = mine.first().map(|e| e.event.as_str());
        let last = mine.last().map(|e| e.event.as_str());
        if first != Some("run_started") || last != Some("run_finished") {
            return Err(format!("run {i}: events {first:?} .. {last:?}"));
        }
        if mine.last().map(|e| &e.data["status"]) != Some(&json!("ok")) {
            return Err(format!("run {i} did not succeed"));
        }
        let value = mine
            .iter()
            .find(|e| e.event == "value")
            .ok_or_else(|| format!("run {i}: no value"))?;
        if value.data["text"]
            .as_str()
            .and_then(|t| t.parse::<usize>().ok())
            != Some(i)
        {
            return Err(format!(
                "run {i}: value {} (state out of order)",
                value.data["text"]
            ));
        }
        let s: Vec<u64> = mine
            .iter()
            .filter(|e| e.event == "step")
            .map(|e| e.data["step"].as_u64().unwrap_or(0))
            .collect();
        if i > 0
            && i.is_multiple_of(10)
            && (s.last() != Some(&20) || !s.windows(2).all(|w| w[0] < w[1]))
        {
            return Err(format!("run {i}: steps {s:?}"));
        }
        steps += s.len();
    }
    if at != r.events.len() {
        return Err("events after the last run".into());
    }
    Ok(steps)
}

fn main() {
    let sessions = arg("--sessions", 4, 16);
    let runs = arg("--runs", 250, 5000);
    let srv = Arc::new(Server::start(&[]));
    let deadline = Instant::now() + LIMIT;
    let started = Instant::now();
    let handles: Vec<_> = (0..sessions)
        .map(|_| {
            let srv = srv.clone();
            std::thread::spawn(move || drive(&srv, runs, deadline))
        })
        .collect();
    let results: Vec<Result<SessionResult, String>> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("client thread panicked".into()))
        })
        .collect();
    let wall = started.elapsed().as_secs_f64();
    let mut ok = true;
    let (mut events, mut steps, mut lat) = (0usize, 0usize, Vec::new());
    for (i, r) in results.iter().enumerate() {
        match r
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|r| verify(r).map(|s| (r, s)))
        {
            Ok((r, s)) => {
                events += r.events.len();
                steps += s;
                lat.extend(r.latencies.iter().copied());
            }
            Err(e) => {
                ok = false;
                eprintln!("session {i}: {e}");
            }
        }
    }
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let total_runs = sessions * runs;
    println!(
        "{}",
        json!({
            "sessions": sessions,
            "runs_per_session": runs,
            "runs": total_runs,
            "events": events,
            "step_events": steps,
            "wall_s": (wall * 1000.0).round() / 1000.0,
            "runs_per_s": (total_runs as f64 / wall).round(),
            "events_per_s": (events as f64 / wall).round(),
            "latency_ms_p50": (pct(0.5) * 100.0).round() / 100.0,
            "latency_ms_p99": (pct(0.99) * 100.0).round() / 100.0,
            "latency_ms_max": (pct(1.0) * 100.0).round() / 100.0,
            "verified": ok,
        })
    );
    if !ok {
        std::process::exit(1);
    }
}
