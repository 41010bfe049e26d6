//! Expressions: chains of `+ -` and of `* /` (each one node, built in a loop),
//! unary minus,
//! juxtaposition checks (W0002), primaries, calls and their arguments,
//! parenthesised groups and `device(...)` expressions.

use super::*;
use mlpl_diag::code;

/// How a comma-separated group goes on after an item ([`Parser::after_item`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AfterItem {
    /// At the next item, the closer or the end.
    Next,
    /// A malformed rest of the item was reported and skipped.
    Skipped,
    /// The group was never closed and ends here.
    Stop,
}

impl<'a> Parser<'a> {
    /// The expression of a loop header (`repeat N`, `for x in E`, `experiment E`),
    /// where a `{` starts the body rather than being a misplaced block.
    pub(super) fn parse_header_expr(&mut self) -> Expr {
        let outer = std::mem::replace(&mut self.in_header, true);
        let e = self.parse_expr();
        self.in_header = outer;
        e
    }

    /// An expression; `=` after it is E0010.
    pub(super) fn parse_expr(&mut self) -> Expr {
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
            Diagnostic::of(code::E0010)
                .at(eq.span, "an assignment cannot be part of an expression")
                .help(help),
        );
        error_expr(e.span.to(rhs.span))
    }

    pub(super) fn parse_additive(&mut self) -> Expr {
        let first = self.parse_term();
        let mut links = Vec::new();
        loop {
            let op = match self.peek() {
                K::Plus => BinOp::Add,
                K::Minus => BinOp::Sub,
                _ => break,
            };
            let op_tok = self.bump();
            if op == BinOp::Sub {
                let before = chain_span(&first, &links);
                self.check_w0002(&op_tok, before);
            }
            let rhs = self.parse_term();
            links.push(Link {
                op,
                op_span: op_tok.span,
                rhs,
            });
        }
        chain(first, links)
    }

    pub(super) fn parse_term(&mut self) -> Expr {
        let mut first = self.parse_unary();
        let mut links = Vec::new();
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
                // reported by the lexer: what came before becomes an error node.
                self.errs += 1;
                let before = chain_span(&first, &links);
                let span = if can_start_expr(self.peek()) {
                    let rhs = self.parse_unary();
                    before.to(rhs.span)
                } else {
                    before.to(op_tok.span)
                };
                first = error_expr(span);
                links.clear();
                continue;
            };
            let rhs = self.parse_unary();
            links.push(Link {
                op,
                op_span: op_tok.span,
                rhs,
            });
        }
        chain(first, links)
    }

    /// W0002: `a -1` where a space precedes the `-` but not the digit.
    pub(super) fn check_w0002(&mut self, op: &Token, lhs: Span) {
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
            Diagnostic::of(code::W0002)
                .at(op.span, format!("this subtracts {next}"))
                .note(format!(
                    "`-{next}` is not a negative number here because it follows a value"
                ))
                .help(help),
        );
    }

    pub(super) fn op_prev_text(&self, op: &Token, lhs: Span) -> &'a str {
        let t = self.text(lhs);
        if t.len() <= 30 && !t.contains(['\n', '\r']) {
            return t;
        }
        // Fall back to the token before the operator.
        // The tokens are in source order.
        let i = self.toks.partition_point(|t| t.span.start < op.span.start);
        self.text(self.toks[i.saturating_sub(1)].span)
    }

    pub(super) fn parse_unary(&mut self) -> Expr {
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

    pub(super) fn parse_primary(&mut self) -> Expr {
        if !self.enter() {
            let span = self.skip_too_deep();
            self.leave();
            return error_expr(span);
        }
        let e = self.primary();
        self.leave();
        e
    }

    pub(super) fn primary(&mut self) -> Expr {
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
                        Diagnostic::error(code::E0009, format!("keyword used as a name: `{kw}`"))
                            .at(tok.span, format!("`{kw}` is a reserved keyword"))
                            .help(format!("choose another name, e.g. `{kw}_`")),
                    );
                    return error_expr(tok.span);
                }
                self.error(
                    Diagnostic::of(code::E0010)
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
                    Diagnostic::error(code::E0009, "keyword used as a name: `in`")
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
                    Diagnostic::error(code::E0006, "unexpected `{`: expected an expression")
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
    pub(super) fn parse_args(&mut self) -> (Vec<Expr>, Span) {
        let outer = std::mem::replace(&mut self.in_header, false);
        let r = self.parse_args_inner();
        self.in_header = outer;
        r
    }

    pub(super) fn parse_args_inner(&mut self) -> (Vec<Expr>, Span) {
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
        while let Some(t) = self.next_in_group(close) {
            if t.kind == K::Comma {
                self.extra_comma(&t, "an element", true);
                continue;
            }
            let before = self.errs;
            let e = self.parse_expr();
            items.push(e);
            let failed = self.errs != before;
            let after = self.after_item(close, !failed, |p| {
                let help = match (p.peek(), &open.kind) {
                    (K::LBracket, _) => {
                        "there is no indexing in MLPL; use builtins such as `last_row`, `scatter` or masks"
                    }
                    (_, K::LBracket) => "separate the elements with `,`",
                    _ => "separate the arguments with `,`",
                };
                p.unexpected(&format!("`,` or `{closer}`"), Some(help.to_string()));
            });
            if after == AfterItem::Stop {
                // The group was never closed (E0007): it ends here.
                if !self.newline_before() {
                    self.errs += 1;
                }
                break;
            }
        }
        self.ctx.pop();
        self.leave();
        (items, self.span_from(open_i))
    }

    /// The next item's first token of a comma-separated group whose closer is
    /// at `close`, or `None` at its end: the closer (consumed when it is the
    /// group's own), the end of input, or, for a group never closed, a new line
    /// that starts a statement.
    pub(super) fn next_in_group(&mut self, close: Option<usize>) -> Option<Token> {
        let i = self.idx();
        let t = self.toks[i].clone();
        if t.kind.is_closer() {
            if close == Some(i) {
                self.advance();
            }
            return None;
        }
        if t.kind == K::Eof || (close.is_none() && i > self.pos && self.looks_like_stmt_start()) {
            return None;
        }
        Some(t)
    }

    /// E0012 for the `,` at `comma` with no item (`what`) before it, reported
    /// when `report`; consumes it.
    pub(super) fn extra_comma(&mut self, comma: &Token, what: &str, report: bool) {
        if report {
            self.error(
                Diagnostic::of(code::E0012)
                    .at(comma.span, format!("{what} is missing before this `,`"))
                    .help("remove the extra `,`"),
            );
        }
        self.advance();
    }

    /// After an item of a comma-separated group closed at `close` (`None`: never
    /// closed): takes a `,`, or stops before a closer or the end. Anything else
    /// ends an unclosed group ([`AfterItem::Stop`], the caller counts the
    /// error); in a closed one it is reported by `report` (only when `ok`) and
    /// skipped to the next item ([`AfterItem::Skipped`]).
    pub(super) fn after_item(
        &mut self,
        close: Option<usize>,
        ok: bool,
        report: impl FnOnce(&mut Self),
    ) -> AfterItem {
        match &self.toks[self.idx()].kind {
            K::Comma => {
                self.advance();
                AfterItem::Next
            }
            k if k.is_closer() || *k == K::Eof => AfterItem::Next,
            _ if close.is_none() => AfterItem::Stop,
            _ => {
                if ok {
                    report(self);
                }
                self.sync_in_group();
                if *self.peek() == K::Comma {
                    self.advance();
                }
                AfterItem::Skipped
            }
        }
    }

    /// Consumes the group's own closer if it is next.
    pub(super) fn take_closer(&mut self, close: Option<usize>) {
        if close.is_some() && close == Some(self.idx()) {
            self.advance();
        }
    }

    pub(super) fn parse_paren(&mut self) -> Expr {
        let outer = std::mem::replace(&mut self.in_header, false);
        let e = self.parse_paren_inner();
        self.in_header = outer;
        e
    }

    pub(super) fn parse_paren_inner(&mut self) -> Expr {
        let open_i = self.idx();
        self.advance();
        let close = self.close[open_i];
        self.ctx.push(true);
        if close.is_some() && close == Some(self.idx()) {
            self.error(
                Diagnostic::error(code::E0006, "unexpected `)`: expected an expression")
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
    pub(super) fn parse_device(&mut self) -> Expr {
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
                        Diagnostic::error(code::E0006, "unexpected `)`: expected a device target")
                            .at(args_span, "expected a target such as `\"cuda\"`")
                            .help("write `device(\"cuda\") { ... }`"),
                    );
                } else {
                    self.error(
                        Diagnostic::error(
                            code::E0006,
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
            Diagnostic::error(code::E0009, "keyword used as a name: `device`")
                .at(kw.span, "`device` is a reserved keyword")
                .note("`device` starts a device block: `device(\"cuda\") { ... }`")
                .help("choose another name, e.g. `dev`"),
        );
        error_expr(kw.span)
    }
}

/// The span of a chain so far: its first operand and its links.
fn chain_span(first: &Expr, links: &[Link]) -> Span {
    links
        .last()
        .map_or(first.span, |l| first.span.to(l.rhs.span))
}

/// `first` alone when there are no links, else the chain node.
fn chain(first: Expr, links: Vec<Link>) -> Expr {
    if links.is_empty() {
        return first;
    }
    Expr {
        span: chain_span(&first, &links),
        kind: ExprKind::Chain {
            first: Box::new(first),
            links,
        },
    }
}
