//! Engram's n-gram hash (docs/language.md, "Engram conditional memory"): the
//! pure integer function every backend's `engram_hash` kernel computes, so the
//! rows a token's n-grams select are the same on every device and CPU.

/// The id that stands for positions before the start of a sequence.
pub const PAD: u64 = u64::MAX;

/// The odd constant of SplitMix64 (⌊2⁶⁴/φ⌋).
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finalizer: a bijection of `u64` that mixes every bit.
pub fn mix(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of head `head` of n-gram order `order`:
/// `mix(seed + γ·(order·2¹⁶ + head + 1))` (wrapping).
pub fn key(seed: u64, order: usize, head: usize) -> u64 {
    let slot = ((order as u64) << 16) + head as u64 + 1;
    mix(seed.wrapping_add(GOLDEN_GAMMA.wrapping_mul(slot)))
}

/// The bucket in `[0, rows)` of the n-gram `window` (oldest id first, [`PAD`]
/// before the sequence start) for one head key: `acc = key`, then
/// `acc = mix(acc ^ id)` for each id in order, and `acc mod rows`.
pub fn bucket(key: u64, window: impl IntoIterator<Item = u64>, rows: usize) -> usize {
    let acc = window.into_iter().fold(key, |acc, id| mix(acc ^ id));
    (acc % rows.max(1) as u64) as usize
}

/// The table row of slot `slot` (= order index · heads + head) of position `t`
/// of the sequence `ids`: `slot·rows + bucket(key, ids[t-n+1 ..= t], rows)`.
pub fn row(ids: &[f32], t: usize, order: usize, slot: usize, key: u64, rows: usize) -> usize {
    let window = (0..order).map(|j| {
        let back = order - 1 - j;
        if back > t {
            PAD
        } else {
            ids[t - back] as u64
        }
    });
    slot * rows + bucket(key, window, rows)
}
