//! MLPL in the browser (docs/playground.md): the checker and the interpreter of
//! `mlpl-lang`, the same code `mlpl check` and `mlpl run` use, and the language
//! server's hovers and completion (`mlpl-lsp`), behind an interface of JSON
//! strings.
//!
//! [`editor`] answers the editor (diagnostics, hover, completion), [`session`]
//! runs cells and keeps what they recorded (values, `train` steps, experiment
//! runs). The functions are plain Rust, tested natively; `abi` (compiled only
//! for `wasm32`) exports them to JavaScript through linear memory, with
//! `web/www/src/mlpl.js` as the glue on the other side.
//!
//! Every offset given to or returned by this interface counts UTF-16 code
//! units, as JavaScript strings (and CodeMirror) do.

use mlpl_diag::render::{render_with, to_json, RenderOptions};
use mlpl_diag::{Diagnostic, Label, SourceFile};
use serde_json::{json, Value as Json};

#[cfg(target_arch = "wasm32")]
mod abi;
pub mod editor;
pub mod session;

pub use editor::{check, complete, hover};
pub use session::{compare, run, Session, StepSink};

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
