//! The interpreter observer that turns `train` progress into throttled `step`
//! events, and the cancellation handle that defers a cancel to a step boundary.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlpl_devices::{Backend, Counters, ScopeCounts};

use super::events::{DeviceCounters, Emitter, EventBody};
use super::measured::Meter;
use mlpl_diag::{Diagnostic, SourceFile};
use mlpl_lang::eval::{RunObserver, StepMode};

/// How the latest `train` loop of a run executes its steps, as `device`
/// events report it: `"captured"` or `"eager"`, and why not captured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepModeReport {
    /// `"captured"` or `"eager"`.
    pub mode: String,
    /// Why the steps are not captured.
    pub reason: Option<String>,
    /// The captured step's arena bytes (owned buffers and inputs read in place).
    pub arena_bytes: Option<u64>,
    /// The eager step's live peak in bytes (from the recorded iterations).
    pub eager_peak_bytes: Option<u64>,
}

/// The step mode shared between a run's observer and its session.
pub type SharedStepMode = Arc<Mutex<Option<StepModeReport>>>;

/// Default minimum time between two `step` events of one loop (at most 20 per second).
pub const STEP_INTERVAL: Duration = Duration::from_millis(50);

/// How often a `device` event is sent during training.
const DEVICE_INTERVAL: Duration = Duration::from_secs(1);

/// Cancels a session's current run from another thread.
///
/// Inside a `train` loop the cancel takes effect at the end of the running
/// iteration, so the parameters are those of the last completed step; outside
/// one it takes effect before the next statement, loop iteration or builtin call.
/// [`CancelHandle::force`] interrupts a long iteration between operations.
#[derive(Clone, Debug)]
pub struct CancelHandle {
    /// The interpreter's flag (checked between operations).
    pub(crate) flag: Arc<AtomicBool>,
    /// A cancel was requested for the current run.
    pub(crate) requested: Arc<AtomicBool>,
    /// Depth of `train` loops now running.
    pub(crate) in_train: Arc<AtomicUsize>,
}

impl CancelHandle {
    pub(crate) fn new(flag: Arc<AtomicBool>) -> CancelHandle {
        CancelHandle {
            flag,
            requested: Arc::new(AtomicBool::new(false)),
            in_train: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Requests cancellation of the current run (or of the next one, if none is
    /// running yet); it takes effect at the next step boundary inside `train`.
    pub fn cancel(&self) {
        self.requested.store(true, Ordering::SeqCst);
        if self.in_train.load(Ordering::SeqCst) == 0 {
            self.flag.store(true, Ordering::SeqCst);
        }
    }

    /// Cancels between operations now, even in the middle of a `train` iteration.
    pub fn force(&self) {
        self.requested.store(true, Ordering::SeqCst);
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether a cancel is pending.
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Forgets a pending request (after a run ended).
    pub fn reset_pending(&self) {
        self.requested.store(false, Ordering::SeqCst);
    }

    fn apply_if_requested(&self) {
        if self.requested.load(Ordering::SeqCst) {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
}

/// One running `train` loop's throttling state.
struct LoopState {
    index: u32,
    depth: u32,
    last_emit: Instant,
    steps_since_emit: u64,
    pending: Option<PendingStep>,
}

#[derive(Clone, Copy)]
struct PendingStep {
    step: u64,
    total: u64,
    loss: f64,
    lr: Option<f64>,
    step_ms: f64,
}

/// Emits `step` and `device` events for one run.
pub struct StepObserver {
    emitter: Arc<Emitter>,
    run: String,
    interval: Duration,
    cancel: Option<CancelHandle>,
    loops: Vec<LoopState>,
    next_loop: u32,
    backend: Arc<dyn Backend>,
    device: String,
    base: Counters,
    scope: Option<ScopeCounts>,
    last_device: Instant,
    step_mode: SharedStepMode,
    source: Option<SourceFile>,
    meter: Option<Meter>,
}

impl StepObserver {
    /// An observer for run `run` that emits through `emitter` at most one `step`
    /// event per `interval` per loop; `backend` and `device` feed `device` events.
    pub fn new(
        emitter: Arc<Emitter>,
        run: impl Into<String>,
        interval: Duration,
        backend: Arc<dyn Backend>,
        device: impl Into<String>,
    ) -> StepObserver {
        let base = backend.counters();
        StepObserver {
            emitter,
            run: run.into(),
            interval,
            cancel: None,
            loops: Vec::new(),
            next_loop: 0,
            backend,
            device: device.into(),
            base,
            scope: None,
            last_device: Instant::now(),
            step_mode: SharedStepMode::default(),
            source: None,
            meter: None,
        }
    }

    /// Measures the run's top-level loops with `meter`: `step_measured`
    /// events, and the corrections learnt at their ends.
    pub fn with_meter(mut self, meter: Meter) -> StepObserver {
        self.meter = Some(meter);
        self
    }

    /// Reports step modes into `mode` (which the session reads for the run's
    /// final `device` event) and places capture warnings in `source`.
    pub fn with_step_mode(mut self, mode: SharedStepMode, source: SourceFile) -> StepObserver {
        self.step_mode = mode;
        self.source = Some(source);
        self
    }

    /// Applies `cancel`'s deferred requests at step boundaries.
    pub fn with_cancel(mut self, cancel: CancelHandle) -> StepObserver {
        self.cancel = Some(cancel);
        self
    }

    /// Reports the counts of the run's own counter scope (opened on the thread
    /// that runs it) for the backend's kind of device instead of the backend's
    /// process-wide counters, so that runs of other sessions at the same time
    /// are not included.
    pub fn with_counters(mut self, scope: ScopeCounts) -> StepObserver {
        self.scope = Some(scope);
        self
    }

    /// The `device` event body for the counters since this observer was made
    /// (or of its counter scope).
    pub fn device_event(&self) -> EventBody {
        let now = self.backend.counters();
        let run = match &self.scope {
            Some(scope) => scope.snapshot(self.backend.kind()),
            None => since(&self.base, &now),
        };
        let mode = self.step_mode.lock().ok().and_then(|m| m.clone());
        device_body(&self.device, &run, &now, mode)
    }

    fn flush(&mut self, at: usize, now: Instant) {
        let Some(l) = self.loops.get_mut(at) else {
            return;
        };
        let Some(p) = l.pending.take() else { return };
        let secs = now.duration_since(l.last_emit).as_secs_f64();
        let rate = (secs > 0.0).then(|| l.steps_since_emit as f64 / secs);
        l.last_emit = now;
        l.steps_since_emit = 0;
        let body = EventBody::Step {
            loop_index: l.index,
            depth: l.depth,
            step: p.step,
            total: p.total,
            loss: p.loss.is_finite().then_some(p.loss),
            lr: p.lr.filter(|x| x.is_finite()),
            step_ms: p.step_ms,
            items_per_s: rate,
        };
        self.emitter.emit(&self.run, body);
        if now.duration_since(self.last_device) >= DEVICE_INTERVAL {
            self.last_device = now;
            let body = self.device_event();
            self.emitter.emit(&self.run, body);
        }
    }
}

/// The increments from `base` to `now` (memory fields: `now`'s).
fn since(base: &Counters, now: &Counters) -> Counters {
    Counters {
        uploads: now.uploads.saturating_sub(base.uploads),
        downloads: now.downloads.saturating_sub(base.downloads),
        bytes_up: now.bytes_up.saturating_sub(base.bytes_up),
        bytes_down: now.bytes_down.saturating_sub(base.bytes_down),
        kernel_launches: now.kernel_launches.saturating_sub(base.kernel_launches),
        cpu_fallbacks: now.cpu_fallbacks.saturating_sub(base.cpu_fallbacks),
        evaluations: now.evaluations.saturating_sub(base.evaluations),
        ..now.clone()
    }
}

/// A run's counts as reported in events.
pub(crate) fn run_counters(run: &Counters) -> DeviceCounters {
    DeviceCounters {
        uploads: run.uploads,
        downloads: run.downloads,
        bytes_up: run.bytes_up,
        bytes_down: run.bytes_down,
        kernel_launches: run.kernel_launches,
        cpu_fallbacks: run.cpu_fallbacks,
        evaluations: run.evaluations,
    }
}

/// A `device` event body from a run's counts and the device's memory `now`.
pub(crate) fn device_body(
    device: &str,
    run: &Counters,
    now: &Counters,
    mode: Option<StepModeReport>,
) -> EventBody {
    let m = mode.unwrap_or_default();
    let step_mode = (!m.mode.is_empty()).then_some(m.mode);
    EventBody::Device {
        device: device.to_string(),
        counters: run_counters(run),
        memory_bytes: now.memory_bytes,
        peak_memory_bytes: now.peak_memory_bytes,
        step_mode,
        step_mode_reason: m.reason,
        step_arena_bytes: m.arena_bytes,
        step_eager_peak_bytes: m.eager_peak_bytes,
    }
}

impl RunObserver for StepObserver {
    fn on_run_start(&mut self) {
        if let Some(c) = &self.cancel {
            c.apply_if_requested();
        }
    }

    fn on_train_start(&mut self, total: usize, depth: usize) {
        if let Some(c) = &self.cancel {
            c.in_train.fetch_add(1, Ordering::SeqCst);
            // A request that raced with the loop's start still takes effect.
            c.apply_if_requested();
        }
        self.loops.push(LoopState {
            index: self.next_loop,
            depth: u32::try_from(depth).unwrap_or(u32::MAX),
            last_emit: Instant::now(),
            steps_since_emit: 0,
            pending: None,
        });
        self.next_loop = self.next_loop.saturating_add(1);
        if let Some(m) = self.meter.as_mut() {
            m.train_start(total, depth);
        }
    }

    fn on_step(&mut self, step: usize, total: usize, loss: f64, lr: Option<f64>, step_ms: f64) {
        if let Some(c) = &self.cancel {
            c.apply_if_requested();
        }
        let now = Instant::now();
        let at = self.loops.len().wrapping_sub(1);
        let interval = self.interval;
        let Some(l) = self.loops.last_mut() else {
            return;
        };
        l.steps_since_emit += 1;
        l.pending = Some(PendingStep {
            step: step as u64,
            total: total as u64,
            loss,
            lr,
            step_ms,
        });
        let first = step == 1;
        if first || step >= total || now.duration_since(l.last_emit) >= interval {
            self.flush(at, now);
        }
        if let Some(body) = self.meter.as_mut().and_then(|m| m.step(step, step_ms, now)) {
            self.emitter.emit(&self.run, body);
        }
    }

    fn on_step_mode(&mut self, mode: &StepMode<'_>) {
        let report = StepModeReport {
            mode: if mode.captured { "captured" } else { "eager" }.into(),
            reason: mode.reason.map(str::to_string),
            arena_bytes: mode.arena_bytes,
            eager_peak_bytes: mode.eager_live_peak,
        };
        if let Ok(mut m) = self.step_mode.lock() {
            *m = Some(report);
        }
        if let Some(m) = self.meter.as_mut() {
            m.step_mode(mode.depth, mode.span, mode.captured, mode.eager_live_peak);
        }
        if let (true, Some(why), Some(src)) = (mode.guard_failed, mode.reason, &self.source) {
            let d = Diagnostic::warning("capture", "train step not captured: every iteration is interpreted")
                .at(mode.span, why.to_string())
                .note("a captured step replays the recorded kernels; the results are the same either way, only slower");
            if let Some(j) = super::diag_json(&d, src) {
                self.emitter
                    .emit(&self.run, EventBody::Warning { diagnostic: j });
            }
        }
        let body = self.device_event();
        self.emitter.emit(&self.run, body);
    }

    fn on_train_end(&mut self, completed: usize, _total: usize, depth: usize) {
        // The last completed step is always reported exactly.
        let at = self.loops.len().wrapping_sub(1);
        self.flush(at, Instant::now());
        if let Some(body) = self
            .meter
            .as_mut()
            .and_then(|m| m.train_end(completed, depth))
        {
            self.emitter.emit(&self.run, body);
        }
        self.loops.pop();
        if let Some(c) = &self.cancel {
            let _ = c
                .in_train
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            c.apply_if_requested();
        }
    }
}
