//! [`Grads`]: the gradients [`Tape::backward`](super::Tape::backward) returns.

use super::tape::Var;
use mlpl_devices::Tensor;
use std::collections::HashMap;
use std::ops::Index;

/// The gradient of a loss with respect to every leaf of a tape that requires a
/// gradient, each with its leaf's shape and on the tape's device. Leaves the
/// loss does not depend on have all-zero gradients (LANGUAGE §12.3); constants
/// have none.
#[derive(Debug, Default, Clone)]
pub struct Grads {
    map: HashMap<Var, Tensor>,
}

impl Grads {
    /// Gradients from a map.
    pub(crate) fn from_map(map: HashMap<Var, Tensor>) -> Grads {
        Grads { map }
    }

    /// The gradient of `leaf`, or `None` when it is not a leaf that requires a gradient.
    pub fn get(&self, leaf: Var) -> Option<&Tensor> {
        self.map.get(&leaf)
    }

    /// Takes the gradient of `leaf` out of the map.
    pub fn remove(&mut self, leaf: Var) -> Option<Tensor> {
        self.map.remove(&leaf)
    }

    /// The number of gradients.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are none (the tape has no leaf that requires a gradient).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The leaves with a gradient, in recording order.
    pub fn vars(&self) -> Vec<Var> {
        let mut v: Vec<Var> = self.map.keys().copied().collect();
        v.sort();
        v
    }

    /// Every (leaf, gradient) pair, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Var, &Tensor)> {
        self.map.iter().map(|(v, t)| (*v, t))
    }

    /// The underlying map.
    pub fn into_map(self) -> HashMap<Var, Tensor> {
        self.map
    }
}

impl Index<Var> for Grads {
    type Output = Tensor;

    /// The gradient of `leaf`; panics when it has none (see [`Grads::get`]).
    fn index(&self, leaf: Var) -> &Tensor {
        self.map
            .get(&leaf)
            .unwrap_or_else(|| panic!("no gradient for {leaf:?}: not a leaf that requires one"))
    }
}
