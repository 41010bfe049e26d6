//! The lexer (LANGUAGE §3): turns source text into [`Token`]s, reporting E0001–E0005.
//!
//! The lexer never stops early: every problem is reported and lexing continues with a
//! token that lets the parser carry on without follow-on errors (a malformed literal
//! still yields a literal, an unexpected character yields [`TokenKind::Unknown`]).

use crate::token::{Token, TokenKind};
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};

/// A `# %%` cell-marker line found while lexing (LANGUAGE §3.2).
#[derive(Clone, Debug, PartialEq)]
pub struct CellMarker {
    /// The marker line, without its line break.
    pub span: Span,
    /// The rest of the line after `# %%`, trimmed.
    pub title: String,
}

/// Everything the lexer produces.
#[derive(Clone, Debug, PartialEq)]
pub struct Lexed {
    /// The tokens, ending with [`TokenKind::Eof`].
    pub tokens: Vec<Token>,
    /// E0001–E0004 in source order.
    pub diagnostics: Vec<Diagnostic>,
    /// Cell-marker comment lines (outside strings), in source order.
    pub cell_markers: Vec<CellMarker>,
    /// Whether a string literal ran to the end of the input (E0003). The parser then
    /// does not report unclosed delimiters: their closers may be inside the string.
    pub unterminated_string: bool,
}

/// Decodes a source file: strips a leading UTF-8 byte order mark and reports invalid
/// UTF-8 as E0005. The span of the error is a byte range of `bytes` as given (the BOM
/// included); the diagnostic describes the first invalid sequence and counts the others.
#[allow(clippy::result_large_err)] // the API returns the diagnostic itself
pub fn decode_source(bytes: &[u8]) -> Result<String, Diagnostic> {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let offset = bytes.len() - body.len();
    match std::str::from_utf8(body) {
        Ok(text) => Ok(text.to_string()),
        Err(err) => {
            let start = err.valid_up_to();
            let len = err.error_len().unwrap_or(body.len() - start).max(1);
            let end = (start + len).min(body.len());
            let line = 1 + count_line_breaks(&body[..start]);
            let invalid_bytes: Vec<String> = body[start..end]
                .iter()
                .map(|b| format!("{b:#04x}"))
                .collect();
            let mut others = 0usize;
            let mut rest = &body[end..];
            while !rest.is_empty() {
                match std::str::from_utf8(rest) {
                    Ok(_) => break,
                    Err(e) => {
                        others += 1;
                        let skip = e.valid_up_to()
                            + e.error_len().unwrap_or(rest.len() - e.valid_up_to()).max(1);
                        rest = &rest[skip.min(rest.len())..];
                    }
                }
            }
            let mut diag = Diagnostic::of(code::E0005)
                .at(
                    Span::new(start + offset, end + offset),
                    format!(
                        "byte {} on line {line} is not valid UTF-8",
                        invalid_bytes.join(" ")
                    ),
                )
                .help("save the file as UTF-8");
            if others > 0 {
                diag = diag.note(format!(
                    "the file has {others} more invalid sequence{}",
                    if others == 1 { "" } else { "s" }
                ));
            }
            Err(diag)
        }
    }
}

fn count_line_breaks(bytes: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => n += 1,
            b'\r' => {
                n += 1;
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    n
}

/// Lexes a source text into tokens (ending with [`TokenKind::Eof`]) and lexical
/// diagnostics (E0001–E0004).
pub fn lex(src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let lexed = lex_full(src);
    (lexed.tokens, lexed.diagnostics)
}

/// Lexes a source text, also returning the cell markers it saw.
pub fn lex_full(src: &str) -> Lexed {
    let mut lexer = Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        line_start: 0,
        // About one token per four bytes of typical source: one allocation.
        tokens: Vec::with_capacity(src.len() / 4 + 1),
        diags: Vec::new(),
        brackets: Vec::new(),
        prev_value: false,
        markers: Vec::new(),
        unterminated: false,
    };
    lexer.run();
    Lexed {
        tokens: lexer.tokens,
        diagnostics: lexer.diags,
        cell_markers: lexer.markers,
        unterminated_string: lexer.unterminated,
    }
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Byte offset where the current line starts.
    line_start: usize,
    tokens: Vec<Token>,
    diags: Vec<Diagnostic>,
    /// Open brackets, innermost last (only to know whether newlines are significant).
    brackets: Vec<TokenKind>,
    /// Whether the previous significant token is a value token (§3.5).
    prev_value: bool,
    markers: Vec<CellMarker>,
    unterminated: bool,
}

fn is_digit(b: Option<&u8>) -> bool {
    matches!(b, Some(b'0'..=b'9'))
}

impl<'a> Lexer<'a> {
    fn byte(&self, i: usize) -> Option<&u8> {
        self.bytes.get(i)
    }

    fn char_at(&self, i: usize) -> Option<char> {
        self.src.get(i..).and_then(|s| s.chars().next())
    }

    fn in_parens(&self) -> bool {
        matches!(
            self.brackets.last(),
            Some(TokenKind::LParen | TokenKind::LBracket)
        )
    }

    fn push(&mut self, kind: TokenKind, start: usize, end: usize) {
        match &kind {
            TokenKind::Newline => {
                if !self.in_parens() {
                    self.prev_value = false;
                }
            }
            k => {
                self.prev_value = k.is_value();
                if k.is_opener() {
                    self.brackets.push(k.clone());
                } else if k.is_closer() {
                    let opener = k.partner();
                    if let Some(i) = self
                        .brackets
                        .iter()
                        .rposition(|b| Some(b) == opener.as_ref())
                    {
                        self.brackets.truncate(i);
                    }
                }
            }
        }
        self.tokens.push(Token {
            kind,
            span: Span::new(start, end),
        });
    }

    fn error(&mut self, diag: Diagnostic) {
        self.diags.push(diag);
    }

    fn line_end(&self, from: usize) -> usize {
        self.bytes[from..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .map_or(self.bytes.len(), |p| from + p)
    }

    fn run(&mut self) {
        if self.src.starts_with('\u{feff}') {
            self.pos = 3;
            self.line_start = 3;
        }
        while self.pos < self.bytes.len() {
            let start = self.pos;
            let b = self.bytes[start];
            match b {
                b' ' | b'\t' => self.pos += 1,
                b'\n' => {
                    self.pos += 1;
                    self.line_start = self.pos;
                    self.push(TokenKind::Newline, start, self.pos);
                }
                b'\r' => {
                    self.pos += if self.byte(start + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    };
                    self.line_start = self.pos;
                    self.push(TokenKind::Newline, start, self.pos);
                }
                b'#' => self.comment(),
                b'0'..=b'9' => self.number(start),
                b'.' if is_digit(self.byte(start + 1)) => self.number(start),
                b'-' if is_digit(self.byte(start + 1)) && !self.prev_value => self.number(start),
                b'"' => self.string(),
                b'a'..=b'z' | b'A'..=b'Z' | b'_' => self.ident(),
                _ => self.punct_or_unknown(),
            }
        }
        let end = self.bytes.len();
        self.tokens.push(Token {
            kind: TokenKind::Eof,
            span: Span::new(end, end),
        });
    }

    fn comment(&mut self) {
        let start = self.pos;
        let end = self.line_end(start);
        let text = &self.src[start..end];
        if start == self.line_start && text.starts_with("# %%") {
            self.markers.push(CellMarker {
                span: Span::new(start, end),
                title: text[4..].trim().to_string(),
            });
        }
        self.pos = end;
    }

    /// `digits = DIGIT { [ "_" ] DIGIT }` starting at `i` (a digit).
    fn digits(&self, mut i: usize) -> usize {
        loop {
            match self.byte(i) {
                Some(b'0'..=b'9') => i += 1,
                Some(b'_') if is_digit(self.byte(i + 1)) => i += 2,
                _ => return i,
            }
        }
    }

    fn number(&mut self, start: usize) {
        let mut i = start;
        if self.bytes[i] == b'-' {
            i += 1;
        }
        let mut leading_dot = false;
        let mut trailing_dot = false;
        if self.bytes[i] == b'.' {
            leading_dot = true;
            i = self.digits(i + 1);
        } else {
            i = self.digits(i);
            if self.byte(i) == Some(&b'.') {
                if is_digit(self.byte(i + 1)) {
                    i = self.digits(i + 1);
                } else {
                    trailing_dot = true;
                    i += 1;
                }
            }
        }
        let mantissa_end = i;
        if matches!(self.byte(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(self.byte(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if is_digit(self.byte(j)) {
                i = self.digits(j);
            }
        }
        self.pos = i;
        let text = &self.src[start..i];
        let mut fixed = String::with_capacity(text.len() + 1);
        if leading_dot {
            fixed.push('0');
        }
        fixed.push_str(&self.src[start..mantissa_end]);
        if trailing_dot {
            fixed.push('0');
        }
        fixed.push_str(&self.src[mantissa_end..i]);
        let clean: String = fixed.chars().filter(|&c| c != '_').collect();
        let value: f64 = clean.parse().unwrap_or(f64::INFINITY);
        let span = Span::new(start, i);
        if leading_dot || trailing_dot {
            let label = if leading_dot {
                "a decimal point needs a digit before it"
            } else {
                "a decimal point needs a digit after it"
            };
            self.error(
                Diagnostic::of(code::E0002)
                    .at(span, label)
                    .help(format!("write `{fixed}`")),
            );
        }
        if value.is_finite() {
            self.push(TokenKind::Number(value), start, i);
        } else {
            self.error(
                Diagnostic::of(code::E0002)
                    .at(span, "this number is too large to be represented")
                    .note(format!(
                        "`{text}` rounds to infinity; the largest finite number is about 1.7976931348623157e308"
                    )),
            );
            self.push(TokenKind::BadNumber, start, i);
        }
    }

    fn string(&mut self) {
        let start = self.pos;
        let mut i = start + 1;
        let mut value = String::new();
        let mut saw_newline = false;
        loop {
            let Some(c) = self.char_at(i) else {
                let mut diag = Diagnostic::of(code::E0003)
                    .at(Span::new(start, start + 1), "this string is never closed")
                    .help("add the closing `\"`");
                if saw_newline {
                    diag = diag
                        .note("strings may span lines, so this one runs to the end of the input");
                }
                self.error(diag);
                self.unterminated = true;
                break;
            };
            match c {
                '"' => {
                    i += 1;
                    break;
                }
                '\\' => {
                    let Some(n) = self.char_at(i + 1) else {
                        i += 1;
                        continue;
                    };
                    let resolved = match n {
                        '"' => Some('"'),
                        '\\' => Some('\\'),
                        'n' => Some('\n'),
                        't' => Some('\t'),
                        'r' => Some('\r'),
                        _ => None,
                    };
                    if let Some(r) = resolved {
                        value.push(r);
                        i += 2;
                        continue;
                    }
                    let mut esc_end = i + 1 + n.len_utf8();
                    if n == '\r' && self.byte(esc_end) == Some(&b'\n') {
                        esc_end += 1;
                    }
                    let shown = match n {
                        '\r' | '\n' => "a line break".to_string(),
                        c => format!("`\\{c}`"),
                    };
                    let mut diag = Diagnostic::of(code::E0004)
                        .at(Span::new(i, esc_end), format!("{shown} is not an escape"))
                        .note("the escapes are `\\\"` `\\\\` `\\n` `\\t` `\\r`");
                    diag = match n {
                        'u' | 'x' | '0' => diag
                            .help("write the character itself; strings may contain any UTF-8 text"),
                        '\r' | '\n' => {
                            diag.help("strings may contain line breaks; remove the `\\`")
                        }
                        _ => diag.help("write `\\\\` for a backslash"),
                    };
                    self.error(diag);
                    value.push('\\');
                    if n == '\r' || n == '\n' {
                        value.push('\n');
                        saw_newline = true;
                    } else {
                        value.push(n);
                    }
                    i = esc_end;
                }
                '\r' => {
                    value.push('\n');
                    saw_newline = true;
                    i += if self.byte(i + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    };
                }
                c => {
                    if c == '\n' {
                        saw_newline = true;
                    }
                    value.push(c);
                    i += c.len_utf8();
                }
            }
        }
        let end = i.min(self.bytes.len());
        // Keep the line start current so a `# %%` or `:` after the string is judged
        // by its own line.
        if let Some(p) = self.bytes[start..end]
            .iter()
            .rposition(|&b| b == b'\n' || b == b'\r')
        {
            self.line_start = start + p + 1;
        }
        self.pos = end;
        self.push(TokenKind::Str(value), start, end);
    }

    fn ident(&mut self) {
        let start = self.pos;
        let mut i = start;
        while matches!(
            self.byte(i),
            Some(b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_')
        ) {
            i += 1;
        }
        self.pos = i;
        let word = &self.src[start..i];
        let kind = TokenKind::keyword(word).unwrap_or_else(|| TokenKind::Ident(word.to_string()));
        self.push(kind, start, i);
    }

    fn unknown(
        &mut self,
        start: usize,
        end: usize,
        label: impl Into<String>,
        help: Option<String>,
    ) {
        let text = &self.src[start..end];
        let mut diag = Diagnostic::error(
            code::E0001,
            format!("unexpected character `{}`", text.escape_debug()),
        )
        .at(Span::new(start, end), label);
        if let Some(help) = help {
            diag = diag.help(help);
        }
        self.error(diag);
        self.push(TokenKind::Unknown, start, end);
    }

    fn punct_or_unknown(&mut self) {
        let start = self.pos;
        let c = self.char_at(start).unwrap_or('\0');
        let next = self.byte(start + c.len_utf8()).copied();
        if c == '-' && next == Some(b'>') {
            self.pos = start + 2;
            self.push(TokenKind::Arrow, start, start + 2);
            return;
        }
        let simple = match c {
            '(' => Some(TokenKind::LParen),
            ')' => Some(TokenKind::RParen),
            '[' => Some(TokenKind::LBracket),
            ']' => Some(TokenKind::RBracket),
            '{' => Some(TokenKind::LBrace),
            '}' => Some(TokenKind::RBrace),
            ',' => Some(TokenKind::Comma),
            ';' => Some(TokenKind::Semi),
            '=' if next != Some(b'=') => Some(TokenKind::Eq),
            '+' | '-' | '*' | '/' if next == Some(b'=') => None,
            '+' => Some(TokenKind::Plus),
            '-' => Some(TokenKind::Minus),
            '*' if next != Some(b'*') => Some(TokenKind::Star),
            '/' if next != Some(b'/') => Some(TokenKind::Slash),
            ':' if !self.at_line_start(start) => Some(TokenKind::Colon),
            _ => None,
        };
        if let Some(kind) = simple {
            self.pos = start + 1;
            self.push(kind, start, start + 1);
            return;
        }
        let two = |s: &str| Some(s.to_string());
        let (len, label, help): (usize, &str, Option<String>) = match (c, next) {
            ('=', Some(b'=')) => (2, "there is no `==` operator", two("use `eq(a, b)`: 1 where equal, 0 elsewhere")),
            ('+' | '-' | '*' | '/', Some(b'=')) => {
                let op = c;
                (2, "there is no compound assignment", Some(format!("write `x = x {op} value`")))
            }
            ('*', Some(b'*')) => (2, "there is no power operator", two("use `pow(a, b)`")),
            ('/', Some(b'/')) => {
                if self.at_line_start(start) {
                    let end = self.line_end(start);
                    self.pos = end;
                    self.unknown(start, end, "`//` does not start a comment", two("comments start with `#`"));
                    return;
                }
                (2, "there is no `//` operator", two("comments start with `#`; for division write `a / b`"))
            }
            ('^', _) => (1, "there is no power operator", two("use `pow(a, b)`")),
            ('%', Some(b'=')) => (2, "there is no remainder operator", None),
            ('%', _) => (1, "there is no remainder operator", two("compute it with arithmetic, e.g. `a - b * n`")),
            ('<', Some(b'=')) => (2, "there are no comparison operators", two("use `1 - gt(a, b)`")),
            ('>', Some(b'=')) => (2, "there are no comparison operators", two("use `1 - lt(a, b)`")),
            ('<', _) => (1, "there are no comparison operators", two("use `lt(a, b)`: 1 where a < b, 0 elsewhere")),
            ('>', _) => (1, "there are no comparison operators", two("use `gt(a, b)`: 1 where a > b, 0 elsewhere")),
            ('!', Some(b'=')) => (2, "there are no comparison operators", two("use `1 - eq(a, b)`")),
            ('!', _) => (1, "there are no logical operators", two("for a 0/1 mask `m`, `1 - m` is its negation")),
            ('&', Some(b'&')) | ('&', _) => {
                let len = if next == Some(b'&') { 2 } else { 1 };
                (len, "there are no logical operators", two("for 0/1 masks, `a * b` is the logical and"))
            }
            ('|', _) => {
                let len = if next == Some(b'|') { 2 } else { 1 };
                (len, "there are no logical operators", two("for 0/1 masks, `gt(a + b, 0)` is the logical or"))
            }
            ('@', _) => (1, "there is no `@` operator", two("use `matmul(a, b)` for a matrix product")),
            ('.', _) => (
                1,
                "there is no member access or method call",
                two("call a builtin with the value as an argument, e.g. `shape(x)`"),
            ),
            ('\\', _) => (
                1,
                "there is no line continuation",
                two("newlines inside `( )` and `[ ]` are whitespace; break the line inside brackets"),
            ),
            (':', _) => {
                let end = self.line_end(start);
                let end = self.src[start..end].find('#').map_or(end, |p| start + p);
                let end = start + self.src[start..end].trim_end().len();
                self.pos = end;
                let cmd = self.src[start..end].split_whitespace().next().unwrap_or(":");
                let help = match cmd {
                    ":vars" | ":models" | ":tokenizers" | ":wsid" => "the editor's Variables view lists the workspace",
                    ":describe" => "hover over a name in the editor to describe it",
                    ":trace" => "use `mlpl run --trace FILE.json`",
                    ":clear" => "use the editor's \"Restart Workspace\" command",
                    ":version" => "use `mlpl --version`",
                    ":help" | ":builtins" | ":fns" => "use completion and hover in the editor, or `mlpl explain CODE`",
                    _ => "REPL commands are not MLPL syntax (LANGUAGE §21.3 lists the equivalents)",
                };
                let label = format!("`{cmd}` is a REPL command, not MLPL syntax");
                self.unknown(start, end.max(start + 1), label, Some(help.to_string()));
                return;
            }
            ('\'' | '\u{2018}' | '\u{201c}', _) => {
                if self.quoted(start, c) {
                    return;
                }
                if c == '\'' {
                    (1, "there are no single quotes", two("strings use double quotes; a transpose is `transpose(x)`"))
                } else {
                    (c.len_utf8(), "this is not an ASCII quote", two("strings use ASCII double quotes `\"`"))
                }
            }
            ('\u{2019}' | '\u{201d}' | '\u{201e}', _) => {
                (c.len_utf8(), "this is not an ASCII quote", two("strings use ASCII double quotes `\"`"))
            }
            ('\u{2212}' | '\u{2013}' | '\u{2014}', _) => (3, "this is not an ASCII minus", two("use `-`")),
            ('\u{d7}' | '\u{b7}' | '\u{22c5}', _) => {
                (c.len_utf8(), "this is not an ASCII operator", two("use `*` to multiply"))
            }
            ('\u{f7}', _) => (2, "this is not an ASCII operator", two("use `/` to divide")),
            ('\u{2264}', _) => (3, "there are no comparison operators", two("use `1 - gt(a, b)`")),
            ('\u{2265}', _) => (3, "there are no comparison operators", two("use `1 - lt(a, b)`")),
            ('\u{2260}', _) => (3, "there are no comparison operators", two("use `1 - eq(a, b)`")),
            _ => {
                // A run of characters with nothing better to say about them.
                let mut end = start;
                while let Some(ch) = self.char_at(end) {
                    if !is_generic_unknown(ch) {
                        break;
                    }
                    end += ch.len_utf8();
                }
                let end = end.max(start + c.len_utf8());
                self.pos = end;
                let (label, help) = if c.is_whitespace() {
                    ("this is not a space or a tab", Some("use a regular space".to_string()))
                } else if c.is_alphabetic() {
                    ("identifiers are ASCII", Some("use ASCII letters, digits and `_` in names".to_string()))
                } else {
                    ("this character starts no token", None)
                };
                self.unknown(start, end, label, help);
                return;
            }
        };
        let mut end = start + len;
        if len == 1 {
            // `%%`, `@@`, `!!`: one diagnostic for a run of the same character.
            while self.byte(end) == Some(&self.bytes[start]) {
                end += 1;
            }
        }
        self.pos = end;
        self.unknown(start, end, label, help);
    }

    /// `'text'`, `‘text’` or `“text”` on one line: one E0001 and a string token.
    fn quoted(&mut self, start: usize, open: char) -> bool {
        if open == '\'' && self.prev_value {
            return false;
        }
        let body = start + open.len_utf8();
        let end_of_line = self.line_end(body);
        let closers: &[char] = match open {
            '\'' => &['\''],
            '\u{2018}' => &['\u{2019}', '\u{2018}'],
            _ => &['\u{201d}', '\u{201c}'],
        };
        let Some(p) = self.src[body..end_of_line].find(closers) else {
            return false;
        };
        let close = self.char_at(body + p).unwrap_or('\'');
        let end = body + p + close.len_utf8();
        let content = self.src[body..body + p].to_string();
        let label = if open == '\'' {
            "strings use double quotes"
        } else {
            "these are not ASCII quotes"
        };
        self.error(
            Diagnostic::error(code::E0001, format!("unexpected character `{open}`"))
                .at(Span::new(start, end), label)
                .help(format!("write `\"{content}\"`")),
        );
        self.pos = end;
        self.push(TokenKind::Str(content), start, end);
        true
    }

    fn at_line_start(&self, pos: usize) -> bool {
        self.src[self.line_start.min(pos)..pos]
            .bytes()
            .all(|b| b == b' ' || b == b'\t')
    }
}

/// Characters reported together in one E0001 when they appear in a run.
fn is_generic_unknown(c: char) -> bool {
    if c.is_ascii() {
        return matches!(c, '$' | '?' | '~' | '`')
            || (c.is_ascii_control() && !matches!(c, '\n' | '\r' | '\t'));
    }
    !matches!(
        c,
        '\u{2018}'
            | '\u{2019}'
            | '\u{201c}'
            | '\u{201d}'
            | '\u{201e}'
            | '\u{2212}'
            | '\u{2013}'
            | '\u{2014}'
            | '\u{d7}'
            | '\u{b7}'
            | '\u{22c5}'
            | '\u{f7}'
            | '\u{2264}'
            | '\u{2265}'
            | '\u{2260}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        let (tokens, diags) = lex(src);
        assert!(
            diags.is_empty(),
            "unexpected diagnostics for {src:?}: {diags:#?}"
        );
        tokens
            .into_iter()
            .map(|t| t.kind)
            .filter(|k| *k != TokenKind::Eof)
            .collect()
    }

    fn codes(src: &str) -> Vec<&'static str> {
        lex(src).1.iter().map(|d| d.code).collect()
    }

    fn num(src: &str) -> f64 {
        match kinds(src).as_slice() {
            [TokenKind::Number(v)] => *v,
            other => panic!("{src:?} lexed as {other:?}"),
        }
    }

    use TokenKind::*;

    #[test]
    fn plain_numbers() {
        assert_eq!(num("0"), 0.0);
        assert_eq!(num("42"), 42.0);
        assert_eq!(num("3.25"), 3.25);
        assert_eq!(num("007"), 7.0);
    }

    #[test]
    fn exponents() {
        assert_eq!(num("1e-4"), 1e-4);
        assert_eq!(num("2.5E3"), 2500.0);
        assert_eq!(num("1e5"), 1e5);
        assert_eq!(num("6.02e+23"), 6.02e23);
        assert_eq!(num("1e-400"), 0.0);
    }

    #[test]
    fn exponent_needs_a_digit() {
        assert_eq!(kinds("2e"), vec![Number(2.0), Ident("e".into())]);
        assert_eq!(kinds("2e+"), vec![Number(2.0), Ident("e".into()), Plus]);
        assert_eq!(kinds("2ex"), vec![Number(2.0), Ident("ex".into())]);
        assert_eq!(
            kinds("2E-x"),
            vec![Number(2.0), Ident("E".into()), Minus, Ident("x".into())]
        );
    }

    #[test]
    fn underscores_between_digits() {
        assert_eq!(num("4_000_000_000"), 4e9);
        assert_eq!(num("1_000.000_1"), 1000.0001);
        assert_eq!(num("1e1_0"), 1e10);
        assert_eq!(kinds("1_"), vec![Number(1.0), Ident("_".into())]);
        assert_eq!(kinds("1__0"), vec![Number(1.0), Ident("__0".into())]);
        assert_eq!(kinds("1_e5"), vec![Number(1.0), Ident("_e5".into())]);
    }

    #[test]
    fn big_integers_are_fine() {
        assert_eq!(num("18446744073709551616"), 18446744073709551616.0);
        assert_eq!(num("9223372036854775808"), 9223372036854775808.0);
        assert_eq!(num("123456789012345678901234567890"), 1.2345678901234568e29);
    }

    #[test]
    fn decimal_point_needs_digits_on_both_sides() {
        let (tokens, diags) = lex("1.");
        assert_eq!(tokens[0].kind, Number(1.0));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, code::E0002);
        assert_eq!(diags[0].help.as_deref(), Some("write `1.0`"));
        assert_eq!(diags[0].primary.as_ref().unwrap().span, Span::new(0, 2));

        let (tokens, diags) = lex("x = .5");
        assert_eq!(tokens[2].kind, Number(0.5));
        assert_eq!(diags[0].code, code::E0002);
        assert_eq!(diags[0].help.as_deref(), Some("write `0.5`"));
        assert_eq!(diags[0].primary.as_ref().unwrap().span, Span::new(4, 6));

        let (_, diags) = lex("1.e5");
        assert_eq!(diags[0].help.as_deref(), Some("write `1.0e5`"));
    }

    #[test]
    fn non_finite_literal() {
        let (tokens, diags) = lex("1e400");
        assert_eq!(tokens[0].kind, BadNumber);
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, code::E0002);
        assert_eq!(codes("1e308"), Vec::<&str>::new());
        let digits = "9".repeat(400);
        assert_eq!(codes(&digits), vec![code::E0002]);
    }

    #[test]
    fn negative_literals() {
        // After a value token `-` is an operator.
        assert_eq!(kinds("x -1"), vec![Ident("x".into()), Minus, Number(1.0)]);
        assert_eq!(kinds("x-1"), vec![Ident("x".into()), Minus, Number(1.0)]);
        assert_eq!(kinds("2 -1"), vec![Number(2.0), Minus, Number(1.0)]);
        assert_eq!(
            kinds("f(x) -1"),
            vec![
                Ident("f".into()),
                LParen,
                Ident("x".into()),
                RParen,
                Minus,
                Number(1.0)
            ]
        );
        assert_eq!(
            kinds("[1 -2]"),
            vec![LBracket, Number(1.0), Minus, Number(2.0), RBracket]
        );
        assert_eq!(kinds("\"s\" -1"), vec![Str("s".into()), Minus, Number(1.0)]);
        // Otherwise it joins the literal.
        assert_eq!(
            kinds("f(-1)"),
            vec![Ident("f".into()), LParen, Number(-1.0), RParen]
        );
        assert_eq!(
            kinds("[1, -2]"),
            vec![LBracket, Number(1.0), Comma, Number(-2.0), RBracket]
        );
        assert_eq!(
            kinds("repeat -1 { }"),
            vec![Repeat, Number(-1.0), LBrace, RBrace]
        );
        assert_eq!(
            kinds("x = -1e3"),
            vec![Ident("x".into()), Eq, Number(-1000.0)]
        );
        assert_eq!(kinds("2 * -3"), vec![Number(2.0), Star, Number(-3.0)]);
        // `- 2` is unary minus (not a literal).
        assert_eq!(kinds("- 2"), vec![Minus, Number(2.0)]);
        // A newline at statement level is significant and not a value.
        assert_eq!(
            kinds("a = 3\n-1"),
            vec![Ident("a".into()), Eq, Number(3.0), Newline, Number(-1.0)]
        );
        // Inside brackets newlines are not significant.
        assert_eq!(
            kinds("[1\n-2]"),
            vec![LBracket, Number(1.0), Newline, Minus, Number(2.0), RBracket]
        );
        // Directly inside braces they are.
        assert_eq!(
            kinds("{ x\n-1 }"),
            vec![LBrace, Ident("x".into()), Newline, Number(-1.0), RBrace]
        );
        // A keyword is not a value token.
        assert_eq!(kinds("in -1"), vec![In, Number(-1.0)]);
    }

    #[test]
    fn line_breaks() {
        let (tokens, _) = lex("a\r\nb\rc\nd");
        let nl: Vec<Span> = tokens
            .iter()
            .filter(|t| t.kind == Newline)
            .map(|t| t.span)
            .collect();
        assert_eq!(nl, vec![Span::new(1, 3), Span::new(4, 5), Span::new(6, 7)]);
    }

    #[test]
    fn identifiers_and_keywords() {
        assert_eq!(
            kinds("repeat train for in experiment device param tensor _x x1 Repeat"),
            vec![
                Repeat,
                Train,
                For,
                In,
                Experiment,
                Device,
                Ident("param".into()),
                Ident("tensor".into()),
                Ident("_x".into()),
                Ident("x1".into()),
                Ident("Repeat".into())
            ]
        );
    }

    #[test]
    fn every_listed_keyword_lexes_as_its_own_token() {
        for word in crate::token::KEYWORDS {
            let kind = TokenKind::keyword(word).expect("a keyword");
            assert_eq!(kind.keyword_str(), Some(word));
            assert_eq!(kinds(word), vec![kind]);
        }
    }

    #[test]
    fn punctuation() {
        assert_eq!(
            kinds("( ) [ ] { } , = : ; + - * /"),
            vec![
                LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Eq, Colon, Semi, Plus,
                Minus, Star, Slash
            ]
        );
    }

    #[test]
    fn comments_and_markers() {
        assert_eq!(
            kinds("x # a comment \"not a string\"\ny"),
            vec![Ident("x".into()), Newline, Ident("y".into())]
        );
        let lexed = lex_full("# %% First cell \nx\n  # %% not a marker\n# %%\n");
        assert_eq!(lexed.cell_markers.len(), 2);
        assert_eq!(lexed.cell_markers[0].title, "First cell");
        assert_eq!(lexed.cell_markers[0].span, Span::new(0, 16));
        assert_eq!(lexed.cell_markers[1].title, "");
        // A marker-looking line inside a string is text.
        assert!(lex_full("s = \"\n# %% x\n\"").cell_markers.is_empty());
    }

    #[test]
    fn strings() {
        assert_eq!(
            kinds(r#""a\"b\\c\nd\te\rf""#),
            vec![Str("a\"b\\c\nd\te\rf".into())]
        );
        assert_eq!(kinds("\"a # b\""), vec![Str("a # b".into())]);
        assert_eq!(
            kinds("\"line1\r\nline2\rline3\nx\""),
            vec![Str("line1\nline2\nline3\nx".into())]
        );
        assert_eq!(kinds("\"héllo ✓\""), vec![Str("héllo ✓".into())]);
    }

    #[test]
    fn string_errors() {
        let (tokens, diags) = lex("x = \"abc");
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, code::E0003);
        assert_eq!(diags[0].primary.as_ref().unwrap().span, Span::new(4, 5));
        assert_eq!(tokens[2].kind, Str("abc".into()));

        let (tokens, diags) = lex(r#""a\qb""#);
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, code::E0004);
        assert_eq!(diags[0].primary.as_ref().unwrap().span, Span::new(2, 4));
        assert_eq!(tokens[0].kind, Str("a\\qb".into()));
        assert_eq!(codes(r#""\u{41}" "\é""#), vec![code::E0004, code::E0004]);
        assert_eq!(codes("\"\\"), vec![code::E0003]);
    }

    #[test]
    fn unexpected_characters() {
        for (src, needle) in [
            ("a == b", "eq"),
            ("a < b", "lt"),
            ("a > b", "gt"),
            ("a ** 2", "pow"),
            ("a ^ 2", "pow"),
            ("a @ b", "matmul"),
            ("x.shape", "shape("),
            ("a' ", "transpose"),
            ("!m", "1 - m"),
            ("a & b", "a * b"),
            ("a | b", "gt(a + b, 0)"),
            ("x += 1", "x = x + value"),
        ] {
            let (_, diags) = lex(src);
            assert_eq!(diags.len(), 1, "{src}: {diags:?}");
            assert_eq!(diags[0].code, code::E0001, "{src}");
            let help = diags[0].help.clone().unwrap_or_default();
            assert!(
                help.contains(needle),
                "{src}: help {help:?} should mention {needle:?}"
            );
        }
        assert_eq!(codes("a % b"), vec![code::E0001]);
        assert_eq!(codes("$$$ ok"), vec![code::E0001]);
        assert_eq!(codes("x\u{a0}= 1"), vec![code::E0001]);
    }

    #[test]
    fn repl_command_line() {
        let (tokens, diags) = lex(":vars # hi\nx");
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, code::E0001);
        assert_eq!(diags[0].primary.as_ref().unwrap().span, Span::new(0, 5));
        assert_eq!(tokens[0].kind, Unknown);
        assert_eq!(tokens[1].kind, Newline);
        // Not at line start it is a colon.
        assert_eq!(kinds("x : [a] = 1")[1], Colon);
    }

    #[test]
    fn single_quotes_recover_as_a_string() {
        let (tokens, diags) = lex("x = 'abc'");
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].help.as_deref(), Some("write `\"abc\"`"));
        assert_eq!(tokens[2].kind, Str("abc".into()));
    }

    #[test]
    fn decode() {
        assert_eq!(decode_source(b"\xEF\xBB\xBFx = 1").unwrap(), "x = 1");
        assert_eq!(decode_source(b"x = 1").unwrap(), "x = 1");
        let err = decode_source(b"x = 1\ny = \"\xff\xfe\"").unwrap_err();
        assert_eq!(err.code, code::E0005);
        assert_eq!(err.primary.as_ref().unwrap().span, Span::new(11, 12));
        assert!(err.notes[0].contains("1 more"));
        let err = decode_source(b"\xEF\xBB\xBF\xc3").unwrap_err();
        assert_eq!(err.primary.unwrap().span, Span::new(3, 4));
    }

    #[test]
    fn bom_in_text_is_ignored() {
        assert_eq!(kinds("\u{feff}x"), vec![Ident("x".into())]);
        assert_eq!(lex_full("\u{feff}# %% a\n").cell_markers.len(), 1);
    }
}
