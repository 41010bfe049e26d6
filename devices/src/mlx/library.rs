//! Finding and loading MLX's library at run time (Linux; on macOS MLX is
//! linked into the binary and there is nothing to load).
//!
//! A binary built with the `mlx` feature links no MLX library: it starts
//! without one, and the first use of MLX loads `libmlx.so` (and the mlx-c
//! library the build embedded, `mlx_sys::load`). Where it looks, in order:
//!
//! 1. `$MLPL_MLX_LIB`, when set: that file, or `libmlx.so` in that directory,
//!    and nowhere else (an explicit choice is never replaced by another
//!    library);
//! 2. the directory `libmlx.so` was in when the binary was built
//!    (`.venv-mlx`, from `scripts/mlx-venv.sh`);
//! 3. the dynamic loader's default places (`LD_LIBRARY_PATH`, the system's).
//!
//! When none loads, MLX is unavailable ([`MlxUnavailable::NotLoaded`]) and
//! `device("mlx")` runs on the CPU with W0501 naming every place tried.

use std::ffi::OsString;
use std::path::PathBuf;

use super::MlxUnavailable;

/// The environment variable naming `libmlx.so` (or its directory).
pub const ENV: &str = "MLPL_MLX_LIB";

/// The library's file name.
const FILE: &str = "libmlx.so";

/// Loads MLX from the first place of the search order that works, or says
/// what each place gave.
pub(super) fn load() -> Result<(), MlxUnavailable> {
    let mut tried = Vec::new();
    for (place, path) in places() {
        match mlx_sys::load(&path) {
            Ok(()) => return Ok(()),
            Err(why) => tried.push(format!("{place} ({}): {why}", path.to_string_lossy())),
        }
    }
    Err(MlxUnavailable::NotLoaded(tried))
}

/// The places to try, in order, each with its description.
fn places() -> Vec<(&'static str, OsString)> {
    if let Some(chosen) = std::env::var_os(ENV) {
        let path = PathBuf::from(&chosen);
        let file = if path.is_dir() { path.join(FILE) } else { path };
        return vec![("$MLPL_MLX_LIB", file.into_os_string())];
    }
    let mut places = Vec::new();
    if !mlx_sys::BUILD_LIB_DIR.is_empty() {
        let built = PathBuf::from(mlx_sys::BUILD_LIB_DIR).join(FILE);
        places.push(("the build's MLX directory", built.into_os_string()));
    }
    places.push(("the loader's default path", OsString::from(FILE)));
    places
}
