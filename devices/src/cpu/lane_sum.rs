//! Row sums in f64 over eight interleaved lanes: the one summation order of
//! the row kernels (norms, softmax and its backward, cross-entropy).
//!
//! Element `i` of a row is added to lane `i % 8`, each lane in increasing
//! `i`, starting at +0.0; the lanes are then combined as
//! `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`. The order depends on
//! the row length alone, so every CPU, instruction-set level and thread count
//! gives the same bits, and a row fed in pieces whose lengths are multiples of
//! eight (but the last) sums exactly as the whole row does.
//!
//! Why not one chain in index order: each f64 addition waits for the one
//! before it (about four cycles), so a row of a cross-entropy over 280
//! classes spent about 1,100 cycles in its sum alone; eight independent
//! chains fill one AVX-512 register (two AVX2 ones) and run side by side.

/// Lanes of the sum.
const LANES: usize = 8;

/// A row sum in progress (see the module docs).
#[derive(Clone, Copy)]
pub(crate) struct LaneSum([f64; LANES]);

impl LaneSum {
    /// Nothing summed yet.
    pub(crate) const ZERO: LaneSum = LaneSum([0.0; LANES]);

    /// Adds `f(x[i], y[i])` for every `i` of the shorter slice, `x[0]` being an
    /// element whose index in the row is a multiple of eight.
    #[inline(always)]
    pub(crate) fn add_map2(&mut self, x: &[f32], y: &[f32], f: impl Fn(f32, f32) -> f64) {
        let n = x.len().min(y.len());
        let (x, y) = (&x[..n], &y[..n]);
        let (xs, ys) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
        let (xt, yt) = (xs.remainder(), ys.remainder());
        for (a, b) in xs.zip(ys) {
            for l in 0..LANES {
                self.0[l] += f(a[l], b[l]);
            }
        }
        for (l, (&a, &b)) in xt.iter().zip(yt).enumerate() {
            self.0[l] += f(a, b);
        }
    }

    /// Adds `f(x[i])` for every `i` (`x[0]` as in [`LaneSum::add_map2`]).
    #[inline(always)]
    pub(crate) fn add_map(&mut self, x: &[f32], f: impl Fn(f32) -> f64) {
        self.add_map2(x, x, |a, _| f(a));
    }

    /// The sum: the lanes combined in their fixed order.
    #[inline(always)]
    pub(crate) fn total(self) -> f64 {
        let l = self.0;
        ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
    }
}

/// `Σ f(x[i])` over a row, in the lane order (public so that the shape
/// checker's constant folding sums exactly as the kernels do).
#[inline(always)]
pub fn sum_map(x: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut s = LaneSum::ZERO;
    s.add_map(x, f);
    s.total()
}

/// `Σ f(x[i], y[i])` over a row, in the lane order.
#[inline(always)]
pub(crate) fn sum_map2(x: &[f32], y: &[f32], f: impl Fn(f32, f32) -> f64) -> f64 {
    let mut s = LaneSum::ZERO;
    s.add_map2(x, y, f);
    s.total()
}

/// Largest element of a row, ignoring NaN (`f32::max` per element), in
/// sixteen lanes: the maximum of a set does not depend on the order it is
/// taken in, so this is the sequential fold's value (a zero's sign aside,
/// which no caller's result depends on), without its chain of dependent
/// comparisons.
#[inline(always)]
pub(crate) fn row_max(x: &[f32]) -> f32 {
    const W: usize = 16;
    let mut m = [f32::NEG_INFINITY; W];
    let chunks = x.chunks_exact(W);
    let tail = chunks.remainder();
    for c in chunks {
        for l in 0..W {
            m[l] = m[l].max(c[l]);
        }
    }
    let mut best = tail.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for v in m {
        best = best.max(v);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented order, written out one element at a time.
    fn reference(x: &[f32]) -> f64 {
        let mut l = [0.0f64; LANES];
        for (i, &v) in x.iter().enumerate() {
            l[i % LANES] += v as f64;
        }
        ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
    }

    fn values(n: usize) -> Vec<f32> {
        let mut s = 0x1234_5678u32;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32 - 0.5) * (1 + (s % 7)) as f32 * 1e3
            })
            .collect()
    }

    #[test]
    fn sums_in_the_documented_lane_order() {
        for n in [0, 1, 7, 8, 9, 15, 16, 17, 255, 256, 280, 1000] {
            let x = values(n);
            assert_eq!(
                sum_map(&x, |v| v as f64).to_bits(),
                reference(&x).to_bits(),
                "n = {n}"
            );
        }
    }

    #[test]
    fn a_row_fed_in_pieces_of_whole_lanes_sums_as_the_whole_row() {
        let x = values(1000);
        let mut s = LaneSum::ZERO;
        for piece in x.chunks(256) {
            s.add_map(piece, |v| v as f64);
        }
        assert_eq!(s.total().to_bits(), sum_map(&x, |v| v as f64).to_bits());
    }

    #[test]
    fn the_order_differs_from_one_chain_so_the_test_above_can_fail() {
        // Values whose sum depends on the order: 1e17 + 1 − 1e17 is 0 in one
        // chain and 1 when the 1 meets the other 1e17's lane partner first.
        let mut x = vec![0.0f32; 16];
        x[0] = 1e17;
        x[1] = 1.0;
        x[8] = -1e17;
        let chain = x.iter().fold(0.0f64, |s, &v| s + v as f64);
        assert_ne!(sum_map(&x, |v| v as f64), chain);
        assert_eq!(sum_map(&x, |v| v as f64), reference(&x));
    }

    #[test]
    fn row_max_is_the_largest_element_ignoring_nan() {
        for n in [1, 15, 16, 17, 40, 280] {
            let mut x = values(n);
            x[n / 2] = f32::NAN;
            let want = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(row_max(&x), want, "n = {n}");
        }
        assert_eq!(row_max(&[]), f32::NEG_INFINITY);
    }
}
