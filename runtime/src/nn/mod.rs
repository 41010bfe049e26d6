//! The model DSL (LANGUAGE §11): layers, parameter naming and application.
//! Only the layer tree's shape is defined so far; layer constructors and `apply`
//! arrive with autograd.

use std::sync::Arc;

/// One node of a model tree.
#[derive(Debug)]
pub enum Layer {
    /// `chain(m1, ..., mn)`: composition, left to right.
    Chain(Vec<Arc<Layer>>),
}
