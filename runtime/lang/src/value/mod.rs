//! Runtime values (LANGUAGE §5): arrays with optional axis names and a placement,
//! strings, models and tokenizers, all in one namespace.

mod array;
mod device;
/// The largest array a builtin will allocate: 2^31 elements (8 GiB of float32).
/// Larger requests are E0410 instead of an allocation that would kill the process
/// (docs/limits.md).
pub const MAX_ELEMENTS: usize = 1 << 31;

pub mod scalar;

pub use array::{normalize_names, Array, Names, TapeNode};
pub use device::{DeviceTarget, Placement};

use std::sync::Arc;

use crate::data::tokenizer::Tokenizer;
use crate::display;

/// A model handle (LANGUAGE §5.4). Layers are defined by the model DSL; a model
/// value is a cheap shared reference to its tree.
#[derive(Clone, Debug)]
pub struct Model(pub Arc<crate::nn::Layer>);

/// Any value a variable can hold.
#[derive(Clone, Debug)]
pub enum Value {
    /// A float32 array (or an exact float64 scalar).
    Array(Array),
    /// An immutable UTF-8 string.
    Str(Arc<str>),
    /// A model handle.
    Model(Model),
    /// A byte-level or BPE tokenizer.
    Tokenizer(Arc<Tokenizer>),
}

impl Value {
    /// The kind name used in messages: `array`, `string`, `model` or `tokenizer`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Array(_) => "array",
            Value::Str(_) => "string",
            Value::Model(_) => "model",
            Value::Tokenizer(_) => "tokenizer",
        }
    }

    /// An exact (float64) scalar.
    pub fn exact(v: f64) -> Value {
        Value::Array(Array::exact(v))
    }

    /// A string value.
    pub fn string(s: impl Into<Arc<str>>) -> Value {
        Value::Str(s.into())
    }

    /// The array inside, if this is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The text a program prints for this value (LANGUAGE §7).
    pub fn display(&self) -> String {
        match self {
            Value::Array(a) => a.display(),
            Value::Str(s) => s.to_string(),
            Value::Model(_) => "<model>".to_string(),
            Value::Tokenizer(t) => format!("<tokenizer: {}>", t.describe()),
        }
    }

    /// Whether this is a string holding an SVG chart (LANGUAGE §7.4).
    pub fn is_svg(&self) -> bool {
        match self {
            Value::Str(s) => {
                let t = s.trim_start();
                t.starts_with("<svg") || (t.starts_with("<?xml") && t.contains("<svg"))
            }
            _ => false,
        }
    }
}

/// Formats a named shape such as `[batch=32, 10]`.
pub fn named_shape(a: &Array) -> String {
    display::format_named_shape(a.shape(), a.names())
}

/// Splits the comma-separated form that `labels` returns; `""` is a scalar's names.
pub fn split_names(s: &str) -> Vec<Option<String>> {
    if s.is_empty() {
        return Vec::new();
    }
    s.split(',')
        .map(|n| Some(n.to_string()).filter(|n| !n.is_empty()))
        .collect()
}
