//! Neural-network kernels, one module per family (as `cuda/kernels/` is):
//! [`softmax`] (softmax, log-softmax, cross-entropy, masked softmax and
//! logsumexp), [`norm`] (RMS and layer norm), [`index`] (embedding gather and
//! scatter-add), [`activation`] (fused activation backward and bias +
//! activation), [`optim`] (Adam/AdamW), [`random`] (dropout masks) and
//! [`engram`] (hashed n-gram rows, causal convolution) and [`attention`]
//! (tiled attention, forward and backward). This
//! module holds the row walks they share.

mod activation;
mod attention;
mod engram;
mod index;
mod norm;
mod optim;
mod random;
mod softmax;

pub(crate) use activation::*;
pub(crate) use attention::*;
pub(crate) use engram::*;
pub(crate) use index::*;
pub(crate) use norm::*;
pub(crate) use optim::*;
pub(crate) use random::*;
pub(crate) use softmax::*;

use super::PAR_CHUNK;
use rayon::prelude::*;

/// Runs `f(row, out_row, a_row, b_row)` for every `d`-element row of `out` (in
/// parallel when `par`), where `a_row` and `b_row` are the row's pieces of the
/// per-row side outputs or scratch `a` and `b` (`a.len() / rows` and
/// `b.len() / rows` elements each; pass [`no_side`] for none). `rows` is the
/// row count (needed when `d` is 0).
#[allow(clippy::too_many_arguments)]
fn map_rows_with<A, B, F>(
    out: &mut [f32],
    rows: usize,
    d: usize,
    par: bool,
    a: &mut [A],
    b: &mut [B],
    f: F,
) where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [f32], &mut [A], &mut [B]) + Sync + Send,
{
    if rows == 0 {
        return;
    }
    let (wa, wb) = (a.len() / rows, b.len() / rows);
    assert!(
        wa > 0 && wb > 0 && a.len() == rows * wa && b.len() == rows * wb,
        "map_rows: side outputs of {} and {} elements for {rows} rows",
        a.len(),
        b.len()
    );
    if d == 0 {
        for (r, (ar, br)) in a.chunks_mut(wa).zip(b.chunks_mut(wb)).enumerate() {
            f(r, &mut [], ar, br);
        }
    } else if par {
        out.par_chunks_mut(d)
            .zip(a.par_chunks_mut(wa))
            .zip(b.par_chunks_mut(wb))
            .with_min_len((PAR_CHUNK / d).max(1))
            .enumerate()
            .for_each(|(r, ((o, ar), br))| f(r, o, ar, br));
    } else {
        for (r, ((o, ar), br)) in out
            .chunks_mut(d)
            .zip(a.chunks_mut(wa))
            .zip(b.chunks_mut(wb))
            .enumerate()
        {
            f(r, o, ar, br);
        }
    }
}

/// No per-row side output for [`map_rows_with`]: one `()` per row (no memory).
fn no_side(rows: usize) -> Vec<()> {
    vec![(); rows]
}

/// Runs `f(row_index, out_row)` for every `d`-element row of `out` (in parallel
/// when `par`). `rows` is the row count (needed when `d` is 0).
fn map_rows<F>(out: &mut [f32], rows: usize, d: usize, par: bool, f: F)
where
    F: Fn(usize, &mut [f32]) + Sync + Send,
{
    map_rows_with(
        out,
        rows,
        d,
        par,
        &mut no_side(rows),
        &mut no_side(rows),
        |r, o, _, _| f(r, o),
    );
}

/// `(outer, n, inner)` of `shape` around `axis`.
pub(crate) fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    assert!(
        axis < shape.len(),
        "axis {axis} out of range for shape {shape:?}"
    );
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}
