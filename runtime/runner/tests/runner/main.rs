//! Integration tests of `mlpl-runner`: the `mlpl` binary, its examples and snapshots, `mlpl serve`.
//!
//! One test binary for the crate (each module was once its own binary): the
//! crate builds and links once for all of them.

mod cli;
mod cli_calibrate;
mod cli_events;
mod cli_trace;
mod examples;
mod llm_call;
mod mlx_unloadable;
mod refine;
mod serve_api;
mod serve_limits;
mod serve_persist;
mod serve_runs;
mod serve_support;
