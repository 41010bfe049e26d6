//! Function definitions: `fn name(x : [batch, d], w) -> [batch, d] { body }`.
//! Parameter shapes and the result shape are lists of axes: dimension names,
//! `_`, sizes and `+ - * /` over them (E0011 for anything else). A definition is
//! a top-level statement; one inside a block is parsed, reported (E0006) and
//! dropped.

use super::expr::AfterItem;
use super::*;
use mlpl_diag::code;

/// The most operators of one level an axis of a signature may chain in a row
/// (`d + d + d` has two):
/// a signature's axes are small trees, walked recursively.
const MAX_DIM_OPERATORS: usize = 64;

impl<'a> Parser<'a> {
    pub(super) fn parse_fn(&mut self) -> StmtKind {
        let fn_i = self.idx();
        let fn_tok = self.bump();
        let nested = !self.ctx.is_empty();
        let name = match self.peek().clone() {
            K::Ident(_) => {
                let t = self.bump();
                self.ident_of(&t)
            }
            k if k.is_keyword() => {
                let t = self.bump();
                let kw = k.keyword_str().unwrap_or("");
                self.error(
                    Diagnostic::error(code::E0009, format!("keyword used as a name: `{kw}`"))
                        .at(t.span, format!("`{kw}` is a reserved keyword"))
                        .help(format!("choose another function name, e.g. `{kw}_`")),
                );
                return StmtKind::Error;
            }
            _ => {
                self.unexpected(
                    "a function name after `fn`",
                    Some("write `fn name(x, y) { ... }`".into()),
                );
                return StmtKind::Error;
            }
        };
        if *self.peek() != K::LParen {
            self.unexpected(
                &format!("`(` to start the parameters of `{}`", name.name),
                Some(format!("write `fn {}(x, y) {{ ... }}`", name.name)),
            );
            return StmtKind::Error;
        }
        let (params, mut ok) = self.parse_params();
        let mut sig_span = self.span_from(fn_i);
        let mut ret = None;
        if *self.peek() == K::Arrow {
            let arrow = self.bump();
            let (shape, shape_ok) = self.shape_after(
                &arrow,
                "a shape after `->`",
                "the result shape starts here",
                "write the result's axes, e.g. `-> [batch, d]`".into(),
            );
            ok &= shape_ok;
            ret = shape;
            sig_span = self.span_from(fn_i);
        }
        let body = self.parse_body(&format!("fn {}", name.name));
        if nested {
            self.error(
                Diagnostic::error(code::E0006, "a function is defined inside a block")
                    .at(fn_tok.span.to(sig_span), "functions are defined at the top level")
                    .note("a definition may not appear inside a loop, `experiment`, `device` block or another function")
                    .help("move the definition to the top level of the file or cell"),
            );
            return StmtKind::Error;
        }
        match body {
            Some(body) if ok => {
                let source = self.text(fn_tok.span.to(body.span)).to_string();
                StmtKind::Fn(Box::new(FnDef {
                    name,
                    params,
                    ret,
                    body,
                    sig_span,
                    source,
                }))
            }
            _ => StmtKind::Error,
        }
    }

    /// The shape `[...]` that must follow `intro` (`->` or `:`), or E0011
    /// naming what stands there instead (`None`). Returns it and whether it
    /// parsed.
    fn shape_after(
        &mut self,
        intro: &Token,
        expected: &str,
        label: &str,
        help: String,
    ) -> (Option<ShapeSig>, bool) {
        if *self.peek() == K::LBracket {
            let (shape, ok) = self.parse_shape();
            return (Some(shape), ok);
        }
        let found = self.peek().describe();
        let (span, _) = self.found_span();
        self.error(
            Diagnostic::error(
                code::E0011,
                format!("malformed signature: expected {expected}, found {found}"),
            )
            .at(span, "expected `[`")
            .with_label(intro.span, label)
            .help(help),
        );
        (None, false)
    }

    /// `(x : [a, b], y)`; the next token is `(`. Returns the parameters and
    /// whether all of them parsed.
    fn parse_params(&mut self) -> (Vec<FnParam>, bool) {
        let open_i = self.idx();
        let close = self.close[open_i];
        self.advance();
        let mut params = Vec::new();
        let mut ok = true;
        if !self.enter() {
            self.ctx.push(true);
            self.skip_too_deep();
            self.take_closer(close);
            self.ctx.pop();
            self.leave();
            return (params, false);
        }
        self.ctx.push(true);
        loop {
            let i = self.idx();
            let Some(t) = self.next_in_group(close) else {
                break;
            };
            match &t.kind {
                K::Comma => {
                    self.extra_comma(&t, "a parameter", ok);
                    ok = false;
                    continue;
                }
                K::Ident(_) => {
                    self.advance();
                    let name = self.ident_of(&t);
                    let mut shape = None;
                    if *self.peek() == K::Colon {
                        let colon = self.bump();
                        let (s, shape_ok) = self.shape_after(
                            &colon,
                            "`[` after `:`",
                            "a parameter's shape starts here",
                            format!("write `{} : [axis, ...]`", name.name),
                        );
                        ok &= shape_ok;
                        if s.is_none() {
                            self.sync_in_group();
                        }
                        shape = s;
                    }
                    if params.iter().any(|p: &FnParam| p.name.name == name.name) {
                        self.error(
                            Diagnostic::error(
                                code::E0011,
                                format!(
                                    "malformed signature: parameter `{}` is declared twice",
                                    name.name
                                ),
                            )
                            .at(name.span, "declared again here")
                            .help("give each parameter its own name"),
                        );
                        ok = false;
                    }
                    let span = self.span_from(i);
                    params.push(FnParam { name, shape, span });
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
                            .help(format!("choose another parameter name, e.g. `{kw}_`")),
                        );
                    }
                    ok = false;
                    self.advance();
                }
                _ => {
                    if ok {
                        let found = t.kind.describe();
                        self.error(
                            Diagnostic::error(
                                code::E0011,
                                format!("malformed signature: expected a parameter name, found {found}"),
                            )
                            .at(t.span, "expected a parameter name")
                            .note("parameters are names, each with an optional shape: `fn f(x : [batch, d], w)`"),
                        );
                    }
                    ok = false;
                    self.sync_in_group();
                }
            }
            let after = self.after_item(close, ok, |p| {
                p.unexpected(
                    "`,` or `)`",
                    Some("separate the parameters with `,`".into()),
                )
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
        self.leave();
        if close.is_none() {
            ok = false;
            self.errs += 1;
        }
        (params, ok)
    }

    /// `[batch, 2 * d, _]`; the next token is `[`. Returns the shape and whether
    /// every axis is well formed (E0011 otherwise).
    pub(super) fn parse_shape(&mut self) -> (ShapeSig, bool) {
        let before = self.errs;
        let (items, span) = self.parse_args();
        let mut ok = self.errs == before;
        let mut dims = Vec::with_capacity(items.len());
        for e in &items {
            match self.dim_of(e) {
                Some(d) => dims.push(d),
                None => ok = false,
            }
        }
        (ShapeSig { dims, span }, ok)
    }

    fn dim_of(&mut self, e: &Expr) -> Option<DimSig> {
        let kind = match &e.kind {
            ExprKind::Var(n) if n == "_" => DimSigKind::Any,
            ExprKind::Var(n) => DimSigKind::Name(n.clone()),
            ExprKind::Number(v) if *v >= 0.0 && v.fract() == 0.0 && *v <= 1e15 => {
                DimSigKind::Size(*v as usize)
            }
            ExprKind::Paren(inner) => {
                let d = self.dim_of(inner)?;
                return Some(DimSig {
                    kind: d.kind,
                    span: e.span,
                });
            }
            ExprKind::Chain { links, .. } if links.len() > MAX_DIM_OPERATORS => {
                self.error(
                    Diagnostic::error(
                        code::E0011,
                        "malformed signature: too many operators in one axis",
                    )
                    .at(e.span, format!("{} operators", links.len()))
                    .note(format!(
                        "an axis of a signature has at most {MAX_DIM_OPERATORS} operators in a row"
                    ))
                    .help(
                        "write the axis with fewer operators, such as `4 * d` for `d + d + d + d`",
                    ),
                );
                return None;
            }
            ExprKind::Chain { first, links } => {
                // Left to right, as the chain is evaluated.
                let mut acc = self.dim_of(first);
                let prefixes = Expr::chain_prefixes(first, links);
                for (l, span) in links.iter().zip(prefixes) {
                    let r = self.dim_of(&l.rhs);
                    acc = match (acc, r) {
                        (Some(a), Some(r)) => Some(DimSig {
                            kind: DimSigKind::Binary {
                                op: l.op,
                                lhs: Box::new(a),
                                rhs: Box::new(r),
                            },
                            span,
                        }),
                        _ => None,
                    };
                }
                return acc.map(|d| DimSig {
                    kind: d.kind,
                    span: e.span,
                });
            }
            ExprKind::Error => return None,
            _ => {
                self.error(
                    Diagnostic::error(
                        code::E0011,
                        "malformed signature: expected a dimension name, a size or arithmetic on them",
                    )
                    .at(e.span, "not a dimension")
                    .note("an axis of a signature is a name (`d`), `_`, a non-negative integer (`3`) or `+ - * /` over them (`2 * d`)"),
                );
                return None;
            }
        };
        Some(DimSig { kind, span: e.span })
    }
}
