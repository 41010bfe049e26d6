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
    /// `fn name(params) [-> [dims]] { body }`: a function definition (only at
    /// the top level of a program).
    Fn(Box<FnDef>),
    /// A statement that failed to parse (a diagnostic was reported).
    Error,
}

/// A user-defined function: `fn attend(x : [batch, T, d], w : [d, d]) -> [batch, T, d] { ... }`.
#[derive(Clone, Debug, PartialEq)]
pub struct FnDef {
    /// The function's name.
    pub name: Ident,
    /// Parameters in order.
    pub params: Vec<FnParam>,
    /// The declared result shape, if any.
    pub ret: Option<ShapeSig>,
    /// The body; the value of its last statement is the result.
    pub body: Block,
    /// From `fn` to the `)` of the parameter list, or to the result shape when
    /// there is one (the signature as written).
    pub sig_span: Span,
    /// The definition as written, from `fn` to the body's `}` (a saved session
    /// keeps its functions as this text and parses it again on restore).
    pub source: String,
}

/// One parameter of a function, with its optional shape.
#[derive(Clone, Debug, PartialEq)]
pub struct FnParam {
    /// The parameter's name.
    pub name: Ident,
    /// `: [dims]`, if written.
    pub shape: Option<ShapeSig>,
    /// The whole parameter (name and shape).
    pub span: Span,
}

/// A shape in a signature, `[batch, T, 2 * d]`: one entry per axis.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeSig {
    /// The axes in order.
    pub dims: Vec<DimSig>,
    /// From `[` to `]`.
    pub span: Span,
}

/// One axis of a signature's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct DimSig {
    /// What the axis says.
    pub kind: DimSigKind,
    /// Where it is written.
    pub span: Span,
}

/// The forms of a signature's axis.
#[derive(Clone, Debug, PartialEq)]
pub enum DimSigKind {
    /// A dimension name: binds the size (and the axis name) at its first use.
    Name(String),
    /// `_`: any size, any name.
    Any,
    /// A size written as a number.
    Size(usize),
    /// `a op b` over names and numbers (`2 * d`, `d / heads`).
    Binary {
        op: BinOp,
        lhs: Box<DimSig>,
        rhs: Box<DimSig>,
    },
}

impl DimSig {
    /// The names this axis mentions, in order.
    pub fn names(&self) -> Vec<&str> {
        match &self.kind {
            DimSigKind::Name(n) => vec![n.as_str()],
            DimSigKind::Binary { lhs, rhs, .. } => {
                let mut v = lhs.names();
                v.extend(rhs.names());
                v
            }
            DimSigKind::Any | DimSigKind::Size(_) => Vec::new(),
        }
    }

    /// The axis as written, normalised (`2 * d`).
    pub fn text(&self) -> String {
        match &self.kind {
            DimSigKind::Name(n) => n.clone(),
            DimSigKind::Any => "_".to_string(),
            DimSigKind::Size(n) => n.to_string(),
            DimSigKind::Binary { op, lhs, rhs } => {
                let side = |d: &DimSig| match d.kind {
                    DimSigKind::Binary { .. } => format!("({})", d.text()),
                    _ => d.text(),
                };
                format!("{} {} {}", side(lhs), op.symbol(), side(rhs))
            }
        }
    }

    /// The size under `env` (a name's size), if every name is bound and the
    /// arithmetic is exact (a division must leave no remainder).
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<usize>) -> Option<usize> {
        match &self.kind {
            DimSigKind::Name(n) => env(n),
            DimSigKind::Any => None,
            DimSigKind::Size(n) => Some(*n),
            DimSigKind::Binary { op, lhs, rhs } => {
                let (a, b) = (lhs.eval(env)?, rhs.eval(env)?);
                match op {
                    BinOp::Add => a.checked_add(b),
                    BinOp::Sub => a.checked_sub(b),
                    BinOp::Mul => a.checked_mul(b),
                    BinOp::Div => (b != 0 && a % b == 0).then(|| a / b),
                }
            }
        }
    }
}

impl ShapeSig {
    /// The shape as written, normalised: `[batch, T, 2 * d]`.
    pub fn text(&self) -> String {
        let dims: Vec<String> = self.dims.iter().map(DimSig::text).collect();
        format!("[{}]", dims.join(", "))
    }
}

impl FnDef {
    /// The signature as text: `fn attend(x : [batch, T, d], w) -> [batch, T, d]`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| match &p.shape {
                Some(s) => format!("{} : {}", p.name.name, s.text()),
                None => p.name.name.clone(),
            })
            .collect();
        let ret = match &self.ret {
            Some(r) => format!(" -> {}", r.text()),
            None => String::new(),
        };
        format!("fn {}({}){}", self.name.name, params.join(", "), ret)
    }
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

/// One operator of a [`ExprKind::Chain`] with its right operand.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// The operator.
    pub op: BinOp,
    /// The operator's own span.
    pub op_span: Span,
    /// The right operand.
    pub rhs: Expr,
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
    /// `first op rhs op rhs ...`: operators of one precedence level (`+ -`, or
    /// `* /`) applied left to right, so `a - b + c` is `(a - b) + c`. However
    /// long, a chain is one node: only real nesting (brackets, calls, a tighter
    /// operator inside a looser one) deepens the tree.
    Chain { first: Box<Expr>, links: Vec<Link> },
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
    /// The spans of a chain's intermediate results, one per link: the `k`-th is
    /// the left operand of link `k + 1`, from the chain's first operand to link
    /// `k`'s right one (the last is the whole chain's value).
    pub fn chain_prefixes<'a>(first: &Expr, links: &'a [Link]) -> impl Iterator<Item = Span> + 'a {
        let start = first.span;
        links.iter().map(move |l| start.to(l.rhs.span))
    }

    /// An expression standing for the span of an intermediate result of a
    /// chain, which has no node of its own (diagnostics use only its span).
    pub fn placeholder(span: Span) -> Expr {
        Expr {
            kind: ExprKind::Error,
            span,
        }
    }

    /// The expression without any surrounding parentheses.
    pub fn unparen(&self) -> &Expr {
        match &self.kind {
            ExprKind::Paren(inner) => inner.unparen(),
            _ => self,
        }
    }
}
