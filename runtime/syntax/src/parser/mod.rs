//! The parser (LANGUAGE §4): recursive descent over the tokens of the [lexer], with
//! error recovery at statement and bracket boundaries.
//!
//! Parsing happens in two passes. A bracket pass pairs every `(` `[` `{` with its
//! closer (reporting E0007 for unclosed openers, E0008 for unmatched closers, which it
//! then drops, and W0003 for cell markers inside brackets). The recursive-descent pass
//! then knows where every group ends, so after a mistake it can skip to the next `,`
//! or to the group's closer, or to the end of the statement, without reporting
//! anything more for the same mistake.
//!
//! Nesting (brackets, blocks, calls, lists and unary minus) is limited to
//! [`MAX_DEPTH`] levels; deeper input gets one E0006 and is skipped, so the parser
//! and every consumer of the tree stay within a small stack.
//!
//! Layout: this module holds the entry point and the token cursor with its error
//! recovery; `brackets` is the bracket pass, `stmt` and `expr` the recursive
//! descent over statements and expressions.

use crate::ast::*;
use crate::lexer::lex_full;
use crate::token::{Token, TokenKind};
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};

/// How deeply brackets, blocks, calls, lists and unary minus may nest (a chain of
/// operators of one level, however long, is one node: [`ExprKind::Chain`]).
pub const MAX_DEPTH: usize = 256;

/// The result of parsing: a program (always, possibly with error nodes) and every
/// lexical and syntax diagnostic, sorted by position.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    /// The syntax tree. Statements and expressions that could not be parsed are
    /// [`StmtKind::Error`] and [`ExprKind::Error`].
    pub program: Program,
    /// Errors and warnings in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Parsed {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses a whole file or cell. Never panics; terminates on any input.
pub fn parse(src: &str) -> Parsed {
    let mut lexed = lex_full(src);
    let mut diagnostics = std::mem::take(&mut lexed.diagnostics);
    let mut pairs = pair_brackets(&lexed);
    diagnostics.append(&mut pairs.diagnostics);
    let (toks, close) = keep_matched(lexed.tokens, &pairs);
    let mut p = Parser {
        src,
        toks,
        close,
        pos: 0,
        last: None,
        ctx: Vec::new(),
        diags: Vec::new(),
        errs: 0,
        depth: 0,
        deep_reported: false,
        skipped_deep: false,
        flagged: diagnostics
            .iter()
            .filter(|d| d.is_error())
            .filter_map(|d| d.primary.as_ref().map(|l| l.span.start))
            .collect(),
        quiet_block: false,
        in_header: false,
    };
    let mut stmts = p.parse_stmts(false);
    // parse_stmts(false) only returns at the end of input; be defensive anyway.
    while p.peek() != &TokenKind::Eof {
        p.bump();
        stmts.extend(p.parse_stmts(false));
    }
    diagnostics.extend(p.diags);
    diagnostics.sort_by_key(|d| d.primary.as_ref().map_or(usize::MAX, |l| l.span.start));
    Parsed {
        program: Program {
            stmts,
            span: Span::new(0, src.len()),
        },
        diagnostics,
    }
}

mod brackets;
mod expr;
mod func;
mod stmt;
#[cfg(test)]
mod tests;

use brackets::*;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    /// For each paired bracket token, the index of its partner.
    close: Vec<Option<usize>>,
    /// Next token (may point at a newline that the current context skips).
    pos: usize,
    /// Index of the last consumed token.
    last: Option<usize>,
    /// Innermost last: `true` where newlines are whitespace (inside `(` and `[`).
    ctx: Vec<bool>,
    diags: Vec<Diagnostic>,
    /// Number of errors met so far, including already-reported lexical ones that the
    /// parser consumed. Used to suppress follow-on diagnostics.
    errs: usize,
    depth: usize,
    deep_reported: bool,
    /// Set when input was skipped after a too-deep diagnostic; cleared at the next
    /// top-level statement.
    skipped_deep: bool,
    /// Start offsets where an error has been reported (by the lexer, the bracket pass
    /// or the parser itself): no second error is reported there.
    flagged: std::collections::HashSet<usize>,
    /// Inside a loop statement that was parsed only to recover from E0010: a missing
    /// block is not reported again.
    quiet_block: bool,
    /// Parsing a loop header's expression (see [`Parser::parse_header_expr`]).
    in_header: bool,
}

type K = TokenKind;

fn can_start_expr(k: &TokenKind) -> bool {
    matches!(
        k,
        K::Number(_)
            | K::BadNumber
            | K::Str(_)
            | K::Ident(_)
            | K::LParen
            | K::LBracket
            | K::Minus
            | K::Device
            | K::Unknown
    )
}

fn error_expr(span: Span) -> Expr {
    Expr {
        kind: ExprKind::Error,
        span,
    }
}

impl<'a> Parser<'a> {
    // ----- token access ----------------------------------------------------------

    pub(super) fn skips_newlines(&self) -> bool {
        self.ctx.last().copied().unwrap_or(false)
    }

    /// Index of the next significant token.
    pub(super) fn idx(&self) -> usize {
        let mut i = self.pos;
        if self.skips_newlines() {
            while self.toks[i].kind == K::Newline {
                i += 1;
            }
        }
        i
    }

    pub(super) fn peek(&self) -> &TokenKind {
        &self.toks[self.idx()].kind
    }

    pub(super) fn peek_tok(&self) -> &Token {
        &self.toks[self.idx()]
    }

    /// The token after the next one, with the same newline rule.
    pub(super) fn peek2(&self) -> &TokenKind {
        let i = self.idx();
        if self.toks[i].kind == K::Eof {
            return &self.toks[i].kind;
        }
        let mut j = i + 1;
        if self.skips_newlines() {
            while self.toks[j].kind == K::Newline {
                j += 1;
            }
        }
        &self.toks[j].kind
    }

    /// Whether newlines were skipped before the next token.
    pub(super) fn newline_before(&self) -> bool {
        self.idx() > self.pos
    }

    /// Consumes the next token and returns a copy of it.
    pub(super) fn bump(&mut self) -> Token {
        let i = self.idx();
        let t = self.toks[i].clone();
        self.advance();
        t
    }

    /// Consumes the next token (without copying it).
    pub(super) fn advance(&mut self) {
        let i = self.idx();
        if self.toks[i].kind != K::Eof {
            self.pos = i + 1;
            self.last = Some(i);
        }
    }

    pub(super) fn text(&self, span: Span) -> &'a str {
        self.src.get(span.start..span.end).unwrap_or("")
    }

    /// From the token at `start` to the last consumed token.
    pub(super) fn span_from(&self, start: usize) -> Span {
        let s = self.toks[start].span;
        match self.last {
            Some(l) if l >= start => s.to(self.toks[l].span),
            _ => s,
        }
    }

    /// Where to point when the next token is unexpected: the token itself, or for
    /// a line end / end of input, the token before it.
    pub(super) fn found_span(&self) -> (Span, bool) {
        let t = self.peek_tok();
        match t.kind {
            K::Newline | K::Eof => match self.last {
                Some(l) => (self.toks[l].span, true),
                None => (t.span, false),
            },
            _ => (t.span, false),
        }
    }

    // ----- diagnostics -----------------------------------------------------------

    /// Reports an error, unless one was already reported at the same position (by
    /// the lexer, the bracket pass or the parser): one mistake, one diagnostic.
    pub(super) fn error(&mut self, d: Diagnostic) {
        self.errs += 1;
        let start = d.primary.as_ref().map_or(usize::MAX, |l| l.span.start);
        if self.flagged.insert(start) {
            self.diags.push(d);
        }
    }

    /// E0006 at the next token: "unexpected X: expected WHAT".
    pub(super) fn unexpected(&mut self, expected: &str, help: Option<String>) {
        if self.skipped_deep {
            // Structure after a too-deep skip is unreliable: stay quiet.
            self.errs += 1;
            return;
        }
        let found = self.peek().describe();
        let (span, after) = self.found_span();
        let label = if after {
            format!("expected {expected} after this")
        } else {
            format!("expected {expected}")
        };
        let mut d = Diagnostic::error(
            code::E0006,
            format!("unexpected {found}: expected {expected}"),
        )
        .at(span, label);
        if let Some(h) = help {
            d = d.help(h);
        }
        self.error(d);
    }

    pub(super) fn report_too_deep(&mut self, span: Span) {
        if self.deep_reported {
            self.errs += 1;
            return;
        }
        self.deep_reported = true;
        self.error(
            Diagnostic::error(code::E0006, format!("nesting too deep: expected at most {MAX_DEPTH} levels"))
                .at(span, "nested too deeply")
                .note(format!(
                    "brackets, blocks, calls, lists and unary minus may nest at most {MAX_DEPTH} levels"
                ))
                .help("split the expression into several statements"),
        );
    }

    pub(super) fn enter(&mut self) -> bool {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.peek_tok().span;
            self.report_too_deep(span);
            return false;
        }
        true
    }

    pub(super) fn leave(&mut self) {
        self.depth -= 1;
    }

    // ----- skipping --------------------------------------------------------------

    /// Jumps over the group opened by the token at `i` (or just the opener when it is
    /// never closed).
    pub(super) fn skip_group(&mut self, i: usize) {
        match self.close[i] {
            Some(c) => {
                self.pos = c + 1;
                self.last = Some(c);
            }
            None => {
                self.pos = i + 1;
                self.last = Some(i);
            }
        }
    }

    /// Skips to the end of the statement: a separator, a closer or the end.
    pub(super) fn sync_stmt(&mut self) {
        loop {
            let i = self.idx();
            match &self.toks[i].kind {
                K::Newline | K::Semi | K::Eof => return,
                k if k.is_closer() => return,
                k if k.is_opener() => self.skip_group(i),
                _ => {
                    self.advance();
                }
            }
        }
    }

    /// Inside a bracket group: skips to the next `,`, a closer or the end.
    pub(super) fn sync_in_group(&mut self) {
        loop {
            let i = self.idx();
            match &self.toks[i].kind {
                K::Comma | K::Eof => return,
                k if k.is_closer() => return,
                k if k.is_opener() => self.skip_group(i),
                _ => {
                    self.advance();
                }
            }
        }
    }

    /// After a too-deep diagnostic: skips to the end of the innermost group (or, at
    /// statement level, of the statement). Returns the skipped span.
    pub(super) fn skip_too_deep(&mut self) -> Span {
        self.skipped_deep = true;
        let start = self.peek_tok().span;
        let mut end = start;
        loop {
            let i = self.idx();
            let k = &self.toks[i].kind;
            if *k == K::Eof || k.is_closer() {
                break;
            }
            if !self.skips_newlines() && matches!(k, K::Newline | K::Semi) {
                break;
            }
            if k.is_opener() {
                self.skip_group(i);
            } else {
                self.advance();
            }
            if let Some(l) = self.last {
                end = self.toks[l].span;
            }
        }
        start.to(end)
    }
}
