//! Kernel profiling for timelines (`mlpl run --timeline`): [`Profiled`] is a
//! backend that forwards every kernel of the kernel table to the real one and
//! notes its name, the shapes of its tensor inputs, when it began and how long
//! it took in a shared [`KernelLog`]. Its methods are generated from the kernel
//! table with the trait's, so no kernel can be left out. A captured `train`
//! step's compiled program is the inner backend's (the CPU's arena, or the
//! generic replay on the inner backend), wrapped in a [`ProfiledProgram`]
//! that notes each replayed kernel call with the shapes it was recorded with
//! (marked `replayed`), so every iteration of a captured loop is in the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::backend::{Backend, Result};
use crate::capture::{BackendReplay, CallObserver, StepPlan, StepProgram, ValueId};
use crate::clock::Instant;
use crate::tensor::Tensor;
use std::time::Duration;

/// One kernel call.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelEvent {
    /// The kernel table's name of the method, e.g. `matmul`.
    pub name: &'static str,
    /// The shape of each tensor input, in the table's order.
    pub inputs: Vec<Vec<usize>>,
    /// Microseconds from the log's origin to the call.
    pub start_us: f64,
    /// Microseconds the call took (on an asynchronous device, to enqueue it).
    pub dur_us: f64,
    /// Whether the call was made by a captured step's replay
    /// ([`ProfiledProgram`]) rather than by the interpreter.
    pub replayed: bool,
}

/// The calls a [`Profiled`] backend saw, at most `limit` of them (later ones
/// are counted in [`KernelLog::dropped`]).
#[derive(Debug)]
pub struct KernelLog {
    origin: Mutex<Instant>,
    events: Mutex<Vec<KernelEvent>>,
    limit: usize,
    dropped: AtomicU64,
}

impl KernelLog {
    /// An empty log keeping at most `limit` events, timed from now.
    pub fn new(limit: usize) -> KernelLog {
        KernelLog {
            origin: Mutex::new(Instant::now()),
            events: Mutex::new(Vec::new()),
            limit,
            dropped: AtomicU64::new(0),
        }
    }

    /// Forgets every event and times from now.
    pub fn restart(&self) {
        *self.origin.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.dropped.store(0, Ordering::Relaxed);
    }

    /// The events so far, in call order.
    pub fn events(&self) -> Vec<KernelEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Calls not kept because the log was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn note(&self, name: &'static str, inputs: Vec<Vec<usize>>, began: Instant, replayed: bool) {
        let dur_us = began.elapsed().as_secs_f64() * 1e6;
        let origin = *self.origin.lock().unwrap_or_else(|p| p.into_inner());
        let start_us = (origin.elapsed().as_secs_f64() * 1e6 - dur_us).max(0.0);
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if events.len() >= self.limit {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        events.push(KernelEvent {
            name,
            inputs,
            start_us,
            dur_us,
            replayed,
        });
    }
}

/// A backend that runs every kernel on `inner` and logs it (see the module
/// docs).
#[derive(Debug)]
pub struct Profiled {
    inner: Arc<dyn Backend>,
    log: Arc<KernelLog>,
}

impl Profiled {
    /// `inner`, its kernels logged in `log`.
    pub fn new(inner: Arc<dyn Backend>, log: Arc<KernelLog>) -> Profiled {
        Profiled { inner, log }
    }

    pub(crate) fn inner(&self) -> &dyn Backend {
        &*self.inner
    }

    pub(crate) fn note(&self, name: &'static str, inputs: Vec<Vec<usize>>, began: Instant) {
        self.log.note(name, inputs, began, false);
    }

    /// The compiled step of `plan`: the inner backend's program (or the
    /// generic replay on the inner backend), its kernel calls logged.
    pub(crate) fn compile_step(&self, plan: &StepPlan) -> Result<Box<dyn StepProgram>> {
        let inner = match self.inner.compile_step(plan) {
            Some(program) => program?,
            None => Box::new(BackendReplay::new(self.inner.clone(), plan.clone())),
        };
        Ok(Box::new(ProfiledProgram::new(
            inner,
            plan,
            self.log.clone(),
        )))
    }
}

/// A compiled step whose kernel calls are noted in a [`KernelLog`] as they
/// run, each with the name and input shapes of its recorded call.
pub struct ProfiledProgram {
    inner: Box<dyn StepProgram>,
    /// Per call of the plan's trace: its kernel's name and input shapes.
    calls: Vec<(&'static str, Vec<Vec<usize>>)>,
    log: Arc<KernelLog>,
}

impl ProfiledProgram {
    /// `inner`, the program of `plan`, logged in `log`.
    pub fn new(
        inner: Box<dyn StepProgram>,
        plan: &StepPlan,
        log: Arc<KernelLog>,
    ) -> ProfiledProgram {
        let t = &plan.trace;
        let calls = t
            .calls
            .iter()
            .map(|c| {
                let shapes = c.inputs.iter().map(|&v| t.value(v).shape.clone()).collect();
                (c.op.name(), shapes)
            })
            .collect();
        ProfiledProgram { inner, calls, log }
    }
}

impl StepProgram for ProfiledProgram {
    fn run_observed(&mut self, mut after_call: Option<CallObserver<'_>>) -> Result<()> {
        let (calls, log) = (&self.calls, &self.log);
        self.inner.run_observed(Some(&mut |k, began| {
            let (name, shapes) = &calls[k];
            log.note(name, shapes.clone(), began, true);
            if let Some(f) = after_call.as_mut() {
                f(k, began);
            }
        }))
    }

    fn first_element(&self, v: ValueId) -> Result<f32> {
        self.inner.first_element(v)
    }

    fn tensor(&self, v: ValueId) -> Result<Tensor> {
        self.inner.tensor(v)
    }

    fn readable(&self, v: ValueId) -> bool {
        self.inner.readable(v)
    }

    fn take_kept(&mut self, vs: &[ValueId]) -> Vec<Result<Tensor>> {
        self.inner.take_kept(vs)
    }

    fn kernel_time(&self) -> Duration {
        self.inner.kernel_time()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn arena_bytes(&self) -> Option<crate::capture::ArenaBytes> {
        self.inner.arena_bytes()
    }
}
