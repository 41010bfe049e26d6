//! Feasibility estimates (LANGUAGE §15): parameters, memory, FLOPs and time for a
//! training run. Pure functions shared by the runtime builtins and the editor's
//! hovers, so both show the same numbers.

pub mod calibration;
pub mod hypothetical;
pub mod spec;

/// The default throughput in GFLOPS when none is configured (LANGUAGE §15.1).
pub const DEFAULT_GFLOPS: f64 = 50.0;

/// The five numbers `estimate_train` and `estimate_hypothetical` return.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Parameter count.
    pub params: f64,
    /// Bytes of device memory: weights, gradients, two Adam moments, activations.
    pub vram_bytes: f64,
    /// Bytes on disk for a checkpoint.
    pub disk_bytes: f64,
    /// FLOPs for all steps.
    pub flops: f64,
    /// Seconds at the given throughput.
    pub wall_seconds: f64,
}

impl Estimate {
    /// The `[5]` layout of LANGUAGE §15.1.
    pub fn to_array(self) -> [f64; 5] {
        [
            self.params,
            self.vram_bytes,
            self.disk_bytes,
            self.flops,
            self.wall_seconds,
        ]
    }
}

/// Whether an estimate respects a budget `[vram, disk, wall]`; zero entries are
/// not checked (LANGUAGE §15.5).
pub fn feasible(est: &[f64; 5], budget: &[f64; 3]) -> bool {
    (budget[0] == 0.0 || est[1] <= budget[0])
        && (budget[1] == 0.0 || est[2] <= budget[1])
        && (budget[2] == 0.0 || est[4] <= budget[2])
}

/// The matrices `calibrate_device` multiplies: Aᵢ = (i mod 97)·0.01, Bᵢ = (i mod 89)·0.01.
pub fn calibration_matrices(size: usize) -> (Vec<f32>, Vec<f32>) {
    let n = size * size;
    let a = (0..n).map(|i| ((i % 97) as f64 * 0.01) as f32).collect();
    let b = (0..n).map(|i| ((i % 89) as f64 * 0.01) as f32).collect();
    (a, b)
}
