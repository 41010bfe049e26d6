//! Hover, completion and signature help: pure functions of an [`Analysis`].

use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, Documentation, Hover, HoverContents,
    InsertTextFormat, MarkupContent, MarkupKind, ParameterInformation, ParameterLabel,
    SignatureHelp, SignatureInformation, TextEdit,
};
use mlpl_diag::codes;
use mlpl_diag::Span;
use mlpl_lang::builtins::{self, Builtin, ParamKind};
use mlpl_lang::check::query::{OptimizerCall, TrainBlock};
use mlpl_lang::check::AbsValue;
use mlpl_lang::data::corpora;
use mlpl_lang::estimate::hypothetical;
use mlpl_lang::nn::Layer;

use crate::analysis::{Analysis, OccKind};
use crate::context::context;
use crate::feasibility::{self, DeviceProfile, TrainEstimate};
use crate::measured::DocMeasurements;
use crate::values::{describe, group_digits};
use mlpl_lang::train_loops::loops::BatchInfo;

/// Device targets offered inside `device("`.
pub const DEVICE_NAMES: &[(&str, &str)] = &[
    ("cpu", "the host CPU (always available)"),
    ("cuda", "the first NVIDIA GPU (CUDA builds)"),
    ("cuda:0", "NVIDIA GPU number 0"),
    ("cuda:1", "NVIDIA GPU number 1"),
    ("mlx", "the Apple GPU through MLX (macOS builds)"),
];

const KEYWORDS: &[(&str, &str, &str)] = &[
    (
        "fn",
        "fn ${1:name}(${2:x}) {\n\t$0\n}",
        "a function: `fn name(x : [n, d]) -> [n, d] { … }`",
    ),
    (
        "train",
        "train ${1:steps} {\n\t$0\n}",
        "a training loop: `train N { … }` (LANGUAGE §12)",
    ),
    (
        "repeat",
        "repeat ${1:n} {\n\t$0\n}",
        "repeat a block N times",
    ),
    (
        "for",
        "for ${1:x} in ${2:xs} {\n\t$0\n}",
        "loop over the rows of an array",
    ),
    (
        "experiment",
        "experiment \"${1:name}\" {\n\t$0\n}",
        "record an experiment",
    ),
    (
        "device",
        "device(\"${1:cpu}\") {\n\t$0\n}",
        "run a block on a device (LANGUAGE §14)",
    ),
];

/// Settings that features read.
#[derive(Clone, Debug)]
pub struct FeatureConfig {
    /// Devices shown in estimates.
    pub devices: Vec<DeviceProfile>,
    /// Whether the client accepts snippets in completion items.
    pub snippets: bool,
}

fn markdown(value: String) -> HoverContents {
    HoverContents::Markup(MarkupContent {
        kind: MarkupKind::Markdown,
        value,
    })
}

/// The Markdown documentation of a builtin: signature, summary, doc and example.
pub fn builtin_doc(b: &Builtin) -> String {
    format!(
        "```mlpl\n{}\n```\n{}\n\n{}\n\nExample:\n```mlpl\n{}\n```\n\n(LANGUAGE §{})",
        b.signature(),
        b.summary,
        b.doc,
        b.example,
        b.section
    )
}

/// A model's summary: its layers, parameter count and weight memory.
pub fn model_summary(name: &str, layer: &Layer) -> String {
    let p = mlpl_lang::nn::estimate::param_count(layer);
    let mut s = format!("**{name}**: model\n\n```\n");
    describe_tree(layer, 0, &mut s);
    s.push_str("```\n");
    s.push_str(&format!(
        "- parameters: {} ({} tensors)\n- weights: {} (float32); training with Adam needs about {} before activations\n",
        group_digits(p),
        layer.param_specs().len(),
        feasibility::bytes(p * 4.0),
        feasibility::bytes(p * 16.0)
    ));
    s
}

fn describe_tree(l: &Layer, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    match l {
        Layer::Chain(c) => {
            out.push_str(&format!("{pad}chain\n"));
            c.iter().for_each(|x| describe_tree(x, depth + 1, out));
        }
        Layer::Residual(inner) => {
            out.push_str(&format!("{pad}residual\n"));
            describe_tree(inner, depth + 1, out);
        }
        _ => {
            let n: f64 = l
                .own_params()
                .iter()
                .map(|p| p.shape.iter().map(|&d| d as f64).product::<f64>())
                .sum();
            if n > 0.0 {
                out.push_str(&format!(
                    "{pad}{}  — {} params\n",
                    l.describe(),
                    group_digits(n)
                ));
            } else {
                out.push_str(&format!("{pad}{}\n", l.describe()));
            }
        }
    }
}

/// The estimate of an optimizer call (for its `train` block when `train` is given).
/// The model, the batch its loss implies and the frozen parameters are the
/// checker's (`check::query`), the loop as `mlpl estimate` sees it
/// (`train_loops::loops`).
pub fn optimizer_estimate(
    a: &Analysis,
    o: &OptimizerCall,
    train: Option<&TrainBlock>,
    devices: &[DeviceProfile],
) -> Option<(TrainEstimate, String)> {
    let lp = mlpl_lang::train_loops::loops::of_optimizer(&a.program, o, train)?;
    let (b, s) = (lp.step.batch, lp.step.seq);
    let note = match &lp.batch {
        BatchInfo::Known { shape } => {
            format!("B = {b}, S = {s}, inferred by the checker from the loss's input `{shape}`")
        }
        BatchInfo::Unknown { shape } => format!(
            "**unknown**: the loss's input is `{shape}`, whose size is only known at run time; the figures are for B = {b}, S = {s}, a lower bound"
        ),
        BatchInfo::NoApply => {
            "**unknown**: no `apply(model, x)` found in the loss; the figures are for one row, a lower bound".into()
        }
    };
    Some((feasibility::estimate(&lp, devices), note))
}

/// The estimate of a `train` block (from its first optimizer call).
pub fn train_estimate(
    a: &Analysis,
    t: &TrainBlock,
    devices: &[DeviceProfile],
) -> Option<(TrainEstimate, String)> {
    let o = &a.facts.optimizers[t.optimizer?];
    optimizer_estimate(a, o, Some(t), devices)
}

/// Hover at byte `offset`.
pub fn hover(a: &Analysis, offset: usize, cfg: &FeatureConfig) -> Option<Hover> {
    hover_measured(a, offset, cfg, None)
}

/// [`hover`], with what the runner measured of the document's `train` loops:
/// a loop's hover then begins with its measurement.
pub fn hover_measured(
    a: &Analysis,
    offset: usize,
    cfg: &FeatureConfig,
    measured: Option<&DocMeasurements>,
) -> Option<Hover> {
    let text = &a.text;
    let mut parts: Vec<String> = Vec::new();
    let mut range: Option<Span> = None;

    // `train` blocks: on the keyword or the step count.
    if let Some(t) = a.facts.trains.iter().find(|t| {
        let header_end = text[t.span.start..t.span.end]
            .find('{')
            .map_or(t.span.end, |i| t.span.start + i);
        t.span.start <= offset && offset <= header_end
    }) {
        match train_estimate(a, t, &cfg.devices) {
            Some((e, note)) => {
                let mut s = measured
                    .and_then(|m| m.of(a, t))
                    .map_or(String::new(), |m| m.markdown(&e));
                s.push_str(&e.markdown(&format!("`train {}`", t.steps.map_or("N".to_string(), |n| group_digits(n as f64))), &note));
                parts.push(s);
            }
            None => parts.push("**train** block: no estimate (the optimizer's `params` is not a model whose layer sizes are known statically)".into()),
        }
        range = Some(t.keyword);
    }
    // Builtin names.
    if parts.is_empty() {
        if let Some((name, name_span, call_span)) = a.call_name_at(offset) {
            if let Some(b) = builtins::lookup(&name) {
                let mut s = builtin_doc(b);
                if let Some((span, v)) = a.value_at(name_span.start) {
                    if span == call_span {
                        s = format!("result: `{}`\n\n---\n{s}", describe(&v));
                    }
                }
                if let Some(o) = a.facts.optimizers.iter().find(|o| o.call_span == call_span) {
                    let train =
                        a.facts.trains.iter().find(|t| {
                            t.span.start <= call_span.start && call_span.end <= t.span.end
                        });
                    if let Some((e, note)) = optimizer_estimate(a, o, train, &cfg.devices) {
                        s.push_str("\n\n---\n");
                        s.push_str(&e.markdown(&format!("this `{}` step", o.name), &note));
                    }
                }
                parts.push(s);
            } else if let Some(doc) = user_fn_hover(a, &name, name_span, call_span) {
                parts.push(doc);
            } else {
                parts.push(format!(
                    "`{name}` is neither a builtin nor a function defined with `fn`"
                ));
            }
            range = Some(name_span);
        }
    }
    // A function definition's name.
    if parts.is_empty() {
        if let Some(f) = mlpl_syntax::walk::fn_at(&a.program, offset) {
            if let Some(doc) = user_fn_hover(a, &f.name.name, f.name.span, f.name.span) {
                parts.push(doc);
                range = Some(f.name.span);
            }
        }
    }
    // Variables and axis names.
    if parts.is_empty() {
        if let Some(occ) = a.occurrence_at(offset) {
            match occ.kind {
                OccKind::VarDef | OccKind::VarUse => {
                    let v = variable_value(a, occ);
                    let mut s = match &v {
                        Some(AbsValue::Model(Some(m))) => model_summary(&occ.name, &m.0),
                        Some(v) if !matches!(v, AbsValue::Unknown) => {
                            let mut s = format!("```mlpl\n{}: {}\n```", occ.name, describe(v));
                            if let Some(c) = v.as_array().and_then(|x| x.constant.as_ref()) {
                                if c.len() <= 16 && !c.is_empty() {
                                    let vals: Vec<String> = c
                                        .iter()
                                        .map(|x| mlpl_lang::display::format_f64(*x))
                                        .collect();
                                    s.push_str(&format!("\nvalue: `{}`", vals.join(" ")));
                                }
                            }
                            if let Some(origin) = v
                                .as_array()
                                .filter(|x| x.has_named_axis())
                                .and_then(|x| x.origin)
                            {
                                let p = a.lines.position(text, origin.start);
                                s.push_str(&format!("\n\naxis names from line {}", p.line + 1));
                            }
                            s
                        }
                        _ => format!(
                            "```mlpl\n{}: unknown\n```\n(its shape is only known at run time)",
                            occ.name
                        ),
                    };
                    if occ.scope.is_none() && a.params.contains(&occ.name) {
                        s.push_str("\n\ntracked parameter (`param[…]`)");
                    }
                    parts.push(s);
                }
                OccKind::ParamDef => {
                    if let Some(s) = param_hover(a, occ) {
                        parts.push(s);
                    }
                }
                // Function names are answered above (calls and definitions).
                OccKind::FnDef | OccKind::FnUse => {}
                OccKind::DimDef | OccKind::DimUse => parts.push(format!(
                    "```mlpl\n{}\n```\ndimension name of the signature: each call binds it \
                     (the size and the axis name of its first use) and checks it wherever \
                     else it appears",
                    occ.name
                )),
                OccKind::AxisDef | OccKind::AxisUse => {
                    let sizes: Vec<String> = a
                        .facts
                        .assignments
                        .iter()
                        .filter_map(|b| {
                            let arr = b.value.as_array()?;
                            let i = arr
                                .names
                                .iter()
                                .position(|n| n.named() == Some(occ.name.as_str()))?;
                            let d = arr.dims.as_ref()?.get(i)?;
                            Some(format!("`{}` axis {i} = {}", b.name, d.text()))
                        })
                        .take(6)
                        .collect();
                    let mut s = format!("axis name `{}`", occ.name);
                    if !sizes.is_empty() {
                        s.push_str(&format!("\n\n{}", sizes.join("  \n")));
                    }
                    parts.push(s);
                }
            }
            range = Some(occ.span);
        }
    }
    // Any other expression with a known value.
    if parts.is_empty() {
        if let Some((span, v)) = a.value_at(offset) {
            if let AbsValue::Model(Some(m)) = &v {
                parts.push(model_summary("model", &m.0));
            } else {
                let src = &text[span.start..span.end];
                let shown = if src.chars().count() > 40 {
                    "expression".to_string()
                } else {
                    format!("`{src}`")
                };
                parts.push(format!("{shown}: `{}`", describe(&v)));
            }
            range = Some(span);
        }
    }
    // Diagnostics under the cursor: their explanation (`mlpl explain`).
    for d in &a.diagnostics {
        if let Some(p) = &d.primary {
            if p.span.start <= offset && offset <= p.span.end.max(p.span.start + 1) {
                if let Some(info) = codes::lookup(d.code) {
                    parts.push(format!(
                        "**{}**: {}\n\n{}\n\n(`mlpl explain {}`)",
                        info.code, info.headline, info.explanation, info.code
                    ));
                }
            }
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(Hover {
        contents: markdown(parts.join("\n\n---\n\n")),
        range: range.map(|r| a.lines.range(text, r)),
    })
}

fn item(label: &str, kind: CompletionItemKind, detail: String, sort: &str) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: Some(detail),
        sort_text: Some(format!("{sort}{label}")),
        ..Default::default()
    }
}

/// Completion at byte `offset`.
pub fn completion(a: &Analysis, offset: usize, cfg: &FeatureConfig) -> Vec<CompletionItem> {
    let text = &a.text;
    let ctx = context(text, offset);
    if ctx.in_comment {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(start) = ctx.string_start {
        let Some(call) = &ctx.call else {
            return out;
        };
        let range = a.lines.range(text, Span::new(start, offset));
        let mut add = |label: &str, kind: CompletionItemKind, detail: String| {
            let mut it = item(label, kind, detail, "0");
            it.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(
                range,
                label.to_string(),
            )));
            it.filter_text = Some(label.to_string());
            out.push(it);
        };
        let param = builtins::lookup(&call.name).and_then(|b| b.param_at(call.arg_index));
        match (call.name.as_str(), call.arg_index) {
            ("device", 0) | ("to_device", 1) => {
                for (n, d) in DEVICE_NAMES {
                    add(n, CompletionItemKind::ENUM_MEMBER, d.to_string());
                }
            }
            ("load_preloaded", 0) => {
                for n in corpora::NAMES {
                    let len = corpora::preloaded(n).map_or(0, str::len);
                    add(
                        n,
                        CompletionItemKind::VALUE,
                        format!("preloaded corpus, {} bytes", group_digits(len as f64)),
                    );
                }
            }
            ("estimate_hypothetical", 0) => {
                for arch in hypothetical::ARCHITECTURES {
                    add(
                        arch.name,
                        CompletionItemKind::VALUE,
                        format!(
                            "{} parameters (V {}, D {}, L {})",
                            group_digits(arch.params()),
                            arch.vocab,
                            arch.d,
                            arch.layers
                        ),
                    );
                }
            }
            _ if matches!(
                param.map(|p| p.kind),
                Some(ParamKind::Axis | ParamKind::Names)
            ) =>
            {
                let first_arg_names = first_arg_names(a, call.open);
                let mut names = first_arg_names.clone();
                for n in a.axis_names() {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
                for n in names {
                    let detail = if first_arg_names.contains(&n) {
                        "axis of the first argument"
                    } else {
                        "axis name"
                    };
                    add(&n, CompletionItemKind::FIELD, detail.into());
                }
            }
            _ => {}
        }
        return out;
    }
    let word = Span::new(ctx.word_start, offset);
    let prefix = &text[word.start..word.end];
    let range = a.lines.range(text, word);
    if ctx.in_annotation {
        for n in a.axis_names() {
            let mut it = item(&n, CompletionItemKind::FIELD, "axis name".into(), "0");
            it.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(range, n.clone())));
            out.push(it);
        }
        return out;
    }
    // Variables in scope, with their shapes.
    for b in a.variables_before(ctx.word_start) {
        if !matches_prefix(&b.name, prefix) {
            continue;
        }
        let kind = match b.value {
            AbsValue::Model(_) => CompletionItemKind::CLASS,
            _ => CompletionItemKind::VARIABLE,
        };
        let mut it = item(&b.name, kind, describe(&b.value), "0");
        it.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(
            range,
            b.name.clone(),
        )));
        out.push(it);
    }
    for implicit in ["step", "last_losses"] {
        if !matches_prefix(implicit, prefix) {
            continue;
        }
        let visible = implicit != "step"
            || a.facts
                .trains
                .iter()
                .any(|t| t.span.start < offset && offset < t.span.end);
        let bound_after_train =
            implicit == "last_losses" && a.facts.trains.iter().any(|t| t.span.end <= offset);
        if (implicit == "step" && visible) || bound_after_train {
            let mut it = item(
                implicit,
                CompletionItemKind::VARIABLE,
                if implicit == "step" {
                    "the current step (scalar)".into()
                } else {
                    "losses of the last train block".into()
                },
                "0",
            );
            it.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(
                range,
                implicit.to_string(),
            )));
            out.push(it);
        }
    }
    // Builtins with snippets.
    let followed_by_paren = text[offset..].trim_start().starts_with('(');
    out.extend(user_fn_completions(
        a,
        prefix,
        range,
        followed_by_paren,
        cfg,
    ));
    for b in builtins::all() {
        if !matches_prefix(b.name, prefix) {
            continue;
        }
        let mut it = item(b.name, CompletionItemKind::FUNCTION, b.signature(), "1");
        // The documentation is sent by `completionItem/resolve` (see [`resolve`]).
        it.data = Some(serde_json::json!({ "builtin": b.name }));
        let insert = if followed_by_paren {
            b.name.to_string()
        } else if cfg.snippets {
            it.insert_text_format = Some(InsertTextFormat::SNIPPET);
            let args: Vec<String> = b
                .params
                .iter()
                .filter(|p| !p.optional || p.variadic)
                .enumerate()
                .map(|(i, p)| format!("${{{}:{}}}", i + 1, p.name))
                .collect();
            format!("{}({})$0", b.name, args.join(", "))
        } else {
            b.name.to_string()
        };
        it.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(range, insert)));
        it.filter_text = Some(b.name.to_string());
        out.push(it);
    }
    for (kw, snippet, doc) in KEYWORDS {
        if !matches_prefix(kw, prefix) {
            continue;
        }
        let mut it = item(kw, CompletionItemKind::KEYWORD, doc.to_string(), "2");
        let insert = if cfg.snippets {
            it.insert_text_format = Some(InsertTextFormat::SNIPPET);
            snippet.to_string()
        } else {
            kw.to_string()
        };
        it.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(range, insert)));
        out.push(it);
    }
    out
}

/// Hover text for the user function `name`: its signature, and the result of
/// this call when the checker knows it (`call_span` is the whole call).
fn user_fn_hover(a: &Analysis, name: &str, name_span: Span, call_span: Span) -> Option<String> {
    let fns = mlpl_lang::check::functions_of(&a.program);
    let f = fns.get(name)?;
    let mut s = format!("```mlpl\n{}\n```\nuser-defined function", f.signature());
    if call_span != name_span {
        if let Some(inst) = instantiation(a, f, name_span) {
            s = format!("{inst}\n\n---\n{s}");
        }
        if let Some((span, v)) = a.value_at(name_span.start) {
            if span == call_span {
                s = format!("result: `{}`\n\n---\n{s}", describe(&v));
            }
        }
    }
    Some(s)
}

/// The dimension names of `f`'s signature as the call whose name is at
/// `name_span` binds them (`n = 4, d = 3 (feat)`), from the arguments' values
/// as the checker knows them; `None` when the signature names no dimension or
/// the arguments do not match it.
fn instantiation(a: &Analysis, f: &mlpl_syntax::FnDef, name_span: Span) -> Option<String> {
    use mlpl_lang::errors::signature::{AxName, Size, Unifier};
    let mut args = None;
    for st in &a.program.stmts {
        mlpl_syntax::walk::each_stmt_expr(st, &mut |e| {
            if let mlpl_syntax::ExprKind::Call { name, args: xs } = &e.kind {
                if name.span == name_span {
                    args = Some(xs.clone());
                }
            }
        });
    }
    let args = args?;
    if args.len() != f.params.len() {
        return None;
    }
    let shapes: Vec<_> = args
        .iter()
        .map(|x| match a.value_at(x.span.start) {
            Some((span, v)) if span == x.span => mlpl_lang::check::functions::abs_arg_shape(&v),
            _ => mlpl_lang::errors::signature::ArgShape::Unknown,
        })
        .collect();
    let mut u = Unifier::default();
    u.params(f, &shapes).ok()?;
    // In the order the signature names them.
    let mut order: Vec<&str> = Vec::new();
    for p in &f.params {
        for d in p.shape.iter().flat_map(|s| &s.dims) {
            for n in d.names() {
                if !order.contains(&n) {
                    order.push(n);
                }
            }
        }
    }
    let parts: Vec<String> = order
        .iter()
        .filter_map(|n| {
            let b = u.binds.get(*n)?;
            let size = match &b.size {
                Size::Known(k) => k.to_string(),
                Size::Sym(s) => s.clone(),
                Size::Unknown => "?".to_string(),
            };
            Some(match &b.name {
                AxName::Named(x) => format!("`{n}` = {size} (axis `{x}`)"),
                _ => format!("`{n}` = {size}"),
            })
        })
        .collect();
    (!parts.is_empty()).then(|| format!("this call: {}", parts.join(", ")))
}

/// Hover text for a function's parameter where it is declared: its declared
/// shape and the function it belongs to.
fn param_hover(a: &Analysis, occ: &crate::analysis::Occurrence) -> Option<String> {
    let f = a.program.stmts.iter().find_map(|s| match &s.kind {
        mlpl_syntax::StmtKind::Fn(f) if Some(s.span.start) == occ.scope => Some(f),
        _ => None,
    })?;
    let p = f.params.iter().find(|p| p.name.span == occ.span)?;
    let shape = p
        .shape
        .as_ref()
        .map_or_else(|| "any value (no shape declared)".to_string(), |s| s.text());
    Some(format!(
        "```mlpl\n{}: {shape}\n```\nparameter of `{}`; a dimension name binds at each call and must agree everywhere else it appears",
        p.name.name,
        f.signature()
    ))
}

/// Completion items for the document's user functions matching `prefix`.
fn user_fn_completions(
    a: &Analysis,
    prefix: &str,
    range: lsp_types::Range,
    followed_by_paren: bool,
    cfg: &FeatureConfig,
) -> Vec<CompletionItem> {
    let mut fns: Vec<_> = mlpl_lang::check::functions_of(&a.program)
        .into_values()
        .collect();
    fns.sort_by(|x, y| x.name.name.cmp(&y.name.name));
    let mut out = Vec::new();
    for f in fns {
        let name = f.name.name.as_str();
        if !matches_prefix(name, prefix) {
            continue;
        }
        let mut it = item(name, CompletionItemKind::FUNCTION, f.signature(), "0");
        let insert = if followed_by_paren {
            name.to_string()
        } else if cfg.snippets {
            it.insert_text_format = Some(InsertTextFormat::SNIPPET);
            let args: Vec<String> = f
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| format!("${{{}:{}}}", i + 1, p.name.name))
                .collect();
            format!("{name}({})$0", args.join(", "))
        } else {
            name.to_string()
        };
        it.text_edit = Some(CompletionTextEdit::Edit(TextEdit::new(range, insert)));
        it.filter_text = Some(name.to_string());
        out.push(it);
    }
    out
}

/// Whether `label` matches what is typed: the typed characters appear in order
/// (case-insensitive), the first one at the start of the label. The list sent is
/// marked incomplete, so the client asks again as the user types.
pub fn matches_prefix(label: &str, typed: &str) -> bool {
    let mut chars = typed.chars().map(|c| c.to_ascii_lowercase());
    let Some(first) = chars.next() else {
        return true;
    };
    let mut rest = label.chars().map(|c| c.to_ascii_lowercase());
    if rest.next() != Some(first) {
        return false;
    }
    chars.all(|c| rest.by_ref().any(|l| l == c))
}

/// Fills in the documentation of a completion item (`completionItem/resolve`).
pub fn resolve(mut item: CompletionItem) -> CompletionItem {
    let name = item
        .data
        .as_ref()
        .and_then(|d| d.get("builtin"))
        .and_then(|n| n.as_str())
        .map(String::from);
    if let Some(b) = name.as_deref().and_then(builtins::lookup) {
        item.documentation = Some(Documentation::MarkupContent(MarkupContent {
            kind: MarkupKind::Markdown,
            value: format!("{}\n\n{}\n\n```mlpl\n{}\n```", b.summary, b.doc, b.example),
        }));
    }
    item
}

/// Axis names of the first argument of the call opened at `open`, as the checker
/// knows them.
fn first_arg_names(a: &Analysis, open: usize) -> Vec<String> {
    let rest = &a.text[(open + 1).min(a.text.len())..];
    let start = open + 1 + (rest.len() - rest.trim_start().len());
    match a.value_at(start) {
        Some((span, AbsValue::Array(x))) if span.start == start => x
            .names
            .iter()
            .filter_map(|n| n.named().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// What the checker knows about a variable where it is written: the value bound
/// by its assignment, or the value read at a use (on any iteration inside a loop).
pub fn variable_value(a: &Analysis, occ: &crate::analysis::Occurrence) -> Option<AbsValue> {
    match occ.kind {
        OccKind::VarDef => a.assignment_at(occ.span).map(|b| b.value.clone()),
        _ => match a.value_at(occ.span.start) {
            Some((span, v)) if span == occ.span => Some(v),
            _ => None,
        },
    }
    .or_else(|| {
        let d = a.definition(occ)?;
        a.assignment_at(d.span).map(|b| b.value.clone())
    })
}

/// Signature help at byte `offset`: for a builtin, from its registry entry;
/// for a user function, from its definition.
pub fn signature_help(a: &Analysis, offset: usize) -> Option<SignatureHelp> {
    let ctx = context(&a.text, offset);
    let call = ctx.call?;
    let Some(b) = builtins::lookup(&call.name) else {
        return user_fn_signature_help(a, &call.name, call.arg_index);
    };
    let label = b.signature();
    let mut params = Vec::new();
    let mut search = b.name.len() + 1;
    for p in b.params {
        if let Some(i) = label[search..].find(p.name) {
            let start = search + i;
            let end = start + p.name.len();
            let u16 = |byte: usize| label[..byte].encode_utf16().count() as u32;
            params.push(ParameterInformation {
                label: ParameterLabel::LabelOffsets([u16(start), u16(end)]),
                documentation: Some(Documentation::String(format!(
                    "{}{}",
                    p.kind.describe(),
                    if p.optional { " (optional)" } else { "" }
                ))),
            });
            search = end;
        }
    }
    let active = if b.is_variadic() {
        call.arg_index.min(b.params.len().saturating_sub(1))
    } else {
        call.arg_index
    } as u32;
    Some(SignatureHelp {
        signatures: vec![SignatureInformation {
            label,
            documentation: Some(Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: format!("{}\n\n{}", b.summary, b.doc),
            })),
            parameters: Some(params),
            active_parameter: Some(active),
        }],
        active_signature: Some(0),
        active_parameter: Some(active),
    })
}

/// Signature help for a call of the user function `name`, the argument at
/// `arg_index` being typed: the signature as written, each parameter's label
/// its part of it (`x : [n, d]`).
fn user_fn_signature_help(a: &Analysis, name: &str, arg_index: usize) -> Option<SignatureHelp> {
    let fns = mlpl_lang::check::functions_of(&a.program);
    let f = fns.get(name)?;
    let label = f.signature();
    let u16 = |byte: usize| label[..byte].encode_utf16().count() as u32;
    let mut search = label.find('(').map_or(0, |i| i + 1);
    let mut params = Vec::new();
    for p in &f.params {
        let text = match &p.shape {
            Some(s) => format!("{} : {}", p.name.name, s.text()),
            None => p.name.name.clone(),
        };
        let Some(i) = label[search..].find(&text) else {
            break;
        };
        let (start, end) = (search + i, search + i + text.len());
        params.push(ParameterInformation {
            label: ParameterLabel::LabelOffsets([u16(start), u16(end)]),
            documentation: Some(Documentation::String(match &p.shape {
                Some(s) => format!("an array of shape {}", s.text()),
                None => "any value".to_string(),
            })),
        });
        search = end;
    }
    let active = arg_index.min(f.params.len().saturating_sub(1)) as u32;
    let ret = f
        .ret
        .as_ref()
        .map_or_else(|| "its last statement's value".to_string(), |r| r.text());
    Some(SignatureHelp {
        signatures: vec![SignatureInformation {
            label,
            documentation: Some(Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: format!(
                    "user-defined function; returns {ret}. Dimension names bind at the call and must agree everywhere else they appear."
                ),
            })),
            parameters: Some(params),
            active_parameter: Some(active),
        }],
        active_signature: Some(0),
        active_parameter: Some(active),
    })
}
