//! Tokenizers (LANGUAGE §10.10, §16.4): the byte-level tokenizer and byte-level
//! BPE with the exact training, application and decoding rules of the original
//! MLPL.
//!
//! Training and application keep the tokens in a linked list with per-pair
//! occurrence lists (and, for training, incremental pair counts in a lazy
//! max-heap), so each merge costs time proportional to the occurrences it
//! rewrites rather than to the corpus length. The results are exactly those of
//! the naive algorithm of §16.4 (recount all pairs, replace left to right).

use mlpl_diag::code;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

/// Size of the byte alphabet every tokenizer starts from.
pub const BYTE_VOCAB: usize = 256;

/// Sentinel for "no neighbour" in the token list.
const NONE: usize = usize::MAX;

/// Why a tokenizer operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenizerError {
    /// A byte-level decode met an id above 255 (E0402).
    ByteIdOutOfRange {
        /// Position of the id in the input.
        index: usize,
        /// The offending id.
        id: u32,
    },
    /// A merge table entry refers to an id that does not exist before it (a
    /// corrupt saved tokenizer).
    InvalidMerge {
        /// Position of the merge in the table.
        index: usize,
        /// The pair stored there.
        pair: (u32, u32),
    },
}

impl TokenizerError {
    /// The diagnostic code of LANGUAGE §20 this error is reported with.
    pub fn code(&self) -> &'static str {
        match self {
            TokenizerError::ByteIdOutOfRange { .. } => code::E0402,
            TokenizerError::InvalidMerge { .. } => code::E0406,
        }
    }
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::ByteIdOutOfRange { index, id } => {
                write!(f, "byte id {id} at position {index} is outside 0..255")
            }
            TokenizerError::InvalidMerge { index, pair } => write!(
                f,
                "merge {index} ({}, {}) refers to an id not defined before it",
                pair.0, pair.1
            ),
        }
    }
}

impl std::error::Error for TokenizerError {}

/// A tokenizer value (LANGUAGE §5.5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Tokenizer {
    /// The byte-level tokenizer: tokens are UTF-8 bytes, vocabulary 256.
    Bytes,
    /// A trained byte-level BPE tokenizer.
    Bpe(BpeTokenizer),
}

impl Tokenizer {
    /// Token ids of `bytes`: the bytes themselves, or the BPE merges applied in
    /// training order.
    pub fn encode(&self, bytes: &[u8]) -> Vec<u32> {
        match self {
            Tokenizer::Bytes => bytes.iter().map(|&b| u32::from(b)).collect(),
            Tokenizer::Bpe(bpe) => bpe.encode(bytes),
        }
    }

    /// [`Tokenizer::encode`] that gives up (`None`) soon after `stop` returns
    /// true; `stop` is asked between merges and every few thousand positions.
    pub fn encode_until(&self, bytes: &[u8], stop: &dyn Fn() -> bool) -> Option<Vec<u32>> {
        match self {
            Tokenizer::Bytes => Some(self.encode(bytes)),
            Tokenizer::Bpe(bpe) => {
                let (ids, stopped) = bpe.encode_with(bytes, stop);
                (!stopped).then_some(ids)
            }
        }
    }

    /// Decodes ids into text (invalid UTF-8 becomes U+FFFD) and returns it with
    /// the number of ids dropped because they are at or above the vocabulary
    /// (BPE only; always 0 for bytes). A byte-level id above 255 is an error.
    pub fn decode(&self, ids: &[u32]) -> Result<(String, usize), TokenizerError> {
        match self {
            Tokenizer::Bytes => decode_bytes(ids).map(|text| (text, 0)),
            Tokenizer::Bpe(bpe) => Ok(bpe.decode(ids)),
        }
    }

    /// The vocabulary size: 256, or 256 + merges for BPE.
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Bytes => BYTE_VOCAB,
            Tokenizer::Bpe(bpe) => bpe.vocab_size(),
        }
    }

    /// The description shown inside `<tokenizer: …>` (LANGUAGE §7.4).
    pub fn describe(&self) -> String {
        match self {
            Tokenizer::Bytes => format!("byte-level tokenizer (vocab={BYTE_VOCAB})"),
            Tokenizer::Bpe(bpe) => bpe.describe(),
        }
    }

    /// The merge table in training order (empty for the byte-level tokenizer).
    pub fn merges(&self) -> &[(u32, u32)] {
        match self {
            Tokenizer::Bytes => &[],
            Tokenizer::Bpe(bpe) => bpe.merges(),
        }
    }
}

/// The UTF-8 bytes of `text` as ids 0..255 (`tokenize_bytes`).
pub fn tokenize_bytes(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).collect()
}

/// Decodes byte ids into text, replacing invalid UTF-8 with U+FFFD
/// (`decode_bytes`); an id above 255 is [`TokenizerError::ByteIdOutOfRange`].
pub fn decode_bytes(ids: &[u32]) -> Result<String, TokenizerError> {
    let mut bytes = Vec::with_capacity(ids.len());
    for (index, &id) in ids.iter().enumerate() {
        let byte = u8::try_from(id).map_err(|_| TokenizerError::ByteIdOutOfRange { index, id })?;
        bytes.push(byte);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A trained byte-level BPE tokenizer: merge i joins a pair of earlier ids into
/// id 256 + i.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BpeParts")]
pub struct BpeTokenizer {
    merges: Vec<(u32, u32)>,
    trained_bytes: usize,
    seed: u64,
}

/// The unchecked serialized form of [`BpeTokenizer`], validated on load.
#[derive(Deserialize)]
struct BpeParts {
    merges: Vec<(u32, u32)>,
    trained_bytes: usize,
    seed: u64,
}

impl TryFrom<BpeParts> for BpeTokenizer {
    type Error = TokenizerError;

    fn try_from(parts: BpeParts) -> Result<Self, Self::Error> {
        BpeTokenizer::from_parts(parts.merges, parts.trained_bytes, parts.seed)
    }
}

impl BpeTokenizer {
    /// A tokenizer from a stored merge table, the training corpus length and the
    /// recorded seed. Every merge must join ids defined before it (bytes or
    /// earlier merges), else [`TokenizerError::InvalidMerge`].
    pub fn from_parts(
        merges: Vec<(u32, u32)>,
        trained_bytes: usize,
        seed: u64,
    ) -> Result<Self, TokenizerError> {
        for (index, &pair) in merges.iter().enumerate() {
            let own_id = (BYTE_VOCAB + index) as u64;
            if u64::from(pair.0) >= own_id || u64::from(pair.1) >= own_id {
                return Err(TokenizerError::InvalidMerge { index, pair });
            }
        }
        Ok(BpeTokenizer {
            merges,
            trained_bytes,
            seed,
        })
    }

    /// The merge table in training order.
    pub fn merges(&self) -> &[(u32, u32)] {
        &self.merges
    }

    /// The number of corpus bytes the tokenizer was trained on.
    pub fn trained_bytes(&self) -> usize {
        self.trained_bytes
    }

    /// The seed recorded at training (it does not influence training).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The vocabulary size, 256 + merges.
    pub fn vocab_size(&self) -> usize {
        BYTE_VOCAB + self.merges.len()
    }

    /// `BPE tokenizer (vocab=V, merges=K, trained from N bytes, seed=S)`.
    pub fn describe(&self) -> String {
        format!(
            "BPE tokenizer (vocab={}, merges={}, trained from {} bytes, seed={})",
            self.vocab_size(),
            self.merges.len(),
            self.trained_bytes,
            self.seed
        )
    }

    /// Applies the merges in training order to the bytes, each as a left-to-right
    /// non-overlapping replacement (`apply_tokenizer`).
    pub fn encode(&self, bytes: &[u8]) -> Vec<u32> {
        self.encode_with(bytes, &|| false).0
    }

    /// [`BpeTokenizer::encode`], stopping early (second value true) once `stop`
    /// returns true.
    fn encode_with(&self, bytes: &[u8], stop: &dyn Fn() -> bool) -> (Vec<u32>, bool) {
        let mut ranks: PairMap<u32> = PairMap::default();
        for (rank, &(l, r)) in self.merges.iter().enumerate() {
            ranks.entry(pair_key(l, r)).or_insert(rank as u32);
        }
        let Some(mut seq) = TokenList::build(bytes, stop) else {
            return (Vec::new(), true);
        };
        let mut occurrences: Vec<Vec<usize>> = vec![Vec::new(); self.merges.len()];
        for p in 0..seq.tok.len().saturating_sub(1) {
            if p % STOP_CHECK_EVERY == STOP_CHECK_EVERY - 1 && stop() {
                return (Vec::new(), true);
            }
            if let Some(&rank) = ranks.get(&pair_key(seq.tok[p], seq.tok[p + 1])) {
                occurrences[rank as usize].push(p);
            }
        }
        let mut visited = 0usize;
        for rank in 0..self.merges.len() {
            let mut list = std::mem::take(&mut occurrences[rank]);
            if list.is_empty() {
                continue;
            }
            visited += list.len();
            if visited >= STOP_CHECK_EVERY {
                visited = 0;
                if stop() {
                    return (Vec::new(), true);
                }
            }
            list.sort_unstable();
            list.dedup();
            let (a, b) = self.merges[rank];
            let new_id = (BYTE_VOCAB + rank) as u32;
            for p in list {
                let Some(m) = seq.merge_at(p, a, b, new_id) else {
                    continue;
                };
                // Pairs created with the new token belong to later merges only.
                if let Some(left) = m.left {
                    if let Some(&r) = ranks.get(&pair_key(left, new_id)) {
                        occurrences[r as usize].push(m.left_pos);
                    }
                }
                if let Some(right) = m.right {
                    if let Some(&r) = ranks.get(&pair_key(new_id, right)) {
                        occurrences[r as usize].push(p);
                    }
                }
            }
        }
        (seq.into_tokens(), false)
    }

    /// Expands each id into bytes and decodes them as UTF-8 (invalid sequences
    /// become U+FFFD). Ids at or above the vocabulary size are dropped; their
    /// count is returned with the text (W0402).
    pub fn decode(&self, ids: &[u32]) -> (String, usize) {
        let vocab = self.vocab_size();
        let mut bytes = Vec::with_capacity(ids.len());
        let mut dropped = 0usize;
        let mut stack: Vec<u32> = Vec::new();
        for &id in ids {
            if id as usize >= vocab {
                dropped += 1;
                continue;
            }
            stack.push(id);
            while let Some(t) = stack.pop() {
                if (t as usize) < BYTE_VOCAB {
                    bytes.push(t as u8);
                } else {
                    // Validated: both parts are smaller ids, so this terminates.
                    let (l, r) = self.merges[t as usize - BYTE_VOCAB];
                    stack.push(r);
                    stack.push(l);
                }
            }
        }
        (String::from_utf8_lossy(&bytes).into_owned(), dropped)
    }
}

/// `train_bpe(corpus, vocab_size, seed)` (LANGUAGE §16.4): repeatedly merges the
/// most frequent adjacent pair (ties to the numerically smallest pair, left id
/// first) into the next id, until the vocabulary reaches `vocab_size` or fewer
/// than two tokens remain. Pairs that occur once are merged too. The seed is only
/// recorded.
pub fn train_bpe(bytes: &[u8], vocab_size: usize, seed: u64) -> BpeTokenizer {
    train_bpe_with(bytes, vocab_size, seed, &|| false).0
}

/// [`train_bpe`] that gives up (`None`) soon after `stop` returns true; `stop`
/// is asked between merges and every few thousand merged positions, so a cancel
/// takes effect within milliseconds even on a large corpus.
pub fn train_bpe_until(
    bytes: &[u8],
    vocab_size: usize,
    seed: u64,
    stop: &dyn Fn() -> bool,
) -> Option<BpeTokenizer> {
    let (tok, stopped) = train_bpe_with(bytes, vocab_size, seed, stop);
    (!stopped).then_some(tok)
}

/// Positions processed between two calls of a `stop` function.
const STOP_CHECK_EVERY: usize = 1 << 14;

/// The training loop; the flag says whether `stop` ended it early.
fn train_bpe_with(
    bytes: &[u8],
    vocab_size: usize,
    seed: u64,
    stop: &dyn Fn() -> bool,
) -> (BpeTokenizer, bool) {
    // Ids are u32; a corpus never yields more merges than bytes anyway.
    let max_merges = vocab_size
        .saturating_sub(BYTE_VOCAB)
        .min(u32::MAX as usize - BYTE_VOCAB);
    let mut merges = Vec::new();
    if max_merges == 0 || bytes.len() < 2 {
        let tok = BpeTokenizer {
            merges,
            trained_bytes: bytes.len(),
            seed,
        };
        return (tok, false);
    }
    let Some(mut seq) = TokenList::build(bytes, stop) else {
        let tok = BpeTokenizer {
            merges,
            trained_bytes: bytes.len(),
            seed,
        };
        return (tok, true);
    };
    let mut counts = PairCounts::default();
    for p in 0..seq.tok.len() - 1 {
        if p % STOP_CHECK_EVERY == STOP_CHECK_EVERY - 1 && stop() {
            let tok = BpeTokenizer {
                merges,
                trained_bytes: bytes.len(),
                seed,
            };
            return (tok, true);
        }
        counts.add(pair_key(seq.tok[p], seq.tok[p + 1]), p);
    }
    counts.push_all();
    let mut since_check = 0usize;
    let mut stopped = false;
    while merges.len() < max_merges && seq.live >= 2 {
        if stop() {
            stopped = true;
            break;
        }
        let Some(best) = counts.pop_best() else {
            break;
        };
        let (a, b) = split_key(best);
        let new_id = (BYTE_VOCAB + merges.len()) as u32;
        let mut list = counts.take_positions(best);
        list.sort_unstable();
        list.dedup();
        for p in list {
            since_check += 1;
            if since_check >= STOP_CHECK_EVERY {
                since_check = 0;
                if stop() {
                    stopped = true;
                    break;
                }
            }
            let Some(m) = seq.merge_at(p, a, b, new_id) else {
                continue;
            };
            counts.change(best, -1, None);
            if let Some(left) = m.left {
                counts.change(pair_key(left, a), -1, None);
                counts.change(pair_key(left, new_id), 1, Some(m.left_pos));
            }
            if let Some(right) = m.right {
                counts.change(pair_key(b, right), -1, None);
                counts.change(pair_key(new_id, right), 1, Some(p));
            }
        }
        if stopped {
            break;
        }
        merges.push((a, b));
    }
    let tok = BpeTokenizer {
        merges,
        trained_bytes: bytes.len(),
        seed,
    };
    (tok, stopped)
}

/// A pair of ids packed as `left << 32 | right`, so that numeric order is the
/// tie-breaking order of §16.4.
fn pair_key(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// Inverse of [`pair_key`].
fn split_key(key: u64) -> (u32, u32) {
    ((key >> 32) as u32, key as u32)
}

/// A fast hasher for packed pairs (SplitMix64 finaliser of the key).
#[derive(Default)]
struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = super::rng::mix(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = super::rng::mix(self.0 ^ x);
    }
}

/// A hash map keyed by packed pairs.
type PairMap<V> = HashMap<u64, V, BuildHasherDefault<PairHasher>>;

/// The token sequence as a doubly linked list over the original positions; a
/// merge keeps the left node and unlinks the right one, so positions keep their
/// left-to-right order.
struct TokenList {
    tok: Vec<u32>,
    next: Vec<usize>,
    prev: Vec<usize>,
    alive: Vec<bool>,
    live: usize,
}

/// The neighbours of a merge that just happened.
struct Merged {
    /// The token left of the new one, if any.
    left: Option<u32>,
    /// The position of that left token.
    left_pos: usize,
    /// The token right of the new one, if any.
    right: Option<u32>,
}

impl TokenList {
    /// The list of `bytes`, built in chunks; `None` when `stop` returned true
    /// meanwhile (building a large corpus's list takes a while).
    fn build(bytes: &[u8], stop: &dyn Fn() -> bool) -> Option<Self> {
        let n = bytes.len();
        let (mut tok, mut next, mut prev) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (c, chunk) in bytes.chunks(STOP_CHECK_EVERY * 64).enumerate() {
            if stop() {
                return None;
            }
            let start = c * STOP_CHECK_EVERY * 64;
            let positions = start..start + chunk.len();
            tok.extend(chunk.iter().map(|&b| u32::from(b)));
            next.extend(
                positions
                    .clone()
                    .map(|i| if i + 1 < n { i + 1 } else { NONE }),
            );
            prev.extend(positions.map(|i| if i == 0 { NONE } else { i - 1 }));
        }
        Some(TokenList {
            tok,
            next,
            prev,
            alive: vec![true; n],
            live: n,
        })
    }

    /// Merges the pair (a, b) starting at position `p` into `new_id` if it is
    /// still there; returns the neighbours, or `None` when the occurrence is
    /// stale (consumed by an earlier, overlapping replacement).
    fn merge_at(&mut self, p: usize, a: u32, b: u32, new_id: u32) -> Option<Merged> {
        if p >= self.tok.len() || !self.alive[p] || self.tok[p] != a {
            return None;
        }
        let q = self.next[p];
        if q == NONE || self.tok[q] != b {
            return None;
        }
        let left_pos = self.prev[p];
        let r = self.next[q];
        self.tok[p] = new_id;
        self.alive[q] = false;
        self.next[p] = r;
        if r != NONE {
            self.prev[r] = p;
        }
        self.live -= 1;
        Some(Merged {
            left: (left_pos != NONE).then(|| self.tok[left_pos]),
            left_pos,
            right: (r != NONE).then(|| self.tok[r]),
        })
    }

    /// The remaining tokens in order.
    fn into_tokens(self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.live);
        let mut p = if self.tok.is_empty() { NONE } else { 0 };
        while p != NONE {
            out.push(self.tok[p]);
            p = self.next[p];
        }
        out
    }
}

/// Pair counts with their occurrence positions and a lazy max-heap ordered by
/// (count, smallest pair).
#[derive(Default)]
struct PairCounts {
    counts: PairMap<i64>,
    positions: PairMap<Vec<usize>>,
    heap: BinaryHeap<(i64, Reverse<u64>)>,
}

impl PairCounts {
    /// Counts one initial occurrence (the heap is filled by `push_all`).
    fn add(&mut self, key: u64, pos: usize) {
        *self.counts.entry(key).or_insert(0) += 1;
        self.positions.entry(key).or_default().push(pos);
    }

    fn push_all(&mut self) {
        let entries: Vec<(i64, Reverse<u64>)> =
            self.counts.iter().map(|(&k, &c)| (c, Reverse(k))).collect();
        self.heap = BinaryHeap::from(entries);
    }

    /// Adjusts a count (recording a new occurrence position when given) and
    /// pushes the new count so the heap always holds the current one.
    fn change(&mut self, key: u64, delta: i64, pos: Option<usize>) {
        let count = self.counts.entry(key).or_insert(0);
        *count += delta;
        let now = *count;
        if now <= 0 {
            self.counts.remove(&key);
        } else {
            self.heap.push((now, Reverse(key)));
        }
        if let Some(pos) = pos {
            self.positions.entry(key).or_default().push(pos);
        }
    }

    /// The pair with the highest current count, smallest pair first on ties.
    fn pop_best(&mut self) -> Option<u64> {
        while let Some((count, Reverse(key))) = self.heap.pop() {
            if self.counts.get(&key) == Some(&count) {
                return Some(key);
            }
        }
        None
    }

    fn take_positions(&mut self, key: u64) -> Vec<usize> {
        self.positions.remove(&key).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::rng::Xorshift64;

    /// §16.4 exactly as written: recount every pair each round.
    fn naive_train(bytes: &[u8], vocab_size: usize) -> Vec<(u32, u32)> {
        let mut tokens: Vec<u32> = bytes.iter().map(|&b| u32::from(b)).collect();
        let mut merges = Vec::new();
        let mut next_id = 256usize;
        while next_id < vocab_size && tokens.len() >= 2 {
            let mut counts: std::collections::BTreeMap<(u32, u32), usize> = Default::default();
            for w in tokens.windows(2) {
                *counts.entry((w[0], w[1])).or_default() += 1;
            }
            let best_count = *counts.values().max().unwrap();
            let best = *counts.iter().find(|(_, &c)| c == best_count).unwrap().0;
            tokens = naive_apply(&tokens, best, next_id as u32);
            merges.push(best);
            next_id += 1;
        }
        merges
    }

    fn naive_apply(tokens: &[u32], pair: (u32, u32), id: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            if i + 1 < tokens.len() && tokens[i] == pair.0 && tokens[i + 1] == pair.1 {
                out.push(id);
                i += 2;
            } else {
                out.push(tokens[i]);
                i += 1;
            }
        }
        out
    }

    fn naive_encode(bytes: &[u8], merges: &[(u32, u32)]) -> Vec<u32> {
        let mut tokens: Vec<u32> = bytes.iter().map(|&b| u32::from(b)).collect();
        for (i, &pair) in merges.iter().enumerate() {
            tokens = naive_apply(&tokens, pair, 256 + i as u32);
        }
        tokens
    }

    fn random_corpus(seed: u64, len: usize, alphabet: &[u8]) -> Vec<u8> {
        let mut rng = Xorshift64::new(seed);
        (0..len)
            .map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize])
            .collect()
    }

    #[test]
    fn conformance_bpe_tiny_corpus() {
        let corpus = crate::data::corpora::preloaded("tiny_corpus").unwrap();
        let tok = train_bpe(corpus.as_bytes(), 270, 0);
        assert_eq!(
            tok.encode(b"the quick brown fox"),
            vec![266, 265, 105, 262, 258, 114, 111, 119, 110, 259, 264]
        );
        assert_eq!(tok.vocab_size(), 270);
        assert_eq!(
            Tokenizer::Bpe(tok).describe(),
            "BPE tokenizer (vocab=270, merges=14, trained from 86 bytes, seed=0)"
        );
    }

    #[test]
    fn conformance_tokenize_bytes() {
        assert_eq!(tokenize_bytes("hé!"), vec![104, 195, 169, 33]);
        assert_eq!(
            Tokenizer::Bytes.encode("hé!".as_bytes()),
            vec![104, 195, 169, 33]
        );
    }

    #[test]
    fn abababab_stops_early() {
        let tok = train_bpe(b"abababab", 260, 0);
        assert_eq!(tok.vocab_size(), 259);
        assert_eq!(tok.merges(), &[(97, 98), (256, 256), (257, 257)]);
        assert_eq!(tok.encode(b"abababab"), vec![258]);
        assert_eq!(tok.encode(b"ababa"), vec![257, 97]);
    }

    #[test]
    fn ties_go_to_the_smallest_pair() {
        // (b, a), (a, b), (c, d) all occur once... "ab" "cd": pairs ab, bc, cd.
        let tok = train_bpe(b"abcd", 257, 0);
        assert_eq!(tok.merges(), &[(97, 98)]);
        let tok = train_bpe(b"zyzyab", 257, 0);
        // (z, y) occurs twice and wins over (a, b).
        assert_eq!(tok.merges(), &[(122, 121)]);
        let tok = train_bpe(b"aaaa", 300, 0);
        assert_eq!(tok.merges(), &[(97, 97), (256, 256)]);
        assert_eq!(tok.encode(b"aaaaa"), vec![257, 97]);
    }

    #[test]
    fn matches_the_naive_algorithm_on_random_corpora() {
        let alphabets: [&[u8]; 4] = [b"ab", b"abc", b"aab ", b"the quick brown fox"];
        for seed in 1..40u64 {
            let alphabet = alphabets[(seed % 4) as usize];
            let corpus = random_corpus(seed, 50 + (seed as usize * 37) % 400, alphabet);
            let vocab = 256 + (seed as usize * 7) % 80;
            let tok = train_bpe(&corpus, vocab, seed);
            assert_eq!(
                tok.merges(),
                naive_train(&corpus, vocab).as_slice(),
                "seed {seed}"
            );
            let probe = random_corpus(seed + 1000, 300, alphabet);
            assert_eq!(
                tok.encode(&probe),
                naive_encode(&probe, tok.merges()),
                "seed {seed}"
            );
            assert_eq!(tok.encode(&corpus), naive_encode(&corpus, tok.merges()));
            let (text, dropped) = tok.decode(&tok.encode(&probe));
            assert_eq!(text.as_bytes(), probe.as_slice());
            assert_eq!(dropped, 0);
        }
    }

    #[test]
    fn shakespeare_round_trip_and_naive_agreement() {
        let text = crate::data::corpora::preloaded("tiny_shakespeare_snippet").unwrap();
        let tok = train_bpe(text.as_bytes(), 400, 42);
        assert_eq!(tok.merges(), naive_train(text.as_bytes(), 400).as_slice());
        let ids = tok.encode(text.as_bytes());
        assert_eq!(ids, naive_encode(text.as_bytes(), tok.merges()));
        assert!(ids.len() < text.len() / 2);
        assert_eq!(tok.decode(&ids), (text.to_string(), 0));
        assert_eq!(tok.seed(), 42);
        assert_eq!(tok.trained_bytes(), 2028);
    }

    #[test]
    fn training_and_encoding_stop_when_asked() {
        let corpus: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i * 7 % 13) as u8).collect();
        let asked = std::cell::Cell::new(0usize);
        let stop_at = |n: usize| {
            let asked = &asked;
            move || {
                asked.set(asked.get() + 1);
                asked.get() > n
            }
        };
        assert!(train_bpe_until(&corpus, 1000, 0, &stop_at(3)).is_none());
        // Asked again and again while it runs (not only once at the start).
        assert_eq!(asked.get(), 4);
        let full = train_bpe_until(&corpus, 300, 0, &|| false).unwrap();
        assert_eq!(full.merges(), train_bpe(&corpus, 300, 0).merges());
        let tok = Tokenizer::Bpe(full);
        asked.set(0);
        assert!(tok.encode_until(&corpus, &stop_at(0)).is_none());
        assert_eq!(
            tok.encode_until(&corpus, &|| false).unwrap(),
            tok.encode(&corpus)
        );
    }

    #[test]
    fn trains_a_large_corpus_quickly() {
        // ~1 MB of word-like text with vocabulary 1000 must stay fast.
        let words = [
            "the ", "king ", "and ", "queen ", "of ", "thy ", "love ", "shall ", "not ", "be ",
            "a ", "night ", "my ", "lord, ", "good ", "day.\n",
        ];
        let mut rng = Xorshift64::new(7);
        let mut corpus = Vec::new();
        while corpus.len() < 1_000_000 {
            let w = words[(rng.next_u64() % words.len() as u64) as usize];
            corpus.extend_from_slice(w.as_bytes());
            if matches!(rng.next_u64() % 5, 0) {
                corpus.push(b'a' + (rng.next_u64() % 26) as u8);
            }
        }
        let start = std::time::Instant::now();
        let tok = train_bpe(&corpus, 1000, 0);
        let trained = start.elapsed();
        assert_eq!(tok.vocab_size(), 1000);
        let ids = tok.encode(&corpus);
        assert_eq!(tok.decode(&ids).0.as_bytes(), corpus.as_slice());
        assert!(start.elapsed().as_secs() < 20, "too slow: {trained:?}");
    }

    #[test]
    fn small_and_empty_inputs() {
        assert!(train_bpe(b"", 300, 0).merges().is_empty());
        assert!(train_bpe(b"a", 300, 0).merges().is_empty());
        assert!(train_bpe(b"abc", 256, 0).merges().is_empty());
        assert!(train_bpe(b"abc", 0, 0).merges().is_empty());
        assert_eq!(train_bpe(b"ab", usize::MAX, 0).merges(), &[(97, 98)]);
        let tok = train_bpe(b"abc", 300, 0);
        assert!(tok.encode(b"").is_empty());
        assert_eq!(tok.encode(b"x"), vec![120]);
        assert_eq!(tok.decode(&[]), (String::new(), 0));
    }

    #[test]
    fn decode_drops_unknown_ids_and_replaces_invalid_utf8() {
        let tok = train_bpe(b"hello hello", 260, 0);
        let v = tok.vocab_size() as u32;
        let ids = tok.encode(b"hello");
        let mut with_junk = ids.clone();
        with_junk.push(v);
        with_junk.insert(0, u32::MAX);
        assert_eq!(tok.decode(&with_junk), ("hello".to_string(), 2));
        assert_eq!(tok.decode(&[0xC3]), ("\u{FFFD}".to_string(), 0));
        assert_eq!(tok.decode(&[104, 0xFF, 105]), ("h\u{FFFD}i".to_string(), 0));
    }

    #[test]
    fn byte_level_decoding() {
        assert_eq!(decode_bytes(&[104, 195, 169, 33]).unwrap(), "hé!");
        assert_eq!(decode_bytes(&[195]).unwrap(), "\u{FFFD}");
        assert_eq!(decode_bytes(&[]).unwrap(), "");
        let err = decode_bytes(&[1, 256]).unwrap_err();
        assert_eq!(err, TokenizerError::ByteIdOutOfRange { index: 1, id: 256 });
        assert_eq!(err.code(), code::E0402);
        assert_eq!(
            Tokenizer::Bytes.decode(&[104, 105]).unwrap(),
            ("hi".to_string(), 0)
        );
        assert!(Tokenizer::Bytes.decode(&[300]).is_err());
    }

    #[test]
    fn descriptions_and_accessors() {
        assert_eq!(
            Tokenizer::Bytes.describe(),
            "byte-level tokenizer (vocab=256)"
        );
        assert_eq!(Tokenizer::Bytes.vocab_size(), 256);
        assert!(Tokenizer::Bytes.merges().is_empty());
        let tok = Tokenizer::Bpe(train_bpe(b"abababab", 260, u64::MAX));
        assert_eq!(tok.vocab_size(), 259);
        assert_eq!(tok.merges().len(), 3);
        assert_eq!(
            tok.describe(),
            "BPE tokenizer (vocab=259, merges=3, trained from 8 bytes, seed=18446744073709551615)"
        );
        assert_eq!(tok.encode(b"ab"), vec![256]);
        assert_eq!(tok.decode(&[258]).unwrap(), ("abababab".to_string(), 0));
    }

    #[test]
    fn serde_round_trip_and_validation() {
        let tok = Tokenizer::Bpe(train_bpe(b"the theme then", 270, 3));
        let json = serde_json::to_string(&tok).unwrap();
        let back: Tokenizer = serde_json::from_str(&json).unwrap();
        assert_eq!(back, tok);
        let bytes: Tokenizer = serde_json::from_str("\"Bytes\"").unwrap();
        assert_eq!(bytes, Tokenizer::Bytes);
        let bad = r#"{"Bpe":{"merges":[[97,256]],"trained_bytes":3,"seed":0}}"#;
        assert!(serde_json::from_str::<Tokenizer>(bad).is_err());
        let err = BpeTokenizer::from_parts(vec![(97, 98), (257, 1)], 2, 0).unwrap_err();
        assert_eq!(
            err,
            TokenizerError::InvalidMerge {
                index: 1,
                pair: (257, 1)
            }
        );
        assert_eq!(err.code(), code::E0406);
        assert!(BpeTokenizer::from_parts(vec![(97, 98), (256, 256)], 2, 0).is_ok());
    }
}
