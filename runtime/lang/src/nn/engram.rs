//! Engram conditional memory (docs/language.md, "Engram conditional memory"):
//! the n-grams ending at each token select rows of a hashed table (one block
//! per order and head, an O(1) lookup by the backend's `engram_hash`), the rows
//! are gated by their agreement with the hidden state, passed through a short
//! causal convolution and added residually:
//!
//! ```text
//! e_t = concat_{n, h} T[slot·M + hash_{n,h}(x_{t−n+1..t}) mod M]   [d]
//! k_t = e_t·Wk,  v_t = e_t·Wv
//! α_t = σ(rms(h_t)·rms(k_t) / √d)
//! u_t = α_t·v_t
//! y_t = h_t + u_t + silu(Σ_j C[j]·u_{t−j})
//! ```
//!
//! Every step is an `eval::ops` operation, so a loss records it: gradients
//! reach T (scatter-add into the touched rows), Wk, Wv, C and h.

use mlpl_devices::{BinaryOp, ReduceOp, UnaryOp};
use mlpl_diag::{code, Diagnostic, Span};

use super::apply::Forward;
use super::layers::{Engram, Layer, ENGRAM_ORDERS, ENGRAM_TAPS};
use crate::eval::ops;
use crate::value::{named_shape, Array};

/// E0402 unless every id is a non-negative integer (below `vocab` when given).
pub fn check_ids(
    layer: &Layer,
    ids: &Array,
    vocab: Option<usize>,
    span: Span,
) -> Result<(), Diagnostic> {
    let limit = vocab.map_or(f64::from(1u32 << 24), |v| v as f64);
    for (i, &id) in ids.to_f64().iter().enumerate() {
        if !(id.fract() == 0.0 && id >= 0.0 && id < limit) {
            return Err(Diagnostic::of(code::E0402)
                .at(
                    span,
                    format!("id {} at position {i}", crate::display::format_f64(id)),
                )
                .note(format!(
                    "`{}` takes integer ids in [0, {})",
                    layer.describe(),
                    crate::display::format_f64(limit)
                )));
        }
    }
    Ok(())
}

/// E0230: the hidden state `h` is not `ids.shape ++ [d]`.
pub fn misaligned(layer: &Layer, d: usize, h: &str, ids: &str, span: Span) -> Diagnostic {
    Diagnostic::of(code::E0230)
        .at(span, format!("hidden state {h} for ids {ids}"))
        .note(format!(
            "`{}` needs the hidden state [.., T, {d}] of ids [.., T]: one row of width {d} per id",
            layer.describe()
        ))
        .help("pass the ids the hidden state was computed from")
}

/// E0231: a bare `engram` layer applied to one input.
pub fn needs_ids(layer: &Layer, span: Span) -> Diagnostic {
    Diagnostic::of(code::E0231)
        .at(span, format!("`{}` applied to one input", layer.describe()))
        .note("an `engram` layer reads both the hidden state and the token ids")
        .help("call `engram_apply(m, h, ids)`, or use `engram_embed(vocab, d, rows, heads, seed)` as the first stage of a chain")
}

/// `apply` of an Engram layer: the embedding-position form maps ids `[..]`
/// to `E[ids] + Engram(E[ids], ids)`; the bare form is E0231.
pub fn forward(
    f: &mut Forward<'_>,
    layer: &Layer,
    g: &Engram,
    x: &Array,
) -> Result<Array, Diagnostic> {
    let Some(vocab) = g.vocab else {
        return Err(needs_ids(layer, f.x_span));
    };
    check_ids(layer, x, Some(vocab), f.x_span)?;
    let table = f.weight(&format!("__engram_E_{}", g.id), &[vocab, g.d])?;
    let mut shape = x.shape().to_vec();
    shape.push(g.d);
    ops::check_size("embed", &shape, f.span)?;
    let ids = x.clone().detached();
    let h = ops::gather_rows(f.it, &table, &ids, f.span)?;
    memory(f, g, &h, &ids)
}

/// `engram_apply(m, h, ids)`: `h + Engram(h, ids)` for `h` `[.., T, d]` and
/// `ids` `[.., T]` (E0230 when they do not line up, E0402 for bad ids).
pub fn mix(
    f: &mut Forward<'_>,
    layer: &Layer,
    g: &Engram,
    h: &Array,
    ids: &Array,
    ids_span: Span,
) -> Result<Array, Diagnostic> {
    let lines_up = ids.rank() >= 1
        && h.rank() == ids.rank() + 1
        && h.shape()[..ids.rank()] == *ids.shape()
        && h.shape()[ids.rank()] == g.d;
    if !lines_up {
        return Err(misaligned(
            layer,
            g.d,
            &named_shape(h),
            &named_shape(ids),
            f.x_span,
        ));
    }
    check_ids(layer, ids, None, ids_span)?;
    memory(f, g, h, &ids.clone().detached())
}

/// `h + u + silu(conv(u))` (the module's formula) for validated `h` and `ids`.
fn memory(f: &mut Forward<'_>, g: &Engram, h: &Array, ids: &Array) -> Result<Array, Diagnostic> {
    let (d, span, id) = (g.d, f.span, g.id);
    let table = f.weight(
        &format!("__engram_T_{id}"),
        &[g.table_rows(), g.slot_width()],
    )?;
    let wk = f.weight(&format!("__engram_Wk_{id}"), &[d, d])?;
    let wv = f.weight(&format!("__engram_Wv_{id}"), &[d, d])?;
    let taps = f.weight(&format!("__engram_C_{id}"), &[ENGRAM_TAPS, d])?;
    let n = ids.shape().iter().product::<usize>();
    ops::check_size("engram", &[n, g.slots(), g.slot_width()], span)?;

    // Lookup: one row per order and head, concatenated to width d.
    let rows = ops::engram_hash(f.it, ids, &ENGRAM_ORDERS, (g.heads, g.rows, g.seed), span)?;
    let e = ops::gather_rows(f.it, &table, &rows, span)?;
    let e = ops::reshape(f.it, &e, vec![n, d], span)?;

    // Context-aware gate: agreement of the hidden state with the memory's key.
    let k = f.mm(&e, &wk)?;
    let v = f.mm(&e, &wv)?;
    let h2 = ops::reshape(f.it, h, vec![n, d], span)?;
    let hn = ops::norm(f.it, &h2, 1e-8, false, span)?;
    let kn = ops::norm(f.it, &k, 1e-8, false, span)?;
    let s = ops::arith(f.it, BinaryOp::Mul, &hn, &kn, span)?;
    let s = ops::reduce(f.it, ReduceOp::Sum, &s, Some(1), span)?;
    let s = ops::reshape(f.it, &s, vec![n, 1], span)?;
    let s = ops::arith(
        f.it,
        BinaryOp::Div,
        &s,
        &Array::exact((d as f64).sqrt()),
        span,
    )?;
    let gate = ops::unary(f.it, UnaryOp::Sigmoid, &s, span)?;
    let u = ops::arith(f.it, BinaryOp::Mul, &v, &gate, span)?;

    // Short causal convolution along the sequence, added residually.
    let mut seq = ids.shape().to_vec();
    seq.push(d);
    let u = ops::reshape(f.it, &u, seq, span)?;
    let c = ops::causal_conv(f.it, &u, &taps, span)?;
    let c = ops::unary(f.it, UnaryOp::Silu, &c, span)?;
    let y = ops::arith(f.it, BinaryOp::Add, &u, &c, span)?;
    ops::arith(f.it, BinaryOp::Add, h, &y, span)
}
