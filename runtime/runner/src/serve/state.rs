//! The server's state: sessions, each with a worker thread that owns its
//! [`Session`] and runs its jobs in order, an event log and a cancel handle.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use tokio::sync::oneshot;

use super::log::EventLog;
use super::ServeConfig;
use crate::session::{
    self, CancelHandle, MemoryUse, RunOutcome, RunRequest, RunStatus, SaveReport, Session,
    SessionOptions, VariableInfo,
};
use mlpl_diag::SourceFile;

/// Locks a mutex, ignoring poisoning (a panicking holder cannot leave these
/// structures half-updated).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a session's worker does next.
pub(crate) enum Job {
    Run { run: String, req: RunRequest },
    Save(oneshot::Sender<Result<SaveReport, String>>),
    Restore(oneshot::Sender<Result<Vec<String>, String>>),
    Stop { remove_state: bool },
}

/// A run's state as the server reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted; running or about to.
    Running,
    /// Ended successfully.
    Ok,
    /// Ended with an error.
    Error,
    /// Ended by a cancel.
    Cancelled,
}

impl From<RunStatus> for RunState {
    fn from(s: RunStatus) -> RunState {
        match s {
            RunStatus::Ok => RunState::Ok,
            RunStatus::Error => RunState::Error,
            RunStatus::Cancelled => RunState::Cancelled,
        }
    }
}

/// Where a run belongs and how it stands.
#[derive(Clone, Debug)]
pub(crate) struct RunInfo {
    pub session: String,
    pub state: RunState,
}

/// Finished runs kept for `GET /v1/runs/{run}` before the oldest are forgotten.
const MAX_RUNS: usize = 100_000;

/// Hands out creation order numbers for sessions.
static NEXT_ORDER: AtomicU64 = AtomicU64::new(0);

/// One session as the server sees it.
pub struct SessionHandle {
    /// The id.
    pub id: String,
    /// Creation (or restore) time, ms since the Unix epoch.
    pub created: u64,
    /// Order of creation (or restore) in this server process; ties in `created`
    /// are common, so listing sorts by this.
    order: u64,
    /// Its events.
    pub log: Arc<EventLog>,
    jobs: mpsc::Sender<Job>,
    /// The run in progress, if any.
    pub(crate) current: Mutex<Option<String>>,
    cancel: CancelHandle,
    vars: Mutex<Vec<VariableInfo>>,
    memory: Mutex<MemoryUse>,
    runs: AtomicU64,
    deleted: AtomicBool,
}

impl SessionHandle {
    /// The run in progress.
    pub fn current_run(&self) -> Option<String> {
        lock(&self.current).clone()
    }

    /// The variables as of the end of the last run (or restore).
    pub fn variables(&self) -> Vec<VariableInfo> {
        lock(&self.vars).clone()
    }

    /// The session's memory as of the end of the last run (or restore).
    pub fn memory(&self) -> MemoryUse {
        lock(&self.memory).clone()
    }

    /// Runs started in this session (including before a restart).
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::SeqCst)
    }

    pub(crate) fn send(&self, job: Job) -> bool {
        self.jobs.send(job).is_ok()
    }

    /// Cancels `run` if it is the run in progress: `true` if it was.
    pub(crate) fn cancel(&self, run: &str) -> bool {
        let cur = lock(&self.current);
        if cur.as_deref() == Some(run) {
            self.cancel.cancel();
            true
        } else {
            false
        }
    }

    /// Interrupts `run` between operations if it is still in progress.
    pub(crate) fn force_cancel(&self, run: &str) {
        let cur = lock(&self.current);
        if cur.as_deref() == Some(run) {
            self.cancel.force();
        }
    }
}

/// Everything the routes share.
pub struct AppState {
    /// The configuration.
    pub config: ServeConfig,
    sessions: Mutex<HashMap<String, Arc<SessionHandle>>>,
    runs: Arc<Mutex<HashMap<String, RunInfo>>>,
    run_order: Arc<Mutex<std::collections::VecDeque<String>>>,
}

/// Why a run was not accepted.
pub(crate) enum Refused {
    Busy(String),
    Gone,
}

impl AppState {
    /// A state with no session; call [`AppState::restore_saved`] to reattach
    /// saved sessions.
    pub fn new(config: ServeConfig) -> Arc<AppState> {
        Arc::new(AppState {
            config,
            sessions: Mutex::new(HashMap::new()),
            runs: Arc::default(),
            run_order: Arc::default(),
        })
    }

    /// The directory a session is saved in (with `--state-dir`).
    pub fn session_dir(&self, id: &str) -> Option<PathBuf> {
        self.config.state_dir.as_ref().map(|d| d.join(id))
    }

    /// Restores every session saved under the state directory; returns one line
    /// per session (restored, or why not).
    pub fn restore_saved(self: &Arc<Self>) -> Vec<String> {
        let Some(dir) = self.config.state_dir.clone() else {
            return Vec::new();
        };
        let mut report = Vec::new();
        for (id, path) in session::persist::saved_sessions(&dir) {
            let log = Arc::new(EventLog::new(self.config.log_capacity));
            let sink_log = log.clone();
            match Session::restore(&path, self.options(), Box::new(move |e| sink_log.push(e))) {
                Ok((s, skipped)) if s.id() == id => {
                    report.push(format!(
                        "restored session {id} ({} variables)",
                        s.variables().len()
                    ));
                    log.start_after(s.emitter().last_seq());
                    for k in skipped {
                        report.push(format!("  {k}"));
                    }
                    self.spawn(s, log);
                }
                Ok(_) => report.push(format!("{}: session id does not match", path.display())),
                Err(e) => report.push(format!("cannot restore session {id}: {e}")),
            }
        }
        report
    }

    /// Whether another session may be created ([`ServeConfig::max_sessions`]).
    pub fn has_room(&self) -> bool {
        lock(&self.sessions).len() < self.config.max_sessions
    }

    /// Creates a new session and returns its handle.
    pub fn create(self: &Arc<Self>) -> Arc<SessionHandle> {
        let id = session::new_id("s");
        let log = Arc::new(EventLog::new(self.config.log_capacity));
        let sink_log = log.clone();
        let s = Session::new(id, self.options(), Box::new(move |e| sink_log.push(e)));
        self.spawn(s, log)
    }

    /// The budget of each session's values ([`ServeConfig::session_memory_budget`]).
    fn session_budget(&self) -> Option<mlpl_lang::eval::ops::SessionBudget> {
        self.config
            .session_memory_budget
            .map(|limit| mlpl_lang::eval::ops::SessionBudget {
                limit,
                raise: super::RAISE_SESSION_BUDGET.to_string(),
            })
    }

    /// Options of a session (the autosave directory depends on the id: `spawn`
    /// sets it).
    fn options(&self) -> SessionOptions {
        SessionOptions {
            data_dir: self.config.data_dir.clone(),
            // Read when the session starts, so a new `mlpl calibrate` counts
            // without restarting the server.
            calibration: mlpl_lang::estimate::calibration::Calibration::load_default()
                .map(Arc::new),
            // The process holds every session: only time corrections are learnt.
            refine: crate::session::RefineOptions::from_env(false, false),
            ..SessionOptions::default()
        }
    }

    fn spawn(self: &Arc<Self>, mut s: Session, log: Arc<EventLog>) -> Arc<SessionHandle> {
        let id = s.id().to_string();
        s.set_autosave_dir(self.session_dir(&id));
        let (tx, rx) = mpsc::channel();
        let handle = Arc::new(SessionHandle {
            id: id.clone(),
            created: session::events::now_ms(),
            order: NEXT_ORDER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            log,
            jobs: tx,
            current: Mutex::new(None),
            cancel: s.cancel_handle(),
            vars: Mutex::new(s.variables()),
            memory: Mutex::new(MemoryUse {
                budget_bytes: self.config.session_memory_budget.map(|b| b as u64),
                ..s.memory()
            }),
            runs: AtomicU64::new(s.runs()),
            deleted: AtomicBool::new(false),
        });
        let worker = Worker {
            handle: handle.clone(),
            runs: self.runs.clone(),
            state_dir: self.session_dir(&id),
        };
        let budget = self.config.memory_budget;
        let session_budget = self.session_budget();
        let spawned = std::thread::Builder::new()
            .name(format!("mlpl-session-{id}"))
            .stack_size(64 << 20)
            .spawn(move || {
                mlpl_lang::eval::ops::set_memory_budget(budget);
                mlpl_lang::eval::ops::set_session_budget(session_budget);
                worker.work(s, rx)
            });
        if spawned.is_err() {
            // Without a worker every job is refused; the session reports itself gone.
            handle.deleted.store(true, Ordering::SeqCst);
            handle.log.close();
        }
        lock(&self.sessions).insert(id, handle.clone());
        handle
    }

    /// The session `id`.
    pub fn get(&self, id: &str) -> Option<Arc<SessionHandle>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Every session, sorted by creation time.
    pub fn list(&self) -> Vec<Arc<SessionHandle>> {
        let mut v: Vec<_> = lock(&self.sessions).values().cloned().collect();
        v.sort_by_key(|h| h.order);
        v
    }

    /// Deletes a session: cancels its run, ends its streams and removes its saved
    /// state. `false` if there was no such session.
    pub fn delete(&self, id: &str) -> bool {
        let Some(h) = lock(&self.sessions).remove(id) else {
            return false;
        };
        h.deleted.store(true, Ordering::SeqCst);
        if lock(&h.current).is_some() {
            h.cancel.force();
        }
        h.send(Job::Stop { remove_state: true });
        h.log.close();
        // Removed here too so that it is gone when the answer is sent (the
        // worker removes it again after a run that was saving).
        if let Some(d) = self.session_dir(id) {
            let _ = std::fs::remove_dir_all(d);
        }
        true
    }

    /// Ends every session's streams (the server is stopping).
    pub fn close_all(&self) {
        for h in lock(&self.sessions).values() {
            h.log.close();
            if lock(&h.current).is_some() {
                h.cancel.force();
            }
            h.send(Job::Stop {
                remove_state: false,
            });
        }
    }

    /// Accepts a run: one at a time per session, a second is refused.
    pub(crate) fn start_run(&self, h: &SessionHandle, req: RunRequest) -> Result<String, Refused> {
        let mut cur = lock(&h.current);
        if let Some(r) = cur.as_ref() {
            return Err(Refused::Busy(r.clone()));
        }
        if h.deleted.load(Ordering::SeqCst) {
            return Err(Refused::Gone);
        }
        let run = session::new_id("r");
        self.record_run(&run, &h.id);
        if !h.send(Job::Run {
            run: run.clone(),
            req,
        }) {
            lock(&self.runs).remove(&run);
            return Err(Refused::Gone);
        }
        *cur = Some(run.clone());
        h.runs.fetch_add(1, Ordering::SeqCst);
        Ok(run)
    }

    fn record_run(&self, run: &str, session: &str) {
        let mut runs = lock(&self.runs);
        runs.insert(
            run.to_string(),
            RunInfo {
                session: session.to_string(),
                state: RunState::Running,
            },
        );
        let mut order = lock(&self.run_order);
        order.push_back(run.to_string());
        while order.len() > MAX_RUNS {
            if let Some(old) = order.pop_front() {
                if runs.get(&old).is_some_and(|r| r.state != RunState::Running) {
                    runs.remove(&old);
                } else {
                    order.push_back(old);
                    break;
                }
            }
        }
    }

    /// The run `run`.
    pub(crate) fn run_info(&self, run: &str) -> Option<RunInfo> {
        lock(&self.runs).get(run).cloned()
    }
}

struct Worker {
    handle: Arc<SessionHandle>,
    runs: Arc<Mutex<HashMap<String, RunInfo>>>,
    state_dir: Option<PathBuf>,
}

impl Worker {
    fn work(self, mut s: Session, rx: mpsc::Receiver<Job>) {
        while let Ok(job) = rx.recv() {
            match job {
                Job::Run { run, req } => self.run(&mut s, &run, &req),
                Job::Save(reply) => {
                    let r = match &self.state_dir {
                        Some(d) => s.save(d),
                        None => Err("the server was started without --state-dir".into()),
                    };
                    let _ = reply.send(r);
                }
                Job::Restore(reply) => {
                    let r = match &self.state_dir {
                        Some(d) => s.restore_from(d),
                        None => Err("the server was started without --state-dir".into()),
                    };
                    *lock(&self.handle.vars) = s.variables();
                    *lock(&self.handle.memory) = s.memory();
                    let _ = reply.send(r);
                }
                Job::Stop { remove_state } => {
                    if remove_state {
                        if let Some(d) = &self.state_dir {
                            let _ = std::fs::remove_dir_all(d);
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Runs one job; whatever happens, the run ends with `run_finished`.
    fn run(&self, s: &mut Session, run: &str, req: &RunRequest) {
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.execute(run, req)))
                .unwrap_or_else(|payload| panicked(payload.as_ref(), req));
        *lock(&self.handle.vars) = s.variables();
        *lock(&self.handle.memory) = s.memory();
        let deleted = self.handle.deleted.load(Ordering::SeqCst);
        let saved = if deleted { None } else { s.autosave() };
        {
            // Under the lock that accepts runs and cancels: a cancel for this run
            // arriving now is dropped, one for the next run is not.
            let mut cur = lock(&self.handle.current);
            s.cancel_handle().reset_pending();
            *cur = None;
            if let Some(info) = lock(&self.runs).get_mut(run) {
                info.state = outcome.status.into();
            }
        }
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.finish(run, &outcome, saved)
        }));
    }
}

/// The outcome of a run whose evaluation panicked outside the interpreter's own
/// isolation.
fn panicked(payload: &(dyn std::any::Any + Send), req: &RunRequest) -> RunOutcome {
    let d = session::panic_diagnostic(payload);
    let src = SourceFile::new(
        req.cell
            .as_ref()
            .map_or_else(|| "<cell>".to_string(), |c| c.uri.clone()),
        req.code.as_str(),
    );
    RunOutcome {
        status: RunStatus::Error,
        value: None,
        diagnostic_json: session::diag_json(&d, &src),
        diagnostic: Some(d),
        elapsed: std::time::Duration::ZERO,
        counters: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlpl_diag::code;

    #[test]
    fn a_panicking_run_still_finishes_with_an_error() {
        let req = RunRequest {
            code: "x".into(),
            ..RunRequest::default()
        };
        let payload = std::panic::catch_unwind(|| panic!("kaboom")).unwrap_err();
        let out = panicked(payload.as_ref(), &req);
        assert_eq!(out.status, RunStatus::Error);
        assert_eq!(out.diagnostic_json.unwrap()["code"], code::E0504);
    }
}
