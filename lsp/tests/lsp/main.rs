//! Integration tests of `mlpl-lsp`: the protocol over stdio as a client drives it,
//! robustness against any input, every example, and a real Neovim client.
//!
//! One test binary for the crate.

mod common;
mod examples;
mod frames;
mod functions;
mod grammar;
mod nvim;
mod protocol;
mod robustness;
