//! Tensors, the [`Backend`] trait and device backends for MLPL Studio.
//!
//! A [`Tensor`] is a dense row-major f32 array whose [`Storage`] lives on one
//! device. A [`Backend`] implements the primitive kernels (matmul, broadcasting
//! element-wise ops, reductions, fused softmax / cross-entropy, norms, embedding
//! gather / scatter, Adam) for one device and counts what it does
//! ([`Counters`]). The runtime checks shapes before calling a kernel, so kernels
//! only report device failures ([`DeviceError`]).
//!
//! [`cpu()`] returns the shared process-wide [`CpuBackend`], the embedded default.

#![warn(missing_docs)]

#[macro_use]
mod declare;
mod attention;
mod backend;
pub mod capture;
pub mod clock;
mod counter_scope;
pub mod cpu;
pub mod cuda;
#[cfg(any(feature = "cuda", feature = "mlx"))]
mod device_stats;
pub mod engram;
mod fallback;
mod host_reads;
mod kernels;
pub mod math;
pub mod mlx;
pub mod profile;
mod shape;
mod tensor;
mod unfused;

pub use attention::{AttentionDims, AttentionSpec};
pub use backend::{
    AdamConstants, AdamStep, Backend, BinaryOp, Counters, DeviceError, DeviceKind, DropoutKey,
    ReduceOp, Result, UnaryOp, CAUSAL_FILL,
};
pub use counter_scope::{count_in_scopes, Count, CounterScope, ScopeCounts};
pub use cpu::{cpu, CpuBackend};
pub use cuda::CudaUnavailable;
pub use fallback::CpuFallback;
pub use kernels::PartialBackend;
pub use mlx::MlxUnavailable;
pub use shape::broadcast_shapes;
pub use tensor::{DeviceBuffer, DeviceData, Storage, Tensor, WeakTensor};
pub use unfused::Unfused;
