//! Exact 64-bit integer hashing as MLX operations on `uint64` arrays
//! (wrapping `+` and `·`, `^`, `>>`, `mod`), so the masks and rows the CPU
//! computes with SplitMix64 are made on MLX with the same bits: dropout masks
//! (LANGUAGE §13.7) and Engram's n-gram rows ([`crate::engram`]). mlx-rs does
//! not wrap MLX's bitwise operations; they are called through mlx-c here.

use mlx_rs::error::Exception;
use mlx_rs::ops::{add, multiply, remainder};
use mlx_rs::{Array, Dtype, Stream};

use crate::engram::GOLDEN_GAMMA;

/// An MLX result.
type A = std::result::Result<Array, Exception>;

/// An mlx-c binary operation (`res = op(a, b)` on a stream).
type RawBinary = unsafe extern "C" fn(
    *mut mlx_sys::mlx_array,
    mlx_sys::mlx_array,
    mlx_sys::mlx_array,
    mlx_sys::mlx_stream,
) -> std::os::raw::c_int;

/// `op(a, b)` through mlx-c.
fn raw(op: RawBinary, what: &str, a: &Array, b: &Array) -> A {
    let stream = Stream::thread_local_or_default();
    // SAFETY: `a`, `b` and the stream are live MLX objects for the call; `res`
    // is a fresh array handle that the call fills on success (it is then owned
    // by the returned `Array`) and that is freed here on failure.
    unsafe {
        let mut res = mlx_sys::mlx_array_new();
        if op(&mut res, a.as_ptr(), b.as_ptr(), stream.as_ptr()) != 0 {
            mlx_sys::mlx_array_free(res);
            return Err(Exception::custom(format!("MLX's {what} on uint64 failed")));
        }
        Ok(Array::from_ptr(res))
    }
}

/// A `uint64` scalar.
pub(super) fn u64s(v: u64) -> Array {
    Array::from_slice(&[v], &[])
}

/// `a ^ b`.
fn xor(a: &Array, b: &Array) -> A {
    raw(mlx_sys::mlx_bitwise_xor, "bitwise xor", a, b)
}

/// `a >> s`.
fn shr(a: &Array, s: u64) -> A {
    raw(mlx_sys::mlx_right_shift, "right shift", a, &u64s(s))
}

/// SplitMix64's finalizer ([`crate::engram::mix`]) element-wise.
pub(super) fn mix(z: &Array) -> A {
    let z = multiply(xor(z, &shr(z, 30)?)?, u64s(0xBF58_476D_1CE4_E5B9))?;
    let z = multiply(xor(&z, &shr(&z, 27)?)?, u64s(0x94D0_49BB_1331_11EB))?;
    xor(&z, &shr(&z, 31)?)
}

/// The dropout mask of [`Backend::dropout_mask`](crate::Backend::dropout_mask)
/// for `n` elements (flat, f32): element i is `1/(1-p)` when
/// `(splitmix64(key + i·γ) >> 11)·2⁻⁵³ >= p`, else 0. `key` is a `uint64`
/// scalar array (an input of a compiled step's graph, where it changes every
/// step). The comparison is made on the integers: `bits·2⁻⁵³ >= p` exactly
/// when `bits >= ⌈p·2⁵³⌉`.
pub(super) fn dropout_mask(n: usize, key: &Array, p: f64) -> A {
    let i = Array::arange::<f64, u64>(0.0, n as f64, 1.0)?;
    let z = add(key, multiply(&i, u64s(GOLDEN_GAMMA))?)?;
    let bits = shr(&mix(&add(&z, u64s(GOLDEN_GAMMA))?)?, 11)?;
    let threshold = (p * 9_007_199_254_740_992.0).ceil().max(0.0);
    if threshold >= 9_007_199_254_740_992.0 {
        // No 53-bit value reaches it: nothing is kept.
        return Array::zeros::<f32>(&[n as i32]);
    }
    let keep = bits.ge(u64s(threshold as u64))?;
    let scale = (1.0 / (1.0 - p)) as f32;
    mlx_rs::ops::select(&keep, Array::from_f32(scale), Array::from_f32(0.0))
}

/// Engram's hashed rows ([`Backend::engram_hash`](crate::Backend::engram_hash))
/// of `ids` as `[rows_of_sequences, T]` integer-valued f32: `[B, T, slots]`
/// f32, slot `o·heads + h` holding `slot·rows + bucket`.
pub(super) fn engram_rows(
    ids: &Array,
    orders: &[usize],
    heads: usize,
    rows: usize,
    seed: u64,
) -> A {
    let (b, t) = (ids.shape()[0], ids.shape()[1]);
    let ids = ids.as_dtype(Dtype::Uint64)?;
    let pad = |k: i32| Array::full::<u64>(&[b, k], u64s(crate::engram::PAD));
    // `back[k]`: ids shifted `k` positions later (PAD before the start).
    let longest = orders.iter().copied().max().unwrap_or(1);
    let mut back = Vec::with_capacity(longest);
    for k in 0..longest as i32 {
        back.push(if k == 0 {
            ids.clone()
        } else if k >= t {
            pad(t)?
        } else {
            let idx: Vec<i32> = (0..t - k).collect();
            let kept = ids.take_axis(Array::from_slice(&idx, &[t - k]), 1)?;
            mlx_rs::ops::concatenate(&[pad(k)?, kept], 1)?
        });
    }
    let mut slots = Vec::with_capacity(orders.len() * heads);
    for (o, &order) in orders.iter().enumerate() {
        for h in 0..heads {
            let slot = o * heads + h;
            let mut acc = u64s(crate::engram::key(seed, order, h));
            for j in 0..order {
                acc = mix(&xor(&acc, &back[order - 1 - j])?)?;
            }
            let bucket = remainder(&acc, u64s(rows.max(1) as u64))?;
            let row = add(bucket, u64s((slot * rows) as u64))?;
            slots.push(row.as_dtype(Dtype::Float32)?);
        }
    }
    mlx_rs::ops::stack(&slots, 2)
}
