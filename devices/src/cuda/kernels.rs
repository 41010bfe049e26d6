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
    /// The kernels the backend loads from it.
    pub functions: &'static [&'static str],
}

impl KernelModule {
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
        functions: &[
            "unary_neg",
            "unary_exp",
            "unary_log",
            "unary_sqrt",
            "unary_abs",
            "unary_sigmoid",
            "unary_tanh",
            "unary_relu",
            "unary_gelu",
            "unary_silu",
            "binary_add",
            "binary_sub",
            "binary_mul",
            "binary_div",
            "binary_pow",
            "binary_gt",
            "binary_lt",
            "binary_eq",
            "binary_max",
            "binary_min",
            "copy_strided",
        ],
    },
    KernelModule {
        name: "reduce",
        source: include_str!("kernels/reduce.cu"),
        functions: &[
            "reduce_sum",
            "reduce_mean",
            "reduce_prod",
            "reduce_max",
            "argmax",
            "sum_to",
        ],
    },
    KernelModule {
        name: "softmax",
        source: include_str!("kernels/softmax.cu"),
        functions: &[
            "softmax_fwd",
            "log_softmax_fwd",
            "logsumexp_fwd",
            "softmax_bwd",
            "cross_entropy_fwd_bwd",
        ],
    },
    KernelModule {
        name: "fused",
        source: include_str!("kernels/fused.cu"),
        functions: &[
            "unary_bwd",
            "bias_act_fwd",
            "bias_act_bwd",
            "masked_softmax_fwd",
            "masked_softmax_bwd",
        ],
    },
    KernelModule {
        name: "index",
        source: include_str!("kernels/index.cu"),
        functions: &["gather_rows", "scatter_add_rows"],
    },
    KernelModule {
        name: "norm",
        source: include_str!("kernels/norm.cu"),
        functions: &[
            "rms_norm_fwd",
            "rms_norm_bwd",
            "layer_norm_fwd",
            "layer_norm_bwd",
        ],
    },
    KernelModule {
        name: "random",
        source: include_str!("kernels/random.cu"),
        functions: &["dropout_mask"],
    },
    KernelModule {
        name: "optim",
        source: include_str!("kernels/optim.cu"),
        functions: &["adam_update"],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed function is defined as an `extern "C" __global__` kernel of its
    /// module (directly or through the module's UNARY/BINARY macros), and names are unique.
    #[test]
    fn listed_functions_are_defined_once() {
        let mut seen = std::collections::HashSet::new();
        for m in MODULES {
            for f in m.functions {
                assert!(seen.insert(*f), "{f} listed twice");
                let direct = format!("void {f}(");
                let via_macro = format!("({f},");
                assert!(
                    m.source.contains(&direct) || m.source.contains(&via_macro),
                    "{f} is not defined in {}.cu",
                    m.name
                );
            }
        }
    }
}
