//! Walking the tree: the direct children of an expression, the expression and
//! body of a statement, and pre-order visits of every expression. The consumers
//! of the AST (checker, interpreter, capture guards, language server) handle
//! the nodes they care about and leave the structure to these functions, so a
//! new kind of node is added here once.

use crate::ast::{Block, Expr, ExprKind, FnDef, Link, Stmt, StmtKind};

/// The direct sub-expressions of `e`, in source order: call arguments, list
/// items and constructor sizes, the operand of `-` and of parentheses, every
/// operand of a chain of operators, and a `device` block's target (its body is
/// [`device_body`]).
pub fn children(e: &Expr) -> impl Iterator<Item = &Expr> {
    let (one, many, links): (Option<&Expr>, &[Expr], &[Link]) = match &e.kind {
        ExprKind::Call { args, .. } => (None, args, &[]),
        ExprKind::List(items) | ExprKind::Ctor { dims: items, .. } => (None, items, &[]),
        ExprKind::Neg(x) | ExprKind::Paren(x) => (Some(x), &[], &[]),
        ExprKind::Chain { first, links } => (Some(first), &[], links),
        ExprKind::Device { target, .. } => (Some(target), &[], &[]),
        ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Var(_) | ExprKind::Error => {
            (None, &[], &[])
        }
    };
    one.into_iter()
        .chain(many)
        .chain(links.iter().map(|l| &l.rhs))
}

/// The body of a `device` block expression.
pub fn device_body(e: &Expr) -> Option<&Block> {
    match &e.kind {
        ExprKind::Device { body, .. } => Some(body),
        _ => None,
    }
}

/// The expression a statement evaluates (its value, loop count or iterable, or
/// experiment name), if it has one.
pub fn stmt_expr(s: &Stmt) -> Option<&Expr> {
    match &s.kind {
        StmtKind::Expr(e)
        | StmtKind::Assign { value: e, .. }
        | StmtKind::Annotated { value: e, .. }
        | StmtKind::Repeat { count: e, .. }
        | StmtKind::Train { count: e, .. }
        | StmtKind::For { iter: e, .. }
        | StmtKind::Experiment { name: e, .. } => Some(e),
        StmtKind::Fn(_) | StmtKind::Error => None,
    }
}

/// The body of a `repeat`, `train`, `for` or `experiment` statement, or of a
/// function definition (a function's body is its own scope: consumers that track
/// variables check [`fn_def`] first).
pub fn stmt_body(s: &Stmt) -> Option<&Block> {
    match &s.kind {
        StmtKind::Repeat { body, .. }
        | StmtKind::Train { body, .. }
        | StmtKind::For { body, .. }
        | StmtKind::Experiment { body, .. } => Some(body),
        StmtKind::Fn(f) => Some(&f.body),
        StmtKind::Expr(_)
        | StmtKind::Assign { .. }
        | StmtKind::Annotated { .. }
        | StmtKind::Error => None,
    }
}

/// The function a statement defines, if it is a definition.
pub fn fn_def(s: &Stmt) -> Option<&FnDef> {
    match &s.kind {
        StmtKind::Fn(f) => Some(f),
        _ => None,
    }
}

/// The top-level function definition whose name is at `offset`.
pub fn fn_at(program: &crate::ast::Program, offset: usize) -> Option<&FnDef> {
    program
        .stmts
        .iter()
        .filter_map(fn_def)
        .find(|f| f.name.span.start <= offset && offset <= f.name.span.end)
}

/// Calls `f` on `e` and every expression below it, pre-order, the statements of
/// `device` blocks included.
pub fn each_expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    for c in children(e) {
        each_expr(c, f);
    }
    if let Some(body) = device_body(e) {
        body.stmts.iter().for_each(|s| each_stmt_expr(s, f));
    }
}

/// Calls `f` on every expression of `s`, pre-order, nested bodies included.
pub fn each_stmt_expr(s: &Stmt, f: &mut dyn FnMut(&Expr)) {
    if let Some(e) = stmt_expr(s) {
        each_expr(e, f);
    }
    if let Some(body) = stmt_body(s) {
        body.stmts.iter().for_each(|s| each_stmt_expr(s, f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn visited(src: &str) -> Vec<String> {
        let p = parse(src);
        let mut out = Vec::new();
        for s in &p.program.stmts {
            each_stmt_expr(s, &mut |e| {
                out.push(src[e.span.start..e.span.end].to_string())
            });
        }
        out
    }

    #[test]
    fn every_expression_once_in_pre_order() {
        assert_eq!(
            visited("f(a, -b) + [1, c]"),
            [
                "f(a, -b) + [1, c]",
                "f(a, -b)",
                "a",
                "-b",
                "b",
                "[1, c]",
                "1",
                "c"
            ]
        );
        assert_eq!(visited("repeat n { x = (y) }"), ["n", "(y)", "y"]);
        // A function's body is visited; its signature's dimensions are not
        // expressions.
        assert_eq!(
            visited("fn f(x : [d]) -> [d] { y = x + 1 }"),
            ["x + 1", "x", "1"]
        );
        assert_eq!(
            visited("device(\"cpu\") { z = w }"),
            ["device(\"cpu\") { z = w }", "\"cpu\"", "w"]
        );
    }
}
