//! `mlpl run --timeline FILE.json`: the run as a Chrome Trace Event Format file
//! (the JSON object form, `{"traceEvents": [...]}`) that Perfetto and
//! `chrome://tracing` open. See docs/traces.md for the tracks and fields.
//!
//! [`TimelineObserver`] is the interpreter's [`RunObserver`] for the run (it
//! forwards every call to an inner observer, the progress bars): it times each
//! top-level statement (track "statements"), each `train` loop and each of its
//! iterations (track "train"), and samples the backend's counters after every
//! statement and iteration as counter tracks (`"ph": "C"`). Every kernel call
//! with the shapes of its inputs comes from the [`KernelLog`] the run's devices
//! note them in (track "kernels"; the caller installs the log with
//! `DeviceContext::set_profile`). Times are microseconds since the run started.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use mlpl_devices::profile::KernelLog;
use mlpl_devices::{Backend, Counters};
use mlpl_diag::{SourceFile, Span};
use mlpl_lang::eval::{RunObserver, StepMode};
use serde_json::{json, Value};

/// The process id every event carries.
const PID: u32 = 1;
/// The statements' track.
const TID_STATEMENTS: u32 = 1;
/// The `train` loops' and iterations' track.
const TID_TRAIN: u32 = 2;
/// The kernels' track.
const TID_KERNELS: u32 = 3;
/// At most this many kernel events per run (later calls are counted in
/// `otherData.kernel_events_dropped`).
pub const MAX_KERNEL_EVENTS: usize = 200_000;
/// At most this many iteration events per loop (later iterations are counted
/// in the loop's `args` only), so a long run still gives a file a viewer opens.
pub const MAX_STEP_EVENTS: usize = 20_000;
/// Statement names are cut to this many characters.
const NAME_CHARS: usize = 80;

/// What a timeline recorded; shared between the observer and the caller.
#[derive(Debug)]
pub struct TimelineData {
    start: Instant,
    source: SourceFile,
    events: Vec<Value>,
    statement: Option<(Span, f64, u64)>,
    loops: Vec<LoopTrack>,
    kernels: Arc<KernelLog>,
}

#[derive(Debug)]
struct LoopTrack {
    start: f64,
    total: usize,
    depth: usize,
    step_events: usize,
    mode: Option<String>,
    /// When the loop's previous iteration ended.
    last_end: f64,
}

impl TimelineData {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e6
    }

    fn counters(&mut self, ts: f64, c: &Counters) {
        self.events.push(json!({
            "name": "kernels", "cat": "device", "ph": "C", "ts": ts, "pid": PID, "tid": 0,
            "args": {"kernel_launches": c.kernel_launches, "cpu_fallbacks": c.cpu_fallbacks},
        }));
        self.events.push(json!({
            "name": "transfers", "cat": "device", "ph": "C", "ts": ts, "pid": PID, "tid": 0,
            "args": {"uploads": c.uploads, "downloads": c.downloads},
        }));
        self.events.push(json!({
            "name": "transfer bytes", "cat": "device", "ph": "C", "ts": ts, "pid": PID, "tid": 0,
            "args": {"bytes_up": c.bytes_up, "bytes_down": c.bytes_down},
        }));
        self.events.push(json!({
            "name": "device memory", "cat": "device", "ph": "C", "ts": ts, "pid": PID, "tid": 0,
            "args": {"bytes": c.memory_bytes, "peak_bytes": c.peak_memory_bytes},
        }));
    }

    /// The trace file: metadata, then every event in time order.
    pub fn to_json(&self, title: &str, device: &str) -> String {
        let meta = |tid: u32, name: &str| json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "ts": 0, "args": {"name": name}});
        let mut events = vec![
            json!({"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "ts": 0, "args": {"name": title}}),
            meta(0, "device counters"),
            meta(TID_STATEMENTS, "statements"),
            meta(TID_TRAIN, "train"),
            meta(TID_KERNELS, "kernels"),
        ];
        let mut timed = self.events.clone();
        timed.extend(self.kernels.events().into_iter().map(|k| {
            json!({
                "name": k.name, "cat": "kernel", "ph": "X", "ts": k.start_us, "dur": k.dur_us,
                "pid": PID, "tid": TID_KERNELS, "args": {"inputs": k.inputs, "replayed": k.replayed},
            })
        }));
        // In time order; of events beginning together the longer (enclosing)
        // one first.
        timed.sort_by(|a, b| {
            let t = |e: &Value| e["ts"].as_f64().unwrap_or(0.0);
            let dur = |e: &Value| e["dur"].as_f64().unwrap_or(0.0);
            t(a).total_cmp(&t(b)).then(dur(b).total_cmp(&dur(a)))
        });
        events.extend(timed);
        serde_json::to_string_pretty(&json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {
                "source": self.source.name(), "device": device, "generator": "mlpl run --timeline",
                "kernel_events_dropped": self.kernels.dropped(),
            },
        }))
        .expect("a timeline is always serialisable")
    }
}

/// The observer that records a timeline.
pub struct TimelineObserver {
    data: Arc<Mutex<TimelineData>>,
    backend: Arc<dyn Backend>,
    inner: Option<Box<dyn RunObserver>>,
}

impl TimelineObserver {
    /// A timeline of a run of `source` on `backend`, forwarding to `inner`.
    pub fn new(
        source: SourceFile,
        backend: Arc<dyn Backend>,
        inner: Option<Box<dyn RunObserver>>,
    ) -> TimelineObserver {
        let data = TimelineData {
            start: Instant::now(),
            source,
            events: Vec::new(),
            statement: None,
            loops: Vec::new(),
            kernels: Arc::new(KernelLog::new(MAX_KERNEL_EVENTS)),
        };
        TimelineObserver {
            data: Arc::new(Mutex::new(data)),
            backend,
            inner,
        }
    }

    /// The log the run's devices note their kernels in: install it with
    /// `DeviceContext::set_profile` for the run.
    pub fn kernel_log(&self) -> Arc<KernelLog> {
        self.with(|d| d.kernels.clone())
    }

    /// What was recorded (read it after the run).
    pub fn data(&self) -> Arc<Mutex<TimelineData>> {
        self.data.clone()
    }

    fn with<R>(&self, f: impl FnOnce(&mut TimelineData) -> R) -> R {
        let mut d = self.data.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut d)
    }
}

/// The first line of a statement's text, cut to [`NAME_CHARS`].
fn statement_name(src: &SourceFile, span: Span) -> String {
    let text = src.text().get(span.start..span.end).unwrap_or("");
    let line = text.lines().next().unwrap_or("").trim();
    let mut name: String = line.chars().take(NAME_CHARS).collect();
    if line.chars().count() > NAME_CHARS || text.trim_end().contains('\n') {
        name.push_str(" …");
    }
    name
}

impl RunObserver for TimelineObserver {
    fn on_run_start(&mut self) {
        let c = self.backend.counters();
        self.with(|d| {
            d.start = Instant::now();
            d.kernels.restart();
            d.counters(0.0, &c);
        });
        if let Some(o) = &mut self.inner {
            o.on_run_start();
        }
    }

    fn on_statement_start(&mut self, span: Span) {
        let launches = self.backend.counters().kernel_launches;
        self.with(|d| {
            let ts = d.now();
            d.statement = Some((span, ts, launches));
        });
        if let Some(o) = &mut self.inner {
            o.on_statement_start(span);
        }
    }

    fn on_statement_end(&mut self, span: Span, ok: bool) {
        let c = self.backend.counters();
        self.with(|d| {
            let end = d.now();
            let Some((s, start, launches)) = d.statement.take() else {
                return;
            };
            let (line, col) = d.source.line_col(s.start);
            let (end_line, _) = d.source.line_col(s.end.saturating_sub(1).max(s.start));
            let name = statement_name(&d.source, s);
            d.events.push(json!({
                "name": name, "cat": "statement", "ph": "X", "ts": start, "dur": end - start,
                "pid": PID, "tid": TID_STATEMENTS,
                "args": {
                    "line": line, "column": col, "end_line": end_line,
                    "start": s.start, "end": s.end, "ok": ok,
                    "kernel_launches": c.kernel_launches.saturating_sub(launches),
                },
            }));
            d.counters(end, &c);
        });
        if let Some(o) = &mut self.inner {
            o.on_statement_end(span, ok);
        }
    }

    fn on_train_start(&mut self, total: usize, depth: usize) {
        self.with(|d| {
            let start = d.now();
            d.loops.push(LoopTrack {
                start,
                total,
                depth,
                step_events: 0,
                mode: None,
                last_end: start,
            });
        });
        if let Some(o) = &mut self.inner {
            o.on_train_start(total, depth);
        }
    }

    fn on_step(&mut self, step: usize, total: usize, loss: f64, lr: Option<f64>, step_ms: f64) {
        let c = self.backend.counters();
        self.with(|d| {
            let end = d.now();
            let Some(track) = d.loops.last_mut() else {
                return;
            };
            if track.step_events >= MAX_STEP_EVENTS {
                return;
            }
            track.step_events += 1;
            let depth = track.depth;
            // The iteration ended now and took `step_ms`; it cannot have begun
            // before the previous one ended (clock granularity).
            let start = (end - step_ms * 1e3).max(track.last_end).min(end);
            track.last_end = end;
            d.events.push(json!({
                "name": format!("step {step}"), "cat": "train_step", "ph": "X",
                "ts": start, "dur": end - start, "pid": PID, "tid": TID_TRAIN,
                "args": {
                    "step": step, "total": total, "depth": depth,
                    "loss": if loss.is_finite() { json!(loss) } else { Value::Null },
                    "lr": lr,
                },
            }));
            d.counters(end, &c);
        });
        if let Some(o) = &mut self.inner {
            o.on_step(step, total, loss, lr, step_ms);
        }
    }

    fn on_step_mode(&mut self, mode: &StepMode<'_>) {
        let m = if mode.captured { "captured" } else { "eager" };
        self.with(|d| {
            if let Some(t) = d.loops.last_mut() {
                t.mode = Some(m.to_string());
            }
        });
        if let Some(o) = &mut self.inner {
            o.on_step_mode(mode);
        }
    }

    fn on_train_end(&mut self, completed: usize, total: usize, depth: usize) {
        self.with(|d| {
            let end = d.now();
            let Some(t) = d.loops.pop() else {
                return;
            };
            d.events.push(json!({
                "name": format!("train {total}"), "cat": "train", "ph": "X",
                "ts": t.start, "dur": end - t.start, "pid": PID, "tid": TID_TRAIN,
                "args": {
                    "completed": completed, "total": t.total, "depth": depth,
                    "step_mode": t.mode, "step_events": t.step_events,
                },
            }));
        });
        if let Some(o) = &mut self.inner {
            o.on_train_end(completed, total, depth);
        }
    }
}
