//! Kernel profiling for timelines (`mlpl run --timeline`): [`Profiled`] is a
//! backend that forwards every kernel of the kernel table to the real one and
//! notes its name, the shapes of its tensor inputs, when it began and how long
//! it took in a shared [`KernelLog`]. Its methods are generated from the kernel
//! table with the trait's, so no kernel can be left out. A captured `train`
//! step's compiled program is the inner backend's ([`Backend::compile_step`]
//! is forwarded), so replayed iterations run unprofiled at full speed; the
//! kernels of the iterations that were recorded are logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::backend::Backend;
use crate::clock::Instant;

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

    fn note(&self, name: &'static str, inputs: Vec<Vec<usize>>, began: Instant) {
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
        self.log.note(name, inputs, began);
    }
}
