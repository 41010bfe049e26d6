//! Diagnostics in protocol form, code actions for the fixes the checker suggests,
//! inlay hints with inferred shapes, and code lenses (cells and `train` estimates).

use mlpl_diag::code;
use std::collections::HashMap;

use lsp_types::{
    CodeAction, CodeActionKind, CodeLens, Command, Diagnostic as LspDiagnostic,
    DiagnosticRelatedInformation, DiagnosticSeverity, DiagnosticTag, InlayHint, InlayHintKind,
    InlayHintLabel, Location, NumberOrString, Position, Range, TextEdit, Url, WorkspaceEdit,
};
use mlpl_diag::{Diagnostic, Severity, Span};
use serde_json::json;

use crate::analysis::Analysis;
use crate::feasibility::DeviceProfile;
use crate::features::train_estimate;
use crate::measured::DocMeasurements;
use mlpl_lang::check::AbsValue;

use crate::values::describe;

/// The command of a `train` block's lens: the client shows the block's full
/// estimate (the hover on its `train` keyword). Arguments: one object
/// `{uri, range}`, the block's document and range.
pub const SHOW_ESTIMATE: &str = "mlpl.showEstimate";

/// Codes whose diagnostics mark code that has no effect (shown faded): an
/// optimizer step whose gradients are all zero (W0103), a parameter listed twice
/// (W0302), a loop count that makes the body never run (W0203). No diagnostic
/// code marks a deprecated form, so none carries the `deprecated` tag.
const UNNECESSARY: &[&str] = &[code::W0103, code::W0302, code::W0203];

/// The protocol form of one diagnostic: code, message with its label, notes and
/// help, related information for the secondary spans (where operands got their
/// axis names), and a link to the code's documentation when `docs_url` is set.
pub fn to_lsp(a: &Analysis, uri: &Url, d: &Diagnostic, docs_url: Option<&str>) -> LspDiagnostic {
    let range = d
        .primary
        .as_ref()
        .map_or(Range::default(), |l| a.lines.range(&a.text, l.span));
    let mut message = d.message.clone();
    if let Some(l) = &d.primary {
        if !l.message.is_empty() {
            message.push_str(&format!("\n{}", l.message));
        }
    }
    for n in &d.notes {
        message.push_str(&format!("\nnote: {n}"));
    }
    if let Some(h) = &d.help {
        message.push_str(&format!("\nhelp: {h}"));
    }
    let related: Vec<DiagnosticRelatedInformation> = d
        .secondary
        .iter()
        .map(|l| DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), a.lines.range(&a.text, l.span)),
            message: if l.message.is_empty() {
                "related".into()
            } else {
                l.message.clone()
            },
        })
        .collect();
    let code_description = docs_url.and_then(|base| {
        let href = Url::parse(&format!("{base}#{}", d.code.to_ascii_lowercase())).ok()?;
        Some(lsp_types::CodeDescription { href })
    });
    LspDiagnostic {
        range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.to_string())),
        code_description,
        source: Some("mlpl".into()),
        message,
        related_information: if related.is_empty() {
            None
        } else {
            Some(related)
        },
        tags: UNNECESSARY
            .contains(&d.code)
            .then(|| vec![DiagnosticTag::UNNECESSARY]),
        data: mlpl_diag::codes::explain(d.code).map(|e| json!({ "explain": e })),
    }
}

/// All diagnostics of an analysis in protocol form.
pub fn diagnostics(a: &Analysis, uri: &Url, docs_url: Option<&str>) -> Vec<LspDiagnostic> {
    a.diagnostics
        .iter()
        .map(|d| to_lsp(a, uri, d, docs_url))
        .collect()
}

/// The first text in backquotes after `marker` in `s`.
fn quoted_after<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &s[s.find(marker)? + marker.len()..];
    let start = rest.find('`')? + 1;
    let end = start + rest[start..].find('`')?;
    Some(&rest[start..end])
}

/// The fixes the checker suggests for diagnostics overlapping `span`: each is a
/// title and the edits to apply.
pub fn fixes(a: &Analysis, d: &Diagnostic) -> Vec<(String, Vec<(Span, String)>)> {
    let Some(primary) = &d.primary else {
        return Vec::new();
    };
    let p = primary.span;
    let help = d.help.as_deref().unwrap_or("");
    let src = |s: Span| &a.text[s.start..s.end];
    let mut out = Vec::new();
    match d.code {
        code::E0101 | code::E0102 | code::E0207 => {
            let markers: &[&str] = match d.code {
                code::E0101 => &["a variable with a similar name exists:"],
                code::E0102 => &[
                    "a builtin with a similar name exists:",
                    "a function with a similar name is defined:",
                ],
                _ => &["an axis with a similar name exists:"],
            };
            if let Some(name) = markers.iter().find_map(|m| quoted_after(help, m)) {
                let replacement = if d.code == code::E0207 {
                    format!("\"{name}\"")
                } else {
                    name.to_string()
                };
                out.push((format!("Replace with `{name}`"), vec![(p, replacement)]));
            }
        }
        code::W0001 => {
            if let Some(fixed) = quoted_after(help, "write").filter(|f| f.contains(" * ")) {
                out.push((format!("Write `{fixed}`"), vec![(p, fixed.to_string())]));
            } else if let Some(first) = d.secondary.iter().find(|l| l.message == "first statement")
            {
                out.push((
                    "Separate the statements with `;`".into(),
                    vec![(Span::new(first.span.end, first.span.end), ";".into())],
                ));
            }
        }
        code::W0002 => {
            out.push((
                "Subtract: add a space after `-`".into(),
                vec![(p, "- ".into())],
            ));
            let before = p
                .start
                .checked_sub(1)
                .filter(|&i| a.text.as_bytes()[i].is_ascii_whitespace());
            if let Some(b) = before {
                let sep = if help.contains("; -") { "; -" } else { ", -" };
                let what = if sep == "; -" {
                    "Two statements"
                } else {
                    "Two elements"
                };
                out.push((
                    format!("{what}: write `{}`", sep.trim_end_matches('-').trim()),
                    vec![(Span::new(b, p.end), sep.into())],
                ));
            }
        }
        code::E0203 if help.contains("transposed") => {
            out.push((
                "Transpose the right operand".into(),
                vec![(p, format!("transpose({})", src(p)))],
            ));
        }
        code::E0202 => {
            if let Some(example) = quoted_after(help, "for example") {
                if let Some(list_start) = example.find('[') {
                    let names = example[list_start..].trim_end_matches(')');
                    out.push((
                        format!("Relabel the right operand to {names}"),
                        vec![(p, format!("relabel({}, {names})", src(p)))],
                    ));
                }
            }
        }
        _ => {}
    }
    out
}

/// Quick fixes for the diagnostics overlapping `range`.
pub fn code_actions(
    a: &Analysis,
    uri: &Url,
    range: Span,
    docs_url: Option<&str>,
) -> Vec<CodeAction> {
    let mut out = Vec::new();
    for d in &a.diagnostics {
        let Some(p) = &d.primary else { continue };
        if p.span.end < range.start || p.span.start > range.end {
            continue;
        }
        for (title, edits) in fixes(a, d) {
            let edits: Vec<TextEdit> = edits
                .into_iter()
                .map(|(s, t)| TextEdit::new(a.lines.range(&a.text, s), t))
                .collect();
            let mut changes = HashMap::new();
            changes.insert(uri.clone(), edits);
            out.push(CodeAction {
                title,
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![to_lsp(a, uri, d, docs_url)]),
                edit: Some(WorkspaceEdit::new(changes)),
                is_preferred: Some(true),
                ..Default::default()
            });
        }
    }
    out
}

/// Inlay hints with the inferred shape after each assignment in `range`.
pub fn inlay_hints(a: &Analysis, range: Span) -> Vec<InlayHint> {
    let mut out = Vec::new();
    for b in &a.facts.assignments {
        if b.name_span.start < range.start || b.name_span.start > range.end {
            continue;
        }
        let label = match &b.value {
            AbsValue::Array(x) if x.rank().is_some_and(|r| r > 0) => x.shape_text(),
            AbsValue::Model(Some(_)) => describe(&b.value),
            _ => continue,
        };
        let at = if b.annotated {
            // After the annotation's `]`.
            let rest = &a.text[b.name_span.end..b.stmt_span.end];
            match rest.find(']') {
                Some(i) => b.name_span.end + i + 1,
                None => continue,
            }
        } else {
            b.name_span.end
        };
        out.push(InlayHint {
            position: a.lines.position(&a.text, at),
            label: InlayHintLabel::String(if b.annotated {
                format!("→ {label}")
            } else {
                format!(": {label}")
            }),
            kind: Some(InlayHintKind::TYPE),
            text_edits: None,
            tooltip: None,
            padding_left: Some(b.annotated),
            padding_right: None,
            data: None,
        });
    }
    out
}

/// The arguments of the cell commands: `{uri, range, cellIndex}`.
pub fn cell_args(a: &Analysis, uri: &Url, index: usize) -> serde_json::Value {
    let c = &a.cells[index];
    json!({
        "uri": uri.as_str(),
        "range": a.lines.range(&a.text, c.span),
        "cellIndex": c.index,
    })
}

/// Code lenses: `Run Cell`, `Run Above`, `Run All` on each cell's first line, and
/// on each `train` block its estimate on the block's device.
pub fn code_lenses(a: &Analysis, uri: &Url, devices: &[DeviceProfile]) -> Vec<CodeLens> {
    code_lenses_measured(a, uri, devices, None)
}

/// [`code_lenses`], with what the runner measured of the document's `train`
/// loops: a measured loop's lens begins with its measurement.
pub fn code_lenses_measured(
    a: &Analysis,
    uri: &Url,
    devices: &[DeviceProfile],
    measured: Option<&DocMeasurements>,
) -> Vec<CodeLens> {
    let mut out = Vec::new();
    for (i, c) in a.cells.iter().enumerate() {
        // The lens sits on the cell's first line that has text.
        let mut start = c.span.start;
        while start < c.span.end && a.text.as_bytes()[start].is_ascii_whitespace() {
            start += 1;
        }
        let line = a.lines.line_of(start) as u32;
        let at = Range::new(Position::new(line, 0), Position::new(line, 0));
        let args = cell_args(a, uri, i);
        let mut add = |title: &str, command: &str| {
            out.push(CodeLens {
                range: at,
                command: Some(Command::new(
                    title.into(),
                    command.into(),
                    Some(vec![args.clone()]),
                )),
                data: None,
            });
        };
        add("▶ Run Cell", "mlpl.runCell");
        if i > 0 {
            add("Run Above", "mlpl.runAbove");
        }
        add("Run All", "mlpl.runAll");
    }
    for t in &a.facts.trains {
        let title = match train_estimate(a, t, devices) {
            Some((e, _)) => e.lens_text_measured(measured.and_then(|m| m.of(a, t))),
            None => "estimate unavailable (params is not a model known statically)".into(),
        };
        let r = a.lines.range(&a.text, t.keyword);
        let args = json!({ "uri": uri.as_str(), "range": a.lines.range(&a.text, t.span) });
        out.push(CodeLens {
            range: r,
            command: Some(Command::new(title, SHOW_ESTIMATE.into(), Some(vec![args]))),
            data: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(a: &Analysis, edits: &[(Span, String)]) -> String {
        let mut t = a.text.clone();
        let mut e = edits.to_vec();
        e.sort_by_key(|(s, _)| std::cmp::Reverse(s.start));
        for (s, r) in e {
            t.replace_range(s.start..s.end, &r);
        }
        t
    }

    #[test]
    fn suggested_fixes_apply() {
        let a = Analysis::new("x = matmull([[1]], [[2]])");
        let d = a
            .diagnostics
            .iter()
            .find(|d| d.code == code::E0102)
            .unwrap();
        let f = fixes(&a, d);
        assert_eq!(apply(&a, &f[0].1), "x = matmul([[1]], [[2]])");
        // A misspelt user function.
        let a = Analysis::new("fn project(x) { x }\ny = porject(1)");
        let d = a
            .diagnostics
            .iter()
            .find(|d| d.code == code::E0102)
            .unwrap();
        let f = fixes(&a, d);
        assert_eq!(f[0].0, "Replace with `project`");
        assert_eq!(apply(&a, &f[0].1), "fn project(x) { x }\ny = project(1)");

        let a = Analysis::new("a = zeros([2, 3])\nb = zeros([2, 3])\nc = matmul(a, b)");
        let d = a
            .diagnostics
            .iter()
            .find(|d| d.code == code::E0203)
            .unwrap();
        assert_eq!(
            apply(&a, &fixes(&a, d)[0].1),
            "a = zeros([2, 3])\nb = zeros([2, 3])\nc = matmul(a, transpose(b))"
        );

        let a = Analysis::new(
            "x : [batch, feat] = zeros([2, 3])\nh : [hidden] = zeros([3])\ny = x + h",
        );
        let d = a
            .diagnostics
            .iter()
            .find(|d| d.code == code::E0202)
            .unwrap();
        assert!(apply(&a, &fixes(&a, d)[0].1).ends_with("y = x + relabel(h, [\"feat\"])"));

        let a = Analysis::new("x = 1 y = 2");
        let d = a
            .diagnostics
            .iter()
            .find(|d| d.code == code::W0001)
            .unwrap();
        assert_eq!(apply(&a, &fixes(&a, d)[0].1), "x = 1; y = 2");
    }

    #[test]
    fn lenses_for_cells_and_train() {
        let src = "# %% A\nm = linear(2, 2, 0)\nX = zeros([8, 2])\n# %% B\ntrain 10 {\n  adam(sum(apply(m, X)), m, 0.1, 0.9, 0.999, 1e-8)\n}\n";
        let a = Analysis::new(src);
        let uri = Url::parse("file:///t.mlpl").unwrap();
        let devices = crate::feasibility::profiles(None, "", "", Some(1e10));
        let l = code_lenses(&a, &uri, &devices);
        let titles: Vec<&str> = l
            .iter()
            .map(|x| x.command.as_ref().unwrap().title.as_str())
            .collect();
        assert_eq!(
            &titles[..5],
            [
                "▶ Run Cell",
                "Run All",
                "▶ Run Cell",
                "Run Above",
                "Run All"
            ]
        );
        assert!(
            titles[5].starts_with("≈ ")
                && titles[5].ends_with("on CPU (not calibrated) · fits (25% margin)"),
            "{}",
            titles[5]
        );
        let args = &l[3].command.as_ref().unwrap().arguments.as_ref().unwrap()[0];
        assert_eq!(args["cellIndex"], 1);
        assert_eq!(args["range"]["start"]["line"], 3);
        let estimate = l[5].command.as_ref().unwrap();
        assert_eq!(estimate.command, SHOW_ESTIMATE);
        let args = &estimate.arguments.as_ref().unwrap()[0];
        assert_eq!(args["uri"], "file:///t.mlpl");
        assert_eq!(args["range"]["start"]["line"], 4);
        assert_eq!(args["range"]["end"]["line"], 6);
        let hints = inlay_hints(&a, Span::new(0, src.len()));
        assert_eq!(hints.len(), 2);
    }
}
