//! The two differentiable steps of a routed mixture of experts (`nn::moe`)
//! that plain ops cannot express with the dense evaluation's exact sums.
//!
//! | Op | Forward | Gradient(s) |
//! |---|---|---|
//! | `dispatch(x, rows, slots)` | `gather_rows(x, rows)`: the token rows each expert block reads | `Σ_j gather_rows(g, slots)[j]`: each token's `k` copies summed in f64, in the order of `slots` |
//! | `expert_matmul(x, w)` | `x [C, E, m, a] · w [E, a, b]`, batched | `g·wᵀ`; and for `w` one product per leading index `c` (`x[c]ᵀ·g[c]`), added in increasing `c` in f32 |
//!
//! Both sums are those of the dense evaluation of every expert on every token:
//! there, a token's input gradient is summed over the experts in f64 by
//! `sum_to_shape`, and an expert's weight gradient is one product over all
//! tokens, which the CPU's GEMM computes as one chain per block of
//! [`KC`](mlpl_devices::cpu::KC) tokens, the blocks' results added in order. With
//! the blocks of tokens as the leading index `c`, the routed gradients are the
//! dense ones bit for bit (rows that are not routed only add zeros there).

use crate::autograd::tape::{Ctx, Rule, Tape, Var};
use mlpl_devices::{ReduceOp, Result, Tensor};

/// Backward of [`Tape::dispatch`]: where each token's copies are, `[k, n]`.
#[derive(Debug)]
struct DispatchRule {
    slots: Tensor,
}

impl Rule for DispatchRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let copies = cx.k.0.gather_rows(g, &self.slots)?;
        Ok(vec![Some(cx.k.reduce(ReduceOp::Sum, &copies, Some(0))?)])
    }
}

/// Backward of [`Tape::expert_matmul`].
#[derive(Debug)]
struct ExpertMatmulRule;

impl Rule for ExpertMatmulRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let be = cx.k.0;
        let (x, w) = (cx.input(0)?, cx.input(1)?);
        let dx = if cx.need[0] {
            Some(be.matmul_t(g, w, false, true)?)
        } else {
            None
        };
        let dw = if cx.need[1] {
            let s = x.shape();
            let (blocks, e, m, a) = (s[0], s[1], s[2], s[3]);
            let b = w.shape()[2];
            let block = |t: &Tensor, c: usize, cols: usize| -> Result<Tensor> {
                if blocks == 1 {
                    return Ok(t.reshape(vec![e, m, cols]));
                }
                let one = be.slice_axis(t, 0, c, 1, 1)?;
                Ok(one.reshape(vec![e, m, cols]))
            };
            let mut acc: Option<Tensor> = None;
            for c in 0..blocks {
                let p = be.matmul_t(&block(x, c, a)?, &block(g, c, b)?, true, false)?;
                acc = Some(match acc {
                    Some(sum) => cx.k.add(&sum, &p)?,
                    None => p,
                });
            }
            Some(match acc {
                Some(sum) => sum,
                None => cx.k.zeros(w.shape())?,
            })
        } else {
            None
        };
        Ok(vec![dx, dw])
    }
}

impl Tape {
    /// The rows of `x: [n, d]` listed by the constant integer-valued `rows`
    /// (each in `[0, n)`) → `[rows.len(), d]`. `slots: [k, n]` names, for
    /// every token, the `k` positions of `rows` whose gradients are its own
    /// (every other position's gradient is dropped: padding); those are summed
    /// in f64 in the order of `slots`.
    ///
    /// Panics if `x` is not of rank 2.
    pub fn dispatch(&mut self, x: Var, rows: &Tensor, slots: &Tensor) -> Result<Var> {
        let s = self.shape(x);
        assert_eq!(s.len(), 2, "dispatch: x {s:?} is not [n, d]");
        let y = self.backend().gather_rows(&self.value(x)?, rows)?;
        let rule = DispatchRule {
            slots: slots.clone(),
        };
        Ok(self.record(y, &[x], Box::new(rule)))
    }

    /// The batched product `x: [C, E, m, a]` · `w: [E, a, b]` → `[C, E, m, b]`,
    /// whose gradient for `w` adds the products of the `C` blocks in order
    /// (f32), as a GEMM adds its blocks of `k`, instead of summing the
    /// broadcast axis in f64 as [`Tape::matmul`] does.
    ///
    /// Panics unless `x` has rank 4, `w` rank 3, and their `E` and `a` agree.
    pub fn expert_matmul(&mut self, x: Var, w: Var) -> Result<Var> {
        let (sx, sw) = (self.shape(x), self.shape(w));
        assert!(
            sx.len() == 4 && sw.len() == 3 && sx[1] == sw[0] && sx[3] == sw[1],
            "expert_matmul: x {sx:?} and w {sw:?} are not [C, E, m, a] and [E, a, b]"
        );
        let y = self.backend().matmul(&self.value(x)?, &self.value(w)?)?;
        Ok(self.record(y, &[x, w], Box::new(ExpertMatmulRule)))
    }
}
