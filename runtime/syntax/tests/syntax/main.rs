//! Integration tests of `mlpl-syntax`: parser rules and properties.
//!
//! One test binary for the crate (each module was once its own binary): the
//! crate builds and links once for all of them.

mod catalog;
mod functions;
mod props;
mod rules;
