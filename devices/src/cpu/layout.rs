//! Layout kernels: axis permutation and summing a broadcast gradient back down
//! to an operand's shape.

use super::transpose::transpose;
use super::{for_chunks, pool, reduce, row_chunk, PAR_THRESHOLD};
use crate::shape::{broadcast_strides, coalesce, contiguous_strides, offset_of};
use crate::tensor::{numel_of, Tensor};
use rayon::prelude::*;

/// Output rows per band in the blocked transpose.
const BAND: usize = 256;

/// Columns per tile in the blocked transpose.
const TILE: usize = 8;

/// How a permutation copies: decided once from the shape and the permutation,
/// so running it allocates nothing.
#[derive(Clone, Debug)]
enum PermuteKind {
    /// The order is preserved: a reshape (no element moves).
    Reshape,
    /// The innermost axis stays innermost: whole rows are copied.
    Rows,
    /// The innermost input axis lands second-to-last: a blocked transpose.
    Transpose,
    /// Anything else: element by element.
    Gather,
}

/// A permutation's result shape and its coalesced copy.
#[derive(Clone, Debug)]
pub(crate) struct PermutePlan {
    /// The result's shape.
    pub(crate) out_shape: Vec<usize>,
    kind: PermuteKind,
    /// The coalesced output shape (rank ≥ 1).
    cshape: Vec<usize>,
    /// The input strides over `cshape`.
    strides: Vec<usize>,
}

impl PermutePlan {
    /// The plan of permuting an array of `shape` by `perm` (result axis `i` is
    /// input axis `perm[i]`). Panics if `perm` is not a permutation of the axes.
    pub(crate) fn new(shape: &[usize], perm: &[usize]) -> PermutePlan {
        assert_eq!(
            perm.len(),
            shape.len(),
            "permute: {perm:?} for shape {shape:?}"
        );
        let mut seen = vec![false; perm.len()];
        for &p in perm {
            assert!(
                p < perm.len() && !seen[p],
                "permute: {perm:?} is not a permutation"
            );
            seen[p] = true;
        }
        let own = contiguous_strides(shape);
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let in_strides: Vec<usize> = perm.iter().map(|&p| own[p]).collect();
        let (cshape, mut cstrides) = coalesce(&out_shape, &[in_strides]);
        let strides = cstrides.swap_remove(0);
        let r = cshape.len();
        let kind = if r == 1 && (strides[0] == 1 || cshape[0] == 1) || numel_of(shape) == 0 {
            PermuteKind::Reshape
        } else if strides[r - 1] == 1 {
            PermuteKind::Rows
        } else if r >= 2 && strides[r - 2] == 1 {
            PermuteKind::Transpose
        } else {
            PermuteKind::Gather
        };
        PermutePlan {
            out_shape,
            kind,
            cshape,
            strides,
        }
    }

    /// Whether elements move (false: the permutation is a reshape).
    pub(crate) fn moves(&self) -> bool {
        !matches!(self.kind, PermuteKind::Reshape)
    }
}

/// General axis permutation: result axis i is input axis `perm[i]`.
///
/// The iteration is coalesced first, then: an order-preserving permutation is a
/// reshape (no copy); one that keeps the innermost axis copies whole rows; one
/// whose innermost input axis lands second-to-last is a blocked transpose;
/// anything else gathers element by element. Panics if `perm` is not a
/// permutation of the axes.
pub(crate) fn permute(x: &Tensor, perm: &[usize]) -> Tensor {
    let plan = PermutePlan::new(x.shape(), perm);
    if !plan.moves() {
        return x.reshape(plan.out_shape);
    }
    let mut out = pool::scratch(x.numel());
    permute_into(&plan, x.host(), &mut out);
    out.into_tensor(plan.out_shape)
}

/// The permutation `plan` describes of `src` into `out` (same length; every
/// element written; a reshape copies).
pub(crate) fn permute_into(plan: &PermutePlan, src: &[f32], out: &mut [f32]) {
    assert_eq!(src.len(), out.len(), "permute: output length differs");
    let (cshape, strides) = (&plan.cshape, &plan.strides);
    let par = src.len() >= PAR_THRESHOLD;
    let r = cshape.len();
    let row = cshape[r - 1];
    let s_last = strides[r - 1];
    let (outer, so) = (&cshape[..r - 1], &strides[..r - 1]);
    match plan.kind {
        PermuteKind::Reshape => out.copy_from_slice(src),
        PermuteKind::Rows => for_chunks(out, row_chunk(row), par, |s, o| {
            for (j, orow) in o.chunks_mut(row).enumerate() {
                let p = offset_of(s / row + j, outer, so);
                orow.copy_from_slice(&src[p..p + row]);
            }
        }),
        PermuteKind::Transpose => {
            // Output [outer..., q, row] with input strides [.., 1, s_last].
            let q = cshape[r - 2];
            let (outer2, so2) = (&cshape[..r - 2], &strides[..r - 2]);
            let band = |o: usize, q0: usize, dst: &mut [f32]| {
                let base = offset_of(o, outer2, so2) + q0;
                let bq = dst.len() / row;
                // Tiles of BAND x TILE keep both the reads and the writes in cache.
                for j0 in (0..row).step_by(TILE) {
                    let j1 = (j0 + TILE).min(row);
                    let from = &src[base + j0 * s_last..];
                    transpose(from, s_last, j1 - j0, bq, &mut dst[j0..], row);
                }
            };
            if par {
                out.par_chunks_mut(q * row)
                    .enumerate()
                    .for_each(|(o, plane)| {
                        plane
                            .par_chunks_mut(BAND * row)
                            .enumerate()
                            .for_each(|(b, dst)| band(o, b * BAND, dst));
                    });
            } else {
                for (o, plane) in out.chunks_mut(q * row).enumerate() {
                    for (b, dst) in plane.chunks_mut(BAND * row).enumerate() {
                        band(o, b * BAND, dst);
                    }
                }
            }
        }
        PermuteKind::Gather => for_chunks(out, row_chunk(row), par, |s, o| {
            for (j, orow) in o.chunks_mut(row).enumerate() {
                let p = offset_of(s / row + j, outer, so);
                for (i, d) in orow.iter_mut().enumerate() {
                    *d = src[p + i * s_last];
                }
            }
        }),
    }
}

/// How a broadcast gradient is summed down to a shape: decided once from the
/// shapes, so running it allocates nothing.
#[derive(Clone, Debug)]
enum SumKind {
    /// Nothing is summed (same element count): the elements as they are.
    Copy,
    /// Everything sums to one element.
    All,
    /// The gradient is empty: zeros.
    Zeros,
    /// Coalesced to `[summed, kept]` or `[kept, summed]`: one axis reduction.
    Axis {
        /// The coalesced two-axis shape.
        cshape: Vec<usize>,
        /// The summed axis (0 or 1).
        axis: usize,
    },
    /// Anything else: rows added into an f64 accumulator.
    General {
        /// The coalesced gradient shape.
        cshape: Vec<usize>,
        /// Strides into the result over `cshape` (0 on summed axes).
        os: Vec<usize>,
    },
}

/// Summing a gradient of one shape down to another.
#[derive(Clone, Debug)]
pub(crate) struct SumToShapePlan {
    kind: SumKind,
    /// The result's element count.
    n_out: usize,
}

impl SumToShapePlan {
    /// The plan of summing a gradient of shape `gs` down to `shape`. Panics if
    /// `shape` does not broadcast to `gs`.
    pub(crate) fn new(gs: &[usize], shape: &[usize]) -> SumToShapePlan {
        assert!(
            shape.len() <= gs.len()
                && shape
                    .iter()
                    .zip(&gs[gs.len() - shape.len()..])
                    .all(|(&t, &d)| t == d || t == 1),
            "sum_to_shape: {shape:?} does not broadcast to {gs:?}"
        );
        let n_out = numel_of(shape);
        let kind = if n_out == numel_of(gs) {
            SumKind::Copy
        } else if n_out == 1 {
            SumKind::All
        } else if numel_of(gs) == 0 {
            SumKind::Zeros
        } else {
            let kept = broadcast_strides(shape, gs);
            let (cshape, mut cstrides) = coalesce(gs, &[kept]);
            let os = cstrides.swap_remove(0);
            if cshape.len() == 2 && (os[0] == 0) != (os[1] == 0) {
                let axis = if os[0] == 0 { 0 } else { 1 };
                SumKind::Axis { cshape, axis }
            } else {
                SumKind::General { cshape, os }
            }
        };
        SumToShapePlan { kind, n_out }
    }

    /// Whether the result is the gradient's elements unchanged.
    pub(crate) fn is_copy(&self) -> bool {
        matches!(self.kind, SumKind::Copy)
    }

    /// The f64 accumulator elements [`sum_to_shape_into`] needs.
    pub(crate) fn acc_len(&self) -> usize {
        match self.kind {
            SumKind::General { .. } => self.n_out,
            _ => 0,
        }
    }
}

/// Sums `g` (of a broadcast shape) down to `shape`: over the leading axes `shape`
/// lacks and over the axes where `shape` has size 1 and `g` does not. Accumulates
/// in f64. Panics if `shape` does not broadcast to `g`'s shape.
pub(crate) fn sum_to_shape(g: &Tensor, shape: &[usize]) -> Tensor {
    if g.shape() == shape {
        return g.clone();
    }
    let plan = SumToShapePlan::new(g.shape(), shape);
    if plan.is_copy() {
        return g.reshape(shape.to_vec());
    }
    let mut acc = vec![0.0f64; plan.acc_len()];
    let mut out = pool::scratch(plan.n_out);
    sum_to_shape_into(&plan, g.host(), &mut out, &mut acc);
    out.into_tensor(shape.to_vec())
}

/// The sum `plan` describes of `src` into `out`, using `acc`
/// ([`SumToShapePlan::acc_len`] elements) as the accumulator.
pub(crate) fn sum_to_shape_into(
    plan: &SumToShapePlan,
    src: &[f32],
    out: &mut [f32],
    acc: &mut [f64],
) {
    match &plan.kind {
        SumKind::Copy => out.copy_from_slice(src),
        SumKind::All => out[0] = reduce::sum_all(src),
        SumKind::Zeros => out.fill(0.0),
        SumKind::Axis { cshape, axis } => reduce::sum_axis_into(src, cshape, *axis, out),
        SumKind::General { cshape, os } => {
            let r = cshape.len();
            let row = cshape[r - 1];
            let (outer, oso) = (&cshape[..r - 1], &os[..r - 1]);
            acc.fill(0.0);
            for (ri, grow) in src.chunks(row).enumerate() {
                let p = offset_of(ri, outer, oso);
                if os[r - 1] == 0 {
                    acc[p] += grow.iter().map(|&v| v as f64).sum::<f64>();
                } else {
                    for (a, &v) in acc[p..p + row].iter_mut().zip(grow) {
                        *a += v as f64;
                    }
                }
            }
            for (d, &a) in out.iter_mut().zip(acc.iter()) {
                *d = a as f32;
            }
        }
    }
}
