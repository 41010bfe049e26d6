//! Gradient checks of small models built from many ops: a 2-layer MLP, a
//! 1-head causal self-attention block, and a batched tiny transformer (embedding,
//! layer norm, attention with residual, RMS norm, LM head, cross-entropy).

use super::{check, Build, Rng};
use crate::autograd::{Tape, Var};
use mlpl_devices::Result;

#[test]
fn two_layer_mlp() {
    let mut r = Rng::named("mlp");
    let x = r.normal_tensor(&[6, 4], 1.0);
    let w1 = r.normal_tensor(&[4, 8], 0.5);
    let b1 = r.normal_tensor(&[8], 0.1);
    let w2 = r.normal_tensor(&[8, 3], 0.5);
    let b2 = r.normal_tensor(&[3], 0.1);
    let targets = r.ids(&[6], 3);
    let inputs = [(x, true), (w1, true), (b1, true), (w2, true), (b2, true)];
    check("mlp tanh + cross_entropy", &inputs, &|t, v| {
        let h = t.matmul(v[0], v[1])?;
        let h = t.add(h, v[2])?;
        let h = t.tanh(h)?;
        let o = t.matmul(h, v[3])?;
        let o = t.add(o, v[4])?;
        t.cross_entropy(o, &targets)
    });
    let y = r.normal_tensor(&[6, 3], 1.0);
    let mut inputs = inputs.to_vec();
    inputs.push((y, false));
    check("mlp gelu + mse", &inputs, &|t, v| {
        let h = t.matmul(v[0], v[1])?;
        let h = t.add(h, v[2])?;
        let h = t.gelu(h)?;
        let o = t.matmul(h, v[3])?;
        let o = t.add(o, v[4])?;
        let e = t.sub(o, v[5])?;
        let e2 = t.mul(e, e)?;
        t.mean(e2, None)
    });
}

/// One causal attention head: softmax(mask(q·kᵀ/√d))·v·Wo, for `x: [..., T, d]`
/// and `w = [Wq, Wk, Wv, Wo]`, each `[d, d]`.
fn attention(t: &mut Tape, x: Var, w: &[Var]) -> Result<Var> {
    let d = *t.shape(x).last().unwrap();
    let q = t.matmul(x, w[0])?;
    let k = t.matmul(x, w[1])?;
    let v = t.matmul(x, w[2])?;
    let kt = t.transpose_last2(k)?;
    let s = t.matmul(q, kt)?;
    let s = t.mul_scalar(s, 1.0 / (d as f32).sqrt())?;
    let s = t.causal_mask(s)?;
    let rank = t.shape(s).len();
    let p = t.softmax(s, rank - 1)?;
    let o = t.matmul(p, v)?;
    t.matmul(o, w[3])
}

#[test]
fn causal_self_attention_head() {
    let mut r = Rng::named("attention");
    let x = r.normal_tensor(&[5, 6], 1.0);
    let mut inputs = vec![(x, true)];
    for _ in 0..4 {
        inputs.push((r.normal_tensor(&[6, 6], 0.5), true));
    }
    let f: &Build<'_> = &|t, v| attention(t, v[0], &v[1..]);
    check("attention [5,6]", &inputs, f);
}

#[test]
fn tiny_transformer_batched() {
    let mut r = Rng::named("transformer");
    let (vocab, d) = (7, 6);
    let ids = r.ids(&[2, 4], vocab);
    let targets = r.ids(&[2, 4], vocab);
    let mut inputs = vec![(r.normal_tensor(&[vocab, d], 1.0), true)];
    for _ in 0..4 {
        inputs.push((r.normal_tensor(&[d, d], 0.5), true));
    }
    inputs.push((r.normal_tensor(&[d, vocab], 0.5), true));
    inputs.push((r.normal_tensor(&[d], 0.3), true));
    check("tiny transformer", &inputs, &|t, v| {
        let x = t.gather_rows(v[0], &ids)?; // [2, 4, d]
        let h = t.layer_norm(x, 1e-5)?;
        let a = attention(t, h, &v[1..5])?;
        let x = t.add(x, a)?;
        let h = t.rms_norm(x, 1e-5)?;
        let gain = t.add_scalar(v[6], 1.0)?;
        let h = t.mul(h, gain)?;
        let logits = t.matmul(h, v[5])?; // [2, 4, vocab]
        t.cross_entropy(logits, &targets)
    });
}
