//! Source files for diagnostics: a name, a text and the line table that maps byte
//! offsets to 1-based lines and columns.
//!
//! Lines are split at LF, CR LF and a lone CR (LANGUAGE §3.1); CR LF is one break.
//! Columns count Unicode scalar values (chars), so they do not depend on the UTF-8
//! length of the characters before them; [`SourceFile::utf16_col`] gives the UTF-16
//! column the language server protocol wants. A byte order mark at the very start of
//! the text is not part of line 1 (it is ignored, as the lexer ignores it).
//!
//! No method panics on a bad offset: offsets past the end are clamped to the end, and
//! offsets inside a multi-byte character are moved back to the start of that character.

/// A named source text with its line table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    name: String,
    text: String,
    /// Byte offset of the first character of each line; `line_starts[0] == 0`.
    line_starts: Vec<usize>,
    /// Added to every reported line number (see [`SourceFile::with_line_offset`]).
    line_offset: usize,
}

const BOM: char = '\u{feff}';

impl SourceFile {
    /// A source file called `name` (shown in ` --> name:line:col`) holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let bytes = text.as_bytes();
        let mut line_starts = vec![0];
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => line_starts.push(i + 1),
                b'\r' => {
                    if bytes.get(i + 1) == Some(&b'\n') {
                        i += 1;
                    }
                    line_starts.push(i + 1);
                }
                _ => {}
            }
            i += 1;
        }
        SourceFile {
            name: name.into(),
            text,
            line_starts,
            line_offset: 0,
        }
    }

    /// The same file with every reported line number increased by `n`: line 1 of the
    /// text is reported as line `1 + n`. Used when a cell that starts on line `n + 1`
    /// of a document is run on its own, so diagnostics point into the document.
    /// [`SourceFile::line_text`] takes reported (shifted) line numbers too.
    pub fn with_line_offset(mut self, n: usize) -> SourceFile {
        self.line_offset = n;
        self
    }

    /// The shift set by [`SourceFile::with_line_offset`] (0 by default).
    pub fn line_offset(&self) -> usize {
        self.line_offset
    }

    /// The file's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The number of lines of the text (at least 1; a text ending in a line break has
    /// an empty last line).
    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The reported number of the first line (`1 + line_offset`).
    pub fn first_line(&self) -> usize {
        1 + self.line_offset
    }

    /// The reported number of the last line.
    pub fn last_line(&self) -> usize {
        self.line_count() + self.line_offset
    }

    /// `offset` clamped to the text and moved back to a char boundary.
    pub fn clamp(&self, offset: usize) -> usize {
        let mut o = offset.min(self.text.len());
        while !self.text.is_char_boundary(o) {
            o -= 1;
        }
        o
    }

    /// 0-based index of the line containing `offset` (already clamped).
    fn line_index(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// Byte offset where the content of line `index` (0-based) starts, skipping a
    /// leading byte order mark on the first line.
    fn content_start(&self, index: usize) -> usize {
        let start = self.line_starts[index];
        if index == 0 && self.text.starts_with(BOM) {
            BOM.len_utf8()
        } else {
            start
        }
    }

    /// Byte offset where the content of line `index` (0-based) ends (its terminator
    /// excluded).
    fn content_end(&self, index: usize) -> usize {
        let end = match self.line_starts.get(index + 1) {
            Some(&next) => next,
            None => return self.text.len(),
        };
        let b = self.text.as_bytes();
        if end >= 2 && b[end - 2] == b'\r' && b[end - 1] == b'\n' {
            end - 2
        } else {
            end - 1
        }
    }

    /// The text of line `index` (0-based) from its content start to `offset`.
    fn prefix(&self, index: usize, offset: usize) -> &str {
        let start = self.content_start(index);
        if offset <= start {
            ""
        } else {
            &self.text[start..offset]
        }
    }

    /// The 1-based (reported) line and the 1-based column of `offset`. The column is the
    /// number of chars between the start of the line and `offset`, plus 1.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let o = self.clamp(offset);
        let index = self.line_index(o);
        let col = self.prefix(index, o).chars().count() + 1;
        (index + 1 + self.line_offset, col)
    }

    /// The 0-based column of `offset` in UTF-16 code units (what LSP positions use).
    pub fn utf16_col(&self, offset: usize) -> usize {
        let o = self.clamp(offset);
        let index = self.line_index(o);
        self.prefix(index, o).chars().map(char::len_utf16).sum()
    }

    /// The 0-based (unshifted) line index of `offset`; `line_col(offset).0` minus
    /// `first_line()`.
    pub fn line_index_of(&self, offset: usize) -> usize {
        self.line_index(self.clamp(offset))
    }

    /// The byte offset where reported line `line` starts (its content, after a byte
    /// order mark on the first line); `None` if there is no such line.
    pub fn line_start(&self, line: usize) -> Option<usize> {
        let index = line.checked_sub(self.first_line())?;
        (index < self.line_count()).then(|| self.content_start(index))
    }

    /// The byte offset where the content of reported line `line` ends, before its line
    /// break; `None` if there is no such line.
    pub fn line_end(&self, line: usize) -> Option<usize> {
        let index = line.checked_sub(self.first_line())?;
        (index < self.line_count()).then(|| self.content_end(index))
    }

    /// The text of reported line `line` (1-based, shifted by the line offset) without
    /// its line break; the empty string for a line that does not exist.
    pub fn line_text(&self, line: usize) -> &str {
        match (self.line_start(line), self.line_end(line)) {
            (Some(s), Some(e)) if s <= e => &self.text[s..e],
            _ => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lf_crlf_and_cr_are_one_break_each() {
        let src = SourceFile::new("t.mlpl", "a\nbc\r\nd\re");
        assert_eq!(src.line_count(), 4);
        assert_eq!(src.line_text(1), "a");
        assert_eq!(src.line_text(2), "bc");
        assert_eq!(src.line_text(3), "d");
        assert_eq!(src.line_text(4), "e");
        assert_eq!(src.line_text(5), "");
        assert_eq!(src.line_text(0), "");
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(1), (1, 2)); // the LF itself
        assert_eq!(src.line_col(2), (2, 1));
        assert_eq!(src.line_col(4), (2, 3)); // the CR of CR LF
        assert_eq!(src.line_col(6), (3, 1));
        assert_eq!(src.line_col(8), (4, 1));
        assert_eq!(src.line_col(9), (4, 2)); // end of text
    }

    #[test]
    fn trailing_break_gives_an_empty_last_line() {
        let src = SourceFile::new("t", "x = 1\r\n");
        assert_eq!(src.line_count(), 2);
        assert_eq!(src.line_text(1), "x = 1");
        assert_eq!(src.line_text(2), "");
        assert_eq!(src.line_col(7), (2, 1));
        let empty = SourceFile::new("e", "");
        assert_eq!(empty.line_count(), 1);
        assert_eq!(empty.line_col(0), (1, 1));
        assert_eq!(empty.line_text(1), "");
    }

    #[test]
    fn columns_count_chars_and_utf16_units() {
        // "é" is 2 bytes, 1 char, 1 UTF-16 unit; "😀" is 4 bytes, 1 char, 2 units.
        let src = SourceFile::new("u", "s = \"é😀\" + x");
        let x = src.text().find('x').unwrap();
        assert_eq!(src.line_col(x), (1, 12));
        assert_eq!(src.utf16_col(x), 12);
        let emoji = src.text().find('😀').unwrap();
        assert_eq!(src.line_col(emoji), (1, 7));
        assert_eq!(src.utf16_col(emoji), 6);
    }

    #[test]
    fn bad_offsets_do_not_panic() {
        let src = SourceFile::new("u", "é\n😀");
        // Inside "é" (bytes 0..2): clamps back to 0.
        assert_eq!(src.line_col(1), (1, 1));
        // Inside the emoji (bytes 3..7).
        assert_eq!(src.line_col(5), (2, 1));
        assert_eq!(src.utf16_col(5), 0);
        // Past the end.
        assert_eq!(src.line_col(1000), (2, 2));
        assert_eq!(src.utf16_col(1000), 2);
        assert_eq!(src.clamp(usize::MAX), src.text().len());
    }

    #[test]
    fn line_offset_shifts_reported_lines() {
        let src = SourceFile::new("doc.mlpl", "x = 1\ny = x").with_line_offset(9);
        assert_eq!(src.line_offset(), 9);
        assert_eq!(src.first_line(), 10);
        assert_eq!(src.last_line(), 11);
        assert_eq!(src.line_col(6), (11, 1));
        assert_eq!(src.line_text(11), "y = x");
        assert_eq!(src.line_text(1), "");
        assert_eq!(src.line_count(), 2);
    }

    #[test]
    fn byte_order_mark_is_not_part_of_line_one() {
        let src = SourceFile::new("b", "\u{feff}x = 1\ny");
        assert_eq!(src.line_text(1), "x = 1");
        assert_eq!(src.line_col(3), (1, 1));
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.utf16_col(4), 1);
        assert_eq!(src.name(), "b");
    }
}
