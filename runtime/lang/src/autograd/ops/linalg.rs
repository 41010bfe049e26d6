//! Matrix multiplication.
//!
//! Backward of `y = a·b` with `a: [..., m, k]`, `b: [..., k, n]` (batch axes
//! broadcast): `da = g·bᵀ` and `db = aᵀ·g` (ᵀ swaps the last two axes; the
//! backend's `matmul_t` reads the transposed operand in place), each summed back to its operand's shape with
//! `sum_to_shape` over the broadcast batch axes. When `b` is a plain matrix
//! (the common `[B, T, d]·[d, n]` layer case), `db` is one GEMM over the
//! flattened rows instead: `reshape(a, [B·T, k])ᵀ · reshape(g, [B·T, n])`.
//!
//! [`Tape::matmul_nt`] is `a·bᵀ` with `b` read transposed in place (attention's
//! `q·kᵀ`): the same bits as permuting `b` and multiplying, without the copy
//! of `b` forward or of its gradient backward.

use crate::autograd::tape::{Ctx, Reads, Rule, Tape, Var};
use mlpl_devices::{broadcast_shapes, Result, Tensor};

/// Backward of [`Tape::matmul`] and [`Tape::matmul_nt`].
#[derive(Debug)]
struct MatmulRule {
    /// `y = a·bᵀ` ([`Tape::matmul_nt`]) rather than `a·b`.
    transpose_b: bool,
}

impl Rule for MatmulRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let k = cx.k;
        let (a, b) = (cx.input(0)?, cx.input(1)?);
        let be = k.0;
        let da = if cx.need[0] {
            // a·b: g·bᵀ; a·bᵀ: g·b.
            let d = if self.transpose_b {
                be.matmul(g, b)?
            } else {
                be.matmul_t(g, b, false, true)?
            };
            Some(k.reduce_to(&d, a.shape())?)
        } else {
            None
        };
        let db = if !cx.need[1] {
            None
        } else if self.transpose_b {
            // a·bᵀ: gᵀ·a.
            let d = be.matmul_t(g, a, true, false)?;
            Some(k.reduce_to(&d, b.shape())?)
        } else if b.rank() == 2 && a.rank() > 2 {
            let (kk, n) = (b.shape()[0], b.shape()[1]);
            let rows: usize = a.shape()[..a.rank() - 1].iter().product();
            let a2 = a.reshape(vec![rows, kk]);
            let g2 = g.reshape(vec![rows, n]);
            Some(be.matmul_t(&a2, &g2, true, false)?)
        } else {
            let d = be.matmul_t(a, g, true, false)?;
            Some(k.reduce_to(&d, b.shape())?)
        };
        Ok(vec![da, db])
    }

    fn reads(&self) -> Reads {
        Reads::inputs(&[0, 1])
    }
}

impl Tape {
    /// Matrix product `a: [..., m, k]` · `b: [..., k, n]` → `[batch..., m, n]`,
    /// both of rank ≥ 2, with the leading (batch) axes broadcast (LANGUAGE §10.4).
    ///
    /// The vector forms of the language's `matmul` (`[k]` operands, `dot`) are
    /// the caller's job: reshape a `[k]` left operand to `[1, k]` or a `[k]`
    /// right operand to `[k, 1]` with [`Tape::reshape`], multiply, and reshape
    /// the result back (dropping the added axis); the reshapes are
    /// differentiable, so gradients come back in the vector shapes.
    ///
    /// Panics if an operand has rank < 2, the inner sizes differ, or the batch
    /// axes do not broadcast.
    pub fn matmul(&mut self, a: Var, b: Var) -> Result<Var> {
        self.product(a, b, false)
    }

    /// `a·bᵀ` for `a: [..., m, k]` and `b: [..., n, k]` → `[batch..., m, n]`
    /// (batch axes broadcast), `b` read transposed where it is: bit for bit
    /// [`Tape::matmul`] of `a` and `b` with its last two axes swapped, and so
    /// are the gradients (every product sums in the GEMM's one order,
    /// whatever its operands' layouts).
    ///
    /// Panics if an operand has rank < 2, the inner sizes differ, or the batch
    /// axes do not broadcast.
    pub fn matmul_nt(&mut self, a: Var, b: Var) -> Result<Var> {
        self.product(a, b, true)
    }

    /// [`Tape::matmul`], or [`Tape::matmul_nt`] when `transpose_b`.
    fn product(&mut self, a: Var, b: Var, transpose_b: bool) -> Result<Var> {
        let op = if transpose_b { "matmul_nt" } else { "matmul" };
        let (sa, sb) = (self.shape(a), self.shape(b));
        assert!(
            sa.len() >= 2 && sb.len() >= 2,
            "{op}: operands {sa:?} and {sb:?} must have rank >= 2 (reshape vectors first)"
        );
        let inner_b = sb[sb.len() - if transpose_b { 1 } else { 2 }];
        assert_eq!(
            sa[sa.len() - 1],
            inner_b,
            "{op}: inner sizes of {sa:?} and {sb:?} differ"
        );
        assert!(
            broadcast_shapes(&sa[..sa.len() - 2], &sb[..sb.len() - 2]).is_some(),
            "{op}: batch axes of {sa:?} and {sb:?} do not broadcast"
        );
        let (va, vb) = (self.value(a)?, self.value(b)?);
        let y = if transpose_b {
            self.backend().matmul_t(&va, &vb, false, true)?
        } else {
            self.backend().matmul(&va, &vb)?
        };
        let rule = MatmulRule { transpose_b };
        Ok(self.record(y, &[a, b], Box::new(rule)))
    }
}
