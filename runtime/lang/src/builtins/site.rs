//! What a builtin's implementation ([`crate::eval::Call`]) and its shape rule
//! ([`crate::check::ctx::ShapeCtx`]) share about the call they handle: the
//! builtin, where its arguments are written, and the diagnostics both word the
//! same way, so that a static error reads exactly like the runtime one.

use super::Builtin;
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};

/// A call of a builtin, seen at run time or by the checker.
pub trait CallSite {
    /// The builtin being called.
    fn builtin(&self) -> &'static Builtin;

    /// The span of argument `i` (the call's span if absent).
    fn arg_span(&self, i: usize) -> Span;

    /// Reports a warning (the interpreter emits it, the checker collects it).
    fn push_warning(&mut self, d: Diagnostic);

    /// The builtin's name.
    fn name(&self) -> &'static str {
        self.builtin().name
    }

    /// The declared name of parameter `i`.
    fn param_name(&self, i: usize) -> &'static str {
        self.builtin().param_at(i).map_or("argument", |p| p.name)
    }

    /// An error at argument `i` with a label.
    fn error_at(
        &self,
        i: usize,
        code: &'static str,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::error(code, message).at(self.arg_span(i), label)
    }

    /// The diagnostic of `code`, with its catalog headline, at argument `i`
    /// with a label.
    fn error_of(&self, i: usize, code: &'static str, label: impl Into<String>) -> Diagnostic {
        Diagnostic::of(code).at(self.arg_span(i), label)
    }

    /// E0401 (invalid argument value) at argument `i`.
    fn invalid(&self, i: usize, what: impl Into<String>) -> Diagnostic {
        let param = self.param_name(i);
        self.error_at(
            i,
            code::E0401,
            format!("invalid argument value for `{param}` of `{}`", self.name()),
            what,
        )
    }

    /// E0205: argument `i`, of named shape `shape`, has the wrong rank; it must
    /// be `expected` (such as "of rank 0 or 1").
    fn rank_error_for(&self, i: usize, shape: &str, expected: &str) -> Diagnostic {
        Diagnostic::of(code::E0205)
            .at(self.arg_span(i), format!("has shape {shape}"))
            .note(format!(
                "argument `{}` of `{}` must be {expected}",
                self.param_name(i),
                self.name()
            ))
    }

    /// Reports the warning `code`, with its catalog headline, at argument `i`.
    fn warn_of(&mut self, i: usize, code: &'static str, label: impl Into<String>) {
        let d = Diagnostic::of(code).at(self.arg_span(i), label);
        self.push_warning(d);
    }

    /// A warning at argument `i` with a label.
    fn warn_at(
        &mut self,
        i: usize,
        code: &'static str,
        message: impl Into<String>,
        label: impl Into<String>,
    ) {
        let d = Diagnostic::warning(code, message).at(self.arg_span(i), label);
        self.push_warning(d);
    }
}

/// The sizes of `reshape`'s shape argument (argument 1), with the index of the
/// one `-1` to infer (its size is 0 here); E0213 for more than one `-1` or a
/// size that is not a non-negative integer. Shared by the implementation and the
/// shape rule.
pub fn reshape_sizes(
    c: &impl CallSite,
    spec: &[f64],
) -> Result<(Vec<usize>, Option<usize>), Diagnostic> {
    let mut infer = None;
    let mut shape = Vec::with_capacity(spec.len());
    for (k, &v) in spec.iter().enumerate() {
        if v == -1.0 {
            if infer.replace(k).is_some() {
                return Err(c
                    .error_of(1, code::E0213, "more than one −1")
                    .note("only one dimension of `reshape` can be inferred"));
            }
            shape.push(0);
        } else if v < 0.0 || v.fract() != 0.0 || !v.is_finite() {
            return Err(c
                .error_of(
                    1,
                    code::E0213,
                    format!("{} is not a valid size", crate::display::format_f64(v)),
                )
                .note("sizes are non-negative integers; −1 infers one size"));
        } else {
            shape.push(v as usize);
        }
    }
    Ok((shape, infer))
}

/// The token ids `values` of argument `i`: E0402 for one that is negative, not
/// an integer, or above `max` (when given; else above `u32::MAX`). Shared by the
/// tokenizer builtins and their shape rules.
pub fn token_ids(
    c: &impl CallSite,
    i: usize,
    values: &[f64],
    max: Option<u32>,
) -> Result<Vec<u32>, Diagnostic> {
    values
        .iter()
        .enumerate()
        .map(|(k, &x)| {
            let ok =
                x.fract() == 0.0 && x >= 0.0 && max.map_or(x <= u32::MAX as f64, |m| x <= m as f64);
            if ok {
                Ok(x as u32)
            } else {
                let range = max.map_or("non-negative integers".to_string(), |m| {
                    format!("integers in 0..={m}")
                });
                Err(c
                    .error_of(
                        i,
                        code::E0402,
                        format!("{} at position {k}", crate::display::format_f64(x)),
                    )
                    .note(format!("ids must be {range}")))
            }
        })
        .collect()
}

/// The column of `one_hot`'s row `r` for the id `id` (NaN and negative ids are
/// 0, others truncated); E0402 when it is not below `k`. Shared by the
/// implementation and the shape rule.
pub fn one_hot_column(c: &impl CallSite, r: usize, id: f64, k: usize) -> Result<usize, Diagnostic> {
    let id = if id.is_nan() || id < 0.0 {
        0.0
    } else {
        id.trunc()
    };
    if id >= k as f64 {
        return Err(c
            .error_of(
                0,
                code::E0402,
                format!("id {} at position {r}", crate::display::format_f64(id)),
            )
            .note(format!("ids must be below k = {k}")));
    }
    Ok(id as usize)
}

/// E0213 at argument `i`, a size of a layer constructor.
pub fn dim_error(c: &impl CallSite, i: usize, label: impl Into<String>) -> Diagnostic {
    c.error_of(i, mlpl_diag::code::E0213, label).note(format!(
        "argument `{}` of `{}` is a size",
        c.param_name(i),
        c.name()
    ))
}

/// The `rope(…)` layer passed as argument `i` of an attention constructor with
/// heads of `hd`: E0401 for another kind of model, E0213 for another size.
pub fn rope_argument(
    c: &impl CallSite,
    i: usize,
    layer: &crate::nn::layers::Layer,
    hd: usize,
) -> Result<crate::nn::layers::Rope, Diagnostic> {
    let crate::nn::layers::Layer::Rope(r) = layer else {
        return Err(c
            .invalid(
                i,
                format!("this is a {}, not a `rope(…)` layer", layer.describe()),
            )
            .help(format!("pass `rope({hd}, 10000)`")));
    };
    if r.head_dim > hd {
        return Err(dim_error(
            c,
            i,
            format!("rope size {} exceeds the head width {hd}", r.head_dim),
        )
        .note("a rope narrower than the heads rotates their first entries (partial rotary)"));
    }
    Ok(*r)
}

/// E0303 for an attention `rope` argument that is neither a `rope(…)` layer
/// nor 0.
pub fn rope_kind_error(c: &impl CallSite, i: usize, kind: &str, hd: usize) -> Diagnostic {
    c.error_of(i, code::E0303, format!("this is a {kind}"))
        .note("the rope argument of attention is a `rope(…)` layer, or 0 for none")
        .help(format!("pass `rope({hd}, 10000)` or 0"))
}

/// E0401 when `rope` has some but not all four scaling arguments.
pub fn rope_scaling_missing(c: &impl CallSite) -> Diagnostic {
    c.invalid(
        2,
        "Llama 3.1 scaling needs all four of factor, low, high and original",
    )
    .help("write `rope(hd, base, 8, 1, 4, 8192)` or leave the four out")
}

/// The `embed` layer of argument `i` (E0401 for any other model).
pub fn embed_argument(
    c: &impl CallSite,
    i: usize,
    layer: &crate::nn::layers::Layer,
) -> Result<crate::nn::layers::Embed, Diagnostic> {
    match layer {
        crate::nn::layers::Layer::Embed(e) => Ok(*e),
        other => Err(c
            .invalid(i, format!("this is a {}, not an `embed(…)` layer", other.describe()))
            .note("`unembed(e)` reuses the table of an `embed` layer as the output head")
            .help("pass the embedding layer itself, e.g. `e = embed(vocab, d, seed)` then `unembed(e)`")),
    }
}

/// An attention layer's head width: `given` when not 0, else
/// d / heads, which then must divide evenly (E0213).
pub fn head_width(
    c: &impl CallSite,
    d: usize,
    heads: usize,
    given: Option<usize>,
) -> Result<usize, Diagnostic> {
    match given {
        Some(hd) if hd > 0 => {
            if heads == 0 {
                return Err(
                    dim_error(c, 1, "0 heads".to_string()).help("choose a number of heads ≥ 1")
                );
            }
            Ok(hd)
        }
        _ => {
            check_heads(c, d, heads)?;
            Ok(d / heads)
        }
    }
}

/// E0401 unless a switch argument `i` (a bias) is 0 (off) or 1 (on).
pub fn check_switch(c: &impl CallSite, i: usize, v: f64) -> Result<bool, Diagnostic> {
    if v != 0.0 && v != 1.0 {
        return Err(c.invalid(i, format!("{} must be 0 (off) or 1 (on)", c.param_name(i))));
    }
    Ok(v == 1.0)
}

/// E0401 unless an epsilon (argument `i`) is a finite number > 0.
pub fn check_eps(c: &impl CallSite, i: usize, eps: f64) -> Result<f64, Diagnostic> {
    if !(eps.is_finite() && eps > 0.0) {
        return Err(c
            .invalid(
                i,
                format!("{} must be a finite number > 0", c.param_name(i)),
            )
            .help("norm epsilons are small positive numbers such as 1e-5 or 1e-6"));
    }
    Ok(eps)
}

/// An attention layer's q/k norm argument `i`: 0 for none, else an epsilon
/// (finite, > 0, E0401).
pub fn qk_norm_value(c: &impl CallSite, i: usize, v: f64) -> Result<Option<f64>, Diagnostic> {
    if v == 0.0 {
        return Ok(None);
    }
    check_eps(c, i, v).map(Some)
}

/// An attention layer's sliding window argument `i`: 0 for none, else the
/// number of positions a query sees (E0213 unless a non-negative integer).
pub fn window_value(c: &impl CallSite, i: usize, v: f64) -> Result<Option<usize>, Diagnostic> {
    let w = size_argument(c, i, v)?;
    Ok((w > 0).then_some(w))
}

/// `moe`'s expert activation from alpha (argument 6) and limit (argument 7):
/// alpha 0 is SwiGLU, alpha > 0 GPT-OSS's clamped form with limit > 0 (both
/// finite, E0401).
pub fn moe_gate(
    c: &impl CallSite,
    alpha: f64,
    limit: Option<f64>,
) -> Result<crate::nn::layers::MoeGate, Diagnostic> {
    if alpha == 0.0 {
        return Ok(crate::nn::layers::MoeGate::Silu);
    }
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(c.invalid(6, "alpha must be 0 (SwiGLU) or a finite number > 0"));
    }
    let Some(limit) = limit else {
        return Err(c
            .invalid(6, "the clamped gated activation needs a limit")
            .help("write `moe(d, experts, top_k, hidden, seed, 1, 1.702, 7)` (GPT-OSS)"));
    };
    if !(limit.is_finite() && limit > 0.0) {
        return Err(c.invalid(7, "limit must be a finite number > 0"));
    }
    Ok(crate::nn::layers::MoeGate::Clamped { alpha, limit })
}

/// E0401 unless `yarn_rope`'s factor (argument 2), original (3), beta_fast
/// (4) and beta_slow (5) are finite numbers > 0 with beta_fast > beta_slow;
/// `truncate` (6) is a switch checked by the caller.
pub fn check_yarn(
    c: &impl CallSite,
    v: [f64; 4],
    truncate: bool,
) -> Result<crate::nn::layers::RopeScaling, Diagnostic> {
    for (k, x) in v.iter().enumerate() {
        if !(x.is_finite() && *x > 0.0) {
            return Err(c.invalid(
                2 + k,
                format!("{} must be a finite number > 0", c.param_name(2 + k)),
            ));
        }
    }
    if v[2] <= v[3] {
        return Err(c.invalid(4, "beta_fast must be greater than beta_slow"));
    }
    Ok(crate::nn::layers::RopeScaling::yarn(
        v[0], v[1], v[2], v[3], truncate,
    ))
}

/// E0401 unless `rope`'s Llama 3.1 scaling (arguments 2 to 5: factor, low,
/// high, original) are finite numbers > 0 with high > low.
pub fn check_rope_scaling(
    c: &impl CallSite,
    v: [f64; 4],
) -> Result<crate::nn::layers::RopeScaling, Diagnostic> {
    for (k, x) in v.iter().enumerate() {
        if !(x.is_finite() && *x > 0.0) {
            return Err(c.invalid(
                2 + k,
                format!("{} must be a finite number > 0", c.param_name(2 + k)),
            ));
        }
    }
    if v[2] <= v[1] {
        return Err(c.invalid(4, "high must be greater than low"));
    }
    Ok(crate::nn::layers::RopeScaling::Llama3 {
        factor: v[0],
        low: v[1],
        high: v[2],
        original: v[3],
    })
}

/// E0106: `svg`'s chart type `other` (argument `i`) is not one of [`super::viz::SVG_TYPES`].
pub fn unknown_chart(c: &impl CallSite, i: usize, other: &str) -> Diagnostic {
    c.error_at(
        i,
        mlpl_diag::code::E0106,
        format!("unknown chart type `{other}`"),
        "not a chart type",
    )
    .note(format!("chart types: {}", super::viz::SVG_TYPES.join(", ")))
}

/// E0105: `estimate_hypothetical`'s architecture (argument `i`) is an unknown
/// name or a description it cannot read (`e`: what and how to fix it).
pub fn unknown_architecture(
    c: &impl CallSite,
    i: usize,
    e: &crate::estimate::spec::SpecError,
) -> Diagnostic {
    c.error_at(
        i,
        mlpl_diag::code::E0105,
        e.message.clone(),
        "not an architecture `estimate_hypothetical` knows",
    )
    .note(format!(
        "known architectures: {}",
        crate::estimate::hypothetical::names()
    ))
    .help(e.help.clone())
}

/// E0104: `load_preloaded`'s corpus `name` (argument `i`) is not preloaded.
pub fn unknown_corpus(c: &impl CallSite, i: usize, name: &str) -> Diagnostic {
    c.error_at(
        i,
        mlpl_diag::code::E0104,
        format!("unknown corpus `{name}`"),
        "not a preloaded corpus",
    )
    .note(format!(
        "known corpora: {}",
        crate::data::corpora::NAMES.join(", ")
    ))
}

/// E0213 unless `heads` (argument 1 of an attention constructor) is at least 1
/// and divides the width `d`.
pub fn check_heads(c: &impl CallSite, d: usize, heads: usize) -> Result<(), Diagnostic> {
    if heads == 0 || !d.is_multiple_of(heads) {
        return Err(
            dim_error(c, 1, format!("{heads} heads do not divide d = {d}"))
                .help("choose a number of heads ≥ 1 that divides the model width"),
        );
    }
    Ok(())
}

/// E0213 unless `kv` key/value heads (argument 3) is at least 1 and divides
/// `heads`.
pub fn check_kv_heads(c: &impl CallSite, heads: usize, kv: usize) -> Result<(), Diagnostic> {
    if kv == 0 || !heads.is_multiple_of(kv) {
        return Err(dim_error(c, 3, format!("{kv} key/value heads do not divide {heads} heads"))
            .help("kv_heads must be ≥ 1 and divide heads (kv_heads = heads is ordinary multi-head attention)"));
    }
    Ok(())
}

/// E0401 unless `rms_norm`'s gain (argument `i`) is 0 (none) or 1 (learned).
pub fn check_gain(c: &impl CallSite, i: usize, gain: f64) -> Result<(), Diagnostic> {
    if gain != 0.0 && gain != 1.0 {
        return Err(c.invalid(i, "gain must be 0 (no gain) or 1 (a learned gain)"));
    }
    Ok(())
}

/// E0401 unless the drop probability `p` (argument `i`) is in [0, 1).
pub fn check_drop_probability(c: &impl CallSite, i: usize, p: f64) -> Result<(), Diagnostic> {
    if !(0.0..1.0).contains(&p) {
        return Err(c.invalid(
            i,
            format!("p = {} is outside [0, 1)", crate::display::format_f64(p)),
        ));
    }
    Ok(())
}

/// E0213 unless the size `n` of argument `i` (a hidden width, a number of
/// experts) is at least 1; the message names the parameter.
pub fn check_positive_size(c: &impl CallSite, i: usize, n: usize) -> Result<(), Diagnostic> {
    if n == 0 {
        return Err(dim_error(c, i, format!("{} must be ≥ 1", c.param_name(i))));
    }
    Ok(())
}

/// E0213 unless `rope`'s head size `n` (argument `i`) is even and at least 2.
pub fn check_rope_size(c: &impl CallSite, i: usize, n: usize) -> Result<(), Diagnostic> {
    if n < 2 || !n.is_multiple_of(2) {
        return Err(dim_error(
            c,
            i,
            format!("head_dim = {n} is not an even size ≥ 2"),
        ));
    }
    Ok(())
}

/// E0401 unless `rope`'s base (argument `i`) is a finite number above 0.
pub fn check_rope_base(c: &impl CallSite, i: usize, base: f64) -> Result<(), Diagnostic> {
    if !(base.is_finite() && base > 0.0) {
        return Err(c.invalid(i, "base must be a finite number > 0"));
    }
    Ok(())
}

/// E0213 unless `moe`'s top_k (argument `i`) is in 1..=experts.
pub fn check_top_k(
    c: &impl CallSite,
    i: usize,
    k: usize,
    experts: usize,
) -> Result<(), Diagnostic> {
    if k == 0 || k > experts {
        return Err(dim_error(
            c,
            i,
            format!("top_k = {k} is outside 1..={experts}"),
        ));
    }
    Ok(())
}

/// E0216: `argmax` of an empty array or axis (argument 0 has named shape `shape`).
pub fn empty_argmax(c: &impl CallSite, shape: &str) -> Diagnostic {
    c.error_of(0, mlpl_diag::code::E0216, format!("has shape {shape}"))
        .note("`argmax` needs at least one element")
}

/// E0214: `cross_entropy`'s targets (argument 1, named shape `targets`) are
/// not one per row of the logits (argument 0, `logits`; `rows` rows).
pub fn target_count_error(
    c: &impl CallSite,
    logits: &str,
    targets: &str,
    rows: &str,
) -> Diagnostic {
    c.error_of(1, mlpl_diag::code::E0214, format!("targets: {targets}"))
        .with_label(c.arg_span(0), format!("logits: {logits}"))
        .note(format!(
            "expected [{rows}] targets (one per row of the logits), got {targets}"
        ))
}

/// E0402 unless `cross_entropy`'s target `t` at position `r` is an integer in
/// `[0, v)`.
pub fn check_target(c: &impl CallSite, r: usize, t: f64, v: usize) -> Result<(), Diagnostic> {
    if t.fract() != 0.0 || !(t >= 0.0 && t < v as f64) {
        return Err(c
            .error_of(
                1,
                mlpl_diag::code::E0402,
                format!("target {} at position {r}", crate::display::format_f64(t)),
            )
            .note(format!("targets must be integers in [0, {v})")));
    }
    Ok(())
}

/// E0401 unless `top_k`'s k (argument `i`) is an integer in 1..=n.
pub fn check_top_k_of(c: &impl CallSite, i: usize, k: f64, n: usize) -> Result<(), Diagnostic> {
    if k.fract() != 0.0 || !(k >= 1.0 && k <= n as f64) {
        return Err(c.invalid(i, format!("k must be an integer in 1..={n}")));
    }
    Ok(())
}

/// E0401 unless `adamw`'s weight decay (argument `i`) is a number ≥ 0.
pub fn check_weight_decay(c: &impl CallSite, i: usize, wd: f64) -> Result<(), Diagnostic> {
    if !(wd >= 0.0) {
        return Err(c.invalid(i, "weight_decay must be ≥ 0"));
    }
    Ok(())
}

/// E0401 unless argument `i`'s value `v` is a finite number above 0.
pub fn check_finite_positive(c: &impl CallSite, i: usize, v: f64) -> Result<(), Diagnostic> {
    if !(v.is_finite() && v > 0.0) {
        return Err(c.invalid(
            i,
            format!("`{}` must be a finite positive number", c.param_name(i)),
        ));
    }
    Ok(())
}

/// E0309 when the model of argument 0 has no parameter to train.
pub fn check_trainable(
    c: &impl CallSite,
    model: &crate::nn::layers::Layer,
) -> Result<(), Diagnostic> {
    if crate::nn::estimate::param_count(model) == 0.0 {
        return Err(c
            .error_of(0, mlpl_diag::code::E0309, "nothing to train")
            .note("`estimate_train` needs a model with at least one parameter"));
    }
    Ok(())
}

/// E0401 unless `calibrate_device`'s size (argument 0, already positive) is an
/// integer up to 16384.
pub fn check_calibration_size(c: &impl CallSite, size: f64) -> Result<(), Diagnostic> {
    if size.fract() != 0.0 || size > 16384.0 {
        return Err(c.invalid(0, "size must be an integer between 1 and 16384"));
    }
    Ok(())
}

/// E0218: `feasible`'s estimate (argument 0) must be `[5]`, its budget
/// (argument 1) `[3]`; `shape` is the argument's named shape.
pub fn feasible_shape_error(c: &impl CallSite, i: usize, shape: &str) -> Diagnostic {
    let note = if i == 0 {
        "estimate must be rank-1 [5]"
    } else {
        "budget must be rank-1 [3] [vram, disk, wall]"
    };
    c.error_of(i, mlpl_diag::code::E0218, format!("has shape {shape}"))
        .note(note)
}

/// Argument `i`'s value `v` as a count of at least 1 (capped at `u32::MAX`);
/// E0401 naming `what` ("block", "the batch size") otherwise.
pub fn positive_count(
    c: &impl CallSite,
    i: usize,
    v: f64,
    what: &str,
) -> Result<usize, Diagnostic> {
    if v.fract() != 0.0 || !(v >= 1.0) {
        return Err(c.invalid(i, format!("{what} must be an integer ≥ 1")));
    }
    Ok(v.min(u32::MAX as f64) as usize)
}

/// E0210: `reshape`'s −1 cannot be inferred: the `count` elements of `x`
/// (named shape `x`) are not a multiple of the `known` product of the others.
pub fn reshape_infer_error(c: &impl CallSite, x: &str, count: usize, known: usize) -> Diagnostic {
    c.error_of(1, mlpl_diag::code::E0210, "−1 cannot be inferred")
        .note(format!(
            "{x} has {count} elements, which is not a multiple of {known}"
        ))
}

/// E0210: `reshape`'s new shape holds `known` elements where `x` (named shape
/// `x`) has `count`.
pub fn reshape_count_error(c: &impl CallSite, x: &str, count: usize, known: usize) -> Diagnostic {
    c.error_of(1, mlpl_diag::code::E0210, format!("{known} elements"))
        .with_label(c.arg_span(0), format!("{count} elements: {x}"))
}

/// W0204: `iota`'s indices above 2²⁴ are not exact in float32.
pub fn warn_rounded_indices(c: &mut impl CallSite) {
    c.warn_of(
        0,
        mlpl_diag::code::W0204,
        "indices above 16777216 are rounded",
    );
}

/// E0218: `grid`'s bounds (argument 0) have `len` elements, not 4.
pub fn grid_bounds_error(c: &impl CallSite, len: usize) -> Diagnostic {
    c.error_of(0, mlpl_diag::code::E0218, format!("{len} elements"))
        .note("bounds are [xmin, xmax, ymin, ymax]")
}

/// E0401: `grid`'s n (argument 1) is below 1.
pub fn grid_size_error(c: &impl CallSite) -> Diagnostic {
    c.invalid(1, "n must be at least 1")
}

/// E0107: argument `i` names no parameter family of `reinit` / `freeze`.
pub fn unknown_family(c: &impl CallSite, i: usize, name: &str) -> Diagnostic {
    c.error_at(
        i,
        mlpl_diag::code::E0107,
        format!("unknown parameter family `{name}`"),
        "not a parameter family",
    )
    .note(format!(
        "the families are {}",
        crate::nn::families::NAMES.join(", ")
    ))
}

/// E0401 unless `reinit`'s standard deviation (argument `i`) is finite and ≥ 0.
pub fn check_std(c: &impl CallSite, i: usize, std: f64) -> Result<(), Diagnostic> {
    if !(std.is_finite() && std >= 0.0) {
        return Err(c.invalid(i, "std must be a finite number ≥ 0"));
    }
    Ok(())
}

/// E0308: `embed_table`'s model (argument 0) has no `embed` layer.
pub fn no_embedding_error(c: &impl CallSite) -> Diagnostic {
    c.error_of(
        0,
        mlpl_diag::code::E0308,
        "this model has no embedding layer",
    )
    .note("`embed_table` reads the table of the first `embed` layer")
}

/// The diagnostic of a path the data-directory sandbox refused, at argument
/// `i`: E0403 (no data directory), E0404 (outside it) or E0405 (unreadable),
/// with the fix.
pub fn path_error(c: &impl CallSite, i: usize, e: &crate::data::files::PathError) -> Diagnostic {
    let headline = match e.code() {
        code::E0403 => "no data directory",
        code::E0404 => "path outside the data directory",
        _ => "file cannot be read or written",
    };
    let d = c.error_at(i, e.code(), headline, e.to_string());
    match e.code() {
        code::E0403 if cfg!(target_arch = "wasm32") => d.help(
            "the browser playground cannot read or write files; use `load_preloaded` for the built-in corpora, or run the script with `mlpl run`",
        ),
        code::E0403 => d.help(
            "pass `--data-dir DIR` to `mlpl run`, or use `load_preloaded` for the built-in corpora",
        ),
        code::E0404 => {
            d.help("use a relative path such as \"data/train.csv\" inside the data directory")
        }
        _ => d,
    }
}

/// E0401 unless the path at argument `i` ends in `.safetensors`.
pub fn check_safetensors_path(c: &impl CallSite, i: usize, path: &str) -> Result<(), Diagnostic> {
    if path.ends_with(".safetensors") {
        Ok(())
    } else {
        Err(c.invalid(i, "the path must end in `.safetensors`"))
    }
}

/// Argument `i` as a non-negative integer (at most `u32::MAX`), else E0401.
pub fn nonnegative_integer(c: &impl CallSite, i: usize, v: f64) -> Result<usize, Diagnostic> {
    if v.fract() != 0.0 || !(v >= 0.0) || v > u32::MAX as f64 {
        return Err(c.invalid(i, "must be a non-negative integer"));
    }
    Ok(v as usize)
}

/// What an analysis builtin's first argument must be.
pub const MATRIX_ND: &str = "a matrix `[N, D]`";

/// What `blobs`' centres must be.
pub const BLOB_CENTERS: &str = "`[K, 2]` or `[2K]` (one (x, y) pair per class)";

/// Which of `to_device`'s two arguments is the target string, given whether
/// each is a string (`None`: not known): `Some((target, value))`, `None` when
/// it cannot be told yet, E0311 for two strings and E0302 for none.
pub fn device_target_argument(
    c: &impl CallSite,
    is_string: [Option<bool>; 2],
) -> Result<Option<(usize, usize)>, Diagnostic> {
    match is_string {
        [Some(true), Some(true)] => Err(c
            .error_of(0, code::E0311, "a string")
            .note("exactly one argument is the target string; the other is an array or a model")),
        [Some(true), Some(false)] => Ok(Some((0, 1))),
        [Some(false), Some(true)] => Ok(Some((1, 0))),
        [Some(false), Some(false)] => Err(c
            .error_of(1, code::E0302, "not a device target")
            .note("one argument must be the target: \"cpu\", \"cuda\", \"cuda:N\" or \"mlx\"")),
        _ => Ok(None),
    }
}

/// E0502 for a target string at argument `i` that names no device.
pub fn unknown_device_target(c: &impl CallSite, i: usize, name: &str) -> Diagnostic {
    c.error_of(i, code::E0502, format!("\"{name}\""))
        .help("device targets are \"cpu\", \"cuda\", \"cuda:N\" and \"mlx\"")
}

/// E0310 when `lora`'s model already has adapters.
pub fn check_not_lora_student(
    c: &impl CallSite,
    m: &crate::nn::layers::Layer,
) -> Result<(), Diagnostic> {
    if m.any(&|l| matches!(l, crate::nn::layers::Layer::Lora(_))) {
        return Err(c
            .error_of(0, code::E0310, "this model is a LoRA student")
            .help(
            "apply `lora` to the original model, or `unfreeze` the student for full fine-tuning",
        ));
    }
    Ok(())
}

/// E0213 for a `lora` rank (argument 1) that is not an integer ≥ 1 or, when
/// the model is known, exceeds min(in, out) of one of its linear layers.
pub fn check_lora_rank(
    c: &impl CallSite,
    r: f64,
    m: Option<&crate::nn::layers::Layer>,
) -> Result<(), Diagnostic> {
    use crate::display::format_f64;
    if !(r.is_finite() && r.fract() == 0.0 && r >= 1.0) {
        return Err(dim_error(
            c,
            1,
            format!("rank {} is not an integer ≥ 1", format_f64(r)),
        ));
    }
    let mut too_small = None;
    if let Some(m) = m {
        m.walk_distinct(&mut |l| {
            if let crate::nn::layers::Layer::Linear(x) = l {
                if too_small.is_none() && r > x.inp.min(x.out) as f64 {
                    too_small = Some((x.inp, x.out));
                }
            }
        });
    }
    match too_small {
        Some((inp, out)) => Err(dim_error(
            c,
            1,
            format!(
                "rank {} exceeds min(in, out) = {} of `linear({inp}, {out})`",
                format_f64(r),
                inp.min(out)
            ),
        )),
        None => Ok(()),
    }
}

/// E0401 for `sinusoidal_encoding`'s sizes where known: T ≥ 0 and d ≥ 1.
pub fn check_encoding_sizes(
    c: &impl CallSite,
    t: Option<i64>,
    d: Option<i64>,
) -> Result<(), Diagnostic> {
    if t.is_some_and(|t| t < 0) {
        return Err(c.invalid(0, "T must be an integer ≥ 0"));
    }
    if d.is_some_and(|d| d < 1) {
        return Err(c.invalid(1, "d must be an integer ≥ 1"));
    }
    Ok(())
}

/// E0401 unless the clipping norm at argument `i` is a positive finite number.
pub fn check_max_grad_norm(c: &impl CallSite, i: usize, v: f64) -> Result<(), Diagnostic> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(c.invalid(i, "max_grad_norm must be a positive number"))
    }
}

/// `hist`'s bin count (argument 1): an integer from 1 to 100000, else E0401.
pub fn hist_bins(c: &impl CallSite, bins: f64) -> Result<usize, Diagnostic> {
    if bins.fract() != 0.0 || !(1.0..=100_000.0).contains(&bins) {
        return Err(c.invalid(1, "bins must be an integer between 1 and 100000"));
    }
    Ok(bins as usize)
}

/// E0218 when argument `i` has `m` entries where a chart has `n` points.
pub fn check_point_count(
    c: &impl CallSite,
    i: usize,
    n: usize,
    m: usize,
) -> Result<(), Diagnostic> {
    if n == m {
        return Ok(());
    }
    Err(c
        .error_of(i, code::E0218, format!("{m} entries"))
        .note(format!("expected {n}, one per point")))
}

/// E0218 for `decision_boundary`'s dims (argument 1) of `len` entries, not 2.
pub fn boundary_dims_error(c: &impl CallSite, len: usize) -> Diagnostic {
    c.error_of(1, code::E0218, format!("{len} entries"))
        .note("dims is [rows, cols]")
}

/// A size argument `v` at `i`: a non-negative integer (at most 9·10¹⁵), else E0213.
pub fn size_argument(c: &impl CallSite, i: usize, v: f64) -> Result<usize, Diagnostic> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9.0e15 {
        return Ok(v as usize);
    }
    Err(dim_error(
        c,
        i,
        format!(
            "{} is not a non-negative integer",
            crate::display::format_f64(v)
        ),
    ))
}

/// E0308 for `attention_weights` of a model without attention.
pub fn no_attention_error(c: &impl CallSite) -> Diagnostic {
    c.error_of(0, code::E0308, "this model has no attention layer").note(
        "`attention_weights` returns the probabilities of the first `attention` or `causal_attention` layer",
    )
}

/// W0106: `aux_loss` of a model without `moe` layers.
pub fn warn_no_aux_loss(c: &mut impl CallSite) {
    c.warn_of(0, code::W0106, "`aux_loss` of this model is always 0");
}

/// E0302 for a corpus argument `i` that is a `kind`, neither text nor bytes.
pub fn not_a_corpus(c: &impl CallSite, i: usize, kind: &str) -> Diagnostic {
    c.error_of(i, code::E0302, format!("this is a {kind}"))
        .note("pass text or an array of bytes")
}

/// E0411 when a model built by `chain` or `residual` would nest deeper than
/// [`crate::nn::MAX_MODEL_DEPTH`] or run more than [`crate::nn::MAX_MODEL_LAYERS`]
/// layers per application (the implementation and the shape rule both call it).
pub fn check_model_extent(c: &impl CallSite, layer: &crate::nn::Layer) -> Result<(), Diagnostic> {
    use crate::nn::{MAX_MODEL_DEPTH, MAX_MODEL_LAYERS};
    let e = layer.extent();
    if e.depth > MAX_MODEL_DEPTH {
        return Err(c
            .error_of(
                0,
                code::E0411,
                format!(
                    "`{}` would nest the model {} levels deep",
                    c.name(),
                    e.depth
                ),
            )
            .note(format!(
                "models nest at most {MAX_MODEL_DEPTH} levels of `chain` and `residual`"
            )));
    }
    if e.layers > MAX_MODEL_LAYERS {
        return Err(c
            .error_of(
                0,
                code::E0411,
                format!("one application of this model would run {} layers", e.layers),
            )
            .note(format!(
                "a model runs at most {MAX_MODEL_LAYERS} layers per application; a sub-model used n times counts n times"
            )));
    }
    Ok(())
}

// Slicing, permutations and AdamW's decay groups (`slice`, `permute`, `adamw`).

/// The positions `slice(x, axis, start, stop [, step])` takes along an axis of
/// `size` described by `axis_text` (such as "axis `time`"), as `(first, step,
/// len)`: bounds negative from the end as in Python; E0220 for a bound outside
/// −size..=size or a start after the stop, E0401 for a step below 1.
pub fn slice_range(
    c: &impl CallSite,
    axis_text: &str,
    size: usize,
    start: i64,
    stop: i64,
    step: i64,
) -> Result<(usize, usize, usize), Diagnostic> {
    if step < 1 {
        return Err(c.invalid(
            4,
            format!("step {step}: a slice's step must be a positive integer"),
        ));
    }
    let n = size as i64;
    let bound = |i: usize, what: &str, v: i64| -> Result<i64, Diagnostic> {
        if v < -n || v > n {
            return Err(c
                .error_of(
                    i,
                    code::E0220,
                    format!("{what} {v} is outside {axis_text} of size {size}"),
                )
                .note(format!(
                    "bounds run from {} to {size}; negative ones count from the end, as in Python",
                    -n
                )));
        }
        Ok(if v < 0 { v + n } else { v })
    };
    let (s, e) = (bound(2, "start", start)?, bound(3, "stop", stop)?);
    if s > e {
        return Err(c
            .error_of(
                2,
                code::E0220,
                format!("start {start} is after stop {stop} in {axis_text} of size {size}"),
            )
            .note("a slice runs forward from start to stop; start = stop gives an empty slice"));
    }
    let len = (e - s + step - 1) / step;
    Ok((s as usize, step as usize, len as usize))
}

/// E0221 unless `axes` (resolved, one per argument from argument 1 on) name
/// every axis of an array of `rank` and shape `shape` exactly once.
pub fn check_permutation(
    c: &impl CallSite,
    rank: usize,
    shape: &str,
    axes: &[usize],
) -> Result<(), Diagnostic> {
    if let Some(j) = (1..axes.len()).find(|&j| axes[..j].contains(&axes[j])) {
        return Err(c
            .error_of(
                j + 1,
                code::E0221,
                format!("axis {} is given twice", axes[j]),
            )
            .note(format!(
                "the array has shape {shape}; each axis is listed once"
            )));
    }
    if axes.len() != rank {
        return Err(c
            .error_of(
                0,
                code::E0221,
                format!("{} axes given for an array of rank {rank}", axes.len()),
            )
            .note(format!(
                "the array has shape {shape}; `permute` lists all {rank} axes in their new order"
            )));
    }
    Ok(())
}

/// AdamW's decay group (argument `i`), or E0401 naming the groups.
pub fn decay_group(
    c: &impl CallSite,
    i: usize,
    name: &str,
) -> Result<crate::nn::DecayGroup, Diagnostic> {
    crate::nn::DecayGroup::parse(name).ok_or_else(|| {
        c.invalid(i, format!("unknown decay group \"{name}\""))
            .note(format!(
                "the groups are {}",
                crate::nn::DecayGroup::ALL
                    .iter()
                    .map(|g| format!("\"{}\"", g.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
    })
}

/// `adamw`'s decay group, given the call's argument count, the position `at`
/// of its first string argument after `weight_decay` (7 or 8) and the
/// strings' values (`None` where not known): the named
/// group, the default without one; E0302 when argument 8 is not a string and
/// E0401 when an argument follows the group or the name is unknown.
pub fn adamw_decay<'s>(
    c: &impl CallSite,
    count: usize,
    at: Option<usize>,
    string: impl Fn(usize) -> Option<&'s str>,
) -> Result<crate::nn::DecayGroup, Diagnostic> {
    match at {
        Some(7) if count > 8 => Err(c.invalid(
            8,
            "the decay group comes last: `max_grad_norm` goes before it",
        )),
        Some(i) => match string(i) {
            Some(name) => decay_group(c, i, name),
            None => Ok(crate::nn::DecayGroup::NoBiasNorm),
        },
        None if count > 8 => Err(c.error_at(
            8,
            code::E0302,
            "expected a string",
            "the decay group is a string such as \"all\"",
        )),
        None => Ok(crate::nn::DecayGroup::NoBiasNorm),
    }
}

/// E0222 unless `concat(a, b, axis)`'s operands, of shapes `sa` and `sb` and
/// axis names `na` and `nb` (`None` where unnamed or not known), have one
/// rank and agree on every axis but `axis`.
pub fn check_concat_axis(
    c: &impl CallSite,
    axis: usize,
    (sa, sb): (&[usize], &[usize]),
    (na, nb): (&[Option<String>], &[Option<String>]),
) -> Result<(), Diagnostic> {
    let show = |s: &[usize]| {
        let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
        format!("[{}]", v.join(", "))
    };
    let at = |what: String| {
        c.error_of(1, code::E0222, what).note(format!(
            "`a` has shape {} and `b` {}",
            show(sa),
            show(sb)
        ))
    };
    if sa.len() != sb.len() {
        return Err(at(format!("rank {} joined to rank {}", sb.len(), sa.len())));
    }
    for i in (0..sa.len()).filter(|&i| i != axis) {
        if sa[i] != sb[i] {
            return Err(at(format!(
                "axis {i} has size {} here and {} in `a`",
                sb[i], sa[i]
            )));
        }
        if let (Some(Some(x)), Some(Some(y))) = (na.get(i), nb.get(i)) {
            if x != y {
                return Err(at(format!("axis {i} is named `{y}` here and `{x}` in `a`")));
            }
        }
    }
    Ok(())
}
