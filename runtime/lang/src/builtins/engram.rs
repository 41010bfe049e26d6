//! Engram conditional memory (docs/language.md, "Engram conditional memory"):
//! the `engram` and `engram_embed` layers, `engram_apply` for user functions
//! that hold the hidden state and the ids, and `estimate_engram`, the tables'
//! memory counted apart. The layer itself lives in `crate::nn::engram`.

use super::models::{check_elements, dim, model_value};
use super::site::CallSite;
use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::eval::Call;
use crate::nn::apply::Forward;
use crate::nn::init;
use crate::nn::layers::{Engram, Layer};
use crate::value::{Array, Value};
use mlpl_diag::{code, Diagnostic};

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "engram",
        params: &[req("d", Scalar), req("rows", Scalar), req("heads", Scalar), req("seed", Seed)],
        summary: "an Engram conditional memory layer (hashed n-gram tables)",
        doc: "`engram(d, rows, heads, seed)` creates the hashed n-gram table T `[4·heads·rows, d/(2·heads)]` = 0.1·randn(seed + 1) (orders 2 and 3, `heads` hash heads each, `rows` rows per order and head), key and value projections Wk, Wv `[d, d]` = randn(seed + 2, seed + 3)/√d and the causal convolution C `[4, d]` = 0 (`__engram_T_k`, `__engram_Wk_k`, `__engram_Wv_k`, `__engram_C_k`). `engram_apply(m, h, ids)` adds the memory to a hidden state; `apply` of this layer alone is E0231. E0213 unless 2·heads divides d, heads ≥ 1, rows ≥ 1 and the table has at most 2^24 rows.",
        example: "m = engram(8, 16, 2, 0)\nengram_apply(m, ones([3, 8]), [1, 2, 3])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: engram,
        shape: Some(super::engram_shapes::engram),
    },
    Builtin {
        name: "engram_embed",
        params: &[req("vocab", Scalar), req("d", Scalar), req("rows", Scalar), req("heads", Scalar), req("seed", Seed)],
        summary: "a token embedding with Engram conditional memory",
        doc: "`engram_embed(vocab, d, rows, heads, seed)` is `engram(d, rows, heads, seed)` in the embedding position: it also owns E `[vocab, d]` = 0.1·randn(seed) (`__engram_E_k`), and `apply` maps integer ids `[…]` (sequences along the last axis) to E[ids] + Engram(E[ids], ids) `[…, d]`, so it can be the first stage of a `chain`. E0402 for an id outside [0, vocab).",
        example: "m = chain(engram_embed(10, 8, 16, 2, 0), linear(8, 10, 1))\napply(m, [1, 2, 3])",
        diff: Diff::Effect,
        facts: Facts::NONE.allowed_in_loss().parameterised(),
        section: "10.13",
        run: engram_embed,
        shape: Some(super::engram_shapes::engram_embed),
    },
    Builtin {
        name: "engram_apply",
        params: &[req("model", Model), req("h", Array), req("ids", Array)],
        summary: "add Engram memory of the ids to a hidden state",
        doc: "`engram_apply(m, h, ids)` returns h + Engram(h, ids) for an `engram` or `engram_embed` layer m, a hidden state h `[…, T, d]` and the integer ids `[…, T]` it was computed from (docs/language.md gives the formula). Differentiable with respect to h and the layer's parameters. E0308 when m is not an Engram layer, E0230 when h is not ids.shape ++ [d], E0402 for ids that are not non-negative integers below 2^24.",
        example: "m = engram(4, 8, 1, 3)\nengram_apply(m, zeros([2, 4]), [7, 7])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.13",
        run: engram_apply,
        shape: Some(super::engram_shapes::engram_apply),
    },
    Builtin {
        name: "estimate_engram",
        params: &[req("model", Model), req("batch_size", Scalar), req("seq_len", Scalar), opt("dtype_bytes", Scalar)],
        summary: "the Engram tables of a model, counted apart",
        doc: "`estimate_engram(model, batch, seq [, dtype_bytes = 4])` returns `[table_params, table_bytes, rows_touched]` for the distinct Engram layers of the model: the table elements, their training memory (weights, and gradient and two Adam moments of the unfrozen tables; `estimate_train`'s vram_bytes includes it) and at most how many table rows one `[batch, seq]` batch reads. The tables are memory, not FLOPs: `estimate_train` counts no FLOPs for the lookup. E0401 for arguments that are not finite and positive.",
        example: "estimate_engram(chain(engram_embed(32, 8, 64, 2, 0), linear(8, 32, 1)), 4, 16)",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.17",
        run: estimate_engram,
        shape: Some(super::engram_shapes::estimate_engram),
    },
];

/// The layer `engram` or `engram_embed` makes from these sizes; E0213 naming
/// argument `d_arg` when they make none.
pub fn checked_layer(c: &impl CallSite, d_arg: usize, g: Engram) -> Result<Engram, Diagnostic> {
    match g.config_error() {
        Some(why) => Err(super::site::dim_error(c, d_arg, why)),
        None => Ok(g),
    }
}

fn engram(c: &mut Call) -> Result<Value, Diagnostic> {
    let (d, rows, heads) = (dim(c, 0)?, dim(c, 1)?, dim(c, 2)?);
    let seed = c.seed(3)?;
    make(c, None, d, rows, heads, seed, 0)
}

fn engram_embed(c: &mut Call) -> Result<Value, Diagnostic> {
    let vocab = dim(c, 0)?;
    let (d, rows, heads) = (dim(c, 1)?, dim(c, 2)?, dim(c, 3)?);
    let seed = c.seed(4)?;
    make(c, Some(vocab), d, rows, heads, seed, 1)
}

fn make(
    c: &mut Call,
    vocab: Option<usize>,
    d: usize,
    rows: usize,
    heads: usize,
    seed: u64,
    d_arg: usize,
) -> Result<Value, Diagnostic> {
    let probe = Engram {
        id: 0,
        vocab,
        d,
        rows,
        heads,
        seed,
    };
    let g = checked_layer(c, d_arg, probe)?;
    let mut shapes = vec![vec![g.table_rows(), g.slot_width()], vec![d, d], vec![d, d]];
    shapes.extend(vocab.map(|v| vec![v, d]));
    check_elements(c, &shapes)?;
    Ok(model_value(init::engram(c.it, vocab, d, rows, heads, seed)))
}

/// E0308: `engram_apply` of a model that is not an Engram layer.
pub fn not_engram(c: &impl CallSite) -> Diagnostic {
    c.error_of(0, code::E0308, "this model is not an Engram layer")
        .note("`engram_apply` takes the model made by `engram(…)` or `engram_embed(…)`")
}

fn engram_apply(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let Layer::Engram(g) = m.as_ref() else {
        return Err(not_engram(c));
    };
    let h = c.array(1)?.clone();
    let ids = c.array(2)?.clone();
    let (span, h_span, ids_span) = (c.span, c.arg_span(1), c.arg_span(2));
    let mut f = Forward::new(c.it, span, h_span);
    let out = crate::nn::engram::mix(&mut f, &m, g, &h, &ids, ids_span)?;
    Ok(Value::Array(out))
}

fn estimate_engram(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let batch = super::feasibility::positive(c, 1)?;
    let seq = super::feasibility::positive(c, 2)?;
    let dt = if c.has(3) {
        super::feasibility::positive(c, 3)?
    } else {
        4.0
    };
    let t = crate::nn::estimate::tables(&m, &c.it.ws.frozen, batch, seq, dt);
    Ok(Value::Array(Array::from_f64(
        vec![3],
        &[t.params, t.bytes, t.touched],
    )))
}
