//! Diagnostics: the one error/warning type shared by the parser, the checker and the
//! interpreter, with stable codes (LANGUAGE §20), labelled spans, notes and help.
//!
//! [`render`] prints them rustc-style; [`codes`] is the catalog behind
//! `mlpl explain`, read from the data files in `runtime/diag/catalog/`; [`source`] maps byte offsets to lines and columns.

mod catalog;
pub mod code;
pub mod codes;
pub mod render;
pub mod source;

pub use source::SourceFile;

/// A byte range in a source text (half-open, `start <= end`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end`.
    pub const fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
    /// Number of bytes covered.
    pub fn len(self) -> usize {
        self.end - self.start
    }
    /// Whether the span covers no byte.
    pub fn is_empty(self) -> bool {
        self.end == self.start
    }
    /// The same span moved `by` bytes later (used when a cell is part of a document).
    pub fn shifted(self, by: usize) -> Span {
        Span::new(self.start + by, self.end + by)
    }
}

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Stops a run; `mlpl check` exits 1.
    Error,
    /// Never stops a run.
    Warning,
}

/// A span with a message printed under it.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What is said there (may be empty).
    pub message: String,
}

/// One error or warning.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// Stable code such as `E0201` (LANGUAGE §20).
    pub code: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// One-line headline, e.g. ``shapes do not broadcast in `+` ``.
    pub message: String,
    /// The main span and its label; `None` for diagnostics without a location.
    pub primary: Option<Label>,
    /// Further labelled spans (for shape errors: where operands got their names).
    pub secondary: Vec<Label>,
    /// `= note:` lines.
    pub notes: Vec<String>,
    /// The `= help:` line with a suggested fix.
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error with a code and headline.
    pub fn error(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(code, Severity::Error, message)
    }
    /// A warning with a code and headline.
    pub fn warning(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(code, Severity::Warning, message)
    }
    /// The diagnostic of `code` with its catalog headline as the message: an
    /// error or a warning by the code's letter. Write `code::E0409`.
    pub fn of(code: &'static str) -> Diagnostic {
        let info = codes::lookup(code)
            .unwrap_or_else(|| panic!("`{code}` is not in the diagnostic catalog"));
        Diagnostic::new(code, info.severity, info.headline)
    }
    /// [`Diagnostic::of`] with `OP` in the headline replaced by the operator or
    /// builtin `op` (``shapes do not broadcast in `+` ``).
    pub fn of_op(code: &'static str, op: &str) -> Diagnostic {
        let info = codes::lookup(code)
            .unwrap_or_else(|| panic!("`{code}` is not in the diagnostic catalog"));
        let message = info.headline.replace("`OP`", &format!("`{op}`"));
        Diagnostic::new(code, info.severity, message)
    }
    fn new(code: &'static str, severity: Severity, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }
    /// Sets the primary span with an optional label.
    pub fn at(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.primary = Some(Label {
            span,
            message: label.into(),
        });
        self
    }
    /// Sets the primary span only if none is set yet.
    pub fn or_at(self, span: Span) -> Diagnostic {
        if self.primary.is_some() {
            self
        } else {
            self.at(span, "")
        }
    }
    /// Adds a secondary labelled span.
    pub fn with_label(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            span,
            message: label.into(),
        });
        self
    }
    /// Adds a note line.
    pub fn note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }
    /// Sets the help line.
    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }
    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
    /// Moves every span `by` bytes later.
    pub fn shifted(mut self, by: usize) -> Diagnostic {
        if let Some(p) = &mut self.primary {
            p.span = p.span.shifted(by);
        }
        for l in &mut self.secondary {
            l.span = l.span.shifted(by);
        }
        self
    }
}
