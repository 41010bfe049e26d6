//! An open document: a rope (ropey) with its version, and incremental edits
//! applied strictly in version order.
//!
//! The protocol sends `didChange` notifications in order, but a server may handle
//! them concurrently, so they can reach a document out of order. [`Document::offer`]
//! applies the change whose version follows the current one, keeps later versions
//! waiting until the gap is filled, and drops versions that are not newer than the
//! current one. Clients may skip version numbers (Neovim uses its change tick), so
//! the server calls [`Document::flush_pending`] when a gap stays open for a short
//! while: waiting changes are then applied in version order.

use std::collections::BTreeMap;

use lsp_types::{Position, TextDocumentContentChangeEvent};
use ropey::Rope;

/// The result of offering a versioned change to a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// The change (and any waiting ones it unblocked) was applied; the document is
    /// now at this version.
    Applied(i32),
    /// An earlier version is still missing: the change waits.
    Waiting,
    /// The version is not newer than the document's: the change was dropped.
    Stale,
}

/// A document's text and version.
#[derive(Debug)]
pub struct Document {
    rope: Rope,
    version: i32,
    pending: BTreeMap<i32, Vec<TextDocumentContentChangeEvent>>,
}

impl Document {
    /// A document opened with `text` at `version`.
    pub fn new(text: &str, version: i32) -> Document {
        Document {
            rope: Rope::from_str(text),
            version,
            pending: BTreeMap::new(),
        }
    }

    /// The current version.
    pub fn version(&self) -> i32 {
        self.version
    }

    /// The current text.
    pub fn text(&self) -> String {
        self.rope.to_string()
    }

    /// Whether changes are waiting for a missing earlier version.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Offers the changes of `version` (see the module documentation).
    pub fn offer(&mut self, version: i32, changes: Vec<TextDocumentContentChangeEvent>) -> Offer {
        if version <= self.version || self.pending.contains_key(&version) {
            return Offer::Stale;
        }
        // A full-text change does not depend on the text before it: apply it now
        // and drop the older changes still waiting.
        if changes.iter().any(|c| c.range.is_none()) {
            self.pending.retain(|&v, _| v > version);
            self.apply(&changes);
            self.version = version;
            self.drain();
            return Offer::Applied(self.version);
        }
        self.pending.insert(version, changes);
        let before = self.version;
        self.drain();
        if self.version != before {
            Offer::Applied(self.version)
        } else {
            Offer::Waiting
        }
    }

    /// Applies every waiting change in version order, accepting gaps.
    /// Returns whether anything was applied.
    pub fn flush_pending(&mut self) -> bool {
        let pending = std::mem::take(&mut self.pending);
        let any = !pending.is_empty();
        for (v, changes) in pending {
            self.apply(&changes);
            self.version = v;
        }
        any
    }

    fn drain(&mut self) {
        while let Some(changes) = self.pending.remove(&(self.version + 1)) {
            self.apply(&changes);
            self.version += 1;
        }
    }

    /// Applies changes in order, without version checks.
    pub fn apply(&mut self, changes: &[TextDocumentContentChangeEvent]) {
        for c in changes {
            match c.range {
                None => self.rope = Rope::from_str(&c.text),
                Some(r) => {
                    let a = self.char_index(r.start);
                    let b = self.char_index(r.end);
                    let (a, b) = (a.min(b), a.max(b));
                    self.rope.remove(a..b);
                    self.rope.insert(a, &c.text);
                }
            }
        }
    }

    /// The char index of an LSP position (UTF-16 column), clamped to the line's
    /// content and to the text.
    pub fn char_index(&self, pos: Position) -> usize {
        let line = pos.line as usize;
        if line >= self.rope.len_lines() {
            return self.rope.len_chars();
        }
        let start = self.rope.line_to_char(line);
        let slice = self.rope.line(line);
        let mut content = slice.len_chars();
        while content > 0 && matches!(slice.char(content - 1), '\n' | '\r') {
            content -= 1;
        }
        let start_u16 = self.rope.char_to_utf16_cu(start);
        let max_u16 = self.rope.char_to_utf16_cu(start + content) - start_u16;
        let col = (pos.character as usize).min(max_u16);
        self.rope.utf16_cu_to_char(start_u16 + col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::Range;

    fn edit(l0: u32, c0: u32, l1: u32, c1: u32, text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: Some(Range::new(Position::new(l0, c0), Position::new(l1, c1))),
            range_length: None,
            text: text.into(),
        }
    }

    #[test]
    fn utf16_edits_after_non_ascii() {
        let mut d = Document::new("😀é = 1\nx = 2\n", 1);
        // Replace `1` (UTF-16 column 6: 2 for the emoji, 1 for é, then " = ").
        assert_eq!(d.offer(2, vec![edit(0, 6, 0, 7, "42")]), Offer::Applied(2));
        assert_eq!(d.text(), "😀é = 42\nx = 2\n");
    }

    #[test]
    fn out_of_order_versions_wait() {
        let mut d = Document::new("abc", 1);
        assert_eq!(d.offer(3, vec![edit(0, 0, 0, 0, "2")]), Offer::Waiting);
        assert_eq!(d.offer(2, vec![edit(0, 0, 0, 0, "1")]), Offer::Applied(3));
        assert_eq!(d.text(), "21abc");
        assert_eq!(d.offer(3, vec![edit(0, 0, 0, 0, "x")]), Offer::Stale);
        assert_eq!(d.offer(5, vec![edit(0, 0, 0, 0, "5")]), Offer::Waiting);
        assert!(d.flush_pending());
        assert_eq!(d.version(), 5);
        assert_eq!(d.text(), "521abc");
    }

    #[test]
    fn crlf_and_clamping() {
        let mut d = Document::new("a\r\nb", 0);
        d.apply(&[edit(0, 5, 1, 0, "")]);
        assert_eq!(d.text(), "ab");
        d.apply(&[edit(7, 0, 7, 0, "!")]);
        assert_eq!(d.text(), "ab!");
    }
}
