//! [`MlxBuffer`]: a tensor's elements as an MLX array, counted in the
//! backend's [`DeviceStats`].

use std::any::Any;
use std::sync::{Arc, Mutex};

use mlx_rs::Array;

use super::backend::{contiguous, evaluate, mlx_error, DEVICE};
use crate::device_stats::DeviceStats;
use crate::tensor::DeviceBuffer;

/// `len` f32 elements held by an MLX array (possibly not evaluated yet). The
/// array is kept flat or in any shape of `len` elements: the tensor owning the
/// buffer gives its shape, and kernels reshape (a view in MLX).
#[derive(Debug)]
pub(crate) struct MlxBuffer {
    array: Mutex<Array>,
    len: usize,
    stats: Arc<DeviceStats>,
}

impl MlxBuffer {
    /// Wraps `array` (of f32 elements), counting its bytes as device memory.
    pub(crate) fn new(array: Array, stats: &Arc<DeviceStats>) -> MlxBuffer {
        let len = array.size();
        stats.allocated(4 * len as u64);
        MlxBuffer {
            array: Mutex::new(array),
            len,
            stats: stats.clone(),
        }
    }

    /// The array (a new handle to the same MLX array).
    pub(crate) fn array(&self) -> Array {
        self.array.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for MlxBuffer {
    fn drop(&mut self) {
        self.stats.freed(4 * self.len as u64);
    }
}

impl DeviceBuffer for MlxBuffer {
    fn device(&self) -> String {
        DEVICE.to_string()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn to_host(&self) -> crate::Result<Vec<f32>> {
        if self.len == 0 {
            return Ok(Vec::new());
        }
        let array = contiguous(&self.array())?;
        evaluate(&self.stats, [&array], "reading an MLX tensor")?;
        let host = array
            .try_as_slice::<f32>()
            .map_err(|e| mlx_error("reading an MLX tensor", e))?
            .to_vec();
        self.stats.download(4 * self.len as u64);
        Ok(host)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
