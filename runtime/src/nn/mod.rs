//! The model DSL (LANGUAGE §11): layers, parameter naming and application.

use std::sync::Arc;

/// One node of a model tree.
#[derive(Debug)]
pub enum Layer {
    /// `chain(m1, ..., mn)`: composition, left to right.
    Chain(Vec<Arc<Layer>>),
}

impl Layer {
    /// The names of the distinct parameters of this model in parameter order
    /// (LANGUAGE §11.1): depth first, each layer's parameters in their order, a
    /// parameter reached twice listed at its first position.
    pub fn parameters(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_parameters(&mut out);
        let mut seen = std::collections::HashSet::new();
        out.retain(|n| seen.insert(n.clone()));
        out
    }

    fn collect_parameters(&self, out: &mut Vec<String>) {
        match self {
            Layer::Chain(children) => children.iter().for_each(|c| c.collect_parameters(out)),
        }
    }
}
