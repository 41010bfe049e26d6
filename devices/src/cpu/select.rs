//! Selection and slicing kernels: `select` (the language's `where`: one of two
//! broadcast operands per element, chosen by a third), and the strided slice
//! of one axis with its gradient, `unslice` (the slice written into zeros).

use super::{for_chunks, pool, PAR_CHUNK, PAR_THRESHOLD};
use crate::shape::{broadcast_strides, coalesce, offset_of};
use crate::tensor::{numel_of, Tensor};

/// How [`select_into`] reads its three operands: decided once from the shapes.
#[derive(Clone, Debug)]
pub(crate) struct SelectPlan {
    /// The broadcast shape of the result.
    pub(crate) out_shape: Vec<usize>,
    /// `None` when every operand has the result's element count (one layout);
    /// otherwise the coalesced iteration shape and each operand's strides.
    strided: Option<(Vec<usize>, [Vec<usize>; 3])>,
}

impl SelectPlan {
    /// The plan for `cond`, `a` and `b` of shapes `ins`, or `None` when they
    /// do not broadcast.
    pub(crate) fn new(ins: [&[usize]; 3]) -> Option<SelectPlan> {
        let out_shape = crate::kernels::select_shape(&ins).ok()?;
        let n = numel_of(&out_shape);
        if ins.iter().all(|s| numel_of(s) == n) {
            return Some(SelectPlan {
                out_shape,
                strided: None,
            });
        }
        let strides: Vec<Vec<usize>> = ins
            .iter()
            .map(|s| broadcast_strides(s, &out_shape))
            .collect();
        let (shape, st) = coalesce(&out_shape, &strides);
        let [c, a, b]: [Vec<usize>; 3] = st.try_into().expect("three operands");
        Some(SelectPlan {
            out_shape,
            strided: Some((shape, [c, a, b])),
        })
    }
}

/// `a` where `cond` ≠ 0 (NaN counts as true), else `b`, broadcasting.
/// Panics if the shapes do not broadcast (the caller checked them).
pub(crate) fn select(cond: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let plan = SelectPlan::new([cond.shape(), a.shape(), b.shape()])
        .expect("select: operand shapes broadcast");
    let mut out = pool::scratch(numel_of(&plan.out_shape));
    select_into(&plan, cond.host(), a.host(), b.host(), &mut out);
    out.into_tensor(plan.out_shape)
}

/// [`select`] as `plan` describes it, into `out` (the result's length).
pub(crate) fn select_into(plan: &SelectPlan, c: &[f32], a: &[f32], b: &[f32], out: &mut [f32]) {
    let par = out.len() >= PAR_THRESHOLD;
    let pick = |cv: f32, av: f32, bv: f32| if cv != 0.0 { av } else { bv };
    match &plan.strided {
        None => for_chunks(out, PAR_CHUNK, par, |s, o| {
            for (i, d) in o.iter_mut().enumerate() {
                *d = pick(c[s + i], a[s + i], b[s + i]);
            }
        }),
        Some((shape, [sc, sa, sb])) => for_chunks(out, PAR_CHUNK, par, |s, o| {
            for (i, d) in o.iter_mut().enumerate() {
                let k = s + i;
                *d = pick(
                    c[offset_of(k, shape, sc)],
                    a[offset_of(k, shape, sa)],
                    b[offset_of(k, shape, sb)],
                );
            }
        }),
    }
}

/// A slice of one axis: the array viewed as `(outer, size, inner)` around the
/// axis, and the positions `start, start + step, …` (`len` of them) taken.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlicePlan {
    outer: usize,
    size: usize,
    inner: usize,
    start: usize,
    step: usize,
    len: usize,
}

impl SlicePlan {
    /// The slice of `axis` of an array of `shape` (the full array's shape).
    pub(crate) fn new(
        shape: &[usize],
        axis: usize,
        start: usize,
        step: usize,
        len: usize,
    ) -> SlicePlan {
        SlicePlan {
            outer: numel_of(&shape[..axis]),
            size: shape[axis],
            inner: numel_of(&shape[axis + 1..]),
            start,
            step,
            len,
        }
    }

    /// `(full, sliced)` offsets of each `inner`-long run the slice copies.
    fn runs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.outer).flat_map(move |o| {
            (0..self.len).map(move |i| {
                (
                    (o * self.size + self.start + i * self.step) * self.inner,
                    (o * self.len + i) * self.inner,
                )
            })
        })
    }
}

/// The slice of `x` along `axis` (see `Backend::slice_axis`).
pub(crate) fn slice_axis(x: &Tensor, axis: usize, start: usize, step: usize, len: usize) -> Tensor {
    let plan = SlicePlan::new(x.shape(), axis, start, step, len);
    let mut shape = x.shape().to_vec();
    shape[axis] = len;
    let mut out = pool::scratch(numel_of(&shape));
    slice_into(&plan, x.host(), &mut out);
    out.into_tensor(shape)
}

/// The slice `plan` describes of `src` (the full array) into `out`.
pub(crate) fn slice_into(plan: &SlicePlan, src: &[f32], out: &mut [f32]) {
    let w = plan.inner;
    for (f, s) in plan.runs() {
        out[s..s + w].copy_from_slice(&src[f..f + w]);
    }
}

/// Zeros of `shape` with `g` written at the slice's positions (see
/// `Backend::unslice_axis`).
pub(crate) fn unslice_axis(
    g: &Tensor,
    shape: &[usize],
    axis: usize,
    start: usize,
    step: usize,
) -> Tensor {
    let plan = SlicePlan::new(shape, axis, start, step, g.shape()[axis]);
    let mut out = pool::scratch(numel_of(shape));
    unslice_into(&plan, g.host(), &mut out);
    out.into_tensor(shape.to_vec())
}

/// `src` (the sliced array) written into `out` (the full array) at the
/// positions of `plan`, every other element 0.
pub(crate) fn unslice_into(plan: &SlicePlan, src: &[f32], out: &mut [f32]) {
    out.fill(0.0);
    let w = plan.inner;
    for (f, s) in plan.runs() {
        out[f..f + w].copy_from_slice(&src[s..s + w]);
    }
}
