//! The reverse pass: [`Tape::backward`] and [`Tape::backward_releasing`].

use super::grads::Grads;
use super::tape::{Ctx, Input, Rule, Slot, Tape, Var};
use mlpl_devices::{Result, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

impl Tape {
    /// The gradients of `loss` with respect to every leaf that requires one.
    ///
    /// `loss` should be a scalar; when it is not, the sum of its elements is
    /// differentiated (LANGUAGE §12.2, W0301): the seed gradient is all ones in
    /// the loss's shape.
    ///
    /// Backward rules run in reverse recording order, which is a reverse
    /// topological order of the graph, each through the tape's backend, and
    /// only for nodes that depend on a trainable leaf; a rule computes
    /// gradients only for the inputs that need one. A node's contributions are
    /// summed (one backend `Add` per extra use) before its own rule runs, so a
    /// value used several times (including twice by one op, as in `x * x`)
    /// accumulates every contribution. Gradients of broadcast operands are
    /// summed back to the operand's shape with `sum_to_shape` by the rules.
    ///
    /// Every leaf that requires a gradient gets one in the result; leaves the
    /// loss does not depend on (including leaves recorded after it) get zeros.
    /// The tape is not consumed: `backward` may be called again, for the same
    /// or another loss.
    pub fn backward(&self, loss: Var) -> Result<Grads> {
        let values = self.nodes.iter().map(|n| n.slot.get()).collect();
        let rules = self.nodes.iter().map(|n| n.rule.clone()).collect();
        self.reverse(loss, values, rules)
    }

    /// [`Tape::backward`], consuming the tape: each value of the loss is
    /// released as soon as the last rule that reads it has run, and each
    /// rule's saved state (statistics, indices) once it has run, so the pass
    /// holds no more than what is still ahead of it (PyTorch's `backward`
    /// without `retain_graph`). The gradients are the same.
    pub fn backward_releasing(mut self, loss: Var) -> Result<Grads> {
        let mut values = Vec::with_capacity(self.nodes.len());
        let mut rules = Vec::with_capacity(self.nodes.len());
        for n in &mut self.nodes {
            values.push(n.slot.get());
            if !n.is_leaf {
                if let Slot::Held(t) = &n.slot {
                    n.slot = Slot::Weak(t.downgrade());
                }
            }
            rules.push(n.rule.take());
        }
        self.reverse(loss, values, rules)
    }

    /// The reverse pass over `values` (each node's value, while alive) and
    /// `rules` (each node's rule), dropping each value once no rule still to
    /// run reads it and each rule once it ran: with the tape still holding
    /// them ([`Tape::backward`]) that frees nothing early.
    fn reverse(
        &self,
        loss: Var,
        mut values: Vec<Option<Tensor>>,
        mut rules: Vec<Option<Arc<dyn Rule>>>,
    ) -> Result<Grads> {
        let k = self.k();
        let n = loss.0 + 1;
        // How many rules still to run read each value (a leaf's is kept).
        let mut readers = vec![0usize; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().take(n) {
            let Some(rule) = &rules[i] else { continue };
            let reads = rule.reads();
            readers[i] += usize::from(reads.out());
            for (j, v) in node.inputs.iter().enumerate() {
                readers[v.0] += usize::from(reads.input(j));
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            // Values no rule reads, and those recorded after the loss (not
            // differentiated), are not needed; leaves are kept.
            if !node.is_leaf && (i >= n || readers[i] == 0) {
                values[i] = None;
            }
        }
        let mut pending: Vec<Option<Tensor>> = vec![None; n];
        let mut out: HashMap<Var, Tensor> = HashMap::new();
        if self.nodes[loss.0].requires_grad {
            pending[loss.0] = Some(k.ones(self.shape(loss))?);
        }
        for i in (0..n).rev() {
            let Some(g) = pending[i].take() else { continue };
            let node = &self.nodes[i];
            if node.is_leaf {
                out.insert(Var(i), g);
                continue;
            }
            let rule = rules[i]
                .take()
                .expect("a node that requires a gradient has a rule");
            let inputs: Vec<Input> = node
                .inputs
                .iter()
                .map(|v| Input {
                    value: values[v.0].clone(),
                    shape: self.shape(*v).to_vec(),
                })
                .collect();
            let need: Vec<bool> = node.inputs.iter().map(|v| self.requires_grad(*v)).collect();
            let dx = {
                let cx = Ctx {
                    k,
                    inputs: &inputs,
                    out: values[i].as_ref(),
                    need: &need,
                };
                rule.backward(&cx, &g)?
            };
            drop(g);
            drop(inputs);
            let reads = rule.reads();
            drop(rule);
            // The rule ran: it reads its values no more.
            if reads.out() {
                release(&mut values, &mut readers, i, node.is_leaf);
            }
            for (j, v) in node.inputs.iter().enumerate() {
                if reads.input(j) {
                    release(&mut values, &mut readers, v.0, self.nodes[v.0].is_leaf);
                }
            }
            if readers[i] == 0 {
                values[i] = None;
            }
            debug_assert_eq!(dx.len(), node.inputs.len(), "{i}: gradient count");
            for ((v, d), needed) in node.inputs.iter().zip(dx).zip(&need) {
                let Some(d) = d else { continue };
                if !*needed {
                    continue;
                }
                assert_eq!(
                    d.shape(),
                    self.shape(*v),
                    "node {i}: gradient shape differs from its input's"
                );
                pending[v.0] = Some(match pending[v.0].take() {
                    Some(acc) => k.add(&acc, &d)?,
                    None => d,
                });
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if node.is_leaf && node.requires_grad && !out.contains_key(&Var(i)) {
                out.insert(Var(i), k.zeros(self.shape(Var(i)))?);
            }
        }
        Ok(Grads::from_map(out))
    }
}

/// One reader of value `v` is done: drops the value (unless a leaf) once no
/// rule still to run reads it.
fn release(values: &mut [Option<Tensor>], readers: &mut [usize], v: usize, leaf: bool) {
    readers[v] = readers[v].saturating_sub(1);
    if readers[v] == 0 && !leaf {
        values[v] = None;
    }
}
