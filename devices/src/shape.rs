//! Shape arithmetic: NumPy broadcasting, row-major strides and the dimension
//! coalescing the strided kernels use.

/// The NumPy broadcast of two shapes, or `None` when they are incompatible.
///
/// Shapes are aligned at their last axes; a missing leading axis counts as 1;
/// two sizes are compatible when they are equal or one of them is 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

/// Row-major (C order) strides, in elements, of a contiguous array of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        strides[i] = s;
        s *= shape[i];
    }
    strides
}

/// Strides that read a contiguous array of `shape` as if it had been broadcast to
/// `out` (which must be a broadcast of it): aligned to `out`'s rank, with stride 0
/// on missing leading axes and on axes of size 1 that are stretched.
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = contiguous_strides(shape);
    let lead = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < lead || (shape[i - lead] == 1 && out[i] != 1) {
                0
            } else {
                own[i - lead]
            }
        })
        .collect()
}

/// Simplifies a strided iteration over `shape` shared by several operands (one
/// stride vector each): drops axes of size 1 and merges neighbouring axes that
/// every operand walks contiguously. The element order is unchanged. A result
/// of rank 0 is returned as shape `[1]`.
pub fn coalesce(shape: &[usize], strides: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_shape: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::with_capacity(shape.len()); strides.len()];
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        if let Some(&last) = out_shape.last() {
            let mergeable = strides
                .iter()
                .zip(out_strides.iter())
                .all(|(s, o)| *o.last().unwrap() == s[i] * d);
            if mergeable {
                *out_shape.last_mut().unwrap() = last * d;
                for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                    *o.last_mut().unwrap() = s[i];
                }
                continue;
            }
        }
        out_shape.push(d);
        for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
            o.push(s[i]);
        }
    }
    if out_shape.is_empty() {
        out_shape.push(1);
        for o in out_strides.iter_mut() {
            o.push(0);
        }
    }
    (out_shape, out_strides)
}

/// The element offset, under `strides`, of the row-major position `index` in an
/// array of `shape`.
#[inline]
pub fn offset_of(mut index: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for i in (0..shape.len()).rev() {
        let d = shape[i];
        off += (index % d) * strides[i];
        index /= d;
    }
    off
}

/// The shape of reducing `shape` along `axis` (removed), or over everything
/// (`[]`).
pub fn reduced_shape(shape: &[usize], axis: Option<usize>) -> Vec<usize> {
    match axis {
        None => Vec::new(),
        Some(ax) => {
            assert!(
                ax < shape.len(),
                "reduce: axis {ax} out of range for {shape:?}"
            );
            let mut s = shape.to_vec();
            s.remove(ax);
            s
        }
    }
}

/// `(rows, d)` of an array of `shape` normalised over its last axis (a scalar
/// is one row of 1).
pub fn rows_of(shape: &[usize]) -> (usize, usize) {
    match shape.last() {
        None => (1, 1),
        Some(&d) => (shape[..shape.len() - 1].iter().product(), d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_rules() {
        assert_eq!(broadcast_shapes(&[2, 1, 3], &[4, 1]), Some(vec![2, 4, 3]));
        assert_eq!(broadcast_shapes(&[], &[3]), Some(vec![3]));
        assert_eq!(broadcast_shapes(&[3], &[]), Some(vec![3]));
        assert_eq!(broadcast_shapes(&[0], &[1]), Some(vec![0]));
        assert_eq!(broadcast_shapes(&[1], &[0]), Some(vec![0]));
        assert_eq!(broadcast_shapes(&[2, 3], &[3, 2]), None);
        assert_eq!(broadcast_shapes(&[5, 1, 4], &[3, 1]), Some(vec![5, 3, 4]));
        assert_eq!(broadcast_shapes(&[0], &[2]), None);
    }

    #[test]
    fn strides() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous_strides(&[]), Vec::<usize>::new());
        assert_eq!(broadcast_strides(&[4, 1], &[2, 4, 3]), vec![0, 1, 0]);
        assert_eq!(broadcast_strides(&[2, 1, 3], &[2, 4, 3]), vec![3, 0, 1]);
    }

    #[test]
    fn coalescing() {
        let (s, st) = coalesce(&[2, 3, 4], &[vec![12, 4, 1], vec![12, 4, 1]]);
        assert_eq!(s, vec![24]);
        assert_eq!(st, vec![vec![1], vec![1]]);
        let (s, st) = coalesce(&[2, 4, 3], &[vec![3, 0, 1], vec![0, 1, 0]]);
        assert_eq!(s, vec![2, 4, 3]);
        assert_eq!(st, vec![vec![3, 0, 1], vec![0, 1, 0]]);
        let (s, st) = coalesce(&[1, 1], &[vec![1, 1]]);
        assert_eq!(s, vec![1]);
        assert_eq!(st, vec![vec![0]]);
        assert_eq!(offset_of(5, &[2, 3], &[1, 2]), 1 + 2 * 2);
    }
}
