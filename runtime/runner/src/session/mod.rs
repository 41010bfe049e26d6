//! Sessions and cells (DESIGN §6, LANGUAGE §21.1): a session holds a workspace;
//! running a cell evaluates its statements in it, so values, models, optimizer
//! state and experiments carry over between cells as in a notebook, and
//! re-running a cell replaces its bindings.
//!
//! Everything a run does is reported as typed [`events::Event`]s through the
//! session's [`events::Emitter`]: the CLI renders them, the server streams them.
//! A run ends with exactly one `run_finished` event, whatever happens (errors,
//! cancellation, a panic inside the interpreter).

pub mod events;
pub mod measured;
pub mod observer;
pub mod persist;
pub mod progress;
pub mod vars;

use mlpl_diag::code;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlpl_diag::render::to_json;
use mlpl_diag::{Diagnostic, SourceFile};
use mlpl_lang::estimate::calibration::Calibration;
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::{DeviceTarget, Value};
use mlpl_syntax::{Program, StmtKind};

pub use events::{
    CellRef, DeviceCounters, Emitter, Event, EventBody, EventSink, MeasuredEstimate, MemoryUse,
    RunStatus,
};
pub use measured::{Meter, RefineOptions};
pub use observer::{CancelHandle, StepObserver, STEP_INTERVAL};
pub use persist::SaveReport;
pub use vars::VariableInfo;

/// How a session is set up.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Directory that file builtins may access (`None` disables them).
    pub data_dir: Option<PathBuf>,
    /// Directory for experiment records.
    pub exp_dir: Option<PathBuf>,
    /// Device for code outside `device` blocks.
    pub device: DeviceTarget,
    /// Minimum time between two `step` events of one loop.
    pub step_interval: Duration,
    /// Where SVG charts are written (`artifact` events then carry a path); `None`
    /// sends their content inline.
    pub artifact_dir: Option<PathBuf>,
    /// Where the session is saved after every run (`None`: no automatic save).
    pub autosave_dir: Option<PathBuf>,
    /// Whether `train` loops replay their captured step (the default) or
    /// interpret every iteration.
    pub capture_steps: bool,
    /// The calibration cache the session's estimates read (`estimate_train`,
    /// `feasible`), as `mlpl run` loads it; `None`: the nominal figures.
    pub calibration: Option<Arc<Calibration>>,
    /// Refinement from measurement: where the corrections that measured
    /// `train` loops teach are stored (none by default; `mlpl run` and `mlpl
    /// serve` use [`RefineOptions::from_env`]).
    pub refine: RefineOptions,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            data_dir: None,
            exp_dir: None,
            device: DeviceTarget::CPU,
            step_interval: STEP_INTERVAL,
            artifact_dir: None,
            autosave_dir: None,
            capture_steps: true,
            calibration: None,
            refine: RefineOptions::default(),
        }
    }
}

/// A request to run some code (usually one cell) in a session.
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    /// The code.
    pub code: String,
    /// Where it comes from: diagnostics are reported on the document's lines.
    pub cell: Option<CellRef>,
    /// The device for code outside `device` blocks in this run.
    pub device: Option<String>,
    /// Record a timeline of the run (`mlpl run --timeline`'s Chrome Trace Event
    /// format), sent as an `artifact` event of kind `timeline` before
    /// `run_finished` ("Run Cell with Trace").
    pub timeline: bool,
}

/// How a run ended, for the caller (the events say the same).
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// Ok, error or cancelled.
    pub status: RunStatus,
    /// The run's value.
    pub value: Option<Value>,
    /// The error (E0409 when cancelled).
    pub diagnostic: Option<Diagnostic>,
    /// The diagnostic as JSON, lines mapped to the document.
    pub diagnostic_json: Option<serde_json::Value>,
    /// Wall time.
    pub elapsed: Duration,
    /// What the backends did for this run alone (`None` when nothing was
    /// evaluated, e.g. after a syntax error).
    pub counters: Option<DeviceCounters>,
}

/// A session: a workspace, its interpreter and its event stream.
pub struct Session {
    id: String,
    interp: Interp,
    emitter: Arc<Emitter>,
    opts: SessionOptions,
    runs: u64,
    cancel: CancelHandle,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("runs", &self.runs)
            .finish()
    }
}

/// Whether `s` can be a session or run id (1 to 64 of `[A-Za-z0-9_-]`).
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A fresh random id (16 hexadecimal digits) with a prefix.
pub fn new_id(prefix: &str) -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: time and a counter still give unique ids.
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b = (t ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(40)).to_le_bytes();
    }
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{prefix}{hex}")
}

impl RunRequest {
    /// A request to run `code`, not tied to a document's cell.
    pub fn code(code: impl Into<String>) -> RunRequest {
        RunRequest {
            code: code.into(),
            ..RunRequest::default()
        }
    }
}

impl Session {
    /// A new, empty session with default options whose events are collected,
    /// in order, in the returned list (for embedding and tests).
    pub fn collecting(id: impl Into<String>) -> (Session, Arc<std::sync::Mutex<Vec<Event>>>) {
        let events: Arc<std::sync::Mutex<Vec<Event>>> = Arc::default();
        let sink = events.clone();
        let s = Session::new(
            id,
            SessionOptions::default(),
            Box::new(move |ev| {
                if let Ok(mut list) = sink.lock() {
                    list.push(ev.clone());
                }
            }),
        );
        (s, events)
    }

    /// A new, empty session whose events go to `sink`.
    pub fn new(id: impl Into<String>, opts: SessionOptions, sink: EventSink) -> Session {
        Session::with_workspace(id.into(), Workspace::new(), 0, 0, opts, sink)
    }

    fn with_workspace(
        id: String,
        mut ws: Workspace,
        last_seq: u64,
        runs: u64,
        opts: SessionOptions,
        sink: EventSink,
    ) -> Session {
        ws.data_dir = opts.data_dir.clone();
        ws.exp_dir = opts.exp_dir.clone();
        ws.default_device = Some(opts.device);
        ws.calibration = opts.calibration.clone();
        let mut interp = Interp::new(ws);
        interp.capture_steps = opts.capture_steps;
        crate::http::install(&mut interp);
        let cancel = CancelHandle::new(interp.cancel.clone());
        Session {
            emitter: Arc::new(Emitter::new(id.clone(), last_seq, sink)),
            id,
            interp,
            opts,
            runs,
            cancel,
        }
    }

    /// Restores a session saved in `dir` (see [`persist`]); events continue after
    /// the saved `seq`. Returns the session and the bindings it could not restore.
    pub fn restore(
        dir: &Path,
        opts: SessionOptions,
        sink: EventSink,
    ) -> Result<(Session, Vec<String>), String> {
        let (state, r) = persist::restore(dir)?;
        if !valid_id(&state.session) {
            return Err(format!("invalid session id `{}`", state.session));
        }
        let s = Session::with_workspace(state.session, r.ws, r.last_seq, r.runs, opts, sink);
        Ok((s, r.skipped))
    }

    /// Replaces the workspace with the one saved in `dir`, keeping this session's
    /// id, options and event sequence; returns the bindings it could not restore.
    pub fn restore_from(&mut self, dir: &Path) -> Result<Vec<String>, String> {
        let (_, r) = persist::restore(dir)?;
        let mut ws = r.ws;
        ws.data_dir = self.opts.data_dir.clone();
        ws.exp_dir = self.opts.exp_dir.clone();
        ws.default_device = Some(self.opts.device);
        self.interp.ws = ws;
        self.runs = self.runs.max(r.runs);
        Ok(r.skipped)
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Runs started so far.
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.interp.ws
    }

    /// The emitter (to emit further events or read the last `seq`).
    pub fn emitter(&self) -> &Arc<Emitter> {
        &self.emitter
    }

    /// A handle that cancels this session's runs from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// The variables, sorted by name.
    pub fn variables(&self) -> Vec<VariableInfo> {
        vars::variables(&self.interp.ws)
    }

    /// Saves the workspace into `dir`.
    pub fn save(&self, dir: &Path) -> Result<SaveReport, String> {
        self.save_with_seq(dir, self.emitter.last_seq())
    }

    fn save_with_seq(&self, dir: &Path, last_seq: u64) -> Result<SaveReport, String> {
        persist::save(dir, &self.id, last_seq, self.runs, &self.interp.ws)
    }

    /// Runs `req` as run `run`: [`Session::execute`] then [`Session::finish`].
    pub fn run(&mut self, run: &str, req: &RunRequest) -> RunOutcome {
        let outcome = self.execute(run, req);
        let saved = self.autosave();
        self.cancel.reset_pending();
        self.finish(run, &outcome, saved);
        outcome
    }

    /// Sets (or clears) the directory the session is saved in after every run.
    pub fn set_autosave_dir(&mut self, dir: Option<PathBuf>) {
        self.opts.autosave_dir = dir;
    }

    /// Saves into the autosave directory, if one is set: `Some(ok)`. Called at
    /// the end of a run, just before its `run_finished` event (which reports the
    /// outcome), so the saved `seq` is that event's: a session restored after a
    /// restart continues after it and never reuses its number.
    pub fn autosave(&self) -> Option<bool> {
        let dir = self.opts.autosave_dir.as_ref()?;
        Some(self.save_with_seq(dir, self.emitter.last_seq() + 1).is_ok())
    }

    /// Emits the `run_finished` event of `outcome`. (A caller that drives
    /// [`Session::execute`] itself forgets a pending cancel with
    /// `cancel_handle().reset_pending()` first.)
    pub fn finish(&mut self, run: &str, outcome: &RunOutcome, saved: Option<bool>) {
        self.emitter.emit(
            run,
            EventBody::RunFinished {
                status: outcome.status,
                elapsed_ms: outcome.elapsed.as_secs_f64() * 1e3,
                diagnostic: outcome.diagnostic_json.clone(),
                saved,
                counters: outcome.counters.clone(),
                memory: Some(self.memory()),
            },
        );
    }

    /// What the session's values hold now, and its budget for them (the
    /// calling thread's, [`mlpl_lang::eval::ops::session_budget`]).
    pub fn memory(&self) -> MemoryUse {
        MemoryUse {
            live_bytes: mlpl_lang::eval::ops::live_memory(&self.interp.ws).bytes as u64,
            budget_bytes: mlpl_lang::eval::ops::session_budget().map(|b| b.limit as u64),
        }
    }

    /// Runs `req` as run `run` and emits every event but `run_finished`. Never
    /// panics: a panic inside the interpreter becomes an error outcome and the
    /// session stays usable.
    pub fn execute(&mut self, run: &str, req: &RunRequest) -> RunOutcome {
        let started = Instant::now();
        self.runs += 1;
        let start_line = req.cell.as_ref().map_or(0, |c| c.start_line);
        let name = req
            .cell
            .as_ref()
            .map_or_else(|| "<cell>".to_string(), |c| c.uri.clone());
        let src = SourceFile::new(name, req.code.as_str()).with_line_offset(start_line);
        // A final line break does not start another line of the cell.
        let trailing = req.code.ends_with(['\n', '\r']) as usize;
        let lines = src.line_count().saturating_sub(trailing).max(1);
        let device = self.run_device(req);
        self.emitter.emit(
            run,
            EventBody::RunStarted {
                cell: req.cell.clone(),
                start_line: start_line + 1,
                end_line: start_line + lines,
                device: device.to_string(),
            },
        );
        for w in self.device_warnings(device, req) {
            self.emit_warning(run, &w, &src);
        }
        let parsed = mlpl_syntax::parse(&req.code);
        let mut parse_error = None;
        for d in parsed.diagnostics {
            if d.is_error() {
                parse_error.get_or_insert(d);
            } else {
                self.emit_warning(run, &d, &src);
            }
        }
        let (result, counters) = match parse_error {
            Some(d) => (Err(d), None),
            None => {
                let (r, c) = self.evaluate(run, &parsed.program, device, &src, req.timeline);
                (r, Some(c))
            }
        };
        let (status, value, diagnostic) = match result {
            Ok(v) => (RunStatus::Ok, v, None),
            Err(d) if d.code == code::E0409 => (RunStatus::Cancelled, None, Some(d)),
            Err(d) => (RunStatus::Error, None, Some(d)),
        };
        if let Some(v) = &value {
            self.emit_value(run, last_assigned(&parsed.program), v);
        }
        let diagnostic_json = diagnostic.as_ref().and_then(|d| diag_json(d, &src));
        RunOutcome {
            status,
            value,
            diagnostic,
            diagnostic_json,
            elapsed: started.elapsed(),
            counters,
        }
    }

    fn run_device(&self, req: &RunRequest) -> DeviceTarget {
        req.device
            .as_deref()
            .and_then(DeviceTarget::parse)
            .unwrap_or(self.opts.device)
    }

    fn device_warnings(&self, device: DeviceTarget, req: &RunRequest) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        if let Some(name) = req.device.as_deref() {
            if DeviceTarget::parse(name).is_none() {
                out.push(
                    Diagnostic::warning(
                        code::W0502,
                        format!(
                            "unknown device `{name}`; this run uses {}",
                            self.opts.device
                        ),
                    )
                    .help("device targets are \"cpu\", \"cuda\", \"cuda:N\" and \"mlx\""),
                );
            }
        }
        if let Err(why) = self.interp.devices.availability(device) {
            out.push(
                Diagnostic::warning(
                    code::W0501,
                    format!("device `{device}` is not available; this run uses the CPU"),
                )
                .note(why.reason()),
            );
        }
        out
    }

    fn emit_warning(&self, run: &str, d: &Diagnostic, src: &SourceFile) {
        if let Some(j) = diag_json(d, src) {
            self.emitter.emit(run, EventBody::Warning { diagnostic: j });
        }
    }

    fn evaluate(
        &mut self,
        run: &str,
        program: &Program,
        device: DeviceTarget,
        src: &SourceFile,
        timeline: bool,
    ) -> (Result<Option<Value>, Diagnostic>, DeviceCounters) {
        // The run executes on this thread: its counter scope sees only its own
        // kernels and copies, whatever other sessions do meanwhile.
        let scope = mlpl_devices::CounterScope::enter();
        let counts = scope.counts();
        let backend = self.interp.devices.backend(device);
        let step_mode = observer::SharedStepMode::default();
        let observer = StepObserver::new(
            self.emitter.clone(),
            run,
            self.opts.step_interval,
            backend.clone(),
            device.to_string(),
        )
        .with_cancel(self.cancel.clone())
        .with_counters(counts.clone())
        .with_step_mode(step_mode.clone(), src.clone())
        .with_meter(Meter::new(
            self.opts.refine.clone(),
            src.clone(),
            program,
            device,
            self.opts.calibration.clone(),
        ));
        // "Run Cell with Trace": the timeline observer wraps the step observer.
        let timeline = if timeline {
            let t = crate::timeline::TimelineObserver::new(
                src.clone(),
                backend.clone(),
                Some(Box::new(observer)),
            );
            let data = t.data();
            self.interp.devices.set_profile(Some(t.kernel_log()));
            self.interp.set_observer(Box::new(t));
            Some(data)
        } else {
            self.interp.set_observer(Box::new(observer));
            None
        };
        let emitter = self.emitter.clone();
        let run_id = run.to_string();
        let warn_src = src.clone();
        self.interp
            .set_warning_sink(Box::new(move |d: &Diagnostic| {
                if let Some(j) = diag_json(d, &warn_src) {
                    emitter.emit(&run_id, EventBody::Warning { diagnostic: j });
                }
            }));
        let previous = self.interp.ws.default_device.replace(device);
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.interp.run(program)));
        self.interp.ws.default_device = previous;
        self.interp.take_observer();
        self.interp.devices.set_profile(None);
        self.interp.set_warning_sink(Box::new(|_| {}));
        let result = match result {
            Ok(r) => r,
            Err(payload) => {
                self.interp.reset_after_panic();
                self.cancel
                    .in_train
                    .store(0, std::sync::atomic::Ordering::SeqCst);
                Err(panic_diagnostic(payload.as_ref()))
            }
        };
        drop(scope);
        if let Some(data) = timeline {
            let json = data.lock().unwrap_or_else(|p| p.into_inner()).to_json(
                &format!("session {} run {run}", self.id),
                &device.to_string(),
            );
            self.emitter.emit(
                run,
                EventBody::Artifact {
                    kind: "timeline".into(),
                    path: None,
                    bytes: json.len(),
                    content: Some(json),
                },
            );
        }
        let ran = counts.snapshot(backend.kind());
        self.emitter.emit(
            run,
            observer::device_body(
                &device.to_string(),
                &ran,
                &backend.counters(),
                step_mode.lock().ok().and_then(|m| m.clone()),
            ),
        );
        (result, observer::run_counters(&ran))
    }

    fn emit_value(&self, run: &str, name: Option<String>, v: &Value) {
        let text = v.display();
        if v.is_svg() {
            let written = self
                .opts
                .artifact_dir
                .as_deref()
                .and_then(|dir| write_svg(&text, dir));
            let (path, content) = match written {
                Some(p) => (Some(p.display().to_string()), None),
                None => (None, Some(text.clone())),
            };
            // The chart itself travels once, in the artifact event.
            let output = match &path {
                Some(p) => format!("viz: {p}\n"),
                None => format!("viz: svg chart ({} bytes, inline)\n", text.len()),
            };
            self.emitter.emit(
                run,
                EventBody::Artifact {
                    kind: "svg".into(),
                    path,
                    content,
                    bytes: text.len(),
                },
            );
            self.emitter.emit(
                run,
                EventBody::Output {
                    stream: "stdout".into(),
                    text: output,
                },
            );
            return;
        }
        self.emitter.emit(run, vars::value_event(name, v));
        self.emitter.emit(
            run,
            EventBody::Output {
                stream: "stdout".into(),
                text: format!("{text}\n"),
            },
        );
    }
}

/// The variable assigned by a program's last statement, if it is an assignment.
fn last_assigned(p: &Program) -> Option<String> {
    match &p.stmts.last()?.kind {
        StmtKind::Assign { name, .. } | StmtKind::Annotated { name, .. } => Some(name.name.clone()),
        _ => None,
    }
}

/// One diagnostic as JSON (the format of `mlpl check --format json`).
pub fn diag_json(d: &Diagnostic, src: &SourceFile) -> Option<serde_json::Value> {
    match to_json(std::slice::from_ref(d), src) {
        serde_json::Value::Array(mut v) => v.pop(),
        _ => None,
    }
}

/// The diagnostic for a run that panicked (a bug in MLPL Studio).
pub fn panic_diagnostic(payload: &(dyn std::any::Any + Send)) -> Diagnostic {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown failure".to_string());
    Diagnostic::error(code::E0504, "internal failure while running this cell")
        .note(what)
        .note("this is a bug in MLPL Studio, not in your program; the session lives on")
}

/// Writes an SVG chart to `DIR/H.svg` (H: the first 12 hex digits of its SHA-256).
pub fn write_svg(text: &str, dir: &Path) -> Option<PathBuf> {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    let name: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("{name}.svg"));
    std::fs::write(&path, text).ok()?;
    Some(path)
}

#[cfg(test)]
mod tests;
