//! The reverse pass: [`Tape::backward`].

use super::grads::Grads;
use super::tape::{Ctx, Tape, Var};
use mlpl_devices::{Result, Tensor};
use std::collections::HashMap;

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
        let k = self.k();
        let n = loss.0 + 1;
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
            let rule = node
                .rule
                .as_ref()
                .expect("a node that requires a gradient has a rule");
            let inputs: Vec<&Tensor> = node.inputs.iter().map(|v| self.value(*v)).collect();
            let need: Vec<bool> = node.inputs.iter().map(|v| self.requires_grad(*v)).collect();
            let cx = Ctx {
                k,
                inputs: &inputs,
                out: &node.value,
                need: &need,
            };
            let dx = rule.backward(&cx, &g)?;
            drop(g);
            debug_assert_eq!(dx.len(), node.inputs.len(), "{rule:?}: gradient count");
            for ((v, d), needed) in node.inputs.iter().zip(dx).zip(&need) {
                let Some(d) = d else { continue };
                if !*needed {
                    continue;
                }
                assert_eq!(
                    d.shape(),
                    self.shape(*v),
                    "{rule:?}: gradient shape differs from its input's"
                );
                pending[v.0] = Some(match pending[v.0].take() {
                    Some(acc) => k.add(&acc, &d)?,
                    None => d,
                });
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if node.is_leaf && node.requires_grad && !out.contains_key(&Var(i)) {
                out.insert(Var(i), k.zeros(node.value.shape())?);
            }
        }
        Ok(Grads::from_map(out))
    }
}
