//! The differentiable ops, as methods of [`Tape`](super::Tape), one family per
//! file. Each method computes its forward value through the tape's backend,
//! records a backward rule holding only what that rule needs beyond the input
//! and output values (which stay on the tape), and returns the result's
//! [`Var`](super::Var).
//!
//! | File | Ops |
//! |---|---|
//! | [`elementwise`] | `add sub mul div pow`, `neg exp log sqrt abs sigmoid tanh relu gelu silu sin cos erf gelu_erf`, scalar helpers |
//! | [`select`] | `select maximum minimum clamp slice_axis concat_axis` |
//! | [`linalg`] | `matmul` |
//! | [`reduce`] | `sum mean prod`, full or along an axis |
//! | [`layout`] | `reshape permute transpose concat` |
//! | [`nn`] | `softmax log_softmax cross_entropy` |
//! | [`norm`] | `rms_norm layer_norm` |
//! | [`embed`] | `gather_rows` |
//! | [`mask`] | `mask_fill causal_mask masked_softmax` |
//! | [`bias_act`] | `bias_act` (bias + activation, fused) |
//! | [`conv`] | `causal_conv` (Engram's short causal convolution) |
//! | [`attention`] | `attention` (scores, mask, softmax and values, fused and tiled) |
//! | [`moe`] | `dispatch expert_matmul` (a routed mixture of experts' token rows and expert products) |

pub mod attention;
pub mod bias_act;
pub mod conv;
pub mod elementwise;
pub mod embed;
pub mod layout;
pub mod linalg;
pub mod mask;
pub mod moe;
pub mod nn;
pub mod norm;
pub mod reduce;
pub mod select;
