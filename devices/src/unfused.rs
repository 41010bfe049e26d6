//! [`Unfused`]: a backend that runs another backend's primitive kernels and
//! the composed default of every fused method, the reference that fused
//! kernels are tested and measured against.

#[allow(unused_imports)] // for the docs
use crate::backend::Backend;

/// Runs every primitive kernel on the wrapped backend, but the fused methods
/// (`unary_backward`, `bias_act`, `bias_act_backward`, `masked_softmax`,
/// `masked_softmax_backward`) through the [`Backend`] trait's defaults, which
/// compose them from those primitives. A fused kernel must give the same bits
/// as `Unfused` of its backend. Its `Backend` methods are generated from the
/// kernel table (`kernels.rs`): the `kernel` entries forward, the `fused`
/// ones run their default.
#[derive(Debug, Default)]
pub struct Unfused<B>(pub B);
