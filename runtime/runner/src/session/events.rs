//! Telemetry events (DESIGN §6, `docs/telemetry.md`): one typed channel per session
//! that the CLI renders, the server streams as SSE and tests assert on.
//!
//! Every event carries the schema version `v`, the `session` and `run` ids, a
//! per-session sequence number `seq` (1, 2, 3, … with no gaps, across runs) and
//! `time` (milliseconds since the Unix epoch); `type` names the body.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The version of the event schema documented in `docs/telemetry.md`.
pub const SCHEMA_VERSION: u32 = 1;

/// One telemetry event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub v: u32,
    /// The session that emitted it.
    pub session: String,
    /// The run it belongs to.
    pub run: String,
    /// Position in the session's stream: consecutive from 1.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time: u64,
    /// What happened.
    #[serde(flatten)]
    pub body: EventBody,
}

impl Event {
    /// The event's `type` (`run_started`, `step`, …): the SSE event name.
    pub fn kind(&self) -> &'static str {
        self.body.kind()
    }
}

/// Where a run's code comes from in the editor's document.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellRef {
    /// The document (a URI or a path).
    pub uri: String,
    /// The cell's 0-based index among the document's cells.
    #[serde(default)]
    pub index: usize,
    /// The 0-based line of the document on which the cell's text starts.
    #[serde(default)]
    pub start_line: usize,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every statement ran.
    Ok,
    /// A statement failed (or the run panicked); `diagnostic` says why.
    Error,
    /// The run was cancelled (diagnostic E0409).
    Cancelled,
}

/// Device counters as reported in `device` events (see `mlpl_devices::Counters`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCounters {
    /// Host-to-device copies.
    pub uploads: u64,
    /// Device-to-host copies.
    pub downloads: u64,
    /// Bytes copied host to device.
    pub bytes_up: u64,
    /// Bytes copied device to host.
    pub bytes_down: u64,
    /// Kernel invocations.
    pub kernel_launches: u64,
    /// Operations handed to the CPU by a device that could not run them.
    pub cpu_fallbacks: u64,
    /// Evaluations of a lazy device's graph (MLX); left out when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub evaluations: u64,
}

/// Whether a count is 0 (left out of the event).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A session's memory after a run (docs/limits.md): what its values hold and
/// its budget for them (`mlpl serve --session-memory-budget`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// Bytes held by the session's variables and optimizer state (storage
    /// shared between variables counted once).
    pub live_bytes: u64,
    /// The session's budget for them; `null` when it has none.
    pub budget_bytes: Option<u64>,
}

/// The estimate of a measured loop, as the editor shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredEstimate {
    /// Estimated milliseconds per step (the central value).
    pub step_ms: f64,
    /// Its low end.
    pub step_ms_lo: f64,
    /// Its high end.
    pub step_ms_hi: f64,
    /// Estimated peak memory, bytes.
    pub memory_bytes: f64,
}

/// The body of an event; serialised with a `type` tag in snake case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventBody {
    /// A run began.
    RunStarted {
        /// The cell being run, when the client said which.
        cell: Option<CellRef>,
        /// First line of the run's code in the document (1-based).
        start_line: usize,
        /// Last line of the run's code in the document (1-based).
        end_line: usize,
        /// The device for code outside `device` blocks.
        device: String,
    },
    /// Text the run printed (today: the run's value as `mlpl run` prints it).
    Output {
        /// `stdout`.
        stream: String,
        /// The text, ending with a newline.
        text: String,
    },
    /// Progress of a `train` loop (throttled; the last step is always sent).
    Step {
        /// 0-based index of the `train` loop within the run, in start order.
        #[serde(rename = "loop")]
        loop_index: u32,
        /// 1 for a top-level loop, 2 for one nested in another `train` body, …
        depth: u32,
        /// Iterations completed (1..=total).
        step: u64,
        /// Iterations the loop will run.
        total: u64,
        /// The loss recorded for this iteration (`null` if not finite).
        loss: Option<f64>,
        /// The learning rate when known.
        lr: Option<f64>,
        /// Wall time of this iteration in milliseconds.
        step_ms: f64,
        /// Iterations per second since the previous `step` event of this loop.
        items_per_s: Option<f64>,
    },
    /// What a top-level `train` loop's replayed (or, when it runs
    /// interpreted, later) iterations measured: sent once it has
    /// [`super::measured::MIN_SAMPLES`] measured iterations, then at most once
    /// a second, and at its end (`done`), when the correction it taught the
    /// calibration cache is included.
    StepMeasured {
        /// 0-based index of the loop within the run, as in `step` events.
        #[serde(rename = "loop")]
        loop_index: u32,
        /// First line of the `train` statement in the document (1-based; 0
        /// when the loop's statement was not found).
        start_line: usize,
        /// Its last line (1-based).
        end_line: usize,
        /// The device kind the loop ran on (`cpu`, `cuda`, `mlx`): its
        /// `device` block's or the run's, the CPU when that is not available.
        device: String,
        /// `captured` (replayed iterations measured) or `eager`.
        mode: String,
        /// Iterations completed.
        step: u64,
        /// Iterations the loop runs.
        total: u64,
        /// Iterations measured (not the recorded ones, nor the first).
        measured_steps: u64,
        /// Median wall time of the measured iterations (the latest 1,024), ms.
        step_ms: f64,
        /// Their 10th percentile, ms.
        step_ms_lo: f64,
        /// Their 90th percentile, ms.
        step_ms_hi: f64,
        /// The process's peak resident memory so far (`VmHWM`); `null` where
        /// the system does not report it.
        peak_rss_bytes: Option<u64>,
        /// The device's peak memory held by tensors (CUDA, MLX); `null` on the CPU.
        device_peak_bytes: Option<u64>,
        /// The step's own live peak (the most bytes of tensors its kernels saw
        /// alive at once, from the recorded iterations); `null` when not recorded.
        step_peak_bytes: Option<u64>,
        /// Seconds left at the median: (total − step) × step_ms.
        eta_s: f64,
        /// Whether the loop has ended (its last event).
        done: bool,
        /// The estimate of the loop the editor shows (with the correction
        /// learnt so far); `null` when the device has no calibrated model or the
        /// checker cannot size the loop (e.g. its model is from another cell).
        estimate: Option<MeasuredEstimate>,
        /// The device's correction after this loop was learnt (`done` events
        /// only; `null` when nothing was stored).
        correction: Option<mlpl_lang::estimate::calibration::Correction>,
    },
    /// Device counters since the run started.
    Device {
        /// The run's default device.
        device: String,
        /// What this run did since it started (only this run's work, even
        /// while other sessions run at the same time).
        counters: DeviceCounters,
        /// Device memory held by tensors now (0 on the CPU, which does not track it).
        memory_bytes: u64,
        /// Highest device memory seen (0 on the CPU).
        peak_memory_bytes: u64,
        /// How the run's latest `train` loop executes its steps: `captured`
        /// (replayed from its recorded first iterations) or `eager`; `null`
        /// before any loop.
        #[serde(default)]
        step_mode: Option<String>,
        /// Why that loop's steps are not captured.
        #[serde(default)]
        step_mode_reason: Option<String>,
        /// The bytes the captured step's arena holds (its own buffers and the
        /// inputs it reads in place); `null` when not captured to an arena.
        #[serde(default)]
        step_arena_bytes: Option<u64>,
        /// The eager step's live peak in bytes (the most bytes of tensors the
        /// step's kernels saw alive at once, from the recorded iterations);
        /// `null` when the loop was not recorded.
        #[serde(default)]
        step_eager_peak_bytes: Option<u64>,
    },
    /// The run's value (its last statement's).
    Value {
        /// The variable the last statement assigned, if it was an assignment.
        name: Option<String>,
        /// `array`, `string`, `model` or `tokenizer`.
        kind: String,
        /// The shape of an array.
        shape: Option<Vec<usize>>,
        /// Axis names of an array (`null` entries for unnamed axes); `null` when none is named.
        axes: Option<Vec<Option<String>>>,
        /// The shape as MLPL prints it, e.g. `[batch=32, 10]`.
        named_shape: Option<String>,
        /// `f32` or `exact` for arrays.
        dtype: Option<String>,
        /// A one-line preview.
        preview: String,
        /// The full display text (LANGUAGE §7), cut at 1 MiB.
        text: String,
        /// Whether `text` was cut.
        truncated: bool,
    },
    /// A file-like result, e.g. an SVG chart.
    Artifact {
        /// `svg`.
        kind: String,
        /// Where it was written, when it was.
        path: Option<String>,
        /// The content, when it was not written to a file.
        content: Option<String>,
        /// Size of the content in bytes.
        bytes: usize,
    },
    /// A warning diagnostic (same JSON as `mlpl check --format json`).
    Warning {
        /// The diagnostic, lines mapped to the document.
        diagnostic: serde_json::Value,
    },
    /// A run ended.
    RunFinished {
        /// `ok`, `error` or `cancelled`.
        status: RunStatus,
        /// Wall time of the run in milliseconds.
        elapsed_ms: f64,
        /// The error (or E0409 for a cancelled run), lines mapped to the document.
        diagnostic: Option<serde_json::Value>,
        /// Whether the session was saved after the run (`null`: no state directory).
        saved: Option<bool>,
        /// The run's device counters, as in its last `device` event (`null`
        /// when the run evaluated nothing, e.g. after a syntax error).
        counters: Option<DeviceCounters>,
        /// The session's memory after the run (added in schema 1; older
        /// servers omit it).
        #[serde(default)]
        memory: Option<MemoryUse>,
    },
}

impl EventBody {
    /// The `type` tag of this body.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::RunStarted { .. } => "run_started",
            EventBody::Output { .. } => "output",
            EventBody::Step { .. } => "step",
            EventBody::StepMeasured { .. } => "step_measured",
            EventBody::Device { .. } => "device",
            EventBody::Value { .. } => "value",
            EventBody::Artifact { .. } => "artifact",
            EventBody::Warning { .. } => "warning",
            EventBody::RunFinished { .. } => "run_finished",
        }
    }
}

/// Receives every event of a session in `seq` order.
pub type EventSink = Box<dyn Fn(&Event) + Send + Sync>;

/// Numbers a session's events and hands them to its sink.
pub struct Emitter {
    session: String,
    last_seq: Mutex<u64>,
    sink: EventSink,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("session", &self.session)
            .field("last_seq", &self.last_seq())
            .finish()
    }
}

impl Emitter {
    /// An emitter for session `session` whose first event gets `seq = last_seq + 1`.
    pub fn new(session: impl Into<String>, last_seq: u64, sink: EventSink) -> Emitter {
        Emitter {
            session: session.into(),
            last_seq: Mutex::new(last_seq),
            sink,
        }
    }

    /// The session id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The `seq` of the last event emitted.
    pub fn last_seq(&self) -> u64 {
        *self.last_seq.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers, stamps and delivers one event; returns its `seq`. The sink runs
    /// under the numbering lock, so sinks see events in `seq` order.
    pub fn emit(&self, run: &str, body: EventBody) -> u64 {
        let mut seq = self.last_seq.lock().unwrap_or_else(|e| e.into_inner());
        *seq += 1;
        let event = Event {
            v: SCHEMA_VERSION,
            session: self.session.clone(),
            run: run.to_string(),
            seq: *seq,
            time: now_ms(),
            body,
        };
        (self.sink)(&event);
        *seq
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn events_serialise_flat_with_a_type_tag_and_round_trip() {
        let got: Arc<Mutex<Vec<Event>>> = Arc::default();
        let g = got.clone();
        let em = Emitter::new(
            "s1",
            41,
            Box::new(move |e| g.lock().unwrap().push(e.clone())),
        );
        em.emit(
            "r1",
            EventBody::Step {
                loop_index: 0,
                depth: 1,
                step: 3,
                total: 10,
                loss: Some(0.5),
                lr: None,
                step_ms: 1.5,
                items_per_s: Some(20.0),
            },
        );
        let e = got.lock().unwrap()[0].clone();
        assert_eq!(e.seq, 42);
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["type"], "step");
        assert_eq!(json["loop"], 0);
        assert_eq!(json["session"], "s1");
        assert_eq!(json["v"], SCHEMA_VERSION);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, e);
        assert_eq!(em.last_seq(), 42);
    }
}
