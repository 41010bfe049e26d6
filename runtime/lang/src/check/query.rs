//! Queries for tools (the language server's hovers, inlay hints, completion details
//! and feasibility estimates): what the checker knows at a place of the program,
//! computed by the checker itself, never by a second set of shape rules.
//!
//! The queries replay the checker's analysis ([`Checker::stmt`] and
//! [`Checker::expr`]) statement by statement, and look inside statements with the
//! environment in force there (reporting off, except for the statements' own
//! analysis in [`check_with_facts`]):
//!
//! - [`facts`]: every assignment at any depth with the value it binds, every
//!   `train` block and every optimizer call with the model it updates, the batch
//!   its loss implies and the parameters frozen at that point, and checkpoints of
//!   the checker's state; [`check_with_facts`] gives them together with
//!   [`check_source`](super::check_source)'s result, in one pass;
//! - [`value_at`]: the value of the innermost expression under a byte offset
//!   (hover on any sub-expression); [`value_at_resumed`] replays from the last
//!   checkpoint before it.
//!
//! Inside a loop body the environment is what holds on *any* iteration: the join
//! of the environment before the loop and after it (the checker's fixed point),
//! with the loop's own variables (`step`, the row of a `for`) unknown in value.

use std::collections::HashSet;

use super::abstract_value::{AbsArray, AbsValue, Dim};
use super::env::Snapshot;
use super::expr::Checker;
use super::loss::LossCtx;
use super::models::AbsModel;
use super::stmt::assigned_in_block;
use crate::builtins::{self, ParamKind};
use crate::nn::layers::Layer;
use mlpl_diag::Span;
use mlpl_syntax::walk::{self, children};
use mlpl_syntax::{Block, Expr, ExprKind, Program, Stmt, StmtKind};

/// One assignment (or `for` variable), at any depth, and the value it binds.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// The variable.
    pub name: String,
    /// Where the name is written.
    pub name_span: Span,
    /// The whole statement (the `for` header for a loop variable).
    pub stmt_span: Span,
    /// What the checker knows about the variable right after the statement (on
    /// any iteration, inside a loop body).
    pub value: AbsValue,
    /// Whether the statement has an axis annotation (`X : [a, b] = …`).
    pub annotated: bool,
    /// Whether the right-hand side is `param[…]` (a tracked parameter).
    pub param: bool,
}

/// A `train N { … }` block.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainBlock {
    /// The whole statement.
    pub span: Span,
    /// The `train` keyword.
    pub keyword: Span,
    /// The step count, when it is a constant.
    pub steps: Option<usize>,
    /// Index into [`Facts::optimizers`] of the first optimizer call of the body.
    pub optimizer: Option<usize>,
}

/// The batch a loss implies: the input of its first `apply(model, x)`.
#[derive(Clone, Debug, PartialEq)]
pub struct LossBatch {
    /// Rows per step (B), when known.
    pub batch: Option<usize>,
    /// Sequence length (S; 1 for inputs without a sequence axis), when known.
    pub seq: Option<usize>,
    /// What the checker knows about the input.
    pub input: AbsArray,
    /// The input expression.
    pub input_span: Span,
}

/// An optimizer call (`adam`, `adamw`, `momentum_sgd`).
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerCall {
    /// The optimizer's name.
    pub name: String,
    /// The call.
    pub call_span: Span,
    /// The builtin's name as written.
    pub name_span: Span,
    /// The model whose parameters it updates, when `params` is (or lists) a model
    /// whose every size is known.
    pub model: Option<AbsModel>,
    /// The batch its loss implies.
    pub batch: Option<LossBatch>,
    /// The step count of the enclosing `train` block (`Some(1)` outside one; `None`
    /// when the count is not a constant).
    pub steps: Option<usize>,
    /// Whether the call is inside a `train` block.
    pub in_train: bool,
    /// Parameters frozen at this point (`freeze`, `lora`), by parameter name.
    pub frozen: HashSet<String>,
}

/// Everything the checker can tell tools about a program beyond its diagnostics.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// Assignments and loop variables in source order.
    pub assignments: Vec<Assignment>,
    /// `train` blocks in source order.
    pub trains: Vec<TrainBlock>,
    /// Optimizer calls in source order.
    pub optimizers: Vec<OptimizerCall>,
    /// The checker's state before every [`CHECKPOINT_EVERY`]-th top-level
    /// statement, from which [`value_at_resumed`] replays.
    pub checkpoints: Vec<Checkpoint>,
}

/// Top-level statements between two [`Checkpoint`]s.
pub const CHECKPOINT_EVERY: usize = 512;

/// The checker's state before a top-level statement.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// The statement's index in the program.
    pub stmt: usize,
    env: super::env::Env,
    symbols: super::ctx::Symbols,
}

/// [`check_source`](super::check_source) and [`facts`] in one pass: the same
/// parse, name checks and abstract interpretation (its diagnostics are
/// `check_source`'s, in the same order), with the facts gathered on the way, so
/// that an editor analyses a text once.
pub fn check_with_facts(src: &str) -> (super::Checked, Facts) {
    let parsed = mlpl_syntax::parse(src);
    let mut diagnostics = parsed.diagnostics;
    diagnostics.extend(super::names::check(&parsed.program));
    let mut w = Walker::new(None);
    w.c.report = true;
    w.know_functions(&parsed.program);
    w.top_level(&parsed.program.stmts);
    diagnostics.append(&mut w.c.out);
    diagnostics.sort_by_key(|d| d.primary.as_ref().map_or(0, |l| l.span.start));
    let checked = super::Checked {
        program: parsed.program,
        diagnostics,
    };
    (checked, w.finish())
}

/// The facts of a program (see the module documentation).
pub fn facts(program: &Program) -> Facts {
    let mut w = Walker::new(None);
    w.know_functions(program);
    w.top_level(&program.stmts);
    w.finish()
}

impl Walker {
    fn finish(self) -> Facts {
        let mut f = self.facts;
        f.assignments.sort_by_key(|a| a.name_span.start);
        f.trains.sort_by_key(|t| t.span.start);
        // Optimizer indices in train blocks refer to discovery order: keep it (calls
        // are discovered in source order, nested blocks after their headers).
        f
    }
}

/// The innermost expression containing byte `offset` whose value the checker
/// knows (not even its kind being known counts as not known), with its span.
pub fn value_at(program: &Program, offset: usize) -> Option<(Span, AbsValue)> {
    let mut w = Walker::new(Some(offset));
    w.know_functions(program);
    w.stmts(&program.stmts);
    w.found
}

/// [`value_at`], replaying from the last of `facts`' checkpoints before `offset`
/// (`facts` must be the facts of `program`): the cost is that of the statements
/// since the checkpoint, not of the whole program before `offset`.
pub fn value_at_resumed(
    program: &Program,
    facts: &Facts,
    offset: usize,
) -> Option<(Span, AbsValue)> {
    let mut w = Walker::new(Some(offset));
    w.know_functions(program);
    let from = facts.checkpoints.iter().rev().find(|c| {
        program
            .stmts
            .get(c.stmt)
            .is_some_and(|s| s.span.start <= offset)
    });
    let start = match from {
        Some(c) => {
            w.c.env = c.env.clone();
            w.c.symbols = c.symbols.clone();
            c.stmt
        }
        None => 0,
    };
    w.stmts(program.stmts.get(start..).unwrap_or_default());
    w.found
}

/// The batch (B) and sequence length (S) a model sees for input `x`: the axes
/// before the features (all of them for token ids), the last one being the
/// sequence when there are two or more.
pub fn batch_of(layer: &Layer, x: &AbsArray, span: Span) -> LossBatch {
    let (batch, seq) = match x.dims.as_deref() {
        None => (None, None),
        Some(d) => {
            let feature_axes = usize::from(!reads_ids(layer));
            let lead = &d[..d.len().saturating_sub(feature_axes)];
            match lead.len() {
                0 => (Some(1), Some(1)),
                1 if feature_axes == 1 => (lead[0].known(), Some(1)),
                1 => (Some(1), lead[0].known()),
                _ => {
                    let b = lead[..lead.len() - 1]
                        .iter()
                        .map(Dim::known)
                        .try_fold(1usize, |acc, d| acc.checked_mul(d?));
                    (b, lead[lead.len() - 1].known())
                }
            }
        }
    };
    LossBatch {
        batch,
        seq,
        input: x.clone(),
        input_span: span,
    }
}

/// Whether the model's first layer that reads its input is an embedding (its
/// input is token ids, not features).
fn reads_ids(l: &Layer) -> bool {
    match l {
        Layer::Embed(_) => true,
        Layer::Engram(g) => g.vocab.is_some(),
        Layer::Chain(c) => c.first().is_some_and(|x| reads_ids(x)),
        _ => false,
    }
}

impl Walker {
    /// Every function of the program is callable anywhere in it (as in
    /// [`Checker::program`]).
    fn know_functions(&mut self, program: &Program) {
        for (name, def) in super::functions_of(program) {
            self.c.fns.insert(name, std::rc::Rc::new(def.clone()));
        }
    }

    /// A function's body, in its own scope with the parameters as the checker
    /// sees them at the definition (symbolic dimensions), for hovers and inlay
    /// hints inside bodies.
    fn fn_body(&mut self, def: &mlpl_syntax::FnDef) {
        if let Some(t) = self.target {
            if !contains(def.body.span, t) {
                return;
            }
        }
        let mut env = super::env::Env::default();
        for p in &def.params {
            env.assign(
                &p.name.name,
                super::functions::symbolic(p.shape.as_ref()),
                false,
            );
        }
        let outer = std::mem::replace(&mut self.c.env, env);
        let report = std::mem::replace(&mut self.c.report, false);
        self.c.fn_stack.push(def.name.name.clone());
        self.stmts(&def.body.stmts);
        self.c.fn_stack.pop();
        self.c.report = report;
        self.c.env = outer;
    }
}

/// The replay: a checker (reporting only in the statements' own analysis, for
/// [`check_with_facts`]), the facts found so far and, for [`value_at`], the
/// offset looked for.
struct Walker {
    c: Checker,
    facts: Facts,
    frozen: HashSet<String>,
    /// Enclosing `train` blocks: index into `facts.trains`, step count.
    trains: Vec<(usize, Option<usize>)>,
    target: Option<usize>,
    found: Option<(Span, AbsValue)>,
}

impl Walker {
    fn new(target: Option<usize>) -> Walker {
        let mut c = Checker::new();
        c.report = false;
        Walker {
            c,
            facts: Facts::default(),
            frozen: HashSet::new(),
            trains: Vec::new(),
            target,
            found: None,
        }
    }

    fn done(&self) -> bool {
        self.target.is_some() && self.found.is_some()
    }

    /// The program's statements, with a checkpoint every [`CHECKPOINT_EVERY`].
    fn top_level(&mut self, stmts: &[Stmt]) {
        for (i, s) in stmts.iter().enumerate() {
            if i > 0 && i % CHECKPOINT_EVERY == 0 {
                self.facts.checkpoints.push(Checkpoint {
                    stmt: i,
                    env: self.c.env.clone(),
                    symbols: self.c.symbols.clone(),
                });
            }
            self.stmt(s);
        }
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            if self.done() {
                return;
            }
            if let Some(t) = self.target {
                // Statements after the target cannot matter.
                if s.span.start > t {
                    return;
                }
                if s.span.end < t {
                    self.c.stmt(s);
                    continue;
                }
            }
            self.stmt(s);
        }
    }

    /// One statement: what is looked up before it runs, the run, what it bound,
    /// then its body with the environment of any iteration.
    fn stmt(&mut self, s: &Stmt) {
        let header = header_exprs(s);
        if let Some(t) = self.target {
            if let Some(e) = header.iter().find(|e| contains(e.span, t)) {
                self.probe_target(s, e, t);
                if self.done() {
                    return;
                }
            }
        } else {
            for e in &header {
                self.calls_in(s, e);
            }
        }
        if let StmtKind::Train { count, .. } = &s.kind {
            if self.target.is_none() {
                // As `train` counts (LANGUAGE §6.3): truncated, negative or NaN
                // runs zero times.
                let steps = self.probe(s, count, None).as_array().and_then(|a| {
                    let n = a.scalar_value()?;
                    match n {
                        n if n.is_nan() || n <= 0.0 => Some(0),
                        n if n.is_finite() => Some(n.trunc() as usize),
                        _ => None,
                    }
                });
                self.facts.trains.push(TrainBlock {
                    span: s.span,
                    keyword: Span::new(s.span.start, (s.span.start + 5).min(s.span.end)),
                    steps,
                    optimizer: None,
                });
            }
        }
        // The environment before `s`, when it has blocks to walk afterwards.
        let saved = has_blocks(s).then(|| {
            let names = assigned_names(s);
            let before = self.c.env.snapshot(&names);
            (names, before)
        });
        self.c.stmt(s);
        if self.target.is_none() {
            if let StmtKind::Assign { name, value } | StmtKind::Annotated { name, value, .. } =
                &s.kind
            {
                if let Some(b) = self.c.env.get(&name.name) {
                    self.facts.assignments.push(Assignment {
                        name: name.name.clone(),
                        name_span: name.span,
                        stmt_span: s.span,
                        value: b.value.clone(),
                        annotated: matches!(s.kind, StmtKind::Annotated { .. }),
                        param: super::stmt::is_param_ctor(value),
                    });
                }
            }
        }
        if let Some((names, before)) = saved {
            self.bodies(s, &names, before);
        }
    }

    /// Walks the blocks of `s` (loop and experiment bodies, `device` blocks in its
    /// expressions) from the environment they start from, then restores the
    /// environment after `s`.
    fn bodies(&mut self, s: &Stmt, names: &[String], before: Snapshot) {
        if let StmtKind::Fn(def) = &s.kind {
            self.fn_body(def);
            return;
        }
        let body: Option<&Block> = match &s.kind {
            StmtKind::Repeat { body, .. }
            | StmtKind::Train { body, .. }
            | StmtKind::For { body, .. }
            | StmtKind::Experiment { body, .. } => Some(body),
            _ => None,
        };
        let devices = device_blocks(s);
        if body.is_none() && devices.is_empty() {
            return;
        }
        if let Some(t) = self.target {
            let inside = body.is_some_and(|b| contains(b.span, t))
                || devices.iter().any(|(_, b)| contains(b.span, t));
            if !inside {
                return;
            }
        }
        let after = self.c.env.snapshot(names);
        let symbols = self.c.symbols.clone();
        // Blocks were reported by the statement's own analysis.
        let report = std::mem::replace(&mut self.c.report, false);
        for (target, block) in devices {
            self.c.env.restore(&before);
            self.c.expr(target);
            self.stmts(&block.stmts);
        }
        if let Some(body) = body {
            let is_loop = !matches!(s.kind, StmtKind::Experiment { .. });
            let before_loop = before.clone();
            let entry = if is_loop {
                super::env::Env::join_snapshots(&before, &after)
            } else {
                before
            };
            self.c.env.restore(&entry);
            let saved = (
                self.c.loop_depth,
                self.c.train_depth,
                self.c.plain_loop_depth,
            );
            match &s.kind {
                StmtKind::Train { .. } => {
                    self.c.loop_depth += 1;
                    self.c.train_depth += 1;
                    self.c.env.assign("step", AbsValue::any_scalar(), false);
                    let t = self.facts.trains.iter().rposition(|t| t.span == s.span);
                    let steps = t.and_then(|i| self.facts.trains[i].steps);
                    if let Some(i) = t {
                        self.trains.push((i, steps));
                    }
                    self.stmts(&body.stmts);
                    if t.is_some() {
                        self.trains.pop();
                    }
                }
                StmtKind::For { var, iter, .. } => {
                    // The rows come from the value before the loop.
                    self.c.env.restore(&before_loop);
                    let row = self
                        .probe(s, iter, None)
                        .as_array()
                        .map_or(AbsValue::Unknown, |a| AbsValue::Array(any_row(a)));
                    self.c.env.restore(&entry);
                    self.c.loop_depth += 1;
                    self.c.plain_loop_depth += 1;
                    self.c.env.assign(&var.name, row.clone(), false);
                    if self.target.is_none() {
                        self.facts.assignments.push(Assignment {
                            name: var.name.clone(),
                            name_span: var.span,
                            stmt_span: Span::new(s.span.start, body.span.start),
                            value: row,
                            annotated: false,
                            param: false,
                        });
                    }
                    self.stmts(&body.stmts);
                }
                StmtKind::Repeat { .. } => {
                    self.c.loop_depth += 1;
                    self.c.plain_loop_depth += 1;
                    self.stmts(&body.stmts);
                }
                _ => self.stmts(&body.stmts),
            }
            (
                self.c.loop_depth,
                self.c.train_depth,
                self.c.plain_loop_depth,
            ) = saved;
        }
        self.c.symbols = symbols;
        self.c.report = report;
        self.c.env.restore(&after);
    }

    /// The value of `e` (an expression of statement `s`) in the environment before
    /// `s`, in loss mode when `loss` is given; the environment and the size
    /// symbols are left as they were.
    fn probe(&mut self, s: &Stmt, e: &Expr, loss: Option<LossCtx>) -> AbsValue {
        let names = assigned_names(s);
        let snap = self.c.env.snapshot(&names);
        let symbols = self.c.symbols.clone();
        let saved = std::mem::replace(&mut self.c.loss, loss);
        let report = std::mem::replace(&mut self.c.report, false);
        let v = self.c.expr(e);
        self.c.report = report;
        self.c.loss = saved;
        self.c.symbols = symbols;
        self.c.env.restore(&snap);
        v
    }

    /// [`value_at`]'s lookup inside expression `e` of statement `s`: the innermost
    /// expression containing `t` with a known value. Blocks of `device`
    /// expressions are left to [`Walker::bodies`].
    fn probe_target(&mut self, s: &Stmt, e: &Expr, t: usize) {
        let mut path: Vec<(&Expr, bool)> = Vec::new();
        let mut cur = e;
        let mut in_loss = false;
        loop {
            path.push((cur, in_loss));
            let Some((next, lossy)) = child_containing(cur, t) else {
                break;
            };
            in_loss |= lossy;
            cur = next;
        }
        if path.len() == 1 && matches!(e.kind, ExprKind::Device { .. }) {
            // Inside the block (not its target): left to `bodies`.
            if !matches!(&e.kind, ExprKind::Device { target, .. } if contains(target.span, t)) {
                return;
            }
        }
        for (x, lossy) in path.into_iter().rev() {
            if let ExprKind::Device { body, .. } = &x.kind {
                if contains(body.span, t) {
                    return;
                }
            }
            let loss = lossy.then(|| LossCtx {
                wrt: wrt_of(e, x.span),
            });
            let v = self.probe(s, x, loss);
            if !matches!(v, AbsValue::Unknown) {
                self.found = Some((x.span, v));
                return;
            }
        }
    }

    /// Records the optimizer calls and updates the frozen set for the `freeze`,
    /// `unfreeze` and `lora` calls in `e` (not inside `device` blocks), in
    /// evaluation order.
    fn calls_in(&mut self, s: &Stmt, e: &Expr) {
        let ExprKind::Call { name, args } = &e.kind else {
            for c in children(e) {
                self.calls_in(s, c);
            }
            return;
        };
        for a in args {
            self.calls_in(s, a);
        }
        match name.name.as_str() {
            "freeze" | "unfreeze" if args.len() == 1 => {
                if let AbsValue::Model(Some(m)) = self.probe(s, &args[0], None) {
                    for p in m.0.param_specs() {
                        if name.name == "freeze" {
                            self.frozen.insert(p.name);
                        } else {
                            self.frozen.remove(&p.name);
                        }
                    }
                }
            }
            "lora" => {
                if let AbsValue::Model(Some(m)) = self.probe(s, e, None) {
                    for p in m.0.param_specs() {
                        if p.kind != "lora" || (p.role != "A" && p.role != "B") {
                            self.frozen.insert(p.name);
                        }
                    }
                }
            }
            n if builtins::has_fact(n, |f| f.optimizer) => self.optimizer(s, e, n, name.span, args),
            _ => {}
        }
    }

    fn optimizer(&mut self, s: &Stmt, e: &Expr, name: &str, name_span: Span, args: &[Expr]) {
        let model = args.get(1).and_then(|p| {
            let items: Vec<&Expr> = match &p.unparen().kind {
                ExprKind::List(items) => items.iter().collect(),
                _ => vec![p],
            };
            items
                .into_iter()
                .find_map(|i| match self.probe(s, i, None) {
                    AbsValue::Model(Some(m)) => Some(m),
                    _ => None,
                })
        });
        let batch = args
            .first()
            .and_then(|loss| self.loss_batch(s, loss, model.as_ref()));
        let (in_train, steps) = match self.trains.last() {
            Some(&(_, n)) => (true, n),
            None => (false, Some(1)),
        };
        let idx = self.facts.optimizers.len();
        if let Some(&(t, _)) = self.trains.last() {
            self.facts.trains[t].optimizer.get_or_insert(idx);
        }
        self.facts.optimizers.push(OptimizerCall {
            name: name.to_string(),
            call_span: e.span,
            name_span,
            model,
            batch,
            steps,
            in_train,
            frozen: self.frozen.clone(),
        });
    }

    /// The batch of the first `apply(model, x)` of a loss, with `x` evaluated in
    /// loss mode.
    fn loss_batch(&mut self, s: &Stmt, loss: &Expr, model: Option<&AbsModel>) -> Option<LossBatch> {
        let (m, x) = first_apply(loss)?;
        let layer = match self.probe(s, m, None) {
            AbsValue::Model(Some(m)) => m.0,
            _ => model?.0.clone(),
        };
        let ctx = LossCtx { wrt: None };
        match self.probe(s, x, Some(ctx)) {
            AbsValue::Array(a) => Some(batch_of(&layer, &a, x.span)),
            _ => None,
        }
    }
}

/// The shape of any row of `a` (a `for` variable on an unknown iteration).
fn any_row(a: &AbsArray) -> AbsArray {
    let Some(dims) = &a.dims else {
        return AbsArray::unknown();
    };
    if dims.is_empty() {
        return AbsArray::unknown();
    }
    let mut out = AbsArray::of_dims(dims[1..].to_vec());
    out.names = a.names.get(1..).map(|n| n.to_vec()).unwrap_or_default();
    out.origin = a.origin;
    out.placed = a.placed;
    out
}

fn contains(span: Span, offset: usize) -> bool {
    span.start <= offset && offset <= span.end
}

/// Every variable `s` may bind.
fn assigned_names(s: &Stmt) -> Vec<String> {
    let mut names = Vec::new();
    assigned_in_block(std::slice::from_ref(s), &mut names);
    names.sort_unstable();
    names.dedup();
    names
}

/// The expressions of a statement outside its body.
fn header_exprs(s: &Stmt) -> Vec<&Expr> {
    walk::stmt_expr(s).into_iter().collect()
}

/// Whether `s` has a body or a `device` block in its expressions.
fn has_blocks(s: &Stmt) -> bool {
    fn device_in(e: &Expr) -> bool {
        matches!(e.kind, ExprKind::Device { .. }) || children(e).any(device_in)
    }
    match &s.kind {
        StmtKind::Repeat { .. }
        | StmtKind::Train { .. }
        | StmtKind::For { .. }
        | StmtKind::Experiment { .. }
        | StmtKind::Fn(_) => true,
        StmtKind::Expr(e)
        | StmtKind::Assign { value: e, .. }
        | StmtKind::Annotated { value: e, .. } => device_in(e),
        StmtKind::Error => false,
    }
}

/// The sub-expression of `e` containing `t`, and whether it is a loss (a lazy
/// argument) of `e`.
fn child_containing(e: &Expr, t: usize) -> Option<(&Expr, bool)> {
    if let ExprKind::Call { name, args } = &e.kind {
        let b = builtins::lookup(&name.name);
        return args.iter().enumerate().find_map(|(i, a)| {
            contains(a.span, t).then(|| {
                let lazy = b
                    .and_then(|b| b.param_at(i))
                    .is_some_and(|p| p.kind == ParamKind::Lazy && p.name == "loss");
                (a, lazy)
            })
        });
    }
    children(e)
        .find(|c| contains(c.span, t))
        .map(|c| (c, false))
}

/// `grad`'s variable for a loss containing `inner`, found in `root`.
fn wrt_of(root: &Expr, inner: Span) -> Option<String> {
    let mut cur = root;
    let mut wrt = None;
    loop {
        if let ExprKind::Call { name, args } = &cur.kind {
            if name.name == "grad" && args.first().is_some_and(|l| contains(l.span, inner.start)) {
                if let Some(ExprKind::Var(v)) = args.get(1).map(|a| &a.unparen().kind) {
                    wrt = Some(v.clone());
                }
            }
        }
        match child_containing(cur, inner.start) {
            Some((next, _)) if next.span != cur.span => cur = next,
            _ => return wrt,
        }
    }
}

/// The model and input of the first `apply(model, x)` in `e`, outside `device`
/// blocks.
fn first_apply(e: &Expr) -> Option<(&Expr, &Expr)> {
    if let ExprKind::Call { name, args } = &e.kind {
        if name.name == "apply" && args.len() == 2 {
            return Some((&args[0], &args[1]));
        }
    }
    children(e).find_map(first_apply)
}

/// The `device` blocks written in the expressions of `s` (outside its body),
/// with their targets.
fn device_blocks(s: &Stmt) -> Vec<(&Expr, &Block)> {
    fn find<'a>(e: &'a Expr, out: &mut Vec<(&'a Expr, &'a Block)>) {
        if let ExprKind::Device { target, body } = &e.kind {
            out.push((target, body));
        }
        children(e).for_each(|c| find(c, out));
    }
    let mut out = Vec::new();
    for e in header_exprs(s) {
        find(e, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlpl_syntax::parse;

    fn at(src: &str, needle: &str) -> (String, String) {
        let p = parse(src).program;
        let off = src.find(needle).expect("needle");
        let (span, v) = value_at(&p, off).expect("a value");
        let shown = match v {
            AbsValue::Array(a) => a.shape_text(),
            other => other.kind_name().unwrap_or("unknown").to_string(),
        };
        (src[span.start..span.end].to_string(), shown)
    }

    #[test]
    fn sub_expressions_have_the_checkers_values() {
        let src =
            "X : [batch, feat] = zeros([4, 3])\nW = param[3, 2]\ny = relu(matmul(X, W)) + 1\n";
        assert_eq!(
            at(src, "matmul(X, W)"),
            ("matmul(X, W)".into(), "[batch=4, 2]".into())
        );
        assert_eq!(at(src, "W))"), ("W".into(), "[3, 2]".into()));
        let f = facts(&parse(src).program);
        let y = f.assignments.iter().find(|a| a.name == "y").unwrap();
        assert_eq!(y.value.as_array().unwrap().shape_text(), "[batch=4, 2]");
    }

    #[test]
    fn resuming_from_checkpoints_gives_the_same_values() {
        let mut src = String::from("d = load(\"x.csv\")\n");
        for k in 0..(3 * CHECKPOINT_EVERY) {
            src.push_str(&format!("a{k} = zeros([{}, 2]) + 1\n", k % 7 + 1));
        }
        src.push_str("e = load(\"y.csv\")\nz = sum(d, 0)\n");
        let p = parse(&src).program;
        let f = facts(&p);
        assert_eq!(f.checkpoints.len(), 3);
        for k in [0, CHECKPOINT_EVERY + 3, 3 * CHECKPOINT_EVERY - 1] {
            let off = src.find(&format!("a{k} =")).unwrap() + format!("a{k} = ").len();
            let full = value_at(&p, off);
            assert!(full.is_some());
            assert_eq!(value_at_resumed(&p, &f, off), full, "a{k}");
        }
        // Size symbols carry over: the second file's sizes are `N2`, `C2`.
        let off = src.find("z = ").unwrap() + 4;
        let (_, v) = value_at_resumed(&p, &f, off).unwrap();
        assert_eq!(v.as_array().unwrap().shape_text(), "[C]");
        let off = src.find("load(\"y").unwrap();
        let (_, v) = value_at_resumed(&p, &f, off).unwrap();
        assert_eq!(v.as_array().unwrap().shape_text(), "[N2, C2]");
    }

    #[test]
    fn loop_bodies_see_any_iteration() {
        let src = "x = 1\nrepeat 3 {\n  x = x + 1\n  z = x\n}\nM = zeros([5, 2])\nfor r in M {\n  q = r * 2\n}\n";
        let f = facts(&parse(src).program);
        let z = f.assignments.iter().find(|a| a.name == "z").unwrap();
        let za = z.value.as_array().unwrap();
        assert_eq!(za.rank(), Some(0));
        assert_eq!(
            za.scalar_value(),
            None,
            "not the first iteration's constant"
        );
        let q = f.assignments.iter().find(|a| a.name == "q").unwrap();
        assert_eq!(q.value.as_array().unwrap().shape_text(), "[2]");
        assert!(f.assignments.iter().any(|a| a.name == "r"));
    }

    #[test]
    fn symbolic_sizes_and_unknowns() {
        let src = "d = load(\"x.csv\")\ns = sum(d, 0)\n";
        assert_eq!(at(src, "sum(d, 0)"), ("sum(d, 0)".into(), "[C]".into()));
        assert_eq!(at(src, "d, 0"), ("d".into(), "[N, C]".into()));
        let p = parse("y = nothing_known + 1").program;
        // An undefined variable is not known; the sum is an array of unknown shape.
        let (span, v) = value_at(&p, 5).unwrap();
        assert_eq!(span.start, 4);
        assert!(matches!(v, AbsValue::Array(_)));
    }

    #[test]
    fn training_facts() {
        let src = "m = chain(linear(4, 8, 1), relu_layer(), linear(8, 2, 2))\nX = zeros([32, 4])\nY = zeros([32, 2])\ntrain 100 {\n  adam(mean((apply(m, X) - Y) * (apply(m, X) - Y)), m, 0.01)\n  l = 1\n}\n";
        let f = facts(&parse(src).program);
        assert_eq!(f.trains.len(), 1);
        assert_eq!(f.trains[0].steps, Some(100));
        let o = &f.optimizers[f.trains[0].optimizer.unwrap()];
        assert_eq!(o.name, "adam");
        assert!(o.in_train);
        assert_eq!(o.steps, Some(100));
        let m = o.model.as_ref().expect("model");
        assert_eq!(m.signature().param_count, (4 * 8 + 8 + 8 * 2 + 2) as f64);
        let b = o.batch.as_ref().unwrap();
        assert_eq!((b.batch, b.seq), (Some(32), Some(1)));
    }

    #[test]
    fn frozen_parameters_follow_freeze() {
        let src = "m = linear(4, 2, 0)\nfreeze(m)\nX = zeros([8, 4])\nadam(sum(apply(m, X)), m, 0.1)\nunfreeze(m)\nadam(sum(apply(m, X)), m, 0.1)\n";
        let f = facts(&parse(src).program);
        assert_eq!(f.optimizers.len(), 2);
        assert_eq!(f.optimizers[0].frozen.len(), 2);
        assert!(f.optimizers[1].frozen.is_empty());
        assert!(!f.optimizers[0].in_train);
    }
}
