//! Integration tests of `mlpl-lang`: builtins, the checker, the interpreter, models, training.
//!
//! One test binary for the crate (each module was once its own binary): the
//! crate builds and links once for all of them.

mod builtins_analysis;
mod builtins_axes;
mod builtins_construct;
mod builtins_dataprep;
mod builtins_devices;
mod builtins_elementwise;
mod builtins_experiments;
mod builtins_feasibility;
mod builtins_files;
mod builtins_linalg;
mod builtins_llm;
mod builtins_ml;
mod builtins_random;
mod builtins_reduce;
mod builtins_sampling;
mod builtins_select;
mod builtins_tokenizers;
mod builtins_viz;
mod check_agreement;
mod check_corpus;
mod check_props;
mod check_rules;
mod check_support;
mod common;
mod conformance;
mod cuda_training;
mod device_training;
mod estimates;
mod finite_differences;
mod functions;
mod fused_layers;
mod fuzz;
mod gradients;
mod interp_props;
mod language_semantics;
mod layering;
mod limits;
mod mlx_training;
mod models_engram;
mod models_errors;
mod models_gradients;
mod models_hf_families;
mod models_hf_layers;
mod models_layers;
mod models_surgery;
mod moe_routed;
mod optimizers;
mod registry;
mod trace;
mod train_capture;
