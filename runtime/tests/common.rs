//! Helpers shared by the integration tests: run MLPL source in a fresh workspace.

#![allow(dead_code)]

use mlpl_runtime::diag::Diagnostic;
use mlpl_runtime::eval::{Interp, Workspace};
use mlpl_runtime::syntax::parse;
use mlpl_runtime::value::Value;

/// The outcome of running a program: its value (or error) and the warnings.
pub struct Outcome {
    pub result: Result<Option<Value>, Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

/// Parses and runs `src` in a new workspace whose data directory is `data_dir`.
pub fn run_in(src: &str, data_dir: Option<&std::path::Path>) -> Outcome {
    let parsed = parse(src);
    if let Some(d) = parsed.diagnostics.iter().find(|d| d.is_error()) {
        return Outcome {
            result: Err(d.clone()),
            warnings: vec![],
        };
    }
    let mut ws = Workspace::new();
    ws.data_dir = data_dir.map(|p| p.to_path_buf());
    let mut it = Interp::new(ws);
    let result = it.run(&parsed.program);
    Outcome {
        result,
        warnings: it.take_warnings(),
    }
}

/// Runs `src` and returns the displayed value; panics with the diagnostic on error.
pub fn eval(src: &str) -> String {
    match run_in(src, None).result {
        Ok(Some(v)) => v.display(),
        Ok(None) => String::new(),
        Err(d) => panic!("{src:?} failed: {} {}", d.code, d.message),
    }
}

/// Runs `src`, expecting an error, and returns its code.
pub fn error_code(src: &str) -> &'static str {
    match run_in(src, None).result {
        Err(d) => d.code,
        Ok(v) => panic!("{src:?} should fail but gave {:?}", v.map(|v| v.display())),
    }
}

/// The codes of the warnings `src` emits (it must succeed).
pub fn warning_codes(src: &str) -> Vec<&'static str> {
    let o = run_in(src, None);
    if let Err(d) = &o.result {
        panic!("{src:?} failed: {} {}", d.code, d.message);
    }
    o.warnings.iter().map(|w| w.code).collect()
}
