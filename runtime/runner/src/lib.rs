//! Runs MLPL programs for people and editors: [`session`] runs cells in a
//! workspace and reports typed telemetry events (and saves and restores sessions);
//! [`serve`] streams them over HTTP (`mlpl serve`); the `mlpl` binary
//! (`src/bin/mlpl.rs`) is the command line; [`http`] is the HTTP client
//! `llm_call` posts through; [`timeline`] records `mlpl run --timeline`. The language itself is `mlpl_lang`.

// Errors are `Diagnostic`s (spans, notes, help): they are built only on the cold
// path that ends a run, so their size is not worth boxing every `Result`.
#![allow(clippy::result_large_err)]

pub mod http;
pub mod serve;
pub mod session;
pub mod timeline;
