//! `lora(m, rank, alpha, seed)` (LANGUAGE §11.7): clone m, wrap every linear
//! layer (depth first, counter i from 0) with adapters A = randn(seed + i,
//! [in, r])/√in and B = 0 placed like W, and freeze every student parameter that
//! is not an adapter.

use std::collections::HashMap;
use std::sync::Arc;

use super::clone::clone_model;
use super::init::{bind_param, filled, inv_sqrt, next_id, randn_scaled};
use super::layers::*;
use crate::eval::Interp;
use crate::value::Value;

/// The LoRA student of `m`; the caller has checked `rank` (1 ≤ rank ≤ min(in, out)
/// of every linear layer) and that `m` has no adapters
/// (`builtins::site::check_lora_rank`, `check_not_lora_student`).
pub fn lora(it: &mut Interp, m: &Arc<Layer>, rank: usize, alpha: f64, seed: u64) -> Arc<Layer> {
    let cloned = clone_model(it, m);
    let mut ctx = Rewrite {
        rank,
        alpha,
        seed,
        counter: 0,
        done: HashMap::new(),
    };
    let student = ctx.rewrite(it, &cloned);
    for name in student.parameters() {
        if !(name.starts_with("__lora_A_") || name.starts_with("__lora_B_")) {
            it.ws.frozen.insert(name);
        }
    }
    student
}

struct Rewrite {
    rank: usize,
    alpha: f64,
    seed: u64,
    counter: u64,
    done: HashMap<*const Layer, Arc<Layer>>,
}

impl Rewrite {
    fn rewrite(&mut self, it: &mut Interp, layer: &Arc<Layer>) -> Arc<Layer> {
        let key = Arc::as_ptr(layer);
        if let Some(done) = self.done.get(&key) {
            return done.clone();
        }
        let out = match &**layer {
            Layer::Linear(l) => Arc::new(self.wrap(it, *l)),
            Layer::Chain(children) => Arc::new(Layer::Chain(
                children.iter().map(|c| self.rewrite(it, c)).collect(),
            )),
            Layer::Residual(inner) => Arc::new(Layer::Residual(self.rewrite(it, inner))),
            _ => layer.clone(),
        };
        self.done.insert(key, out.clone());
        out
    }

    fn wrap(&mut self, it: &mut Interp, base: Linear) -> Layer {
        let l = Lora {
            base,
            adapter_id: next_id(it),
            rank: self.rank,
            alpha: self.alpha,
        };
        let placement = match it.ws.get(&base.w()) {
            Some(Value::Array(w)) => w.placement(),
            _ => crate::value::Placement::Floating,
        };
        let seed = self.seed.wrapping_add(self.counter);
        self.counter += 1;
        let a = randn_scaled(seed, &[base.inp, self.rank], inv_sqrt(base.inp));
        let b = filled(&[self.rank, base.out], 0.0);
        bind_param(it, &l.a(), a.with_placement(placement));
        bind_param(it, &l.b_adapter(), b.with_placement(placement));
        Layer::Lora(l)
    }
}
