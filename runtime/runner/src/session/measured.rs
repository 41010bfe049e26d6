//! Refinement from measurement (docs/estimates.md, "Refinement from
//! measurement"): a top-level `train` loop's measured step time and peak
//! memory, reported as throttled `step_measured` events (docs/telemetry.md)
//! with an ETA, and, at the loop's end, the correction it teaches the
//! calibration cache (measured ÷ the model's own estimate of that loop).
//!
//! A [`Meter`] is fed by the run's [`super::StepObserver`]; it knows the run's
//! source (where each loop is, its `device` block) and, once per run and only
//! when a loop has been measured, asks the checker for the loops' estimates.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlpl_diag::{SourceFile, Span};
use mlpl_lang::estimate::calibration::{self, Calibration, Correction, DeviceModel};
use mlpl_lang::eval::DeviceContext;
use mlpl_lang::step_cost::cost::estimate_step;
use mlpl_lang::train_loops::loops::{train_loops, TrainLoop};
use mlpl_lang::train_loops::measure::peak_resident_bytes;
use mlpl_lang::value::DeviceTarget;
use mlpl_syntax::{walk, Expr, ExprKind, Program, Stmt, StmtKind};

use super::events::{EventBody, MeasuredEstimate};

/// The environment variable that switches learning off (any non-empty value):
/// loops are still measured and reported, the cache is never written.
pub const NO_REFINE_ENV: &str = "MLPL_NO_REFINE";

/// Measured iterations a loop needs before its first `step_measured` event.
pub const MIN_SAMPLES: usize = 3;

/// The most measured iterations the median is taken over (the latest ones).
const WINDOW: usize = 1024;

/// Least time between two `step_measured` events of one loop.
pub const MEASURE_INTERVAL: Duration = Duration::from_secs(1);

/// Where and whether a session learns corrections.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefineOptions {
    /// The calibration cache corrections are stored in; `None`: measure and
    /// report only.
    pub cache: Option<PathBuf>,
    /// Whether the process's peak memory is this session's alone (`mlpl run`:
    /// yes; `mlpl serve`, whose process holds every session: no). Memory
    /// corrections are learnt only then.
    pub own_process: bool,
}

impl RefineOptions {
    /// Learning into the default calibration cache (`$MLPL_CACHE_DIR/…`,
    /// docs/estimates.md) when that file exists and `MLPL_NO_REFINE` is not
    /// set; `off` (a command-line flag) switches it off too.
    pub fn from_env(own_process: bool, off: bool) -> RefineOptions {
        let disabled = off || std::env::var_os(NO_REFINE_ENV).is_some_and(|v| !v.is_empty());
        let cache = (!disabled)
            .then(calibration::default_path)
            .flatten()
            .filter(|p| p.is_file());
        RefineOptions { cache, own_process }
    }
}

/// A `train` statement of the run's code: its body's span (what the
/// interpreter reports), its own span, and the target of the innermost
/// `device("…")` block around it.
#[derive(Clone, Debug)]
struct Site {
    body: Span,
    stmt: Span,
    device: Option<String>,
}

fn sites_in(stmts: &[Stmt], device: Option<&str>, out: &mut Vec<Site>) {
    for s in stmts {
        if let StmtKind::Train { body, .. } = &s.kind {
            out.push(Site {
                body: body.span,
                stmt: s.span,
                device: device.map(str::to_string),
            });
        }
        if let Some(e) = walk::stmt_expr(s) {
            sites_in_expr(e, device, out);
        }
        if let Some(b) = walk::stmt_body(s) {
            sites_in(&b.stmts, device, out);
        }
    }
}

fn sites_in_expr(e: &Expr, device: Option<&str>, out: &mut Vec<Site>) {
    for c in walk::children(e) {
        sites_in_expr(c, device, out);
    }
    if let ExprKind::Device { target, body } = &e.kind {
        let inner = match &target.kind {
            ExprKind::Str(s) => Some(s.as_str()),
            _ => device,
        };
        sites_in(&body.stmts, inner, out);
    }
}

/// One loop being measured.
struct LoopMeter {
    index: u32,
    total: u64,
    site: Option<Site>,
    /// Whether its iterations replay a captured step; `None` until known.
    captured: Option<bool>,
    /// Iterations completed when the mode was reported: the iteration then
    /// running (recorded, or the first) is not measured.
    mode_at: u64,
    completed: u64,
    samples: Vec<f64>,
    next: usize,
    measured: u64,
    last_emit: Option<Instant>,
    step_peak: Option<u64>,
    rss_at_start: Option<f64>,
    device_peak_at_start: u64,
    device: Option<Resolved>,
    estimate: Option<Option<Estimated>>,
}

/// The device a loop ran on.
#[derive(Clone)]
struct Resolved {
    kind: String,
    backend: Arc<dyn mlpl_devices::Backend>,
}

/// The model's estimate of a loop (the uncorrected one and its correction).
#[derive(Clone, Copy)]
struct Estimated {
    seconds: [f64; 3],
    memory: f64,
    correction: Correction,
}

impl Estimated {
    fn shown(&self) -> MeasuredEstimate {
        let c = self.correction;
        MeasuredEstimate {
            step_ms: self.seconds[1] * 1e3 * c.time,
            step_ms_lo: self.seconds[0] * 1e3 * c.time,
            step_ms_hi: self.seconds[2] * 1e3 * c.time,
            memory_bytes: self.memory * c.memory,
        }
    }
}

/// Measures a run's top-level `train` loops.
pub struct Meter {
    opts: RefineOptions,
    src: SourceFile,
    run_device: DeviceTarget,
    calibration: Option<Arc<Calibration>>,
    sites: Vec<Site>,
    loops: Option<Vec<TrainLoop>>,
    current: Option<LoopMeter>,
    next_index: u32,
}

impl Meter {
    /// A meter for a run of `program` (parsed from `src`) on `run_device`;
    /// `calibration` is the cache the session loaded (for the estimate shown
    /// when nothing is learnt).
    pub fn new(
        opts: RefineOptions,
        src: SourceFile,
        program: &Program,
        run_device: DeviceTarget,
        calibration: Option<Arc<Calibration>>,
    ) -> Meter {
        let mut sites = Vec::new();
        sites_in(&program.stmts, None, &mut sites);
        Meter {
            opts,
            src,
            run_device,
            calibration,
            sites,
            loops: None,
            current: None,
            next_index: 0,
        }
    }

    /// A `train` loop of `total` iterations starts at `depth` (1: top level).
    pub fn train_start(&mut self, total: usize, depth: usize) {
        let index = self.next_index;
        self.next_index = self.next_index.saturating_add(1);
        if depth != 1 {
            return;
        }
        self.current = Some(LoopMeter {
            index,
            total: total as u64,
            site: None,
            captured: None,
            mode_at: 0,
            completed: 0,
            samples: Vec::new(),
            next: 0,
            measured: 0,
            last_emit: None,
            step_peak: None,
            rss_at_start: peak_resident_bytes(),
            device_peak_at_start: 0,
            device: None,
            estimate: None,
        });
    }

    /// The running top-level loop's mode: its body `body`, captured or not,
    /// the eager step's live peak.
    pub fn step_mode(&mut self, depth: usize, body: Span, captured: bool, step_peak: Option<u64>) {
        if depth != 1 {
            return;
        }
        let site = self.sites.iter().find(|s| s.body == body).cloned();
        let run_device = self.run_device;
        let Some(l) = self.current.as_mut() else {
            return;
        };
        if l.device.is_none() {
            let target = site
                .as_ref()
                .and_then(|s| s.device.as_deref())
                .and_then(DeviceTarget::parse)
                .unwrap_or(run_device);
            let ctx = DeviceContext::new();
            let target = if ctx.availability(target).is_ok() {
                target
            } else {
                DeviceTarget::CPU
            };
            let backend = ctx.backend(target);
            l.device_peak_at_start = backend.counters().peak_memory_bytes;
            l.device = Some(Resolved {
                kind: target.kind.name().to_string(),
                backend,
            });
        }
        l.site = site;
        l.captured = Some(captured);
        l.mode_at = l.completed;
        l.step_peak = step_peak.or(l.step_peak);
    }

    /// Iteration `step` of the running loop took `step_ms`; returns a
    /// `step_measured` event when one is due.
    pub fn step(&mut self, step: usize, step_ms: f64, now: Instant) -> Option<EventBody> {
        let l = self.current.as_mut()?;
        l.completed = step as u64;
        if l.captured.is_none() || l.completed < l.mode_at + 2 || !step_ms.is_finite() {
            return None;
        }
        if l.samples.len() < WINDOW {
            l.samples.push(step_ms);
        } else {
            l.samples[l.next] = step_ms;
        }
        l.next = (l.next + 1) % WINDOW;
        l.measured += 1;
        let due = l.samples.len() >= MIN_SAMPLES
            && l.last_emit
                .is_none_or(|t| now.duration_since(t) >= MEASURE_INTERVAL);
        if !due || l.completed >= l.total {
            // The loop's last iteration is reported by `train_end`.
            return None;
        }
        l.last_emit = Some(now);
        self.event(false)
    }

    /// The running loop ended after `completed` iterations: its last
    /// `step_measured` event (with the correction stored, when one was).
    pub fn train_end(&mut self, completed: usize, depth: usize) -> Option<EventBody> {
        if depth != 1 {
            return None;
        }
        let l = self.current.as_mut()?;
        l.completed = completed as u64;
        let out = if l.samples.len() >= MIN_SAMPLES {
            self.event(true)
        } else {
            None
        };
        self.current = None;
        out
    }

    /// The loops' static estimates, from the checker (once per run).
    fn loops(&mut self) -> &[TrainLoop] {
        let text = self.src.text();
        self.loops.get_or_insert_with(|| {
            std::panic::catch_unwind(|| {
                let (checked, facts) = mlpl_lang::check::query::check_with_facts(text);
                train_loops(&checked.program, &facts)
            })
            .unwrap_or_default()
        })
    }

    /// The calibrated model of device kind `kind`: from the cache file when
    /// learning (it may have changed since the run started), else the
    /// session's.
    fn model(&self, kind: &str) -> Option<DeviceModel> {
        let fresh;
        let cal = match &self.opts.cache {
            Some(p) => {
                fresh = Calibration::load(p);
                fresh.as_ref()
            }
            None => self.calibration.as_deref(),
        };
        let (model, calibrated) =
            calibration::device_model(cal, kind, mlpl_lang::estimate::DEFAULT_GFLOPS);
        calibrated.then_some(model)
    }

    /// The model's estimate of the running loop on its device.
    fn estimate(&mut self) -> Option<Estimated> {
        let l = self.current.as_ref()?;
        if let Some(e) = l.estimate {
            return e;
        }
        let (site, captured, kind) = (l.site.clone(), l.captured?, l.device.as_ref()?.kind.clone());
        let est = site.and_then(|site| {
            let model = self.model(&kind)?;
            let lp = self
                .loops()
                .iter()
                .filter(|lp| lp.span.start <= site.body.start && site.body.end <= lp.span.end)
                .min_by_key(|lp| lp.span.end - lp.span.start)
                // One row of an unknown batch is no estimate of the real step.
                .filter(|lp| lp.batch.known())?
                .clone();
            let mut plain = model.clone();
            plain.correction = Correction::default();
            let s = estimate_step(&lp.model, &lp.frozen, &lp.step, captured, &plain);
            Some(Estimated {
                seconds: [s.seconds.lo, s.seconds.mid, s.seconds.hi],
                memory: s.memory.total,
                correction: model.correction,
            })
        });
        if let Some(l) = self.current.as_mut() {
            l.estimate = Some(est);
        }
        est
    }

    /// The `step_measured` event of the running loop; at its end (`done`),
    /// after storing what it taught.
    fn event(&mut self, done: bool) -> Option<EventBody> {
        let estimate = self.estimate();
        let l = self.current.as_ref()?;
        let mut sorted = l.samples.clone();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        let (median, lo, hi) = (at(0.5), at(0.1), at(0.9));
        let device = l.device.clone()?;
        let rss = peak_resident_bytes();
        let device_peak = device.backend.counters().peak_memory_bytes;
        let (start_line, end_line) = match &l.site {
            Some(s) => (
                self.src.line_col(s.stmt.start).0,
                self.src
                    .line_col(s.stmt.end.saturating_sub(1).max(s.stmt.start))
                    .0,
            ),
            None => (0, 0),
        };
        let left = l.total.saturating_sub(l.completed);
        let mut correction = None;
        if done {
            if let (Some(path), Some(e)) = (&self.opts.cache, estimate) {
                let time = median / 1e3 / e.seconds[1];
                let memory = if !self.opts.own_process {
                    f64::NAN
                } else if device.kind == "cpu" {
                    // The process's peak is this loop's only when it rose during it.
                    match (rss, l.rss_at_start) {
                        (Some(now), Some(before)) if now > before => now / e.memory,
                        _ => f64::NAN,
                    }
                } else if device_peak > l.device_peak_at_start {
                    device_peak as f64 / e.memory
                } else {
                    f64::NAN
                };
                correction = calibration::learn(path, &device.kind, time, memory)
                    .ok()
                    .flatten();
            }
        }
        Some(EventBody::StepMeasured {
            loop_index: l.index,
            start_line,
            end_line,
            device: device.kind,
            mode: if l.captured == Some(true) {
                "captured"
            } else {
                "eager"
            }
            .into(),
            step: l.completed,
            total: l.total,
            measured_steps: l.measured,
            step_ms: median,
            step_ms_lo: lo,
            step_ms_hi: hi,
            peak_rss_bytes: rss.map(|b| b as u64),
            device_peak_bytes: (device_peak > 0).then_some(device_peak),
            step_peak_bytes: l.step_peak,
            eta_s: left as f64 * median / 1e3,
            done,
            estimate: estimate.map(|e| e.shown()),
            correction,
        })
    }
}
