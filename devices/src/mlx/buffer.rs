//! [`MlxBuffer`]: a tensor's elements as an MLX array, counted in the
//! backend's [`DeviceStats`].

use std::any::Any;
use std::sync::{Arc, Mutex};

use mlx_rs::Array;

use super::backend::{contiguous, evaluate, locked, mlx_error, spoil_trace, tracing, DEVICE};
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
        if tracing() {
            // The trace is abandoned (see `traced`); the zeros go nowhere.
            spoil_trace("a read on the host");
            return Ok(vec![0.0; self.len]);
        }
        let array = self.array();
        // An evaluated row-major array (a compiled step's result) is read as
        // it is; anything else is made contiguous and evaluated (counted).
        let array = if is_evaluated(&array) && is_row_contiguous(&array) {
            array
        } else {
            let array = contiguous(&array)?;
            evaluate(&self.stats, [&array], "reading an MLX tensor")?;
            array
        };
        let host = locked(|| array.try_as_slice::<f32>().map(<[f32]>::to_vec))
            .map_err(|e| mlx_error("reading an MLX tensor", e))?;
        self.stats.download(4 * self.len as u64);
        Ok(host)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Whether `a` has been evaluated (its data exists).
fn is_evaluated(a: &Array) -> bool {
    flag(a, mlx_sys::_mlx_array_is_available)
}

/// Whether `a`'s data is row-major contiguous.
fn is_row_contiguous(a: &Array) -> bool {
    flag(a, mlx_sys::_mlx_array_is_row_contiguous)
}

/// One of mlx-c's boolean array queries (false when it fails).
fn flag(a: &Array, query: unsafe extern "C" fn(*mut bool, mlx_sys::mlx_array) -> i32) -> bool {
    let mut yes = false;
    // SAFETY: `a` is a live array and `yes` a valid out-pointer for the call.
    let status = locked(|| unsafe { query(&mut yes, a.as_ptr()) });
    status == 0 && yes
}
