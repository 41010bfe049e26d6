//! Device memory of the CUDA backend and its exact counters (also recorded in
//! the calling thread's counter scopes, see `counter_scope`).

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice};

use crate::backend::{Counters, DeviceError, DeviceKind};
use crate::counter_scope::{count_in_scopes, Count};
use crate::tensor::DeviceBuffer;

/// The backend's counters, shared with every buffer it allocated (a buffer counts
/// its own download and returns its memory when dropped).
#[derive(Debug, Default)]
pub(super) struct Stats {
    uploads: AtomicU64,
    downloads: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    kernel_launches: AtomicU64,
    cpu_fallbacks: AtomicU64,
    memory_bytes: AtomicU64,
    peak_memory_bytes: AtomicU64,
}

impl Stats {
    pub(super) fn upload(&self, bytes: u64) {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.bytes_up.fetch_add(bytes, Ordering::Relaxed);
        count_in_scopes(DeviceKind::Cuda, Count::Upload(bytes));
    }

    pub(super) fn download(&self, bytes: u64) {
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.bytes_down.fetch_add(bytes, Ordering::Relaxed);
        count_in_scopes(DeviceKind::Cuda, Count::Download(bytes));
    }

    pub(super) fn kernel(&self) {
        self.kernel_launches.fetch_add(1, Ordering::Relaxed);
        count_in_scopes(DeviceKind::Cuda, Count::Kernel);
    }

    pub(super) fn fallback(&self) {
        self.cpu_fallbacks.fetch_add(1, Ordering::Relaxed);
        count_in_scopes(DeviceKind::Cuda, Count::Fallback);
    }

    fn allocated(&self, bytes: u64) {
        let now = self.memory_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_memory_bytes.fetch_max(now, Ordering::Relaxed);
    }

    fn freed(&self, bytes: u64) {
        self.memory_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> Counters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counters {
            uploads: get(&self.uploads),
            downloads: get(&self.downloads),
            bytes_up: get(&self.bytes_up),
            bytes_down: get(&self.bytes_down),
            kernel_launches: get(&self.kernel_launches),
            cpu_fallbacks: get(&self.cpu_fallbacks),
            memory_bytes: get(&self.memory_bytes),
            peak_memory_bytes: get(&self.peak_memory_bytes),
        }
    }

    /// Zeroes the event counts; memory in use stays, and the peak restarts from it.
    pub(super) fn reset(&self) {
        for a in [
            &self.uploads,
            &self.downloads,
            &self.bytes_up,
            &self.bytes_down,
            &self.kernel_launches,
            &self.cpu_fallbacks,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        let now = self.memory_bytes.load(Ordering::Relaxed);
        self.peak_memory_bytes.store(now, Ordering::Relaxed);
    }
}

/// `len` f32 elements in GPU memory (the allocation holds at least one element,
/// so empty tensors need no special pointer).
#[derive(Debug)]
pub(super) struct CudaBuffer {
    slice: CudaSlice<f32>,
    len: usize,
    device: String,
    stats: Arc<Stats>,
}

impl CudaBuffer {
    /// Wraps an allocation of `slice.len()` elements of which the first `len` are used.
    pub(super) fn new(
        slice: CudaSlice<f32>,
        len: usize,
        device: &str,
        stats: &Arc<Stats>,
    ) -> CudaBuffer {
        stats.allocated(slice.num_bytes() as u64);
        CudaBuffer {
            slice,
            len,
            device: device.to_string(),
            stats: stats.clone(),
        }
    }

    /// The device memory.
    pub(super) fn slice(&self) -> &CudaSlice<f32> {
        &self.slice
    }

    /// The device memory, for kernels that write it.
    pub(super) fn slice_mut(&mut self) -> &mut CudaSlice<f32> {
        &mut self.slice
    }

    /// Whether this buffer lives in `ctx`.
    pub(super) fn in_context(&self, ctx: &Arc<CudaContext>) -> bool {
        Arc::ptr_eq(self.slice.context(), ctx)
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        self.stats.freed(self.slice.num_bytes() as u64);
    }
}

impl DeviceBuffer for CudaBuffer {
    fn device(&self) -> String {
        self.device.clone()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn to_host(&self) -> crate::Result<Vec<f32>> {
        let fail = |e: cudarc::driver::DriverError| DeviceError::Backend {
            device: self.device.clone(),
            message: format!("copy to host failed: {e}"),
        };
        let stream = self.slice.stream();
        let mut host = stream.clone_dtoh(&self.slice).map_err(fail)?;
        stream.synchronize().map_err(fail)?;
        host.truncate(self.len);
        self.stats.download(4 * self.len as u64);
        Ok(host)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
