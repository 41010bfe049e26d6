//! Reverse-mode automatic differentiation on device [`Tensor`]s (LANGUAGE §12,
//! DESIGN §5).
//!
//! A [`Tape`] records every operation of a loss as it is computed: each op runs
//! its forward kernel through the tape's [`Backend`] and keeps only the extra
//! state its backward rule needs (axes, saved statistics, constant indices);
//! the values of all nodes stay on the tape. [`Tape::backward`] then walks the
//! nodes in reverse recording order (a reverse topological order, since an op's
//! inputs are always recorded before it) and runs every backward rule through
//! the *same* backend, so every differentiable op trains on every device: no
//! rule downloads to the host or computes on the CPU behind the backend's back.
//! Backward rules that the backend has no fused kernel for are composed from
//! its primitive kernels ([`kernels`]).
//!
//! Shapes are the caller's responsibility: the interpreter checks them and
//! reports language diagnostics before recording an op, so an op given
//! incompatible shapes panics (with a message naming the op). Errors that do
//! come back ([`mlpl_devices::DeviceError`]) are device failures such as running
//! out of memory.
//!
//! Layout: [`tape`] (nodes, leaves, recording), [`backward`] (the reverse pass),
//! [`grads`] (its result), [`kernels`] (helpers composing backend kernels) and
//! one file per family of ops under [`ops`].
//!
//! [`Tensor`]: mlpl_devices::Tensor
//! [`Backend`]: mlpl_devices::Backend

pub mod backward;
pub mod grads;
pub mod kernels;
pub mod ops;
pub mod tape;

#[cfg(test)]
mod tests;

pub use grads::Grads;
pub use ops::mask::CAUSAL_FILL;
pub use tape::{Tape, Var};
