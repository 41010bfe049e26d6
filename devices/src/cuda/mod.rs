//! The CUDA backend (cargo feature `cuda`): tensors resident in GPU memory,
//! cuBLAS for (batched) GEMM and NVRTC-compiled kernels for every other op of the
//! [`Backend`](crate::Backend) trait.
//!
//! The driver, cuBLAS and NVRTC are loaded when a backend is first opened
//! ([`open`]), so the crate builds and runs without a CUDA toolkit; without the
//! feature, or without a driver or GPU, [`open`] says why ([`CudaUnavailable`]).
//! The kernel sources (`kernels/*.cu`, listed in [`kernels::MODULES`]) are plain
//! op-per-function CUDA C, compiled to PTX for the device when it is opened.
//!
//! Counters are exact: every host-to-device copy (including an input that was
//! still in host memory) is an upload, every read of a device tensor on the host
//! ([`Tensor::host`](crate::Tensor::host), cached per tensor) a download, every
//! kernel and cuBLAS call a kernel launch, and every operation that had to run on
//! the CPU (a tensor of more than 8 unmergeable axes) a CPU fallback, also
//! reported by name through [`Backend::take_fallbacks`](crate::Backend::take_fallbacks).

pub mod kernels;

#[cfg(feature = "cuda")]
mod backend;
#[cfg(feature = "cuda")]
mod buffer;
#[cfg(feature = "cuda")]
mod elementwise;
#[cfg(feature = "cuda")]
mod engram;
#[cfg(feature = "cuda")]
mod fused;
#[cfg(feature = "cuda")]
mod gemm;
#[cfg(feature = "cuda")]
mod index;
#[cfg(feature = "cuda")]
mod layout;
#[cfg(feature = "cuda")]
mod nn;
#[cfg(feature = "cuda")]
mod optim;
#[cfg(feature = "cuda")]
mod reduce;

#[cfg(feature = "cuda")]
pub use backend::{preload_nvrtc, CudaBackend, NVRTC_LIB_VAR};

use std::fmt;
use std::sync::Arc;

use crate::backend::Backend;

/// Why a CUDA device cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CudaUnavailable {
    /// This build has no CUDA backend (cargo feature `cuda` off).
    NotBuilt,
    /// The CUDA driver library (`libcuda.so`) was not found.
    DriverNotFound,
    /// A CUDA library the backend needs (NVRTC or cuBLAS) was not found.
    LibraryNotFound(&'static str),
    /// The driver reports fewer devices than the ordinal asked for.
    NoDevice {
        /// The device number asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// The driver, a library or the kernel compiler failed while opening the device.
    Failed(String),
}

impl fmt::Display for CudaUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaUnavailable::NotBuilt => write!(
                f,
                "this build does not include the CUDA backend (build with `--features mlpl-devices/cuda`)"
            ),
            CudaUnavailable::DriverNotFound => write!(
                f,
                "the CUDA driver library (libcuda.so) was not found: no NVIDIA driver is installed"
            ),
            CudaUnavailable::LibraryNotFound(what) => write!(
                f,
                "the CUDA library {what} was not found (install the CUDA runtime libraries or add them to LD_LIBRARY_PATH)"
            ),
            CudaUnavailable::NoDevice { ordinal: _, count: 0 } => {
                write!(f, "the CUDA driver reports no GPU on this machine")
            }
            CudaUnavailable::NoDevice { ordinal, count } => write!(
                f,
                "there is no CUDA device {ordinal}: the driver reports {count} (cuda:0 to cuda:{})",
                count - 1
            ),
            CudaUnavailable::Failed(why) => write!(f, "the CUDA device could not be opened: {why}"),
        }
    }
}

/// The shared backend for CUDA device `ordinal`, opened on first use and kept for
/// the process (one set of counters per device); the same answer every time.
pub fn open(ordinal: usize) -> Result<Arc<dyn Backend>, CudaUnavailable> {
    #[cfg(feature = "cuda")]
    {
        backend::shared(ordinal)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ordinal;
        Err(CudaUnavailable::NotBuilt)
    }
}
