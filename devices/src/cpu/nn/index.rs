//! Embedding rows: gather, and scatter-add in index order (deterministic).

use super::map_rows;
use crate::cpu::{pool, PAR_THRESHOLD};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Rows of `table` `[V, d]` selected by integer-valued `ids` → `[ids.shape..., d]`.
pub(crate) fn gather_rows(table: &Tensor, ids: &Tensor) -> Tensor {
    assert_eq!(table.rank(), 2, "gather_rows: table must be [V, d]");
    let d = table.shape()[1];
    let mut out = pool::scratch(ids.numel() * d);
    gather_rows_into(table.host(), d, ids.host(), &mut out);
    let mut shape = ids.shape().to_vec();
    shape.push(d);
    out.into_tensor(shape)
}

/// [`gather_rows`] of `tab` (rows of `d`) by `idx` into `out`.
pub(crate) fn gather_rows_into(tab: &[f32], d: usize, idx: &[f32], out: &mut [f32]) {
    let par = out.len() >= PAR_THRESHOLD;
    map_rows(out, idx.len(), d, par, |i, o| {
        let r = idx[i] as usize;
        o.copy_from_slice(&tab[r * d..(r + 1) * d]);
    });
}

/// `[vocab, d]` zeros with `src` row i added to row `ids[i]`. Rows are summed in
/// index order whatever the thread count (each thread owns a range of output
/// rows and scans every id), so the result is deterministic.
pub(crate) fn scatter_add_rows(ids: &Tensor, src: &Tensor, vocab: usize) -> Tensor {
    let d = *src
        .shape()
        .last()
        .expect("scatter_add_rows: src must have rank >= 1");
    let mut out = pool::scratch(vocab * d);
    scatter_add_rows_into(ids.host(), src.host(), d, &mut out);
    out.into_tensor(vec![vocab, d])
}

/// [`scatter_add_rows`] of `s` (rows of `d`) by `idx` into `out` (`vocab × d`,
/// overwritten).
pub(crate) fn scatter_add_rows_into(idx: &[f32], s: &[f32], d: usize, out: &mut [f32]) {
    assert_eq!(
        s.len(),
        idx.len() * d,
        "scatter_add_rows: src is not [ids..., d]"
    );
    out.fill(0.0);
    if d == 0 || out.is_empty() {
        return;
    }
    let vocab = out.len() / d;
    let add_range = |first_row: usize, dst: &mut [f32]| {
        let last_row = first_row + dst.len() / d;
        for (i, &id) in idx.iter().enumerate() {
            let r = id as usize;
            if r >= first_row && r < last_row {
                let o = &mut dst[(r - first_row) * d..(r - first_row + 1) * d];
                for (a, &b) in o.iter_mut().zip(&s[i * d..(i + 1) * d]) {
                    *a += b;
                }
            }
        }
    };
    if s.len() >= PAR_THRESHOLD {
        let tasks = rayon::current_num_threads() * 4;
        let rows_per = vocab.div_ceil(tasks).max(1);
        out.par_chunks_mut(rows_per * d)
            .enumerate()
            .for_each(|(c, dst)| add_range(c * rows_per, dst));
    } else {
        add_range(0, out);
    }
}
