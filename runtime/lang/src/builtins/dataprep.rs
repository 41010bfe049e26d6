//! Data set preparation and language-model windows (LANGUAGE §10.8). Axis 0 is the
//! row axis.

use super::site::CallSite;
use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::data::{datasets, rng};
use crate::eval::Call;
use crate::value::{Array, Value};
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "shuffle",
        params: &[req("x", Array), req("seed", Seed)],
        summary: "permute the rows",
        doc: "`shuffle(x, seed)` returns x with its rows permuted by Fisher–Yates (LANGUAGE §13.4). Axis 0 becomes unnamed. E0205 for a scalar.",
        example: "shuffle(reshape(iota(12), [6, 2]), 9)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.8",
        run: shuffle,
        shape: Some(super::dataprep_shapes::shuffle),
    },
    Builtin {
        name: "batch",
        params: &[req("x", Array), req("size", Scalar)],
        summary: "group rows into batches",
        doc: "`batch(x, size)` returns `[⌈n/size⌉, size, …rest]`; the last batch is padded with zero rows. E0401 unless size is an integer ≥ 1.",
        example: "batch(iota(5), 2)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.8",
        run: batch,
        shape: Some(super::dataprep_shapes::batch),
    },
    Builtin {
        name: "batch_mask",
        params: &[req("x", Array), req("size", Scalar)],
        summary: "1 for real rows, 0 for padding",
        doc: "`batch_mask(x, size)` returns `[⌈n/size⌉, size]` with 1 for a real row of `batch(x, size)` and 0 for padding.",
        example: "batch_mask(iota(5), 2)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.8",
        run: batch_mask,
        shape: Some(super::dataprep_shapes::batch_mask),
    },
    Builtin {
        name: "split",
        params: &[req("x", Array), req("frac", Scalar), req("seed", Seed)],
        summary: "the training part of a shuffled split",
        doc: "`split(x, frac, seed)` returns rows perm[0..n_tr) of the `shuffle` permutation, n_tr = clamp(⌊n·frac⌋, 1, n−1). E0216 for fewer than 2 rows; E0401 unless 0 < frac < 1.",
        example: "split(reshape(iota(20), [10, 2]), 0.7, 3)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.8",
        run: split,
        shape: Some(super::dataprep_shapes::split),
    },
    Builtin {
        name: "val_split",
        params: &[req("x", Array), req("frac", Scalar), req("seed", Seed)],
        summary: "the validation part of a shuffled split",
        doc: "`val_split(x, frac, seed)` returns the rows `split` leaves out: perm[n_tr..n).",
        example: "val_split(reshape(iota(20), [10, 2]), 0.7, 3)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.8",
        run: val_split,
        shape: Some(super::dataprep_shapes::val_split),
    },
    Builtin {
        name: "shift_pairs_x",
        params: &[req("ids", Array), req("block", Scalar)],
        summary: "language-model input windows",
        doc: "`shift_pairs_x(ids, block)` cuts `[N]` ids into B = ⌊N/(block+1)⌋ non-overlapping windows of block+1 tokens and returns the first `block` tokens of each: `[B, block]`.",
        example: "shift_pairs_x(iota(8), 3)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.8",
        run: shift_pairs_x,
        shape: Some(super::dataprep_shapes::shift_pairs_x),
    },
    Builtin {
        name: "shift_pairs_y",
        params: &[req("ids", Array), req("block", Scalar)],
        summary: "language-model target windows",
        doc: "`shift_pairs_y(ids, block)` returns the last `block` tokens of each window: the targets for `shift_pairs_x`.",
        example: "shift_pairs_y(iota(8), 3)",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.8",
        run: shift_pairs_y,
        shape: Some(super::dataprep_shapes::shift_pairs_y),
    },
];

fn rows_of(c: &Call, i: usize) -> Result<Array, Diagnostic> {
    let x = c.array(i)?;
    if x.rank() == 0 {
        return Err(c.rank_error(i, "of rank 1 or more (its rows are axis 0)"));
    }
    Ok(x.clone())
}

/// Rows `idx` of `x`, with axis 0 unnamed and the other names kept.
fn take_rows(x: &Array, idx: &[usize]) -> Array {
    let row: usize = x.shape()[1..].iter().product();
    let data = x.to_f32();
    let mut out = Vec::with_capacity(idx.len() * row);
    for &r in idx {
        out.extend_from_slice(&data[r * row..(r + 1) * row]);
    }
    let mut shape = x.shape().to_vec();
    shape[0] = idx.len();
    let names = x.names().map(|n| {
        let mut n = n.to_vec();
        n[0] = None;
        n
    });
    Array::from_vec(shape, out).with_names(names)
}

fn shuffle(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = rows_of(c, 0)?;
    let perm = rng::permutation(x.shape()[0], c.seed(1)?);
    Ok(Value::Array(take_rows(&x, &perm)))
}

fn batch_size(c: &Call) -> Result<usize, Diagnostic> {
    super::site::positive_count(c, 1, c.scalar(1)?, "the batch size")
}

fn batch(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = rows_of(c, 0)?;
    let size = batch_size(c)?;
    let n = x.shape()[0];
    let nb = n.div_ceil(size);
    let row: usize = x.shape()[1..].iter().product();
    super::construct::checked_numel(c, 1, &[nb, size, row])?;
    let row: usize = x.shape()[1..].iter().product();
    let mut data = x.to_f32();
    data.resize(nb * size * row, 0.0);
    let mut shape = vec![nb, size];
    shape.extend_from_slice(&x.shape()[1..]);
    let names = x
        .names()
        .map(|n| [vec![None, None], n[1..].to_vec()].concat());
    Ok(Value::Array(Array::from_vec(shape, data).with_names(names)))
}

fn batch_mask(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = rows_of(c, 0)?;
    let size = batch_size(c)?;
    let n = x.shape()[0];
    let nb = n.div_ceil(size);
    super::construct::checked_numel(c, 1, &[nb, size])?;
    let data = (0..nb * size)
        .map(|i| if i < n { 1.0 } else { 0.0 })
        .collect();
    Ok(Value::Array(Array::from_vec(vec![nb, size], data)))
}

fn split_rows(c: &mut Call, train: bool) -> Result<Value, Diagnostic> {
    let x = rows_of(c, 0)?;
    let frac = c.scalar(1)?;
    let n = x.shape()[0];
    let n_tr = datasets::split_sizes(n, frac).map_err(|e| {
        let i = if e.code() == code::E0216 { 0 } else { 1 };
        c.error_at(
            i,
            e.code(),
            if i == 0 {
                "empty array"
            } else {
                "invalid argument value"
            },
            e.to_string(),
        )
    })?;
    let perm = rng::permutation(n, c.seed(2)?);
    let idx = if train { &perm[..n_tr] } else { &perm[n_tr..] };
    Ok(Value::Array(take_rows(&x, idx)))
}

fn split(c: &mut Call) -> Result<Value, Diagnostic> {
    split_rows(c, true)
}

fn val_split(c: &mut Call) -> Result<Value, Diagnostic> {
    split_rows(c, false)
}

fn windows(c: &mut Call, offset: usize) -> Result<Value, Diagnostic> {
    let ids = c.array_of_rank(0, 1, "a vector of ids `[N]`")?.to_f32();
    let block = super::site::positive_count(c, 1, c.scalar(1)?, "block")?;
    let b = ids.len() / (block + 1);
    if b == 0 {
        return Err(c.invalid(
            1,
            format!("{} ids make no window of {} tokens", ids.len(), block + 1),
        ));
    }
    let mut data = Vec::with_capacity(b * block);
    for w in 0..b {
        let start = w * (block + 1) + offset;
        data.extend_from_slice(&ids[start..start + block]);
    }
    Ok(Value::Array(Array::from_vec(vec![b, block], data)))
}

fn shift_pairs_x(c: &mut Call) -> Result<Value, Diagnostic> {
    windows(c, 0)
}

fn shift_pairs_y(c: &mut Call) -> Result<Value, Diagnostic> {
    windows(c, 1)
}
