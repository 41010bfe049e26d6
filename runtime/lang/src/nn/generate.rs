//! `generate(model, ids, n …)` (LANGUAGE §11.11): autoregressive decoding with a
//! key/value cache. The prompt is run once (the cache then holds every attention
//! layer's keys and values); each new token is one more position, its queries
//! attending to the cached keys, so it costs one position, not the whole
//! sequence again. Greedy (temperature 0) takes the first maximum; otherwise
//! the token is drawn from softmax(logits / temperature), optionally among the
//! top_k logits only, with the seed of step i being `seed + i`.
//!
//! A batch of prompts `[B, T]` is decoded together (one cache, every row one
//! position a step; row r's draws seeded `seed + r·n + i`, so row 0 draws as a
//! single prompt does). With a stop token, a row that has produced it is
//! finished: decoding ends when every row is, and the finished rows are padded
//! with the stop token.

use std::collections::HashMap;

use super::apply::Forward;
use super::layers::Layer;
use crate::data::sampling;
use crate::eval::Interp;
use crate::value::Array;
use mlpl_devices::Tensor;
use mlpl_diag::{Diagnostic, Span};

/// The cached keys and values `[B, kv, 1, T, hd]` of each attention layer (by
/// model id), and the positions consumed so far.
#[derive(Default)]
pub struct KvCache {
    entries: HashMap<u64, (Tensor, Tensor)>,
    /// Positions already run.
    pub pos: usize,
}

impl KvCache {
    /// The cached positions of attention layer `id`.
    pub fn len(&self, id: u64) -> usize {
        self.entries.get(&id).map_or(0, |e| e.0.shape()[3])
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends this step's keys and values `[B, kv, 1, t, hd]` of layer `id` to
    /// its cache and returns the whole keys and values so far. They are
    /// constants: generation records no gradient. The cache and the returned
    /// arrays share their elements: one copy of the cache a step (the
    /// appending), not three.
    pub fn extend(&mut self, id: u64, k: Array, v: Array) -> (Array, Array) {
        let (k, v) = (k.tensor(), v.tensor());
        let (k, v) = match self.entries.get(&id) {
            None => (k, v),
            Some((old_k, old_v)) => (appended(old_k, &k), appended(old_v, &v)),
        };
        self.entries.insert(id, (k.clone(), v.clone()));
        (Array::from_tensor(k), Array::from_tensor(v))
    }
}

/// `old` `[B, kv, 1, T, hd]` with `new` `[B, kv, 1, t, hd]` after its `T`
/// positions: `[B, kv, 1, T + t, hd]`.
fn appended(old: &Tensor, new: &Tensor) -> Tensor {
    let (so, sn) = (old.shape(), new.shape());
    let (old_t, t, hd) = (so[3], sn[3], sn[4]);
    let blocks = sn[0] * sn[1] * sn[2];
    let (old, new) = (old.host(), new.host());
    let mut out = Vec::with_capacity(old.len() + new.len());
    for b in 0..blocks {
        out.extend_from_slice(&old[b * old_t * hd..(b + 1) * old_t * hd]);
        out.extend_from_slice(&new[b * t * hd..(b + 1) * t * hd]);
    }
    Tensor::from_vec(vec![sn[0], sn[1], sn[2], old_t + t, hd], out)
}

/// How the next token is chosen.
#[derive(Clone, Copy, Debug)]
pub struct Decoding {
    /// 0 for greedy.
    pub temperature: f64,
    /// Sample among the k largest logits only (0: all).
    pub top_k: usize,
    /// The seed of the first draw.
    pub seed: u64,
    /// The token that ends a row, if any.
    pub stop: Option<u32>,
}

/// The token ids that follow the prompt ids `prompt` (`[T]`, or `[B, T]` for
/// a batch) under `model`, whose output must be logits `[…, T, V]`: `[n]` (or
/// `[B, n]`) of them, or fewer steps `m` when every row has produced the stop
/// token. Returns the ids row by row and m.
pub fn generate(
    it: &mut Interp,
    model: &Layer,
    prompt: &Array,
    n: usize,
    how: Decoding,
    span: Span,
    x_span: Span,
) -> Result<(Vec<f32>, usize), Diagnostic> {
    let mut f = Forward {
        cache: Some(KvCache::default()),
        ..Forward::new(it, span, x_span)
    };
    let batched = prompt.rank() == 2;
    let rows = if batched { prompt.shape()[0] } else { 1 };
    let mut out: Vec<Vec<f32>> = vec![Vec::with_capacity(n); rows];
    let mut done = vec![false; rows];
    let mut step = Array::from_vec(prompt.shape().to_vec(), prompt.to_f32());
    for i in 0..n {
        if done.iter().all(|&d| d) {
            break;
        }
        f.it.check_cancel(span)?;
        let logits = f.layer(model, &step)?;
        let t = *step.shape().last().unwrap_or(&0);
        if let Some(c) = f.cache.as_mut() {
            c.pos += t;
        }
        let s = logits.shape().to_vec();
        let v = *s.last().unwrap_or(&0);
        let all = logits.to_f32();
        let per_row = all.len() / rows.max(1);
        let mut next_ids = Vec::with_capacity(rows);
        for (r, row) in out.iter_mut().enumerate() {
            let end = (r + 1) * per_row;
            let last = &all[end.saturating_sub(v)..end];
            let next = if done[r] {
                how.stop.unwrap_or(0)
            } else {
                let pick = if how.top_k > 0 && how.top_k < v {
                    sampling::top_k(last, how.top_k).map_err(|e| sampling_error(span, e))?
                } else {
                    last.to_vec()
                };
                let seed = how
                    .seed
                    .wrapping_add((r as u64).wrapping_mul(n as u64))
                    .wrapping_add(i as u64);
                sampling::sample(&pick, how.temperature, seed)
                    .map_err(|e| sampling_error(span, e))? as u32
            };
            done[r] |= how.stop == Some(next);
            row.push(next as f32);
            next_ids.push(next as f32);
        }
        let shape = if batched { vec![rows, 1] } else { vec![1] };
        step = Array::from_vec(shape, next_ids);
    }
    let m = out.first().map_or(0, Vec::len);
    Ok((out.concat(), m))
}

fn sampling_error(span: Span, e: sampling::SamplingError) -> Diagnostic {
    Diagnostic::of(e.code()).at(span, e.to_string())
}
