//! The bracket pass: pairs every `(` `[` `{` with its closer before the
//! recursive descent, so that after a mistake the parser knows where each group
//! ends (E0007 for unclosed openers, E0008 for unmatched closers, W0003 for cell
//! markers inside brackets).

use crate::lexer::{CellMarker, Lexed};
use crate::token::{Token, TokenKind};
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

use super::MAX_DEPTH;

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
pub(super) fn pair_brackets(lexed: &Lexed) -> BracketPairs {
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
            let mut d = Diagnostic::error(code::E0007, format!("unclosed delimiter `{o}`"))
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
                    Diagnostic::of(code::W0003)
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
                        Diagnostic::error(
                            code::E0008,
                            format!("unmatched closing delimiter `{c}`"),
                        )
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
                    Diagnostic::error(code::E0008, format!("unmatched closing delimiter `{c}`"))
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
pub(super) struct BracketPairs {
    partner: Vec<Option<usize>>,
    unmatched: Vec<bool>,
    /// E0007, E0008 and W0003, for the parse result.
    pub(super) diagnostics: Vec<Diagnostic>,
}

/// Drops the unmatched closers from `tokens` and renumbers the partners: the
/// tokens the parser reads and, per token, the index of its closing partner.
pub(super) fn keep_matched(
    tokens: Vec<Token>,
    pairs: &BracketPairs,
) -> (Vec<Token>, Vec<Option<usize>>) {
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
pub(super) fn is_typo_candidate(open: &TokenKind, closer: &TokenKind) -> bool {
    matches!(
        (open, closer),
        (TokenKind::LParen, TokenKind::RBracket) | (TokenKind::LBracket, TokenKind::RParen)
    )
}

/// E0008 for a closer of the wrong kind that closes `open`.
pub(super) fn mismatched(open: &Token, closer: &Token) -> Diagnostic {
    let o = open.kind.symbol().unwrap_or("?");
    let c = closer.kind.symbol().unwrap_or("?");
    let expected = open.kind.partner().and_then(|k| k.symbol()).unwrap_or("?");
    Diagnostic::error(code::E0008, format!("mismatched closing delimiter `{c}`"))
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
pub(super) fn simulate(toks: &[Token], from: usize, mut stack: Vec<TokenKind>) -> usize {
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
