//! The MLPL language core: values, the builtin registry, the static checker, the
//! interpreter, autograd, the model DSL, optimizers, `train` loops, estimation and
//! the host-side data algorithms. It reads programs parsed by `mlpl_syntax` and
//! reports `mlpl_diag` diagnostics; it runs array work on `mlpl_devices`.
//!
//! Modules, lowest first (`docs/architecture.md` states each layer's invariants
//! and a test enforces the order): [`display`] formats numbers; [`data`] holds
//! host-side algorithms (random numbers, data sets, tokenizers, files,
//! experiments); [`estimate`] prices work on devices; [`autograd`] records and
//! differentiates tensor ops; [`value`] describes runtime values; [`nn`] is the
//! model DSL; [`builtins`] declares every builtin once (its shape rule and its
//! implementation); [`check`] analyses a program statically and [`eval`] runs
//! one: neither uses the other.

// Errors are `Diagnostic`s (spans, notes, help): they are built only on the cold
// path that ends a run, so their size is not worth boxing every `Result`.
#![allow(clippy::result_large_err)]

pub mod autograd;
pub mod builtins;
pub mod check;
pub mod data;
pub mod display;
pub mod errors;
pub mod estimate;
pub mod eval;
pub mod nn;
pub mod step_cost;
pub mod train_loops;
pub mod value;
