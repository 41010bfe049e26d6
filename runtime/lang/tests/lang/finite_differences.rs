//! The one finite-difference gradient checker of the integration tests: it
//! compares `grad(loss, name)`, through the real interpreter, with central
//! differences of the loss evaluated in float32.
//!
//! The tolerance |analytic − numeric| ≤ 2e-2·max(|a|, |n|) + 5e-3 covers the
//! O(h²) truncation error and the float32 rounding of the loss divided by 2h.

use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::{Array, Value};

use crate::common::run_value;

/// One check: after `setup`, the gradient of the scalar `loss` with respect
/// to each variable of `wrt`.
pub struct Check<'a> {
    /// Statements that define the variables and models.
    pub setup: &'a str,
    /// A scalar expression.
    pub loss: String,
    /// The variables to differentiate by.
    pub wrt: &'a [&'a str],
    /// Evaluate the loss and the gradient inside `train 1 { … }` (training mode:
    /// dropout active).
    pub training: bool,
    /// The finite-difference step.
    pub h: f32,
    /// How many elements of each variable to probe at most (evenly spaced).
    pub points: usize,
    /// Whether an all-zero gradient is a failure (a check that tests nothing).
    pub nonzero: bool,
}

fn array(it: &Interp, name: &str) -> Array {
    match it.ws.get(name) {
        Some(Value::Array(a)) => a.clone(),
        other => panic!("`{name}` is {other:?}"),
    }
}

impl Check<'_> {
    fn loss_value(&self, it: &mut Interp) -> f64 {
        if self.training {
            run_value(it, &format!("train 1 {{ L__ = {}; L__ }}", self.loss));
            array(it, "L__").scalar_value().unwrap()
        } else {
            run_value(it, &self.loss)
                .as_array()
                .unwrap()
                .scalar_value()
                .unwrap()
        }
    }

    fn gradient(&self, it: &mut Interp, name: &str) -> Vec<f64> {
        let src = format!("grad({}, {name})", self.loss);
        if self.training {
            run_value(it, &format!("train 1 {{ G__ = {src}; 0 }}"));
            array(it, "G__").to_f64()
        } else {
            run_value(it, &src).as_array().unwrap().to_f64()
        }
    }

    /// Runs the check; panics with the first element that disagrees.
    pub fn run(&self) {
        let mut it = Interp::new(Workspace::new());
        run_value(&mut it, self.setup);
        for &name in self.wrt {
            let g = self.gradient(&mut it, name);
            let w = array(&it, name);
            assert_eq!(g.len(), w.numel(), "{name}: gradient size");
            let base = w.to_f32();
            let stride = (base.len() / self.points.max(1)).max(1);
            let mut nonzero = false;
            for i in (0..base.len()).step_by(stride) {
                let mut at = |delta: f32| {
                    let mut d = base.clone();
                    d[i] += delta;
                    let a = Array::from_vec(w.shape().to_vec(), d)
                        .with_names(w.names().map(|n| n.to_vec()));
                    it.ws.bindings.insert(name.into(), Value::Array(a));
                    self.loss_value(&mut it)
                };
                let numeric = (at(self.h) - at(-self.h)) / (2.0 * self.h as f64);
                let analytic = g[i];
                nonzero |= analytic.abs() > 1e-6;
                let tol = 2e-2 * analytic.abs().max(numeric.abs()) + 5e-3;
                assert!(
                    (analytic - numeric).abs() <= tol,
                    "{} / {}: d/d{name}[{i}]: analytic {analytic} vs numeric {numeric}",
                    self.setup,
                    self.loss
                );
            }
            it.ws.bindings.insert(name.into(), Value::Array(w));
            assert!(
                nonzero || !self.nonzero,
                "{}: the gradient for {name} is all zero",
                self.setup
            );
        }
    }
}
