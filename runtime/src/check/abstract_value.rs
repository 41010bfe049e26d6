//! Abstract values for static analysis (DESIGN §4): what the checker knows about a
//! value without running the program. Unknown is a normal outcome, never an error.

/// One axis size as far as the checker knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A size known exactly.
    Known(usize),
    /// A size fixed at run time but named, e.g. `N` for the rows of a loaded file.
    Symbol(String),
    /// Nothing is known about the size.
    Unknown,
}

/// What is known about an array: its axes (when the rank is known), their names,
/// and its constant value when it is a small compile-time constant.
#[derive(Clone, Debug, PartialEq)]
pub struct AbsArray {
    /// Axis sizes; `None` when even the rank is unknown.
    pub dims: Option<Vec<Dim>>,
    /// Axis names, one per axis when the rank is known (`None` entries are unnamed).
    pub names: Option<Vec<Option<String>>>,
    /// The elements, for small constants (`V = 280`, `[2, 3]`).
    pub constant: Option<Vec<f64>>,
}

impl AbsArray {
    /// An array about which nothing is known.
    pub fn unknown() -> AbsArray {
        AbsArray {
            dims: None,
            names: None,
            constant: None,
        }
    }

    /// An array of known shape, unnamed.
    pub fn of_shape(shape: &[usize]) -> AbsArray {
        AbsArray {
            dims: Some(shape.iter().map(|&d| Dim::Known(d)).collect()),
            names: None,
            constant: None,
        }
    }

    /// A constant scalar.
    pub fn scalar(v: f64) -> AbsArray {
        AbsArray {
            dims: Some(Vec::new()),
            names: None,
            constant: Some(vec![v]),
        }
    }

    /// The shape, when every size is known.
    pub fn known_shape(&self) -> Option<Vec<usize>> {
        self.dims
            .as_ref()?
            .iter()
            .map(|d| {
                if let Dim::Known(n) = d {
                    Some(*n)
                } else {
                    None
                }
            })
            .collect()
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
    /// A model.
    Model,
    /// A tokenizer.
    Tokenizer,
}

/// A builtin's static shape rule: from the abstract arguments to the abstract
/// result, or the diagnostic it can prove. Rules live in the builtin registry next
/// to each runtime implementation (DESIGN §3).
pub type ShapeRule = fn(&[AbsValue]) -> Result<AbsValue, crate::diag::Diagnostic>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_shapes() {
        assert_eq!(AbsArray::of_shape(&[2, 3]).known_shape(), Some(vec![2, 3]));
        assert_eq!(AbsArray::unknown().known_shape(), None);
        let sym = AbsArray {
            dims: Some(vec![Dim::Symbol("N".into()), Dim::Known(3)]),
            names: None,
            constant: None,
        };
        assert_eq!(sym.known_shape(), None);
        assert_eq!(AbsArray::scalar(5.0).known_shape(), Some(vec![]));
    }
}
