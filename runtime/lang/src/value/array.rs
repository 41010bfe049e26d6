//! Arrays: a tensor (or an exact float64 scalar), optional axis names and a placement.

use mlpl_devices::Tensor;

use super::Placement;
use crate::display;

/// Axis names: `None` when no axis is named, otherwise one entry per axis.
pub type Names = Option<Vec<Option<String>>>;

/// An MLPL array (LANGUAGE §5.2).
#[derive(Clone, Debug)]
pub struct Array {
    data: Data,
    names: Names,
    placement: Placement,
    node: Option<TapeNode>,
}

/// Where an array sits on a loss tape: the tape's id and the variable on it. Only
/// meaningful while that tape is being recorded (LANGUAGE §12.2); afterwards the
/// array is an ordinary constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapeNode {
    /// Which tape (each loss evaluation gets a fresh id).
    pub tape: u64,
    /// The variable on that tape.
    pub var: crate::autograd::Var,
}

#[derive(Clone, Debug)]
enum Data {
    /// An exact scalar, held in float64 (LANGUAGE §7.1).
    Exact(f64),
    /// Float32 data of any rank.
    Tensor(Tensor),
}

impl Array {
    /// An exact float64 scalar.
    pub fn exact(v: f64) -> Array {
        Array {
            data: Data::Exact(v),
            names: None,
            placement: Placement::Floating,
            node: None,
        }
    }

    /// A float32 array from a tensor, unnamed and floating.
    pub fn from_tensor(t: Tensor) -> Array {
        Array {
            data: Data::Tensor(t),
            names: None,
            placement: Placement::Floating,
            node: None,
        }
    }

    /// A float32 array from a shape and data.
    pub fn from_vec(shape: Vec<usize>, data: Vec<f32>) -> Array {
        Array::from_tensor(Tensor::from_vec(shape, data))
    }

    /// A float32 array from float64 values rounded once (LANGUAGE §7.1).
    pub fn from_f64(shape: Vec<usize>, data: &[f64]) -> Array {
        Array::from_vec(shape, data.iter().map(|&v| v as f32).collect())
    }

    /// A float32 scalar.
    pub fn scalar_f32(v: f32) -> Array {
        Array::from_tensor(Tensor::scalar(v))
    }

    /// The shape (`[]` for scalars).
    pub fn shape(&self) -> &[usize] {
        match &self.data {
            Data::Exact(_) => &[],
            Data::Tensor(t) => t.shape(),
        }
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// Whether this is an exact float64 scalar.
    pub fn is_exact(&self) -> bool {
        matches!(self.data, Data::Exact(_))
    }

    /// The exact value, if this is an exact scalar.
    pub fn exact_value(&self) -> Option<f64> {
        match self.data {
            Data::Exact(v) => Some(v),
            Data::Tensor(_) => None,
        }
    }

    /// The value of a rank-0 array (exact or float32) as f64.
    pub fn scalar_value(&self) -> Option<f64> {
        match &self.data {
            Data::Exact(v) => Some(*v),
            Data::Tensor(t) if t.rank() == 0 => Some(t.host()[0] as f64),
            Data::Tensor(_) => None,
        }
    }

    /// The data as a tensor (an exact scalar is rounded to float32).
    pub fn tensor(&self) -> Tensor {
        match &self.data {
            Data::Exact(v) => Tensor::scalar(*v as f32),
            Data::Tensor(t) => t.clone(),
        }
    }

    /// The data as a tensor, consuming the array (no copy when it held the only
    /// reference, so in-place updates need not copy).
    pub fn into_tensor(self) -> Tensor {
        match self.data {
            Data::Exact(v) => Tensor::scalar(v as f32),
            Data::Tensor(t) => t,
        }
    }

    /// The same array (names, placement) holding `t` instead, which must have
    /// the same shape; the tape node is dropped.
    pub fn with_tensor(mut self, t: Tensor) -> Array {
        debug_assert_eq!(t.shape(), self.shape(), "Array::with_tensor: shape differs");
        self.data = Data::Tensor(t);
        self.node = None;
        self
    }

    /// Borrow the tensor, if this is not an exact scalar.
    pub fn tensor_ref(&self) -> Option<&Tensor> {
        match &self.data {
            Data::Exact(_) => None,
            Data::Tensor(t) => Some(t),
        }
    }

    /// The elements in row-major order as float32.
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            Data::Exact(v) => vec![*v as f32],
            Data::Tensor(t) => t.to_vec(),
        }
    }

    /// The elements in row-major order as float64 (exact scalars keep their precision).
    pub fn to_f64(&self) -> Vec<f64> {
        match &self.data {
            Data::Exact(v) => vec![*v],
            Data::Tensor(t) => t.host().iter().map(|&x| x as f64).collect(),
        }
    }

    /// Axis names, `None` when no axis is named.
    pub fn names(&self) -> Option<&[Option<String>]> {
        self.names.as_deref()
    }

    /// The name of axis `i`, if any.
    pub fn axis_name(&self, i: usize) -> Option<&str> {
        self.names
            .as_ref()
            .and_then(|n| n.get(i))
            .and_then(|n| n.as_deref())
    }

    /// Replaces the names; an all-unnamed or wrongly sized list clears them.
    pub fn with_names(mut self, names: Names) -> Array {
        self.names = normalize_names(names, self.rank());
        self
    }

    /// Clears all names.
    pub fn unnamed(mut self) -> Array {
        self.names = None;
        self
    }

    /// The placement.
    pub fn placement(&self) -> Placement {
        // Rank-0 arrays are never placed (LANGUAGE §14.3).
        if self.rank() == 0 {
            Placement::Floating
        } else {
            self.placement
        }
    }

    /// Sets the placement (ignored for rank 0).
    pub fn with_placement(mut self, p: Placement) -> Array {
        if self.rank() > 0 {
            self.placement = p;
        }
        self
    }

    /// The tape node of this array, if it was computed on a loss tape.
    pub fn node(&self) -> Option<TapeNode> {
        self.node
    }

    /// The same array recorded as `node` on a loss tape.
    pub fn with_node(mut self, node: TapeNode) -> Array {
        self.node = Some(node);
        self
    }

    /// The same array without a tape node (a constant for any loss).
    pub fn detached(mut self) -> Array {
        self.node = None;
        self
    }

    /// The text a program prints for this array (LANGUAGE §7).
    pub fn display(&self) -> String {
        match &self.data {
            Data::Exact(v) => display::format_f64(*v),
            Data::Tensor(t) => display::format_array_f32(t.shape(), t.host()),
        }
    }
}

/// Keeps names only when some axis is named and the count matches the rank.
pub fn normalize_names(names: Names, rank: usize) -> Names {
    match names {
        Some(n)
            if n.len() == rank && n.iter().any(|x| x.as_ref().is_some_and(|s| !s.is_empty())) =>
        {
            Some(n.into_iter().map(|x| x.filter(|s| !s.is_empty())).collect())
        }
        _ => None,
    }
}
