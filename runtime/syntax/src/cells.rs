//! Splitting a file into cells at `# %%` marker lines (LANGUAGE §3.2, §21.1).
//!
//! A marker is a comment line whose first four characters are `# %%` (a `# %%` line
//! inside a string literal is text, not a marker). Rules:
//!
//! - Without markers the whole file is one cell (index 0, empty title), even if empty.
//! - Each marker starts a cell that runs to the next marker or the end of the file.
//!   The cell's span *includes* its marker line (a comment to the language), so
//!   running the cell's text is the same as running that part of the file.
//! - The text before the first marker becomes cell 0 (with an empty title) only if
//!   it contains a token, i.e. something other than whitespace and comments;
//!   otherwise it belongs to no cell and the first marker's cell is cell 0.
//!
//! Cells are numbered from 0 in order and together with an ignored preamble cover
//! the file without gaps.

use crate::lexer::{lex_full, Lexed};
use crate::token::TokenKind;
use mlpl_diag::Span;

/// One cell of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// 0-based position among the file's cells.
    pub index: usize,
    /// The marker's title (the rest of the marker line, trimmed); empty for a cell
    /// without a marker.
    pub title: String,
    /// Byte range of the cell's text, marker line included.
    pub span: Span,
    /// 0-based line of the cell's first line (LF, CR LF and CR each end a line).
    pub start_line: usize,
}

/// Splits a source text into cells (see the module documentation for the rules).
pub fn split_cells(src: &str) -> Vec<Cell> {
    split_lexed(src, &lex_full(src))
}

/// [`split_cells`] for a text that is already lexed (the language server keeps
/// one lexing per document version). Linear in the text.
pub fn split_lexed(src: &str, lexed: &Lexed) -> Vec<Cell> {
    let markers = &lexed.cell_markers;
    if markers.is_empty() {
        return vec![Cell {
            index: 0,
            title: String::new(),
            span: Span::new(0, src.len()),
            start_line: 0,
        }];
    }
    let mut cells = Vec::with_capacity(markers.len() + 1);
    let first = markers[0].span.start;
    let preamble_has_code = lexed
        .tokens
        .iter()
        .any(|t| t.span.start < first && !matches!(t.kind, TokenKind::Newline | TokenKind::Eof));
    if preamble_has_code {
        cells.push(Cell {
            index: 0,
            title: String::new(),
            span: Span::new(0, first),
            start_line: 0,
        });
    }
    // Markers come in text order: count line breaks incrementally between them.
    let (mut line, mut counted_to) = (0, 0);
    for (k, m) in markers.iter().enumerate() {
        let end = markers.get(k + 1).map_or(src.len(), |n| n.span.start);
        line += line_breaks(src, counted_to, m.span.start);
        counted_to = m.span.start;
        cells.push(Cell {
            index: cells.len(),
            title: m.title.clone(),
            span: Span::new(m.span.start, end),
            start_line: line,
        });
    }
    cells
}

/// The number of line breaks (LF, CR LF or CR) in `src[from..to]`.
fn line_breaks(src: &str, from: usize, to: usize) -> usize {
    let bytes = &src.as_bytes()[from.min(src.len())..to.min(src.len())];
    let mut n = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\n' => n += 1,
            b'\r' if bytes.get(i + 1) != Some(&b'\n') => n += 1,
            _ => {}
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(src: &str) -> Vec<(usize, String, &str, usize)> {
        split_cells(src)
            .into_iter()
            .map(|c| {
                (
                    c.index,
                    c.title.clone(),
                    &src[c.span.start..c.span.end],
                    c.start_line,
                )
            })
            .collect()
    }

    #[test]
    fn no_markers_is_one_cell() {
        assert_eq!(
            summary("x = 1\ny = 2\n"),
            vec![(0, String::new(), "x = 1\ny = 2\n", 0)]
        );
        assert_eq!(summary(""), vec![(0, String::new(), "", 0)]);
    }

    #[test]
    fn markers_split_cells() {
        let src = "# %% Setup\nx = 1\n# %%   Train  \ny = 2\n";
        assert_eq!(
            summary(src),
            vec![
                (0, "Setup".to_string(), "# %% Setup\nx = 1\n", 0),
                (1, "Train".to_string(), "# %%   Train  \ny = 2\n", 2),
            ]
        );
    }

    #[test]
    fn preamble_with_code_is_cell_zero() {
        let src = "x = 1\n# %% B\ny\n";
        assert_eq!(
            summary(src),
            vec![
                (0, String::new(), "x = 1\n", 0),
                (1, "B".to_string(), "# %% B\ny\n", 1)
            ]
        );
    }

    #[test]
    fn preamble_of_comments_is_dropped() {
        let src = "# a header comment\n\n   \n# %% A\nx\r\n# %%B\r\ny";
        assert_eq!(
            summary(src),
            vec![
                (0, "A".to_string(), "# %% A\nx\r\n", 3),
                (1, "B".to_string(), "# %%B\r\ny", 5)
            ]
        );
    }

    #[test]
    fn marker_must_start_the_line_and_be_outside_strings() {
        assert_eq!(split_cells("x = 1 # %% no\n  # %% no\n").len(), 1);
        assert_eq!(split_cells("s = \"\n# %% inside a string\n\"\n").len(), 1);
        assert_eq!(split_cells("#%% no\n# % % no\n").len(), 1);
        assert_eq!(split_cells("# %%x\n").len(), 1);
        assert_eq!(split_cells("# %%x\n")[0].title, "x");
    }

    #[test]
    fn cr_line_endings() {
        let src = "a\r# %% one\rb\r# %% two\rc";
        let cells = split_cells(src);
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[1].start_line, 1);
        assert_eq!(cells[2].start_line, 3);
    }
}
