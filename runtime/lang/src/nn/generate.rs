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
        let logits = last_logits(&mut f, model, &step)?;
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

/// The logits of `model` at the last position of `step` (`[…, 1, V]`): the
/// trailing layers of a chain that act on each position alone (the final norm
/// and the head) run on the last position only, so a prompt of T positions
/// costs one row of the head, not T (GPT-2: 768 × 50257 multiply-adds a
/// position). The same values: a product's elements do not depend on its
/// number of rows.
fn last_logits(f: &mut Forward, model: &Layer, step: &Array) -> Result<Array, Diagnostic> {
    let t = step.shape().last().copied().unwrap_or(0);
    let (body, head) = match model {
        Layer::Chain(children) if t > 1 => {
            let split = children
                .iter()
                .rposition(|c| !per_position(c))
                .map_or(0, |i| i + 1);
            if split == 0 || split == children.len() {
                return f.layer(model, step);
            }
            children.split_at(split)
        }
        _ => return f.layer(model, step),
    };
    let (body, head) = (Layer::Chain(body.to_vec()), Layer::Chain(head.to_vec()));
    let hidden = f.layer(&body, step)?;
    let s = hidden.shape().to_vec();
    if s.len() < 2 || s[s.len() - 2] != t || s[s.len() - 1] == 0 {
        return f.layer(&head, &hidden);
    }
    let d = s[s.len() - 1];
    let last: Vec<f32> = hidden
        .to_f32()
        .chunks_exact(t * d)
        .flat_map(|rows| &rows[(t - 1) * d..])
        .copied()
        .collect();
    let mut shape = s;
    let at = shape.len() - 2;
    shape[at] = 1;
    f.layer(&head, &Array::from_vec(shape, last))
}

/// Whether `layer` maps each position on its own, with no state and no
/// draws (so running it on the last position alone gives that position's
/// values).
fn per_position(layer: &Layer) -> bool {
    matches!(
        layer,
        Layer::Linear(_)
            | Layer::Lora(_)
            | Layer::Unembed(_)
            | Layer::RmsNorm(_)
            | Layer::LayerNorm(_)
            | Layer::Activation(_)
            | Layer::SwiGlu(_)
    )
}

fn sampling_error(span: Span, e: sampling::SamplingError) -> Diagnostic {
    Diagnostic::of(e.code()).at(span, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Workspace;
    use crate::value::Value;

    /// The logits `generate` computes for a prompt's last position are those
    /// of the whole forward pass, bit for bit, with a head of several
    /// per-position layers (a norm, a linear layer fused with its activation,
    /// the tied head) after the blocks.
    #[test]
    fn the_last_positions_logits_are_those_of_the_whole_pass() {
        let mut it = Interp::new(Workspace::new());
        let src = "e = embed(40, 16, 0)\n\
            block = residual(chain(rms_norm(16, 1, 1e-5), causal_attention(16, 2, 1, 1, rope(8, 10000))))\n\
            m = chain(e, block, rms_norm(16, 1, 1e-5), linear(16, 16, 3), relu_layer(), unembed(e))\n0";
        let parsed = mlpl_syntax::parse(src);
        it.run(&parsed.program).expect("the model builds");
        let Some(Value::Model(m)) = it.ws.get("m").cloned() else {
            panic!("m is not a model")
        };
        for prompt in [
            vec![3.0, 7.0, 11.0, 2.0, 5.0],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        ] {
            let (t, rows) = (prompt.len(), if prompt.len() == 6 { 2 } else { 1 });
            let shape = if rows == 2 { vec![2, 3] } else { vec![t] };
            let ids = Array::from_vec(shape, prompt);
            let span = Span::default();
            let whole = Forward::new(&mut it, span, span).layer(&m.0, &ids).unwrap();
            let mut f = Forward::new(&mut it, span, span);
            let last = last_logits(&mut f, &m.0, &ids).unwrap();
            let per_row = t / rows;
            let whole = whole.to_f32();
            let expected: Vec<u32> = whole
                .chunks_exact(per_row * 40)
                .flat_map(|row| row[(per_row - 1) * 40..].iter().map(|x| x.to_bits()))
                .collect();
            let got: Vec<u32> = last.to_f32().iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, expected, "prompt of {rows} row(s)");
            let mut s = ids.shape().to_vec();
            s.push(40);
            *s.iter_mut().rev().nth(1).unwrap() = 1;
            assert_eq!(last.shape(), s.as_slice());
        }
    }
}
