//! The MLPL language runtime: syntax, the builtin registry, the static checker,
//! the interpreter, data sources and the diagnostics they all report.
//!
//! Layers, lowest first: [`syntax`] and [`diag`] know nothing else; [`value`] and
//! [`display`] describe runtime values; [`data`] holds host-side algorithms (random
//! numbers, data sets, tokenizers, files, experiments); [`builtins`] declares every
//! builtin once; [`eval`] interprets an AST; [`nn`] is the model DSL that model
//! builtins build and apply; [`check`] analyses one statically; [`session`] runs
//! cells in a workspace and reports typed events, which [`serve`] streams over
//! HTTP.

// Errors are `Diagnostic`s (spans, notes, help): they are built only on the cold
// path that ends a run, so their size is not worth boxing every `Result`.
#![allow(clippy::result_large_err)]

pub mod autograd;
pub mod builtins;
pub mod check;
pub mod data;
pub mod diag;
pub mod display;
pub mod estimate;
pub mod eval;
pub mod nn;
pub mod serve;
pub mod session;
pub mod syntax;
pub mod value;
