//! The MLX backend (cargo feature `mlx`): tensors resident as MLX arrays,
//! every kernel an MLX operation on lazy arrays (through `mlx-rs`), evaluated
//! only where a value must be read on the host or where a training step's state
//! is settled (once per optimizer call, all its parameter updates together), so
//! MLX fuses and schedules the work in between. A captured `train` step runs
//! as one graph compiled with MLX's `compile` transform ([`CompiledStep`]).
//! Dropout masks and Engram's hash run on MLX's 64-bit integers (`integer`).
//!
//! On Linux this is MLX's CPU backend (PyPI's `mlx-cpu`, see
//! `scripts/mlx-venv.sh` and `third_party/mlx-sys`), the vehicle for parity
//! tests; on Apple silicon the same code runs on Metal (feature `mlx-metal`).
//! The backend implements what it can ([`PartialBackend`](crate::PartialBackend));
//! every other kernel runs on the CPU through [`CpuFallback`](crate::CpuFallback),
//! counted (`cpu_fallbacks`) and named (W0503), never silently.
//!
//! Counters are exact: every host tensor copied into an MLX array is an upload
//! (a host tensor used again while alive is not copied again), every read of an
//! MLX tensor on the host a download (cached per tensor), every kernel call a
//! kernel launch (a node of MLX's graph, not a device kernel: MLX may fuse
//! several), and every forced evaluation of pending work an evaluation.

#[cfg(feature = "mlx")]
mod backend;
#[cfg(feature = "mlx")]
mod buffer;
#[cfg(feature = "mlx")]
mod integer;
#[cfg(feature = "mlx")]
mod kernels;
#[cfg(feature = "mlx")]
pub mod library;
#[cfg(feature = "mlx")]
mod step;

#[cfg(feature = "mlx")]
pub use backend::MlxBackend;
#[cfg(feature = "mlx")]
pub use step::CompiledStep;

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use crate::backend::Backend;

/// Whether this build includes the MLX backend (cargo feature `mlx`).
pub const BUILT: bool = cfg!(feature = "mlx");

thread_local! {
    /// How many step graphs MLX has traced (and compiled) on this thread: one
    /// per captured loop when MLX's cache works. (Per thread, so that tests
    /// running side by side do not count each other's graphs.)
    static TRACES: Cell<u64> = const { Cell::new(0) };
}

/// The captured steps' graphs traced so far on this thread (0 without the
/// MLX backend); a test checks that a captured loop traces its graph once,
/// however many steps it runs.
pub fn graphs_traced() -> u64 {
    TRACES.with(Cell::get)
}

/// Why the MLX device cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MlxUnavailable {
    /// This build has no MLX backend (cargo feature `mlx` off).
    NotBuilt,
    /// MLX's library could not be loaded: each place tried and what the
    /// dynamic loader said (see [`library`]).
    NotLoaded(Vec<String>),
    /// MLX loaded but failed to run a first operation.
    Failed(String),
}

impl fmt::Display for MlxUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MlxUnavailable::NotBuilt => write!(
                f,
                "this build does not include the MLX backend (build with `--features mlpl-devices/mlx`, see docs/devices.md)"
            ),
            MlxUnavailable::NotLoaded(tried) => write!(
                f,
                "MLX's library libmlx.so could not be loaded: {}; install it with `bash scripts/mlx-venv.sh` \
                 or set MLPL_MLX_LIB to the libmlx.so of mlx-cpu==0.32.2 (or its directory); see docs/devices.md",
                tried.join("; ")
            ),
            MlxUnavailable::Failed(why) => write!(f, "MLX could not be started: {why}"),
        }
    }
}

/// The shared MLX backend, opened on first use and kept for the process (one
/// set of counters); the same answer every time.
pub fn open() -> Result<Arc<dyn Backend>, MlxUnavailable> {
    #[cfg(feature = "mlx")]
    {
        backend::shared()
    }
    #[cfg(not(feature = "mlx"))]
    {
        Err(MlxUnavailable::NotBuilt)
    }
}
