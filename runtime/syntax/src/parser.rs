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
//! Nesting (brackets, blocks, unary minus and operator chains) is limited to
//! [`MAX_DEPTH`] levels; deeper input gets one E0006 and is skipped, so the parser
//! and every consumer of the tree stay within a small stack.

use crate::ast::*;
use crate::lexer::{lex_full, CellMarker, Lexed};
use crate::token::{Token, TokenKind};
use mlpl_diag::{Diagnostic, Span};

/// How deeply brackets, blocks, unary minus and chains of binary operators may nest.
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

// ---------------------------------------------------------------------------------
// Bracket pass
// ---------------------------------------------------------------------------------

/// Pairs brackets. Returns the tokens without unmatched closers, the partner index
/// of every paired opener (and closer) in that token list, and E0007/E0008/W0003.
///
/// The matching is greedy with three refinements that keep one mistake to one
/// diagnostic:
/// - a line that starts a statement (`name =`, `name :`, `repeat`, ...) at an
///   indentation no deeper than the line of the innermost open `(`/`[` closes that
///   bracket as unclosed (such a line can never be inside brackets);
/// - a closer that would leave inner openers unclosed may instead be an extra closer,
///   and a `)`/`]` without an opener may be a typo for the innermost open bracket's
///   closer: the pass picks the reading with fewer bracket errors in the tokens that
///   follow (a bounded look-ahead), preferring the plain reading on ties.
fn pair_brackets(lexed: &Lexed) -> BracketPairs {
    let toks = &lexed.tokens;
    let markers: &[CellMarker] = &lexed.cell_markers;
    let mut partner: Vec<Option<usize>> = vec![None; toks.len()];
    let mut unmatched = vec![false; toks.len()];
    let mut stack: Vec<usize> = Vec::new();
    let mut diags = Vec::new();
    let mut next_marker = 0;
    // Indentation (in bytes) of the line of each opener, and of the current line.
    let mut indents = vec![0usize; toks.len()];
    let mut line_indent = 0usize;
    let mut lookahead_budget = 256usize;
    let sym = |k: &TokenKind| k.symbol().unwrap_or("?");
    let partner_sym = |k: &TokenKind| k.partner().and_then(|p| p.symbol()).unwrap_or("?");
    let unclosed =
        |diags: &mut Vec<Diagnostic>, open: &Token, depth: usize, closer: Option<&Token>| {
            if lexed.unterminated_string || depth >= MAX_DEPTH {
                return;
            }
            let (o, c) = (sym(&open.kind), partner_sym(&open.kind));
            let mut d = Diagnostic::error("E0007", format!("unclosed delimiter `{o}`"))
                .at(open.span, format!("this `{o}` is never closed"))
                .help(format!("add the matching `{c}`"));
            if let Some(closer) = closer {
                let cs = sym(&closer.kind);
                d = d.with_label(closer.span, format!("expected `{c}` before this `{cs}`"));
            }
            diags.push(d);
        };
    for (i, t) in toks.iter().enumerate() {
        while next_marker < markers.len() && markers[next_marker].span.start < t.span.start {
            if let Some(&top) = stack.last() {
                let o = sym(&toks[top].kind);
                diags.push(
                    Diagnostic::warning("W0003", "cell marker inside a block or brackets")
                        .at(markers[next_marker].span, format!("this cell marker is inside the `{o}` opened earlier"))
                        .with_label(toks[top].span, format!("this `{o}` is still open"))
                        .note("the cell cannot run on its own")
                        .help(format!("close the `{o}` before the marker, or move the marker out of the brackets")),
                );
            }
            next_marker += 1;
        }
        let first_on_line = i == 0 || toks[i - 1].kind == TokenKind::Newline;
        if first_on_line {
            line_indent = t.span.start - if i == 0 { 0 } else { toks[i - 1].span.end };
            let stmt_like = match &t.kind {
                TokenKind::Ident(_) => {
                    matches!(
                        toks.get(i + 1).map(|n| &n.kind),
                        Some(TokenKind::Eq | TokenKind::Colon)
                    )
                }
                TokenKind::Repeat | TokenKind::Train | TokenKind::For | TokenKind::Experiment => {
                    true
                }
                _ => false,
            };
            if stmt_like {
                while let Some(&top) = stack.last() {
                    if !matches!(toks[top].kind, TokenKind::LParen | TokenKind::LBracket)
                        || line_indent > indents[top]
                    {
                        break;
                    }
                    unclosed(&mut diags, &toks[top], stack.len() - 1, None);
                    stack.pop();
                }
            }
        }
        if t.kind.is_opener() {
            indents[i] = line_indent;
            stack.push(i);
            continue;
        }
        if !t.kind.is_closer() {
            continue;
        }
        let want = t.kind.partner();
        let found = stack
            .iter()
            .rposition(|&j| Some(&toks[j].kind) == want.as_ref());
        let top = stack.last().copied();
        let can_look = lookahead_budget > 0 && stack.len() <= MAX_DEPTH;
        let kinds = |upto: usize| -> Vec<TokenKind> {
            stack[..upto]
                .iter()
                .map(|&j| toks[j].kind.clone())
                .collect()
        };
        match (found, top) {
            (Some(k), Some(top)) if stack[k] != top && can_look => {
                // Close (leaving the inner openers unclosed), or drop as extra?
                lookahead_budget -= 1;
                let close = (stack.len() - 1 - k) + simulate(toks, i + 1, kinds(k));
                let extra = 1 + simulate(toks, i + 1, kinds(stack.len()));
                let typo = if is_typo_candidate(&toks[top].kind, &t.kind) {
                    1 + simulate(toks, i + 1, kinds(stack.len() - 1))
                } else {
                    usize::MAX
                };
                if typo < close && typo <= extra {
                    diags.push(mismatched(&toks[top], t));
                    partner[top] = Some(i);
                    partner[i] = Some(top);
                    stack.pop();
                    continue;
                }
                if extra < close {
                    unmatched[i] = true;
                    let to = sym(&toks[top].kind);
                    let c = sym(&t.kind);
                    diags.push(
                        Diagnostic::error("E0008", format!("unmatched closing delimiter `{c}`"))
                            .at(t.span, format!("this `{c}` is not expected here"))
                            .with_label(toks[top].span, format!("this `{to}` is still open"))
                            .help(format!("remove the `{c}`")),
                    );
                    continue;
                }
            }
            (None, Some(top)) if can_look && is_typo_candidate(&toks[top].kind, &t.kind) => {
                // A typo for the innermost bracket's closer, or an extra closer?
                lookahead_budget -= 1;
                let typo = 1 + simulate(toks, i + 1, kinds(stack.len() - 1));
                let extra = 1 + simulate(toks, i + 1, kinds(stack.len()));
                if typo < extra {
                    diags.push(mismatched(&toks[top], t));
                    partner[top] = Some(i);
                    partner[i] = Some(top);
                    stack.pop();
                    continue;
                }
            }
            _ => {}
        }
        match found {
            Some(k) => {
                for (d, &j) in stack.iter().enumerate().skip(k + 1) {
                    unclosed(&mut diags, &toks[j], d, Some(t));
                }
                let j = stack[k];
                partner[j] = Some(i);
                partner[i] = Some(j);
                stack.truncate(k);
            }
            None => {
                unmatched[i] = true;
                let c = sym(&t.kind);
                let o = want.as_ref().map_or("?", sym);
                let mut d =
                    Diagnostic::error("E0008", format!("unmatched closing delimiter `{c}`"))
                        .at(t.span, format!("this `{c}` has no matching `{o}`"));
                if let Some(top) = top {
                    let (to, tc) = (sym(&toks[top].kind), partner_sym(&toks[top].kind));
                    d = d
                        .with_label(
                            toks[top].span,
                            format!("the innermost open delimiter is this `{to}`"),
                        )
                        .help(format!("did you mean `{tc}`? otherwise remove the `{c}`"));
                } else {
                    d = d.help(format!("remove the `{c}`"));
                }
                diags.push(d);
            }
        }
    }
    for (d, &j) in stack.iter().enumerate() {
        unclosed(&mut diags, &toks[j], d, None);
    }
    BracketPairs {
        partner,
        unmatched,
        diagnostics: diags,
    }
}

/// The result of [`pair_brackets`]: per token, its partner bracket and whether it
/// is an unmatched closer (dropped before parsing).
struct BracketPairs {
    partner: Vec<Option<usize>>,
    unmatched: Vec<bool>,
    diagnostics: Vec<Diagnostic>,
}

/// Drops the unmatched closers from `tokens` and renumbers the partners: the
/// tokens the parser reads and, per token, the index of its closing partner.
fn keep_matched(tokens: Vec<Token>, pairs: &BracketPairs) -> (Vec<Token>, Vec<Option<usize>>) {
    if !pairs.unmatched.contains(&true) {
        return (tokens, pairs.partner.clone());
    }
    let mut new_index = vec![0usize; tokens.len()];
    let mut kept = Vec::with_capacity(tokens.len());
    for (i, t) in tokens.into_iter().enumerate() {
        new_index[i] = kept.len();
        if !pairs.unmatched[i] {
            kept.push(t);
        }
    }
    let mut close = vec![None; kept.len()];
    for (i, p) in pairs.partner.iter().enumerate() {
        if let Some(p) = p {
            close[new_index[i]] = Some(new_index[*p]);
        }
    }
    (kept, close)
}

/// Whether `closer` may be a typo for the closer of `open`: `)` for `]` or `]` for `)`.
fn is_typo_candidate(open: &TokenKind, closer: &TokenKind) -> bool {
    matches!(
        (open, closer),
        (TokenKind::LParen, TokenKind::RBracket) | (TokenKind::LBracket, TokenKind::RParen)
    )
}

/// E0008 for a closer of the wrong kind that closes `open`.
fn mismatched(open: &Token, closer: &Token) -> Diagnostic {
    let o = open.kind.symbol().unwrap_or("?");
    let c = closer.kind.symbol().unwrap_or("?");
    let expected = open.kind.partner().and_then(|k| k.symbol()).unwrap_or("?");
    Diagnostic::error("E0008", format!("mismatched closing delimiter `{c}`"))
        .at(
            closer.span,
            format!("expected `{expected}` to close the `{o}`"),
        )
        .with_label(open.span, format!("this `{o}` is closed by the `{c}`"))
        .help(format!("replace `{c}` with `{expected}`"))
}

/// How many bracket errors plain greedy matching would report in the tokens from
/// `from` on (at most 1 000 of them), starting with the open brackets `stack`.
/// Brackets still open at the end count only when the window reaches the end.
fn simulate(toks: &[Token], from: usize, mut stack: Vec<TokenKind>) -> usize {
    let end = toks.len().min(from.saturating_add(1_000));
    let mut errors = 0;
    for t in toks.get(from..end).unwrap_or(&[]) {
        if t.kind.is_opener() {
            stack.push(t.kind.clone());
        } else if t.kind.is_closer() {
            let want = t.kind.partner();
            match stack.iter().rposition(|o| Some(o) == want.as_ref()) {
                Some(k) => {
                    errors += stack.len() - 1 - k;
                    stack.truncate(k);
                }
                None => errors += 1,
            }
        }
    }
    if end == toks.len() {
        errors += stack.len();
    }
    errors
}

// ---------------------------------------------------------------------------------
// Recursive descent
// ---------------------------------------------------------------------------------

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

    fn skips_newlines(&self) -> bool {
        self.ctx.last().copied().unwrap_or(false)
    }

    /// Index of the next significant token.
    fn idx(&self) -> usize {
        let mut i = self.pos;
        if self.skips_newlines() {
            while self.toks[i].kind == K::Newline {
                i += 1;
            }
        }
        i
    }

    fn peek(&self) -> &TokenKind {
        &self.toks[self.idx()].kind
    }

    fn peek_tok(&self) -> &Token {
        &self.toks[self.idx()]
    }

    /// The token after the next one, with the same newline rule.
    fn peek2(&self) -> &TokenKind {
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
    fn newline_before(&self) -> bool {
        self.idx() > self.pos
    }

    /// Consumes the next token and returns a copy of it.
    fn bump(&mut self) -> Token {
        let i = self.idx();
        let t = self.toks[i].clone();
        self.advance();
        t
    }

    /// Consumes the next token (without copying it).
    fn advance(&mut self) {
        let i = self.idx();
        if self.toks[i].kind != K::Eof {
            self.pos = i + 1;
            self.last = Some(i);
        }
    }

    fn text(&self, span: Span) -> &'a str {
        self.src.get(span.start..span.end).unwrap_or("")
    }

    /// From the token at `start` to the last consumed token.
    fn span_from(&self, start: usize) -> Span {
        let s = self.toks[start].span;
        match self.last {
            Some(l) if l >= start => s.to(self.toks[l].span),
            _ => s,
        }
    }

    /// Where to point when the next token is unexpected: the token itself, or for
    /// a line end / end of input, the token before it.
    fn found_span(&self) -> (Span, bool) {
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
    fn error(&mut self, d: Diagnostic) {
        self.errs += 1;
        let start = d.primary.as_ref().map_or(usize::MAX, |l| l.span.start);
        if self.flagged.insert(start) {
            self.diags.push(d);
        }
    }

    /// E0006 at the next token: "unexpected X: expected WHAT".
    fn unexpected(&mut self, expected: &str, help: Option<String>) {
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
        let mut d = Diagnostic::error("E0006", format!("unexpected {found}: expected {expected}"))
            .at(span, label);
        if let Some(h) = help {
            d = d.help(h);
        }
        self.error(d);
    }

    fn report_too_deep(&mut self, span: Span) {
        if self.deep_reported {
            self.errs += 1;
            return;
        }
        self.deep_reported = true;
        self.error(
            Diagnostic::error("E0006", format!("nesting too deep: expected at most {MAX_DEPTH} levels"))
                .at(span, "nested too deeply")
                .note(format!(
                    "brackets, blocks, unary minus and chains of operators may nest at most {MAX_DEPTH} levels"
                ))
                .help("split the expression into several statements"),
        );
    }

    fn enter(&mut self) -> bool {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.peek_tok().span;
            self.report_too_deep(span);
            return false;
        }
        true
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    // ----- skipping --------------------------------------------------------------

    /// Jumps over the group opened by the token at `i` (or just the opener when it is
    /// never closed).
    fn skip_group(&mut self, i: usize) {
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
    fn sync_stmt(&mut self) {
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
    fn sync_in_group(&mut self) {
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
    fn skip_too_deep(&mut self) -> Span {
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

    // ----- statements ------------------------------------------------------------

    fn parse_stmts(&mut self, in_block: bool) -> Vec<Stmt> {
        let mut stmts: Vec<Stmt> = Vec::new();
        let mut prev_clean = false;
        loop {
            let mut sep = false;
            while matches!(self.peek(), K::Newline | K::Semi) {
                self.advance();
                sep = true;
            }
            let k = self.peek();
            if k == &K::Eof {
                break;
            }
            if k.is_closer() {
                if in_block {
                    break;
                }
                // Only reachable if recovery skipped an opener; report and move on.
                let t = self.bump();
                let c = t.kind.symbol().unwrap_or(")");
                self.error(
                    Diagnostic::error("E0008", format!("unmatched closing delimiter `{c}`"))
                        .at(t.span, format!("this `{c}` has no matching opener")),
                );
                prev_clean = false;
                continue;
            }
            if !in_block {
                self.skipped_deep = false;
            }
            let errs_before = self.errs;
            let first = self.idx();
            let stmt = self.parse_stmt();
            let had_error = self.errs != errs_before;
            let flagged = self.flagged.contains(&self.toks[first].span.start);
            if !sep && prev_clean && !had_error && !flagged {
                if let Some(prev) = stmts.last() {
                    let d = self.run_together(prev, &stmt, first);
                    self.diags.push(d);
                }
            }
            if had_error {
                self.sync_stmt();
            }
            if self.idx() == first {
                // No progress: never loop forever.
                self.advance();
                self.errs += 1;
            }
            prev_clean = !had_error;
            stmts.push(stmt);
        }
        stmts
    }

    /// W0001 for `next` following `prev` on the same line without `;`.
    fn run_together(&self, prev: &Stmt, next: &Stmt, first: usize) -> Diagnostic {
        let first_tok = &self.toks[first];
        let prev_tok = &self.toks[first.saturating_sub(1)];
        let a = self.text(prev.span);
        let b = self.text(next.span);
        let short = |s: &str| s.len() <= 60 && !s.contains(['\n', '\r']);
        let joined = if short(a) && short(b) {
            format!("separate them with `;`: `{a}; {b}`")
        } else {
            "separate the statements with `;` or put them on separate lines".to_string()
        };
        let d = Diagnostic::warning("W0001", "statements run together on one line");
        let adjacent = prev_tok.span.end == first_tok.span.start;
        if let (K::Number(_), true, K::Ident(_) | K::LParen) =
            (&prev_tok.kind, adjacent, &first_tok.kind)
        {
            let n = self.text(prev_tok.span);
            let x = match &first_tok.kind {
                K::Ident(name) => name.clone(),
                _ if short(b) => b.to_string(),
                _ => "(...)".to_string(),
            };
            let help = if x == "e" || x == "E" {
                format!("write `{n} * {x}` to multiply, or complete the exponent, e.g. `{n}{x}3`")
            } else if x.starts_with('_') {
                format!(
                    "write `{n} * {x}` to multiply; `_` separates digits only between two digits, as in `1_000`"
                )
            } else {
                format!("write `{n} * {x}` to multiply")
            };
            return d
                .at(
                    prev_tok.span.to(first_tok.span),
                    "a number directly followed by another statement",
                )
                .note(format!(
                    "this is read as `{n}` followed by a separate statement `{b}`"
                ))
                .help(help);
        }
        let d = d
            .at(first_tok.span, "a second statement starts here")
            .with_label(prev.span, "first statement");
        if first_tok.kind == K::LBracket && prev_tok.kind.is_value() {
            let help = if short(a) && short(b) {
                format!("there is no indexing in MLPL; to write two statements use `{a}; {b}`")
            } else {
                "there is no indexing in MLPL; separate the statements with `;`".to_string()
            };
            return d.help(help);
        }
        let block_stmt = match &prev.kind {
            StmtKind::Repeat { .. }
            | StmtKind::Train { .. }
            | StmtKind::For { .. }
            | StmtKind::Experiment { .. } => true,
            StmtKind::Expr(e) => matches!(e.kind, ExprKind::Device { .. }),
            _ => false,
        };
        if block_stmt {
            let what = if short(b) {
                format!("`{b}`")
            } else {
                "the next statement".to_string()
            };
            return d.help(format!("put {what} on its own line"));
        }
        d.help(joined)
    }

    fn parse_stmt(&mut self) -> Stmt {
        let start = self.idx();
        let tok = self.toks[start].clone();
        let kind = match &tok.kind {
            K::Ident(_) if *self.peek2() == K::Eq => {
                let name_tok = self.bump();
                let name = self.ident_of(&name_tok);
                self.advance();
                let value = self.parse_expr();
                StmtKind::Assign { name, value }
            }
            K::Ident(_) if *self.peek2() == K::Colon => self.parse_annotated(),
            k if k.is_keyword() && *self.peek2() == K::Eq => {
                let kw = k.keyword_str().unwrap_or("");
                self.error(
                    Diagnostic::error("E0009", format!("keyword used as a name: `{kw}`"))
                        .at(tok.span, format!("`{kw}` is a reserved keyword"))
                        .help(format!("choose another name, e.g. `{kw}_`")),
                );
                self.advance();
                self.advance();
                let _ = self.parse_expr();
                StmtKind::Error
            }
            K::Repeat | K::Train => {
                let kw = self.bump();
                let count = self.parse_header_expr();
                let what = kw.kind.keyword_str().unwrap_or("repeat");
                match self.parse_body(&format!("{what} {}", self.text(count.span))) {
                    Some(body) if kw.kind == K::Repeat => StmtKind::Repeat { count, body },
                    Some(body) => StmtKind::Train { count, body },
                    None => StmtKind::Error,
                }
            }
            K::For => self.parse_for(),
            K::Experiment => {
                self.advance();
                let name = self.parse_header_expr();
                match self.parse_body(&format!("experiment {}", self.text(name.span))) {
                    Some(body) => StmtKind::Experiment { name, body },
                    None => StmtKind::Error,
                }
            }
            K::LBrace => {
                self.error(
                    Diagnostic::error("E0006", "unexpected `{`: expected a statement")
                        .at(tok.span, "a block cannot stand on its own")
                        .help("a block follows `repeat N`, `train N`, `for x in xs`, `experiment NAME` or `device(TARGET)`"),
                );
                self.skip_group(start);
                StmtKind::Error
            }
            _ => {
                let e = self.parse_additive();
                if *self.peek() == K::Eq && e.kind != ExprKind::Error {
                    let eq = self.bump();
                    self.error(
                        Diagnostic::error("E0006", "unexpected `=`: expected a name before `=`")
                            .at(eq.span, "only a name can be assigned")
                            .with_label(e.span, "this is not a name")
                            .help("write `name = value`"),
                    );
                    let _ = self.parse_expr();
                    StmtKind::Error
                } else if e.kind == ExprKind::Error {
                    StmtKind::Error
                } else {
                    StmtKind::Expr(e)
                }
            }
        };
        Stmt {
            kind,
            span: self.span_from(start),
        }
    }

    fn ident_of(&self, t: &Token) -> Ident {
        let name = match &t.kind {
            K::Ident(n) => n.clone(),
            other => other.keyword_str().unwrap_or("").to_string(),
        };
        Ident { name, span: t.span }
    }

    fn parse_for(&mut self) -> StmtKind {
        self.advance(); // `for`
        let mut var_ok = true;
        let var = match self.peek().clone() {
            K::Ident(_) => {
                let t = self.bump();
                self.ident_of(&t)
            }
            k if k.is_keyword() && k != K::In => {
                let t = self.bump();
                let kw = k.keyword_str().unwrap_or("");
                self.error(
                    Diagnostic::error("E0009", format!("keyword used as a name: `{kw}`"))
                        .at(t.span, format!("`{kw}` is a reserved keyword"))
                        .help(format!("choose another loop variable, e.g. `{kw}_`")),
                );
                var_ok = false;
                self.ident_of(&t)
            }
            _ => {
                self.unexpected(
                    "a loop variable name after `for`",
                    Some("write `for x in xs { ... }`".into()),
                );
                return StmtKind::Error;
            }
        };
        if *self.peek() != K::In {
            self.unexpected(
                "`in`",
                Some(format!("write `for {} in xs {{ ... }}`", var.name)),
            );
            return StmtKind::Error;
        }
        self.advance();
        let iter = self.parse_header_expr();
        let what = format!("for {} in {}", var.name, self.text(iter.span));
        match self.parse_body(&what) {
            Some(body) if var_ok => StmtKind::For { var, iter, body },
            _ => StmtKind::Error,
        }
    }

    /// `{ ... }` after a loop header; `what` names the header for messages.
    fn parse_body(&mut self, what: &str) -> Option<Block> {
        if *self.peek() == K::LBrace {
            return Some(self.parse_block());
        }
        let what = if what.len() > 40 || what.contains(['\n', '\r']) {
            what.split_whitespace()
                .next()
                .unwrap_or("the loop")
                .to_string()
        } else {
            what.to_string()
        };
        // `{` on a later line.
        let i = self.idx();
        let mut j = i;
        while self.toks[j].kind == K::Newline {
            j += 1;
        }
        if j > i && self.toks[j].kind == K::LBrace {
            if self.quiet_block {
                self.errs += 1;
            } else {
                let (span, _) = self.found_span();
                self.error(
                    Diagnostic::error("E0006", "unexpected end of line: expected `{`")
                        .at(span, "expected `{` after this, on the same line")
                        .with_label(self.toks[j].span, "the block starts on a later line")
                        .help(format!("put the `{{` on the same line as `{what}`")),
                );
            }
            self.pos = j;
            let _ = self.parse_block();
            return None;
        }
        if self.quiet_block {
            self.errs += 1;
        } else {
            self.unexpected(&format!("`{{` to start the body of `{what}`"), None);
        }
        None
    }

    fn parse_block(&mut self) -> Block {
        let outer = std::mem::replace(&mut self.in_header, false);
        let b = self.parse_block_inner();
        self.in_header = outer;
        b
    }

    fn parse_block_inner(&mut self) -> Block {
        let open_i = self.idx();
        let open = self.bump();
        if !self.enter() {
            self.skipped_deep = true;
            let end = match self.close[open_i] {
                Some(c) => {
                    self.skip_group(open_i);
                    self.toks[c].span
                }
                None => {
                    self.ctx.push(true);
                    let s = self.skip_too_deep();
                    self.ctx.pop();
                    s
                }
            };
            self.leave();
            return Block {
                stmts: Vec::new(),
                span: open.span.to(end),
            };
        }
        self.ctx.push(false);
        let quiet = std::mem::replace(&mut self.quiet_block, false);
        let stmts = self.parse_stmts(true);
        let i = self.idx();
        if self.toks[i].kind == K::RBrace && self.close[open_i] == Some(i) {
            self.advance();
        }
        self.quiet_block = quiet;
        self.ctx.pop();
        self.leave();
        Block {
            stmts,
            span: self.span_from(open_i),
        }
    }

    /// `name : [a, b] = value` (LANGUAGE §4.3); E0011 for malformed annotations.
    fn parse_annotated(&mut self) -> StmtKind {
        let name_tok = self.bump();
        let name = self.ident_of(&name_tok);
        let colon = self.bump();
        if *self.peek() != K::LBracket {
            let found = self.peek().describe();
            let (span, _) = self.found_span();
            self.error(
                Diagnostic::error(
                    "E0011",
                    format!("malformed axis annotation: expected `[` after `:`, found {found}"),
                )
                .at(span, "expected `[`")
                .with_label(colon.span, "an axis annotation starts here")
                .help(format!("write `{} : [axis, ...] = value`", name.name)),
            );
            return StmtKind::Error;
        }
        let open_i = self.idx();
        let close = self.close[open_i];
        self.advance();
        self.ctx.push(true);
        let mut axes = Vec::new();
        let mut ok = true;
        loop {
            let i = self.idx();
            let t = self.toks[i].clone();
            if t.kind.is_closer() {
                if close == Some(i) {
                    self.advance();
                }
                break;
            }
            if t.kind == K::Eof {
                break;
            }
            if close.is_none() && i > self.pos && self.looks_like_stmt_start() {
                break;
            }
            match &t.kind {
                K::Comma => {
                    if ok {
                        self.error(
                            Diagnostic::error("E0012", "empty list element")
                                .at(t.span, "an axis name is missing before this `,`")
                                .help("remove the extra `,`"),
                        );
                    }
                    ok = false;
                    self.advance();
                    continue;
                }
                K::Ident(_) => {
                    let t = self.bump();
                    axes.push(self.ident_of(&t));
                }
                k if k.is_keyword() => {
                    let kw = k.keyword_str().unwrap_or("");
                    if ok {
                        self.error(
                            Diagnostic::error("E0009", format!("keyword used as a name: `{kw}`"))
                                .at(t.span, format!("`{kw}` is a reserved keyword"))
                                .help(format!("choose another axis name, e.g. `{kw}_`")),
                        );
                    }
                    ok = false;
                    self.advance();
                }
                K::Str(s) => {
                    let help = if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && s.chars().next().is_some_and(|c| !c.is_ascii_digit())
                    {
                        format!("axis names are written without quotes: `{s}`")
                    } else {
                        "axis names are identifiers: letters, digits and `_`".to_string()
                    };
                    if ok {
                        self.error(
                            Diagnostic::error(
                                "E0011",
                                "malformed axis annotation: expected an axis name, found a string",
                            )
                            .at(t.span, "not an identifier")
                            .help(help),
                        );
                    }
                    ok = false;
                    self.advance();
                }
                _ => {
                    let found = t.kind.describe();
                    if ok {
                        self.error(
                            Diagnostic::error("E0011", format!("malformed axis annotation: expected an axis name, found {found}"))
                                .at(t.span, "expected an axis name")
                                .note("an annotation lists axis names: `x : [batch, feature] = value`"),
                        );
                    }
                    ok = false;
                    self.sync_in_group();
                }
            }
            let j = self.idx();
            match &self.toks[j].kind {
                K::Comma => {
                    self.advance();
                }
                k if k.is_closer() || *k == K::Eof => {}
                _ => {
                    if close.is_none() {
                        self.errs += 1;
                        break;
                    }
                    if ok {
                        let found = self.peek().describe();
                        let span = self.peek_tok().span;
                        self.error(
                            Diagnostic::error(
                                "E0011",
                                format!(
                                    "malformed axis annotation: expected `,` or `]`, found {found}"
                                ),
                            )
                            .at(span, "expected `,` or `]`"),
                        );
                    }
                    ok = false;
                    self.sync_in_group();
                }
            }
        }
        self.ctx.pop();
        if close.is_none() {
            ok = false;
            self.errs += 1;
        }
        if *self.peek() != K::Eq {
            if ok {
                let found = self.peek().describe();
                let (span, after) = self.found_span();
                let label = if after {
                    "expected `=` after the annotation"
                } else {
                    "expected `=`"
                };
                self.error(
                    Diagnostic::error(
                        "E0011",
                        format!("malformed axis annotation: missing `=`, found {found}"),
                    )
                    .at(span, label)
                    .help(format!(
                        "write `{} : [{}] = value`",
                        name.name,
                        axes.iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                );
            } else {
                self.errs += 1;
            }
            return StmtKind::Error;
        }
        self.advance();
        let value = self.parse_expr();
        if ok {
            StmtKind::Annotated { name, axes, value }
        } else {
            StmtKind::Error
        }
    }

    /// In an unclosed group, whether the next token (on a new line) looks like the
    /// start of a statement rather than a continuation of the group.
    fn looks_like_stmt_start(&self) -> bool {
        match self.peek() {
            K::Ident(_) => matches!(self.peek2(), K::Eq | K::Colon),
            K::Repeat | K::Train | K::For | K::Experiment => true,
            K::LBrace => true,
            _ => false,
        }
    }

    // ----- expressions -----------------------------------------------------------

    /// The expression of a loop header (`repeat N`, `for x in E`, `experiment E`),
    /// where a `{` starts the body rather than being a misplaced block.
    fn parse_header_expr(&mut self) -> Expr {
        let outer = std::mem::replace(&mut self.in_header, true);
        let e = self.parse_expr();
        self.in_header = outer;
        e
    }

    /// An expression; `=` after it is E0010.
    fn parse_expr(&mut self) -> Expr {
        let e = self.parse_additive();
        if *self.peek() != K::Eq {
            return e;
        }
        let eq = self.bump();
        let mut rhs = error_expr(eq.span);
        loop {
            if can_start_expr(self.peek()) {
                rhs = self.parse_additive();
            }
            if *self.peek() != K::Eq {
                break;
            }
            self.advance();
        }
        let lhs_text = self.text(e.span);
        let rhs_text = self.text(rhs.span);
        let in_brackets = self.skips_newlines();
        let simple = matches!(e.kind, ExprKind::Var(_))
            && rhs_text.len() <= 40
            && !rhs_text.contains(['\n', '\r']);
        let help = if in_brackets && simple {
            format!("there are no keyword arguments; pass the value alone: `{rhs_text}`, or assign `{lhs_text} = {rhs_text}` on its own line first")
        } else if simple {
            format!("assign `{lhs_text} = {rhs_text}` on its own line first, then use `{lhs_text}`")
        } else if in_brackets {
            "there are no keyword arguments; pass values by position".to_string()
        } else {
            "`=` can only start a statement: `name = value`".to_string()
        };
        self.error(
            Diagnostic::error("E0010", "statement used as an expression")
                .at(eq.span, "an assignment cannot be part of an expression")
                .help(help),
        );
        error_expr(e.span.to(rhs.span))
    }

    fn parse_additive(&mut self) -> Expr {
        let mut lhs = self.parse_term();
        let saved = self.depth;
        let mut overflow = false;
        loop {
            let op = match self.peek() {
                K::Plus => BinOp::Add,
                K::Minus => BinOp::Sub,
                _ => break,
            };
            let op_tok = self.bump();
            if op == BinOp::Sub {
                self.check_w0002(&op_tok, &lhs);
            }
            lhs = self.binary_operand(lhs, op, &op_tok, &mut overflow, Self::parse_term);
        }
        self.depth = saved;
        lhs
    }

    /// Parses the right operand of `lhs op` with `operand` and builds the binary
    /// node, counting one nesting level per operator (past [`MAX_DEPTH`] the chain
    /// becomes an error node, reported once).
    fn binary_operand(
        &mut self,
        lhs: Expr,
        op: BinOp,
        op_tok: &Token,
        overflow: &mut bool,
        operand: fn(&mut Self) -> Expr,
    ) -> Expr {
        if !*overflow && self.depth + 1 >= MAX_DEPTH {
            *overflow = true;
            self.report_too_deep(op_tok.span);
        }
        if !*overflow {
            self.depth += 1;
        }
        let rhs = operand(self);
        let span = lhs.span.to(rhs.span);
        if *overflow {
            return error_expr(span);
        }
        Expr {
            span,
            kind: ExprKind::Binary {
                op,
                op_span: op_tok.span,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
        }
    }

    fn parse_term(&mut self) -> Expr {
        let mut lhs = self.parse_unary();
        let saved = self.depth;
        let mut overflow = false;
        loop {
            let op = match self.peek() {
                K::Star => Some(BinOp::Mul),
                K::Slash => Some(BinOp::Div),
                K::Unknown => None,
                _ => break,
            };
            let op_tok = self.bump();
            let Some(op) = op else {
                // An unexpected character between operands (`a % b`, `a == b`), already
                // reported by the lexer.
                self.errs += 1;
                let span = if can_start_expr(self.peek()) {
                    let rhs = self.parse_unary();
                    lhs.span.to(rhs.span)
                } else {
                    lhs.span.to(op_tok.span)
                };
                lhs = error_expr(span);
                continue;
            };
            lhs = self.binary_operand(lhs, op, &op_tok, &mut overflow, Self::parse_unary);
        }
        self.depth = saved;
        lhs
    }

    /// W0002: `a -1` where a space precedes the `-` but not the digit.
    fn check_w0002(&mut self, op: &Token, lhs: &Expr) {
        let bytes = self.src.as_bytes();
        let before = op.span.start.checked_sub(1).and_then(|i| bytes.get(i));
        let after = bytes.get(op.span.end);
        if !matches!(before, Some(b' ' | b'\t' | b'\n' | b'\r'))
            || !matches!(after, Some(b'0'..=b'9'))
        {
            return;
        }
        let prev = self.op_prev_text(op, lhs);
        let next = self.text(self.peek_tok().span);
        let help = if self.skips_newlines() {
            format!("write `{prev} - {next}` to subtract, or `{prev}, -{next}` for two elements")
        } else {
            format!("write `{prev} - {next}` to subtract, or `{prev}; -{next}` for two statements")
        };
        self.diags.push(
            Diagnostic::warning("W0002", "this `-` subtracts")
                .at(op.span, format!("this subtracts {next}"))
                .note(format!(
                    "`-{next}` is not a negative number here because it follows a value"
                ))
                .help(help),
        );
    }

    fn op_prev_text(&self, op: &Token, lhs: &Expr) -> &'a str {
        let t = self.text(lhs.span);
        if t.len() <= 30 && !t.contains(['\n', '\r']) {
            return t;
        }
        // Fall back to the token before the operator.
        let i = self
            .toks
            .iter()
            .position(|t| t.span == op.span)
            .unwrap_or(0);
        self.text(self.toks[i.saturating_sub(1)].span)
    }

    fn parse_unary(&mut self) -> Expr {
        let mut minus: Vec<Span> = Vec::new();
        while *self.peek() == K::Minus {
            minus.push(self.bump().span);
        }
        let saved = self.depth;
        let overflow = !minus.is_empty() && saved + minus.len() >= MAX_DEPTH;
        if overflow {
            self.report_too_deep(minus[0]);
        } else {
            self.depth += minus.len();
        }
        let mut e = self.parse_primary();
        self.depth = saved;
        if overflow {
            return error_expr(minus[0].to(e.span));
        }
        for s in minus.into_iter().rev() {
            e = Expr {
                span: s.to(e.span),
                kind: ExprKind::Neg(Box::new(e)),
            };
        }
        e
    }

    fn parse_primary(&mut self) -> Expr {
        if !self.enter() {
            let span = self.skip_too_deep();
            self.leave();
            return error_expr(span);
        }
        let e = self.primary();
        self.leave();
        e
    }

    fn primary(&mut self) -> Expr {
        let i = self.idx();
        let span = self.toks[i].span;
        // Identifiers are the common case: handle them without copying the token.
        if let K::Ident(name) = &self.toks[i].kind {
            let is_ctor = name == "param" || name == "tensor";
            return match self.peek2() {
                K::LParen => {
                    let ident = Ident {
                        name: name.clone(),
                        span,
                    };
                    self.advance();
                    let (args, args_span) = self.parse_args();
                    Expr {
                        kind: ExprKind::Call { name: ident, args },
                        span: span.to(args_span),
                    }
                }
                K::LBracket if is_ctor => {
                    let kind = if name == "param" {
                        CtorKind::Param
                    } else {
                        CtorKind::Tensor
                    };
                    self.advance();
                    let (dims, dims_span) = self.parse_args();
                    Expr {
                        kind: ExprKind::Ctor { kind, dims },
                        span: span.to(dims_span),
                    }
                }
                _ => {
                    let kind = ExprKind::Var(name.clone());
                    self.advance();
                    Expr { kind, span }
                }
            };
        }
        let tok = self.toks[i].clone();
        match &tok.kind {
            K::Number(v) => {
                self.advance();
                Expr {
                    kind: ExprKind::Number(*v),
                    span: tok.span,
                }
            }
            K::BadNumber => {
                self.advance();
                self.errs += 1;
                error_expr(tok.span)
            }
            K::Str(s) => {
                self.advance();
                Expr {
                    kind: ExprKind::Str(s.clone()),
                    span: tok.span,
                }
            }
            K::LBracket => {
                let (items, span) = self.parse_args();
                Expr {
                    kind: ExprKind::List(items),
                    span,
                }
            }
            K::LParen => self.parse_paren(),
            K::Device => self.parse_device(),
            K::Repeat | K::Train | K::For | K::Experiment => {
                let kw = tok.kind.keyword_str().unwrap_or("");
                if !can_start_expr(self.peek2()) {
                    self.advance();
                    self.error(
                        Diagnostic::error("E0009", format!("keyword used as a name: `{kw}`"))
                            .at(tok.span, format!("`{kw}` is a reserved keyword"))
                            .help(format!("choose another name, e.g. `{kw}_`")),
                    );
                    return error_expr(tok.span);
                }
                self.error(
                    Diagnostic::error("E0010", "statement used as an expression")
                        .at(tok.span, format!("a `{kw}` loop is a statement, not an expression"))
                        .help(format!(
                            "write the `{kw}` statement on its own line; assignments inside its body persist after it"
                        )),
                );
                let quiet = std::mem::replace(&mut self.quiet_block, true);
                let stmt = self.parse_stmt();
                self.quiet_block = quiet;
                error_expr(tok.span.to(stmt.span))
            }
            K::In => {
                self.advance();
                self.error(
                    Diagnostic::error("E0009", "keyword used as a name: `in`")
                        .at(tok.span, "`in` is a reserved keyword")
                        .help("choose another name, e.g. `in_`"),
                );
                error_expr(tok.span)
            }
            K::LBrace if self.in_header => {
                // `repeat {`: the count is missing; leave the block to the statement.
                self.unexpected("an expression", None);
                error_expr(tok.span)
            }
            K::LBrace => {
                self.error(
                    Diagnostic::error("E0006", "unexpected `{`: expected an expression")
                        .at(tok.span, "a block is not an expression")
                        .help("a block follows `repeat N`, `train N`, `for x in xs`, `experiment NAME` or `device(TARGET)`"),
                );
                self.skip_group(i);
                error_expr(self.span_from(i))
            }
            K::Unknown => {
                let mut span = tok.span;
                while *self.peek() == K::Unknown {
                    span = span.to(self.bump().span);
                }
                self.errs += 1;
                if can_start_expr(self.peek()) {
                    let inner = self.parse_unary();
                    span = span.to(inner.span);
                }
                error_expr(span)
            }
            K::Minus => self.parse_unary(),
            K::Plus | K::Star | K::Slash => {
                // Consume the operator so that it does not ask for an operand of its own.
                let help =
                    (tok.kind == K::Plus).then(|| "there is no unary `+`; remove it".to_string());
                self.unexpected("an expression", help);
                self.advance();
                error_expr(tok.span)
            }
            _ => {
                let help = (tok.kind == K::Newline).then(|| {
                    "an expression continues on the next line only inside `( )` or `[ ]`"
                        .to_string()
                });
                self.unexpected("an expression", help);
                let (span, _) = self.found_span();
                error_expr(span)
            }
        }
    }

    /// A bracket group of comma-separated expressions: call arguments, list elements,
    /// constructor dims. The next token is the opener. Returns the elements and the
    /// span from the opener to the closer (or the last token of an unclosed group).
    fn parse_args(&mut self) -> (Vec<Expr>, Span) {
        let outer = std::mem::replace(&mut self.in_header, false);
        let r = self.parse_args_inner();
        self.in_header = outer;
        r
    }

    fn parse_args_inner(&mut self) -> (Vec<Expr>, Span) {
        let open_i = self.idx();
        let open = self.bump();
        let close = self.close[open_i];
        let closer = open.kind.partner().and_then(|k| k.symbol()).unwrap_or(")");
        let mut items = Vec::new();
        if !self.enter() {
            self.ctx.push(true);
            self.skip_too_deep();
            self.take_closer(close);
            self.ctx.pop();
            self.leave();
            return (items, self.span_from(open_i));
        }
        self.ctx.push(true);
        loop {
            let i = self.idx();
            let t = self.toks[i].clone();
            if t.kind.is_closer() {
                if close == Some(i) {
                    self.advance();
                }
                break;
            }
            if t.kind == K::Eof {
                break;
            }
            if close.is_none() && i > self.pos && self.looks_like_stmt_start() {
                break;
            }
            if t.kind == K::Comma {
                self.error(
                    Diagnostic::error("E0012", "empty list element")
                        .at(t.span, "an element is missing before this `,`")
                        .help("remove the extra `,`"),
                );
                self.advance();
                continue;
            }
            let before = self.errs;
            let e = self.parse_expr();
            items.push(e);
            let failed = self.errs != before;
            let j = self.idx();
            let k = self.toks[j].kind.clone();
            match k {
                K::Comma => {
                    self.advance();
                }
                k if k.is_closer() || k == K::Eof => {}
                k => {
                    if close.is_none() {
                        // The group was never closed (E0007): it ends here.
                        if !self.newline_before() {
                            self.errs += 1;
                        }
                        break;
                    }
                    if !failed {
                        let help = match (&k, &open.kind) {
                            (K::LBracket, _) => Some(
                                "there is no indexing in MLPL; use builtins such as `last_row`, `scatter` or masks"
                                    .to_string(),
                            ),
                            (_, K::LBracket) => Some("separate the elements with `,`".to_string()),
                            _ => Some("separate the arguments with `,`".to_string()),
                        };
                        self.unexpected(&format!("`,` or `{closer}`"), help);
                    }
                    self.sync_in_group();
                    if *self.peek() == K::Comma {
                        self.advance();
                    }
                }
            }
        }
        self.ctx.pop();
        self.leave();
        (items, self.span_from(open_i))
    }

    /// Consumes the group's own closer if it is next.
    fn take_closer(&mut self, close: Option<usize>) {
        if close.is_some() && close == Some(self.idx()) {
            self.advance();
        }
    }

    fn parse_paren(&mut self) -> Expr {
        let outer = std::mem::replace(&mut self.in_header, false);
        let e = self.parse_paren_inner();
        self.in_header = outer;
        e
    }

    fn parse_paren_inner(&mut self) -> Expr {
        let open_i = self.idx();
        self.advance();
        let close = self.close[open_i];
        self.ctx.push(true);
        if close.is_some() && close == Some(self.idx()) {
            self.error(
                Diagnostic::error("E0006", "unexpected `)`: expected an expression")
                    .at(
                        self.toks[open_i].span.to(self.peek_tok().span),
                        "empty parentheses",
                    )
                    .help("put an expression between the parentheses"),
            );
            self.advance();
            self.ctx.pop();
            return error_expr(self.span_from(open_i));
        }
        let before = self.errs;
        let inner = self.parse_expr();
        let mut ok = true;
        loop {
            let i = self.idx();
            let k = self.toks[i].kind.clone();
            if k.is_closer() || k == K::Eof {
                self.take_closer(close);
                break;
            }
            if close.is_none() {
                if !self.newline_before() {
                    self.errs += 1;
                }
                break;
            }
            ok = false;
            if self.errs == before {
                let help = if k == K::Comma {
                    Some("there are no tuples in MLPL; use a list `[a, b]` or call a builtin `f(a, b)`".to_string())
                } else {
                    None
                };
                self.unexpected("`)`", help);
            }
            if k == K::Comma {
                self.advance();
            }
            self.sync_in_group();
        }
        self.ctx.pop();
        let span = self.span_from(open_i);
        if ok {
            Expr {
                kind: ExprKind::Paren(Box::new(inner)),
                span,
            }
        } else {
            error_expr(span)
        }
    }

    /// `device(target) { body }`, or E0009 when `device` is used as a name.
    fn parse_device(&mut self) -> Expr {
        let start = self.idx();
        let kw = self.toks[start].clone();
        if *self.peek2() == K::LParen {
            self.advance();
            let before = self.errs;
            let (args, args_span) = self.parse_args();
            let mut target_ok = self.errs == before;
            if target_ok && args.len() != 1 {
                target_ok = false;
                if args.is_empty() {
                    self.error(
                        Diagnostic::error("E0006", "unexpected `)`: expected a device target")
                            .at(args_span, "expected a target such as `\"cuda\"`")
                            .help("write `device(\"cuda\") { ... }`"),
                    );
                } else {
                    self.error(
                        Diagnostic::error(
                            "E0006",
                            "unexpected `,`: expected `)` after the device target",
                        )
                        .at(args[1].span, "`device` takes one target")
                        .help("write `device(\"cuda\") { ... }`"),
                    );
                }
            }
            let body = self.parse_body("device(...)");
            return match (body, target_ok) {
                (Some(body), true) => {
                    let target = args
                        .into_iter()
                        .next()
                        .map(Box::new)
                        .unwrap_or_else(|| Box::new(error_expr(args_span)));
                    Expr {
                        kind: ExprKind::Device { target, body },
                        span: self.span_from(start),
                    }
                }
                _ => error_expr(self.span_from(start)),
            };
        }
        if matches!(self.peek2(), K::Str(_) | K::Ident(_)) {
            self.advance();
            self.unexpected(
                "`(` after `device`",
                Some("write `device(\"cuda\") { ... }`".into()),
            );
            let _ = self.parse_primary();
            if *self.peek() == K::LBrace {
                let _ = self.parse_block();
            }
            return error_expr(self.span_from(start));
        }
        self.advance();
        self.error(
            Diagnostic::error("E0009", "keyword used as a name: `device`")
                .at(kw.span, "`device` is a reserved keyword")
                .note("`device` starts a device block: `device(\"cuda\") { ... }`")
                .help("choose another name, e.g. `dev`"),
        );
        error_expr(kw.span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> Program {
        let p = parse(src);
        assert!(
            p.diagnostics.is_empty(),
            "unexpected diagnostics for {src:?}: {:#?}",
            p.diagnostics
        );
        p.program
    }

    fn codes(src: &str) -> Vec<&'static str> {
        parse(src).diagnostics.iter().map(|d| d.code).collect()
    }

    fn expr(src: &str) -> Expr {
        let prog = ok(src);
        assert_eq!(prog.stmts.len(), 1, "{src}");
        match &prog.stmts[0].kind {
            StmtKind::Expr(e) => e.clone(),
            StmtKind::Assign { value, .. } => value.clone(),
            other => panic!("{other:?}"),
        }
    }

    /// A compact rendering of an expression tree.
    fn sexp(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Number(v) => format!("{v}"),
            ExprKind::Str(s) => format!("{s:?}"),
            ExprKind::Var(n) => n.clone(),
            ExprKind::Call { name, args } => {
                format!(
                    "{}({})",
                    name.name,
                    args.iter().map(sexp).collect::<Vec<_>>().join(", ")
                )
            }
            ExprKind::List(items) => format!(
                "[{}]",
                items.iter().map(sexp).collect::<Vec<_>>().join(", ")
            ),
            ExprKind::Neg(e) => format!("(neg {})", sexp(e)),
            ExprKind::Binary { op, lhs, rhs, .. } => {
                format!("({} {} {})", sexp(lhs), op.symbol(), sexp(rhs))
            }
            ExprKind::Paren(e) => format!("{{{}}}", sexp(e)),
            ExprKind::Ctor { kind, dims } => {
                format!(
                    "{kind:?}[{}]",
                    dims.iter().map(sexp).collect::<Vec<_>>().join(", ")
                )
            }
            ExprKind::Device { target, body } => {
                format!("device({}){{{}}}", sexp(target), body.stmts.len())
            }
            ExprKind::Error => "ERR".into(),
        }
    }

    fn s(src: &str) -> String {
        sexp(&expr(src))
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(s("1 + 2 * 3"), "(1 + (2 * 3))");
        assert_eq!(s("1 - 2 - 3"), "((1 - 2) - 3)");
        assert_eq!(s("8 / 4 / 2"), "((8 / 4) / 2)");
        assert_eq!(s("- 2 * 3"), "((neg 2) * 3)");
        assert_eq!(s("-2 * 3"), "(-2 * 3)");
        assert_eq!(s("-x * 3"), "((neg x) * 3)");
        assert_eq!(s("- - x"), "(neg (neg x))");
        assert_eq!(s("(1 + 2) * 3"), "({(1 + 2)} * 3)");
        assert_eq!(s("a * -b"), "(a * (neg b))");
    }

    #[test]
    fn primaries() {
        assert_eq!(s("f(1, \"a\", x)"), "f(1, \"a\", x)");
        assert_eq!(s("f (x)"), "f(x)");
        assert_eq!(s("f()"), "f()");
        assert_eq!(s("[1, [2, 3], []]"), "[1, [2, 3], []]");
        assert_eq!(s("param[2, 3]"), "Param[2, 3]");
        assert_eq!(s("tensor[]"), "Tensor[]");
        assert_eq!(s("param"), "param");
        assert_eq!(s("param(3)"), "param(3)");
        assert_eq!(
            s("device(\"cuda\") { matmul(a, b) }"),
            "device(\"cuda\"){1}"
        );
    }

    #[test]
    fn negative_literal_table() {
        let p = parse("x -1");
        assert_eq!(codes("x -1"), ["W0002"]);
        assert!(matches!(&p.program.stmts[0].kind, StmtKind::Expr(e) if sexp(e) == "(x - 1)"));
        assert_eq!(s("f(-1)"), "f(-1)");
        assert_eq!(s("[1, -2]"), "[1, -2]");
        assert_eq!(s("- 2"), "(neg 2)");
        let p = ok("repeat -1 { }");
        match &p.stmts[0].kind {
            StmtKind::Repeat { count, .. } => assert_eq!(count.kind, ExprKind::Number(-1.0)),
            other => panic!("{other:?}"),
        }
        let p = ok("a = 3\n-1");
        assert_eq!(p.stmts.len(), 2);
        assert!(
            matches!(p.stmts[1].kind, StmtKind::Expr(Expr { kind: ExprKind::Number(v), .. }) if v == -1.0)
        );
    }

    #[test]
    fn w0002_list_subtraction() {
        let p = parse("[1 -2]");
        assert_eq!(p.diagnostics.len(), 1);
        let d = &p.diagnostics[0];
        assert_eq!(d.code, "W0002");
        assert_eq!(d.primary.as_ref().unwrap().span, Span::new(3, 4));
        let help = d.help.as_deref().unwrap();
        assert!(
            help.contains("`1 - 2`") && help.contains("`1, -2`"),
            "{help}"
        );
        match &p.program.stmts[0].kind {
            StmtKind::Expr(e) => assert_eq!(sexp(e), "[(1 - 2)]"),
            other => panic!("{other:?}"),
        }
        assert_eq!(codes("x -1"), vec!["W0002"]);
        assert!(codes("x - 1").is_empty());
        assert!(codes("x-1").is_empty());
        assert!(codes("[1 - 2]").is_empty());
        assert!(codes("[1, -2]").is_empty());
        assert!(codes("x -y").is_empty());
    }

    #[test]
    fn statements() {
        let p = ok("x = 1; y : [a, b,] = param[2, 3]\nrepeat 3 { x = x + 1 }\ntrain 10 { loss }\nfor r in rows { r }\nexperiment \"e\" + name { }");
        let kinds: Vec<&str> = p
            .stmts
            .iter()
            .map(|s| match &s.kind {
                StmtKind::Assign { .. } => "assign",
                StmtKind::Annotated { .. } => "annotated",
                StmtKind::Repeat { .. } => "repeat",
                StmtKind::Train { .. } => "train",
                StmtKind::For { .. } => "for",
                StmtKind::Experiment { .. } => "experiment",
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "assign",
                "annotated",
                "repeat",
                "train",
                "for",
                "experiment"
            ]
        );
        match &p.stmts[1].kind {
            StmtKind::Annotated { name, axes, value } => {
                assert_eq!(name.name, "y");
                assert_eq!(
                    axes.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
                    ["a", "b"]
                );
                assert_eq!(sexp(value), "Param[2, 3]");
            }
            other => panic!("{other:?}"),
        }
        let p = ok("s : [] = 5");
        assert!(matches!(&p.stmts[0].kind, StmtKind::Annotated { axes, .. } if axes.is_empty()));
    }

    #[test]
    fn spans() {
        let src = "x = f(1, 2)\n";
        let p = ok(src);
        assert_eq!(p.stmts[0].span, Span::new(0, 11));
        match &p.stmts[0].kind {
            StmtKind::Assign { name, value } => {
                assert_eq!(name.span, Span::new(0, 1));
                assert_eq!(value.span, Span::new(4, 11));
            }
            other => panic!("{other:?}"),
        }
        let p = ok("repeat 2 {\n a\n}");
        match &p.stmts[0].kind {
            StmtKind::Repeat { body, .. } => assert_eq!(body.span, Span::new(9, 15)),
            other => panic!("{other:?}"),
        }
        let e = expr("a + b * c");
        match &e.kind {
            ExprKind::Binary { op_span, .. } => assert_eq!(*op_span, Span::new(2, 3)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn newlines_inside_brackets() {
        let src = "model = chain(\n    embed(V, d, 0),\n    residual(chain(rms_norm(d), causal_attention(d, 4, 1))),\n    linear(d, V, 2),          # trailing comma allowed\n)\n";
        let p = ok(src);
        assert_eq!(p.stmts.len(), 1);
        assert_eq!(s("[1,\n 2\n ,3]"), "[1, 2, 3]");
        // A block inside a call argument has statement separators again.
        let p = ok("x = f(device(\"cpu\") {\n a = 1\n a\n})");
        match &p.stmts[0].kind {
            StmtKind::Assign { value, .. } => match &value.kind {
                ExprKind::Call { args, .. } => match &args[0].kind {
                    ExprKind::Device { body, .. } => assert_eq!(body.stmts.len(), 2),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn juxtaposition_table() {
        let cases: &[(&str, usize, &str)] = &[
            ("z = 2x", 2, "`2 * x`"),
            ("x = 1 y = 2", 2, "`x = 1; y = 2`"),
            ("x [1, 2]", 2, "`x; [1, 2]`"),
            ("train 3 { loss } loss", 2, "put `loss` on its own line"),
            ("lr = 2e", 2, "`2 * e`"),
            ("a = 1_", 2, "`_`"),
        ];
        for (src, n, needle) in cases {
            let p = parse(src);
            assert_eq!(p.program.stmts.len(), *n, "{src}");
            assert_eq!(p.diagnostics.len(), 1, "{src}: {:#?}", p.diagnostics);
            let d = &p.diagnostics[0];
            assert_eq!(d.code, "W0001", "{src}");
            let help = d.help.clone().unwrap_or_default();
            assert!(
                help.contains(needle),
                "{src}: help {help:?} should contain {needle}"
            );
        }
        let p = parse("z = 2x");
        assert_eq!(
            p.diagnostics[0].primary.as_ref().unwrap().span,
            Span::new(4, 6)
        );
        assert!(
            matches!(&p.program.stmts[0].kind, StmtKind::Assign { value, .. } if value.kind == ExprKind::Number(2.0))
        );
        assert!(
            matches!(&p.program.stmts[1].kind, StmtKind::Expr(e) if e.kind == ExprKind::Var("x".into()))
        );
        assert!(codes("x = 1; y = 2").is_empty());
        assert!(codes("x = 1\ny = 2").is_empty());
    }

    #[test]
    fn error_codes() {
        let cases: &[(&str, &[&str])] = &[
            ("x = (1", &["E0007"]),
            ("x = 1)", &["E0008"]),
            ("train = 1", &["E0009"]),
            ("for repeat in x { }", &["E0009"]),
            ("x = repeat 3 { }", &["E0010"]),
            ("a = b = 1", &["E0010"]),
            ("f(x = 1)", &["E0010"]),
            ("x : [a, 1] = 2", &["E0011"]),
            ("x : [a] 2", &["E0011"]),
            ("f(a,,b)", &["E0012"]),
            ("[,]", &["E0012"]),
            ("f(,)", &["E0012"]),
            ("x = ", &["E0006"]),
            ("f(1 2)", &["E0006"]),
        ];
        for (src, want) in cases {
            assert_eq!(codes(src), *want, "{src}: {:#?}", parse(src).diagnostics);
        }
    }

    #[test]
    fn unclosed_paren_is_one_error() {
        let p = parse("x = f(1, 2\ny = 3\nz = g(y)\n");
        assert_eq!(codes("x = f(1, 2\ny = 3\nz = g(y)\n"), vec!["E0007"]);
        assert_eq!(
            p.diagnostics[0].primary.as_ref().unwrap().span,
            Span::new(5, 6)
        );
        assert_eq!(p.program.stmts.len(), 3);
    }
}
