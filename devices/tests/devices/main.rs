//! Integration tests of `mlpl-devices`: kernels, captured step programs, fused
//! layers, device storage, the CUDA backend (which skips without a GPU) and
//! the MLX backend (which skips when the build does not include it).
//!
//! One test binary for the crate (the allocation-counting test, which installs its
//! own global allocator, is the other).

mod attention;
mod capture;
mod cpu_program;
mod cpu_program_support;
mod cuda_fused_parity;
mod cuda_kernels_compile;
mod cuda_parity;
mod device_storage;
mod fused_capture;
mod fused_kernels;
mod fused_support;
mod mlx_parity;
mod parity;
mod subnormals;
