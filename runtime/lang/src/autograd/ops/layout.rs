//! Layout ops: reshape, axis permutation and transpose, and concatenation of
//! vectors.
//!
//! Backward: reshape → reshape `g` back (no kernel); permute → permute `g` by
//! the inverse permutation; concat → `gather_rows` of `g` (viewed as `[n, 1]`)
//! at each operand's positions. The backend has no concatenation kernel, so
//! the forward of concat is composed as two `scatter_add_rows` into
//! `[len(a) + len(b), 1]` and an `add`.

use crate::autograd::tape::{Ctx, Reads, Rule, Tape, Var};
use mlpl_devices::{Result, Tensor};

/// The element count of `shape` (1 for `[]`).
fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Backward of [`Tape::reshape`].
#[derive(Debug)]
struct ReshapeRule;

impl Rule for ReshapeRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.reshape(cx.shape(0).to_vec()))])
    }

    fn reads(&self) -> Reads {
        Reads::NONE
    }
}

/// Backward of [`Tape::permute`]: the inverse permutation.
#[derive(Debug)]
struct PermuteRule {
    inverse: Vec<usize>,
}

impl Rule for PermuteRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(cx.k.0.permute(g, &self.inverse)?)])
    }

    fn reads(&self) -> Reads {
        Reads::NONE
    }
}

/// Backward of [`Tape::concat`]: the positions of each operand's elements in the result.
#[derive(Debug)]
struct ConcatRule {
    ids_a: Tensor,
    ids_b: Tensor,
}

impl Rule for ConcatRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let be = cx.k.0;
        let g2 = g.reshape(vec![g.numel(), 1]);
        let part = |need: bool, ids: &Tensor, x: &Tensor| -> Result<Option<Tensor>> {
            if !need {
                return Ok(None);
            }
            Ok(Some(be.gather_rows(&g2, ids)?.reshape(x.shape().to_vec())))
        };
        Ok(vec![
            part(cx.need[0], &self.ids_a, cx.input(0)?)?,
            part(cx.need[1], &self.ids_b, cx.input(1)?)?,
        ])
    }
}

impl Tape {
    /// The same elements with shape `shape` (row-major order kept).
    ///
    /// Panics if the element counts differ.
    pub fn reshape(&mut self, x: Var, shape: Vec<usize>) -> Result<Var> {
        let xs = self.shape(x);
        assert_eq!(numel(&shape), numel(xs), "reshape: {xs:?} to {shape:?}");
        let y = self.value(x)?.reshape(shape);
        Ok(self.record(y, &[x], Box::new(ReshapeRule)))
    }

    /// Axis permutation: result axis `i` is input axis `perm[i]`.
    ///
    /// Panics if `perm` is not a permutation of `x`'s axes.
    pub fn permute(&mut self, x: Var, perm: &[usize]) -> Result<Var> {
        let r = self.shape(x).len();
        let mut inverse = vec![usize::MAX; r];
        assert_eq!(perm.len(), r, "permute: {perm:?} for rank {r}");
        for (i, &p) in perm.iter().enumerate() {
            assert!(
                p < r && inverse[p] == usize::MAX,
                "permute: {perm:?} is not a permutation"
            );
            inverse[p] = i;
        }
        let y = self.backend().permute(&self.value(x)?, perm)?;
        Ok(self.record(y, &[x], Box::new(PermuteRule { inverse })))
    }

    /// All axes reversed (the language's `transpose`; rank ≤ 1 is unchanged).
    pub fn transpose(&mut self, x: Var) -> Result<Var> {
        let perm: Vec<usize> = (0..self.shape(x).len()).rev().collect();
        self.permute(x, &perm)
    }

    /// The last two axes swapped (`[..., m, n]` → `[..., n, m]`), as attention
    /// needs for `K`ᵀ. Panics for rank < 2.
    pub fn transpose_last2(&mut self, x: Var) -> Result<Var> {
        let r = self.shape(x).len();
        assert!(r >= 2, "transpose_last2: rank {r} < 2");
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        self.permute(x, &perm)
    }

    /// `[len(a) + len(b)]`: `a`'s elements then `b`'s, for `a` and `b` of rank
    /// ≤ 1 (a scalar counts as one element; LANGUAGE §10.1).
    ///
    /// Panics if an operand has rank > 1.
    pub fn concat(&mut self, a: Var, b: Var) -> Result<Var> {
        let (sa, sb) = (self.shape(a), self.shape(b));
        assert!(
            sa.len() <= 1 && sb.len() <= 1,
            "concat: operands {sa:?} and {sb:?} must have rank <= 1"
        );
        let (na, nb) = (numel(sa), numel(sb));
        let n = na + nb;
        let k = self.k();
        let ids = |from: usize, len: usize| {
            let v: Vec<f32> = (from..from + len).map(|i| i as f32).collect();
            k.0.upload(&Tensor::from_vec(vec![len], v))
        };
        let (ids_a, ids_b) = (ids(0, na)?, ids(na, nb)?);
        let (va, vb) = (self.value(a)?, self.value(b)?);
        let pa = k.0.scatter_add_rows(&ids_a, &va.reshape(vec![na, 1]), n)?;
        let pb = k.0.scatter_add_rows(&ids_b, &vb.reshape(vec![nb, 1]), n)?;
        let y = k.add(&pa, &pb)?.reshape(vec![n]);
        Ok(self.record(y, &[a, b], Box::new(ConcatRule { ids_a, ids_b })))
    }
}
