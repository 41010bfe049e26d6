//! The static checker (DESIGN §4). This first layer reports what needs no shape
//! inference: undefined names, unknown functions and wrong argument counts, plus
//! the parser's own diagnostics. Shape and named-axis inference build on it.

pub mod abstract_value;
mod names;

use crate::diag::Diagnostic;
use crate::syntax::{parse, Program};

/// The result of checking a source text.
#[derive(Debug)]
pub struct Checked {
    /// The parsed program (with error nodes where parsing failed).
    pub program: Program,
    /// Parser and checker diagnostics, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses and checks `src`. A pure function of the text: no global state.
pub fn check_source(src: &str) -> Checked {
    let parsed = parse(src);
    let mut diagnostics = parsed.diagnostics;
    diagnostics.extend(names::check(&parsed.program));
    diagnostics.sort_by_key(|d| d.primary.as_ref().map_or(0, |l| l.span.start));
    Checked {
        program: parsed.program,
        diagnostics,
    }
}
