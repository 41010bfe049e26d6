//! ML primitives (LANGUAGE §10.5).

use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::eval::{ops, Call};
use crate::value::{named_shape, Array, Value};
use mlpl_devices::math;
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "softmax",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "softmax over the last axis (or a given one)",
        doc: "`softmax(x)` normalises over the last axis: exp(x − max) / Σ exp(x − max); `softmax(x, axis)` over the given axis. Names are dropped. E0205 for a scalar.",
        example: "softmax([[1, 2, 3], [1, 1, 1]], 1)",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.5",
        run: softmax,
        shape: Some(super::ml_shapes::softmax),
    },
    Builtin {
        name: "log_softmax",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "log of softmax, computed stably",
        doc: "`log_softmax(x [, axis])` = x − max − log Σ exp(x − max) over the last (or given) axis.",
        example: "log_softmax([1, 2, 3])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.5",
        run: log_softmax,
        shape: Some(super::ml_shapes::log_softmax),
    },
    Builtin {
        name: "logsumexp",
        params: &[req("x", Array), opt("axis", Axis)],
        summary: "log Σ exp(x), computed stably, optionally along an axis",
        doc: "`logsumexp(x)` is log Σ exp(x) over every element (a scalar); `logsumexp(x, axis)` along one axis, which is removed with its name, as `sum` does. Computed as max + log Σ exp(x − max) with the sum in float64, so large values do not overflow; it is exactly the shift `log_softmax` subtracts. An empty axis gives −∞. Differentiable: the gradient is softmax(x) along the axis.",
        example: "S : [batch, vocab] = [[1, 2, 3], [0, 0, 0]]\nlogsumexp(S, \"vocab\")",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.5",
        run: logsumexp,
        shape: Some(super::reduce_shapes::logsumexp),
    },
    Builtin {
        name: "one_hot",
        params: &[req("ids", Array), req("k", Count)],
        summary: "one-hot rows for integer ids",
        doc: "`one_hot(ids, k)` turns `[N]` ids into `[N, k]` rows with a 1 at column id. Ids are truncated; negative ids become 0. E0402 when an id ≥ k.",
        example: "one_hot([0, 2, 1], 3)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.5",
        run: one_hot,
        shape: Some(super::ml_shapes::one_hot),
    },
    Builtin {
        name: "cross_entropy",
        params: &[req("logits", Array), req("targets", Array)],
        summary: "mean cross-entropy of logits against integer targets",
        doc: "`cross_entropy(logits, targets)`: logits `[N, V]` or `[B, T, V]`, targets with N (or B·T) integer elements in [0, V). Returns the mean over rows of logsumexp(row) − row[target]. E0214 when the target count differs; E0402 for a target outside [0, V).",
        example: "cross_entropy([[2, 1, 0.1], [0.5, 2.5, 0.3]], [0, 1])",
        diff: Diff::Yes,
        facts: Facts::NONE,
        section: "10.5",
        run: cross_entropy,
        shape: Some(super::ml_shapes::cross_entropy),
    },
    Builtin {
        name: "sinusoidal_encoding",
        params: &[req("T", Scalar), req("d", Scalar)],
        summary: "sinusoidal position encodings `[time, dim]`",
        doc: "`sinusoidal_encoding(T, d)` returns `[T, d]` with element (p, c) = sin θ for even c and cos θ for odd c, θ = p / 10000^(2·⌊c/2⌋/d). Names `[time, dim]`.",
        example: "sinusoidal_encoding(3, 4)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.5",
        run: sinusoidal_encoding,
        shape: Some(super::ml_shapes::sinusoidal_encoding),
    },
];

fn softmax_like(c: &mut Call, log: bool) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    if x.rank() == 0 {
        return Err(c.rank_error(0, "of rank 1 or more"));
    }
    let axis = if c.has(1) {
        c.axis(1, &x)?
    } else {
        x.rank() - 1
    };
    let span = c.span;
    Ok(Value::Array(ops::softmax(c.it, &x, axis, log, span)?))
}

fn softmax(c: &mut Call) -> Result<Value, Diagnostic> {
    softmax_like(c, false)
}

fn log_softmax(c: &mut Call) -> Result<Value, Diagnostic> {
    softmax_like(c, true)
}

fn logsumexp(c: &mut Call) -> Result<Value, Diagnostic> {
    let x = c.array(0)?.clone();
    let axis = if c.has(1) { Some(c.axis(1, &x)?) } else { None };
    Ok(Value::Array(ops::logsumexp(c.it, &x, axis, c.span)?))
}

fn one_hot(c: &mut Call) -> Result<Value, Diagnostic> {
    let ids = c.array_of_rank(0, 1, "a vector of ids `[N]`")?.to_f64();
    let k = c.count(1)?;
    super::construct::checked_numel(c, 1, &[ids.len(), k])?;
    let mut data = vec![0f32; ids.len() * k];
    for (r, &id) in ids.iter().enumerate() {
        data[r * k + super::site::one_hot_column(c, r, id, k)?] = 1.0;
    }
    Ok(Value::Array(Array::from_vec(vec![ids.len(), k], data)))
}

/// Validates logits and targets for `cross_entropy` and returns `(rows, vocab)`.
pub fn check_cross_entropy(
    c: &Call,
    logits: &Array,
    targets: &Array,
) -> Result<(usize, usize), Diagnostic> {
    let s = logits.shape();
    if s.len() != 2 && s.len() != 3 {
        return Err(c.rank_error(0, "`[N, V]` or `[B, T, V]`"));
    }
    let v = s[s.len() - 1];
    let rows: usize = s[..s.len() - 1].iter().product();
    if targets.numel() != rows {
        return Err(super::site::target_count_error(
            c,
            &named_shape(logits),
            &named_shape(targets),
            &rows.to_string(),
        ));
    }
    for (r, &t) in targets.to_f64().iter().enumerate() {
        super::site::check_target(c, r, t, v)?;
    }
    Ok((rows, v))
}

fn cross_entropy(c: &mut Call) -> Result<Value, Diagnostic> {
    let logits = c.array(0)?.clone();
    let targets = c.array(1)?.clone();
    let (rows, v) = check_cross_entropy(c, &logits, &targets)?;
    ops::placement_for(
        c.it,
        "cross_entropy",
        &[(&logits, c.args[0].span), (&targets, c.args[1].span)],
    )?;
    let span = c.span;
    Ok(Value::Array(ops::cross_entropy(
        c.it, &logits, rows, v, &targets, span,
    )?))
}

fn sinusoidal_encoding(c: &mut Call) -> Result<Value, Diagnostic> {
    let t = c.integer(0)?;
    let d = c.integer(1)?;
    super::site::check_encoding_sizes(c, Some(t), Some(d))?;
    let (t, d) = (t as usize, d as usize);
    super::construct::checked_numel(c, 0, &[t, d])?;
    let mut data = Vec::with_capacity(t * d);
    for p in 0..t {
        for col in 0..d {
            let theta = p as f64 / math::pow(10000.0, (2 * (col / 2)) as f64 / d as f64);
            data.push(if col % 2 == 0 {
                math::sin(theta)
            } else {
                math::cos(theta)
            });
        }
    }
    Ok(Value::Array(Array::from_f64(vec![t, d], &data).with_names(
        Some(vec![Some("time".into()), Some("dim".into())]),
    )))
}
