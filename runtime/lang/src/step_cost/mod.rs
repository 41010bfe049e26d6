//! One training step as the estimates see it (docs/estimates.md): the kernels
//! it runs, derived from a model's layers and the batch's exact shapes
//! ([`kernels`]), and their time and the run's peak memory on a device with
//! its calibrated model ([`cost`]).

pub mod cost;
pub mod kernels;
