//! The CUDA C sources of the backend's kernels, one module per op family, and the
//! names of the functions each defines. NVRTC compiles every module to PTX when
//! the backend starts; the kernel compile test compiles them on machines without
//! a GPU.

/// Declarations shared by every module (the `Layout` struct, block reductions),
/// prepended to each source.
pub const COMMON: &str = include_str!("kernels/common.cuh");

/// One compilable unit: a `.cu` file and the `extern "C"` kernels it defines.
#[derive(Clone, Copy, Debug)]
pub struct KernelModule {
    /// The module's name (its file name without `.cu`).
    pub name: &'static str,
    /// The CUDA C source, without [`COMMON`].
    pub source: &'static str,
}

impl KernelModule {
    /// The kernels the backend loads from this module, read from its source: each
    /// `extern "C" __global__ void NAME(` outside a macro, and each use
    /// `MACRO(NAME, ...)` of a macro whose body defines such a kernel. A new
    /// kernel in a `.cu` file is therefore loaded without being listed anywhere.
    pub fn functions(&self) -> Vec<&'static str> {
        const KERNEL: &str = "extern \"C\" __global__ void ";
        let src: &'static str = self.source;
        let mut macros: Vec<&str> = Vec::new();
        let mut names = Vec::new();
        let mut in_define: Option<(&str, bool)> = None;
        for line in src.lines() {
            let t = line.trim_start();
            if let Some((name, kernel)) = in_define.as_mut() {
                *kernel |= t.contains(KERNEL);
                if !line.trim_end().ends_with('\\') {
                    if *kernel {
                        macros.push(name);
                    }
                    in_define = None;
                }
                continue;
            }
            if let Some(rest) = t.strip_prefix("#define ") {
                let name = rest.split(['(', ' ']).next().unwrap_or("");
                in_define = line
                    .trim_end()
                    .ends_with('\\')
                    .then_some((name, t.contains(KERNEL)));
                continue;
            }
            if let Some(rest) = t.strip_prefix(KERNEL) {
                names.extend(rest.split('(').next());
            } else if let Some((m, args)) = t.split_once('(') {
                if macros.contains(&m) {
                    names.extend(args.split(',').next().map(str::trim));
                }
            }
        }
        names
    }

    /// The full source NVRTC compiles: [`COMMON`] followed by this module.
    pub fn full_source(&self) -> String {
        format!("{COMMON}\n{}", self.source)
    }
}

#[cfg(feature = "cuda")]
impl KernelModule {
    /// Compiles this module to PTX for the virtual architecture `arch` (e.g.
    /// `"compute_90"`) with NVRTC; the error is NVRTC's log.
    pub fn compile(&self, arch: &'static str) -> Result<cudarc::nvrtc::Ptx, String> {
        use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
        let opts = CompileOptions {
            arch: Some(arch),
            name: Some(format!("{}.cu", self.name)),
            ..Default::default()
        };
        compile_ptx_with_opts(self.full_source(), opts).map_err(|e| match e {
            CompileError::CompileError { log, .. } => log.to_string_lossy().trim().to_string(),
            other => other.to_string(),
        })
    }
}

/// Every kernel module of the backend.
pub const MODULES: &[KernelModule] = &[
    KernelModule {
        name: "elementwise",
        source: include_str!("kernels/elementwise.cu"),
    },
    KernelModule {
        name: "reduce",
        source: include_str!("kernels/reduce.cu"),
    },
    KernelModule {
        name: "softmax",
        source: include_str!("kernels/softmax.cu"),
    },
    KernelModule {
        name: "fused",
        source: include_str!("kernels/fused.cu"),
    },
    KernelModule {
        name: "index",
        source: include_str!("kernels/index.cu"),
    },
    KernelModule {
        name: "engram",
        source: include_str!("kernels/engram.cu"),
    },
    KernelModule {
        name: "norm",
        source: include_str!("kernels/norm.cu"),
    },
    KernelModule {
        name: "random",
        source: include_str!("kernels/random.cu"),
    },
    KernelModule {
        name: "optim",
        source: include_str!("kernels/optim.cu"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `__global__` kernel of a module is found (once per macro use for
    /// the kernel macros), names are unique across modules, and each is a
    /// C identifier.
    #[test]
    fn every_kernel_of_the_sources_is_found_once() {
        let mut seen = std::collections::HashSet::new();
        for m in MODULES {
            let found = m.functions();
            let direct = m.source.matches("extern \"C\" __global__").count();
            let via_macro: usize = ["UNARY(", "BINARY("]
                .iter()
                .map(|p| m.source.lines().filter(|l| l.starts_with(p)).count())
                .sum();
            let macro_bodies = m
                .source
                .lines()
                .filter(|l| l.trim_start().starts_with("extern") && l.ends_with('\\'))
                .count();
            assert_eq!(
                found.len(),
                direct - macro_bodies + via_macro,
                "{}: {found:?}",
                m.name
            );
            for f in found {
                assert!(seen.insert(f), "{f} defined twice");
                assert!(
                    f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !f.is_empty(),
                    "{f:?}"
                );
            }
        }
        for f in [
            "unary_silu",
            "binary_min",
            "copy_strided",
            "logsumexp_fwd",
            "adam_update",
        ] {
            assert!(seen.contains(f), "{f} not found");
        }
    }
}
