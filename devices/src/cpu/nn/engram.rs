//! Engram's kernels (docs/language.md, "Engram conditional memory"): the hashed
//! n-gram rows and the short causal depthwise convolution with its gradient.
//! Sums are of exact f32·f32 products in f64, in a fixed order, so every CPU
//! (and the CUDA kernels, which sum the same way) gives the same bits.

use crate::cpu::{pool, PAR_THRESHOLD};
use crate::engram;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// [`Backend::engram_hash`](crate::Backend::engram_hash) on the host.
pub(crate) fn engram_hash(
    ids: &Tensor,
    orders: &[usize],
    heads: usize,
    rows: usize,
    seed: u64,
) -> Tensor {
    let slots = orders.len() * heads;
    let mut out = pool::scratch(ids.numel() * slots);
    let t = ids.shape().last().copied().unwrap_or(1);
    engram_hash_into(ids.host(), t, orders, heads, rows, seed, &mut out);
    let mut shape = ids.shape().to_vec();
    shape.push(slots);
    out.into_tensor(shape)
}

/// [`engram_hash`] of sequences of `t` ids into `out` (`ids.len() · slots`).
pub(crate) fn engram_hash_into(
    ids: &[f32],
    t: usize,
    orders: &[usize],
    heads: usize,
    rows: usize,
    seed: u64,
    out: &mut [f32],
) {
    let slots = orders.len() * heads;
    if slots == 0 || t == 0 {
        return;
    }
    // Keys are derived per slot rather than kept in a list, so a compiled
    // step's run allocates nothing.
    let seq = |(s, o): (usize, &mut [f32])| {
        let ids = &ids[s * t..(s + 1) * t];
        for (p, o) in o.chunks_mut(slots).enumerate() {
            for (slot, o) in o.iter_mut().enumerate() {
                let (n, h) = (orders[slot / heads], slot % heads);
                let key = engram::key(seed, n, h);
                *o = engram::row(ids, p, n, slot, key, rows) as f32;
            }
        }
    };
    if out.len() >= PAR_THRESHOLD {
        out.par_chunks_mut(t * slots).enumerate().for_each(seq);
    } else {
        out.chunks_mut(t * slots).enumerate().for_each(seq);
    }
}

/// `(sequences, T, C)` of a convolution input `x [.., T, C]`.
pub(crate) fn conv_dims(x: &[usize]) -> (usize, usize, usize) {
    let r = x.len();
    let (t, c) = (x[r - 2], x[r - 1]);
    (x[..r - 2].iter().product(), t, c)
}

/// [`Backend::causal_conv`](crate::Backend::causal_conv) on the host.
pub(crate) fn causal_conv(x: &Tensor, w: &Tensor) -> Tensor {
    let dims = conv_dims(x.shape());
    let mut out = pool::scratch(x.numel());
    causal_conv_into(x.host(), w.host(), dims, &mut out);
    out.into_tensor(x.shape().to_vec())
}

/// `y[b,t,c] = Σ_{j<K, j≤t} w[j,c]·x[b,t−j,c]`, summed in f64 for j ascending.
pub(crate) fn causal_conv_into(
    x: &[f32],
    w: &[f32],
    (b, t, c): (usize, usize, usize),
    out: &mut [f32],
) {
    let k = w.len().checked_div(c).unwrap_or(0);
    let seq = |(s, o): (usize, &mut [f32])| {
        let x = &x[s * t * c..(s + 1) * t * c];
        for p in 0..t {
            for ch in 0..c {
                let mut acc = 0f64;
                for j in 0..k.min(p + 1) {
                    acc += w[j * c + ch] as f64 * x[(p - j) * c + ch] as f64;
                }
                o[p * c + ch] = acc as f32;
            }
        }
    };
    if b == 0 || t * c == 0 {
        return;
    }
    if out.len() >= PAR_THRESHOLD {
        out.par_chunks_mut(t * c).enumerate().for_each(seq);
    } else {
        out.chunks_mut(t * c).enumerate().for_each(seq);
    }
}

/// [`Backend::causal_conv_backward`](crate::Backend::causal_conv_backward) on the host.
pub(crate) fn causal_conv_backward(x: &Tensor, w: &Tensor, dy: &Tensor) -> (Tensor, Tensor) {
    let dims = conv_dims(x.shape());
    let mut dx = pool::scratch(x.numel());
    let mut dw = pool::scratch(w.numel());
    causal_conv_backward_into(x.host(), w.host(), dy.host(), dims, &mut dx, &mut dw);
    (
        dx.into_tensor(x.shape().to_vec()),
        dw.into_tensor(w.shape().to_vec()),
    )
}

/// `dx[b,t,c] = Σ_{j<K, t+j<T} w[j,c]·dy[b,t+j,c]` (j ascending) and
/// `dw[j,c] = Σ_b Σ_{t≥j} dy[b,t,c]·x[b,t−j,c]` (b, then t ascending), in f64.
pub(crate) fn causal_conv_backward_into(
    x: &[f32],
    w: &[f32],
    dy: &[f32],
    (b, t, c): (usize, usize, usize),
    dx: &mut [f32],
    dw: &mut [f32],
) {
    let k = w.len().checked_div(c).unwrap_or(0);
    for s in 0..b {
        let base = s * t * c;
        for p in 0..t {
            for ch in 0..c {
                let mut acc = 0f64;
                for j in 0..k.min(t - p) {
                    acc += w[j * c + ch] as f64 * dy[base + (p + j) * c + ch] as f64;
                }
                dx[base + p * c + ch] = acc as f32;
            }
        }
    }
    for j in 0..k {
        for ch in 0..c {
            let mut acc = 0f64;
            for s in 0..b {
                let base = s * t * c;
                for p in j..t {
                    acc += dy[base + p * c + ch] as f64 * x[base + (p - j) * c + ch] as f64;
                }
            }
            dw[j * c + ch] = acc as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, CpuBackend};

    /// Values in [-1, 1) from a fixed LCG.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(1);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(1);
                ((s >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0) as f32
            })
            .collect()
    }

    /// The rows of the formula in docs/language.md, computed independently of
    /// this crate (a separate implementation of SplitMix64's finalizer) for ids
    /// 5 17 5 17 3, orders 2 and 3, two heads, 1000 rows, seed 42: the same
    /// bits on every machine, equal n-grams on equal rows.
    #[test]
    fn hash_rows_follow_the_documented_formula() {
        let ids = Tensor::from_vec(vec![5], vec![5.0, 17.0, 5.0, 17.0, 3.0]);
        let got = CpuBackend::new()
            .engram_hash(&ids, &[2, 3], 2, 1000, 42)
            .unwrap();
        assert_eq!(got.shape(), &[5, 4]);
        let want: Vec<f32> = [
            937, 1292, 2995, 3038, 368, 1329, 2446, 3171, 97, 1074, 2223, 3755, 368, 1329, 2404,
            3729, 338, 1746, 2408, 3236,
        ]
        .iter()
        .map(|&r| r as f32)
        .collect();
        assert_eq!(got.host(), &want[..]);
    }

    /// Sequences along the last axis are hashed independently: a batch of two
    /// gives each row what it gives alone.
    #[test]
    fn hash_treats_each_sequence_alone() {
        let b = CpuBackend::new();
        let two = Tensor::from_vec(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let first = Tensor::from_vec(vec![3], vec![1.0, 2.0, 3.0]);
        let second = Tensor::from_vec(vec![3], vec![4.0, 5.0, 6.0]);
        let got = b.engram_hash(&two, &[2], 3, 50, 7).unwrap();
        let mut want = b
            .engram_hash(&first, &[2], 3, 50, 7)
            .unwrap()
            .host()
            .to_vec();
        want.extend_from_slice(b.engram_hash(&second, &[2], 3, 50, 7).unwrap().host());
        assert_eq!(got.host(), &want[..]);
        assert!(got.host().iter().enumerate().all(|(i, &r)| {
            let slot = i % 3;
            r as usize >= slot * 50 && (r as usize) < (slot + 1) * 50
        }));
    }

    /// Naive f64 convolution.
    fn conv_ref(x: &[f32], w: &[f32], (b, t, c): (usize, usize, usize)) -> Vec<f64> {
        let k = w.len() / c;
        let mut y = vec![0f64; b * t * c];
        for s in 0..b {
            for p in 0..t {
                for ch in 0..c {
                    for j in 0..k {
                        if j <= p {
                            y[(s * t + p) * c + ch] +=
                                w[j * c + ch] as f64 * x[(s * t + p - j) * c + ch] as f64;
                        }
                    }
                }
            }
        }
        y
    }

    #[test]
    fn causal_conv_matches_reference_and_finite_differences() {
        let dims = (2, 5, 3);
        let x = values(30, 1);
        let w = values(12, 2);
        let g = values(30, 3);
        let xt = Tensor::from_vec(vec![2, 5, 3], x.clone());
        let wt = Tensor::from_vec(vec![4, 3], w.clone());
        let be = CpuBackend::new();
        let y = be.causal_conv(&xt, &wt).unwrap();
        let want: Vec<f32> = conv_ref(&x, &w, dims).iter().map(|&v| v as f32).collect();
        assert_eq!(y.host(), &want[..]);
        let (dx, dw) = be
            .causal_conv_backward(&xt, &wt, &Tensor::from_vec(vec![2, 5, 3], g.clone()))
            .unwrap();
        // L = Σ g·y is linear in x and in w: central differences are exact up to rounding.
        let loss = |x: &[f32], w: &[f32]| -> f64 {
            conv_ref(x, w, dims)
                .iter()
                .zip(&g)
                .map(|(y, &g)| y * g as f64)
                .sum()
        };
        let h = 1e-2f32;
        for i in 0..x.len() {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[i] += h;
            xm[i] -= h;
            let fd = (loss(&xp, &w) - loss(&xm, &w)) / ((xp[i] - xm[i]) as f64);
            assert!((fd - dx.host()[i] as f64).abs() < 1e-4, "dx[{i}]");
        }
        for i in 0..w.len() {
            let (mut wp, mut wm) = (w.clone(), w.clone());
            wp[i] += h;
            wm[i] -= h;
            let fd = (loss(&x, &wp) - loss(&x, &wm)) / ((wp[i] - wm[i]) as f64);
            assert!((fd - dw.host()[i] as f64).abs() < 1e-4, "dw[{i}]");
        }
    }
}
