//! Abstract evaluation of statements: assignments and annotations, `repeat`,
//! `train` and `for` loops (the first iterations analysed exactly and reported,
//! then the body iterated to a fixed point without reporting), and `experiment`
//! blocks.

use super::abstract_value::{AbsArray, AbsValue, Dim};
use super::env::{Env, Snapshot};
use super::expr::{AssignedValue, Checker};
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{walk, Block, CtorKind, Expr, ExprKind, Ident, Program, Stmt, StmtKind};

/// Passes over a loop body, after the first iterations, before giving up on a
/// fixed point and forgetting what the body assigns.
const MAX_PASSES: usize = 4;

/// Which loop is being analysed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LoopKind {
    Repeat,
    Train,
    For,
}

/// Which iteration the body is analysed for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Iteration {
    First,
    Second,
    /// Any later one (the fixed point).
    Any,
}

/// What a loop analysis found.
struct LoopOutcome {
    /// The body's last value in the first and second iterations.
    first: AbsValue,
    second: Option<AbsValue>,
    /// The statement's value (the last iteration's last value).
    value: AbsValue,
}

impl Checker {
    /// Checks a whole program; `after` is called after each top-level statement
    /// with its index, the statement and the environment at that point.
    pub fn program(&mut self, program: &Program, mut after: impl FnMut(usize, &Stmt, &Env)) {
        // Every function may be called anywhere (a body may call one defined
        // after it); each definition's body is checked where it stands.
        for (name, def) in super::functions_of(program) {
            self.fns.insert(name, std::rc::Rc::new(def.clone()));
        }
        for (i, s) in program.stmts.iter().enumerate() {
            self.stmt(s);
            after(i, s, &self.env);
        }
    }

    /// The value of each top-level assignment right after it.
    pub fn assignments(&mut self, program: &Program) -> Vec<AssignedValue> {
        let mut out = Vec::new();
        self.program(program, |i, s, env| {
            if let StmtKind::Assign { name, .. } | StmtKind::Annotated { name, .. } = &s.kind {
                if let Some(b) = env.get(&name.name) {
                    out.push(AssignedValue {
                        stmt: i,
                        name: name.name.clone(),
                        span: s.span,
                        value: b.value.clone(),
                    });
                }
            }
        });
        out
    }

    /// The statements of a block; the value is the last one's (exact 0 if empty).
    pub fn block(&mut self, stmts: &[Stmt]) -> AbsValue {
        let mut last = None;
        for s in stmts {
            last = Some(self.stmt(s));
        }
        last.unwrap_or_else(|| AbsValue::scalar(0.0))
    }

    /// One statement; returns its value (LANGUAGE §6.1).
    pub fn stmt(&mut self, s: &Stmt) -> AbsValue {
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assign { name, value } => {
                let v = self.expr(value);
                self.env.assign(&name.name, v.clone(), is_param_ctor(value));
                assignment_value(v)
            }
            StmtKind::Annotated { name, axes, value } => self.annotated(name, axes, value),
            StmtKind::Repeat { count, body } => {
                let n = self.loop_count(count);
                self.run_loop(LoopKind::Repeat, body, n, &[], |_, _| {})
                    .value
            }
            StmtKind::Train { count, body } => self.train(count, body),
            StmtKind::For { var, iter, body } => self.for_loop(var, iter, body),
            StmtKind::Experiment { name, body } => {
                match self.expr(name) {
                    AbsValue::Str(_) | AbsValue::Unknown => {}
                    other => {
                        let kind = other.kind_name().unwrap_or("value");
                        self.report(
                            Diagnostic::of(code::E0302)
                                .at(name.span, format!("this is a {kind}"))
                                .note("an experiment's name is a string"),
                        );
                    }
                }
                self.block(&body.stmts)
            }
            StmtKind::Fn(def) => self.define(def),
            StmtKind::Error => AbsValue::Unknown,
        }
    }

    fn annotated(&mut self, name: &Ident, axes: &[Ident], value: &Expr) -> AbsValue {
        let v = self.expr(value);
        let mut a = match v {
            AbsValue::Array(a) => a,
            AbsValue::Unknown => AbsArray::unknown(),
            other => {
                let kind = other.kind_name().unwrap_or("value");
                self.report(
                    Diagnostic::of(code::E0301)
                        .at(value.span, format!("this is a {kind}"))
                        .note("an axis annotation names the axes of an array"),
                );
                self.env.assign(&name.name, AbsValue::Unknown, false);
                return AbsValue::Unknown;
            }
        };
        let names: Vec<Option<String>> = axes.iter().map(|i| Some(i.name.clone())).collect();
        match a.rank() {
            Some(r) if r != names.len() => {
                self.report(crate::errors::label_count_error(
                    value.span,
                    names.len(),
                    &a.shape_text(),
                    r,
                ));
                self.env.assign(&name.name, AbsValue::Unknown, false);
                return AbsValue::Unknown;
            }
            Some(_) => {}
            // The annotation fixes the rank (otherwise the run stops here).
            None => {
                a.dims = Some(vec![Dim::Unknown; names.len()]);
                a.constant = None;
            }
        }
        if let Some(n) = crate::errors::first_duplicate(&names) {
            self.report(crate::errors::duplicate_name_warning(value.span, n));
        }
        let mut a = a.with_names(Some(names));
        let last = axes.last().map_or(name.span, |i| i.span);
        a.origin = Some(name.span.to(last));
        let v = AbsValue::Array(a);
        self.env.assign(&name.name, v.clone(), is_param_ctor(value));
        v
    }

    /// A loop count (LANGUAGE §6.3): E0301, E0205, W0202, W0203 as at run time;
    /// the count when it is a constant.
    fn loop_count(&mut self, count: &Expr) -> Option<usize> {
        let v = self.expr(count);
        let a = self.expect_array(&v, count.span, "a loop count")?;
        match a.rank() {
            Some(0) => {}
            Some(_) => {
                self.report(
                    Diagnostic::of(code::E0205)
                        .at(count.span, format!("has shape {}", a.shape_text()))
                        .note("a loop count must be a scalar"),
                );
                return None;
            }
            None => return None,
        }
        let n = a.scalar_value()?;
        if n.is_nan() {
            return Some(0);
        }
        if n.fract() != 0.0 && n.is_finite() {
            self.report(
                Diagnostic::of(code::W0202)
                    .at(count.span, format!("runs {} times", n.trunc().max(0.0))),
            );
        }
        if n < 0.0 {
            self.report(Diagnostic::of(code::W0203).at(count.span, "the loop runs zero times"));
            return Some(0);
        }
        Some(n.trunc().min(usize::MAX as f64) as usize)
    }

    fn train(&mut self, count: &Expr, body: &Block) -> AbsValue {
        let n = self.loop_count(count);
        if let Some(last) = body.stmts.last() {
            if let StmtKind::Expr(e) = &last.kind {
                if let ExprKind::Call { name, .. } = &e.unparen().kind {
                    if crate::builtins::has_fact(&name.name, |f| f.optimizer) {
                        self.report(
                            Diagnostic::of(code::W0104)
                                .at(last.span, "the recorded loss will be 0")
                                .help("end the body with the loss, for example `adam(loss, m, ...); loss_metric = loss`"),
                        );
                    }
                }
            }
        }
        let extra = ["step".to_string(), "last_losses".to_string()];
        let outcome = self.run_loop(LoopKind::Train, body, n, &extra, |c, it| {
            // From the second iteration on, `step` is any scalar: the analysis of
            // the second iteration then usually is the fixed point already.
            let step = match it {
                Iteration::First => AbsValue::scalar(0.0),
                Iteration::Second | Iteration::Any => AbsValue::any_scalar(),
            };
            c.env.assign("step", step, false);
        });
        if outcome.first.provably_not_array() {
            let kind = outcome.first.kind_name().unwrap_or("value");
            self.report(
                Diagnostic::of(code::E0307)
                    .at(last_stmt_span(body), format!("this is a {kind}"))
                    .note("the last statement of a `train` body is the iteration's loss"),
            );
        }
        match n {
            Some(0) => {}
            Some(k) => self
                .env
                .assign("step", AbsValue::scalar((k - 1) as f64), false),
            None => {
                let step = self.env.get("step").map(|b| b.value.clone());
                let v = step.map_or(AbsValue::Unknown, |s| s.join(&AbsValue::any_scalar()));
                self.env.assign("step", v, false);
            }
        }
        let len = n.map_or(Dim::Unknown, Dim::Known);
        self.env.assign(
            "last_losses",
            AbsValue::Array(AbsArray::of_dims(vec![len])),
            false,
        );
        outcome.value
    }

    fn for_loop(&mut self, var: &Ident, iter: &Expr, body: &Block) -> AbsValue {
        let v = self.expr(iter);
        let Some(a) = self.expect_array(&v, iter.span, "`for`") else {
            return AbsValue::Unknown;
        };
        let rows =
            match &a.dims {
                Some(d) if d.is_empty() => {
                    self.report(Diagnostic::of(code::E0205).at(iter.span, "a scalar").note(
                        "`for` iterates over the rows (axis 0) of an array of rank 1 or more",
                    ));
                    return AbsValue::Unknown;
                }
                Some(d) => d[0].known(),
                None => None,
            };
        let row = |r: Option<usize>| -> AbsValue {
            let Some(dims) = &a.dims else {
                return AbsValue::any_array();
            };
            let mut out = AbsArray::of_dims(dims[1..].to_vec());
            out.names = a.names.get(1..).map(|n| n.to_vec()).unwrap_or_default();
            out.origin = a.origin;
            out.placed = a.placed;
            let size = out.numel();
            if let (Some(r), Some(c), Some(size)) = (r, &a.constant, size) {
                let rows = r.checked_mul(size).zip((r + 1).checked_mul(size));
                if let Some(slice) = rows.and_then(|(from, to)| c.get(from..to)) {
                    out = out.with_constant(Some(slice.to_vec()));
                }
            }
            AbsValue::Array(out)
        };
        let extra = [var.name.clone(), "last_rows".to_string()];
        let outcome = self.run_loop(LoopKind::For, body, rows, &extra, |c, it| {
            let r = match it {
                Iteration::First => Some(0),
                Iteration::Second => Some(1),
                Iteration::Any => None,
            };
            c.env.assign(&var.name, row(r), false);
        });
        let span = last_stmt_span(body);
        if outcome.first.provably_not_array() {
            let kind = outcome.first.kind_name().unwrap_or("value");
            self.report(
                Diagnostic::of(code::E0307)
                    .at(span, format!("this is a {kind}"))
                    .note("each iteration of `for` must end with an array; they are stacked into `last_rows`"),
            );
        }
        if let (AbsValue::Array(f), Some(AbsValue::Array(s))) = (&outcome.first, &outcome.second) {
            if let (Some(x), Some(y)) = (f.known_shape(), s.known_shape()) {
                if x != y {
                    self.report(
                        Diagnostic::of(code::E0215)
                            .at(
                                span,
                                format!("iteration 1 ends with shape {}", s.shape_text()),
                            )
                            .note(format!(
                                "the first iteration ended with shape {}",
                                f.clone().unnamed().shape_text()
                            )),
                    );
                }
            }
        }
        // After the loop: the variable holds the last row, `last_rows` the stack.
        match rows {
            Some(0) => {}
            Some(k) => self.env.assign(&var.name, row(Some(k - 1)), false),
            None => {
                let old = self.env.get(&var.name).map(|b| b.value.clone());
                let v = old.map_or(AbsValue::Unknown, |o| o.join(&row(None)));
                self.env.assign(&var.name, v, false);
            }
        }
        let stacked = match (rows, &outcome.value) {
            (Some(0), _) => AbsArray::of_shape(&[0]),
            (Some(k), AbsValue::Array(last)) => match &last.dims {
                Some(d) => {
                    let mut dims = vec![Dim::Known(k)];
                    dims.extend(d.iter().cloned());
                    AbsArray::of_dims(dims)
                }
                None => AbsArray::unknown(),
            },
            _ => AbsArray::unknown(),
        };
        self.env
            .assign("last_rows", AbsValue::Array(stacked), false);
        outcome.value
    }

    /// Analyses a loop body run `n` times (`None`: not known): the first iteration
    /// (and the second when `n` ≥ 2 is known) exactly, with diagnostics; then later
    /// iterations to a fixed point without them. Leaves the environment as it is
    /// after the loop. `setup` binds the loop's own variables for an iteration.
    fn run_loop(
        &mut self,
        kind: LoopKind,
        body: &Block,
        n: Option<usize>,
        extra: &[String],
        mut setup: impl FnMut(&mut Checker, Iteration),
    ) -> LoopOutcome {
        let zero = AbsValue::scalar(0.0);
        if n == Some(0) {
            return LoopOutcome {
                first: zero.clone(),
                second: None,
                value: zero,
            };
        }
        let key = (body.span.start, body.span.end);
        let names = match self.loop_names.get(&key) {
            Some(n) => n.clone(),
            None => {
                let mut names: Vec<String> = extra.to_vec();
                assigned_in_block(&body.stmts, &mut names);
                names.sort();
                names.dedup();
                let names = std::rc::Rc::new(names);
                self.loop_names.insert(key, names.clone());
                names
            }
        };
        let before = self.env.snapshot(&names);
        self.loop_depth += 1;
        match kind {
            LoopKind::Train => self.train_depth += 1,
            _ => self.plain_loop_depth += 1,
        }
        setup(self, Iteration::First);
        let first = self.block(&body.stmts);
        let after1 = self.env.snapshot(&names);
        let mut second = None;
        let mut acc = after1.clone();
        let mut value = first.clone();
        let mut entry2 = None;
        if n.is_some_and(|n| n >= 2) {
            setup(self, Iteration::Second);
            entry2 = Some(self.env.snapshot(&names));
            let v2 = self.block(&body.stmts);
            let after2 = self.env.snapshot(&names);
            if let Some(n) = n.filter(|&n| n > 2) {
                self.unroll_growing_models(body, n, &names, &after1, &after2, &mut setup);
            }
            acc = Env::join_snapshots(&acc, &after2);
            value = value.join(&v2);
            if n == Some(2) {
                acc = after2;
                value = v2.clone();
            }
            second = Some(v2);
        }
        if n.is_none_or(|n| n > 2) {
            let saved = self.report;
            self.report = false;
            let mut converged = false;
            if let Some(entry2) = &entry2 {
                // When later iterations start from what the second one started
                // from, they end as it did: the fixed point is reached.
                self.env.restore(&acc);
                setup(self, Iteration::Any);
                converged = self.env.snapshot(&names) == *entry2;
            }
            for _ in 0..MAX_PASSES {
                if converged {
                    break;
                }
                self.env.restore(&acc);
                setup(self, Iteration::Any);
                let v = self.block(&body.stmts);
                let after = self.env.snapshot(&names);
                let next = Env::join_snapshots(&acc, &after);
                let next_value = value.join(&v);
                if next == acc && next_value == value {
                    converged = true;
                    break;
                }
                acc = next;
                value = next_value;
            }
            if !converged {
                acc = forget(&acc);
                value = AbsValue::Unknown;
            }
            self.report = saved;
        }
        let after: Snapshot = if n.is_none() {
            value = value.join(&zero);
            Env::join_snapshots(&before, &acc)
        } else {
            acc
        };
        self.env.restore(&after);
        self.loop_depth -= 1;
        match kind {
            LoopKind::Train => self.train_depth -= 1,
            _ => self.plain_loop_depth -= 1,
        }
        LoopOutcome {
            first,
            second,
            value,
        }
    }
}

/// Iterations of a loop [`Checker::unroll_growing_models`] checks one by one
/// at most (the depth limit is passed after 512 when the depth grows by one
/// each iteration).
const MAX_UNROLL: usize = 1024;

impl Checker {
    /// E0411 for a model that a loop of known count `n` grows past the model
    /// limits (`repeat 100000 { m = residual(m) }`): when a model the body
    /// assigns grew from the first iteration to the second, the later
    /// iterations are checked one by one while it keeps growing (at most
    /// [`MAX_UNROLL`]), and only their E0411 is reported. The environment is
    /// left as the second iteration left it.
    fn unroll_growing_models(
        &mut self,
        body: &Block,
        n: usize,
        names: &[String],
        after1: &Snapshot,
        after2: &Snapshot,
        setup: &mut impl FnMut(&mut Checker, Iteration),
    ) {
        if !self.report || !models_grow(after1, after2) {
            return;
        }
        let mark = self.out.len();
        let mut prev = after2.clone();
        for _ in 2..n.min(MAX_UNROLL) {
            setup(self, Iteration::Any);
            self.block(&body.stmts);
            let now = self.env.snapshot(names);
            let refused = self.out[mark..].iter().any(|d| d.code == code::E0411);
            if refused || !models_grow(&prev, &now) {
                break;
            }
            prev = now;
        }
        let found: Vec<Diagnostic> = self.out.drain(mark..).collect();
        for d in found {
            if d.code == code::E0411 {
                self.out.push(d);
            } else if let Some(l) = &d.primary {
                self.seen.remove(&(d.code, l.span.start, l.span.end));
            }
        }
        self.env.restore(after2);
    }
}

/// Whether a model bound in both snapshots is deeper or runs more layers in
/// `b` than in `a`.
fn models_grow(a: &Snapshot, b: &Snapshot) -> bool {
    let model = |s: &Snapshot, name: &str| {
        s.iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, b)| match b {
                Some(super::env::Binding {
                    value: AbsValue::Model(Some(m)),
                    ..
                }) => Some(m.0.extent()),
                _ => None,
            })
    };
    b.iter()
        .any(|(name, _)| match (model(a, name), model(b, name)) {
            (Some(x), Some(y)) => y.depth > x.depth || y.layers > x.layers,
            _ => false,
        })
}

/// The snapshot with every value unknown (a loop that did not settle).
fn forget(s: &Snapshot) -> Snapshot {
    s.iter()
        .map(|(n, b)| {
            (
                n.clone(),
                b.as_ref().map(|b| super::env::Binding {
                    value: AbsValue::Unknown,
                    tracked: b.tracked.join(super::env::Tri::No),
                }),
            )
        })
        .collect()
}

/// An assignment statement's value (LANGUAGE §5.7).
fn assignment_value(v: AbsValue) -> AbsValue {
    match v {
        AbsValue::Array(_) | AbsValue::Unknown => v,
        _ => AbsValue::scalar(0.0),
    }
}

/// Whether `e` is syntactically `param[...]`.
pub fn is_param_ctor(e: &Expr) -> bool {
    matches!(
        e.unparen().kind,
        ExprKind::Ctor {
            kind: CtorKind::Param,
            ..
        }
    )
}

fn last_stmt_span(body: &Block) -> Span {
    body.stmts.last().map_or(body.span, |s| s.span)
}

/// Every variable a block may bind: assignments, loop variables and the names
/// loops bind implicitly, variables re-bound by `to_device`, at any depth
/// (including `device` blocks inside expressions).
pub fn assigned_in_block(stmts: &[Stmt], out: &mut Vec<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Expr(e) => assigned_in_expr(e, out),
            StmtKind::Assign { name, value } | StmtKind::Annotated { name, value, .. } => {
                out.push(name.name.clone());
                assigned_in_expr(value, out);
            }
            StmtKind::Repeat { count, body } => {
                assigned_in_expr(count, out);
                assigned_in_block(&body.stmts, out);
            }
            StmtKind::Train { count, body } => {
                assigned_in_expr(count, out);
                out.push("step".into());
                out.push("last_losses".into());
                assigned_in_block(&body.stmts, out);
            }
            StmtKind::For { var, iter, body } => {
                assigned_in_expr(iter, out);
                out.push(var.name.clone());
                out.push("last_rows".into());
                assigned_in_block(&body.stmts, out);
            }
            StmtKind::Experiment { name, body } => {
                assigned_in_expr(name, out);
                assigned_in_block(&body.stmts, out);
            }
            // A function's body binds only its own variables.
            StmtKind::Fn(_) | StmtKind::Error => {}
        }
    }
}

fn assigned_in_expr(e: &Expr, out: &mut Vec<String>) {
    if let ExprKind::Call { name, args } = &e.kind {
        if name.name == "to_device" {
            for a in args {
                if let ExprKind::Var(v) = &a.unparen().kind {
                    out.push(v.clone());
                }
            }
        }
        // Optimizers update the parameters they list in place.
        if crate::builtins::has_fact(&name.name, |f| f.optimizer) {
            if let Some(p) = args.get(1) {
                let items = match &p.unparen().kind {
                    ExprKind::List(items) => items.iter().collect(),
                    _ => vec![p],
                };
                for item in items {
                    if let ExprKind::Var(v) = &item.unparen().kind {
                        out.push(v.clone());
                    }
                }
            }
        }
    }
    walk::children(e).for_each(|c| assigned_in_expr(c, out));
    if let Some(body) = walk::device_body(e) {
        assigned_in_block(&body.stmts, out);
    }
}
