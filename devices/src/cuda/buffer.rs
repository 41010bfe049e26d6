//! Device memory of the CUDA backend, counted in its exact counters
//! ([`DeviceStats`], also recorded in the calling thread's counter scopes).

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice};

use crate::backend::DeviceError;
use crate::device_stats::DeviceStats;
use crate::tensor::DeviceBuffer;

/// The backend's counters, shared with every buffer it allocated.
pub(super) type Stats = DeviceStats;

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
