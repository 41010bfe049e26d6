//! Layout kernels: axis permutation and summing a broadcast gradient back down
//! to an operand's shape.

use super::{for_chunks, pool, reduce, row_chunk, PAR_THRESHOLD};
use crate::shape::{broadcast_strides, coalesce, contiguous_strides, offset_of};
use crate::tensor::{numel_of, Tensor};
use rayon::prelude::*;

/// Output rows per band in the blocked transpose.
const BAND: usize = 256;

/// Columns per tile in the blocked transpose.
const TILE: usize = 8;

/// General axis permutation: result axis i is input axis `perm[i]`.
///
/// The iteration is coalesced first, then: an order-preserving permutation is a
/// reshape (no copy); one that keeps the innermost axis copies whole rows; one
/// whose innermost input axis lands second-to-last is a blocked transpose;
/// anything else gathers element by element. Panics if `perm` is not a
/// permutation of the axes.
pub(crate) fn permute(x: &Tensor, perm: &[usize]) -> Tensor {
    let shape = x.shape();
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
    let (cshape, cstrides) = coalesce(&out_shape, &[in_strides]);
    let strides = &cstrides[0];
    let r = cshape.len();
    if r == 1 && (strides[0] == 1 || cshape[0] == 1) || x.numel() == 0 {
        return x.reshape(out_shape);
    }
    let src = x.host();
    // Every branch below writes every element.
    let mut out = pool::scratch(src.len());
    let par = src.len() >= PAR_THRESHOLD;
    let row = cshape[r - 1];
    let s_last = strides[r - 1];
    let (outer, so) = (&cshape[..r - 1], &strides[..r - 1]);
    if s_last == 1 {
        for_chunks(&mut out, row_chunk(row), par, |s, o| {
            for (j, orow) in o.chunks_mut(row).enumerate() {
                let p = offset_of(s / row + j, outer, so);
                orow.copy_from_slice(&src[p..p + row]);
            }
        });
    } else if r >= 2 && strides[r - 2] == 1 {
        // Output [outer..., q, row] with input strides [.., 1, s_last].
        let q = cshape[r - 2];
        let (outer2, so2) = (&cshape[..r - 2], &strides[..r - 2]);
        let band = |o: usize, q0: usize, dst: &mut [f32]| {
            let base = offset_of(o, outer2, so2) + q0;
            let bq = dst.len() / row;
            // Tiles of BAND x TILE keep both the reads and the writes in cache.
            for j0 in (0..row).step_by(TILE) {
                let j1 = (j0 + TILE).min(row);
                for t in 0..bq {
                    let d = &mut dst[t * row + j0..t * row + j1];
                    for (jj, v) in d.iter_mut().enumerate() {
                        *v = src[base + (j0 + jj) * s_last + t];
                    }
                }
            }
        };
        let each = |(o, plane): (usize, &mut [f32])| {
            for (b, dst) in plane.chunks_mut(BAND * row).enumerate() {
                band(o, b * BAND, dst);
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
            out.chunks_mut(q * row).enumerate().for_each(each);
        }
    } else {
        for_chunks(&mut out, row_chunk(row), par, |s, o| {
            for (j, orow) in o.chunks_mut(row).enumerate() {
                let p = offset_of(s / row + j, outer, so);
                for (i, d) in orow.iter_mut().enumerate() {
                    *d = src[p + i * s_last];
                }
            }
        });
    }
    out.into_tensor(out_shape)
}

/// Sums `g` (of a broadcast shape) down to `shape`: over the leading axes `shape`
/// lacks and over the axes where `shape` has size 1 and `g` does not. Accumulates
/// in f64. Panics if `shape` does not broadcast to `g`'s shape.
pub(crate) fn sum_to_shape(g: &Tensor, shape: &[usize]) -> Tensor {
    let gs = g.shape();
    if gs == shape {
        return g.clone();
    }
    assert!(
        shape.len() <= gs.len()
            && shape
                .iter()
                .zip(&gs[gs.len() - shape.len()..])
                .all(|(&t, &d)| t == d || t == 1),
        "sum_to_shape: {shape:?} does not broadcast to {gs:?}"
    );
    let n_out = numel_of(shape);
    if n_out == g.numel() {
        return g.reshape(shape.to_vec());
    }
    if n_out == 1 {
        return Tensor::from_vec(shape.to_vec(), vec![reduce::sum_all(g.host())]);
    }
    if g.numel() == 0 {
        return Tensor::zeros(shape.to_vec());
    }
    let kept = broadcast_strides(shape, gs);
    let (cshape, cstrides) = coalesce(gs, &[kept]);
    let os = &cstrides[0];
    let src = g.host();
    // Coalesced to [summed, kept] or [kept, summed]: one parallel axis reduction.
    if cshape.len() == 2 && (os[0] == 0) != (os[1] == 0) {
        let axis = if os[0] == 0 { 0 } else { 1 };
        return reduce::sum_axis(src, &cshape, axis).reshape(shape.to_vec());
    }
    let r = cshape.len();
    let row = cshape[r - 1];
    let (outer, oso) = (&cshape[..r - 1], &os[..r - 1]);
    let mut acc = vec![0.0f64; n_out];
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
    let mut out = pool::scratch(n_out);
    for (d, a) in out.iter_mut().zip(acc) {
        *d = a as f32;
    }
    out.into_tensor(shape.to_vec())
}
