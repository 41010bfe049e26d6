//! MLPL in the browser (docs/playground.md): the checker and the interpreter of
//! `mlpl-lang`, the same code `mlpl check` and `mlpl run` use, behind an
//! interface of JSON strings.
//!
//! The functions here are plain Rust, tested natively; `abi` (compiled only for
//! `wasm32`) exports them to JavaScript through linear memory, with
//! `web/www/src/mlpl.js` as the glue on the other side.
//!
//! Every offset given to or returned by this interface counts UTF-16 code
//! units, as JavaScript strings (and CodeMirror) do.

use mlpl_diag::render::{render_with, to_json, RenderOptions};
use mlpl_diag::{Diagnostic, Label, SourceFile};
use mlpl_lang::check::{check_source, AbsValue};
use mlpl_lang::eval::{Interp, RunObserver, Workspace};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[cfg(target_arch = "wasm32")]
mod abi;

/// The most iterations one `train` loop may run in the browser, stated on the
/// page: a loop asking for more is stopped before its first step.
pub const TRAIN_LIMIT: usize = 5_000;

/// Byte offsets of one text to UTF-16 offsets.
struct Utf16<'a> {
    text: &'a str,
}

impl Utf16<'_> {
    fn at(&self, byte: usize) -> usize {
        let mut b = byte.min(self.text.len());
        while !self.text.is_char_boundary(b) {
            b -= 1;
        }
        self.text[..b].encode_utf16().count()
    }

    fn byte(&self, utf16: usize) -> usize {
        let mut units = 0;
        for (i, c) in self.text.char_indices() {
            if units >= utf16 {
                return i;
            }
            units += c.len_utf16();
        }
        self.text.len()
    }

    fn range(&self, label: &Label) -> (usize, usize) {
        (
            self.at(label.span.start),
            self.at(label.span.end.max(label.span.start)),
        )
    }
}

/// The diagnostics as `mlpl check --format json` writes them, each with `from`
/// and `to` (UTF-16 offsets of the primary span, null without one), its
/// related locations (`labels`) with theirs, and the rendered text.
fn diagnostics_json(diags: &[Diagnostic], src: &SourceFile) -> Json {
    let map = Utf16 { text: src.text() };
    let Json::Array(mut items) = to_json(diags, src) else {
        return json!([]);
    };
    for (item, d) in items.iter_mut().zip(diags) {
        let (from, to) = d.primary.as_ref().map_or((None, None), |p| {
            let (a, b) = map.range(p);
            (Some(a), Some(b))
        });
        item["from"] = json!(from);
        item["to"] = json!(to);
        if let Some(Json::Array(labels)) = item.get_mut("labels") {
            for (l, label) in labels.iter_mut().zip(&d.secondary) {
                let (a, b) = map.range(label);
                l["from"] = json!(a);
                l["to"] = json!(b);
            }
        }
        item["rendered"] = json!(render_with(d, src, &RenderOptions { color: false }));
    }
    Json::Array(items)
}

/// `mlpl check` on one text: `{"diagnostics": [...]}`.
pub fn check(source: &str) -> String {
    let src = SourceFile::new("playground.mlpl", source);
    let checked = check_source(src.text());
    json!({ "diagnostics": diagnostics_json(&checked.diagnostics, &src) }).to_string()
}

/// What the checker knows of the innermost expression at `offset` (UTF-16):
/// `{"from", "to", "text"}`, or `null`.
pub fn hover(source: &str, offset: usize) -> String {
    let map = Utf16 { text: source };
    let checked = check_source(source);
    let Some((span, value)) = mlpl_lang::check::query::value_at(&checked.program, map.byte(offset))
    else {
        return "null".to_string();
    };
    json!({
        "from": map.at(span.start),
        "to": map.at(span.end),
        "text": describe(&value),
    })
    .to_string()
}

/// One line for a value the checker knows (as the language server's hovers
/// show it: shapes exactly as `mlpl check` prints them).
fn describe(v: &AbsValue) -> String {
    match v {
        AbsValue::Unknown => "unknown".into(),
        AbsValue::Array(a) => match (a.rank(), a.scalar_value()) {
            (Some(0), Some(x)) => format!("scalar {}", mlpl_lang::display::format_f64(x)),
            (Some(0), None) => "scalar".into(),
            _ => a.shape_text(),
        },
        AbsValue::Str(Some(s)) if s.chars().count() <= 40 => format!("string {s:?}"),
        AbsValue::Str(_) => "string".into(),
        AbsValue::Model(Some(m)) => format!(
            "model, {} parameters",
            mlpl_lang::nn::estimate::param_count(&m.0)
        ),
        AbsValue::Model(None) => "model".into(),
        AbsValue::Tokenizer => "tokenizer".into(),
    }
}

/// Where a run reports its `train` steps (the browser build posts them to the
/// page as they happen).
pub type StepSink = fn(step: usize, total: usize, loss: f64, step_ms: f64);

/// What a run saw of its `train` loops.
#[derive(Default)]
struct Seen {
    losses: Vec<f64>,
    over_limit: Option<usize>,
}

struct Observer {
    seen: Arc<Mutex<Seen>>,
    cancel: Arc<AtomicBool>,
    sink: Option<StepSink>,
}

impl RunObserver for Observer {
    fn on_train_start(&mut self, total: usize, _depth: usize) {
        if total > TRAIN_LIMIT {
            self.seen.lock().unwrap().over_limit = Some(total);
            self.cancel.store(true, Ordering::SeqCst);
        }
    }

    fn on_step(&mut self, step: usize, total: usize, loss: f64, _lr: Option<f64>, step_ms: f64) {
        self.seen.lock().unwrap().losses.push(loss);
        if let Some(sink) = self.sink {
            sink(step, total, loss, step_ms);
        }
    }
}

/// An interpreter whose workspace lives across runs, as a notebook's cells
/// share theirs.
pub struct Session {
    it: Interp,
    seen: Arc<Mutex<Seen>>,
}

impl Default for Session {
    fn default() -> Self {
        Session::new(None)
    }
}

impl Session {
    /// A session on the CPU backend; `sink` is told about every `train` step.
    pub fn new(sink: Option<StepSink>) -> Session {
        let mut it = Interp::new(Workspace::new());
        let seen = Arc::new(Mutex::new(Seen::default()));
        it.set_observer(Box::new(Observer {
            seen: seen.clone(),
            cancel: it.cancel.clone(),
            sink,
        }));
        Session { it, seen }
    }

    /// Runs `source` (a cell or a whole file) as `mlpl run` does, in this
    /// session's workspace: `{"ok", "value", "svg", "warnings", "error",
    /// "losses"}`. `first_line` (0-based) is where the text starts in its file,
    /// so rendered messages name the file's lines.
    pub fn run(&mut self, source: &str, first_line: usize) -> String {
        let src = SourceFile::new("playground.mlpl", source).with_line_offset(first_line);
        *self.seen.lock().unwrap() = Seen::default();
        let parsed = mlpl_syntax::parse(src.text());
        let parse_errors: Vec<Diagnostic> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .cloned()
            .collect();
        if let Some(first) = parse_errors.first() {
            return json!({
                "ok": false,
                "value": null,
                "svg": false,
                "warnings": [],
                "error": diagnostics_json(std::slice::from_ref(first), &src)[0],
                "losses": [],
            })
            .to_string();
        }
        let result = self.it.run(&parsed.program);
        let warnings = self.it.take_warnings();
        let seen = std::mem::take(&mut *self.seen.lock().unwrap());
        let (value, svg, error) = match result {
            Ok(Some(v)) => (Some(v.display()), v.is_svg(), None),
            Ok(None) => (None, false, None),
            Err(d) => {
                let d = match seen.over_limit {
                    Some(n) => d
                        .note(format!(
                            "this loop asks for {n} iterations; the browser playground runs at most {TRAIN_LIMIT} per `train` loop"
                        ))
                        .help("run larger trainings with `mlpl run`"),
                    None => d,
                };
                (None, false, Some(d))
            }
        };
        let error = error.map_or(Json::Null, |d| diagnostics_json(&[d], &src)[0].clone());
        json!({
            "ok": error.is_null(),
            "value": value,
            "svg": svg,
            "warnings": diagnostics_json(&warnings, &src),
            "error": error,
            "losses": seen.losses,
        })
        .to_string()
    }
}

/// Runs a whole program in a fresh session (`mlpl run FILE`).
pub fn run(source: &str) -> String {
    Session::new(None).run(source, 0)
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
    fn a_session_keeps_its_workspace_and_reports_values_and_errors() {
        let mut s = Session::default();
        let first = parse(&s.run("a = 2\n", 0));
        assert_eq!(first["ok"], true, "{first}");
        let second = parse(&s.run("a * 21\n", 3));
        assert_eq!(second["value"], "42");
        let bad = parse(&s.run("nope + 1\n", 10));
        assert_eq!(bad["ok"], false);
        assert_eq!(bad["error"]["code"], "E0101");
        assert_eq!(bad["error"]["line"], 11);
    }

    #[test]
    fn a_train_loop_over_the_limit_is_stopped_with_the_reason() {
        let out = parse(&run(&format!(
            "w = 0\ntrain {} {{ w = w + 1 }}\n",
            TRAIN_LIMIT + 1
        )));
        assert_eq!(out["ok"], false, "{out}");
        let text = out["error"]["rendered"].as_str().unwrap();
        assert!(text.contains("at most 5000"), "{text}");
    }

    #[test]
    fn hover_gives_the_shape() {
        let src = "x = zeros([3, 4])\nx\n";
        let h = parse(&hover(src, src.len() - 2));
        assert_eq!(h["text"], "[3, 4]");
    }
}
