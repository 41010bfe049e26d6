//! Tokenizers (LANGUAGE §10.10, §16.4).

use super::site::CallSite;
use mlpl_diag::code;
use std::sync::Arc;

use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::data::tokenizer::{self, Tokenizer};
use crate::eval::Call;
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "tokenizer",
        params: &[],
        summary: "the byte-level tokenizer",
        doc: "`tokenizer()` returns the byte-level tokenizer: tokens are UTF-8 bytes, vocabulary 256.",
        example: "tokenizer()",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.10",
        run: byte_tokenizer,
        shape: Some(super::tokenizers_shapes::byte_tokenizer),
    },
    Builtin {
        name: "tokenize_bytes",
        params: &[req("text", Str)],
        summary: "the UTF-8 bytes of a string",
        doc: "`tokenize_bytes(text)` returns `[nbytes]` with the text's UTF-8 bytes (0..255).",
        example: "tokenize_bytes(\"hé!\")",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.10",
        run: tokenize_bytes,
        shape: Some(super::tokenizers_shapes::tokenize_bytes),
    },
    Builtin {
        name: "decode_bytes",
        params: &[req("ids", Array)],
        summary: "text from UTF-8 byte ids",
        doc: "`decode_bytes(ids)` turns byte ids (rank ≤ 1, integers 0..255) into text; invalid UTF-8 becomes U+FFFD. E0402 for an id outside 0..255.",
        example: "decode_bytes([104, 105])",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.10",
        run: decode_bytes,
        shape: Some(super::tokenizers_shapes::decode_bytes),
    },
    Builtin {
        name: "train_bpe",
        params: &[req("corpus", Any), req("vocab_size", Count), req("seed", Seed)],
        summary: "train a byte-level BPE tokenizer",
        doc: "`train_bpe(corpus, vocab_size, seed)` learns merges on a string (or `[n]` byte array) until the vocabulary reaches `vocab_size` or fewer than two tokens remain (W0403). Ties go to the smallest pair. The seed is recorded only.",
        example: "train_bpe(load_preloaded(\"tiny_corpus\"), 270, 0)",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.10",
        run: train_bpe,
        shape: Some(super::tokenizers_shapes::train_bpe),
    },
    Builtin {
        name: "apply_tokenizer",
        params: &[req("tok", Tokenizer), req("text", Any)],
        summary: "token ids of a text",
        doc: "`apply_tokenizer(tok, text)` encodes a string (or byte array) into `[n_tokens]` ids, applying BPE merges in training order.",
        example: "tok = train_bpe(load_preloaded(\"tiny_corpus\"), 270, 0)\napply_tokenizer(tok, \"the quick brown fox\")",
        diff: Diff::No,
        facts: Facts::NONE,
        section: "10.10",
        run: apply_tokenizer,
        shape: Some(super::tokenizers_shapes::apply_tokenizer),
    },
    Builtin {
        name: "decode",
        params: &[req("tok", Tokenizer), req("ids", Array)],
        summary: "text of token ids",
        doc: "`decode(tok, ids)` expands ids (rank ≤ 1, non-negative integers) into text. BPE ids at or above the vocabulary are dropped (W0402); byte-level ids above 255 are E0402.",
        example: "decode(tokenizer(), [104, 105])",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.10",
        run: decode,
        shape: Some(super::tokenizers_shapes::decode),
    },
];

fn byte_tokenizer(_c: &mut Call) -> Result<Value, Diagnostic> {
    Ok(Value::Tokenizer(Arc::new(Tokenizer::Bytes)))
}

fn ids_array(v: Vec<u32>) -> Value {
    Value::Array(Array::from_vec(
        vec![v.len()],
        v.into_iter().map(|x| x as f32).collect(),
    ))
}

fn tokenize_bytes(c: &mut Call) -> Result<Value, Diagnostic> {
    Ok(ids_array(tokenizer::tokenize_bytes(c.string(0)?)))
}

/// Reads ids: rank ≤ 1, non-negative integers (E0205, E0402).
fn ids_arg(c: &Call, i: usize, max: Option<u32>) -> Result<Vec<u32>, Diagnostic> {
    let a = c.array(i)?;
    if a.rank() > 1 {
        return Err(c.rank_error(i, "of rank 0 or 1"));
    }
    super::site::token_ids(c, i, &a.to_f64(), max)
}

fn decode_bytes(c: &mut Call) -> Result<Value, Diagnostic> {
    let ids = ids_arg(c, 0, Some(255))?;
    let text = tokenizer::decode_bytes(&ids)
        .map_err(|e| c.error_at(0, e.code(), "id or index out of range", e.to_string()))?;
    Ok(Value::string(text))
}

/// The bytes of a string, or of a `[n]` byte array (E0402 outside 0..255).
fn corpus_bytes(c: &Call, i: usize) -> Result<Vec<u8>, Diagnostic> {
    match c.value(i) {
        Value::Str(s) => Ok(s.as_bytes().to_vec()),
        Value::Array(_) => Ok(ids_arg(c, i, Some(255))?
            .into_iter()
            .map(|b| b as u8)
            .collect()),
        other => Err(super::site::not_a_corpus(c, i, other.kind_name())),
    }
}

fn train_bpe(c: &mut Call) -> Result<Value, Diagnostic> {
    let bytes = corpus_bytes(c, 0)?;
    let vocab = c.count(1)?;
    let seed = c.seed(2)?;
    let stop = super::stop_requested(c);
    let Some(bpe) = tokenizer::train_bpe_until(&bytes, vocab, seed, &stop) else {
        return Err(super::cancelled(c));
    };
    if bpe.vocab_size() < vocab {
        let got = bpe.vocab_size();
        c.warn_of(
            1,
            code::W0403,
            format!("training stopped at {got} (requested {vocab})"),
        );
    }
    Ok(Value::Tokenizer(Arc::new(Tokenizer::Bpe(bpe))))
}

fn apply_tokenizer(c: &mut Call) -> Result<Value, Diagnostic> {
    let tok = c.tokenizer(0)?;
    let bytes = corpus_bytes(c, 1)?;
    let stop = super::stop_requested(c);
    match tok.encode_until(&bytes, &stop) {
        Some(ids) => Ok(ids_array(ids)),
        None => Err(super::cancelled(c)),
    }
}

fn decode(c: &mut Call) -> Result<Value, Diagnostic> {
    let tok = c.tokenizer(0)?;
    let max = matches!(*tok, Tokenizer::Bytes).then_some(255);
    let ids = ids_arg(c, 1, max)?;
    let (text, dropped) = tok
        .decode(&ids)
        .map_err(|e| c.error_at(1, e.code(), "id or index out of range", e.to_string()))?;
    if dropped > 0 {
        let v = tok.vocab_size();
        c.warn_of(
            1,
            code::W0402,
            format!(
                "{dropped} id{} ≥ {v} dropped",
                if dropped == 1 { "" } else { "s" }
            ),
        );
    }
    Ok(Value::string(text))
}
