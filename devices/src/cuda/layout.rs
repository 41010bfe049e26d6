//! Iteration spaces for the strided kernels: the `Layout` kernel parameter, row-major
//! strides, broadcast strides and merging of axes that need no separate index.

use cudarc::driver::DeviceRepr;

/// Most axes a strided kernel takes (`MLPL_MAX_RANK` in `kernels/common.cuh`).
pub(super) const MAX_RANK: usize = 8;

/// The kernels' `Layout` struct: sizes of the iteration space and, for up to two
/// inputs, the element stride of each axis (0 where an input is broadcast).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Layout {
    rank: i32,
    pad: i32,
    dims: [u64; MAX_RANK],
    sa: [i64; MAX_RANK],
    sb: [i64; MAX_RANK],
}

// SAFETY: `Layout` is `repr(C)` plain data with the same layout as the CUDA struct.
unsafe impl DeviceRepr for Layout {}

/// Row-major element strides of `shape`.
pub(super) fn strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for (st, &d) in s.iter_mut().zip(shape).rev() {
        *st = acc;
        acc *= d as i64;
    }
    s
}

/// Strides of a tensor of shape `shape` read as the larger broadcast shape `out`
/// (axes aligned on the right; 0 on missing and stretched axes).
pub(super) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<i64> {
    let own = strides(shape);
    let lead = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < lead || shape[i - lead] == 1 {
                0
            } else {
                own[i - lead]
            }
        })
        .collect()
}

/// A layout over `dims` with input strides `sa` and `sb`, after dropping size-1
/// axes and merging neighbours that both inputs walk contiguously. `None` when
/// more than [`MAX_RANK`] axes remain (the caller falls back to the CPU).
pub(super) fn layout(dims: &[usize], sa: &[i64], sb: &[i64]) -> Option<Layout> {
    let mut axes: Vec<(u64, i64, i64)> = Vec::new();
    for ((&d, &a), &b) in dims.iter().zip(sa).zip(sb) {
        if d == 1 {
            continue;
        }
        if let Some(last) = axes.last_mut() {
            if last.1 == a * d as i64 && last.2 == b * d as i64 {
                *last = (last.0 * d as u64, a, b);
                continue;
            }
        }
        axes.push((d as u64, a, b));
    }
    if axes.len() > MAX_RANK {
        return None;
    }
    let mut l = Layout {
        rank: axes.len() as i32,
        ..Layout::default()
    };
    for (i, (d, a, b)) in axes.into_iter().enumerate() {
        l.dims[i] = d;
        l.sa[i] = a;
        l.sb[i] = b;
    }
    Some(l)
}

/// Two layouts over the same merged iteration space for three inputs: the
/// first with the strides of `s[0]` and `s[1]`, the second with those of
/// `s[2]` (twice). Axes merge only where all three walk contiguously. `None`
/// beyond [`MAX_RANK`] axes.
pub(super) fn layout3(dims: &[usize], s: [&[i64]; 3]) -> Option<(Layout, Layout)> {
    let mut axes: Vec<(u64, [i64; 3])> = Vec::new();
    for (i, &d) in dims.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let st = [s[0][i], s[1][i], s[2][i]];
        if let Some(last) = axes.last_mut() {
            if (0..3).all(|k| last.1[k] == st[k] * d as i64) {
                *last = (last.0 * d as u64, st);
                continue;
            }
        }
        axes.push((d as u64, st));
    }
    if axes.len() > MAX_RANK {
        return None;
    }
    let mut l = Layout {
        rank: axes.len() as i32,
        ..Layout::default()
    };
    let mut m = l;
    for (i, (d, st)) in axes.into_iter().enumerate() {
        l.dims[i] = d;
        m.dims[i] = d;
        l.sa[i] = st[0];
        l.sb[i] = st[1];
        m.sa[i] = st[2];
        m.sb[i] = st[2];
    }
    Some((l, m))
}

/// `(outer, len, inner)` of `shape` around `axis`: the kernels' view of a
/// reduction or softmax along one axis.
pub(super) fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flat index -> (offset a, offset b), as `layout_offsets` in common.cuh does.
    fn offsets(l: &Layout, mut i: u64) -> (i64, i64) {
        let (mut a, mut b) = (0, 0);
        for d in (0..l.rank as usize).rev() {
            let q = i % l.dims[d];
            i /= l.dims[d];
            a += q as i64 * l.sa[d];
            b += q as i64 * l.sb[d];
        }
        (a, b)
    }

    #[test]
    fn same_shapes_merge_into_one_axis() {
        let s = strides(&[2, 3, 4]);
        let l = layout(&[2, 3, 4], &s, &s).unwrap();
        assert_eq!(l.rank, 1);
        assert_eq!(l.dims[0], 24);
        assert_eq!(offsets(&l, 17), (17, 17));
    }

    #[test]
    fn broadcast_offsets_match_numpy_rules() {
        // [2, 3] + [3]: b repeats along the first axis.
        let out = [2, 3];
        let (sa, sb) = (
            broadcast_strides(&[2, 3], &out),
            broadcast_strides(&[3], &out),
        );
        assert_eq!(sb, vec![0, 1]);
        let l = layout(&out, &sa, &sb).unwrap();
        let got: Vec<(i64, i64)> = (0..6).map(|i| offsets(&l, i)).collect();
        assert_eq!(got, vec![(0, 0), (1, 1), (2, 2), (3, 0), (4, 1), (5, 2)]);
        // [2, 1] * [1, 3]: an outer product.
        let (sa, sb) = (
            broadcast_strides(&[2, 1], &out),
            broadcast_strides(&[1, 3], &out),
        );
        let l = layout(&out, &sa, &sb).unwrap();
        let got: Vec<(i64, i64)> = (0..6).map(|i| offsets(&l, i)).collect();
        assert_eq!(got, vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
    }

    #[test]
    fn permutation_offsets() {
        // transpose of [2, 3]: out [3, 2], input strides reordered.
        let s = strides(&[2, 3]);
        let l = layout(&[3, 2], &[s[1], s[0]], &[0, 0]).unwrap();
        let got: Vec<i64> = (0..6).map(|i| offsets(&l, i).0).collect();
        assert_eq!(got, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn too_many_unmergeable_axes_are_refused() {
        let dims = [2usize; 10];
        let sa = strides(&dims);
        let sb: Vec<i64> = sa
            .iter()
            .enumerate()
            .map(|(i, &s)| if i % 2 == 0 { 0 } else { s })
            .collect();
        assert!(layout(&dims, &sa, &sb).is_none());
        assert!(layout(&dims, &sa, &sa).is_some());
    }

    #[test]
    fn axis_splits() {
        assert_eq!(split_at_axis(&[2, 3, 4], 1), (2, 3, 4));
        assert_eq!(split_at_axis(&[5], 0), (1, 5, 1));
        assert_eq!(crate::shape::rows_of(&[]), (1, 1));
        assert_eq!(crate::shape::rows_of(&[4, 6]), (4, 6));
    }
}
