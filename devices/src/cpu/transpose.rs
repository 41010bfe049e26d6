//! Transposing a block of floats, in 8 × 8 blocks of AVX registers where the
//! CPU has AVX2 (and 4 × 8 and 2 × 8 blocks for the last rows, as in the
//! GEMM's 12-row panels of A at AVX-512 and 6-row ones at AVX2); and square
//! blocks in registers (8 × 8 at AVX2, 16 × 16 at AVX-512) for the GEMM's
//! matrix-vector kernels, which multiply the columns in straight away.
//!
//! Two kernels move data this way: the GEMM packing a transposed B (`dX =
//! dY·Wᵀ`, attention's `Q·Kᵀ`), whose panel wants `NR` columns side by side
//! for each `k` while they are stored as rows along `k`, and `permute` swapping
//! the last two axes. Moved one float at a time, the packing cost more than
//! attention's small products themselves (`[32, 256]·[256, 32]`, 64 of them a
//! step at T = 32). Only data moves: results do not change.

#[cfg(target_arch = "x86_64")]
use crate::cpu::isa::{isa, Isa};

/// Writes the transpose of the `rows × cols` block at the start of `src` (row
/// stride `rs`) to `dst` (row stride `ds`): `dst[c·ds + r] = src[r·rs + c]`.
/// In AVX blocks unless the process runs at the scalar level.
///
/// Panics when `src` or `dst` is too short for its block.
pub(crate) fn transpose(
    src: &[f32],
    rs: usize,
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    ds: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(
        src.len() > (rows - 1) * rs + cols - 1 && dst.len() > (cols - 1) * ds + rows - 1,
        "transpose: a {rows} x {cols} block does not fit its slices"
    );
    #[cfg(target_arch = "x86_64")]
    if isa() != Isa::Scalar && rows >= 2 && cols >= 8 {
        let cols8 = cols / 8 * 8;
        // Rows go in blocks of 8, then at most one of 4 (a 12-row panel of A:
        // a third of its elements) and one of 2 (AVX2's 6-row panels: their
        // last third), each over every 8 columns; what is left (a last row,
        // the last columns) one float at a time.
        let mut r = 0;
        for (height, block) in [
            (8, transpose_8x8 as BlockFn),
            (4, transpose_4x8),
            (2, transpose_2x8),
        ] {
            while rows - r >= height {
                for c in (0..cols8).step_by(8) {
                    // SAFETY: every level but Scalar implies AVX2; rows
                    // r..r + height and columns c..c + 8 lie inside the
                    // block, which the assert keeps inside both slices.
                    unsafe {
                        block(
                            src.as_ptr().add(r * rs + c),
                            rs,
                            dst.as_mut_ptr().add(c * ds + r),
                            ds,
                        )
                    };
                }
                r += height;
            }
        }
        one_at_a_time(src, rs, 0..r, cols8..cols, dst, ds);
        one_at_a_time(src, rs, r..rows, 0..cols, dst, ds);
        return;
    }
    one_at_a_time(src, rs, 0..rows, 0..cols, dst, ds);
}

/// Moves the elements of `rows × cols` one float at a time.
fn one_at_a_time(
    src: &[f32],
    rs: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    dst: &mut [f32],
    ds: usize,
) {
    for r in rows {
        for c in cols.clone() {
            dst[c * ds + r] = src[r * rs + c];
        }
    }
}

/// Writes the transpose of the 8 × 8 block at `src` (row stride `rs`) to `dst`
/// (row stride `ds`).
///
/// # Safety
/// The CPU has AVX2; rows `0..8` of 8 floats at `src` (stride `rs`) are
/// readable and those at `dst` (stride `ds`) writable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_8x8(src: *const f32, rs: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    let rows = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * rs)));
    for (j, v) in transposed_8x8(rows).into_iter().enumerate() {
        _mm256_storeu_ps(dst.add(j * ds), v);
    }
}

/// The columns of the 8 × 8 block whose rows are `rows`, in registers.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn transposed_8x8(
    rows: [std::arch::x86_64::__m256; 8],
) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let [a0, a1, a2, a3, a4, a5, a6, a7] = rows;
    // Pairs of rows interleaved, then pairs of pairs: each 128-bit half then
    // holds 4 consecutive rows of one column.
    let (t0, t1) = (_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
    let (t2, t3) = (_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
    let (t4, t5) = (_mm256_unpacklo_ps(a4, a5), _mm256_unpackhi_ps(a4, a5));
    let (t6, t7) = (_mm256_unpacklo_ps(a6, a7), _mm256_unpackhi_ps(a6, a7));
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    // Low halves give columns 0..4, high halves columns 4..8.
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// The columns of the 16 × 16 block whose rows are `rows`, in registers.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn transposed_16x16(
    rows: [std::arch::x86_64::__m512; 16],
) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    // Rows interleaved in pairs, then in fours: each 128-bit lane of
    // u[4g + c] holds rows 4g..4g + 4 of one column (c, c + 4, c + 8 or
    // c + 12 by lane).
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let [a0, a1, a2, a3] = [
            rows[4 * g],
            rows[4 * g + 1],
            rows[4 * g + 2],
            rows[4 * g + 3],
        ];
        let (t0, t1) = (_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
        let (t2, t3) = (_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
        u[4 * g] = _mm512_shuffle_ps::<0x44>(t0, t2);
        u[4 * g + 1] = _mm512_shuffle_ps::<0xEE>(t0, t2);
        u[4 * g + 2] = _mm512_shuffle_ps::<0x44>(t1, t3);
        u[4 * g + 3] = _mm512_shuffle_ps::<0xEE>(t1, t3);
    }
    // Lanes gathered across the four groups: column c's 16 rows.
    let mut cols = [_mm512_setzero_ps(); 16];
    for c in 0..4 {
        // Columns c and c + 8 (or, `upper`, c + 4 and c + 12) of rows
        // 8h..8h + 8.
        let v = |h: usize, upper: bool| {
            let (lo, hi) = (u[c + 8 * h], u[c + 8 * h + 4]);
            if upper {
                _mm512_shuffle_f32x4::<0xDD>(lo, hi)
            } else {
                _mm512_shuffle_f32x4::<0x88>(lo, hi)
            }
        };
        for (first, upper) in [(c, false), (c + 4, true)] {
            let (v0, v1) = (v(0, upper), v(1, upper));
            cols[first] = _mm512_shuffle_f32x4::<0x88>(v0, v1);
            cols[first + 8] = _mm512_shuffle_f32x4::<0xDD>(v0, v1);
        }
    }
    cols
}

/// Writes the transpose of the 4 × 8 block at `src` (row stride `rs`) to `dst`
/// (8 rows of 4 floats, row stride `ds`).
///
/// # Safety
/// The CPU has AVX2; rows `0..4` of 8 floats at `src` (stride `rs`) are
/// readable and rows `0..8` of 4 floats at `dst` (stride `ds`) writable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_4x8(src: *const f32, rs: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    let row = |i: usize| _mm256_loadu_ps(src.add(i * rs));
    let (a0, a1, a2, a3) = (row(0), row(1), row(2), row(3));
    let (t0, t1) = (_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
    let (t2, t3) = (_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
    // Each holds column j in its low half and column j + 4 in its high half.
    let cols = [
        _mm256_shuffle_ps::<0x44>(t0, t2),
        _mm256_shuffle_ps::<0xEE>(t0, t2),
        _mm256_shuffle_ps::<0x44>(t1, t3),
        _mm256_shuffle_ps::<0xEE>(t1, t3),
    ];
    for (j, v) in cols.into_iter().enumerate() {
        _mm_storeu_ps(dst.add(j * ds), _mm256_castps256_ps128(v));
        _mm_storeu_ps(dst.add((j + 4) * ds), _mm256_extractf128_ps::<1>(v));
    }
}

/// Writes the transpose of the 2 × 8 block at `src` (row stride `rs`) to `dst`
/// (8 rows of 2 floats, row stride `ds`).
///
/// # Safety
/// The CPU has AVX2; rows `0..2` of 8 floats at `src` (stride `rs`) are
/// readable and rows `0..8` of 2 floats at `dst` (stride `ds`) writable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_2x8(src: *const f32, rs: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    let (a0, a1) = (_mm256_loadu_ps(src), _mm256_loadu_ps(src.add(rs)));
    // Pairs (a0[j], a1[j]) as 64-bit lanes: columns 0, 1, 4, 5 and 2, 3, 6, 7.
    let lo = _mm256_castps_si256(_mm256_unpacklo_ps(a0, a1));
    let hi = _mm256_castps_si256(_mm256_unpackhi_ps(a0, a1));
    let pairs = [
        _mm256_extract_epi64::<0>(lo),
        _mm256_extract_epi64::<1>(lo),
        _mm256_extract_epi64::<0>(hi),
        _mm256_extract_epi64::<1>(hi),
        _mm256_extract_epi64::<2>(lo),
        _mm256_extract_epi64::<3>(lo),
        _mm256_extract_epi64::<2>(hi),
        _mm256_extract_epi64::<3>(hi),
    ];
    for (j, pair) in pairs.into_iter().enumerate() {
        dst.add(j * ds).cast::<i64>().write_unaligned(pair);
    }
}

/// A block transposition: `(src, rs, dst, ds)`, as [`transpose_8x8`].
#[cfg(target_arch = "x86_64")]
type BlockFn = unsafe fn(*const f32, usize, *mut f32, usize);

#[cfg(test)]
mod tests {
    use super::*;

    /// The transpose of `rows × cols` at `at` of a 40 × 70 matrix, written by
    /// `write` into `cols` rows of `ds` lanes (the others left at -1), checked.
    fn check(at: usize, rows: usize, cols: usize, ds: usize, write: impl Fn(&[f32], &mut [f32])) {
        let rs = 70;
        let src: Vec<f32> = (0..40 * rs).map(|i| i as f32).collect();
        let mut dst = vec![-1.0; cols * ds];
        write(&src[at..], &mut dst);
        for c in 0..cols {
            for r in 0..ds {
                let want = if r < rows { src[at + r * rs + c] } else { -1.0 };
                assert_eq!(
                    dst[c * ds + r],
                    want,
                    "{rows} x {cols} at {at}, column {c}, lane {r}"
                );
            }
        }
    }

    #[test]
    fn blocks_and_edges_are_transposed_at_this_level_and_one_at_a_time() {
        let rs = 70;
        for (at, rows, cols, ds) in [
            (0, 32, 64, 32),
            (3 * rs + 5, 32, 61, 32),
            (rs + 2, 13, 17, 16),
            (8 * rs, 5, 7, 8),
            (9, 12, 40, 12),
            (0, 16, 16, 19),
            (3 * rs + 1, 15, 23, 16),
            (2 * rs + 3, 28, 67, 30),
            (rs + 1, 6, 40, 6),
            (4 * rs + 2, 7, 19, 8),
            (5, 2, 9, 2),
            (0, 3, 16, 3),
            (0, 1, 1, 1),
        ] {
            check(at, rows, cols, ds, |s, d| {
                transpose(s, rs, rows, cols, d, ds)
            });
            check(at, rows, cols, ds, |s, d| {
                one_at_a_time(s, rs, 0..rows, 0..cols, d, ds)
            });
        }
    }
}
