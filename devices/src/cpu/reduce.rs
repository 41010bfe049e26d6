//! Reductions (sum, product, mean, max) and argmax, along one axis or over
//! everything.
//!
//! An axis reduction views the input as `[outer, n, inner]` (n the reduced
//! axis). When `inner` is 1 each output reads one contiguous row; otherwise each
//! output row block accumulates whole contiguous `inner` slices, so memory is
//! always read in order. Full reductions sum fixed-size chunks and combine the
//! partial results in order, so the result does not depend on the thread count.

use super::{pool, PAR_CHUNK, PAR_THRESHOLD};
use crate::backend::ReduceOp;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Output elements per block in strided (inner > 1) axis reductions.
const COL_BLOCK: usize = 1024;

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

impl<A, S, C, F> Fold<A, S, C, F>
where
    A: Copy + Send + Sync,
    S: Fn(A, f32, usize) -> A + Sync,
    C: Fn(A, A) -> A + Sync,
    F: Fn(A, usize) -> f32 + Sync,
{
    /// Over every element in row-major order → shape `[]`.
    fn all(&self, x: &[f32]) -> f32 {
        let part = |(ci, c): (usize, &[f32])| {
            c.iter().enumerate().fold(self.init, |acc, (i, &v)| {
                (self.step)(acc, v, ci * PAR_CHUNK + i)
            })
        };
        let parts: Vec<A> = if x.len() >= PAR_THRESHOLD {
            x.par_chunks(PAR_CHUNK).enumerate().map(part).collect()
        } else {
            x.chunks(PAR_CHUNK).enumerate().map(part).collect()
        };
        let total = parts
            .into_iter()
            .fold(self.init, |a, b| (self.combine)(a, b));
        (self.finish)(total, x.len())
    }

    /// Along `axis` of `shape` → `shape` without that axis.
    fn axis(&self, x: &[f32], shape: &[usize], axis: usize) -> Tensor {
        assert!(
            axis < shape.len(),
            "reduce: axis {axis} out of range for {shape:?}"
        );
        let outer: usize = shape[..axis].iter().product();
        let n = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let mut out_shape = shape.to_vec();
        out_shape.remove(axis);
        // Every output element is written below.
        let mut out = pool::scratch(outer * inner);
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
            let block = |o: usize, c0: usize, dst: &mut [f32]| {
                let mut acc = vec![self.init; dst.len()];
                for j in 0..n {
                    let base = (o * n + j) * inner + c0;
                    for (a, &v) in acc.iter_mut().zip(&x[base..base + dst.len()]) {
                        *a = (self.step)(*a, v, j);
                    }
                }
                for (d, a) in dst.iter_mut().zip(acc) {
                    *d = (self.finish)(a, n);
                }
            };
            if par {
                out.par_chunks_mut(inner).enumerate().for_each(|(o, r)| {
                    r.par_chunks_mut(COL_BLOCK)
                        .enumerate()
                        .for_each(|(b, d)| block(o, b * COL_BLOCK, d))
                });
            } else {
                for (o, r) in out.chunks_mut(inner).enumerate() {
                    for (b, d) in r.chunks_mut(COL_BLOCK).enumerate() {
                        block(o, b * COL_BLOCK, d);
                    }
                }
            }
        }
        out.into_tensor(out_shape)
    }

    fn run(&self, x: &Tensor, axis: Option<usize>) -> Tensor {
        match axis {
            None => Tensor::scalar(self.all(x.host())),
            Some(ax) => self.axis(x.host(), x.shape(), ax),
        }
    }
}

/// `op` along `axis` (removed from the shape) or over everything (shape `[]`).
pub(crate) fn reduce(op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Tensor {
    let sum = |a: f64, v: f32, _| a + v as f64;
    let add = |a: f64, b: f64| a + b;
    match op {
        ReduceOp::Sum => Fold {
            init: 0.0f64,
            step: sum,
            combine: add,
            finish: |a: f64, _| a as f32,
        }
        .run(x, axis),
        ReduceOp::Mean => Fold {
            init: 0.0f64,
            step: sum,
            combine: add,
            finish: |a: f64, n: usize| (a / n.max(1) as f64) as f32,
        }
        .run(x, axis),
        ReduceOp::Prod => Fold {
            init: 1.0f64,
            step: |a: f64, v: f32, _| a * v as f64,
            combine: |a: f64, b: f64| a * b,
            finish: |a: f64, _| a as f32,
        }
        .run(x, axis),
        ReduceOp::Max => Fold {
            init: f32::NEG_INFINITY,
            step: |a: f32, v: f32, _| max_nan(a, v),
            combine: max_nan,
            finish: |a: f32, _| a,
        }
        .run(x, axis),
    }
}

/// Index (as f32) of the first maximum along `axis`, or the row-major flat index
/// over everything. NaN is never greater than anything; an empty or all-NaN
/// reduction gives 0.
pub(crate) fn argmax(x: &Tensor, axis: Option<usize>) -> Tensor {
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
    .run(x, axis)
}

/// Sum of `x` (row-major data of `shape`) along `axis`, accumulated in f64.
pub(crate) fn sum_axis(x: &[f32], shape: &[usize], axis: usize) -> Tensor {
    Fold {
        init: 0.0f64,
        step: |a: f64, v: f32, _| a + v as f64,
        combine: |a: f64, b: f64| a + b,
        finish: |a: f64, _| a as f32,
    }
    .axis(x, shape, axis)
}

/// Sum of every element of `x`, accumulated in f64.
pub(crate) fn sum_all(x: &[f32]) -> f32 {
    Fold {
        init: 0.0f64,
        step: |a: f64, v: f32, _| a + v as f64,
        combine: |a: f64, b: f64| a + b,
        finish: |a: f64, _| a as f32,
    }
    .all(x)
}
