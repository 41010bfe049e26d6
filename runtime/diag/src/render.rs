//! Rustc-style rendering of diagnostics (LANGUAGE §9.4, §20.1), and their JSON form.
//!
//! ```text
//! error[E0201]: shapes do not broadcast in `+`
//!  --> model.mlpl:7:5
//!   |
//! 7 | y = x + w
//!   |     -   ^ right operand: [3]
//!   |     |
//!   |     left operand: [batch=32, feat=10]
//!   = note: axis -1 has size 10 on the left and 3 on the right
//! ```
//!
//! Layout rules:
//!
//! - The headline is `error[CODE]: message` or `warning[CODE]: message`.
//! - ` --> file:line:col` gives the 1-based line and char column where the underlined
//!   code on the primary span's line begins: the start of the leftmost span on that
//!   line, primary or secondary. For an operator error, whose primary span is the
//!   right operand and whose secondary span is the left operand, that is the start of
//!   the operation (`7:5` in §9.4); without secondary spans on that line it is the
//!   primary span's start. As in the reference's examples, the arrow is always
//!   indented by one space, whatever the gutter width. (JSON output and the editor use
//!   the primary span itself.)
//! - The gutter is as wide as the largest line number shown (numbers are left-aligned
//!   in it, as rustc does). Each annotated line is
//!   printed, then a row with `^` under the primary span and `-` under secondary
//!   spans (at least one character each, so an empty span gets one caret), followed by
//!   the labels. The rightmost label goes on the underline row when it fits; the others
//!   hang below their span's first column on a stack of `|` lines, right to left, as
//!   rustc does.
//! - Secondary spans on other lines are shown on their own source lines, in line
//!   order. Between two shown lines a single skipped line is printed as is; a longer
//!   gap is marked with a `...` line.
//! - A span covering several lines is underlined on its first line only, from its start
//!   to the end of that line; its label is printed there.
//! - Tabs are shown as four spaces so the underlines stay aligned. Trailing spaces are
//!   trimmed from every row.
//! - A line wider than [`MAX_LINE_WIDTH`] columns (generated or minified code) is
//!   shown as a window of that many columns around its marks, `...` standing for what
//!   is cut on either side, so one error never prints a whole megabyte-long line.
//! - Then come the `= note: …` lines, in order, and the `= help: …` line. A note or
//!   help containing line breaks prints its further lines aligned under its first.
//! - A diagnostic without a primary span prints only its headline, notes and help.
//!
//! Colours ([`RenderOptions::color`]) follow rustc: the headline's `error[CODE]` in
//! bold red (`warning[CODE]` in bold yellow) and its message in bold, the primary
//! underline and label in the same colour, and the arrow, gutter, secondary underlines
//! and labels in bold blue.

use super::{Diagnostic, Label, Severity, SourceFile};
use serde_json::{json, Value};

/// Options of [`render_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// Emit ANSI colour codes (off by default).
    pub color: bool,
}

/// Renders one diagnostic without colour. The result ends with a line break.
pub fn render(d: &Diagnostic, src: &SourceFile) -> String {
    render_with(d, src, &RenderOptions::default())
}

/// Renders several diagnostics without colour, separated by a blank line.
pub fn render_all(diags: &[Diagnostic], src: &SourceFile) -> String {
    render_all_with(diags, src, &RenderOptions::default())
}

/// Renders several diagnostics with the given options, separated by a blank line.
pub fn render_all_with(diags: &[Diagnostic], src: &SourceFile, opts: &RenderOptions) -> String {
    diags
        .iter()
        .map(|d| render_with(d, src, opts))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Renders one diagnostic with the given options. The result ends with a line break.
pub fn render_with(d: &Diagnostic, src: &SourceFile, opts: &RenderOptions) -> String {
    let mut out = Out {
        color: opts.color,
        s: String::new(),
    };
    let level = Style::Level(d.severity);
    let word = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    out.push(level, &format!("{word}[{}]", d.code));
    out.push(Style::Bold, &format!(": {}", d.message));
    out.newline();

    let width = match &d.primary {
        Some(primary) => render_snippet(&mut out, d, primary, src),
        None => 1,
    };

    let pad = " ".repeat(width);
    for note in &d.notes {
        footer(&mut out, &pad, "note", note);
    }
    if let Some(help) = &d.help {
        footer(&mut out, &pad, "help", help);
    }
    out.s
}

/// Writes `PAD = KIND: text`, aligning further lines of `text` under its first.
fn footer(out: &mut Out, pad: &str, kind: &str, text: &str) {
    let indent = " ".repeat(pad.len() + 1 + "= ".len() + kind.len() + ": ".len());
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if i == 0 {
            out.push(Style::Plain, pad);
            out.push(Style::Gutter, " = ");
            out.push(Style::Bold, kind);
            out.push(Style::Plain, ": ");
        } else {
            out.push(Style::Plain, &indent);
        }
        out.push(Style::Plain, line.trim_end());
        out.newline();
    }
}

/// One underline on one line, in display columns (0-based, end exclusive).
#[derive(Clone, Debug)]
struct Mark {
    start: usize,
    end: usize,
    primary: bool,
    label: String,
}

impl Mark {
    fn has_label(&self) -> bool {
        !self.label.is_empty()
    }
}

/// Renders the ` --> ` line and the source snippet; returns the gutter width.
fn render_snippet(out: &mut Out, d: &Diagnostic, primary: &Label, src: &SourceFile) -> usize {
    // Collect the marks per 0-based line index.
    let mut lines: Vec<(usize, Vec<Mark>)> = Vec::new();
    let labels = std::iter::once((primary, true)).chain(d.secondary.iter().map(|l| (l, false)));
    for (label, is_primary) in labels {
        let (index, mark) = mark_for(label, is_primary, src);
        match lines.iter_mut().find(|(i, _)| *i == index) {
            Some((_, marks)) => marks.push(mark),
            None => lines.push((index, vec![mark])),
        }
    }
    lines.sort_by_key(|(i, _)| *i);

    // Which lines are shown: the annotated ones, plus a single skipped line between two.
    let mut shown: Vec<Shown> = Vec::new();
    let mut previous: Option<usize> = None;
    for (index, marks) in &lines {
        if let Some(p) = previous {
            match index - p {
                1 => {}
                2 => shown.push(Shown::Line(p + 1, Vec::new())),
                _ => shown.push(Shown::Ellipsis),
            }
        }
        shown.push(Shown::Line(*index, marks.clone()));
        previous = Some(*index);
    }
    let max_line = lines.last().map_or(1, |(i, _)| i + src.first_line());
    let width = max_line.to_string().len();
    let pad = " ".repeat(width);

    let (line, col) = src.line_col(arrow_offset(d, primary, src));
    out.push(Style::Gutter, " --> ");
    out.push(Style::Plain, &format!("{}:{line}:{col}", src.name()));
    out.newline();
    gutter_row(out, &pad, &[]);

    for item in &shown {
        match item {
            Shown::Ellipsis => {
                out.push(Style::Gutter, "...");
                out.newline();
            }
            Shown::Line(index, marks) => {
                let number = index + src.first_line();
                let (text, marks) = windowed(&display_text(src.line_text(number)), marks);
                out.push(Style::Gutter, &format!("{number:<width$} |"));
                let text = text.trim_end();
                if !text.is_empty() {
                    out.push(Style::Plain, " ");
                    out.push(Style::Plain, text);
                }
                out.newline();
                if !marks.is_empty() {
                    for row in layout(&marks, d.severity) {
                        gutter_row(out, &pad, &row);
                    }
                }
            }
        }
    }
    width
}

/// Where ` --> ` points: the leftmost span start on the primary span's line.
fn arrow_offset(d: &Diagnostic, primary: &Label, src: &SourceFile) -> usize {
    let start = src.clamp(primary.span.start);
    let line = src.line_index_of(start);
    d.secondary
        .iter()
        .map(|l| src.clamp(l.span.start))
        .filter(|&s| src.line_index_of(s) == line)
        .fold(start, usize::min)
}

enum Shown {
    Line(usize, Vec<Mark>),
    Ellipsis,
}

/// The line index and the display-column mark of a label.
fn mark_for(label: &Label, primary: bool, src: &SourceFile) -> (usize, Mark) {
    let start = src.clamp(label.span.start);
    let end = src.clamp(label.span.end.max(label.span.start)).max(start);
    let index = src.line_index_of(start);
    let number = index + src.first_line();
    let line_start = src.line_start(number).unwrap_or(0);
    let line_end = src.line_end(number).unwrap_or(src.text().len());
    let text = src.text();
    let col_of = |offset: usize| -> usize {
        let offset = offset.clamp(line_start, line_end.max(line_start));
        display_width(&text[line_start..offset])
    };
    let start_col = col_of(start);
    let end_col = if src.line_index_of(end) == index {
        col_of(end)
    } else {
        col_of(line_end)
    };
    let end_col = end_col.max(start_col + 1);
    let label = label
        .message
        .replace("\r\n", " ")
        .replace(['\n', '\r'], " ");
    (
        index,
        Mark {
            start: start_col,
            end: end_col,
            primary,
            label,
        },
    )
}

/// The most columns of a source line shown; a wider line is shown as a window
/// of this width around its marks (see the module's layout rules).
pub const MAX_LINE_WIDTH: usize = 120;

/// What is shown for the part of a long line cut off on either side.
const CUT: &str = "...";

/// `text` (a displayed line, one column per char) and its `marks` as shown: the
/// line itself when it is at most [`MAX_LINE_WIDTH`] columns wide, else a window
/// of that width starting a few columns before the leftmost mark (or at the
/// line's start), [`CUT`] in place of each cut side, and the marks moved with it.
fn windowed(text: &str, marks: &[Mark]) -> (String, Vec<Mark>) {
    let width = text.chars().count();
    if width <= MAX_LINE_WIDTH {
        return (text.to_string(), marks.to_vec());
    }
    // Some context before the leftmost mark, but no window past the line's end.
    let first = marks.iter().map(|m| m.start).min().unwrap_or(0);
    let lo = first
        .saturating_sub(MAX_LINE_WIDTH / 4)
        .min(width.saturating_sub(MAX_LINE_WIDTH));
    let hi = (lo + MAX_LINE_WIDTH).min(width);
    let mut shown = String::new();
    let shift = if lo > 0 {
        shown.push_str(CUT);
        CUT.len()
    } else {
        0
    };
    shown.extend(text.chars().skip(lo).take(hi - lo));
    if hi < width {
        shown.push_str(CUT);
    }
    // A mark starting before the window is drawn from its first column; one
    // past its end, at its end.
    let last = shift + (hi - lo) + CUT.len();
    let moved = marks
        .iter()
        .map(|m| {
            let start = (m.start.max(lo) - lo + shift).min(last);
            let end = (m.end.max(lo) - lo + shift).min(last).max(start + 1);
            Mark {
                start,
                end,
                ..m.clone()
            }
        })
        .collect();
    (shown, moved)
}

/// Width of `s` on screen: one column per char, four per tab.
fn display_width(s: &str) -> usize {
    s.chars().map(|c| if c == '\t' { 4 } else { 1 }).sum()
}

/// A source line as displayed: tabs become four spaces.
fn display_text(s: &str) -> String {
    s.replace('\t', "    ")
}

/// Writes `PAD |` followed by a row of styled cells (trailing spaces trimmed).
fn gutter_row(out: &mut Out, pad: &str, row: &[(char, Style)]) {
    out.push(Style::Plain, pad);
    out.push(Style::Gutter, " |");
    let len = row
        .iter()
        .rposition(|(c, _)| *c != ' ')
        .map_or(0, |i| i + 1);
    if len > 0 {
        out.push(Style::Plain, " ");
        let mut run = String::new();
        let mut style = row[0].1;
        for &(c, s) in &row[..len] {
            let s = if c == ' ' { style } else { s };
            if s != style {
                out.push(style, &run);
                run.clear();
                style = s;
            }
            run.push(c);
        }
        out.push(style, &run);
    }
    out.newline();
}

/// Whether two marks overlap, the first one's range being extended by `padding`
/// (rustc's `overlaps`).
fn overlaps(a: &Mark, b: &Mark, padding: usize) -> bool {
    (b.start..b.end).contains(&a.start) || (a.start..a.end + padding).contains(&b.start)
}

/// Lays out the underline row and the label rows of one source line, as rustc does.
fn layout(marks: &[Mark], severity: Severity) -> Vec<Vec<(char, Style)>> {
    // Rightmost first; for equal starts, keep primary before secondary.
    let mut marks: Vec<&Mark> = marks.iter().collect();
    marks.sort_by_key(|m| (std::cmp::Reverse(m.start), !m.primary));

    // Assign each mark the label row offset `pos` (0: on the underline row).
    let mut positions: Vec<(usize, &Mark)> = Vec::new();
    let mut p = 0;
    for (i, mark) in marks.iter().enumerate() {
        for next in &marks[i + 1..] {
            if overlaps(next, mark, 0) && mark.has_label() && p == 0 {
                // An unlabelled mark with the same span merges into this one.
                if next.start == mark.start && next.end == mark.end && !next.has_label() {
                    continue;
                }
                p += 1;
                break;
            }
        }
        positions.push((p, mark));
        for next in &marks[i + 1..] {
            let l = if next.has_label() {
                next.label.chars().count() + 2
            } else {
                0
            };
            if (overlaps(next, mark, l) && mark.has_label() && next.has_label())
                || (overlaps(next, mark, l) && next.end <= mark.end && next.has_label() && p == 0)
            {
                p += 1;
                break;
            }
        }
    }

    let style_of = |m: &Mark| {
        if m.primary {
            Style::Level(severity)
        } else {
            Style::Secondary
        }
    };
    let mut grid = Grid::default();
    grid.ensure_row(0);
    // Vertical lines for labels below the underline row.
    for &(pos, mark) in &positions {
        if pos > 0 && mark.has_label() {
            for row in 1..=pos {
                grid.put(row, mark.start, '|', style_of(mark));
            }
        }
    }
    // Labels.
    for &(pos, mark) in &positions {
        if !mark.has_label() {
            continue;
        }
        let (row, col) = if pos == 0 {
            (0, mark.end + 1)
        } else {
            (pos + 1, mark.start)
        };
        grid.puts(row, col, &mark.label, style_of(mark));
    }
    // Underlines: longer first, primary last, so primary and short ones stay visible.
    positions.sort_by_key(|(_, m)| (std::cmp::Reverse(m.end - m.start), m.primary));
    for &(_, mark) in &positions {
        let c = if mark.primary { '^' } else { '-' };
        for col in mark.start..mark.end {
            grid.put(0, col, c, style_of(mark));
        }
    }
    grid.rows
}

/// A grid of styled characters.
#[derive(Default)]
struct Grid {
    rows: Vec<Vec<(char, Style)>>,
}

impl Grid {
    fn ensure_row(&mut self, row: usize) {
        while self.rows.len() <= row {
            self.rows.push(Vec::new());
        }
    }
    fn put(&mut self, row: usize, col: usize, c: char, style: Style) {
        self.ensure_row(row);
        let r = &mut self.rows[row];
        while r.len() <= col {
            r.push((' ', Style::Plain));
        }
        r[col] = (c, style);
    }
    fn puts(&mut self, row: usize, col: usize, s: &str, style: Style) {
        for (i, c) in s.chars().enumerate() {
            self.put(row, col + i, c, style);
        }
    }
}

/// What a piece of output looks like in colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Plain,
    Bold,
    /// The severity's colour, bold.
    Level(Severity),
    /// Arrow, line numbers, `|`, `=`, `...`: bold blue.
    Gutter,
    /// Secondary underlines and labels: bold blue.
    Secondary,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Plain => "",
            Style::Bold => "\x1b[1m",
            Style::Level(Severity::Error) => "\x1b[1;31m",
            Style::Level(Severity::Warning) => "\x1b[1;33m",
            Style::Gutter | Style::Secondary => "\x1b[1;34m",
        }
    }
}

struct Out {
    color: bool,
    s: String,
}

impl Out {
    fn push(&mut self, style: Style, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.color && style != Style::Plain {
            self.s.push_str(style.code());
            self.s.push_str(text);
            self.s.push_str("\x1b[0m");
        } else {
            self.s.push_str(text);
        }
    }
    fn newline(&mut self) {
        self.s.push('\n');
    }
}

/// The diagnostics as a JSON array (for `mlpl check --json` and the runner).
///
/// Each element is an object with `code`, `severity` (`"error"` or `"warning"`),
/// `message`, `file` (the source's name), `line`, `column`, `end_line`, `end_column`
/// (1-based; the end is the position just after the primary span, so a one-character
/// span on column 5 ends on column 6; all four are `null` without a primary span),
/// `label` (the primary span's label, `null` if empty or absent), `labels` (the
/// secondary spans: `{line, column, end_line, end_column, message}`), `notes` (an
/// array of strings) and `help` (a string or `null`).
pub fn to_json(diags: &[Diagnostic], src: &SourceFile) -> Value {
    Value::Array(diags.iter().map(|d| diagnostic_json(d, src)).collect())
}

fn range_json(label: &Label, src: &SourceFile) -> (Value, Value, Value, Value) {
    let (line, column) = src.line_col(label.span.start);
    let (end_line, end_column) = src.line_col(label.span.end.max(label.span.start));
    (
        json!(line),
        json!(column),
        json!(end_line),
        json!(end_column),
    )
}

fn diagnostic_json(d: &Diagnostic, src: &SourceFile) -> Value {
    let (line, column, end_line, end_column) = match &d.primary {
        Some(p) => range_json(p, src),
        None => (Value::Null, Value::Null, Value::Null, Value::Null),
    };
    let label = match &d.primary {
        Some(p) if !p.message.is_empty() => json!(p.message),
        _ => Value::Null,
    };
    let labels: Vec<Value> = d
        .secondary
        .iter()
        .map(|l| {
            let (line, column, end_line, end_column) = range_json(l, src);
            json!({
                "line": line,
                "column": column,
                "end_line": end_line,
                "end_column": end_column,
                "message": l.message,
            })
        })
        .collect();
    json!({
        "code": d.code,
        "severity": d.severity,
        "message": d.message,
        "file": src.name(),
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "label": label,
        "labels": labels,
        "notes": d.notes,
        "help": d.help,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Span;

    /// The span of the `n`-th (0-based) occurrence of `needle` in `text`.
    fn span_of(text: &str, needle: &str, n: usize) -> Span {
        let start = text.match_indices(needle).nth(n).expect("needle").0;
        Span::new(start, start + needle.len())
    }

    fn model_source() -> SourceFile {
        let mut text = String::new();
        for i in 1..=6 {
            text.push_str(&format!("# line {i}\n"));
        }
        text.push_str("y = x + w\n# line 8\ny = x + h\n");
        SourceFile::new("model.mlpl", text)
    }

    #[test]
    fn section_9_4_e0201() {
        let src = model_source();
        let line7 = src.line_start(7).unwrap();
        let d = Diagnostic::error("E0201", "shapes do not broadcast in `+`")
            .at(Span::new(line7 + 8, line7 + 9), "right operand: [3]")
            .with_label(
                Span::new(line7 + 4, line7 + 5),
                "left operand: [batch=32, feat=10]",
            )
            .note(
                "axis -1 has size 10 on the left and 3 on the right; aligned sizes\n\
                 must be equal or one of them must be 1",
            );
        let expected = "\
error[E0201]: shapes do not broadcast in `+`
 --> model.mlpl:7:5
  |
7 | y = x + w
  |     -   ^ right operand: [3]
  |     |
  |     left operand: [batch=32, feat=10]
  = note: axis -1 has size 10 on the left and 3 on the right; aligned sizes
          must be equal or one of them must be 1
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn section_9_4_e0202() {
        let src = model_source();
        let line9 = src.line_start(9).unwrap();
        let d = Diagnostic::error("E0202", "axis names conflict in `+`")
            .at(
                Span::new(line9 + 8, line9 + 9),
                "right operand: [hidden=10]",
            )
            .with_label(
                Span::new(line9 + 4, line9 + 5),
                "left operand: [batch=32, feat=10]",
            )
            .note("axis -1 is named `feat` on the left and `hidden` on the right")
            .help("rename one side, for example `relabel(h, [\"feat\"])`");
        let expected = "\
error[E0202]: axis names conflict in `+`
 --> model.mlpl:9:5
  |
9 | y = x + h
  |     -   ^ right operand: [hidden=10]
  |     |
  |     left operand: [batch=32, feat=10]
  = note: axis -1 is named `feat` on the left and `hidden` on the right
  = help: rename one side, for example `relabel(h, [\"feat\"])`
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn section_20_1_two_digit_gutter() {
        let mut text = "# header\n".repeat(13);
        text.push_str("    h = matmul(x, W)\n");
        let src = SourceFile::new("train.mlpl", text.clone());
        let d = Diagnostic::error("E0203", "inner dimensions differ in `matmul`")
            .at(span_of(&text, "W", 0), "right operand: [in=64, out=32]")
            .with_label(span_of(&text, "x", 0), "left operand: [batch=32, feat=10]")
            .note(
                "the last axis of the left operand (10) must equal the first axis of the \
                 right operand (64)",
            );
        // The reference prints `14:12`, a column where no span starts; we print the
        // start of the leftmost span on the line (the left operand, column 16).
        let expected = "\
error[E0203]: inner dimensions differ in `matmul`
 --> train.mlpl:14:16
   |
14 |     h = matmul(x, W)
   |                -  ^ right operand: [in=64, out=32]
   |                |
   |                left operand: [batch=32, feat=10]
   = note: the last axis of the left operand (10) must equal the first axis of the right operand (64)
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn labels_stack_right_to_left() {
        let text = "z = add(a, b) + c\n";
        let src = SourceFile::new("s.mlpl", text);
        let d = Diagnostic::error("E0201", "shapes do not broadcast in `+`")
            .at(span_of(text, "c", 0), "right: [3]")
            .with_label(span_of(text, "a", 1), "a: [2]")
            .with_label(span_of(text, "add(a, b)", 0), "left: [2]");
        let expected = "\
error[E0201]: shapes do not broadcast in `+`
 --> s.mlpl:1:5
  |
1 | z = add(a, b) + c
  |     ---------   ^ right: [3]
  |     |   |
  |     |   a: [2]
  |     left: [2]
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn short_label_fits_on_the_underline_row() {
        let text = "y = x + w\n";
        let src = SourceFile::new("s.mlpl", text);
        let d = Diagnostic::error("E0201", "m")
            .at(span_of(text, "w", 0), "")
            .with_label(span_of(text, "x", 0), "a");
        let expected = "\
error[E0201]: m
 --> s.mlpl:1:5
  |
1 | y = x + w
  |     - a ^
";
        assert_eq!(render(&d, &src), expected);
        // An unlabelled primary with a long secondary label: the label hangs below.
        let d = Diagnostic::error("E0201", "m")
            .at(span_of(text, "w", 0), "")
            .with_label(span_of(text, "x", 0), "left operand");
        let expected = "\
error[E0201]: m
 --> s.mlpl:1:5
  |
1 | y = x + w
  |     -   ^
  |     |
  |     left operand
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn secondary_spans_on_other_lines() {
        let text = "x : [batch, feat] = zeros([32, 10])\n\
                    h : [hidden] = zeros([10])\n\
                    # one\n\
                    y = x + h\n\
                    # two\n\
                    # three\n\
                    z = x + h\n";
        let src = SourceFile::new("m.mlpl", text);
        let d = Diagnostic::error("E0202", "axis names conflict in `+`")
            .at(span_of(text, "h", 5), "right operand: [hidden=10]")
            .with_label(span_of(text, "x", 2), "left operand: [batch=32, feat=10]")
            .with_label(span_of(text, "[batch, feat]", 0), "`x` gets its names here")
            .with_label(span_of(text, "[hidden]", 0), "`h` gets its names here")
            .with_label(span_of(text, "x + h", 0), "");
        let expected = "\
error[E0202]: axis names conflict in `+`
 --> m.mlpl:7:5
  |
1 | x : [batch, feat] = zeros([32, 10])
  |     ------------- `x` gets its names here
2 | h : [hidden] = zeros([10])
  |     -------- `h` gets its names here
3 | # one
4 | y = x + h
  |     -----
...
7 | z = x + h
  |     -   ^ right operand: [hidden=10]
  |     |
  |     left operand: [batch=32, feat=10]
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn multi_line_span_is_underlined_on_its_first_line() {
        let text = "m = chain(\n    linear(4, 8, 0),\n";
        let src = SourceFile::new("u.mlpl", text);
        let d = Diagnostic::error("E0007", "unclosed delimiter")
            .at(Span::new(9, text.len()), "this `(` is never closed");
        let expected = "\
error[E0007]: unclosed delimiter
 --> u.mlpl:1:10
  |
1 | m = chain(
  |          ^ this `(` is never closed
";
        assert_eq!(render(&d, &src), expected);
        let d = Diagnostic::error("E0006", "unexpected token").at(Span::new(4, 30), "here");
        let expected = "\
error[E0006]: unexpected token
 --> u.mlpl:1:5
  |
1 | m = chain(
  |     ^^^^^^ here
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn long_lines_are_shown_as_a_window_around_their_marks() {
        // A generated line of 4009 columns, an error at column 2001.
        let text = format!("x = {}y + {}1\n", "a + ".repeat(499), "b + ".repeat(500));
        let at = text.find('y').unwrap();
        let src = SourceFile::new("g.mlpl", &text);
        let d = Diagnostic::error("E0301", "unknown name `y`").at(Span::new(at, at + 1), "here");
        let out = render(&d, &src);
        let rows: Vec<&str> = out.lines().collect();
        assert_eq!(rows[1], format!(" --> g.mlpl:1:{}", at + 1));
        // The source row: the cut marks and 120 columns of the line between them.
        let line = rows[3].strip_prefix("1 | ").unwrap();
        assert!(line.starts_with("...") && line.ends_with("..."), "{line}");
        assert_eq!(line.chars().count(), MAX_LINE_WIDTH + 6);
        // The caret sits under the `y`, its label after it.
        let caret = rows[4].strip_prefix("  | ").unwrap();
        let col = caret.find('^').unwrap();
        assert_eq!(&line[col..col + 1], "y");
        assert_eq!(&caret[col..], "^ here");
        assert!(out.len() < 600, "{} bytes", out.len());
        // A mark near the end: the window ends with the line, no cut there.
        let at = text.len() - 2;
        let d = Diagnostic::error("E0006", "x").at(Span::new(at, at + 1), "");
        let out = render(&d, &src);
        let line = out.lines().nth(3).unwrap().strip_prefix("1 | ").unwrap();
        assert!(line.starts_with("...") && line.ends_with("b + 1"), "{line}");
        assert_eq!(line.chars().count(), MAX_LINE_WIDTH + 3);
        let caret = out.lines().nth(4).unwrap().strip_prefix("  | ").unwrap();
        assert_eq!(&line[caret.find('^').unwrap()..], "1");
        // A short line is shown whole, as before.
        let src = SourceFile::new("s.mlpl", "x = y\n");
        let d = Diagnostic::error("E0301", "unknown").at(Span::new(4, 5), "");
        assert!(render(&d, &src).contains("1 | x = y\n  |     ^\n"));
    }

    #[test]
    fn empty_spans_bad_offsets_and_tabs() {
        let text = "\tx = (1 +\r\ny";
        let src = SourceFile::new("t.mlpl", text);
        // An empty span at the end of line 1 gets one caret after the last character.
        let eol = text.find('\r').unwrap();
        let d = Diagnostic::error("E0006", "unexpected token")
            .at(Span::new(eol, eol), "expected an expression");
        let expected = "\
error[E0006]: unexpected token
 --> t.mlpl:1:10
  |
1 |     x = (1 +
  |             ^ expected an expression
";
        assert_eq!(render(&d, &src), expected);
        // Offsets past the end clamp to the end of the text.
        let d = Diagnostic::error("E0007", "x").at(Span::new(500, 400), "");
        let expected = "\
error[E0007]: x
 --> t.mlpl:2:2
  |
2 | y
  |  ^
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn warnings_line_offsets_and_spanless_diagnostics() {
        let text = "x = 3\nz = 2x\n";
        let src = SourceFile::new("doc.mlpl", text).with_line_offset(98);
        let d = Diagnostic::warning("W0001", "statements run together on one line")
            .at(span_of(text, "x", 1), "a new statement starts here")
            .help("write `2 * x`");
        let expected = "\
warning[W0001]: statements run together on one line
 --> doc.mlpl:100:6
    |
100 | z = 2x
    |      ^ a new statement starts here
    = help: write `2 * x`
";
        assert_eq!(render(&d, &src), expected);

        let d = Diagnostic::error(
            "E0501",
            "device mismatch in `matmul`: left operand is on cuda, right operand is on cpu",
        )
        .with_label(Span::new(0, 1), "ignored without a primary span")
        .note("first")
        .help("move one operand, for example `to_device(x, \"cuda\")`");
        let expected = "\
error[E0501]: device mismatch in `matmul`: left operand is on cuda, right operand is on cpu
  = note: first
  = help: move one operand, for example `to_device(x, \"cuda\")`
";
        assert_eq!(render(&d, &src), expected);
    }

    #[test]
    fn render_all_separates_with_blank_lines() {
        let src = SourceFile::new("a.mlpl", "x\n");
        let a = Diagnostic::error("E0101", "undefined name").at(Span::new(0, 1), "");
        let b = Diagnostic::warning("W0105", "variable shadows a builtin");
        let expected = "\
error[E0101]: undefined name
 --> a.mlpl:1:1
  |
1 | x
  | ^

warning[W0105]: variable shadows a builtin
";
        assert_eq!(render_all(&[a, b], &src), expected);
        assert_eq!(render_all(&[], &src), "");
    }

    #[test]
    fn colors() {
        let text = "y = x + w\n";
        let src = SourceFile::new("c.mlpl", text);
        let d = Diagnostic::error("E0201", "m")
            .at(span_of(text, "w", 0), "r")
            .with_label(span_of(text, "x", 0), "l")
            .note("n");
        let got = render_with(&d, &src, &RenderOptions { color: true });
        let expected = "\x1b[1;31merror[E0201]\x1b[0m\x1b[1m: m\x1b[0m\n\
            \x1b[1;34m --> \x1b[0mc.mlpl:1:5\n\
            \x20\x1b[1;34m |\x1b[0m\n\
            \x1b[1;34m1 |\x1b[0m y = x + w\n\
            \x20\x1b[1;34m |\x1b[0m     \x1b[1;34m- l \x1b[0m\x1b[1;31m^ r\x1b[0m\n\
            \x20\x1b[1;34m = \x1b[0m\x1b[1mnote\x1b[0m: n\n";
        assert_eq!(got, expected);
        let w = Diagnostic::warning("W0002", "this `-` subtracts");
        let got = render_with(&w, &src, &RenderOptions { color: true });
        assert!(got.starts_with("\x1b[1;33mwarning[W0002]\x1b[0m"));
        // Without colour there are no escape codes at all.
        assert!(!render(&d, &src).contains('\x1b'));
    }

    #[test]
    fn json_form() {
        let text = "y = x + w\n# é\nq = 1";
        let src = SourceFile::new("j.mlpl", text);
        let d = Diagnostic::error("E0201", "shapes do not broadcast in `+`")
            .at(span_of(text, "w", 0), "right operand: [3]")
            .with_label(span_of(text, "x", 0), "left operand: [2]")
            .note("n1")
            .help("h");
        let w = Diagnostic::warning("W0105", "variable shadows a builtin")
            .at(Span::new(text.len() - 5, text.len()), "");
        let spanless = Diagnostic::error("E0409", "run cancelled");
        let got = to_json(&[d, w, spanless], &src);
        let expected = serde_json::json!([
            {
                "code": "E0201", "severity": "error",
                "message": "shapes do not broadcast in `+`", "file": "j.mlpl",
                "line": 1, "column": 9, "end_line": 1, "end_column": 10,
                "label": "right operand: [3]",
                "labels": [{"line": 1, "column": 5, "end_line": 1, "end_column": 6,
                            "message": "left operand: [2]"}],
                "notes": ["n1"], "help": "h"
            },
            {
                "code": "W0105", "severity": "warning",
                "message": "variable shadows a builtin", "file": "j.mlpl",
                "line": 3, "column": 1, "end_line": 3, "end_column": 6,
                "label": null, "labels": [], "notes": [], "help": null
            },
            {
                "code": "E0409", "severity": "error", "message": "run cancelled",
                "file": "j.mlpl", "line": null, "column": null, "end_line": null,
                "end_column": null, "label": null, "labels": [], "notes": [], "help": null
            }
        ]);
        assert_eq!(got, expected);
    }

    #[test]
    fn snapshot_of_a_three_line_diagnostic() {
        let text = "W = param[3]\nX = ones([4])\nloss = sum(W * X)\n";
        let src = SourceFile::new("snap.mlpl", text);
        let d = Diagnostic::error("E0201", "shapes do not broadcast in `*`")
            .at(span_of(text, "X", 1), "right operand: [4]")
            .with_label(span_of(text, "W", 1), "left operand: [3]")
            .with_label(span_of(text, "param[3]", 0), "`W` gets its shape here")
            .note("axis -1 has size 3 on the left and 4 on the right")
            .help("make the sizes equal, or one of them 1");
        insta::assert_snapshot!(render(&d, &src), @r"
        error[E0201]: shapes do not broadcast in `*`
         --> snap.mlpl:3:12
          |
        1 | W = param[3]
          |     -------- `W` gets its shape here
        2 | X = ones([4])
        3 | loss = sum(W * X)
          |            -   ^ right operand: [4]
          |            |
          |            left operand: [3]
          = note: axis -1 has size 3 on the left and 4 on the right
          = help: make the sizes equal, or one of them 1
        ");
    }
}
