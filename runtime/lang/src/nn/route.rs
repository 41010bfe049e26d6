//! Routing a mixture of experts' tokens (`nn::moe`): which experts each token
//! chooses, and where each chosen (token, expert) pair sits in the layout the
//! experts compute on.
//!
//! The layout is `[C, E, m]`: the tokens are cut into `C` blocks of
//! [`KC`] tokens (the CPU GEMM's block of `k`, so that an expert's weight
//! gradient sums its tokens exactly as a product over all tokens would); in
//! each block, expert `e`'s tokens come in increasing order, followed by
//! padding up to `m`, the most tokens any expert gets in any block. Padding
//! positions read the block's first token; nothing reads their results.

use mlpl_devices::cpu::KC;

/// The chosen experts of each row of router probabilities `p` `[n, e]`: the k
/// largest, equal values taken lower index first. Returns the 0/1 mask `[n·e]`
/// and the number of tokens choosing each expert.
pub fn choose(p: &[f32], n: usize, e: usize, k: usize) -> (Vec<f32>, Vec<usize>) {
    let mut mask = vec![0f32; n * e];
    let mut counts = vec![0usize; e];
    for row in 0..n {
        let probs = &p[row * e..(row + 1) * e];
        let mut order: Vec<usize> = (0..e).collect();
        // A stable sort keeps lower indices first among equal values.
        order.sort_by(|&a, &b| {
            probs[b]
                .partial_cmp(&probs[a])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for &j in order.iter().take(k) {
            mask[row * e + j] = 1.0;
            counts[j] += 1;
        }
    }
    (mask, counts)
}

/// Where the routed pairs of one application sit (see the module docs).
/// Indices are integer-valued f32, as the row kernels take them.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    /// Blocks of tokens, `C`.
    pub blocks: usize,
    /// Positions per (block, expert), `m`.
    pub width: usize,
    /// `[C·E·m]`: the token each position reads.
    pub rows: Vec<f32>,
    /// `[C·E·m]`: the position's gate in the flattened `[n·E]` gates.
    pub gates: Vec<f32>,
    /// `[k·n]`: slot `j·n + r` is the position of token `r`'s `j`-th chosen
    /// expert, experts in increasing index.
    pub slots: Vec<f32>,
}

impl Routing {
    /// The layout of the 0/1 choice `mask` `[n·e]` with `k` ones per row.
    pub fn new(mask: &[f32], n: usize, e: usize, k: usize) -> Routing {
        let k = k.min(e);
        let blocks = n.div_ceil(KC);
        // Each block's tokens of each expert.
        let mut lists: Vec<Vec<usize>> = vec![Vec::new(); blocks * e];
        for r in 0..n {
            for x in 0..e {
                if mask[r * e + x] != 0.0 {
                    lists[(r / KC) * e + x].push(r);
                }
            }
        }
        let width = lists.iter().map(Vec::len).max().unwrap_or(0);
        let mut rows = Vec::with_capacity(blocks * e * width);
        let mut gates = Vec::with_capacity(blocks * e * width);
        let mut slots = vec![0f32; k * n];
        let mut taken = vec![0usize; n];
        for (b, list) in lists.iter().enumerate() {
            let (block, x) = (b / e, b % e);
            let pad = block * KC;
            for i in 0..width {
                let r = list.get(i).copied().unwrap_or(pad);
                rows.push(r as f32);
                gates.push((r * e + x) as f32);
                if i < list.len() {
                    slots[taken[r] * n + r] = (b * width + i) as f32;
                    taken[r] += 1;
                }
            }
        }
        debug_assert!(taken.iter().all(|&t| t == k));
        Routing {
            blocks,
            width,
            rows,
            gates,
            slots,
        }
    }

    /// Positions in the layout, `C·E·m`.
    pub fn positions(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_laid_out_by_block_then_expert_with_padding() {
        // 3 tokens, 3 experts, top-2: token 0 → {0, 2}, 1 → {0, 1}, 2 → {0, 2}.
        let mask = [1., 0., 1., 1., 1., 0., 1., 0., 1.];
        let r = Routing::new(&mask, 3, 3, 2);
        assert_eq!((r.blocks, r.width), (1, 3));
        // Expert 0: tokens 0, 1, 2; expert 1: token 1 + padding; expert 2: 0, 2 + padding.
        assert_eq!(r.rows, vec![0., 1., 2., 1., 0., 0., 0., 2., 0.]);
        assert_eq!(r.gates, vec![0., 3., 6., 4., 1., 1., 2., 8., 2.]);
        // First choices (expert 0) then second choices (experts 2, 1, 2).
        assert_eq!(r.slots, vec![0., 1., 2., 6., 3., 7.]);
    }

    #[test]
    fn tokens_past_a_gemm_block_start_a_new_block() {
        let n = KC + 1;
        let mask = vec![1f32; n];
        let r = Routing::new(&mask, n, 1, 1);
        assert_eq!((r.blocks, r.width), (2, KC));
        assert_eq!(r.rows[KC], KC as f32);
        assert_eq!(
            r.rows[KC + 1],
            KC as f32,
            "padding reads the block's first token"
        );
        assert_eq!(r.slots[KC], KC as f32);
    }

    #[test]
    fn choose_takes_the_k_largest_lower_index_first_on_ties() {
        let (mask, counts) = choose(&[0.25, 0.5, 0.25, 0.1, 0.1, 0.8], 2, 3, 2);
        assert_eq!(mask, vec![1., 1., 0., 1., 0., 1.]);
        assert_eq!(counts, vec![2, 1, 1]);
    }
}
