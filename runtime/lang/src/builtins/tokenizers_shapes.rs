//! Shape rules of the tokenizer builtins (LANGUAGE §10.10), next to their runtime
//! implementations in `tokenizers.rs`. Token counts depend on the text, so the
//! checker gives them symbolic lengths (`T`), except for the bytes of a constant
//! string.

use crate::check::abstract_value::{AbsArray, AbsValue};
use crate::check::ctx::ShapeCtx;
use crate::data::tokenizer;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// `tokenizer()`: the byte-level tokenizer.
pub fn byte_tokenizer(_c: &mut ShapeCtx) -> Rule {
    Ok(AbsValue::Tokenizer)
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
    c.count(1)?;
    c.seed(2)?;
    Ok(AbsValue::Tokenizer)
}

/// `apply_tokenizer(tok, text)`: `[T]` ids, T symbolic.
pub fn apply_tokenizer(c: &mut ShapeCtx) -> Rule {
    c.tokenizer(0)?;
    corpus(c, 1)?;
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
