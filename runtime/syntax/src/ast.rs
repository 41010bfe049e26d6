//! The abstract syntax tree. Every node carries the byte span of its source text.
//! Both the checker and the interpreter consume this tree.

use mlpl_diag::Span;

/// A whole file or cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// Statements in order.
    pub stmts: Vec<Stmt>,
    /// The whole text.
    pub span: Span,
}

/// A `{ ... }` block.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Statements in order.
    pub stmts: Vec<Stmt>,
    /// From `{` to `}` inclusive.
    pub span: Span,
}

/// A name as written in the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The identifier text.
    pub name: String,
    /// Where it is written.
    pub span: Span,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What kind of statement.
    pub kind: StmtKind,
    /// Its full source range.
    pub span: Span,
}

/// Statement forms (LANGUAGE §4.1).
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// An expression whose value becomes the statement's value.
    Expr(Expr),
    /// `name = value`.
    Assign { name: Ident, value: Expr },
    /// `name : [a, b] = value` (LANGUAGE §4.3).
    Annotated {
        name: Ident,
        axes: Vec<Ident>,
        value: Expr,
    },
    /// `repeat count { body }`.
    Repeat { count: Expr, body: Block },
    /// `train count { body }`.
    Train { count: Expr, body: Block },
    /// `for var in iter { body }`.
    For { var: Ident, iter: Expr, body: Block },
    /// `experiment name { body }`.
    Experiment { name: Expr, body: Block },
    /// A statement that failed to parse (a diagnostic was reported).
    Error,
}

/// The four arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
}

/// `param[...]` or `tensor[...]` (LANGUAGE §10.21).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtorKind {
    /// `param[...]`: a tracked parameter when assigned.
    Param,
    /// `tensor[...]`: never tracked.
    Tensor,
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What kind of expression.
    pub kind: ExprKind,
    /// Its full source range.
    pub span: Span,
}

/// Expression forms (LANGUAGE §4.1).
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A number literal, already converted to the nearest f64.
    Number(f64),
    /// A string literal with escapes resolved.
    Str(String),
    /// A variable reference.
    Var(String),
    /// `name(args)`: always a builtin call.
    Call { name: Ident, args: Vec<Expr> },
    /// `[a, b, ...]`.
    List(Vec<Expr>),
    /// Unary minus.
    Neg(Box<Expr>),
    /// `lhs op rhs`; `op_span` is the operator's own span.
    Binary {
        op: BinOp,
        op_span: Span,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `(expr)`: kept so spans and tooling see the parentheses.
    Paren(Box<Expr>),
    /// `param[dims]` / `tensor[dims]`.
    Ctor { kind: CtorKind, dims: Vec<Expr> },
    /// `device(target) { body }`.
    Device { target: Box<Expr>, body: Block },
    /// An expression that failed to parse (a diagnostic was reported).
    Error,
}

impl Expr {
    /// The expression without any surrounding parentheses.
    pub fn unparen(&self) -> &Expr {
        match &self.kind {
            ExprKind::Paren(inner) => inner.unparen(),
            _ => self,
        }
    }
}
