//! Go to definition, references, rename, document symbols, folding ranges and
//! semantic tokens.

use std::collections::HashMap;

use lsp_types::{
    DocumentSymbol, FoldingRange, FoldingRangeKind, Location, Range, SemanticToken,
    SemanticTokenModifier, SemanticTokenType, SemanticTokensLegend, SymbolKind, TextEdit, Url,
    WorkspaceEdit,
};
use mlpl_diag::Span;
use mlpl_lang::builtins;
use mlpl_syntax::token::TokenKind;
use mlpl_syntax::{ExprKind, Stmt, StmtKind};

use mlpl_lang::check::AbsValue;

use crate::analysis::{Analysis, OccKind};
use crate::values::describe;
use mlpl_syntax::walk;

/// The location of the definition of the name at `offset`.
pub fn definition(a: &Analysis, uri: &Url, offset: usize) -> Option<Location> {
    let occ = a.occurrence_at(offset)?;
    let def = a.definition(occ)?;
    Some(Location::new(uri.clone(), a.lines.range(&a.text, def.span)))
}

/// Every occurrence of the variable, parameter, function or axis name at
/// `offset` (a variable's in its own scope only).
pub fn references(
    a: &Analysis,
    uri: &Url,
    offset: usize,
    include_declaration: bool,
) -> Vec<Location> {
    let Some(occ) = a.occurrence_at(offset) else {
        return Vec::new();
    };
    a.related(occ)
        .into_iter()
        .filter(|o| include_declaration || !o.kind.is_definition())
        .map(|o| Location::new(uri.clone(), a.lines.range(&a.text, o.span)))
        .collect()
}

/// The range of the renameable name at `offset`.
pub fn prepare_rename(a: &Analysis, offset: usize) -> Option<Range> {
    let occ = a.occurrence_at(offset)?;
    Some(a.lines.range(&a.text, occ.span))
}

/// Why a new name for a name of kind `kind` is not acceptable, if it is not.
pub fn invalid_name(new_name: &str, kind: OccKind) -> Option<String> {
    let mut chars = new_name.chars();
    let ok_start = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !ok_start
        || !new_name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Some(format!("`{new_name}` is not an identifier"));
    }
    if TokenKind::keyword(new_name).is_some() {
        return Some(format!("`{new_name}` is a keyword"));
    }
    let function = matches!(kind, OccKind::FnDef | OccKind::FnUse);
    if function && builtins::lookup(new_name).is_some() {
        // E0112's message: a definition may not take a builtin's name.
        return Some(format!(
            "function `{new_name}` has the name of a builtin (E0112): functions may not shadow builtins"
        ));
    }
    if kind.is_variable() && builtins::lookup(new_name).is_some() {
        return Some(format!("`{new_name}` would shadow a builtin (W0105)"));
    }
    None
}

/// The edits renaming the variable, parameter, function or axis name at
/// `offset`: every occurrence in its scope (a parameter's in its function's
/// body; a function's at its definition and every call).
pub fn rename(
    a: &Analysis,
    uri: &Url,
    offset: usize,
    new_name: &str,
) -> Result<Option<WorkspaceEdit>, String> {
    let Some(occ) = a.occurrence_at(offset) else {
        return Ok(None);
    };
    if let Some(why) = invalid_name(new_name, occ.kind) {
        return Err(why);
    }
    if matches!(occ.kind, OccKind::FnDef | OccKind::FnUse)
        && new_name != occ.name
        && mlpl_lang::check::functions_of(&a.program).contains_key(new_name)
    {
        return Err(format!("a function `{new_name}` is already defined"));
    }
    let edits: Vec<TextEdit> = a
        .related(occ)
        .into_iter()
        .map(|o| TextEdit::new(a.lines.range(&a.text, o.span), new_name.to_string()))
        .collect();
    let mut changes = HashMap::new();
    changes.insert(uri.clone(), edits);
    Ok(Some(WorkspaceEdit::new(changes)))
}

#[allow(deprecated)]
fn symbol(
    a: &Analysis,
    name: String,
    detail: Option<String>,
    kind: SymbolKind,
    span: Span,
    sel: Span,
    children: Vec<DocumentSymbol>,
) -> DocumentSymbol {
    DocumentSymbol {
        name: if name.is_empty() { " ".into() } else { name },
        detail,
        kind,
        tags: None,
        deprecated: None,
        range: a.lines.range(&a.text, span),
        selection_range: a.lines.range(&a.text, sel),
        children: if children.is_empty() {
            None
        } else {
            Some(children)
        },
    }
}

fn stmt_symbols(a: &Analysis, s: &Stmt, out: &mut Vec<DocumentSymbol>) {
    match &s.kind {
        StmtKind::Assign { name, .. } | StmtKind::Annotated { name, .. } => {
            let v = a.assignment_at(name.span).map(|b| &b.value);
            let kind = match v {
                Some(AbsValue::Model(_)) => SymbolKind::CLASS,
                Some(AbsValue::Str(_)) => SymbolKind::STRING,
                _ => SymbolKind::VARIABLE,
            };
            out.push(symbol(
                a,
                name.name.clone(),
                v.map(describe),
                kind,
                s.span,
                name.span,
                Vec::new(),
            ));
        }
        StmtKind::Train { body, .. } => {
            let mut children = Vec::new();
            body.stmts
                .iter()
                .for_each(|x| stmt_symbols(a, x, &mut children));
            let header = a.text[s.span.start..s.span.end]
                .split('{')
                .next()
                .unwrap_or("train")
                .trim()
                .to_string();
            let kw = Span::new(s.span.start, (s.span.start + 5).min(s.span.end));
            let detail = a
                .facts
                .trains
                .iter()
                .find(|t| t.span == s.span)
                .and_then(|t| t.optimizer)
                .map(|i| format!("{} step", a.facts.optimizers[i].name));
            out.push(symbol(
                a,
                header,
                detail,
                SymbolKind::EVENT,
                s.span,
                kw,
                children,
            ));
        }
        StmtKind::Repeat { body, .. }
        | StmtKind::For { body, .. }
        | StmtKind::Experiment { body, .. } => {
            body.stmts.iter().for_each(|x| stmt_symbols(a, x, out));
        }
        StmtKind::Fn(f) => out.push(symbol(
            a,
            f.name.name.clone(),
            Some(f.signature()),
            SymbolKind::FUNCTION,
            s.span,
            f.name.span,
            Vec::new(),
        )),
        StmtKind::Expr(_) | StmtKind::Error => {}
    }
}

/// Document symbols: cells (when the file has markers) holding their assignments,
/// models and `train` blocks.
pub fn document_symbols(a: &Analysis) -> Vec<DocumentSymbol> {
    let mut flat = Vec::new();
    let mut spans = Vec::new();
    for s in &a.program.stmts {
        let before = flat.len();
        stmt_symbols(a, s, &mut flat);
        for _ in before..flat.len() {
            spans.push(s.span.start);
        }
    }
    let has_markers = a.cells.len() > 1
        || a.cells.first().is_some_and(|c| {
            !c.title.is_empty() || a.text[c.span.start..c.span.end].starts_with("# %%")
        });
    if !has_markers {
        return flat;
    }
    let mut cells = Vec::new();
    let mut items = flat.into_iter().zip(spans).peekable();
    for c in &a.cells {
        let mut children = Vec::new();
        while let Some((_, start)) = items.peek() {
            if *start < c.span.end {
                let (sym, start) = items.next().unwrap();
                if start >= c.span.start {
                    children.push(sym);
                }
            } else {
                break;
            }
        }
        let first_line_end = a.text[c.span.start..c.span.end]
            .find(['\n', '\r'])
            .map_or(c.span.end, |i| c.span.start + i);
        let name = if c.title.is_empty() {
            format!("Cell {}", c.index + 1)
        } else {
            c.title.clone()
        };
        cells.push(symbol(
            a,
            name,
            Some(format!("cell {}", c.index)),
            SymbolKind::NAMESPACE,
            c.span,
            Span::new(c.span.start, first_line_end),
            children,
        ));
    }
    cells
}

/// Folding ranges: cells, `{ }` blocks and multi-line brackets.
pub fn folding_ranges(a: &Analysis) -> Vec<FoldingRange> {
    let mut out = Vec::new();
    let line = |off: usize| a.lines.line_of(off) as u32;
    if a.cells.len() > 1 || a.text.trim_start().starts_with("# %%") {
        for c in &a.cells {
            let start = line(c.span.start);
            let mut end_off = c.span.end;
            while end_off > c.span.start && a.text.as_bytes()[end_off - 1].is_ascii_whitespace() {
                end_off -= 1;
            }
            let end = line(end_off);
            if end > start {
                out.push(FoldingRange {
                    start_line: start,
                    start_character: None,
                    end_line: end,
                    end_character: None,
                    kind: Some(FoldingRangeKind::Region),
                    collapsed_text: None,
                });
            }
        }
    }
    let mut stack: Vec<usize> = Vec::new();
    for t in &a.tokens {
        match t.kind {
            TokenKind::LBrace | TokenKind::LParen | TokenKind::LBracket => stack.push(t.span.start),
            TokenKind::RBrace | TokenKind::RParen | TokenKind::RBracket => {
                if let Some(open) = stack.pop() {
                    let (s, e) = (line(open), line(t.span.start));
                    if e > s {
                        out.push(FoldingRange {
                            start_line: s,
                            start_character: None,
                            end_line: e.saturating_sub(1).max(s),
                            end_character: None,
                            kind: None,
                            collapsed_text: None,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The semantic token types, in legend order.
pub const TOKEN_TYPES: &[SemanticTokenType] = &[
    SemanticTokenType::KEYWORD,
    SemanticTokenType::FUNCTION,
    SemanticTokenType::VARIABLE,
    SemanticTokenType::PARAMETER,
    SemanticTokenType::TYPE_PARAMETER,
    SemanticTokenType::STRING,
    SemanticTokenType::NUMBER,
    SemanticTokenType::COMMENT,
    SemanticTokenType::OPERATOR,
];

/// The semantic token modifiers, in legend order.
pub const TOKEN_MODIFIERS: &[SemanticTokenModifier] = &[
    SemanticTokenModifier::DECLARATION,
    SemanticTokenModifier::DEFAULT_LIBRARY,
    SemanticTokenModifier::READONLY,
];

/// The legend advertised in the server's capabilities.
pub fn legend() -> SemanticTokensLegend {
    SemanticTokensLegend {
        token_types: TOKEN_TYPES.to_vec(),
        token_modifiers: TOKEN_MODIFIERS.to_vec(),
    }
}

const KEYWORD: u32 = 0;
const FUNCTION: u32 = 1;
const VARIABLE: u32 = 2;
const PARAMETER: u32 = 3;
const AXIS: u32 = 4;
const STRING: u32 = 5;
const NUMBER: u32 = 6;
const COMMENT: u32 = 7;
const OPERATOR: u32 = 8;
const DECLARATION: u32 = 1;
const DEFAULT_LIBRARY: u32 = 2;

/// Semantic tokens: keywords, builtins (`defaultLibrary`), user functions
/// (`function`, `declaration` at the definition), variables, tracked parameters
/// and function parameters (`parameter`), axis names and a signature's
/// dimension names (`typeParameter`), strings,
/// numbers, comments and operators. Multi-line tokens are split per line.
pub fn semantic_tokens(a: &Analysis) -> Vec<SemanticToken> {
    let mut raw: Vec<(Span, u32, u32)> = Vec::new();
    // Names from the AST first: they decide what an identifier token is.
    let mut classified: HashMap<usize, (u32, u32)> = HashMap::new();
    for s in &a.program.stmts {
        walk::each_stmt_expr(s, &mut |e| {
            if let ExprKind::Call { name, .. } = &e.kind {
                let m = if builtins::lookup(&name.name).is_some() {
                    DEFAULT_LIBRARY
                } else {
                    0
                };
                classified.insert(name.span.start, (FUNCTION, m));
            }
        });
    }
    // Parameters of user functions, by the function (its start) they belong to.
    let fn_params: std::collections::HashSet<(Option<usize>, &str)> = a
        .occurrences
        .iter()
        .filter(|o| o.kind == OccKind::ParamDef)
        .map(|o| (o.scope, o.name.as_str()))
        .collect();
    for o in &a.occurrences {
        let (t, m) = match o.kind {
            OccKind::ParamDef => (PARAMETER, DECLARATION),
            OccKind::FnDef => (FUNCTION, DECLARATION),
            OccKind::FnUse => (FUNCTION, 0),
            OccKind::VarDef | OccKind::VarUse => {
                let tracked = o.scope.is_none() && a.params.contains(&o.name);
                let t = if tracked || fn_params.contains(&(o.scope, o.name.as_str())) {
                    PARAMETER
                } else {
                    VARIABLE
                };
                (
                    t,
                    if o.kind == OccKind::VarDef {
                        DECLARATION
                    } else {
                        0
                    },
                )
            }
            // Dimension names in signatures are axis-like (`typeParameter`).
            OccKind::AxisDef | OccKind::DimDef => (AXIS, DECLARATION),
            OccKind::AxisUse | OccKind::DimUse => (AXIS, 0),
        };
        classified.insert(o.span.start, (t, m));
    }
    let mut axis_in_strings: Vec<Span> = a
        .occurrences
        .iter()
        .filter(|o| o.kind == OccKind::AxisUse)
        .map(|o| o.span)
        .collect();
    axis_in_strings.sort_by_key(|s| s.start);
    for t in &a.tokens {
        let kind = match &t.kind {
            TokenKind::Repeat
            | TokenKind::Train
            | TokenKind::For
            | TokenKind::In
            | TokenKind::Experiment
            | TokenKind::Device
            | TokenKind::Fn => Some((KEYWORD, 0)),
            TokenKind::Ident(n) if n == "param" || n == "tensor" => Some((KEYWORD, 0)),
            TokenKind::Ident(_) => classified
                .get(&t.span.start)
                .copied()
                .or(Some((VARIABLE, 0))),
            TokenKind::Number(_) | TokenKind::BadNumber => Some((NUMBER, 0)),
            TokenKind::Str(_) => {
                // Axis names inside the string get their own tokens.
                // `axis_in_strings` is in source order: the ones inside this
                // string are found by binary search (linear in the text).
                let from = axis_in_strings.partition_point(|s| s.start < t.span.start);
                let inner: Vec<Span> = axis_in_strings[from..]
                    .iter()
                    .copied()
                    .take_while(|s| s.start < t.span.end)
                    .filter(|s| s.end <= t.span.end)
                    .collect();
                let mut pos = t.span.start;
                for s in inner {
                    if s.start > pos {
                        raw.push((Span::new(pos, s.start), STRING, 0));
                    }
                    raw.push((s, AXIS, 0));
                    pos = s.end;
                }
                if pos < t.span.end {
                    raw.push((Span::new(pos, t.span.end), STRING, 0));
                }
                None
            }
            TokenKind::Plus
            | TokenKind::Minus
            | TokenKind::Star
            | TokenKind::Slash
            | TokenKind::Eq => Some((OPERATOR, 0)),
            _ => None,
        };
        if let Some((k, m)) = kind {
            raw.push((t.span, k, m));
        }
    }
    for c in &a.comments {
        raw.push((*c, COMMENT, 0));
    }
    raw.sort_by_key(|(s, ..)| s.start);
    encode(a, &raw)
}

/// The dimension names of one signature axis (`2 * d`: `d`) as axis tokens.
fn encode(a: &Analysis, raw: &[(Span, u32, u32)]) -> Vec<SemanticToken> {
    let mut out = Vec::new();
    let (mut prev_line, mut prev_col) = (0u32, 0u32);
    // The UTF-16 column of byte `at` on line `line`, advanced token by token so
    // that a long line costs its length once, not once per token.
    let mut cursor: Option<(usize, usize, u32)> = None;
    let mut position = |line: usize, s: usize| -> lsp_types::Position {
        let (from, col) = match cursor {
            Some((l, at, col)) if l == line && at <= s => (at, col),
            _ => (a.lines.line_start(line), 0),
        };
        let s = if a.text.is_char_boundary(s) {
            s
        } else {
            return a.lines.position(&a.text, s);
        };
        let col = col + a.text[from..s].encode_utf16().count() as u32;
        cursor = Some((line, s, col));
        lsp_types::Position::new(line as u32, col)
    };
    for &(span, kind, mods) in raw {
        if span.is_empty() {
            continue;
        }
        // Split at line breaks.
        let first = a.lines.line_of(span.start);
        let last = a.lines.line_of(span.end.saturating_sub(1).max(span.start));
        for line in first..=last {
            let s = span.start.max(a.lines.line_start(line));
            let e = span.end.min(a.lines.line_end(&a.text, line));
            if e <= s {
                continue;
            }
            let p = position(line, s);
            let len: u32 = a.text[s..e].encode_utf16().count() as u32;
            let delta_line = p.line - prev_line;
            let delta_start = if delta_line == 0 {
                p.character - prev_col
            } else {
                p.character
            };
            out.push(SemanticToken {
                delta_line,
                delta_start,
                length: len,
                token_type: kind,
                token_modifiers_bitset: mods,
            });
            prev_line = p.line;
            prev_col = p.character;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantic_tokens_are_relative_and_classified() {
        let a = Analysis::new("# c\nX : [batch] = iota(3)\ns = sum(X, \"batch\")\n");
        let toks = semantic_tokens(&a);
        assert_eq!(toks[0].token_type, COMMENT);
        let types: Vec<u32> = toks.iter().map(|t| t.token_type).collect();
        assert!(types.contains(&AXIS));
        assert!(types.contains(&FUNCTION));
        // `"` then `batch` (axis) then `"` inside the string.
        let n = toks.iter().filter(|t| t.token_type == AXIS).count();
        assert_eq!(n, 2);
    }

    #[test]
    fn semantic_token_columns_are_exact_on_long_non_ascii_lines() {
        let line: String = (0..3000).map(|i| format!("é{i} = \"ü\" + {i} ")).collect();
        let text = format!("x = 1\n{line}\ny = 2 # ok\n");
        let a = Analysis::new(&text);
        let toks = semantic_tokens(&a);
        let (mut l, mut c) = (0u32, 0u32);
        let mut at = std::collections::HashSet::new();
        for t in &toks {
            if t.delta_line > 0 {
                l += t.delta_line;
                c = t.delta_start;
            } else {
                c += t.delta_start;
            }
            at.insert((l, c));
        }
        let numbers: Vec<_> = a
            .tokens
            .iter()
            .filter(|t| matches!(t.kind, TokenKind::Number(_)))
            .collect();
        assert!(numbers.len() > 3000);
        for t in numbers {
            let p = a.lines.position(&a.text, t.span.start);
            assert!(at.contains(&(p.line, p.character)), "{p:?}");
        }
    }

    #[test]
    fn symbols_group_by_cell() {
        let a = Analysis::new("# %% A\nx = 1\nm = linear(2, 3, 0)\n# %% B\ntrain 3 { y = 2 }\n");
        let s = document_symbols(&a);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "A");
        let kids = s[0].children.as_ref().unwrap();
        assert_eq!(kids[1].kind, SymbolKind::CLASS);
        assert_eq!(s[1].children.as_ref().unwrap()[0].name, "train 3");
        assert!(folding_ranges(&a).len() >= 2);
    }

    #[test]
    fn rename_checks_names() {
        assert!(invalid_name("train", OccKind::VarUse).is_some());
        assert!(invalid_name("matmul", OccKind::VarDef).is_some());
        assert!(invalid_name("matmul", OccKind::AxisUse).is_none());
        assert!(invalid_name("1x", OccKind::VarUse).is_some());
        assert!(invalid_name("ok_2", OccKind::VarUse).is_none());
        let f = invalid_name("softmax", OccKind::FnDef).unwrap();
        assert!(
            f.contains("E0112") && f.contains("name of a builtin"),
            "{f}"
        );
        assert!(invalid_name("fn", OccKind::FnUse).is_some());
        assert!(invalid_name("my_softmax", OccKind::FnUse).is_none());
    }
}
