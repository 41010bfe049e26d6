//! Byte offsets ↔ LSP positions for one analysed text.
//!
//! LSP positions are (line, UTF-16 code unit within the line). Lines end at LF,
//! CR LF or a lone CR, as in the language (LANGUAGE §3.1) and the protocol. Every
//! conversion clamps instead of panicking: a position past the end of a line maps
//! to the end of that line, a line past the end of the text to the end of the text,
//! and an offset inside a multi-byte character to the start of that character.

use lsp_types::{Position, Range};
use mlpl_diag::Span;

/// The line table of a text (the text itself is passed to each call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineIndex {
    /// Byte offset of the first character of each line; `starts[0] == 0`.
    starts: Vec<usize>,
    /// Length of the text in bytes.
    len: usize,
}

impl LineIndex {
    /// Builds the line table of `text`.
    pub fn new(text: &str) -> LineIndex {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => starts.push(i + 1),
                b'\r' => {
                    if bytes.get(i + 1) == Some(&b'\n') {
                        i += 1;
                    }
                    starts.push(i + 1);
                }
                _ => {}
            }
            i += 1;
        }
        LineIndex {
            starts,
            len: text.len(),
        }
    }

    /// Number of lines (a text ending in a line break has an empty last line).
    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// Byte offset where 0-based line `line` starts (the end of the text past the last line).
    pub fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(self.len)
    }

    /// Byte offset of the end of line `line`'s content (before its line break).
    pub fn line_end(&self, text: &str, line: usize) -> usize {
        let Some(&start) = self.starts.get(line) else {
            return self.len;
        };
        let mut end = self.starts.get(line + 1).copied().unwrap_or(self.len);
        let bytes = text.as_bytes();
        while end > start && matches!(bytes.get(end - 1), Some(b'\n' | b'\r')) {
            end -= 1;
        }
        end
    }

    /// The 0-based line containing byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.len);
        match self.starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// The LSP position of byte `offset` in `text`.
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let offset = floor_char_boundary(text, offset.min(text.len()));
        let line = self.line_of(offset);
        let start = self.starts[line];
        let col: usize = text[start..offset].chars().map(char::len_utf16).sum();
        Position::new(line as u32, col as u32)
    }

    /// The LSP range of a byte span of `text`.
    pub fn range(&self, text: &str, span: Span) -> Range {
        Range::new(
            self.position(text, span.start),
            self.position(text, span.end),
        )
    }

    /// The byte offset of an LSP position in `text`, clamped to the line and text.
    pub fn offset(&self, text: &str, pos: Position) -> usize {
        let line = pos.line as usize;
        if line >= self.starts.len() {
            return text.len();
        }
        let start = self.starts[line];
        let end = self.line_end(text, line);
        let mut units = pos.character as usize;
        let mut offset = start;
        for c in text[start..end].chars() {
            let w = c.len_utf16();
            if units < w {
                break;
            }
            units -= w;
            offset += c.len_utf8();
        }
        offset
    }

    /// The byte span of an LSP range (start and end clamped; swapped if reversed).
    pub fn span(&self, text: &str, range: Range) -> Span {
        let a = self.offset(text, range.start);
        let b = self.offset(text, range.end);
        Span::new(a.min(b), a.max(b))
    }
}

/// The largest char boundary of `text` at or before `i`.
pub fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_columns_count_surrogate_pairs() {
        let text = "é = 1\n😀x = 2\r\ny";
        let li = LineIndex::new(text);
        assert_eq!(li.line_count(), 3);
        let x = text.find('x').unwrap();
        assert_eq!(li.position(text, x), Position::new(1, 2));
        assert_eq!(li.offset(text, Position::new(1, 2)), x);
        // Inside the surrogate pair: clamps back to the emoji's start.
        assert_eq!(li.offset(text, Position::new(1, 1)), li.line_start(1));
        // Past the end of a line: the end of its content.
        assert_eq!(li.offset(text, Position::new(0, 99)), "é = 1".len());
        assert_eq!(li.offset(text, Position::new(9, 0)), text.len());
        assert_eq!(li.position(text, text.len()), Position::new(2, 1));
    }

    #[test]
    fn lone_cr_breaks_lines() {
        let text = "a\rb\r\nc";
        let li = LineIndex::new(text);
        assert_eq!(li.line_count(), 3);
        assert_eq!(li.position(text, 2), Position::new(1, 0));
        assert_eq!(li.line_end(text, 1), 3);
    }
}
