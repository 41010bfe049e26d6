//! Static shape inference for the editor: the abstract value of every expression
//! and assignment, the models a program builds, its `train` blocks and optimizer
//! calls, and the shape and named-axis errors it can prove (LANGUAGE §8–9, §20.4).
//!
//! The runtime's checker (`mlpl_runtime::check`) reports names and arity today; its
//! shape inference is being written. Until it exposes the abstract value of each
//! expression, [`LocalEngine`] implements the rules here, behind the
//! [`ShapeEngine`] trait, so the server can switch to the checker's engine by
//! providing another implementation. Like the checker, it only reports what it can
//! prove: an unknown size or rank is never an error.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use mlpl_runtime::check::abstract_value::Dim;
use mlpl_runtime::data::corpora;
use mlpl_runtime::diag::{Diagnostic, Span};
use mlpl_runtime::estimate::hypothetical;
use mlpl_runtime::nn::layers::{
    Attention, Dropout, Embed, LayerNorm, Linear, Lora, Moe, RmsNorm, Rope, SwiGlu,
};
use mlpl_runtime::nn::{Activation, Layer};
use mlpl_runtime::syntax::{BinOp, CtorKind, Expr, ExprKind, Program, Stmt, StmtKind};
use mlpl_runtime::value::DeviceTarget;

use crate::values::{Arr, ModelInfo, Val};

/// A source of static facts about a program.
pub trait ShapeEngine: Send + Sync {
    /// Infers the facts of a parsed program; `src` is its text.
    fn infer(&self, program: &Program, src: &str) -> Facts;
}

/// The shape rules implemented in this crate (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalEngine;

impl ShapeEngine for LocalEngine {
    fn infer(&self, program: &Program, src: &str) -> Facts {
        let _ = src;
        let mut inf = Infer {
            index: HashMap::new(),
            env: HashMap::new(),
            facts: Facts::default(),
            next_id: 0,
            trains: Vec::new(),
        };
        for s in &program.stmts {
            inf.stmt(s);
        }
        inf.facts
            .values
            .sort_by_key(|(s, _)| (s.start, std::cmp::Reverse(s.end)));
        inf.facts
    }
}

/// One assignment (or loop variable) and the value it binds.
#[derive(Clone, Debug)]
pub struct Binding {
    /// The variable.
    pub name: String,
    /// Where the name is written.
    pub name_span: Span,
    /// The whole statement.
    pub stmt_span: Span,
    /// The bound value.
    pub value: Val,
    /// Whether the statement has an axis annotation.
    pub annotated: bool,
}

/// A guess of the batch of a training step, from the input of `apply` in the loss.
#[derive(Clone, Debug)]
pub struct BatchGuess {
    /// Rows per step (B), when known.
    pub batch: Option<f64>,
    /// Sequence length (S; 1 for inputs without a sequence axis), when known.
    pub seq: Option<f64>,
    /// The input's named shape, for the hover's explanation.
    pub input_shape: String,
    /// The input expression.
    pub input_span: Span,
}

/// An optimizer call (`adam`, `adamw`, `momentum_sgd`).
#[derive(Clone, Debug)]
pub struct OptimizerFacts {
    /// The optimizer's name.
    pub name: String,
    /// The call.
    pub call_span: Span,
    /// The builtin name as written.
    pub name_span: Span,
    /// The model whose parameters it updates, when `params` is a known model.
    pub model: Option<Arc<ModelInfo>>,
    /// The batch inferred from the loss.
    pub batch: Option<BatchGuess>,
    /// Optimizer state slots per parameter (2 for Adam and AdamW, 1 for momentum).
    pub state_slots: f64,
    /// The enclosing `train` block's step count, when known.
    pub steps: Option<f64>,
    /// Whether the call is inside a `train` block.
    pub in_train: bool,
    /// Parameters frozen at this point of the program.
    pub frozen: HashSet<String>,
}

/// A `train N { … }` block.
#[derive(Clone, Debug)]
pub struct TrainFacts {
    /// The whole statement.
    pub span: Span,
    /// The `train` keyword.
    pub keyword: Span,
    /// The step count, when constant.
    pub steps: Option<f64>,
    /// Index into [`Facts::optimizers`] of the first optimizer call in the body.
    pub optimizer: Option<usize>,
}

/// Everything inferred about a program.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The value of every expression, sorted by span (outer before inner).
    pub values: Vec<(Span, Val)>,
    /// Assignments in source order.
    pub bindings: Vec<Binding>,
    /// `train` blocks in source order.
    pub trains: Vec<TrainFacts>,
    /// Optimizer calls in source order.
    pub optimizers: Vec<OptimizerFacts>,
    /// Shape, axis and kind errors proven statically.
    pub diagnostics: Vec<Diagnostic>,
}

impl Facts {
    /// The innermost expression containing byte `offset` whose value is known,
    /// with its span.
    pub fn value_at(&self, offset: usize) -> Option<(Span, &Val)> {
        self.values
            .iter()
            .filter(|(s, v)| s.start <= offset && offset <= s.end && !matches!(v, Val::Unknown))
            .min_by_key(|(s, _)| s.len())
            .map(|(s, v)| (*s, v))
    }

    /// The value recorded for exactly this span.
    pub fn value_of(&self, span: Span) -> Option<&Val> {
        let i = self.values.partition_point(|(s, _)| s.start < span.start);
        self.values[i..]
            .iter()
            .take_while(|(s, _)| s.start == span.start)
            .find(|(s, _)| *s == span)
            .map(|(_, v)| v)
    }
}

struct Infer {
    /// Index into `facts.values` of the latest value recorded for each span.
    index: HashMap<Span, usize>,
    env: HashMap<String, Val>,
    facts: Facts,
    next_id: u64,
    /// Enclosing `train` blocks: (index into facts.trains, steps).
    trains: Vec<(usize, Option<f64>)>,
}

const UNARY: &[&str] = &[
    "neg", "exp", "log", "sqrt", "abs", "sigmoid", "tanh", "tanh_fn", "relu", "gelu", "silu",
];
const BINARY: &[&str] = &["add", "sub", "mul", "div", "pow", "gt", "lt", "eq"];
const REDUCTIONS: &[&str] = &["reduce_add", "sum", "reduce_mul", "mean", "argmax"];
const OPTIMIZERS: &[&str] = &["adam", "adamw", "momentum_sgd"];

impl Infer {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn frozen(&self) -> HashSet<String> {
        match self.env.get("\u{0}frozen") {
            Some(Val::Str(Some(s))) => s
                .split('\n')
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect(),
            _ => HashSet::new(),
        }
    }

    fn set_frozen(&mut self, f: &HashSet<String>) {
        let mut v: Vec<&String> = f.iter().collect();
        v.sort();
        let joined = v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n");
        self.env
            .insert("\u{0}frozen".into(), Val::Str(Some(joined)));
    }

    fn stmts(&mut self, stmts: &[Stmt]) -> Val {
        let mut last = Val::Unknown;
        for s in stmts {
            last = self.stmt(s);
        }
        last
    }

    fn bind(&mut self, name: &str, name_span: Span, stmt_span: Span, value: Val, annotated: bool) {
        self.facts.bindings.push(Binding {
            name: name.to_string(),
            name_span,
            stmt_span,
            value: value.clone(),
            annotated,
        });
        self.record(name_span, value.clone());
        self.env.insert(name.to_string(), value);
    }

    fn stmt(&mut self, s: &Stmt) -> Val {
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assign { name, value } => {
                let v = self.expr(value);
                self.bind(&name.name, name.span, s.span, v.clone(), false);
                v
            }
            StmtKind::Annotated { name, axes, value } => {
                let v = self.expr(value);
                let names: Vec<Option<String>> =
                    axes.iter().map(|a| Some(a.name.clone())).collect();
                let annot_span = axes
                    .first()
                    .map(|a| name.span.to(a.span).to(axes.last().unwrap().span))
                    .unwrap_or(name.span);
                let v = match v {
                    Val::Array(a) => {
                        Val::Array(self.with_names(a, names, annot_span, value.span, None))
                    }
                    Val::Unknown => Val::Array(Arr {
                        dims: Some(vec![Dim::Unknown; axes.len()]),
                        names: Some(names),
                        constant: None,
                        names_from: Some(annot_span),
                    }),
                    other => other,
                };
                self.bind(&name.name, name.span, s.span, v.clone(), true);
                v
            }
            StmtKind::Repeat { count, body } => {
                self.expr(count);
                self.stmts(&body.stmts);
                Val::Unknown
            }
            StmtKind::Train { count, body } => {
                let steps = self.expr(count).arr().and_then(Arr::scalar_value);
                let idx = self.facts.trains.len();
                let kw_end = (s.span.start + 5).min(s.span.end);
                self.facts.trains.push(TrainFacts {
                    span: s.span,
                    keyword: Span::new(s.span.start, kw_end),
                    steps,
                    optimizer: None,
                });
                self.env
                    .insert("step".into(), Val::Array(Arr::any_scalar()));
                self.trains.push((idx, steps));
                self.stmts(&body.stmts);
                self.trains.pop();
                let losses = match steps {
                    Some(n) if n >= 0.0 && n.fract() == 0.0 => Arr::of_shape(&[n as usize]),
                    _ => Arr::of_dims(vec![Dim::Unknown]),
                };
                self.env.insert("last_losses".into(), Val::Array(losses));
                Val::Unknown
            }
            StmtKind::For { var, iter, body } => {
                let it = self.expr(iter);
                let slice = match it.arr() {
                    Some(a) => match (&a.dims, &a.names) {
                        (Some(d), n) if !d.is_empty() => Val::Array(Arr {
                            dims: Some(d[1..].to_vec()),
                            names: n.as_ref().map(|n| n[1..].to_vec()),
                            constant: None,
                            names_from: a.names_from,
                        }),
                        _ => Val::Array(Arr::unknown()),
                    },
                    None => Val::Unknown,
                };
                self.bind(&var.name, var.span, s.span, slice, false);
                self.stmts(&body.stmts);
                Val::Unknown
            }
            StmtKind::Experiment { name, body } => {
                self.expr(name);
                self.stmts(&body.stmts);
                Val::Unknown
            }
            StmtKind::Error => Val::Unknown,
        }
    }

    fn record(&mut self, span: Span, v: Val) -> Val {
        self.index.insert(span, self.facts.values.len());
        self.facts.values.push((span, v.clone()));
        v
    }

    fn expr(&mut self, e: &Expr) -> Val {
        let v = self.expr_inner(e);
        self.record(e.span, v)
    }

    fn expr_inner(&mut self, e: &Expr) -> Val {
        match &e.kind {
            ExprKind::Number(n) => Val::Array(Arr::scalar(*n)),
            ExprKind::Str(s) => Val::Str(Some(s.clone())),
            ExprKind::Var(name) => self.env.get(name).cloned().unwrap_or(Val::Unknown),
            ExprKind::Paren(x) => self.expr(x),
            ExprKind::Neg(x) => match self.expr(x) {
                Val::Array(mut a) => {
                    if let Some(c) = &mut a.constant {
                        c.iter_mut().for_each(|v| *v = -*v);
                    }
                    Val::Array(a)
                }
                _ => Val::Unknown,
            },
            ExprKind::Binary {
                op,
                op_span,
                lhs,
                rhs,
            } => {
                let l = self.expr(lhs);
                let r = self.expr(rhs);
                match (l, r) {
                    (Val::Array(a), Val::Array(b)) => Val::Array(self.broadcast(
                        op.symbol(),
                        Some(*op),
                        &a,
                        lhs,
                        &b,
                        rhs,
                        *op_span,
                    )),
                    (Val::Unknown, _) | (_, Val::Unknown) => Val::Unknown,
                    _ => Val::Unknown,
                }
            }
            ExprKind::List(items) => self.list(items),
            ExprKind::Ctor { kind, dims } => {
                let vals: Vec<Val> = dims.iter().map(|d| self.expr(d)).collect();
                let sizes: Vec<Dim> = vals
                    .iter()
                    .map(|v| match v.arr().and_then(Arr::scalar_value) {
                        Some(n) if n >= 0.0 && n.fract() == 0.0 => Dim::Known(n as usize),
                        _ => Dim::Unknown,
                    })
                    .collect();
                let _ = kind == &CtorKind::Param;
                Val::Array(Arr::of_dims(sizes))
            }
            ExprKind::Device { target, body } => {
                let t = self.expr(target);
                if let Some(name) = t.text() {
                    if DeviceTarget::parse(name).is_none() {
                        self.facts.diagnostics.push(
                            Diagnostic::warning(
                                "W0502",
                                format!("unknown device `{name}`; this block runs on the CPU"),
                            )
                            .at(target.span, "not a device target")
                            .help("device targets are \"cpu\", \"cuda\", \"cuda:N\" and \"mlx\""),
                        );
                    }
                }
                self.stmts(&body.stmts)
            }
            ExprKind::Call { name, args } => self.call(e, &name.name, name.span, args),
            ExprKind::Error => Val::Unknown,
        }
    }

    fn list(&mut self, items: &[Expr]) -> Val {
        let vals: Vec<Val> = items.iter().map(|i| self.expr(i)).collect();
        if vals.iter().any(|v| matches!(v, Val::Str(_))) {
            return Val::Unknown; // a names list, not an array
        }
        let arrs: Vec<&Arr> = vals.iter().filter_map(Val::arr).collect();
        if arrs.len() != vals.len() {
            return Val::Array(
                Arr::of_dims(vec![Dim::Known(items.len()), Dim::Unknown]).without_names_unknown(),
            );
        }
        let first = arrs.first().and_then(|a| a.dims.clone());
        let same = arrs.iter().all(|a| a.dims.is_some() && a.dims == first);
        if !same && !arrs.is_empty() {
            let mut a = Arr::unknown();
            a.dims = None;
            return Val::Array(a);
        }
        let mut dims = vec![Dim::Known(items.len())];
        dims.extend(first.unwrap_or_default());
        let mut out = Arr::of_dims(dims);
        if arrs.iter().all(|a| a.constant.is_some()) && items.len() <= 4096 {
            out.constant = Some(
                arrs.iter()
                    .flat_map(|a| a.constant.clone().unwrap())
                    .collect(),
            );
        }
        Val::Array(out)
    }

    /// Attaches axis names (an annotation or `label`), reporting E0209.
    fn with_names(
        &mut self,
        mut a: Arr,
        names: Vec<Option<String>>,
        names_span: Span,
        value_span: Span,
        op: Option<&str>,
    ) -> Arr {
        if let Some(r) = a.rank() {
            if r != names.len() {
                self.facts.diagnostics.push(
                    Diagnostic::error("E0209", "wrong number of axis names")
                        .at(
                            names_span,
                            format!(
                                "{} name{} given",
                                names.len(),
                                if names.len() == 1 { "" } else { "s" }
                            ),
                        )
                        .with_label(
                            value_span,
                            format!("this has rank {r}: {}", a.named_shape()),
                        )
                        .note(format!(
                            "{} needs one name per axis",
                            op.map_or("an axis annotation".to_string(), |o| format!("`{o}`"))
                        )),
                );
                return a;
            }
        } else {
            a.dims = Some(vec![Dim::Unknown; names.len()]);
        }
        a.names = Some(names);
        a.names_from = Some(names_span);
        a
    }

    #[allow(clippy::too_many_arguments)]
    fn broadcast(
        &mut self,
        op_name: &str,
        op: Option<BinOp>,
        a: &Arr,
        ea: &Expr,
        b: &Arr,
        eb: &Expr,
        op_span: Span,
    ) -> Arr {
        if let (Some(x), Some(y), Some(op)) = (a.scalar_value(), b.scalar_value(), op) {
            return Arr::scalar(match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
            });
        }
        let (Some(da), Some(db)) = (&a.dims, &b.dims) else {
            return Arr::unknown();
        };
        let rank = da.len().max(db.len());
        let mut dims = vec![Dim::Unknown; rank];
        let names_known = a.names.is_some() && b.names.is_some();
        let mut names: Vec<Option<String>> = vec![None; rank];
        let mut size_conflict = None;
        let mut name_conflict = None;
        for k in 1..=rank {
            let x = (k <= da.len()).then(|| &da[da.len() - k]);
            let y = (k <= db.len()).then(|| &db[db.len() - k]);
            dims[rank - k] = match (x, y) {
                (Some(x), None) => x.clone(),
                (None, Some(y)) => y.clone(),
                (Some(x), Some(y)) => match (x, y) {
                    (Dim::Known(p), Dim::Known(q)) if p == q || *q == 1 => Dim::Known(*p),
                    (Dim::Known(1), _) => y.clone(),
                    (_, Dim::Known(1)) => x.clone(),
                    (Dim::Known(p), Dim::Known(q)) => {
                        size_conflict.get_or_insert((k, *p, *q));
                        Dim::Known(*p)
                    }
                    (Dim::Known(p), _) | (_, Dim::Known(p)) => Dim::Known(*p),
                    (Dim::Symbol(s), Dim::Symbol(t)) if s == t => x.clone(),
                    _ => Dim::Unknown,
                },
                (None, None) => Dim::Unknown,
            };
            let na = (k <= da.len()).then(|| a.name(da.len() - k)).flatten();
            let nb = (k <= db.len()).then(|| b.name(db.len() - k)).flatten();
            names[rank - k] = match (na, nb) {
                (Some(x), Some(y)) if x != y => {
                    name_conflict.get_or_insert((k, x.to_string(), y.to_string()));
                    Some(x.to_string())
                }
                (Some(x), _) | (None, Some(x)) => Some(x.to_string()),
                (None, None) => None,
            };
        }
        let labels = |d: Diagnostic| -> Diagnostic {
            let mut d = d
                .at(eb.span, format!("right operand: {}", b.named_shape()))
                .with_label(ea.span, format!("left operand: {}", a.named_shape()));
            if let Some(s) = a.names_from {
                d = d.with_label(
                    s,
                    format!(
                        "the left operand got its axis names here: {}",
                        a.named_shape()
                    ),
                );
            }
            if let Some(s) = b.names_from {
                if Some(s) != a.names_from {
                    d = d.with_label(
                        s,
                        format!(
                            "the right operand got its axis names here: {}",
                            b.named_shape()
                        ),
                    );
                }
            }
            d
        };
        if let Some((k, x, y)) = size_conflict {
            self.facts.diagnostics.push(
                labels(Diagnostic::error("E0201", format!("shapes do not broadcast in `{op_name}`"))).note(format!(
                    "axis -{k} has size {x} on the left and {y} on the right; aligned sizes must be equal or one of them must be 1"
                )),
            );
        } else if let Some((k, x, y)) = name_conflict {
            let fixed: Vec<String> = (0..db.len())
                .map(|i| {
                    let from_end = db.len() - i;
                    let left = (from_end <= da.len())
                        .then(|| a.name(da.len() - from_end))
                        .flatten();
                    format!("\"{}\"", left.or(b.name(i)).unwrap_or(""))
                })
                .collect();
            let target = match &eb.unparen().kind {
                ExprKind::Var(v) => v.clone(),
                _ => "y".to_string(),
            };
            self.facts.diagnostics.push(
                labels(Diagnostic::error(
                    "E0202",
                    format!("axis names conflict in `{op_name}`"),
                ))
                .note(format!(
                    "axis -{k} is named `{x}` on the left and `{y}` on the right"
                ))
                .help(format!(
                    "rename one side, for example `relabel({target}, [{}])`",
                    fixed.join(", ")
                )),
            );
        }
        let _ = op_span;
        let names_from = if a.has_names() {
            a.names_from
        } else {
            b.names_from
        };
        Arr {
            dims: Some(dims),
            names: names_known.then_some(names),
            constant: None,
            names_from,
        }
    }

    fn matmul(&mut self, op: &str, a: &Arr, ea: &Expr, b: &Arr, eb: &Expr) -> Arr {
        let (Some(da), Some(db)) = (&a.dims, &b.dims) else {
            return Arr::unknown();
        };
        if da.is_empty() || db.is_empty() {
            let (x, s) = if da.is_empty() {
                (a, ea.span)
            } else {
                (b, eb.span)
            };
            self.facts.diagnostics.push(
                Diagnostic::error("E0205", "wrong rank")
                    .at(s, format!("has shape {}", x.named_shape()))
                    .note(format!("`{op}` needs operands of rank 1 or more")),
            );
            return Arr::unknown();
        }
        let ka = da.last().unwrap();
        let kb_axis = if db.len() == 1 { 0 } else { db.len() - 2 };
        let kb = &db[kb_axis];
        if let (Dim::Known(p), Dim::Known(q)) = (ka, kb) {
            if p != q {
                let which = match db.len() {
                    1 => "the only axis",
                    2 => "the first axis",
                    _ => "the second-to-last axis",
                };
                let mut d = Diagnostic::error("E0203", format!("inner dimensions differ in `{op}`"))
                    .at(eb.span, format!("right operand: {}", b.named_shape()))
                    .with_label(ea.span, format!("left operand: {}", a.named_shape()))
                    .note(format!(
                        "the last axis of the left operand ({p}) must equal {which} of the right operand ({q})"
                    ));
                if db.len() == 2 && db[1] == Dim::Known(*p) {
                    d = d.help("the right operand looks transposed: try `transpose(...)` on it");
                }
                if let Some(s) = a.names_from {
                    d = d.with_label(
                        s,
                        format!(
                            "the left operand got its axis names here: {}",
                            a.named_shape()
                        ),
                    );
                }
                if let Some(s) = b.names_from {
                    d = d.with_label(
                        s,
                        format!(
                            "the right operand got its axis names here: {}",
                            b.named_shape()
                        ),
                    );
                }
                self.facts.diagnostics.push(d);
                return Arr::unknown();
            }
        }
        if op == "matmul" {
            if let (Some(na), Some(nb)) = (a.name(da.len() - 1), b.name(kb_axis)) {
                if na != nb {
                    self.facts.diagnostics.push(
                        Diagnostic::error("E0204", "contraction axes are named differently")
                            .at(eb.span, format!("right operand: {}", b.named_shape()))
                            .with_label(ea.span, format!("left operand: {}", a.named_shape()))
                            .note(format!(
                                "`{op}` contracts `{na}` on the left with `{nb}` on the right"
                            ))
                            .help(format!(
                                "relabel one side so both contracted axes are named `{na}`"
                            )),
                    );
                }
            }
        } else {
            return Arr::any_scalar();
        }
        // Batch axes: the longer prefix (broadcasting sizes of 1).
        let a_batch = if da.len() >= 2 {
            &da[..da.len() - 2]
        } else {
            &[][..]
        };
        let b_batch = if db.len() >= 2 {
            &db[..db.len() - 2]
        } else {
            &[][..]
        };
        let batch = if a_batch.len() >= b_batch.len() {
            a_batch
        } else {
            b_batch
        };
        let mut dims = batch.to_vec();
        let mut names: Vec<Option<String>> = (0..batch.len())
            .map(|i| {
                let from_a = (a_batch.len() >= b_batch.len())
                    .then(|| a.name(i))
                    .flatten();
                let from_b = (b_batch.len() > a_batch.len()).then(|| b.name(i)).flatten();
                from_a.or(from_b).map(String::from)
            })
            .collect();
        if da.len() >= 2 {
            dims.push(da[da.len() - 2].clone());
            names.push(a.name(da.len() - 2).map(String::from));
        }
        if db.len() >= 2 {
            dims.push(db[db.len() - 1].clone());
            names.push(b.name(db.len() - 1).map(String::from));
        }
        let names_known = a.names.is_some() && b.names.is_some();
        let has = names.iter().any(Option::is_some);
        Arr {
            dims: Some(dims),
            names: names_known.then_some(names),
            constant: None,
            names_from: if has {
                a.names_from.or(b.names_from)
            } else {
                None
            },
        }
    }

    fn names_arg(&self, v: &Val, e: &Expr) -> Option<Vec<Option<String>>> {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        if let Some(t) = v.text() {
            if t.is_empty() {
                return Some(Vec::new());
            }
            return Some(t.split(',').map(opt).collect());
        }
        if let ExprKind::List(items) = &e.unparen().kind {
            return items
                .iter()
                .map(|i| match &i.unparen().kind {
                    ExprKind::Str(s) => Some(opt(s)),
                    ExprKind::Var(n) => self.env.get(n).and_then(Val::text).map(opt),
                    _ => None,
                })
                .collect();
        }
        None
    }

    fn call(&mut self, e: &Expr, name: &str, name_span: Span, args: &[Expr]) -> Val {
        // Optimizer and grad arguments are expressions evaluated by the builtin; the
        // loss is still analysed for shapes.
        let vals: Vec<Val> = args.iter().map(|a| self.expr(a)).collect();
        let arr = |i: usize| vals.get(i).and_then(Val::arr);
        let num = |i: usize| arr(i).and_then(Arr::scalar_value);
        let count = |i: usize| {
            num(i)
                .filter(|n| *n >= 0.0 && n.fract() == 0.0)
                .map(|n| n as usize)
        };
        let shape_arg = |i: usize| -> Option<Vec<Dim>> {
            let a = arr(i)?;
            let c = a.constant.as_ref()?;
            if a.rank()? > 1 {
                return None;
            }
            Some(
                c.iter()
                    .map(|&n| {
                        if n >= 0.0 && n.fract() == 0.0 {
                            Dim::Known(n as usize)
                        } else {
                            Dim::Unknown
                        }
                    })
                    .collect(),
            )
        };
        let same = |i: usize| {
            arr(i)
                .cloned()
                .map(|a| Val::Array(a.without_constant()))
                .unwrap_or(Val::Unknown)
        };
        let model = |i: usize| vals.get(i).and_then(Val::model).cloned();
        let new_model = |layer: Layer| {
            Val::Model(Some(Arc::new(ModelInfo {
                layer: Arc::new(layer),
                defined_at: e.span,
            })))
        };
        if UNARY.contains(&name) {
            return same(0);
        }
        if BINARY.contains(&name) {
            return match (arr(0), arr(1)) {
                (Some(a), Some(b)) => {
                    let (a, b) = (a.clone(), b.clone());
                    let op = match name {
                        "add" => Some(BinOp::Add),
                        "sub" => Some(BinOp::Sub),
                        "mul" => Some(BinOp::Mul),
                        "div" => Some(BinOp::Div),
                        _ => None,
                    };
                    Val::Array(self.broadcast(name, op, &a, &args[0], &b, &args[1], name_span))
                }
                _ => Val::Unknown,
            };
        }
        if REDUCTIONS.contains(&name) || name == "softmax" || name == "log_softmax" {
            return self.reduction(name, args, &vals);
        }
        match name {
            "iota" => count(0).map_or(Val::Array(Arr::of_dims(vec![Dim::Unknown])), |n| {
                let mut a = Arr::of_shape(&[n]);
                if n <= 4096 {
                    a.constant = Some((0..n).map(|i| i as f64).collect());
                }
                Val::Array(a)
            }),
            "zeros" | "ones" | "fill" => {
                Val::Array(shape_arg(0).map_or_else(Arr::unknown, Arr::of_dims))
            }
            "random" | "randn" => Val::Array(shape_arg(1).map_or_else(Arr::unknown, Arr::of_dims)),
            "reshape" | "reshape_labeled" => {
                let Some(mut dims) = shape_arg(1) else {
                    return Val::Array(Arr::unknown());
                };
                let total = arr(0).and_then(Arr::known_len);
                if let Some(c) = arr(1).and_then(|a| a.constant.clone()) {
                    let neg = c.iter().position(|&x| x == -1.0);
                    if let (Some(p), Some(t)) = (neg, total) {
                        let rest = c
                            .iter()
                            .filter(|&&x| x != -1.0)
                            .try_fold(1usize, |acc, &x| acc.checked_mul(x as usize));
                        if let Some(rest) = rest.filter(|&r| r > 0 && t % r == 0) {
                            dims[p] = Dim::Known(t / rest);
                        }
                    }
                }
                let out = Arr::of_dims(dims);
                if let (Some(t), Some(n)) = (total, out.known_len()) {
                    if t != n {
                        self.facts.diagnostics.push(
                            Diagnostic::error("E0210", "reshape changes the element count")
                                .at(args[1].span, format!("{} has {n} elements", out.named_shape()))
                                .with_label(args[0].span, format!("{} has {t} elements", arr(0).unwrap().named_shape()))
                                .note("`reshape` keeps every element: the product of the new sizes must equal the old one"),
                        );
                        return Val::Array(Arr::unknown());
                    }
                }
                if name == "reshape_labeled" {
                    if let (Some(v), Some(ea)) = (vals.get(2), args.get(2)) {
                        if let Some(n) = self.names_arg(v, ea) {
                            return Val::Array(self.with_names(
                                out,
                                n,
                                ea.span,
                                args[0].span,
                                Some(name),
                            ));
                        }
                    }
                }
                Val::Array(out)
            }
            "label" | "relabel" => {
                let Some(a) = arr(0).cloned() else {
                    return Val::Unknown;
                };
                match (vals.get(1), args.get(1)) {
                    (Some(v), Some(ea)) => match self.names_arg(v, ea) {
                        Some(n) => Val::Array(self.with_names(
                            a.without_constant(),
                            n,
                            e.span,
                            args[0].span,
                            Some(name),
                        )),
                        None => Val::Array(Arr { names: None, ..a }),
                    },
                    _ => Val::Unknown,
                }
            }
            "labels" => match arr(0).and_then(|a| a.names.clone()) {
                Some(n) => Val::Str(Some(
                    n.iter()
                        .map(|x| x.clone().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(","),
                )),
                None => Val::Str(None),
            },
            "shape" => match arr(0).and_then(|a| a.rank().map(|r| (r, a.known_shape()))) {
                Some((r, s)) => {
                    let mut out = Arr::of_shape(&[r]);
                    out.constant = s.map(|s| s.iter().map(|&d| d as f64).collect());
                    Val::Array(out)
                }
                None => Val::Array(Arr::of_dims(vec![Dim::Unknown])),
            },
            "rank" => match arr(0).and_then(Arr::rank) {
                Some(r) => Val::Array(Arr::scalar(r as f64)),
                None => Val::Array(Arr::any_scalar()),
            },
            "transpose" => match arr(0) {
                Some(a) => {
                    let mut a = a.clone().without_constant();
                    if let Some(d) = &mut a.dims {
                        d.reverse();
                    }
                    if let Some(n) = &mut a.names {
                        n.reverse();
                    }
                    Val::Array(a)
                }
                None => Val::Unknown,
            },
            "grid" => Val::Array(match count(1) {
                Some(n) => Arr::of_dims(vec![
                    n.checked_mul(n).map_or(Dim::Unknown, Dim::Known),
                    Dim::Known(2),
                ]),
                None => Arr::of_dims(vec![Dim::Unknown, Dim::Known(2)]),
            }),
            "concat" => Val::Array(
                match (
                    arr(0).and_then(Arr::known_len),
                    arr(1).and_then(Arr::known_len),
                ) {
                    (Some(p), Some(q)) => Arr::of_shape(&[p.saturating_add(q)]),
                    _ => Arr::of_dims(vec![Dim::Unknown]),
                },
            ),
            "last_row" => match arr(0).and_then(|a| a.dims.clone()) {
                Some(d) if d.len() == 2 => Val::Array(Arr::of_dims(vec![d[1].clone()])),
                _ => Val::Array(Arr::unknown()),
            },
            "scatter" => same(0),
            "shuffle" | "split" | "val_split" => match arr(0) {
                Some(a) => {
                    let mut a = a.clone().without_constant();
                    if let Some(n) = &mut a.names {
                        if let Some(first) = n.first_mut() {
                            *first = None;
                        }
                    }
                    if name != "shuffle" {
                        if let (Some(d), Some(frac)) = (&mut a.dims, num(1)) {
                            if let Some(Dim::Known(n)) = d.first().cloned() {
                                let tr =
                                    ((n as f64 * frac).floor() as usize).clamp(1, n.max(2) - 1);
                                d[0] = Dim::Known(if name == "split" {
                                    tr
                                } else {
                                    n.saturating_sub(tr)
                                });
                            } else if !d.is_empty() {
                                d[0] = Dim::Unknown;
                            }
                        }
                    }
                    Val::Array(a)
                }
                None => Val::Unknown,
            },
            "batch" => match (arr(0).and_then(|a| a.dims.clone()), count(1)) {
                (Some(d), Some(size)) if !d.is_empty() && size > 0 => {
                    let nb = match &d[0] {
                        Dim::Known(n) => Dim::Known(n.div_ceil(size)),
                        _ => Dim::Unknown,
                    };
                    let mut dims = vec![nb, Dim::Known(size)];
                    dims.extend(d[1..].iter().cloned());
                    let mut out = Arr::of_dims(dims);
                    if let Some(n) = arr(0).and_then(|a| a.names.clone()) {
                        let mut names = vec![None, None];
                        names.extend(n[1..].iter().cloned());
                        out.names = Some(names);
                    }
                    Val::Array(out)
                }
                _ => Val::Array(Arr::unknown()),
            },
            "shift_pairs_x" | "shift_pairs_y" => {
                let block = count(1);
                let n = arr(0)
                    .and_then(|a| a.dims.clone())
                    .and_then(|d| d.first().cloned());
                let rows = match (&n, block) {
                    (Some(Dim::Known(n)), Some(b)) => Dim::Known(n / b.saturating_add(1)),
                    (Some(Dim::Symbol(s)), Some(b)) => {
                        Dim::Symbol(format!("⌊{s}/{}⌋", b.saturating_add(1)))
                    }
                    _ => Dim::Unknown,
                };
                Val::Array(Arr::of_dims(vec![
                    rows,
                    block.map_or(Dim::Unknown, Dim::Known),
                ]))
            }
            "estimate_train" | "estimate_hypothetical" => {
                if name == "estimate_hypothetical" {
                    if let Some(t) = vals.first().and_then(Val::text) {
                        if hypothetical::lookup(t).is_none() {
                            self.facts.diagnostics.push(
                                Diagnostic::error("E0105", format!("unknown architecture `{t}`"))
                                    .at(args[0].span, "not a built-in architecture")
                                    .note(format!(
                                        "known architectures: {}",
                                        hypothetical::names()
                                    )),
                            );
                        }
                    }
                }
                Val::Array(Arr::of_shape(&[5]))
            }
            "feasible" | "calibrate_device" | "dot" | "cross_entropy" | "sample" | "aux_loss"
            | "cosine_schedule" | "linear_warmup"
                if name != "dot" && name != "cross_entropy" =>
            {
                Val::Array(Arr::any_scalar())
            }
            "dot" => match (arr(0), arr(1)) {
                (Some(a), Some(b)) => {
                    let (a, b) = (a.clone(), b.clone());
                    Val::Array(self.matmul("dot", &a, &args[0], &b, &args[1]))
                }
                _ => Val::Array(Arr::any_scalar()),
            },
            "cross_entropy" => {
                if let (Some(l), Some(t)) = (
                    arr(0).and_then(Arr::known_shape),
                    arr(1).and_then(Arr::known_len),
                ) {
                    let rows = l[..l.len().saturating_sub(1)]
                        .iter()
                        .try_fold(1usize, |acc, &d| acc.checked_mul(d));
                    if let (true, Some(rows)) = (l.len() >= 2, rows) {
                        if rows != t {
                            self.facts.diagnostics.push(
                                Diagnostic::error(
                                    "E0214",
                                    "target count differs from the rows of the logits",
                                )
                                .at(
                                    args[1].span,
                                    format!(
                                        "targets: {} ({t} elements)",
                                        arr(1).unwrap().named_shape()
                                    ),
                                )
                                .with_label(
                                    args[0].span,
                                    format!(
                                        "logits: {} ({rows} rows)",
                                        arr(0).unwrap().named_shape()
                                    ),
                                )
                                .note(format!(
                                    "expected [{rows}] targets, one per row of the logits"
                                )),
                            );
                        }
                    }
                }
                Val::Array(Arr::any_scalar())
            }
            "matmul" => match (arr(0), arr(1)) {
                (Some(a), Some(b)) => {
                    let (a, b) = (a.clone(), b.clone());
                    Val::Array(self.matmul("matmul", &a, &args[0], &b, &args[1]))
                }
                _ => Val::Unknown,
            },
            "one_hot" => match (arr(0).and_then(|a| a.dims.clone()), count(1)) {
                (Some(mut d), k) => {
                    d.push(k.map_or(Dim::Unknown, Dim::Known));
                    Val::Array(Arr::of_dims(d))
                }
                _ => Val::Array(Arr::unknown()),
            },
            "sinusoidal_encoding" => {
                let mut a = Arr::of_dims(vec![
                    count(0).map_or(Dim::Unknown, Dim::Known),
                    count(1).map_or(Dim::Unknown, Dim::Known),
                ]);
                a.names = Some(vec![Some("time".into()), Some("dim".into())]);
                a.names_from = Some(e.span);
                Val::Array(a)
            }
            "moons" | "circles" | "blobs" => Val::Array(Arr::of_dims(vec![
                count(1).map_or(Dim::Unknown, Dim::Known),
                Dim::Known(3),
            ])),
            "pairwise_sqdist" => match arr(0).and_then(|a| a.dims.clone()) {
                Some(d) if d.len() == 2 => {
                    Val::Array(Arr::of_dims(vec![d[0].clone(), d[0].clone()]))
                }
                _ => Val::Array(Arr::unknown()),
            },
            "knn" | "pca" | "tsne" => {
                let rows = arr(0)
                    .and_then(|a| a.dims.clone())
                    .and_then(|d| d.first().cloned())
                    .unwrap_or(Dim::Unknown);
                let k = if name == "tsne" {
                    Dim::Known(2)
                } else {
                    count(1).map_or(Dim::Unknown, Dim::Known)
                };
                Val::Array(Arr::of_dims(vec![rows, k]))
            }
            "argtop_k" => Val::Array(Arr::of_dims(
                vec![count(1).map_or(Dim::Unknown, Dim::Known)],
            )),
            "top_k" => same(0),
            "to_device" => {
                if let Some(t) = vals.get(1).and_then(Val::text) {
                    if DeviceTarget::parse(t).is_none() {
                        self.facts.diagnostics.push(
                            Diagnostic::error("E0502", "unknown device target")
                                .at(args[1].span, format!("`{t}` is not a device target"))
                                .help(
                                    "device targets are \"cpu\", \"cuda\", \"cuda:N\" and \"mlx\"",
                                ),
                        );
                    }
                }
                vals.first().cloned().unwrap_or(Val::Unknown)
            }
            "load_preloaded" => match vals.first().and_then(Val::text) {
                Some(t) => match corpora::preloaded(t) {
                    Some(text) => Val::Str(Some(text.to_string())),
                    None => {
                        self.facts.diagnostics.push(
                            Diagnostic::error("E0104", format!("unknown corpus `{t}`"))
                                .at(args[0].span, "not a preloaded corpus")
                                .note(format!("preloaded corpora: {}", corpora::NAMES.join(", "))),
                        );
                        Val::Str(None)
                    }
                },
                None => Val::Str(None),
            },
            "load" => Val::Unknown,
            "tokenizer" | "train_bpe" => Val::Tokenizer,
            "tokenize_bytes" => {
                Val::Array(Arr::of_dims(vec![match vals.first().and_then(Val::text) {
                    Some(t) => Dim::Known(t.len()),
                    None => Dim::Symbol("n_bytes".into()),
                }]))
            }
            "apply_tokenizer" => Val::Array(Arr::of_dims(vec![Dim::Symbol("n_tokens".into())])),
            "decode" | "decode_bytes" => Val::Str(None),
            "grad" => vals
                .get(1)
                .cloned()
                .map(|v| match v {
                    Val::Array(a) => Val::Array(a.without_constant()),
                    _ => Val::Unknown,
                })
                .unwrap_or(Val::Unknown),
            n if OPTIMIZERS.contains(&n) => {
                self.optimizer(e, n, name_span, args, &vals);
                Val::Array(Arr::any_scalar())
            }
            // Models.
            "linear" => match (count(0), count(1)) {
                (Some(inp), Some(out)) => new_model(Layer::Linear(Linear {
                    id: self.id(),
                    inp,
                    out,
                })),
                _ => Val::Model(None),
            },
            "embed" => match (count(0), count(1)) {
                (Some(vocab), Some(d)) => new_model(Layer::Embed(Embed {
                    id: self.id(),
                    vocab,
                    d,
                })),
                _ => Val::Model(None),
            },
            "attention" | "causal_attention" => {
                let rope = match model(4).as_deref().map(|m| &*m.layer) {
                    Some(Layer::Rope(r)) => Some(*r),
                    _ => None,
                };
                match (count(0), count(1)) {
                    (Some(d), Some(heads)) if heads > 0 => {
                        let kv = if args.len() > 3 {
                            count(3)
                        } else {
                            Some(heads)
                        };
                        match kv {
                            Some(kv_heads) => new_model(Layer::Attention(Attention {
                                id: self.id(),
                                d,
                                heads,
                                kv_heads,
                                causal: name == "causal_attention",
                                rope,
                            })),
                            None => Val::Model(None),
                        }
                    }
                    _ => Val::Model(None),
                }
            }
            "rms_norm" => match count(0) {
                Some(dim) => {
                    let gain = if num(1) == Some(1.0) {
                        Some(self.id())
                    } else {
                        None
                    };
                    new_model(Layer::RmsNorm(RmsNorm { dim, gain }))
                }
                None => Val::Model(None),
            },
            "layer_norm" => match count(0) {
                Some(d) => new_model(Layer::LayerNorm(LayerNorm { id: self.id(), d })),
                None => Val::Model(None),
            },
            "tanh_layer" => new_model(Layer::Activation(Activation::Tanh)),
            "relu_layer" => new_model(Layer::Activation(Activation::Relu)),
            "gelu_layer" => new_model(Layer::Activation(Activation::Gelu)),
            "silu_layer" => new_model(Layer::Activation(Activation::Silu)),
            "softmax_layer" => new_model(Layer::Activation(Activation::Softmax)),
            "dropout" => new_model(Layer::Dropout(Dropout {
                p: num(0).unwrap_or(0.0),
                seed: 0,
            })),
            "swiglu" => match (count(0), count(1)) {
                (Some(d), Some(hidden)) => new_model(Layer::SwiGlu(SwiGlu {
                    id: self.id(),
                    d,
                    hidden,
                })),
                _ => Val::Model(None),
            },
            "rope" => match count(0) {
                Some(head_dim) => new_model(Layer::Rope(Rope {
                    head_dim,
                    base: num(1).unwrap_or(10000.0),
                })),
                None => Val::Model(None),
            },
            "moe" => match (count(0), count(1), count(2), count(3)) {
                (Some(d), Some(experts), Some(top_k), Some(hidden)) => new_model(Layer::Moe(Moe {
                    id: self.id(),
                    d,
                    experts,
                    top_k,
                    hidden,
                    aux: Mutex::new(None),
                })),
                _ => Val::Model(None),
            },
            "chain" => {
                let children: Option<Vec<Arc<Layer>>> = (0..args.len())
                    .map(|i| model(i).map(|m| m.layer.clone()))
                    .collect();
                match children {
                    Some(c) => new_model(Layer::Chain(c)),
                    None => Val::Model(None),
                }
            }
            "residual" => match model(0) {
                Some(m) => new_model(Layer::Residual(m.layer.clone())),
                None => Val::Model(None),
            },
            "clone_model" => match model(0) {
                Some(m) => {
                    let mut map = HashMap::new();
                    let l = self.clone_layer(&m.layer, &mut map, None);
                    new_model(Arc::try_unwrap(l).unwrap_or_else(|a| clone_shallow(&a)))
                }
                None => Val::Model(None),
            },
            "lora" => match (model(0), count(1), num(2)) {
                (Some(m), Some(rank), Some(alpha)) => {
                    let mut map = HashMap::new();
                    let l = self.clone_layer(&m.layer, &mut map, Some((rank, alpha)));
                    let mut frozen = self.frozen();
                    for p in l.param_specs() {
                        if p.kind != "lora" || (p.role != "A" && p.role != "B") {
                            frozen.insert(p.name);
                        }
                    }
                    self.set_frozen(&frozen);
                    new_model(Arc::try_unwrap(l).unwrap_or_else(|a| clone_shallow(&a)))
                }
                _ => Val::Model(None),
            },
            "freeze" | "unfreeze" => {
                if let Some(m) = model(0) {
                    let mut frozen = self.frozen();
                    for p in m.layer.parameters() {
                        if name == "freeze" {
                            frozen.insert(p);
                        } else {
                            frozen.remove(&p);
                        }
                    }
                    self.set_frozen(&frozen);
                }
                Val::Unknown
            }
            "apply" => match (model(0), arr(1)) {
                (Some(m), Some(x)) => {
                    let x = x.clone();
                    match apply_layer(&m.layer, &x) {
                        Ok(out) => Val::Array(out),
                        Err(msg) => {
                            self.facts.diagnostics.push(
                                Diagnostic::error("E0211", "layer input has the wrong shape")
                                    .at(args[1].span, format!("input: {}", x.named_shape()))
                                    .with_label(m.defined_at, "the model is built here")
                                    .note(msg),
                            );
                            Val::Array(Arr::unknown())
                        }
                    }
                }
                (_, Some(_)) => Val::Array(Arr::unknown()),
                _ => Val::Unknown,
            },
            "embed_table" => {
                let mut found = None;
                if let Some(m) = model(0) {
                    m.layer.walk(&mut |l| {
                        if let (Layer::Embed(e), None) = (l, &found) {
                            found = Some((e.vocab, e.d));
                        }
                    });
                }
                match found {
                    Some((v, d)) => Val::Array(Arr::of_shape(&[v, d])),
                    None => Val::Array(Arr::unknown()),
                }
            }
            _ => Val::Unknown,
        }
    }

    fn reduction(&mut self, name: &str, args: &[Expr], vals: &[Val]) -> Val {
        let Some(a) = vals.first().and_then(Val::arr).cloned() else {
            return Val::Unknown;
        };
        let keep_shape = name == "softmax" || name == "log_softmax";
        let Some(axis_val) = vals.get(1) else {
            return Val::Array(if keep_shape {
                a.unnamed().without_constant()
            } else {
                Arr::any_scalar()
            });
        };
        let Some(dims) = a.dims.clone() else {
            return Val::Array(Arr::unknown());
        };
        let rank = dims.len();
        let axis: Option<usize> = if let Some(t) = axis_val.text() {
            match &a.names {
                Some(names) if t.is_empty() || !names.iter().any(Option::is_some) => {
                    self.facts.diagnostics.push(
                        Diagnostic::error("E0208", "array has no named axes")
                            .at(args[1].span, if t.is_empty() { "the empty name".to_string() } else { format!("axis name `{t}`") })
                            .with_label(args[0].span, format!("this array has no axis names: {}", a.named_shape()))
                            .help("name the axes with an annotation or `label`, or pass an axis number"),
                    );
                    return Val::Array(Arr::unknown());
                }
                Some(names) => match names.iter().position(|n| n.as_deref() == Some(t)) {
                    Some(i) => Some(i),
                    None => {
                        let mut d = Diagnostic::error("E0207", "axis name not found")
                            .at(args[1].span, format!("no axis is named `{t}`"))
                            .with_label(args[0].span, format!("axes: {}", a.named_shape()));
                        if let Some(s) = a.names_from {
                            d = d.with_label(s, "the axis names come from here");
                        }
                        let known: Vec<&str> = names.iter().flatten().map(String::as_str).collect();
                        if let Some(c) = closest(t, &known) {
                            d = d.help(format!("an axis with a similar name exists: `{c}`"));
                        }
                        self.facts.diagnostics.push(d);
                        return Val::Array(Arr::unknown());
                    }
                },
                None => None,
            }
        } else if let Some(k) = axis_val.arr().and_then(Arr::scalar_value) {
            let r = rank as f64;
            if k.fract() == 0.0 && (k >= r || k < -r) {
                self.facts.diagnostics.push(
                    Diagnostic::error("E0206", "axis out of range")
                        .at(args[1].span, format!("axis {k}"))
                        .with_label(args[0].span, format!("rank {rank}: {}", a.named_shape()))
                        .note(format!(
                            "axes of a rank-{rank} array are 0 to {} (or -{rank} to -1)",
                            rank.saturating_sub(1)
                        )),
                );
                return Val::Array(Arr::unknown());
            }
            (k.fract() == 0.0).then_some(if k < 0.0 {
                (k + r) as usize
            } else {
                k as usize
            })
        } else {
            None
        };
        if keep_shape {
            return Val::Array(a.unnamed().without_constant());
        }
        match axis {
            Some(i) => {
                let mut d = dims;
                d.remove(i);
                let names = a.names.clone().map(|mut n| {
                    n.remove(i);
                    n
                });
                let has = names
                    .as_ref()
                    .is_some_and(|n| n.iter().any(Option::is_some));
                Val::Array(Arr {
                    dims: Some(d),
                    names,
                    constant: None,
                    names_from: if has { a.names_from } else { None },
                })
            }
            None => Val::Array(
                Arr::of_dims(vec![Dim::Unknown; rank.saturating_sub(1)]).with_unknown_names(),
            ),
        }
    }

    fn optimizer(&mut self, e: &Expr, name: &str, name_span: Span, args: &[Expr], vals: &[Val]) {
        let model = vals.get(1).and_then(Val::model).cloned();
        let mut batch = None;
        if let Some(loss) = args.first() {
            batch = self.find_batch(loss, model.as_deref());
        }
        let (in_train, steps) = match self.trains.last() {
            Some(&(_, s)) => (true, s),
            None => (false, Some(1.0)),
        };
        let idx = self.facts.optimizers.len();
        if let Some(&(t, _)) = self.trains.last() {
            self.facts.trains[t].optimizer.get_or_insert(idx);
        }
        self.facts.optimizers.push(OptimizerFacts {
            name: name.to_string(),
            call_span: e.span,
            name_span,
            model,
            batch,
            state_slots: if name == "momentum_sgd" { 1.0 } else { 2.0 },
            steps,
            in_train,
            frozen: self.frozen(),
        });
    }

    /// The batch of the first `apply(model, x)` in a loss expression.
    fn find_batch(&self, loss: &Expr, model: Option<&ModelInfo>) -> Option<BatchGuess> {
        let mut found = None;
        visit(loss, &mut |x| {
            if found.is_some() {
                return;
            }
            if let ExprKind::Call { name, args } = &x.kind {
                if name.name == "apply" && args.len() == 2 {
                    let m = self.value_of_recorded(&args[0]);
                    let input = self.value_of_recorded(&args[1]);
                    let layer = m
                        .as_ref()
                        .and_then(Val::model)
                        .map(|m| m.layer.clone())
                        .or_else(|| model.map(|m| m.layer.clone()));
                    if let (Some(layer), Some(Val::Array(a))) = (layer, input) {
                        found = Some(batch_of(&layer, &a, args[1].span));
                    }
                }
            }
        });
        found
    }

    fn value_of_recorded(&self, e: &Expr) -> Option<Val> {
        self.index
            .get(&e.span)
            .map(|&i| self.facts.values[i].1.clone())
    }

    /// A copy of a layer tree with fresh ids (shared sub-layers stay shared); with
    /// `lora`, linear layers become LoRA-wrapped.
    fn clone_layer(
        &mut self,
        l: &Arc<Layer>,
        done: &mut HashMap<*const Layer, Arc<Layer>>,
        lora: Option<(usize, f64)>,
    ) -> Arc<Layer> {
        let key = Arc::as_ptr(l);
        if let Some(x) = done.get(&key) {
            return x.clone();
        }
        let out = Arc::new(match &**l {
            Layer::Linear(x) => {
                let base = Linear {
                    id: self.id(),
                    ..*x
                };
                match lora {
                    Some((rank, alpha)) => Layer::Lora(Lora {
                        base,
                        adapter_id: self.id(),
                        rank,
                        alpha,
                    }),
                    None => Layer::Linear(base),
                }
            }
            Layer::Lora(x) => Layer::Lora(Lora {
                base: Linear {
                    id: self.id(),
                    ..x.base
                },
                adapter_id: self.id(),
                ..*x
            }),
            Layer::Embed(x) => Layer::Embed(Embed {
                id: self.id(),
                ..*x
            }),
            Layer::Attention(x) => Layer::Attention(Attention {
                id: self.id(),
                ..*x
            }),
            Layer::RmsNorm(x) => Layer::RmsNorm(RmsNorm {
                gain: x.gain.map(|_| self.id()),
                ..*x
            }),
            Layer::LayerNorm(x) => Layer::LayerNorm(LayerNorm {
                id: self.id(),
                ..*x
            }),
            Layer::Activation(a) => Layer::Activation(*a),
            Layer::Dropout(d) => Layer::Dropout(*d),
            Layer::SwiGlu(x) => Layer::SwiGlu(SwiGlu {
                id: self.id(),
                ..*x
            }),
            Layer::Rope(r) => Layer::Rope(*r),
            Layer::Moe(m) => Layer::Moe(Moe {
                id: self.id(),
                d: m.d,
                experts: m.experts,
                top_k: m.top_k,
                hidden: m.hidden,
                aux: Mutex::new(None),
            }),
            Layer::Chain(c) => {
                Layer::Chain(c.iter().map(|x| self.clone_layer(x, done, lora)).collect())
            }
            Layer::Residual(r) => Layer::Residual(self.clone_layer(r, done, lora)),
        });
        done.insert(key, out.clone());
        out
    }
}

fn clone_shallow(l: &Layer) -> Layer {
    match l {
        Layer::Chain(c) => Layer::Chain(c.clone()),
        Layer::Residual(r) => Layer::Residual(r.clone()),
        _ => Layer::Chain(Vec::new()),
    }
}

impl Arr {
    fn without_names_unknown(self) -> Arr {
        self
    }
    fn with_unknown_names(mut self) -> Arr {
        self.names = None;
        self
    }
}

/// Calls `f` on `e` and every sub-expression.
pub fn visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Call { args, .. } => args.iter().for_each(|a| visit(a, f)),
        ExprKind::List(items) | ExprKind::Ctor { dims: items, .. } => {
            items.iter().for_each(|a| visit(a, f))
        }
        ExprKind::Neg(x) | ExprKind::Paren(x) => visit(x, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            visit(lhs, f);
            visit(rhs, f);
        }
        ExprKind::Device { target, body } => {
            visit(target, f);
            for s in &body.stmts {
                visit_stmt(s, f);
            }
        }
        _ => {}
    }
}

/// Calls `f` on every expression of a statement (nested blocks included).
pub fn visit_stmt(s: &Stmt, f: &mut dyn FnMut(&Expr)) {
    match &s.kind {
        StmtKind::Expr(e)
        | StmtKind::Assign { value: e, .. }
        | StmtKind::Annotated { value: e, .. } => visit(e, f),
        StmtKind::Repeat { count, body } | StmtKind::Train { count, body } => {
            visit(count, f);
            body.stmts.iter().for_each(|s| visit_stmt(s, f));
        }
        StmtKind::For { iter, body, .. } => {
            visit(iter, f);
            body.stmts.iter().for_each(|s| visit_stmt(s, f));
        }
        StmtKind::Experiment { name, body } => {
            visit(name, f);
            body.stmts.iter().for_each(|s| visit_stmt(s, f));
        }
        StmtKind::Error => {}
    }
}

fn closest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    mlpl_runtime::eval::closest_name(name, candidates.iter().copied())
}

/// Whether the model's first layer that reads its input is an embedding (its input
/// is token ids, not features).
fn reads_ids(l: &Layer) -> bool {
    match l {
        Layer::Embed(_) => true,
        Layer::Chain(c) => c.first().is_some_and(|x| reads_ids(x)),
        Layer::Residual(_) => false,
        _ => false,
    }
}

/// The batch (B) and sequence length (S) a model sees for an input.
pub fn batch_of(layer: &Layer, x: &Arr, span: Span) -> BatchGuess {
    let known = |d: &Dim| match d {
        Dim::Known(n) => Some(*n as f64),
        _ => None,
    };
    let (batch, seq) = match x.dims.as_deref() {
        None => (None, None),
        Some(d) => {
            let feature_axes = usize::from(!reads_ids(layer));
            let lead = &d[..d.len().saturating_sub(feature_axes)];
            match lead.len() {
                0 => (Some(1.0), Some(1.0)),
                1 if feature_axes == 1 => (known(&lead[0]), Some(1.0)),
                1 => (Some(1.0), known(&lead[0])),
                _ => {
                    let b = lead[..lead.len() - 1]
                        .iter()
                        .map(known)
                        .product::<Option<f64>>();
                    (b, known(&lead[lead.len() - 1]))
                }
            }
        }
    };
    BatchGuess {
        batch,
        seq,
        input_shape: x.named_shape(),
        input_span: span,
    }
}

/// The output of a model for an input, or the reason the input does not fit
/// (E0211's note).
pub fn apply_layer(l: &Layer, x: &Arr) -> Result<Arr, String> {
    let Some(dims) = x.dims.clone() else {
        return Ok(Arr::unknown());
    };
    let last_is = |want: usize, what: String| -> Result<(), String> {
        match dims.last() {
            None => Err(format!(
                "`{what}` expects an input of shape `[…, {want}]`, got a scalar"
            )),
            Some(Dim::Known(n)) if *n != want => Err(format!(
                "`{what}` expects an input of shape `[…, {want}]`, got {}",
                x.named_shape()
            )),
            _ => Ok(()),
        }
    };
    let with_last = |size: usize| -> Arr {
        let mut d = dims.clone();
        if let Some(l) = d.last_mut() {
            *l = Dim::Known(size);
        }
        let mut out = Arr::of_dims(d);
        if let Some(mut n) = x.names.clone() {
            if let Some(l) = n.last_mut() {
                *l = None;
            }
            out.names = Some(n);
            out.names_from = x.names_from;
        } else {
            out.names = None;
        }
        out
    };
    let keep = || x.clone().without_constant();
    match l {
        Layer::Linear(li) => {
            last_is(li.inp, l.describe())?;
            Ok(with_last(li.out))
        }
        Layer::Lora(lo) => {
            last_is(lo.base.inp, l.describe())?;
            Ok(with_last(lo.base.out))
        }
        Layer::Embed(e) => {
            let mut d = dims.clone();
            d.push(Dim::Known(e.d));
            let mut out = Arr::of_dims(d);
            out.names = x.names.clone().map(|mut n| {
                n.push(None);
                n
            });
            Ok(out)
        }
        Layer::Attention(a) => {
            if !(2..=3).contains(&dims.len()) {
                return Err(format!(
                    "`{}` expects `[T, {}]` or `[B, T, {}]`, got {}",
                    l.describe(),
                    a.d,
                    a.d,
                    x.named_shape()
                ));
            }
            last_is(a.d, l.describe())?;
            Ok(keep())
        }
        Layer::RmsNorm(r) => {
            if r.gain.is_some() {
                last_is(r.dim, l.describe())?;
            }
            Ok(keep())
        }
        Layer::LayerNorm(n) => {
            last_is(n.d, l.describe())?;
            Ok(keep())
        }
        Layer::SwiGlu(s) => {
            last_is(s.d, l.describe())?;
            Ok(keep())
        }
        Layer::Moe(m) => {
            last_is(m.d, l.describe())?;
            Ok(keep())
        }
        Layer::Activation(Activation::Softmax) => {
            if dims.is_empty() {
                return Err(
                    "`softmax_layer()` needs an input of rank 1 or more, got a scalar".into(),
                );
            }
            Ok(keep().unnamed())
        }
        Layer::Activation(_) | Layer::Dropout(_) | Layer::Rope(_) => Ok(keep()),
        Layer::Chain(c) => {
            let mut cur = x.clone();
            for child in c {
                cur = apply_layer(child, &cur)?;
            }
            Ok(cur)
        }
        Layer::Residual(inner) => {
            let out = apply_layer(inner, x)?;
            if let (Some(a), Some(b)) = (x.known_shape(), out.known_shape()) {
                if a != b {
                    return Err(format!(
                        "a residual block must keep the shape: {} becomes {}",
                        x.named_shape(),
                        out.named_shape()
                    ));
                }
            }
            Ok(keep())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlpl_runtime::syntax::parse;

    fn facts(src: &str) -> Facts {
        LocalEngine.infer(&parse(src).program, src)
    }

    fn binding(f: &Facts, name: &str) -> String {
        f.bindings
            .iter()
            .rev()
            .find(|b| b.name == name)
            .unwrap()
            .value
            .describe()
    }

    #[test]
    fn named_shapes_flow() {
        let f = facts("X : [batch, feat] = reshape(iota(12), [4, 3])\nW : [feat, hidden] = ones([3, 2]) / 3\nH = matmul(X, W)\ns = sum(X, \"batch\")\nY = X + [1, 2, 3]\nT = transpose(Y)");
        assert_eq!(binding(&f, "X"), "[batch=4, feat=3]");
        assert_eq!(binding(&f, "W"), "[feat=3, hidden=2]");
        assert_eq!(binding(&f, "H"), "[batch=4, hidden=2]");
        assert_eq!(binding(&f, "s"), "[feat=3]");
        assert_eq!(binding(&f, "Y"), "[batch=4, feat=3]");
        assert_eq!(binding(&f, "T"), "[feat=3, batch=4]");
        assert!(f.diagnostics.is_empty(), "{:?}", f.diagnostics);
    }

    #[test]
    fn shape_errors_are_proven() {
        let f = facts("x : [batch, feat] = zeros([32, 10])\nw = zeros([64, 32])\nh = matmul(x, w)\ny = x + zeros([3])\nz : [hidden] = zeros([10])\nq = x + z");
        let codes: Vec<&str> = f.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(codes, ["E0203", "E0201", "E0202"]);
        let d = &f.diagnostics[0];
        assert!(d.primary.as_ref().unwrap().message.contains("[64, 32]"));
        assert!(d
            .secondary
            .iter()
            .any(|l| l.message.contains("[batch=32, feat=10]")));
        // The operand that got its names from an annotation points there.
        assert!(d
            .secondary
            .iter()
            .any(|l| l.message.contains("got its axis names")));
    }

    #[test]
    fn unknown_is_never_an_error() {
        let f = facts("a = load(\"x.csv\")\nb = matmul(a, zeros([3, 2]))\nc = a + zeros([7])");
        assert!(f.diagnostics.is_empty());
    }

    #[test]
    fn models_and_train_blocks() {
        let src = "data = moons(0, 200, 0.1)\nX : [sample, feat] = matmul(data, [[1, 0], [0, 1], [0, 0]])\ny = matmul(data, [0, 0, 1])\nmodel = chain(linear(2, 16, 1), tanh_layer(), linear(16, 2, 2))\ntrain 300 {\n  adam(cross_entropy(apply(model, X), y), model, 0.01, 0.9, 0.999, 1e-8)\n}\nout = apply(model, X)";
        let f = facts(src);
        assert_eq!(binding(&f, "X"), "[sample=200, feat=2]");
        assert_eq!(binding(&f, "model"), "model, 82 parameters");
        assert_eq!(binding(&f, "out"), "[sample=200, 2]");
        let t = &f.trains[0];
        assert_eq!(t.steps, Some(300.0));
        let o = &f.optimizers[t.optimizer.unwrap()];
        let b = o.batch.as_ref().unwrap();
        assert_eq!((b.batch, b.seq), (Some(200.0), Some(1.0)));
        assert!(o.model.is_some());
    }

    #[test]
    fn layer_input_errors() {
        let f = facts("m = chain(linear(3, 4, 0), linear(5, 2, 1))\ny = apply(m, zeros([2, 3]))");
        assert_eq!(f.diagnostics[0].code, "E0211");
        assert!(
            f.diagnostics[0].notes[0].contains("linear(5, 2)"),
            "{:?}",
            f.diagnostics[0].notes
        );
    }

    #[test]
    fn sequence_batches_from_ids() {
        let f = facts("m = chain(embed(32, 8, 0), linear(8, 32, 1))\nX = zeros([4, 8])\ntrain 10 { adam(cross_entropy(apply(m, X), zeros([32])), m, 0.1, 0.9, 0.999, 1e-8) }");
        let b = f.optimizers[0].batch.as_ref().unwrap();
        assert_eq!((b.batch, b.seq), (Some(4.0), Some(8.0)));
    }
}
