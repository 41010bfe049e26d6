//! `mlpl-lsp`, the MLPL language server (DESIGN §7): diagnostics, hovers with named
//! shapes and feasibility estimates, completion, signature help, navigation,
//! rename, symbols, folding, semantic tokens, inlay hints, code actions and code
//! lenses, over LSP on standard input and output. It parses, checks and estimates;
//! it never runs user code.
//!
//! Layout: [`document`] (ropes and versioned edits), [`lines`] (byte offsets ↔
//! UTF-16 positions), [`analysis`] (one analysis of one text: the runtime
//! checker's diagnostics and facts, `mlpl_lang::check`), [`values`] (how the
//! checker's values are shown), [`feasibility`] (estimates
//! per device), [`context`] (cursor context), [`features`] (hover, completion,
//! signature help), [`navigation`] (definition, references, rename, symbols,
//! folding, semantic tokens), [`actions`] (diagnostics, code actions, inlay hints,
//! code lenses), [`measured`] (what the runner measured of a loop, forwarded
//! by the client), [`server`] (the protocol handlers) and [`framing`] (the guard
//! in front of them: no frame a client sends can end the server).
//!
//! [`document`], [`server`] and [`framing`] are the `server` feature (on by
//! default); the other modules build without it, for WebAssembly too (the
//! browser playground's hovers and completion are these functions).

pub mod actions;
pub mod analysis;
pub mod context;
#[cfg(feature = "server")]
pub mod document;
pub mod feasibility;
pub mod features;
#[cfg(feature = "server")]
pub mod framing;
pub mod lines;
pub mod measured;
pub mod navigation;
#[cfg(feature = "server")]
pub mod server;
pub mod values;

#[cfg(feature = "server")]
pub use server::{run_stdio, Config, Server};
