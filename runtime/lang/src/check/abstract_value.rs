//! Abstract values for static analysis (DESIGN §4): what the checker knows about a
//! value without running the program. Unknown is a normal outcome, never an error.
//!
//! An array is described by its rank (when known) and, per axis, a size ([`Dim`]:
//! known, symbolic or unknown) and a name ([`AxisName`]: named, unnamed or unknown),
//! plus its elements when it is a small constant (`V = 280`, `[2, 3]`, `iota(4)`),
//! the span where its axis names were attached (for diagnostics) and the device it
//! is provably placed on.

use std::sync::Arc;

use crate::value::DeviceTarget;
use mlpl_diag::{Diagnostic, Span};

/// The largest constant (in elements) the checker tracks exactly.
pub const MAX_CONST: usize = 4096;

/// One axis size as far as the checker knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A size known exactly.
    Known(usize),
    /// A size fixed at run time but named, e.g. `N` for the rows of a loaded file.
    /// Two equal symbols denote equal sizes; different symbols may or may not be.
    Symbol(String),
    /// Nothing is known about the size.
    Unknown,
}

impl Dim {
    /// The size when known.
    pub fn known(&self) -> Option<usize> {
        match self {
            Dim::Known(n) => Some(*n),
            _ => None,
        }
    }

    /// Whether the two sizes are provably equal.
    pub fn provably_eq(&self, other: &Dim) -> bool {
        match (self, other) {
            (Dim::Known(a), Dim::Known(b)) => a == b,
            (Dim::Symbol(a), Dim::Symbol(b)) => a == b,
            _ => false,
        }
    }

    /// Whether the two sizes are provably different.
    pub fn provably_ne(&self, other: &Dim) -> bool {
        matches!((self, other), (Dim::Known(a), Dim::Known(b)) if a != b)
    }

    /// What is known about a size that is either `self` or `other`.
    pub fn join(&self, other: &Dim) -> Dim {
        if self == other {
            self.clone()
        } else {
            Dim::Unknown
        }
    }

    /// The size as printed in shapes: the number, the symbol, or `?`.
    pub fn text(&self) -> String {
        match self {
            Dim::Known(n) => n.to_string(),
            Dim::Symbol(s) => s.clone(),
            Dim::Unknown => "?".to_string(),
        }
    }
}

/// The name of one axis as far as the checker knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AxisName {
    /// The axis has this name.
    Named(Arc<str>),
    /// The axis is provably unnamed.
    Unnamed,
    /// The name is not known.
    Unknown,
}

impl AxisName {
    /// From a runtime-style name entry.
    pub fn from_option(n: Option<&str>) -> AxisName {
        match n {
            Some(s) if !s.is_empty() => AxisName::Named(s.into()),
            _ => AxisName::Unnamed,
        }
    }

    /// The name, when the axis is known to be named.
    pub fn named(&self) -> Option<&str> {
        match self {
            AxisName::Named(s) => Some(s),
            _ => None,
        }
    }

    /// What is known about a name that is either `self` or `other`.
    pub fn join(&self, other: &AxisName) -> AxisName {
        if self == other {
            self.clone()
        } else {
            AxisName::Unknown
        }
    }
}

/// What is known about an array.
#[derive(Clone, Debug, PartialEq)]
pub struct AbsArray {
    /// Axis sizes; `None` when even the rank is unknown.
    pub dims: Option<Vec<Dim>>,
    /// Axis names, one per axis when the rank is known (empty otherwise).
    pub names: Vec<AxisName>,
    /// The elements in row-major order, for small constants (`V = 280`, `[2, 3]`).
    pub constant: Option<Vec<f64>>,
    /// Where the array's axis names were attached (an annotation or a `label`
    /// call), for the secondary labels of shape errors.
    pub origin: Option<Span>,
    /// The device the array is provably placed on by `to_device` (`None`: floating
    /// or not known).
    pub placed: Option<DeviceTarget>,
}

impl AbsArray {
    /// An array about which nothing is known.
    pub fn unknown() -> AbsArray {
        AbsArray {
            dims: None,
            names: Vec::new(),
            constant: None,
            origin: None,
            placed: None,
        }
    }

    /// An array from sizes, runtime-style names (one entry per axis, `None` for an
    /// unnamed axis; the whole list `None` when the names are not known) and a
    /// constant.
    pub fn from_parts(
        dims: Option<Vec<Dim>>,
        names: Option<Vec<Option<String>>>,
        constant: Option<Vec<f64>>,
    ) -> AbsArray {
        let rank = dims.as_ref().map_or(0, |d| d.len());
        let names = match names {
            Some(n) if n.len() == rank => n
                .iter()
                .map(|x| AxisName::from_option(x.as_deref()))
                .collect(),
            _ => vec![AxisName::Unknown; rank],
        };
        AbsArray {
            dims,
            names,
            constant: None,
            origin: None,
            placed: None,
        }
        .with_constant(constant)
    }

    /// An unnamed array with these axis sizes.
    pub fn of_dims(dims: Vec<Dim>) -> AbsArray {
        let names = vec![AxisName::Unnamed; dims.len()];
        AbsArray {
            dims: Some(dims),
            names,
            constant: None,
            origin: None,
            placed: None,
        }
    }

    /// An unnamed array of known shape.
    pub fn of_shape(shape: &[usize]) -> AbsArray {
        AbsArray::of_dims(shape.iter().map(|&d| Dim::Known(d)).collect())
    }

    /// A scalar whose value is not known.
    pub fn any_scalar() -> AbsArray {
        AbsArray::of_dims(Vec::new())
    }

    /// A constant scalar.
    pub fn scalar(v: f64) -> AbsArray {
        AbsArray::any_scalar().with_constant(Some(vec![v]))
    }

    /// An unnamed constant of known shape; the constant is dropped when it is too
    /// large or does not match the shape.
    pub fn constant(shape: &[usize], data: Vec<f64>) -> AbsArray {
        AbsArray::of_shape(shape).with_constant(Some(data))
    }

    /// The same array with these elements (kept only when small and consistent).
    pub fn with_constant(mut self, data: Option<Vec<f64>>) -> AbsArray {
        self.constant = match (data, self.numel()) {
            (Some(d), Some(n)) if d.len() == n && n <= MAX_CONST => Some(d),
            _ => None,
        };
        self
    }

    /// The same array with runtime-style names (`None`: no axis named).
    pub fn with_names(mut self, names: Option<Vec<Option<String>>>) -> AbsArray {
        let rank = self.rank().unwrap_or(0);
        self.names = match names {
            Some(n) if n.len() == rank => n
                .iter()
                .map(|x| AxisName::from_option(x.as_deref()))
                .collect(),
            _ => vec![AxisName::Unnamed; rank],
        };
        self
    }

    /// The same array with every axis unnamed.
    pub fn unnamed(mut self) -> AbsArray {
        self.names = vec![AxisName::Unnamed; self.rank().unwrap_or(0)];
        self.origin = None;
        self
    }

    /// The rank, when known.
    pub fn rank(&self) -> Option<usize> {
        self.dims.as_ref().map(|d| d.len())
    }

    /// The shape, when every size is known.
    pub fn known_shape(&self) -> Option<Vec<usize>> {
        self.dims.as_ref()?.iter().map(Dim::known).collect()
    }

    /// The element count, when every size is known (or one of them is 0).
    pub fn numel(&self) -> Option<usize> {
        let dims = self.dims.as_ref()?;
        if dims.contains(&Dim::Known(0)) {
            return Some(0);
        }
        dims.iter()
            .try_fold(1usize, |acc, d| acc.checked_mul(d.known()?))
    }

    /// The value of a constant scalar.
    pub fn scalar_value(&self) -> Option<f64> {
        match (&self.dims, &self.constant) {
            (Some(d), Some(c)) if d.is_empty() && c.len() == 1 => Some(c[0]),
            _ => None,
        }
    }

    /// The name of `axis` (unknown when out of range or unknown).
    pub fn name_of(&self, axis: usize) -> &AxisName {
        self.names.get(axis).unwrap_or(&AxisName::Unknown)
    }

    /// The names in runtime form when every axis name is known (`None` entries
    /// are unnamed axes).
    pub fn known_names(&self) -> Option<Vec<Option<String>>> {
        self.dims.as_ref()?;
        self.names
            .iter()
            .map(|n| match n {
                AxisName::Named(s) => Some(Some(s.to_string())),
                AxisName::Unnamed => Some(None),
                AxisName::Unknown => None,
            })
            .collect()
    }

    /// Whether the array provably has no named axis.
    pub fn provably_unnamed(&self) -> bool {
        self.dims.is_some() && self.names.iter().all(|n| *n == AxisName::Unnamed)
    }

    /// Whether some axis is provably named.
    pub fn has_named_axis(&self) -> bool {
        self.names.iter().any(|n| matches!(n, AxisName::Named(_)))
    }

    /// The named shape as diagnostics print it (LANGUAGE §8.4): `[batch=32, 10]`,
    /// with symbols for symbolic sizes, `?` for unknown ones and `[*]` for an
    /// unknown rank.
    pub fn shape_text(&self) -> String {
        let Some(dims) = &self.dims else {
            return "[*]".to_string();
        };
        let mut out = String::from("[");
        for (axis, d) in dims.iter().enumerate() {
            if axis > 0 {
                out.push_str(", ");
            }
            if let Some(n) = self.name_of(axis).named() {
                out.push_str(n);
                out.push('=');
            }
            out.push_str(&d.text());
        }
        out.push(']');
        out
    }

    /// What is known about an array that is either `self` or `other`.
    pub fn join(&self, other: &AbsArray) -> AbsArray {
        let dims = match (&self.dims, &other.dims) {
            (Some(a), Some(b)) if a.len() == b.len() => {
                Some(a.iter().zip(b).map(|(x, y)| x.join(y)).collect())
            }
            _ => None,
        };
        let names = match &dims {
            Some(_) => self
                .names
                .iter()
                .zip(&other.names)
                .map(|(x, y)| x.join(y))
                .collect(),
            None => Vec::new(),
        };
        AbsArray {
            dims,
            names,
            constant: if self.constant == other.constant {
                self.constant.clone()
            } else {
                None
            },
            origin: self.origin.or(other.origin),
            placed: if self.placed == other.placed {
                self.placed
            } else {
                None
            },
        }
    }
}

/// What is known about any value.
#[derive(Clone, Debug, PartialEq)]
pub enum AbsValue {
    /// Nothing is known (not even the kind).
    Unknown,
    /// An array.
    Array(AbsArray),
    /// A string, with its text when it is a constant.
    Str(Option<String>),
    /// A model, with its layer tree when every size is known (LANGUAGE §11.10).
    Model(Option<super::models::AbsModel>),
    /// A tokenizer, itself when the checker can build it (the byte-level one,
    /// or BPE trained on a constant text), so that token counts of constant
    /// texts are exact.
    Tokenizer(Option<std::sync::Arc<crate::data::tokenizer::Tokenizer>>),
}

impl AbsValue {
    /// A constant scalar.
    pub fn scalar(v: f64) -> AbsValue {
        AbsValue::Array(AbsArray::scalar(v))
    }

    /// A scalar of unknown value.
    pub fn any_scalar() -> AbsValue {
        AbsValue::Array(AbsArray::any_scalar())
    }

    /// An array of unknown shape.
    pub fn any_array() -> AbsValue {
        AbsValue::Array(AbsArray::unknown())
    }

    /// The kind name used in messages (`array`, `string`, `model`, `tokenizer`);
    /// `None` when the kind is unknown.
    pub fn kind_name(&self) -> Option<&'static str> {
        match self {
            AbsValue::Unknown => None,
            AbsValue::Array(_) => Some("array"),
            AbsValue::Str(_) => Some("string"),
            AbsValue::Model(_) => Some("model"),
            AbsValue::Tokenizer(_) => Some("tokenizer"),
        }
    }

    /// The array, if this is provably one.
    pub fn as_array(&self) -> Option<&AbsArray> {
        match self {
            AbsValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Whether this is provably not an array.
    pub fn provably_not_array(&self) -> bool {
        !matches!(self, AbsValue::Unknown | AbsValue::Array(_))
    }

    /// What is known about a value that is either `self` or `other`.
    pub fn join(&self, other: &AbsValue) -> AbsValue {
        match (self, other) {
            (AbsValue::Array(a), AbsValue::Array(b)) => AbsValue::Array(a.join(b)),
            (AbsValue::Str(a), AbsValue::Str(b)) => {
                AbsValue::Str(if a == b { a.clone() } else { None })
            }
            (AbsValue::Model(a), AbsValue::Model(b)) => {
                AbsValue::Model(if a == b { a.clone() } else { None })
            }
            (AbsValue::Tokenizer(a), AbsValue::Tokenizer(b)) => {
                AbsValue::Tokenizer(if a == b { a.clone() } else { None })
            }
            _ => AbsValue::Unknown,
        }
    }
}

/// A builtin's static shape rule: from the abstract arguments (with their spans,
/// in a [`ShapeCtx`](super::ctx::ShapeCtx) that also collects warnings) to the
/// abstract result, or the diagnostic it can prove. Rules live in the builtin
/// registry next to each runtime implementation (DESIGN §3).
pub type ShapeRule = fn(&mut super::ctx::ShapeCtx<'_>) -> Result<AbsValue, Diagnostic>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_shapes() {
        assert_eq!(AbsArray::of_shape(&[2, 3]).known_shape(), Some(vec![2, 3]));
        assert_eq!(AbsArray::unknown().known_shape(), None);
        let sym = AbsArray::of_dims(vec![Dim::Symbol("N".into()), Dim::Known(3)]);
        assert_eq!(sym.known_shape(), None);
        assert_eq!(sym.shape_text(), "[N, 3]");
        assert_eq!(AbsArray::scalar(5.0).known_shape(), Some(vec![]));
        assert_eq!(AbsArray::scalar(5.0).scalar_value(), Some(5.0));
    }

    #[test]
    fn joins_keep_only_what_agrees() {
        let a = AbsArray::of_shape(&[2, 3]).with_names(Some(vec![Some("b".into()), None]));
        let b = AbsArray::of_shape(&[4, 3]).with_names(Some(vec![Some("b".into()), None]));
        let j = a.join(&b);
        assert_eq!(j.dims, Some(vec![Dim::Unknown, Dim::Known(3)]));
        assert_eq!(
            j.names,
            vec![AxisName::Named("b".into()), AxisName::Unnamed]
        );
        assert_eq!(j.shape_text(), "[b=?, 3]");
        let c = AbsArray::of_shape(&[3]);
        assert_eq!(a.join(&c).dims, None);
        assert_eq!(
            AbsValue::Str(Some("x".into())).join(&AbsValue::any_scalar()),
            AbsValue::Unknown
        );
    }

    #[test]
    fn constants_are_kept_only_when_consistent() {
        assert!(AbsArray::constant(&[2], vec![1.0, 2.0]).constant.is_some());
        assert!(AbsArray::constant(&[3], vec![1.0, 2.0]).constant.is_none());
        assert!(
            AbsArray::constant(&[MAX_CONST + 1], vec![0.0; MAX_CONST + 1])
                .constant
                .is_none()
        );
    }
}
