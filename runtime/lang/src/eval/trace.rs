//! The evaluation trace of LANGUAGE §19 (`mlpl run --trace FILE.json`): while
//! [`super::Interp::trace`] holds a [`Trace`], the interpreter records one
//! [`TraceEvent`] per evaluated node, in evaluation order (children before
//! their parent). With no trace installed the interpreter only tests that the
//! option is empty: no value is encoded, nothing is allocated.
//!
//! The JSON is the original MLPL's (`{"source": …, "events": [...]}`, each
//! event `seq`, `op`, `span`, `inputs`, `output`), so its trace tooling reads
//! ours; strings, models and tokenizers have their own encodings **[ext]**.

use serde::Serialize;

use crate::value::{Array, Value};
use mlpl_diag::Span;

/// A traced run: the source and its events.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Trace {
    /// The traced source text (spans are byte ranges in it).
    pub source: String,
    /// One event per evaluated node, `seq` 0, 1, 2, …
    pub events: Vec<TraceEvent>,
}

/// One evaluated node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEvent {
    /// Position in the trace, from 0.
    pub seq: u64,
    /// What the node is (LANGUAGE §19's list).
    pub op: &'static str,
    /// The node's byte range in the source.
    pub span: TraceSpan,
    /// The values the operation combined (operands, a call's arguments).
    pub inputs: Vec<TraceValue>,
    /// The node's value.
    pub output: TraceValue,
}

/// A byte range, `{"start": s, "end": e}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceSpan {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl From<Span> for TraceSpan {
    fn from(s: Span) -> TraceSpan {
        TraceSpan {
            start: s.start,
            end: s.end,
        }
    }
}

/// A value as the trace shows it (LANGUAGE §19).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum TraceValue {
    /// A rank-0 array.
    Scalar {
        /// Its element.
        value: f64,
    },
    /// An array of rank ≥ 1.
    Array {
        /// The shape.
        shape: Vec<usize>,
        /// The elements in row-major order.
        data: Vec<f64>,
        /// Axis names (`null` for unnamed axes); omitted when no axis is named.
        #[serde(skip_serializing_if = "Option::is_none")]
        labels: Option<Vec<Option<String>>>,
    },
    /// A string: its length in UTF-8 bytes **[ext]**.
    String {
        /// Bytes.
        len: usize,
    },
    /// A model: its parameter count (elements of its distinct parameters) **[ext]**.
    Model {
        /// Parameters.
        params: u64,
    },
    /// A tokenizer: its vocabulary size **[ext]**.
    Tokenizer {
        /// Vocabulary size.
        vocab: usize,
    },
}

impl TraceValue {
    /// The encoding of an array.
    pub fn of_array(a: &Array) -> TraceValue {
        if a.rank() == 0 {
            return TraceValue::Scalar {
                value: a.to_f64()[0],
            };
        }
        TraceValue::Array {
            shape: a.shape().to_vec(),
            data: a.to_f64(),
            labels: a.names().map(<[_]>::to_vec),
        }
    }

    /// The encoding of any value.
    pub fn of(v: &Value) -> TraceValue {
        match v {
            Value::Array(a) => TraceValue::of_array(a),
            Value::Str(s) => TraceValue::String { len: s.len() },
            Value::Model(m) => TraceValue::Model {
                params: crate::nn::estimate::param_count(&m.0) as u64,
            },
            Value::Tokenizer(t) => TraceValue::Tokenizer {
                vocab: t.vocab_size(),
            },
        }
    }
}

impl Trace {
    /// An empty trace of `source`.
    pub fn new(source: impl Into<String>) -> Trace {
        Trace {
            source: source.into(),
            events: Vec::new(),
        }
    }

    /// Appends an event, numbering it.
    pub fn push(&mut self, op: &'static str, span: Span, inputs: Vec<TraceValue>, output: &Value) {
        let seq = self.events.len() as u64;
        self.events.push(TraceEvent {
            seq,
            op,
            span: span.into(),
            inputs,
            output: TraceValue::of(output),
        });
    }

    /// The trace file's text: pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a trace is always serialisable")
    }
}

/// The op of a call to `name` (LANGUAGE §19): builtins with their own op, else
/// `fncall`.
pub fn call_op(name: &str) -> &'static str {
    match name {
        "matmul" => "matmul",
        "grad" => "grad",
        "adam" => "adam",
        "adamw" => "adamw",
        "momentum_sgd" => "momentum_sgd",
        _ => "fncall",
    }
}
