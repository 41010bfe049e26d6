//! Tests of the tape: a finite-difference gradient check for every op (on
//! broadcasting and batched shapes), composite models (an MLP, causal
//! self-attention, a tiny transformer) and the tape's own behaviour
//! (accumulation, non-scalar losses, zeros for unreached leaves).
//!
//! How [`check`] works: the op under test builds `y` from leaves; the tape
//! differentiates `L = sum(y · R)` for a fixed random `R` of `y`'s shape (a
//! random projection, so that outputs whose plain sum is constant, like
//! softmax, still test their gradient); the numeric side evaluates the same
//! `L` in f64 on the host from f32 forward values, with central differences.
//!
//! Tolerance: `|analytic − numeric| ≤ RTOL·max(|analytic|, |numeric|) + ATOL`
//! with RTOL = 1e-2 and ATOL = 1e-3, at step H = 1e-2.
//! - Truncation: the central difference errs by h²/6·|L'''| ≈ 2e-5·|L'''|,
//!   far inside RTOL for the O(1)-curvature functions tested (inputs are
//!   kept away from kinks, poles and the edges of domains by more than H).
//! - Rounding: the actual step `(x ± h)_f32 − x` is used as the denominator,
//!   so input rounding does not count. The f32 forward values carry a relative
//!   error of a few ulps (≈ 1e-7·|y|); only outputs that depend on the
//!   perturbed element change (the kernels are deterministic, so the others
//!   cancel exactly), so the numeric derivative's noise is about
//!   √m·1e-7·|y|·|R| / 2h ≈ 1e-4 for the m ≤ 100 outputs of magnitude ≤ 10
//!   used here: ATOL leaves a 10× margin.

mod attention;
mod composite;
mod elementwise;
mod fused;
mod layout;
mod linalg;
mod nn;
mod reduce;
mod tape;

use super::{Tape, Var};
use mlpl_devices::{cpu, Result, Tensor};

/// Central-difference step (see the module docs).
pub(super) const H: f32 = 1e-2;
/// Relative tolerance of [`check`].
pub(super) const RTOL: f64 = 1e-2;
/// Absolute tolerance of [`check`].
pub(super) const ATOL: f64 = 1e-3;

/// A small deterministic generator (xorshift64*), so tests need no extra crate.
pub(super) struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A generator seeded from a test name.
    pub(super) fn named(name: &str) -> Rng {
        let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        Rng::new(h)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform on [0, 1).
    pub(super) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform on [lo, hi).
    pub(super) fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.uniform() as f32
    }

    /// Standard normal (Box–Muller).
    pub(super) fn normal(&mut self) -> f32 {
        let u = self.uniform().max(1e-300);
        let v = self.uniform();
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }

    /// A tensor of `shape` uniform on [lo, hi).
    pub(super) fn tensor(&mut self, shape: &[usize], lo: f32, hi: f32) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_vec(shape.to_vec(), (0..n).map(|_| self.range(lo, hi)).collect())
    }

    /// A tensor of `shape` with |v| uniform on [lo, hi) and a random sign.
    pub(super) fn signed(&mut self, shape: &[usize], lo: f32, hi: f32) -> Tensor {
        let n = shape.iter().product();
        let v = (0..n)
            .map(|_| {
                let m = self.range(lo, hi);
                if self.uniform() < 0.5 {
                    -m
                } else {
                    m
                }
            })
            .collect();
        Tensor::from_vec(shape.to_vec(), v)
    }

    /// A tensor of `shape` drawn from N(0, scale²).
    pub(super) fn normal_tensor(&mut self, shape: &[usize], scale: f32) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_vec(
            shape.to_vec(),
            (0..n).map(|_| scale * self.normal()).collect(),
        )
    }

    /// `n` integer ids in [0, k) as f32.
    pub(super) fn ids(&mut self, shape: &[usize], k: usize) -> Tensor {
        let n = shape.iter().product();
        let v = (0..n)
            .map(|_| ((self.uniform() * k as f64) as usize).min(k - 1) as f32)
            .collect();
        Tensor::from_vec(shape.to_vec(), v)
    }
}

/// Builds the tested function on a tape from its input leaves.
pub(super) type Build<'a> = dyn Fn(&mut Tape, &[Var]) -> Result<Var> + 'a;

/// Checks the tape's gradients of `sum(f(inputs) · R)` against central
/// differences for every input flagged `true` (the others are constants), and
/// returns the analytic gradients (`None` for constants). Panics on a mismatch.
pub(super) fn check(name: &str, inputs: &[(Tensor, bool)], f: &Build<'_>) -> Vec<Option<Tensor>> {
    check_with(name, inputs, f, H, RTOL, ATOL)
}

/// [`check`] with an explicit step and tolerances.
pub(super) fn check_with(
    name: &str,
    inputs: &[(Tensor, bool)],
    f: &Build<'_>,
    h: f32,
    rtol: f64,
    atol: f64,
) -> Vec<Option<Tensor>> {
    let be = cpu();
    let mut tape = Tape::new(be.clone());
    let vars: Vec<Var> = inputs
        .iter()
        .map(|(t, g)| tape.leaf(t.clone(), *g))
        .collect();
    let y = f(&mut tape, &vars).expect("forward");
    let proj = Rng::named(name).tensor(tape.shape(y), -1.0, 1.0);
    let p = tape.constant(proj.clone());
    let yp = tape.mul(y, p).unwrap();
    let loss = tape.sum(yp, None).unwrap();
    let grads = tape.backward(loss).expect("backward");

    // L on a fresh tape with every input constant (also exercises the no-grad path).
    let eval = |xs: &[Tensor]| -> f64 {
        let mut t = Tape::new(be.clone());
        let vs: Vec<Var> = xs.iter().map(|x| t.leaf(x.clone(), false)).collect();
        let y = f(&mut t, &vs).expect("forward");
        assert!(!t.requires_grad(y));
        t.value(y)
            .unwrap()
            .host()
            .iter()
            .zip(proj.host())
            .map(|(&a, &b)| a as f64 * b as f64)
            .sum()
    };

    let mut out = Vec::new();
    for (i, (x, wrt)) in inputs.iter().enumerate() {
        if !*wrt {
            out.push(None);
            continue;
        }
        let a = grads[vars[i]].clone();
        assert_eq!(a.shape(), x.shape(), "{name}: gradient shape of input {i}");
        let mut xs: Vec<Tensor> = inputs.iter().map(|(t, _)| t.clone()).collect();
        for j in 0..x.numel() {
            let x0 = x.host()[j];
            let (xp, xm) = (x0 + h, x0 - h);
            xs[i] = with_element(x, j, xp);
            let fp = eval(&xs);
            xs[i] = with_element(x, j, xm);
            let fm = eval(&xs);
            xs[i] = x.clone();
            let num = (fp - fm) / (xp as f64 - xm as f64);
            let ana = a.host()[j] as f64;
            let err = (ana - num).abs();
            let bound = rtol * ana.abs().max(num.abs()) + atol;
            assert!(
                err <= bound,
                "{name}: input {i} {:?} element {j}: analytic {ana}, numeric {num} (error {err:.3e} > {bound:.3e})",
                x.shape()
            );
        }
        out.push(Some(a));
    }
    out
}

/// A copy of `x` with element `j` set to `v`.
fn with_element(x: &Tensor, j: usize, v: f32) -> Tensor {
    let mut d = x.to_vec();
    d[j] = v;
    Tensor::from_vec(x.shape().to_vec(), d)
}

/// Asserts that two slices agree within `tol` (absolute), naming `what`.
pub(super) fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}
