extern crate cmake;

use cmake::Config;
#[cfg(feature = "metal")]
use std::process::Command;
use std::{
    env, fs,
    path::{Path, PathBuf},
};

#[path = "src/bindgen_config.rs"]
mod bindgen_config;

#[path = "src/native_link.rs"]
mod native_link;

#[cfg(feature = "metal")]
fn mlx_c_key(mlx_c_root: &Path) -> String {
    if mlx_c_root.join(".git").exists() {
        let output = Command::new("git")
            .arg("-C")
            .arg(mlx_c_root)
            .args(["rev-parse", "HEAD"])
            .output();
        if let Ok(output) = output {
            if output.status.success() {
                let commit = String::from_utf8_lossy(&output.stdout);
                let commit = commit.trim();
                if commit.len() >= 12 && commit.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                    return commit[..12].to_owned();
                }
            }
        }
    }

    let mut files = bindgen_config::discover_headers(mlx_c_root)
        .expect("Unable to discover mlx-c headers for the metallib key");
    files.push(mlx_c_root.join("CMakeLists.txt"));
    files.sort();

    let mut hash = 0xcbf29ce484222325_u64;
    for file in files {
        let relative = file.strip_prefix(mlx_c_root).unwrap_or(&file);
        for byte in relative.to_string_lossy().bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x100000001b3);
        }
        for byte in fs::read(&file).expect("Unable to hash mlx-c source for the metallib key") {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x100000001b3);
        }
    }
    format!("{hash:016x}")[..12].to_owned()
}

#[cfg(feature = "metal")]
fn metallib_dir(mlx_c_root: &Path) -> PathBuf {
    if let Some(path) = env::var_os("MLX_RS_METAL_PATH") {
        return PathBuf::from(path);
    }

    let home =
        env::var_os("HOME").expect("HOME must be set when MLX_RS_METAL_PATH is not provided");
    // A JIT metallib holds only a few kernels; sharing the directory would break
    // non-JIT builds of the same mlx-c.
    let key = if cfg!(feature = "metal-jit") {
        format!("{}-jit", mlx_c_key(mlx_c_root))
    } else {
        mlx_c_key(mlx_c_root)
    };
    PathBuf::from(home).join(".mlx").join("lib").join(key)
}

fn build_and_link_mlx_c() {
    let mlx_c_root = Path::new("src/mlx-c");
    let mut config = Config::new(mlx_c_root);
    config.very_verbose(true);
    config.define("CMAKE_INSTALL_PREFIX", ".");

    // Use Xcode's clang to ensure compatibility with the macOS SDK
    config.define("CMAKE_C_COMPILER", "/usr/bin/cc");
    config.define("CMAKE_CXX_COMPILER", "/usr/bin/c++");

    #[cfg(debug_assertions)]
    {
        config.define("CMAKE_BUILD_TYPE", "Debug");
    }

    #[cfg(not(debug_assertions))]
    {
        config.define("CMAKE_BUILD_TYPE", "Release");
    }

    config.define("MLX_BUILD_METAL", "OFF");
    config.define("MLX_BUILD_ACCELERATE", "OFF");

    #[cfg(feature = "metal")]
    {
        config.define("MLX_BUILD_METAL", "ON");
        #[cfg(feature = "metal-jit")]
        config.define("MLX_METAL_JIT", "ON");
        let metallib_dir = metallib_dir(mlx_c_root);
        fs::create_dir_all(&metallib_dir).expect("Unable to create the MLX metallib directory");
        config.define("MLX_METAL_PATH", &metallib_dir);
    }

    #[cfg(feature = "accelerate")]
    {
        config.define("MLX_BUILD_ACCELERATE", "ON");
    }

    // build the mlx-c project
    let dst = config.build();

    publish_native_sources(&dst, mlx_c_root);

    println!("cargo:rustc-link-search=native={}/build/lib", dst.display());
    // mlx's GGUF io depends on the vendored gguflib archive, which cmake leaves
    // in the mlx build tree instead of installing next to libmlx.
    println!(
        "cargo:rustc-link-search=native={}/build/_deps/mlx-build/mlx/io",
        dst.display()
    );
    for library in native_link::libraries(&dst.join("build")) {
        if library == "jaccl" {
            println!(
                "cargo:rustc-link-search=native={}/build/jaccl",
                dst.display()
            );
        }
        println!("cargo:rustc-link-lib=static={library}");
    }

    println!("cargo:rustc-link-lib=c++");
    println!("cargo:rustc-link-lib=dylib=objc");
    println!("cargo:rustc-link-lib=framework=Foundation");

    #[cfg(feature = "metal")]
    {
        println!("cargo:rustc-link-lib=framework=Metal");
        let metallib = metallib_dir(mlx_c_root).join("mlx.metallib");
        if !metallib.exists() {
            println!(
                "cargo:warning=mlx.metallib was not created at {}; Metal operations may fail at runtime",
                metallib.display()
            );
        }
    }

    #[cfg(feature = "accelerate")]
    {
        println!("cargo:rustc-link-lib=framework=Accelerate");
    }

    // Link against Xcode's clang runtime for ___isPlatformVersionAtLeast symbol
    // This is needed on macOS 26+ where the bundled LLVM runtime may be outdated
    // See: https://github.com/conda-forge/llvmdev-feedstock/issues/244
    if let Some(clang_rt_path) = native_link::find_clang_rt_path() {
        println!("cargo:rustc-link-search={}", clang_rt_path);
        println!("cargo:rustc-link-lib=static=clang_rt.osx");
    }
}

/// Dependents read this metadata as `DEP_MLX_*`; the README documents the contract.
fn publish_native_sources(dst: &Path, mlx_c_root: &Path) {
    let deps = dst.join("build").join("_deps");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let include = [
        Some(deps.join("mlx-src")),
        cfg!(feature = "metal").then(|| deps.join("metal_cpp-src")),
        Some(manifest.join(mlx_c_root)),
    ];
    let include = env::join_paths(include.into_iter().flatten())
        .expect("MLX include directories must not contain the path-list separator");
    println!("cargo::metadata=include={}", include.display());
    println!("cargo::metadata=defines=MLX_STATIC");
    let version = fs::read_to_string(mlx_c_root.join("CMakeLists.txt"))
        .ok()
        .and_then(|cmake| {
            cmake.lines().find_map(|line| {
                let tag = line.trim().strip_prefix("GIT_TAG v")?;
                tag.split(|c: char| c == ')' || c.is_whitespace())
                    .next()
                    .map(str::to_owned)
            })
        });
    if let Some(version) = version {
        println!("cargo::metadata=version={version}");
    }
}

/// Whether the target is an Apple platform (the upstream build, MLX fetched and
/// built with Metal/Accelerate) or not (Linux: an installed MLX, see
/// `build_and_link_mlx_c_system`).
fn target_is_apple() -> bool {
    matches!(
        env::var("CARGO_CFG_TARGET_VENDOR").as_deref(),
        Ok("apple")
    )
}

/// Linux (vendored change 1, CHANGES.md): mlx-c is configured against an installed
/// MLX (`MLX_C_USE_SYSTEM_MLX=ON`, `find_package(MLX)` in `$MLX_DIR`, e.g. PyPI's
/// `mlx-cpu` wheel) instead of fetching MLX from GitHub at configure time.
/// Vendored change 5: nothing of MLX is linked into the final binary. mlx-c (and
/// the float16 accessors of change 3) become one shared library, `libmlxc.so`,
/// linked against `libmlx.so`; the crate embeds it and opens it at run time
/// (`src/lazy.rs`). Returns the MLX lib directory (the default place to look
/// for `libmlx.so` at run time).
fn build_mlx_c_shared() -> PathBuf {
    println!("cargo:rerun-if-env-changed=MLX_DIR");
    println!("cargo:rerun-if-env-changed=MLX_LIB_DIR");
    let mlx_dir = env::var_os("MLX_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "mlx-sys: set MLX_DIR to an installed MLX's CMake package directory \
             (.../mlx/share/cmake/MLX, e.g. from PyPI's mlx-cpu==0.32.2); \
             scripts/mlx-venv.sh installs one and prints it"
        )
    });
    let mlx_root = mlx_dir.join("../../..");
    let lib_dir = env::var_os("MLX_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| mlx_root.join("lib"));
    let lib_dir = fs::canonicalize(&lib_dir)
        .unwrap_or_else(|e| panic!("mlx-sys: MLX lib dir {}: {e}", lib_dir.display()));
    let include_dir = fs::canonicalize(mlx_root.join("include"))
        .unwrap_or_else(|e| panic!("mlx-sys: MLX include dir under {}: {e}", mlx_dir.display()));

    let mlx_c_root = Path::new("src/mlx-c");
    let mut config = Config::new(mlx_c_root);
    config.define("CMAKE_INSTALL_PREFIX", ".");
    config.define("MLX_C_USE_SYSTEM_MLX", "ON");
    config.define("MLX_DIR", &mlx_dir);
    config.define("MLX_C_BUILD_EXAMPLES", "OFF");
    config.define("CMAKE_BUILD_TYPE", "Release");
    config.profile("Release");
    let dst = config.build();

    // Vendored change 3: the float16/bfloat16 accessors mlx-c declares only on ARM.
    let half = cc::Build::new()
        .cpp(true)
        .std("c++20")
        .pic(true)
        .file("src/half_accessors.cpp")
        .include(mlx_c_root)
        .include(&include_dir)
        .warnings(false)
        .cargo_metadata(false)
        .compile_intermediates();
    println!("cargo:rerun-if-changed=src/half_accessors.cpp");

    // Vendored change 5: `libmlxc.so` = mlx-c's (position-independent) archive
    // and the accessors, needing `libmlx.so` and libstdc++. `-Bsymbolic` binds
    // mlx-c's calls of its own functions inside the library; `-z defs` makes a
    // symbol MLX lacks a build error rather than a load error.
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let shared = out.join("libmlxc.so");
    let archive = [dst.join("lib/libmlxc.a"), dst.join("build/libmlxc.a")]
        .into_iter()
        .find(|a| a.is_file())
        .expect("mlx-sys: mlx-c's build left no libmlxc.a");
    let cxx = cc::Build::new().cpp(true).get_compiler();
    let status = cxx
        .to_command()
        .arg("-shared")
        .arg("-o")
        .arg(&shared)
        .arg("-Wl,-soname,libmlxc.so")
        .arg("-Wl,-Bsymbolic")
        .arg("-Wl,-z,defs")
        .arg("-Wl,--whole-archive")
        .arg(&archive)
        .args(&half)
        .arg("-Wl,--no-whole-archive")
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-lmlx")
        .arg("-lstdc++")
        .status()
        .expect("mlx-sys: running the C++ compiler to link libmlxc.so");
    assert!(status.success(), "mlx-sys: linking libmlxc.so failed ({status})");

    println!("cargo::metadata=lib_dir={}", lib_dir.display());
    println!("cargo::metadata=include={}", env::join_paths([include_dir, fs::canonicalize(mlx_c_root).unwrap()]).unwrap().display());
    println!("cargo::metadata=version=0.32.2");
    lib_dir
}

/// Vendored change 5: `OUT_DIR/lazy_stubs.rs`, the entry point of every mlx-c
/// function the bindings declare (`mlx_*` and the private `_mlx_*`; the float16
/// accessors of change 3 too, off ARM): a jump through a slot of a table that `lazy::load` fills
/// from the loaded `libmlxc.so`. `names` are the functions, in slot order.
fn write_stubs(bindings: &str, out: &Path) {
    let mut names: Vec<&str> = bindings
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub fn "))
        .filter_map(|l| l.split('(').next())
        .filter(|n| n.starts_with("mlx_") || n.starts_with("_mlx_"))
        .collect();
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("aarch64") {
        names.extend([
            "mlx_array_item_float16",
            "mlx_array_item_bfloat16",
            "mlx_array_data_float16",
            "mlx_array_data_bfloat16",
        ]);
    }
    names.sort_unstable();
    names.dedup();
    // A data symbol cannot be reached through a jump: every one the bindings
    // declare must be known not to exist in the library. `mlx_array_empty` is
    // `static` in array.h (each C file has its own; nothing is exported).
    for l in bindings.lines() {
        if let Some(name) = l.trim().strip_prefix("pub static mut ") {
            let name = name.split(':').next().unwrap_or(name);
            assert!(
                !name.trim_start_matches('_').starts_with("mlx_") || name == "mlx_array_empty",
                "mlx-sys: the bindings declare the data symbol `{name}`, which lazy loading \
                 cannot redirect (see CHANGES.md, change 5)"
            );
        }
    }
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let jump = |slot: usize| match arch.as_str() {
        "x86_64" => format!("\"jmp *{{slots}}+{}(%rip)\",", slot * 8),
        "aarch64" => format!(
            "\"adrp x16, {{slots}}+{o}\", \"ldr x16, [x16, :lo12:{{slots}}+{o}]\", \"br x16\",",
            o = slot * 8
        ),
        other => panic!("mlx-sys: lazy loading has trampolines for x86_64 and aarch64, not {other}"),
    };
    let mut s = String::new();
    s.push_str("// Generated by build.rs (vendored change 5, CHANGES.md).\n");
    s.push_str(&format!("/// The mlx-c functions, in slot order.\npub(crate) static NAMES: [&str; {}] = [\n", names.len()));
    for n in &names {
        s.push_str(&format!("    \"{n}\",\n"));
    }
    s.push_str("];\n");
    s.push_str(&format!(
        "/// Where each function's entry point jumps: [`unloaded`] until `load` succeeds.\n\
         pub(crate) static mut SLOTS: [unsafe extern \"C\" fn(); {}] = [unloaded as unsafe extern \"C\" fn(); {}];\n",
        names.len(),
        names.len()
    ));
    s.push_str("core::arch::global_asm!(\n    \".pushsection .text.mlx_sys_stubs,\\\"ax\\\",%progbits\",\n");
    for (i, n) in names.iter().enumerate() {
        s.push_str(&format!(
            "    \".globl {n}\", \".hidden {n}\", \".type {n},%function\", \".p2align 4\", \"{n}:\", {} \".size {n}, .-{n}\",\n",
            jump(i)
        ));
    }
    s.push_str("    \".popsection\",\n    slots = sym SLOTS,\n");
    if arch == "x86_64" {
        s.push_str("    options(att_syntax)\n");
    }
    s.push_str(");\n");
    fs::write(out.join("lazy_stubs.rs"), s).expect("mlx-sys: writing lazy_stubs.rs");
}

fn main() {
    println!("cargo:rerun-if-env-changed=MLX_RS_METAL_PATH");
    println!("cargo:rerun-if-changed=native-libraries.txt");
    println!("cargo:rerun-if-changed=src/native_link.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let lazy = if target_is_apple() {
        build_and_link_mlx_c();
        false
    } else {
        let lib_dir = build_mlx_c_shared();
        println!("cargo:rustc-env=MLX_SYS_BUILD_LIB_DIR={}", lib_dir.display());
        true
    };

    let mlx_c_root = PathBuf::from("src/mlx-c");
    let headers =
        bindgen_config::discover_headers(&mlx_c_root).expect("Unable to discover headers");
    for header in &headers {
        let relative =
            bindgen_config::relative_header(&mlx_c_root, header).expect("Unable to record header");
        println!(
            "cargo:rerun-if-changed={}",
            mlx_c_root.join(relative).display()
        );
    }
    let bindings = bindgen_config::builder(&mlx_c_root, &headers)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("Unable to generate bindings");

    // Write the bindings to the $OUT_DIR/bindings.rs file.
    let out_path = PathBuf::from(env::var("OUT_DIR").unwrap());
    bindings
        .write_to_file(out_path.join("bindings.rs"))
        .expect("Couldn't write bindings!");
    if lazy {
        write_stubs(&bindings.to_string(), &out_path);
    }
}
