//! Helpers shared by the integration tests: run MLPL source in a fresh workspace.

#![allow(dead_code)]

use mlpl_diag::Diagnostic;
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::Value;
use mlpl_syntax::parse;

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

/// Runs `src` in `it` and returns its value; panics with the diagnostic when it
/// does not parse, fails or has no value.
pub fn run_value(it: &mut Interp, src: &str) -> Value {
    let p = parse(src);
    assert!(
        p.diagnostics.iter().all(|d| !d.is_error()),
        "{src}: {:?}",
        p.diagnostics
    );
    match it.run(&p.program) {
        Ok(Some(v)) => v,
        Ok(None) => panic!("{src}: no value"),
        Err(d) => panic!(
            "{src}: {} {} {:?} {:?}",
            d.code, d.message, d.primary, d.notes
        ),
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

/// Parses and runs `src` in a new workspace with the given data and experiment
/// directories.
pub fn run_with(
    src: &str,
    data_dir: Option<&std::path::Path>,
    exp_dir: Option<&std::path::Path>,
) -> Outcome {
    let mut s = Session::new(data_dir, exp_dir);
    s.run(src)
}

/// One workspace in which several programs (cells) run in turn.
pub struct Session {
    pub it: Interp,
}

impl Session {
    /// A fresh workspace with optional data and experiment directories.
    pub fn new(data_dir: Option<&std::path::Path>, exp_dir: Option<&std::path::Path>) -> Session {
        let mut ws = Workspace::new();
        ws.data_dir = data_dir.map(|p| p.to_path_buf());
        ws.exp_dir = exp_dir.map(|p| p.to_path_buf());
        Session {
            it: Interp::new(ws),
        }
    }

    /// Runs one program in this workspace.
    pub fn run(&mut self, src: &str) -> Outcome {
        let parsed = parse(src);
        if let Some(d) = parsed.diagnostics.iter().find(|d| d.is_error()) {
            return Outcome {
                result: Err(d.clone()),
                warnings: vec![],
            };
        }
        let result = self.it.run(&parsed.program);
        Outcome {
            result,
            warnings: self.it.take_warnings(),
        }
    }

    /// Runs `src` and returns the displayed value; panics on error.
    pub fn eval(&mut self, src: &str) -> String {
        display_of(src, self.run(src))
    }

    /// Runs `src`, expecting an error, and returns its code.
    pub fn error_code(&mut self, src: &str) -> &'static str {
        match self.run(src).result {
            Err(d) => d.code,
            Ok(v) => panic!("{src:?} should fail but gave {:?}", v.map(|v| v.display())),
        }
    }
}

impl Outcome {
    /// The displayed value; panics on error.
    pub fn shown(self) -> String {
        display_of("<program>", self)
    }

    /// The warning codes emitted.
    pub fn warning_codes(&self) -> Vec<&'static str> {
        self.warnings.iter().map(|w| w.code).collect()
    }
}

fn display_of(src: &str, o: Outcome) -> String {
    match o.result {
        Ok(Some(v)) => v.display(),
        Ok(None) => String::new(),
        Err(d) => panic!("{src:?} failed: {} {}", d.code, d.message),
    }
}

/// Runs `src`, expecting an error, and returns the whole diagnostic.
pub fn error_of(src: &str) -> Diagnostic {
    match run_in(src, None).result {
        Err(d) => d,
        Ok(v) => panic!("{src:?} should fail but gave {:?}", v.map(|v| v.display())),
    }
}

/// Parses one displayed number (`inf`, `-inf` and `NaN` included).
pub fn parse_number(s: &str) -> f64 {
    match s {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        _ => s
            .parse()
            .unwrap_or_else(|_| panic!("not a displayed number: {s:?}")),
    }
}

/// The numbers of the displayed value of `src`, in row-major order.
pub fn nums(src: &str) -> Vec<f64> {
    eval(src).split_whitespace().map(parse_number).collect()
}

/// The displayed numbers of `src` run in the session `s`.
pub fn nums_in(s: &mut Session, src: &str) -> Vec<f64> {
    s.eval(src).split_whitespace().map(parse_number).collect()
}

/// Asserts that `src` displays numbers within `tol·(1 + |expected|)` of `expected`.
pub fn assert_close(src: &str, expected: &[f64], tol: f64) {
    let got = nums(src);
    assert_eq!(got.len(), expected.len(), "{src:?}: got {got:?}");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let ok = (g.is_nan() && e.is_nan()) || g == e || (g - e).abs() <= tol * (1.0 + e.abs());
        assert!(
            ok,
            "{src:?}: element {i} is {g}, expected {e} (all: {got:?})"
        );
    }
}

/// Asserts that `src` displays exactly the float32 roundings of `expected`
/// (values computed in float64 and rounded once, LANGUAGE §7.1).
pub fn assert_f32(src: &str, expected: &[f64]) {
    let got = nums(src);
    assert_eq!(got.len(), expected.len(), "{src:?}: got {got:?}");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(
            (*g as f32).to_bits(),
            (*e as f32).to_bits(),
            "{src:?}: element {i} is {g}, expected {} (all: {got:?})",
            *e as f32
        );
    }
}

/// A fresh empty directory under the system temporary directory.
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "mlpl-test-{tag}-{}-{n}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
