//! Neural-network operations: matrix products, the softmax family,
//! cross-entropy, embedding rows, normalisation and masking.

use mlpl_devices::Tensor;
use mlpl_diag::{Diagnostic, Span};

use super::*;
use crate::errors::device_error;
use crate::eval::{loss, Interp};
use crate::value::Array;

/// Batched matrix product of two arrays of rank ≥ 2 (batch axes broadcast); the
/// caller has checked shapes and names.
pub fn matmul_raw(
    it: &mut Interp,
    a: &Tensor,
    a_arr: &Array,
    b: &Tensor,
    b_arr: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    product_raw(it, [(a, a_arr), (b, b_arr)], false, span)
}

/// `a·b`, or `a·bᵀ` when `transpose_b` (`b`'s last two axes swapped, `b` read
/// in place, never copied): on the loss tape when an operand is on it, else
/// straight on the backend; the caller has checked shapes and names.
pub fn product_raw(
    it: &mut Interp,
    [(a, a_arr), (b, b_arr)]: [(&Tensor, &Array); 2],
    transpose_b: bool,
    span: Span,
) -> Result<Array, Diagnostic> {
    let (backend, placement) = placement_for(it, "matmul", &[(a_arr, span), (b_arr, span)])?;
    let out = if loss::any_live(it, &[a_arr, b_arr]) {
        let va = loss::var_of(it, a_arr);
        let vb = loss::var_of(it, b_arr);
        let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
        loss::record(it, "matmul", span, |t| {
            let va = if t.shape(va) != sa.as_slice() {
                t.reshape(va, sa)?
            } else {
                va
            };
            let vb = if t.shape(vb) != sb.as_slice() {
                t.reshape(vb, sb)?
            } else {
                vb
            };
            if transpose_b {
                t.matmul_nt(va, vb)
            } else {
                t.matmul(va, vb)
            }
        })?
    } else {
        let y = if transpose_b {
            backend.matmul_t(a, b, false, true)
        } else {
            backend.matmul(a, b)
        };
        Array::from_tensor(y.map_err(|e| device_error(e, "matmul", span))?)
    };
    Ok(out.with_placement(placement))
}

/// Softmax or log-softmax along `axis` (names dropped, as in the original).
pub fn softmax(
    it: &mut Interp,
    a: &Array,
    axis: usize,
    log: bool,
    span: Span,
) -> Result<Array, Diagnostic> {
    if log {
        one_operand(
            it,
            "log_softmax",
            a,
            span,
            |t, v| t.log_softmax(v, axis),
            |b, x| b.log_softmax(x, axis),
        )
    } else {
        one_operand(
            it,
            "softmax",
            a,
            span,
            |t, v| t.softmax(v, axis),
            |b, x| b.softmax(x, axis),
        )
    }
}

/// Mean cross-entropy of `[rows, V]` logits against validated integer targets.
pub fn cross_entropy(
    it: &mut Interp,
    logits: &Array,
    rows: usize,
    vocab: usize,
    targets: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    let (backend, _) = place1(it, "cross_entropy", logits, span)?;
    let tt = targets.tensor().reshape(vec![rows]);
    if let Some(v) = loss::live(it, logits) {
        return loss::record(it, "cross_entropy", span, |t| {
            let v = if t.shape(v) != [rows, vocab] {
                t.reshape(v, vec![rows, vocab])?
            } else {
                v
            };
            t.cross_entropy(v, &tt)
        });
    }
    let lt = logits.tensor().reshape(vec![rows, vocab]);
    let (loss, _) = backend
        .cross_entropy(&lt, &tt, false)
        .map_err(|e| device_error(e, "cross_entropy", span))?;
    Ok(Array::from_tensor(loss))
}

/// Rows of `table` `[V, d]` selected by validated integer `ids` of any shape.
pub fn gather_rows(
    it: &mut Interp,
    table: &Array,
    ids: &Array,
    span: Span,
) -> Result<Array, Diagnostic> {
    let ids = ids.tensor();
    one_operand(
        it,
        "embed",
        table,
        span,
        |t, v| t.gather_rows(v, &ids),
        |b, x| b.gather_rows(x, &ids),
    )
}

/// Engram's hashed n-gram rows of validated integer `ids` `[.., T]` (a
/// constant: nothing is recorded) → `[.., T, orders·heads]`.
pub fn engram_hash(
    it: &mut Interp,
    ids: &Array,
    orders: &[usize],
    (heads, rows, seed): (usize, usize, u64),
    span: Span,
) -> Result<Array, Diagnostic> {
    let (backend, placement) = place1(it, "engram", ids, span)?;
    let out = backend
        .engram_hash(&ids.tensor(), orders, heads, rows, seed)
        .map_err(|e| device_error(e, "engram", span))?;
    Ok(Array::from_tensor(out).with_placement(placement))
}

/// Engram's causal convolution of `x` `[.., T, C]` with taps `w` `[K, C]`
/// (shapes checked by the caller).
pub fn causal_conv(it: &mut Interp, x: &Array, w: &Array, span: Span) -> Result<Array, Diagnostic> {
    let (backend, placement) = placement_for(it, "engram", &[(x, span), (w, span)])?;
    let out = if loss::any_live(it, &[x, w]) {
        let (vx, vw) = (loss::var_of(it, x), loss::var_of(it, w));
        loss::record(it, "engram", span, |t| t.causal_conv(vx, vw))?
    } else {
        Array::from_tensor(
            backend
                .causal_conv(&x.tensor(), &w.tensor())
                .map_err(|e| device_error(e, "engram", span))?,
        )
    };
    Ok(out.with_placement(placement))
}

/// The backend's fused [`attention`](mlpl_devices::Backend::attention) of
/// `[q, k, v]` (`[B, H, T, hd]`, `[B, kv, S, hd]` twice; shapes checked by the
/// caller) with the heads' sink logits `[H]` when given: `[B, H, T, hd]`,
/// recorded as one op when an operand is on the loss tape.
pub fn attention(
    it: &mut Interp,
    [q, k, v]: [&Array; 3],
    sinks: Option<&Array>,
    spec: mlpl_devices::AttentionSpec,
    span: Span,
) -> Result<Array, Diagnostic> {
    let mut arrays = vec![q, k, v];
    arrays.extend(sinks);
    let operands: Vec<(&Array, Span)> = arrays.iter().map(|a| (*a, span)).collect();
    let (backend, placement) = placement_for(it, "attention", &operands)?;
    let out = if loss::any_live(it, &arrays) {
        let vars: Vec<_> = arrays
            .iter()
            .map(|a| (loss::var_of(it, a), a.shape().to_vec()))
            .collect();
        loss::record(it, "attention", span, |t| {
            let mut vs = Vec::with_capacity(vars.len());
            for (var, shape) in vars {
                vs.push(if t.shape(var) != shape.as_slice() {
                    t.reshape(var, shape)?
                } else {
                    var
                });
            }
            t.attention(vs[0], vs[1], vs[2], vs.get(3).copied(), spec)
        })?
    } else {
        let err = |e| device_error(e, "attention", span);
        let none = backend.upload(&Tensor::zeros(vec![0])).map_err(err)?;
        let sinks = sinks.map(|s| s.tensor());
        let (out, _) = backend
            .attention(
                &q.tensor(),
                &k.tensor(),
                &v.tensor(),
                sinks.as_ref().unwrap_or(&none),
                spec,
            )
            .map_err(err)?;
        Array::from_tensor(out)
    };
    Ok(out.with_placement(placement))
}

/// RMS norm (`layer = false`) or layer norm without affine over the last axis.
pub fn norm(
    it: &mut Interp,
    x: &Array,
    eps: f32,
    layer: bool,
    span: Span,
) -> Result<Array, Diagnostic> {
    if layer {
        one_operand(
            it,
            "layer_norm",
            x,
            span,
            |t, v| t.layer_norm(v, eps),
            |b, x| b.layer_norm(x, eps).map(|r| r.0),
        )
    } else {
        one_operand(
            it,
            "rms_norm",
            x,
            span,
            |t, v| t.rms_norm(v, eps),
            |b, x| b.rms_norm(x, eps).map(|r| r.0),
        )
    }
}

/// Sets the entries of `x` where `mask` is 1 to `value` (no gradient flows there).
pub fn mask_fill(
    it: &mut Interp,
    x: &Array,
    mask: &Tensor,
    value: f32,
    span: Span,
) -> Result<Array, Diagnostic> {
    let placement = x.placement();
    if let Some(v) = loss::live(it, x) {
        // On the tape the fill value must be finite; the most negative float32
        // behaves as -inf for the softmax and cross-entropy that follow `top_k`.
        let value = value.clamp(f32::MIN, f32::MAX);
        return Ok(
            loss::record(it, "mask", span, |t| t.mask_fill(v, mask, value))?
                .with_placement(placement),
        );
    }
    let mut data = x.to_f32();
    let m = mask.host();
    let n = m.len();
    for (i, d) in data.iter_mut().enumerate() {
        if m[i % n] != 0.0 {
            *d = value;
        }
    }
    Ok(Array::from_vec(x.shape().to_vec(), data).with_placement(placement))
}
