//! Shape rules of the Engram builtins (docs/language.md, "Engram conditional
//! memory"), next to their runtime implementations in `engram.rs`:
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `engram(d, rows, heads, seed)` | sizes | a model; `apply` alone is E0231 |
//! | `engram_embed(vocab, d, rows, heads, seed)` | sizes | a model `ids […] → […, d]` |
//! | `engram_apply(m, h, ids)` | Engram model, `[…, T, d]`, `[…, T]` | `h`'s shape and names |
//! | `estimate_engram(m, batch, seq [, dtype_bytes])` | model, positive scalars | `[3]` |

use std::sync::Arc;

use crate::check::abstract_value::{AbsArray, AbsValue};
use crate::check::ctx::ShapeCtx;
use crate::check::models::{AbsModel, Forward};
use crate::nn::layers::{Engram, Layer};
use mlpl_diag::Diagnostic;

use super::models_shapes::dim;
use super::site::CallSite;

type Rule = Result<AbsValue, Diagnostic>;

/// The constructors' rule: E0213 for sizes that make no layer.
fn make(c: &mut ShapeCtx, vocab: Option<usize>, first: usize) -> Rule {
    let (d, rows, heads) = (dim(c, first)?, dim(c, first + 1)?, dim(c, first + 2)?);
    c.seed(first + 3)?;
    let (Some(d), Some(rows), Some(heads)) = (d, rows, heads) else {
        return Ok(AbsValue::Model(None));
    };
    let probe = Engram {
        id: 0,
        vocab,
        d,
        rows,
        heads,
        seed: 0,
    };
    let g = super::engram::checked_layer(c, first, probe)?;
    let g = Engram {
        id: c.fresh_id(),
        ..g
    };
    Ok(AbsValue::Model(Some(AbsModel(Arc::new(Layer::Engram(g))))))
}

/// `engram(d, rows, heads, seed)`.
pub fn engram(c: &mut ShapeCtx) -> Rule {
    make(c, None, 0)
}

/// `engram_embed(vocab, d, rows, heads, seed)`.
pub fn engram_embed(c: &mut ShapeCtx) -> Rule {
    let vocab = dim(c, 0)?;
    match vocab {
        Some(v) => make(c, Some(v), 1),
        None => {
            make(c, Some(0), 1)?;
            Ok(AbsValue::Model(None))
        }
    }
}

/// `engram_apply(m, h, ids)`: `h`'s shape; E0308 for another model, E0230
/// when `h` is provably not `ids.shape ++ [d]`.
pub fn engram_apply(c: &mut ShapeCtx) -> Rule {
    let m = c.model(0)?;
    let h = c.array(1)?;
    let ids = c.array(2)?;
    let Some(m) = m else {
        return Ok(AbsValue::Array(h.unwrap_or_else(AbsArray::unknown)));
    };
    let Layer::Engram(g) = m.0.as_ref() else {
        return Err(super::engram::not_engram(c));
    };
    let (Some(h), Some(ids)) = (h, ids) else {
        return Ok(AbsValue::any_array());
    };
    let f = Forward::new(c.arg_span(1));
    Ok(AbsValue::Array(f.engram_mix(&m.0, g, &h, &ids)?))
}

/// `estimate_engram(m, batch, seq [, dtype_bytes])`: `[3]`.
pub fn estimate_engram(c: &mut ShapeCtx) -> Rule {
    c.model(0)?;
    for i in 1..c.len() {
        if let Some(v) = c.scalar(i)? {
            super::site::check_finite_positive(c, i, v)?;
        }
    }
    Ok(AbsValue::Array(AbsArray::of_shape(&[3])))
}
