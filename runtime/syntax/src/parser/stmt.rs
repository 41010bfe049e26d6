//! Statements: assignments and annotations, `repeat`, `train`, `for`,
//! `experiment` and `device` blocks, bodies, and the W0001 check for statements
//! run together on one line.

use super::expr::AfterItem;
use super::*;
use mlpl_diag::code;

impl<'a> Parser<'a> {
    pub(super) fn parse_stmts(&mut self, in_block: bool) -> Vec<Stmt> {
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
                    Diagnostic::error(code::E0008, format!("unmatched closing delimiter `{c}`"))
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
    pub(super) fn run_together(&self, prev: &Stmt, next: &Stmt, first: usize) -> Diagnostic {
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
        let d = Diagnostic::of(code::W0001);
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
            | StmtKind::Experiment { .. }
            | StmtKind::Fn(_) => true,
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

    pub(super) fn parse_stmt(&mut self) -> Stmt {
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
                    Diagnostic::error(code::E0009, format!("keyword used as a name: `{kw}`"))
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
            K::Fn => self.parse_fn(),
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
                    Diagnostic::error(code::E0006, "unexpected `{`: expected a statement")
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
                        Diagnostic::error(
                            code::E0006,
                            "unexpected `=`: expected a name before `=`",
                        )
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

    pub(super) fn ident_of(&self, t: &Token) -> Ident {
        let name = match &t.kind {
            K::Ident(n) => n.clone(),
            other => other.keyword_str().unwrap_or("").to_string(),
        };
        Ident { name, span: t.span }
    }

    pub(super) fn parse_for(&mut self) -> StmtKind {
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
                    Diagnostic::error(code::E0009, format!("keyword used as a name: `{kw}`"))
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
    pub(super) fn parse_body(&mut self, what: &str) -> Option<Block> {
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
                    Diagnostic::error(code::E0006, "unexpected end of line: expected `{`")
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

    pub(super) fn parse_block(&mut self) -> Block {
        let outer = std::mem::replace(&mut self.in_header, false);
        let b = self.parse_block_inner();
        self.in_header = outer;
        b
    }

    pub(super) fn parse_block_inner(&mut self) -> Block {
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
    pub(super) fn parse_annotated(&mut self) -> StmtKind {
        let name_tok = self.bump();
        let name = self.ident_of(&name_tok);
        let colon = self.bump();
        if *self.peek() != K::LBracket {
            let found = self.peek().describe();
            let (span, _) = self.found_span();
            self.error(
                Diagnostic::error(
                    code::E0011,
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
        while let Some(t) = self.next_in_group(close) {
            match &t.kind {
                K::Comma => {
                    self.extra_comma(&t, "an axis name", ok);
                    ok = false;
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
                            Diagnostic::error(
                                code::E0009,
                                format!("keyword used as a name: `{kw}`"),
                            )
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
                                code::E0011,
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
                            Diagnostic::error(code::E0011, format!("malformed axis annotation: expected an axis name, found {found}"))
                                .at(t.span, "expected an axis name")
                                .note("an annotation lists axis names: `x : [batch, feature] = value`"),
                        );
                    }
                    ok = false;
                    self.sync_in_group();
                }
            }
            let after = self.after_item(close, ok, |p| {
                let found = p.peek().describe();
                let span = p.peek_tok().span;
                p.error(
                    Diagnostic::error(
                        code::E0011,
                        format!("malformed axis annotation: expected `,` or `]`, found {found}"),
                    )
                    .at(span, "expected `,` or `]`"),
                );
            });
            match after {
                AfterItem::Next => {}
                AfterItem::Skipped => ok = false,
                AfterItem::Stop => {
                    self.errs += 1;
                    break;
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
                        code::E0011,
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
    pub(super) fn looks_like_stmt_start(&self) -> bool {
        match self.peek() {
            K::Ident(_) => matches!(self.peek2(), K::Eq | K::Colon),
            K::Repeat | K::Train | K::For | K::Experiment | K::Fn => true,
            K::LBrace => true,
            _ => false,
        }
    }
}
