#![allow(non_upper_case_globals)]
#![allow(non_camel_case_types)]
#![allow(non_snake_case)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

// Vendored change 5 (CHANGES.md): off Apple platforms MLX is loaded at run time;
// `load` must succeed before any other function of this crate is called. On
// Apple platforms MLX is linked statically (upstream's build) and `load` does
// nothing.
#[cfg(not(target_vendor = "apple"))]
mod lazy;
#[cfg(not(target_vendor = "apple"))]
pub use lazy::{load, BUILD_LIB_DIR};

/// MLX is linked into the binary on Apple platforms: nothing to load.
#[cfg(target_vendor = "apple")]
pub fn load(_libmlx: &std::ffi::OsStr) -> Result<(), String> {
    Ok(())
}

/// No library directory is searched on Apple platforms (MLX is linked in).
#[cfg(target_vendor = "apple")]
pub const BUILD_LIB_DIR: &str = "";

// Vendored change 3 (CHANGES.md): mlx-c declares the float16/bfloat16 types and
// accessors only on ARM, where bindgen generates them; elsewhere they are
// declared here with the shapes mlx-rs expects, and defined in
// `src/half_accessors.cpp` over MLX's own 16-bit types.
#[cfg(not(target_arch = "aarch64"))]
mod half_off_arm {
    use super::mlx_array;

    /// An IEEE half-precision value, as its bits.
    #[repr(transparent)]
    #[derive(Debug, Default, Copy, Clone, PartialEq, Eq, Hash)]
    pub struct float16_t(pub u16);

    /// A bfloat16 value, as its bits.
    pub type bfloat16_t = u16;

    extern "C" {
        pub fn mlx_array_item_float16(res: *mut float16_t, arr: mlx_array) -> ::std::os::raw::c_int;
        pub fn mlx_array_item_bfloat16(res: *mut bfloat16_t, arr: mlx_array) -> ::std::os::raw::c_int;
        pub fn mlx_array_data_float16(arr: mlx_array) -> *const float16_t;
        pub fn mlx_array_data_bfloat16(arr: mlx_array) -> *const bfloat16_t;
    }
}
#[cfg(not(target_arch = "aarch64"))]
pub use half_off_arm::*;
