//! Records MLX's library directory as the `mlpl` binary's rpath (and
//! `mlpl-lsp`'s, whose package uses this same script) when it is built with the
//! MLX backend on Linux (`--features mlpl-devices/mlx`, docs/devices.md), from
//! the same `MLX_DIR` / `MLX_LIB_DIR` as the vendored mlx-sys. MLX is opened at
//! run time (the binary does not link `libmlx.so`), and the loader in
//! `mlpl-devices` already tries that build-time folder after `MLPL_MLX_LIB`; the
//! rpath is a further fallback for the dynamic loader's own search. (An rpath
//! printed by a dependency's build script does not reach the final binary, so it
//! is set here.) Without those variables it does nothing.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=MLX_DIR");
    println!("cargo:rerun-if-env-changed=MLX_LIB_DIR");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let lib = match (std::env::var_os("MLX_LIB_DIR"), std::env::var_os("MLX_DIR")) {
        (Some(lib), _) => PathBuf::from(lib),
        (None, Some(cmake)) => PathBuf::from(cmake).join("../../../lib"),
        (None, None) => return,
    };
    if let Ok(lib) = lib.canonicalize() {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{}", lib.display());
    }
}
