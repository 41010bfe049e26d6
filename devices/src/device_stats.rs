//! [`DeviceStats`]: the exact seam counters of a device backend (CUDA, MLX),
//! shared with every buffer it allocated, each increment also recorded in the
//! calling thread's counter scopes (see `counter_scope`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::{Counters, DeviceKind};
use crate::counter_scope::{count_in_scopes, Count};

/// The counters of one device backend; a buffer counts its own download and
/// returns its memory when dropped.
#[derive(Debug)]
pub(crate) struct DeviceStats {
    kind: DeviceKind,
    uploads: AtomicU64,
    downloads: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    kernel_launches: AtomicU64,
    cpu_fallbacks: AtomicU64,
    evaluations: AtomicU64,
    memory_bytes: AtomicU64,
    peak_memory_bytes: AtomicU64,
}

impl DeviceStats {
    /// Zero counters of a device of kind `kind`.
    pub(crate) fn new(kind: DeviceKind) -> DeviceStats {
        let z = || AtomicU64::new(0);
        DeviceStats {
            kind,
            uploads: z(),
            downloads: z(),
            bytes_up: z(),
            bytes_down: z(),
            kernel_launches: z(),
            cpu_fallbacks: z(),
            evaluations: z(),
            memory_bytes: z(),
            peak_memory_bytes: z(),
        }
    }

    /// One host-to-device copy of `bytes`.
    pub(crate) fn upload(&self, bytes: u64) {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.bytes_up.fetch_add(bytes, Ordering::Relaxed);
        count_in_scopes(self.kind, Count::Upload(bytes));
    }

    /// One device-to-host copy of `bytes`.
    pub(crate) fn download(&self, bytes: u64) {
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.bytes_down.fetch_add(bytes, Ordering::Relaxed);
        count_in_scopes(self.kind, Count::Download(bytes));
    }

    /// One kernel call.
    pub(crate) fn kernel(&self) {
        self.kernel_launches.fetch_add(1, Ordering::Relaxed);
        count_in_scopes(self.kind, Count::Kernel);
    }

    /// One operation handed to the CPU.
    pub(crate) fn fallback(&self) {
        self.cpu_fallbacks.fetch_add(1, Ordering::Relaxed);
        count_in_scopes(self.kind, Count::Fallback);
    }

    /// One evaluation of pending lazy work.
    #[allow(dead_code)] // only lazy devices (MLX) evaluate
    pub(crate) fn evaluation(&self) {
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        count_in_scopes(self.kind, Count::Evaluation);
    }

    /// `bytes` of device memory now held by a buffer.
    pub(crate) fn allocated(&self, bytes: u64) {
        let now = self.memory_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_memory_bytes.fetch_max(now, Ordering::Relaxed);
    }

    /// `bytes` of device memory given back by a buffer.
    pub(crate) fn freed(&self, bytes: u64) {
        self.memory_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> Counters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counters {
            uploads: get(&self.uploads),
            downloads: get(&self.downloads),
            bytes_up: get(&self.bytes_up),
            bytes_down: get(&self.bytes_down),
            kernel_launches: get(&self.kernel_launches),
            cpu_fallbacks: get(&self.cpu_fallbacks),
            evaluations: get(&self.evaluations),
            memory_bytes: get(&self.memory_bytes),
            peak_memory_bytes: get(&self.peak_memory_bytes),
        }
    }

    /// Zeroes the event counts; memory in use stays, and the peak restarts from it.
    pub(crate) fn reset(&self) {
        for a in [
            &self.uploads,
            &self.downloads,
            &self.bytes_up,
            &self.bytes_down,
            &self.kernel_launches,
            &self.cpu_fallbacks,
            &self.evaluations,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        let now = self.memory_bytes.load(Ordering::Relaxed);
        self.peak_memory_bytes.store(now, Ordering::Relaxed);
    }
}
