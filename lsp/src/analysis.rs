//! One analysis of one version of a document: the parse, the checker's
//! diagnostics, the checker's facts (values of assignments, `train` blocks,
//! optimizer calls), the cells and an index of every variable, function,
//! parameter and axis-name occurrence. A function's body is a scope of its
//! own: its parameters and variables are not the program's. Every editor feature reads an [`Analysis`]; none runs code. Shapes
//! come only from the runtime's checker (`mlpl_lang::check`).

use std::collections::HashSet;
use std::sync::Arc;

use mlpl_diag::{Diagnostic, Span};
use mlpl_lang::builtins::{self, ParamKind};
use mlpl_lang::check::query::{self, Assignment, Facts};
use mlpl_lang::check::AbsValue;
use mlpl_syntax::cells::Cell;
use mlpl_syntax::lexer::lex_full;
use mlpl_syntax::token::Token;
use mlpl_syntax::{walk, Expr, ExprKind, Program, Stmt, StmtKind};

use crate::lines::LineIndex;

/// What an occurrence of a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OccKind {
    /// A variable being assigned (or a `for` variable).
    VarDef,
    /// A variable being read.
    VarUse,
    /// An axis name in an annotation `X : [a, b] = …`.
    AxisDef,
    /// An axis name in a string argument (`sum(x, "a")`, `label(x, ["a"])`).
    AxisUse,
    /// A parameter in a function's signature.
    ParamDef,
    /// The name of a user function in its definition.
    FnDef,
    /// The name of a user function in a call.
    FnUse,
    /// A dimension name at its first use in a function's signature
    /// (`fn f(x : [n, d])`: `n` and `d`), where a call binds it.
    DimDef,
    /// A later use of that dimension name in the same signature.
    DimUse,
}

impl OccKind {
    /// Whether this names a variable or parameter (scoped), not an axis or a
    /// function (global).
    pub fn is_variable(self) -> bool {
        matches!(self, OccKind::VarDef | OccKind::VarUse | OccKind::ParamDef)
    }

    /// Whether this name belongs to one function's body or signature when it
    /// is inside one (variables, parameters, dimension names).
    pub fn is_scoped(self) -> bool {
        self.is_variable() || matches!(self, OccKind::DimDef | OccKind::DimUse)
    }

    /// Whether this is where a name is introduced.
    pub fn is_definition(self) -> bool {
        matches!(
            self,
            OccKind::VarDef
                | OccKind::AxisDef
                | OccKind::ParamDef
                | OccKind::FnDef
                | OccKind::DimDef
        )
    }

    /// The class of names this belongs to: variables, axis names or functions.
    fn class(self) -> u8 {
        match self {
            OccKind::VarDef | OccKind::VarUse | OccKind::ParamDef => 0,
            OccKind::AxisDef | OccKind::AxisUse => 1,
            OccKind::FnDef | OccKind::FnUse => 2,
            OccKind::DimDef | OccKind::DimUse => 3,
        }
    }
}

/// One occurrence of a variable or axis name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    /// The name.
    pub name: String,
    /// Where the name itself is written (inside the quotes for strings).
    pub span: Span,
    /// What it is.
    pub kind: OccKind,
    /// For a variable or parameter: the start of the function definition whose
    /// body it is in (`None` at the top level).
    pub scope: Option<usize>,
}

/// The result of analysing one text.
#[derive(Debug)]
pub struct Analysis {
    /// The analysed text.
    pub text: String,
    /// Its line table.
    pub lines: LineIndex,
    /// The parsed program.
    pub program: Program,
    /// The lexer's tokens (comments are the gaps; see [`Analysis::comments`]).
    pub tokens: Vec<Token>,
    /// Comment spans.
    pub comments: Vec<Span>,
    /// The checker's diagnostics in source order (exactly `mlpl check`'s).
    pub diagnostics: Vec<Diagnostic>,
    /// The cells (LANGUAGE §21.1).
    pub cells: Vec<Cell>,
    /// The checker's facts: assignments with their values, `train` blocks,
    /// optimizer calls.
    pub facts: Facts,
    /// Every variable and axis-name occurrence, in source order.
    pub occurrences: Vec<Occurrence>,
    /// Names assigned from `param[…]` (tracked parameters).
    pub params: HashSet<String>,
}

impl Analysis {
    /// Analyses `text`.
    pub fn new(text: &str) -> Analysis {
        let (checked, facts) = query::check_with_facts(text);
        let diagnostics = checked.diagnostics;
        let lexed = lex_full(text);
        let comments = comment_spans(text, &lexed.tokens);
        let lines = LineIndex::new(text);
        let mut occurrences = Vec::new();
        let mut params = HashSet::new();
        let fns: HashSet<String> = mlpl_lang::check::functions_of(&checked.program)
            .into_keys()
            .collect();
        let mut c = Collector {
            src: text,
            out: &mut occurrences,
            params: &mut params,
            fns: &fns,
            scope: None,
        };
        for s in &checked.program.stmts {
            c.stmt(s);
        }
        occurrences.sort_by_key(|o| o.span.start);
        Analysis {
            cells: mlpl_syntax::cells::split_lexed(text, &lexed),
            lines,
            text: text.to_string(),
            program: checked.program,
            tokens: lexed.tokens,
            comments,
            diagnostics,
            facts,
            occurrences,
            params,
        }
    }

    /// The occurrence at byte `offset` (its span touches the offset).
    pub fn occurrence_at(&self, offset: usize) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .find(|o| o.span.start <= offset && offset <= o.span.end)
    }

    /// All occurrences of the same variable (in the same scope), axis name or
    /// function as `occ`.
    pub fn related(&self, occ: &Occurrence) -> Vec<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|o| {
                o.name == occ.name
                    && o.kind.class() == occ.kind.class()
                    && (!occ.kind.is_scoped() || o.scope == occ.scope)
            })
            .collect()
    }

    /// The definition of `occ`: for a variable, the last assignment before it (or the
    /// first one, for a read before any assignment, as in a loop), or the
    /// parameter it reads inside a function; for an axis name, the first
    /// annotation that introduces it; for a function, its `fn` definition.
    pub fn definition(&self, occ: &Occurrence) -> Option<&Occurrence> {
        let all = self.related(occ);
        let defs: Vec<&&Occurrence> = all.iter().filter(|o| o.kind.is_definition()).collect();
        if !occ.kind.is_variable() {
            return defs.first().map(|o| **o).or_else(|| all.first().copied());
        }
        if matches!(occ.kind, OccKind::VarDef | OccKind::ParamDef) {
            return self.occurrences.iter().find(|o| *o == occ);
        }
        defs.iter()
            .rev()
            .find(|o| o.span.end <= occ.span.start)
            .or_else(|| defs.first())
            .map(|o| **o)
    }

    /// The innermost expression containing byte `offset` whose value the checker
    /// knows, with that value (the checker replays the program up to it, from
    /// its last checkpoint before `offset`).
    pub fn value_at(&self, offset: usize) -> Option<(Span, AbsValue)> {
        query::value_at_resumed(&self.program, &self.facts, offset)
    }

    /// The assignment whose variable name is written at `span`.
    pub fn assignment_at(&self, span: Span) -> Option<&Assignment> {
        let i = self
            .facts
            .assignments
            .partition_point(|a| a.name_span.start < span.start);
        self.facts.assignments[i..]
            .iter()
            .take_while(|a| a.name_span.start == span.start)
            .find(|a| a.name_span == span)
    }

    /// The call whose builtin name is written at `offset`: (name, name span, call span).
    pub fn call_name_at(&self, offset: usize) -> Option<(String, Span, Span)> {
        let mut found = None;
        for s in &self.program.stmts {
            if !(s.span.start <= offset && offset <= s.span.end) {
                continue;
            }
            walk::each_stmt_expr(s, &mut |e| {
                if let ExprKind::Call { name, .. } = &e.kind {
                    if name.span.start <= offset && offset <= name.span.end {
                        found = Some((name.name.clone(), name.span, e.span));
                    }
                }
            });
        }
        found
    }

    /// Variables assigned before `offset` (most recent last), with the span of the
    /// assignment that bound them last.
    pub fn variables_before(&self, offset: usize) -> Vec<&Assignment> {
        let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut out: Vec<&Assignment> = Vec::new();
        for b in &self.facts.assignments {
            if b.name_span.end <= offset {
                match at.get(b.name.as_str()) {
                    Some(&i) => out[i] = b,
                    None => {
                        at.insert(&b.name, out.len());
                        out.push(b);
                    }
                }
            }
        }
        out
    }

    /// Every axis name used in the document, in order of first appearance.
    pub fn axis_names(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for o in &self.occurrences {
            if o.kind.class() == 1 && seen.insert(o.name.clone()) {
                out.push(o.name.clone());
            }
        }
        for b in &self.facts.assignments {
            if let AbsValue::Array(a) = &b.value {
                for x in a.names.iter().filter_map(|n| n.named()) {
                    if seen.insert(x.to_string()) {
                        out.push(x.to_string());
                    }
                }
            }
        }
        out
    }
}

/// Comments: a `#` outside tokens, to the end of its line.
fn comment_spans(text: &str, tokens: &[Token]) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut gaps: Vec<(usize, usize)> = Vec::new();
    for t in tokens {
        if t.span.start > pos {
            gaps.push((pos, t.span.start));
        }
        pos = pos.max(t.span.end);
    }
    if pos < text.len() {
        gaps.push((pos, text.len()));
    }
    for (a, b) in gaps {
        let mut i = a;
        while i < b {
            if bytes[i] == b'#' {
                let mut j = i;
                while j < bytes.len() && bytes[j] != b'\n' && bytes[j] != b'\r' {
                    j += 1;
                }
                out.push(Span::new(i, j));
                i = j;
            } else {
                i += 1;
            }
        }
    }
    out
}

/// Walks the program and records occurrences.
struct Collector<'a> {
    src: &'a str,
    out: &'a mut Vec<Occurrence>,
    params: &'a mut HashSet<String>,
    /// The program's user functions.
    fns: &'a HashSet<String>,
    /// The function body being walked (its definition's start).
    scope: Option<usize>,
}

impl Collector<'_> {
    fn push(&mut self, name: &str, span: Span, kind: OccKind) {
        let scope = if kind.is_scoped() { self.scope } else { None };
        self.out.push(Occurrence {
            name: name.to_string(),
            span,
            kind,
            scope,
        });
    }

    fn block(&mut self, stmts: &[Stmt]) {
        stmts.iter().for_each(|s| self.stmt(s));
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assign { name, value } | StmtKind::Annotated { name, value, .. } => {
                self.expr(value);
                self.push(&name.name, name.span, OccKind::VarDef);
                if let StmtKind::Annotated { axes, .. } = &s.kind {
                    for a in axes {
                        self.push(&a.name, a.span, OccKind::AxisDef);
                    }
                }
                let is_param = matches!(
                    value.unparen().kind,
                    ExprKind::Ctor {
                        kind: mlpl_syntax::CtorKind::Param,
                        ..
                    }
                );
                if is_param && self.scope.is_none() {
                    self.params.insert(name.name.clone());
                }
            }
            StmtKind::Repeat { count, body } | StmtKind::Train { count, body } => {
                self.expr(count);
                self.block(&body.stmts);
            }
            StmtKind::For { var, iter, body } => {
                self.expr(iter);
                self.push(&var.name, var.span, OccKind::VarDef);
                self.block(&body.stmts);
            }
            StmtKind::Experiment { name, body } => {
                self.expr(name);
                self.block(&body.stmts);
            }
            // A function's body is a scope of its own: its names are not the
            // program's variables (rename and references keep them apart).
            StmtKind::Fn(f) => {
                self.push(&f.name.name, f.name.span, OccKind::FnDef);
                let outer = self.scope.replace(s.span.start);
                for p in &f.params {
                    self.push(&p.name.name, p.name.span, OccKind::ParamDef);
                }
                let mut seen = HashSet::new();
                let shapes = f.params.iter().filter_map(|p| p.shape.as_ref());
                for d in shapes.chain(f.ret.as_ref()).flat_map(|sh| &sh.dims) {
                    self.dims(d, &mut seen);
                }
                self.block(&f.body.stmts);
                self.scope = outer;
            }
            StmtKind::Error => {}
        }
    }

    /// The dimension names of one axis of a signature, the first use of each
    /// being its definition.
    fn dims(&mut self, d: &mlpl_syntax::DimSig, seen: &mut HashSet<String>) {
        match &d.kind {
            mlpl_syntax::DimSigKind::Name(n) => {
                let kind = if seen.insert(n.clone()) {
                    OccKind::DimDef
                } else {
                    OccKind::DimUse
                };
                self.push(n, d.span, kind);
            }
            mlpl_syntax::DimSigKind::Binary { lhs, rhs, .. } => {
                self.dims(lhs, seen);
                self.dims(rhs, seen);
            }
            mlpl_syntax::DimSigKind::Any | mlpl_syntax::DimSigKind::Size(_) => {}
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Var(name) => self.push(name, e.span, OccKind::VarUse),
            ExprKind::Call { name, args } => {
                let b = builtins::lookup(&name.name);
                if b.is_none() && self.fns.contains(&name.name) {
                    self.push(&name.name, name.span, OccKind::FnUse);
                }
                for (i, a) in args.iter().enumerate() {
                    let kind = b.and_then(|b| b.param_at(i)).map(|p| p.kind);
                    if matches!(kind, Some(ParamKind::Axis | ParamKind::Names)) {
                        axis_strings(self.src, a, self.out);
                    }
                    self.expr(a);
                }
            }
            ExprKind::List(items) | ExprKind::Ctor { dims: items, .. } => {
                items.iter().for_each(|i| self.expr(i))
            }
            ExprKind::Neg(x) | ExprKind::Paren(x) => self.expr(x),
            ExprKind::Chain { first, links } => {
                self.expr(first);
                links.iter().for_each(|l| self.expr(&l.rhs));
            }
            ExprKind::Device { target, body } => {
                self.expr(target);
                self.block(&body.stmts);
            }
            ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Error => {}
        }
    }
}

/// Axis names written in string literals of an axis or names argument: `"a"`,
/// `"a,b"` or `["a", "b"]`.
fn axis_strings(src: &str, e: &Expr, out: &mut Vec<Occurrence>) {
    match &e.unparen().kind {
        ExprKind::Str(_) => {
            let raw = &src[e.unparen().span.start..e.unparen().span.end];
            // Only plain literals (no escapes) map names to source positions.
            if raw.len() >= 2 && !raw.contains('\\') {
                let inner_start = e.unparen().span.start + 1;
                let inner = &raw[1..raw.len() - 1];
                let mut pos = 0;
                for part in inner.split(',') {
                    let trimmed = part.trim();
                    if !trimmed.is_empty() {
                        let lead = part.len() - part.trim_start().len();
                        let start = inner_start + pos + lead;
                        out.push(Occurrence {
                            name: trimmed.to_string(),
                            span: Span::new(start, start + trimmed.len()),
                            kind: OccKind::AxisUse,
                            scope: None,
                        });
                    }
                    pos += part.len() + 1;
                }
            }
        }
        ExprKind::List(items) => items.iter().for_each(|i| axis_strings(src, i, out)),
        _ => {}
    }
}

/// Shared, immutable analysis of one document version.
pub type Shared = Arc<Analysis>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_and_definitions() {
        let src = "X : [batch, feat] = zeros([2, 3])\ns = sum(X, \"batch\")\nX = X + 1\ny = label(X, \"batch,feat\")";
        let a = Analysis::new(src);
        let names: Vec<(&str, OccKind)> = a
            .occurrences
            .iter()
            .map(|o| (o.name.as_str(), o.kind))
            .collect();
        assert!(names.contains(&("batch", OccKind::AxisUse)));
        let uses: Vec<&Occurrence> = a.occurrences.iter().filter(|o| o.name == "batch").collect();
        assert_eq!(uses.len(), 3);
        for u in &uses {
            assert_eq!(&src[u.span.start..u.span.end], "batch");
        }
        // The read in line 4 resolves to the assignment in line 3.
        let last_use = a
            .occurrences
            .iter()
            .rev()
            .find(|o| o.name == "X" && o.kind == OccKind::VarUse)
            .unwrap();
        let def = a.definition(last_use).unwrap();
        assert_eq!(a.lines.position(src, def.span.start).line, 2);
        assert_eq!(a.comments.len(), 0);
    }

    #[test]
    fn cells_agree_with_the_runtime() {
        for src in [
            "",
            "x = 1\ny = 2\n",
            "# %% Setup\nx = 1\n# %%   Train  \ny = 2\n",
            "x = 1\n# %% B\ny\n",
            "# a header comment\n\n   \n# %% A\nx\r\n# %%B\r\ny",
            "a\r# %% one\rb\r# %% two\rc",
            "s = \"\n# %% inside a string\n\"\n# %% real\n",
        ] {
            let a = Analysis::new(src);
            assert_eq!(a.cells, mlpl_syntax::cells::split_cells(src), "{src:?}");
        }
    }

    #[test]
    fn comments_are_found_between_tokens() {
        let a = Analysis::new("# hi\nx = \"# not\" # yes\n");
        assert_eq!(a.comments.len(), 2);
        assert_eq!(&a.text[a.comments[1].start..a.comments[1].end], "# yes");
    }
}
