//! Reductions (sum, product, mean, max) and argmax, along one axis or over
//! everything.
//!
//! An axis reduction views the input as `[outer, n, inner]` (n the reduced
//! axis). When `inner` is 1 each output reads one contiguous row; otherwise each
//! output row block accumulates whole contiguous `inner` slices, so memory is
//! always read in order. Full reductions sum fixed-size chunks and combine the
//! partial results in order, so the result does not depend on the thread count.

use super::isa::vectorised;
use super::{pool, PAR_CHUNK, PAR_THRESHOLD};
use crate::backend::ReduceOp;
use crate::shape::reduced_shape;
use crate::tensor::{numel_of, Tensor};
use rayon::prelude::*;

/// Output elements per block in strided (inner > 1) axis reductions.
const COL_BLOCK: usize = 1024;

/// Output columns per block of a strided (inner > 1) axis reduction: at most
/// [`COL_BLOCK`], and, when it runs on several threads with fewer output
/// rows than twice the threads, small enough (but at least a cache line of
/// floats) that the columns give every thread two blocks: the column sums of a
/// `[2048, 1024]` bias gradient were one block on one thread. Each column's
/// sum runs in the same order whatever the block, so only speed depends on it.
fn column_block(outer: usize, inner: usize, par: bool) -> usize {
    let threads = rayon::current_num_threads();
    if !par || outer >= 2 * threads {
        return COL_BLOCK;
    }
    let blocks = (2 * threads).div_ceil(outer);
    inner
        .div_ceil(blocks)
        .next_multiple_of(16)
        .clamp(16, COL_BLOCK)
}

/// NaN-propagating maximum.
#[inline]
fn max_nan(a: f32, b: f32) -> f32 {
    if a > b || a.is_nan() {
        a
    } else {
        b
    }
}

/// A fold: a start value, a step taking the element and its index along the
/// reduced axis, an in-order combination of partial results, and a finish.
struct Fold<A, S, C, F> {
    init: A,
    step: S,
    combine: C,
    finish: F,
}

/// Chunks whose partial results are computed together (in parallel) before
/// being combined in order into the running total: bounds the partial results
/// kept at once, so a full reduction needs no heap memory.
const PARTS_AT_ONCE: usize = 64;

impl<A, S, C, F> Fold<A, S, C, F>
where
    A: Copy + Send + Sync,
    S: Fn(A, f32, usize) -> A + Sync,
    C: Fn(A, A) -> A + Sync,
    F: Fn(A, usize) -> f32 + Sync,
{
    /// Over every element in row-major order → one value. The partial result
    /// of each [`PAR_CHUNK`] chunk is combined in chunk order, whatever the
    /// thread count.
    fn all(&self, x: &[f32]) -> f32 {
        let part = |ci: usize, c: &[f32]| {
            c.iter().enumerate().fold(self.init, |acc, (i, &v)| {
                (self.step)(acc, v, ci * PAR_CHUNK + i)
            })
        };
        let mut total = self.init;
        if x.len() >= PAR_THRESHOLD {
            let mut parts = [self.init; PARTS_AT_ONCE];
            for (g, group) in x.chunks(PAR_CHUNK * PARTS_AT_ONCE).enumerate() {
                let count = group.len().div_ceil(PAR_CHUNK);
                parts[..count]
                    .par_iter_mut()
                    .zip(group.par_chunks(PAR_CHUNK))
                    .enumerate()
                    .for_each(|(i, (p, c))| *p = part(g * PARTS_AT_ONCE + i, c));
                total = parts[..count]
                    .iter()
                    .fold(total, |a, &b| (self.combine)(a, b));
            }
        } else {
            for (ci, c) in x.chunks(PAR_CHUNK).enumerate() {
                total = (self.combine)(total, part(ci, c));
            }
        }
        (self.finish)(total, x.len())
    }

    /// Along `axis` of `shape` (the shape of `x`) into `out` (the element
    /// count of `shape` without that axis; every element written).
    fn axis_into(&self, x: &[f32], shape: &[usize], axis: usize, out: &mut [f32]) {
        assert!(
            axis < shape.len(),
            "reduce: axis {axis} out of range for {shape:?}"
        );
        let outer: usize = shape[..axis].iter().product();
        let n = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        assert_eq!(out.len(), outer * inner, "reduce: output length differs");
        let par = x.len() >= PAR_THRESHOLD;
        if inner == 1 {
            let row = |(o, d): (usize, &mut f32)| {
                let r = &x[o * n..(o + 1) * n];
                let acc = r
                    .iter()
                    .enumerate()
                    .fold(self.init, |acc, (j, &v)| (self.step)(acc, v, j));
                *d = (self.finish)(acc, n);
            };
            if par {
                out.par_iter_mut().enumerate().for_each(row);
            } else {
                out.iter_mut().enumerate().for_each(row);
            }
        } else if !out.is_empty() {
            let width = column_block(outer, inner, par);
            let block = |o: usize, c0: usize, dst: &mut [f32]| {
                let at = (o * n * inner + c0, inner);
                vectorised(
                    #[inline(always)]
                    || self.columns_into(x, at, n, dst),
                )
            };
            if par {
                out.par_chunks_mut(inner).enumerate().for_each(|(o, r)| {
                    r.par_chunks_mut(width)
                        .enumerate()
                        .for_each(|(b, d)| block(o, b * width, d))
                });
            } else {
                for (o, r) in out.chunks_mut(inner).enumerate() {
                    for (b, d) in r.chunks_mut(width).enumerate() {
                        block(o, b * width, d);
                    }
                }
            }
        }
    }

    /// The folds of `dst.len()` adjacent columns over `n` rows, the first row's
    /// first element at `x[start]`, rows `stride` floats apart, into `dst`.
    #[inline(always)]
    fn columns_into(&self, x: &[f32], (start, stride): (usize, usize), n: usize, dst: &mut [f32]) {
        let mut acc = [self.init; COL_BLOCK];
        let (acc, w) = (&mut acc[..dst.len()], dst.len());
        let row = |j: usize| &x[start + j * stride..start + j * stride + w];
        // Four rows per pass over the accumulators (each column still takes
        // its rows one at a time, in order): a quarter of the accumulator
        // loads and stores.
        let quads = n / 4 * 4;
        for j in (0..quads).step_by(4) {
            let (r0, r1, r2, r3) = (row(j), row(j + 1), row(j + 2), row(j + 3));
            let rows = r0.iter().zip(r1).zip(r2).zip(r3);
            for (a, (((&v0, &v1), &v2), &v3)) in acc.iter_mut().zip(rows) {
                let mut v = (self.step)(*a, v0, j);
                v = (self.step)(v, v1, j + 1);
                v = (self.step)(v, v2, j + 2);
                *a = (self.step)(v, v3, j + 3);
            }
        }
        for j in quads..n {
            for (a, &v) in acc.iter_mut().zip(row(j)) {
                *a = (self.step)(*a, v, j);
            }
        }
        for (d, &a) in dst.iter_mut().zip(acc.iter()) {
            *d = (self.finish)(a, n);
        }
    }

    /// Along `axis` of `shape`, or over everything when `axis` is `None`, into
    /// `out`.
    fn run_into(&self, x: &[f32], shape: &[usize], axis: Option<usize>, out: &mut [f32]) {
        match axis {
            None => out[0] = self.all(x),
            Some(ax) => self.axis_into(x, shape, ax, out),
        }
    }
}

/// A reduction kernel's result as a tensor: `into(x, shape, out)` fills it.
fn reduce_tensor(
    x: &Tensor,
    axis: Option<usize>,
    into: impl FnOnce(&[f32], &[usize], &mut [f32]),
) -> Tensor {
    let shape = reduced_shape(x.shape(), axis);
    let mut out = pool::scratch(numel_of(&shape));
    into(x.host(), x.shape(), &mut out);
    out.into_tensor(shape)
}

/// `op` along `axis` (removed from the shape) or over everything (shape `[]`).
pub(crate) fn reduce(op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Tensor {
    reduce_tensor(x, axis, |src, shape, out| {
        reduce_into(op, src, shape, axis, out)
    })
}

/// [`reduce`] of `x` (of `shape`) into `out` (the reduced shape's element count).
pub(crate) fn reduce_into(
    op: ReduceOp,
    x: &[f32],
    shape: &[usize],
    axis: Option<usize>,
    out: &mut [f32],
) {
    let sum = |a: f64, v: f32, _| a + v as f64;
    let add = |a: f64, b: f64| a + b;
    match op {
        ReduceOp::Sum => Fold {
            init: 0.0f64,
            step: sum,
            combine: add,
            finish: |a: f64, _| a as f32,
        }
        .run_into(x, shape, axis, out),
        ReduceOp::Mean => Fold {
            init: 0.0f64,
            step: sum,
            combine: add,
            finish: |a: f64, n: usize| (a / n.max(1) as f64) as f32,
        }
        .run_into(x, shape, axis, out),
        ReduceOp::Prod => Fold {
            init: 1.0f64,
            step: |a: f64, v: f32, _| a * v as f64,
            combine: |a: f64, b: f64| a * b,
            finish: |a: f64, _| a as f32,
        }
        .run_into(x, shape, axis, out),
        ReduceOp::Max => Fold {
            init: f32::NEG_INFINITY,
            step: |a: f32, v: f32, _| max_nan(a, v),
            combine: max_nan,
            finish: |a: f32, _| a,
        }
        .run_into(x, shape, axis, out),
    }
}

/// Index (as f32) of the first maximum along `axis`, or the row-major flat index
/// over everything. NaN is never greater than anything; an empty or all-NaN
/// reduction gives 0.
pub(crate) fn argmax(x: &Tensor, axis: Option<usize>) -> Tensor {
    reduce_tensor(x, axis, |src, shape, out| {
        argmax_into(src, shape, axis, out)
    })
}

/// [`argmax`] of `x` (of `shape`) into `out`.
pub(crate) fn argmax_into(x: &[f32], shape: &[usize], axis: Option<usize>, out: &mut [f32]) {
    // (best value, its index); strict > keeps the first maximum.
    Fold {
        init: (f32::NEG_INFINITY, usize::MAX),
        step: |a: (f32, usize), v: f32, j| {
            if v > a.0 || (a.1 == usize::MAX && !v.is_nan()) {
                (v, j)
            } else {
                a
            }
        },
        combine: |a: (f32, usize), b: (f32, usize)| {
            if b.1 != usize::MAX && (a.1 == usize::MAX || b.0 > a.0) {
                b
            } else {
                a
            }
        },
        finish: |a: (f32, usize), _| if a.1 == usize::MAX { 0.0 } else { a.1 as f32 },
    }
    .run_into(x, shape, axis, out)
}

/// Sum of `x` (row-major data of `shape`) along `axis` into `out`, accumulated
/// in f64.
pub(crate) fn sum_axis_into(x: &[f32], shape: &[usize], axis: usize, out: &mut [f32]) {
    reduce_into(ReduceOp::Sum, x, shape, Some(axis), out)
}

/// Sum of every element of `x`, accumulated in f64.
pub(crate) fn sum_all(x: &[f32]) -> f32 {
    let mut out = [0.0f32];
    reduce_into(ReduceOp::Sum, x, &[x.len()], None, &mut out);
    out[0]
}
