//! Shape rules of the tokenizer builtins (LANGUAGE §10.10), next to their runtime
//! implementations in `tokenizers.rs`. Token counts depend on the text, so the
//! checker gives them symbolic lengths (`T`), except for a constant string: its
//! bytes, and its BPE tokens when the tokenizer was trained on a constant text
//! small enough to train while checking ([`CHECK_WORK`]).

use std::sync::Arc;

use crate::check::abstract_value::{AbsArray, AbsValue};
use crate::check::ctx::ShapeCtx;
use crate::data::tokenizer::{self, Tokenizer};
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// The most work (text bytes × BPE merges) the checker spends training or
/// applying a tokenizer on a constant text: a few milliseconds, so checking
/// stays interactive (the preloaded corpora are far below it).
pub const CHECK_WORK: usize = 1 << 24;

/// `tokenizer()`: the byte-level tokenizer.
pub fn byte_tokenizer(_c: &mut ShapeCtx) -> Rule {
    Ok(AbsValue::Tokenizer(Some(Arc::new(Tokenizer::Bytes))))
}

/// Merges of a tokenizer (0 for the byte-level one).
fn merges(t: &Tokenizer) -> usize {
    match t {
        Tokenizer::Bytes => 0,
        Tokenizer::Bpe(b) => b.merges().len(),
    }
}

/// `tokenize_bytes(text)`: `[nbytes]`, exact for a constant text.
pub fn tokenize_bytes(c: &mut ShapeCtx) -> Rule {
    Ok(AbsValue::Array(match c.string(0)? {
        Some(t) => {
            let bytes: Vec<f64> = t.bytes().map(f64::from).collect();
            AbsArray::of_shape(&[bytes.len()]).with_constant(Some(bytes))
        }
        None => AbsArray::of_dims(vec![c.fresh("L")]),
    }))
}

/// Checks ids of rank ≤ 1 (E0205) that are constants (E0402 outside `0..=max`,
/// or for negative and non-integer ids); returns them when constant.
fn ids_arg(c: &ShapeCtx, i: usize, max: Option<u32>) -> Result<Option<Vec<u32>>, Diagnostic> {
    let Some(a) = c.array(i)? else {
        return Ok(None);
    };
    if a.rank().is_some_and(|r| r > 1) {
        return Err(c.rank_error(i, &a, "of rank 0 or 1"));
    }
    let Some(data) = &a.constant else {
        return Ok(None);
    };
    super::site::token_ids(c, i, data, max).map(Some)
}

/// `decode_bytes(ids)`: a string; E0402 for an id outside 0..255.
pub fn decode_bytes(c: &mut ShapeCtx) -> Rule {
    let ids = ids_arg(c, 0, Some(255))?;
    Ok(AbsValue::Str(
        ids.and_then(|ids| tokenizer::decode_bytes(&ids).ok()),
    ))
}

/// A corpus argument: a string, or a byte array (E0402 outside 0..255); E0302 for
/// other kinds.
fn corpus(c: &ShapeCtx, i: usize) -> Result<(), Diagnostic> {
    match c.value(i) {
        AbsValue::Str(_) | AbsValue::Unknown => Ok(()),
        AbsValue::Array(_) => ids_arg(c, i, Some(255)).map(|_| ()),
        other => Err(super::site::not_a_corpus(
            c,
            i,
            other.kind_name().unwrap_or("value"),
        )),
    }
}

/// `train_bpe(corpus, vocab_size, seed)`: a tokenizer.
pub fn train_bpe(c: &mut ShapeCtx) -> Rule {
    corpus(c, 0)?;
    let vocab = c.count(1)?;
    c.seed(2)?;
    let seed = c.scalar(2)?.filter(|s| s.is_finite() && *s >= 0.0);
    let trained = match (c.string(0)?, vocab) {
        (Some(text), Some(v)) if text.len() * v.saturating_sub(256) <= CHECK_WORK => {
            Some(Arc::new(Tokenizer::Bpe(tokenizer::train_bpe(
                text.as_bytes(),
                v,
                seed.unwrap_or(0.0) as u64,
            ))))
        }
        _ => None,
    };
    Ok(AbsValue::Tokenizer(trained))
}

/// `apply_tokenizer(tok, text)`: `[T]` ids, T symbolic unless the tokenizer and
/// the text are known (then the exact count).
pub fn apply_tokenizer(c: &mut ShapeCtx) -> Rule {
    c.tokenizer(0)?;
    corpus(c, 1)?;
    if let (AbsValue::Tokenizer(Some(tok)), Some(text)) = (c.value(0), c.string(1)?) {
        if text.len() * merges(tok).max(1) <= CHECK_WORK {
            let n = tok.encode(text.as_bytes()).len();
            return Ok(AbsValue::Array(AbsArray::of_shape(&[n])));
        }
    }
    let t = c.fresh("T");
    Ok(AbsValue::Array(AbsArray::of_dims(vec![t])))
}

/// `decode(tok, ids)`: a string; E0205 for ids of rank > 1, E0402 for a negative
/// or non-integer id.
pub fn decode(c: &mut ShapeCtx) -> Rule {
    c.tokenizer(0)?;
    ids_arg(c, 1, None)?;
    Ok(AbsValue::Str(None))
}
