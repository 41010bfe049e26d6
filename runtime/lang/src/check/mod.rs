//! The static checker (DESIGN §4): everything that can be proven about a program
//! without running it.
//!
//! Two passes over the parsed program, both pure functions of the text:
//!
//! - [`names`]: undefined names, unknown functions, wrong argument counts and
//!   variables shadowing builtins (E0101, E0102, E0103, W0105);
//! - an abstract interpretation ([`expr`], [`stmt`], [`loss`]) that evaluates the
//!   program over [`abstract_value`]s: kinds, ranks, per-axis sizes (known,
//!   symbolic or unknown) and names, small constants, placements. Each builtin's
//!   result comes from its shape rule in the registry ([`ctx`] is the interface);
//!   operators use [`broadcast`]. Loop bodies are analysed for their first
//!   iterations, then to a fixed point.
//!
//! Only what is proven is reported: an unknown size, name or kind never produces
//! a diagnostic, and diagnostics carry the same wording as the interpreter's.

pub mod abstract_value;
pub mod broadcast;
pub mod ctx;
pub mod dims;
pub mod env;
pub mod expr;
pub mod functions;
pub mod loss;
pub mod models;
mod names;
pub mod query;
pub mod stmt;

pub use abstract_value::{AbsArray, AbsValue, AxisName, Dim};
pub use expr::{AssignedValue, Checker};

use mlpl_diag::Diagnostic;
use mlpl_syntax::{parse, Program};

/// The top-level function definitions of `program` by name (a later one of the
/// same name wins).
pub fn functions_of(program: &Program) -> env::FxHashMap<String, &mlpl_syntax::FnDef> {
    program
        .stmts
        .iter()
        .filter_map(mlpl_syntax::walk::fn_def)
        .map(|f| (f.name.name.clone(), f))
        .collect()
}

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
    let mut checker = Checker::new();
    checker.program(&parsed.program, |_, _, _| {});
    diagnostics.extend(checker.out);
    diagnostics.sort_by_key(|d| d.primary.as_ref().map_or(0, |l| l.span.start));
    Checked {
        program: parsed.program,
        diagnostics,
    }
}

/// What the checker knows about the variable of each top-level assignment of
/// `program`, right after that statement (for hovers, inlay hints and the
/// static/dynamic agreement test).
pub fn assignment_values(program: &Program) -> Vec<AssignedValue> {
    Checker::new().assignments(program)
}

/// What the checker knows about every bound variable after each top-level
/// statement of `program` (sorted by name), for the agreement test and the
/// editor's variables view.
pub fn bindings_after_statements(program: &Program) -> Vec<Vec<(String, AbsValue)>> {
    let mut out = Vec::new();
    Checker::new().program(program, |_, _, env| {
        let mut names: Vec<&str> = env.names().collect();
        names.sort_unstable();
        out.push(
            names
                .into_iter()
                .filter_map(|n| Some((n.to_string(), env.get(n)?.value.clone())))
                .collect(),
        );
    });
    out
}
