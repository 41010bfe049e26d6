//! Host-side algorithms that need no tensors: the random number generators of
//! LANGUAGE §13, synthetic data sets, tokenizers, sandboxed files, preloaded
//! corpora, experiment records, sampling and embedding analysis.

pub mod analysis;
pub mod corpora;
pub mod datasets;
pub mod experiments;
pub mod files;
pub mod rng;
pub mod safetensors_file;
pub mod sampling;
pub mod svg;
pub mod tokenizer;
