//! The editor's features for the page: diagnostics (`mlpl check`), and the
//! language server's hovers (shapes, feasibility estimates) and completion
//! (the registry's builtins with signatures and docs, keywords, the document's
//! names and functions), computed by `mlpl-lsp`'s own functions on the same
//! analysis, and answered in UTF-16 offsets.

use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, Documentation, HoverContents,
};
use lsp_types::{InsertTextFormat, MarkedString, Position};
use mlpl_diag::SourceFile;
use mlpl_lang::check::check_source;
use mlpl_lsp::analysis::Analysis;
use mlpl_lsp::feasibility::{self, DeviceProfile};
use mlpl_lsp::features::{self, FeatureConfig};
use serde_json::{json, Value as Json};

use crate::{diagnostics_json, Utf16};

/// The devices the estimates are shown for: the language server's defaults
/// with no calibration cache (the page has no files) and the CPU's memory
/// unknown.
fn devices() -> Vec<DeviceProfile> {
    feasibility::profiles(None, "a100-80gb", "m2", None)
}

fn config() -> FeatureConfig {
    FeatureConfig {
        devices: devices(),
        snippets: true,
    }
}

/// `mlpl check` on one text: `{"diagnostics": [...]}`.
pub fn check(source: &str) -> String {
    let src = SourceFile::new("playground.mlpl", source);
    let checked = check_source(src.text());
    json!({ "diagnostics": diagnostics_json(&checked.diagnostics, &src) }).to_string()
}

/// The byte offset of an LSP position of the analysed text.
fn byte_of(a: &Analysis, p: Position) -> usize {
    a.lines.offset(&a.text, p)
}

/// The language server's hover at `offset` (UTF-16): `{"from", "to",
/// "markdown"}` (the range it covers and its Markdown text, as the extension
/// shows it), or `null`.
pub fn hover(source: &str, offset: usize) -> String {
    let map = Utf16 { text: source };
    let a = Analysis::new(source);
    let Some(h) = features::hover(&a, map.byte(offset), &config()) else {
        return "null".to_string();
    };
    let markdown = match h.contents {
        HoverContents::Markup(m) => m.value,
        HoverContents::Scalar(MarkedString::String(s)) => s,
        HoverContents::Scalar(MarkedString::LanguageString(l)) => l.value,
        HoverContents::Array(parts) => parts
            .into_iter()
            .map(|p| match p {
                MarkedString::String(s) => s,
                MarkedString::LanguageString(l) => l.value,
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    let (from, to) = h.range.map_or((offset, offset), |r| {
        (map.at(byte_of(&a, r.start)), map.at(byte_of(&a, r.end)))
    });
    json!({ "from": from, "to": to, "markdown": markdown }).to_string()
}

/// CodeMirror's name for the kind of a completion (its icon).
fn kind_name(kind: Option<CompletionItemKind>) -> &'static str {
    match kind {
        Some(CompletionItemKind::FUNCTION) => "function",
        Some(CompletionItemKind::KEYWORD) => "keyword",
        Some(CompletionItemKind::CLASS) => "class",
        Some(CompletionItemKind::ENUM_MEMBER) => "enum",
        Some(CompletionItemKind::VALUE) => "constant",
        Some(CompletionItemKind::FIELD) => "property",
        _ => "variable",
    }
}

/// One completion as the page's editor takes it: `label`, `type`, `detail`,
/// `info` (Markdown documentation, builtins only), `apply` (the text to insert),
/// `snippet` (whether `apply` has `${1:field}` placeholders), `from`/`to`
/// (UTF-16: what it replaces) and `sort`.
fn item_json(a: &Analysis, map: &Utf16, offset: usize, item: CompletionItem) -> Json {
    let item = features::resolve(item);
    let (from, to, apply) = match &item.text_edit {
        Some(CompletionTextEdit::Edit(e)) => (
            byte_of(a, e.range.start),
            byte_of(a, e.range.end),
            e.new_text.clone(),
        ),
        Some(CompletionTextEdit::InsertAndReplace(e)) => (
            byte_of(a, e.replace.start),
            byte_of(a, e.replace.end),
            e.new_text.clone(),
        ),
        None => (
            offset,
            offset,
            item.insert_text
                .clone()
                .unwrap_or_else(|| item.label.clone()),
        ),
    };
    let info = match &item.documentation {
        Some(Documentation::MarkupContent(m)) => Some(m.value.clone()),
        Some(Documentation::String(s)) => Some(s.clone()),
        None => None,
    };
    json!({
        "label": item.label,
        "type": kind_name(item.kind),
        "detail": item.detail,
        "info": info,
        "apply": apply,
        "snippet": item.insert_text_format == Some(InsertTextFormat::SNIPPET),
        "from": map.at(from),
        "to": map.at(to),
        "sort": item.sort_text,
    })
}

/// The language server's completion at `offset` (UTF-16): `{"items": [...]}`
/// (see [`item_json`]), the list `textDocument/completion` answers.
pub fn complete(source: &str, offset: usize) -> String {
    let map = Utf16 { text: source };
    let a = Analysis::new(source);
    let at = map.byte(offset);
    let items: Vec<Json> = features::completion(&a, at, &config())
        .into_iter()
        .map(|i| item_json(&a, &map, at, i))
        .collect();
    json!({ "items": items }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Json {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn check_reports_both_named_shapes_with_utf16_ranges() {
        let src =
            "# é\nx : [batch, feat] = zeros([3, 4])\ny : [time, feat] = zeros([5, 4])\nx + y\n";
        let out = parse(&check(src));
        let d = &out["diagnostics"][0];
        assert_eq!(d["severity"], "error", "{out}");
        let from = d["from"].as_u64().unwrap() as usize;
        let to = d["to"].as_u64().unwrap() as usize;
        let units: Vec<u16> = src.encode_utf16().collect();
        assert_eq!(String::from_utf16(&units[from..to]).unwrap(), "y");
        let rendered = d["rendered"].as_str().unwrap();
        assert!(
            rendered.contains("[batch=3, feat=4]") && rendered.contains("[time=5, feat=4]"),
            "{rendered}"
        );
        assert!(!d["labels"].as_array().unwrap().is_empty(), "{d}");
    }

    #[test]
    fn hover_gives_the_named_shape_in_utf16_offsets() {
        let src = "# é€\nx : [batch, feat] = zeros([3, 4])\nx\n";
        let at = src.encode_utf16().count() - 2;
        let h = parse(&hover(src, at));
        assert!(
            h["markdown"]
                .as_str()
                .unwrap()
                .contains("x: [batch=3, feat=4]"),
            "{h}"
        );
        assert_eq!(h["from"], at);
        assert_eq!(h["to"], at + 1);
        assert_eq!(parse(&hover(src, 0)), Json::Null);
    }

    #[test]
    fn hover_on_a_train_loop_shows_the_language_servers_estimate() {
        let src = include_str!("../../examples/tiny_mlp.mlpl");
        let at = src.find("train").unwrap() + 2;
        let h = parse(&hover(src, at));
        let md = h["markdown"].as_str().unwrap();
        let a = Analysis::new(src);
        let want = match features::hover(&a, at, &config()).unwrap().contents {
            HoverContents::Markup(m) => m.value,
            other => panic!("{other:?}"),
        };
        assert_eq!(md, want);
        assert!(md.contains("CPU") && md.contains("train 300"), "{md}");
    }

    #[test]
    fn completion_offers_builtins_with_docs_keywords_and_the_documents_names() {
        let src = "weights : [feat] = zeros([3])\nfn double(x) { x * 2 }\nwe";
        let end = src.encode_utf16().count();
        let out = parse(&complete(src, end));
        let items = out["items"].as_array().unwrap();
        let var = items
            .iter()
            .find(|i| i["label"] == "weights")
            .expect("the variable");
        assert_eq!(var["detail"], "[feat=3]");
        assert_eq!(var["from"], end - 2);
        assert_eq!(var["to"], end);

        let src = "x = 1\nma";
        let out = parse(&complete(src, src.len()));
        let items = out["items"].as_array().unwrap();
        let matmul = items
            .iter()
            .find(|i| i["label"] == "matmul")
            .expect("matmul");
        assert_eq!(matmul["type"], "function");
        let b = mlpl_lang::builtins::lookup("matmul").unwrap();
        assert_eq!(matmul["detail"], b.signature());
        assert!(matmul["info"].as_str().unwrap().contains(b.summary));
        assert_eq!(matmul["snippet"], true);
        assert!(matmul["apply"].as_str().unwrap().starts_with("matmul(${1:"));

        let src = "fn double(x) { x * 2 }\nd";
        let out = parse(&complete(src, src.len()));
        let labels: Vec<&str> = out["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["label"].as_str().unwrap())
            .collect();
        assert!(labels.contains(&"double"), "{labels:?}");
        assert!(labels.contains(&"device"), "{labels:?}");
    }
}
