//! Vendored change 5 (CHANGES.md): MLX loaded at run time, off Apple platforms.
//!
//! The build links no MLX library into the final binary. Every mlx-c function
//! of the bindings is defined here by a generated entry point
//! (`OUT_DIR/lazy_stubs.rs`, written by `build.rs`) that jumps through a slot
//! of [`SLOTS`]. [`load`] opens `libmlx.so`, then the mlx-c library built with
//! this crate (`libmlxc.so`, embedded in the binary and opened from memory),
//! and points every slot at its function. Until then a slot points at
//! [`unloaded`], which aborts with a message: callers must call [`load`] first.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

include!(concat!(env!("OUT_DIR"), "/lazy_stubs.rs"));

/// The mlx-c library built with this crate (it needs `libmlx.so`).
static LIBMLXC: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmlxc.so"));

/// The directory `libmlx.so` was in when this crate was built (`MLX_LIB_DIR`).
pub const BUILD_LIB_DIR: &str = env!("MLX_SYS_BUILD_LIB_DIR");

/// Where an mlx-c function jumps before [`load`] succeeded.
unsafe extern "C" fn unloaded() {
    eprintln!("mlx-sys: an MLX function was called before mlx_sys::load() succeeded");
    std::process::abort();
}

/// Whether [`load`] has succeeded.
static LOADED: Mutex<bool> = Mutex::new(false);

/// Loads MLX: `libmlx` (a path to `libmlx.so`, or a bare file name the dynamic
/// loader looks up in its default places), then the embedded `libmlxc.so`,
/// whose functions every binding then calls. After a success later calls return
/// `Ok` at once, whatever `libmlx` they name. The error is the loader's message.
pub fn load(libmlx: &OsStr) -> Result<(), String> {
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if *loaded {
        return Ok(());
    }
    open(libmlx, libc::RTLD_NOW | libc::RTLD_GLOBAL)?;
    let mlxc = open_embedded()?;
    let mut slots = [None; NAMES.len()];
    for (slot, name) in slots.iter_mut().zip(NAMES) {
        let c = CString::new(name).expect("function names have no NUL");
        // SAFETY: `mlxc` is a live handle and `c` a NUL-terminated name.
        let f = unsafe { libc::dlsym(mlxc, c.as_ptr()) };
        if f.is_null() {
            return Err(format!("libmlxc.so has no function `{name}`"));
        }
        *slot = Some(f);
    }
    for (i, f) in slots.into_iter().enumerate() {
        // SAFETY: each slot is written once, before any entry point can jump
        // through it (no function has been called: `load` had not succeeded),
        // with the address of the mlx-c function of the same name.
        unsafe {
            let f: unsafe extern "C" fn() = std::mem::transmute(f.expect("filled above"));
            std::ptr::addr_of_mut!(SLOTS[i]).write(f);
        }
    }
    *loaded = true;
    Ok(())
}

/// `dlopen(path, flags)`, or the loader's message.
fn open(path: &OsStr, flags: libc::c_int) -> Result<*mut libc::c_void, String> {
    let c = CString::new(path.as_bytes()).map_err(|_| "the path holds a NUL byte".to_string())?;
    // SAFETY: `c` is a NUL-terminated path; dlerror is read on the same thread.
    unsafe {
        let handle = libc::dlopen(c.as_ptr(), flags);
        if handle.is_null() {
            let e = libc::dlerror();
            return Err(if e.is_null() {
                format!("{} could not be loaded", path.to_string_lossy())
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            });
        }
        Ok(handle)
    }
}

/// Opens the embedded `libmlxc.so` from an anonymous in-memory file (Linux),
/// else from a temporary file removed once opened.
fn open_embedded() -> Result<*mut libc::c_void, String> {
    use std::io::Write;
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a NUL-terminated name; the descriptor is owned by `file`.
        let fd = unsafe { libc::memfd_create(c"libmlxc.so".as_ptr(), libc::MFD_CLOEXEC) };
        if fd >= 0 {
            use std::os::fd::FromRawFd;
            // SAFETY: `fd` is a fresh descriptor nothing else owns.
            let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
            file.write_all(LIBMLXC)
                .map_err(|e| format!("writing libmlxc.so to memory: {e}"))?;
            let path = format!("/proc/self/fd/{fd}");
            return open(OsStr::new(&path), libc::RTLD_NOW | libc::RTLD_LOCAL);
        }
    }
    let path = std::env::temp_dir().join(format!("libmlxc-{}.so", std::process::id()));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(LIBMLXC))
        .map_err(|e| format!("writing libmlxc.so to {}: {e}", path.display()))?;
    let handle = open(path.as_os_str(), libc::RTLD_NOW | libc::RTLD_LOCAL);
    let _ = std::fs::remove_file(&path);
    handle
}
