//! What the server knows about a value without running the program: the editor's
//! view of the checker's abstract values (DESIGN §4), plus the model structure that
//! hovers and feasibility estimates need.
//!
//! [`Val::to_abs`] and [`Val::from_abs`] convert to and from the runtime checker's
//! [`AbsValue`], so the server can switch to the checker's own shape inference when
//! it is exposed (see [`crate::infer::ShapeEngine`]).

use std::sync::Arc;

use mlpl_runtime::check::abstract_value::{AbsArray, AbsValue, Dim};
use mlpl_runtime::diag::Span;
use mlpl_runtime::nn::Layer;

/// What is known about an array.
#[derive(Clone, Debug, PartialEq)]
pub struct Arr {
    /// Axis sizes; `None` when even the rank is unknown.
    pub dims: Option<Vec<Dim>>,
    /// Axis names, one per axis (`None` entries are unnamed); `None` when the names
    /// are not known (an array known to have no names has `Some(vec![None; rank])`).
    pub names: Option<Vec<Option<String>>>,
    /// The elements, for small constants.
    pub constant: Option<Vec<f64>>,
    /// Where the array got its axis names (an annotation or a `label` call).
    pub names_from: Option<Span>,
}

impl Arr {
    /// An array about which nothing is known.
    pub fn unknown() -> Arr {
        Arr {
            dims: None,
            names: None,
            constant: None,
            names_from: None,
        }
    }

    /// An unnamed array of the given sizes.
    pub fn of_dims(dims: Vec<Dim>) -> Arr {
        let n = dims.len();
        Arr {
            dims: Some(dims),
            names: Some(vec![None; n]),
            constant: None,
            names_from: None,
        }
    }

    /// An unnamed array of known shape.
    pub fn of_shape(shape: &[usize]) -> Arr {
        Arr::of_dims(shape.iter().map(|&d| Dim::Known(d)).collect())
    }

    /// A constant scalar.
    pub fn scalar(v: f64) -> Arr {
        Arr {
            constant: Some(vec![v]),
            ..Arr::of_shape(&[])
        }
    }

    /// A scalar of unknown value.
    pub fn any_scalar() -> Arr {
        Arr::of_shape(&[])
    }

    /// The rank, when known.
    pub fn rank(&self) -> Option<usize> {
        self.dims.as_ref().map(Vec::len)
    }

    /// The shape, when every size is known.
    pub fn known_shape(&self) -> Option<Vec<usize>> {
        self.dims
            .as_ref()?
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Some(*n),
                _ => None,
            })
            .collect()
    }

    /// The number of elements, when every size is known.
    pub fn known_len(&self) -> Option<usize> {
        self.known_shape()?
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// The value of a constant scalar.
    pub fn scalar_value(&self) -> Option<f64> {
        match (&self.dims, &self.constant) {
            (Some(d), Some(c)) if d.is_empty() && c.len() == 1 => Some(c[0]),
            _ => None,
        }
    }

    /// The name of axis `i`, when known.
    pub fn name(&self, i: usize) -> Option<&str> {
        self.names.as_ref()?.get(i)?.as_deref()
    }

    /// Whether any axis is named (false when unknown).
    pub fn has_names(&self) -> bool {
        self.names
            .as_ref()
            .is_some_and(|n| n.iter().any(Option::is_some))
    }

    /// The same array with its names dropped.
    pub fn unnamed(mut self) -> Arr {
        self.names = self.dims.as_ref().map(|d| vec![None; d.len()]);
        self.names_from = None;
        self
    }

    /// The same sizes with no constant value.
    pub fn without_constant(mut self) -> Arr {
        self.constant = None;
        self
    }

    /// The named shape as LANGUAGE §8.4 prints it (`[batch=32, feat=10]`); symbolic
    /// sizes print as their symbol, unknown sizes as `?`, an unknown rank as `[…]`.
    pub fn named_shape(&self) -> String {
        let Some(dims) = &self.dims else {
            return "[…]".to_string();
        };
        let parts: Vec<String> = dims
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let size = dim_text(d);
                match self.name(i) {
                    Some(n) => format!("{n}={size}"),
                    None => size,
                }
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }

    /// Converts to the runtime checker's abstract array.
    pub fn to_abs(&self) -> AbsArray {
        let mut a =
            AbsArray::from_parts(self.dims.clone(), self.names.clone(), self.constant.clone());
        a.origin = self.names_from;
        a
    }
}

/// A size as text: the number, the symbol or `?`.
pub fn dim_text(d: &Dim) -> String {
    match d {
        Dim::Known(n) => n.to_string(),
        Dim::Symbol(s) => s.clone(),
        Dim::Unknown => "?".to_string(),
    }
}

/// A model known statically: its layer tree (built with the runtime's own layer
/// types, so parameter counts and costs use the runtime's formulas).
#[derive(Debug)]
pub struct ModelInfo {
    /// The layers.
    pub layer: Arc<Layer>,
    /// The expression that built it.
    pub defined_at: Span,
}

/// What is known about any value.
#[derive(Clone, Debug)]
pub enum Val {
    /// Nothing is known, not even the kind.
    Unknown,
    /// An array.
    Array(Arr),
    /// A string, with its text when constant.
    Str(Option<String>),
    /// A model, with its structure when every size is known.
    Model(Option<Arc<ModelInfo>>),
    /// A tokenizer.
    Tokenizer,
}

impl Val {
    /// The array, if this is one.
    pub fn arr(&self) -> Option<&Arr> {
        match self {
            Val::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The model structure, if this is a known model.
    pub fn model(&self) -> Option<&Arc<ModelInfo>> {
        match self {
            Val::Model(Some(m)) => Some(m),
            _ => None,
        }
    }

    /// The constant text, if this is a known string.
    pub fn text(&self) -> Option<&str> {
        match self {
            Val::Str(Some(s)) => Some(s),
            _ => None,
        }
    }

    /// A short description for hovers, completion details and inlay hints.
    pub fn describe(&self) -> String {
        match self {
            Val::Unknown => "unknown".into(),
            Val::Array(a) => match (a.rank(), a.scalar_value()) {
                (Some(0), Some(v)) => format!("scalar {}", mlpl_runtime::display::format_f64(v)),
                (Some(0), None) => "scalar".into(),
                _ => a.named_shape(),
            },
            Val::Str(Some(s)) if s.chars().count() <= 40 => format!("string {s:?}"),
            Val::Str(Some(s)) => format!("string of {} bytes", s.len()),
            Val::Str(None) => "string".into(),
            Val::Model(Some(m)) => {
                let p = mlpl_runtime::nn::estimate::param_count(&m.layer);
                format!("model, {} parameters", group_digits(p))
            }
            Val::Model(None) => "model".into(),
            Val::Tokenizer => "tokenizer".into(),
        }
    }

    /// Converts to the runtime checker's abstract value.
    pub fn to_abs(&self) -> AbsValue {
        match self {
            Val::Unknown => AbsValue::Unknown,
            Val::Array(a) => AbsValue::Array(a.to_abs()),
            Val::Str(s) => AbsValue::Str(s.clone()),
            Val::Model(_) => AbsValue::Model(None),
            Val::Tokenizer => AbsValue::Tokenizer,
        }
    }

    /// Converts from the runtime checker's abstract value (models lose their
    /// structure, which the checker's value does not carry).
    pub fn from_abs(v: &AbsValue) -> Val {
        match v {
            AbsValue::Unknown => Val::Unknown,
            AbsValue::Array(a) => Val::Array(Arr {
                dims: a.dims.clone(),
                names: a.known_names(),
                constant: a.constant.clone(),
                names_from: a.origin,
            }),
            AbsValue::Str(s) => Val::Str(s.clone()),
            AbsValue::Model(_) => Val::Model(None),
            AbsValue::Tokenizer => Val::Tokenizer,
        }
    }
}

/// `1234567` → `1,234,567` (integers), other numbers with 4 significant digits.
pub fn group_digits(x: f64) -> String {
    if !(x.is_finite() && x.fract() == 0.0 && x.abs() < 1e18) {
        return format!("{x:.4}");
    }
    let s = format!("{}", x.abs() as u64);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_shapes_print_like_the_reference() {
        let mut a = Arr::of_dims(vec![Dim::Known(32), Dim::Symbol("N".into()), Dim::Unknown]);
        a.names = Some(vec![Some("batch".into()), None, None]);
        assert_eq!(a.named_shape(), "[batch=32, N, ?]");
        assert_eq!(Arr::unknown().named_shape(), "[…]");
        assert_eq!(Arr::scalar(3.0).named_shape(), "[]");
        assert_eq!(group_digits(1234567.0), "1,234,567");
        assert_eq!(group_digits(800.0), "800");
    }

    #[test]
    fn converts_to_and_from_checker_values() {
        let a = Val::Array(Arr::of_shape(&[2, 3]));
        let abs = a.to_abs();
        assert_eq!(
            Val::from_abs(&abs).arr().unwrap().known_shape(),
            Some(vec![2, 3])
        );
    }
}
