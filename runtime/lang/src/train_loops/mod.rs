//! The `train` loops of a program as the estimates see them ([`loops`]: the
//! checker's model, batch and frozen parameters, the loss, the forward passes,
//! the device block) and the calibration suite that measures a device's cost
//! model on such loops ([`measure`]; docs/estimates.md).

pub mod loops;
pub mod measure;
