//! The interpreter: evaluates a parsed program in a [`Workspace`] (LANGUAGE §6).
//!
//! Statements run in order; a run stops at its first error, keeping what was done
//! before it. Every array operation goes through [`ops`], which applies the
//! named-axis rules and dispatches to a device backend.

mod call;
pub mod capture;
mod device;
mod functions;
pub mod http;
mod loops;
pub mod loss;
mod observer;
pub mod ops;
pub mod trace;
mod workspace;

pub use call::{Arg, ArgValue, Call};
pub use device::DeviceContext;
pub use functions::Frame;
pub use http::{HttpFailure, HttpPost, HttpReply};
pub use observer::{RunObserver, StepMode};
pub use trace::{Trace, TraceValue};
pub use workspace::{OptimState, Workspace};

use mlpl_diag::code;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::builtins::{self, Diff, ParamKind};
use crate::value::{Array, Value};
use mlpl_devices::UnaryOp;
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{BinOp, CtorKind, Expr, ExprKind, Link, Program, Stmt, StmtKind};

/// Receives warnings as they happen (the CLI prints them, a session streams them).
pub type WarningSink = Box<dyn FnMut(&Diagnostic) + Send>;

/// An interpreter with its workspace; it lives as long as a CLI run or a session.
pub struct Interp {
    /// Bindings and persistent state.
    pub ws: Workspace,
    /// Set from another thread to cancel the current run (E0409).
    pub cancel: Arc<AtomicBool>,
    /// The device stack and backends.
    pub devices: DeviceContext,
    warned: HashSet<(&'static str, usize)>,
    warnings: Vec<Diagnostic>,
    on_warning: Option<WarningSink>,
    /// Depth of `train` bodies being evaluated (training mode when > 0).
    pub(crate) train_depth: usize,
    /// The tape recorded while a loss is evaluated (LANGUAGE §12.2).
    pub(crate) tape: Option<loss::LossTape>,
    pub(crate) next_tape_id: u64,
    /// The load-balancing loss of the latest application of each `moe` layer, by
    /// layer id (LANGUAGE §12.7); it stays on the tape when read in the same loss.
    pub(crate) moe_aux: HashMap<u64, Array>,
    /// Told about runs and `train` steps (sessions, progress bars).
    observer: Option<Box<dyn RunObserver>>,
    /// The learning rate last reported by an optimizer in this `train` iteration.
    reported_lr: Option<f64>,
    /// Whether `train` loops capture their step and replay it (on by default;
    /// off, every iteration is interpreted).
    pub capture_steps: bool,
    /// How the outermost `train` loops of the last run went, in order.
    pub loop_stats: Vec<LoopStats>,
    /// The HTTP client `llm_call` posts through (LANGUAGE §16.5); `None` (the
    /// default, and in the browser) makes every `llm_call` E0408.
    pub http: Option<Arc<dyn HttpPost>>,
    /// The evaluation trace being recorded (LANGUAGE §19), when tracing; while
    /// it is `Some`, `train` loops interpret every iteration.
    pub trace: Option<Trace>,
    /// The inputs of the node being traced, set just before it returns.
    trace_inputs: Vec<TraceValue>,
    /// The calls of user functions being run, innermost last.
    pub(crate) frames: Vec<Frame>,
    /// The functions defined by the program being run (the others came from
    /// earlier cells or a restore, and their spans are not this program's).
    pub(crate) defined_this_run: HashSet<String>,
}

/// How one outermost `train` loop ran: its iterations, how many were replayed
/// from the captured step, and where the time went (`mlpl run --profile`).
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    /// The loop's body.
    pub span: Span,
    /// Iterations that ran.
    pub iterations: usize,
    /// Of these, the ones replayed from the captured step.
    pub replayed: u64,
    /// Why the loop was not captured, when it was not.
    pub eager_reason: Option<String>,
    /// How replays ran (`"arena"` or `"calls"`), when there were any.
    pub replay_kind: Option<&'static str>,
    /// Wall time of the whole loop.
    pub wall: std::time::Duration,
    /// Wall time of the replayed iterations.
    pub replay_wall: std::time::Duration,
    /// Time inside kernel calls during the replayed iterations.
    pub replay_kernels: std::time::Duration,
    /// The median wall time of one replayed iteration.
    pub replay_median: Option<std::time::Duration>,
    /// The memory the captured step's arena holds (owned buffers and inputs
    /// read in place), when it was compiled to one.
    pub arena_bytes: Option<mlpl_devices::capture::ArenaBytes>,
    /// The eager step's live peak, from the second recorded iteration: the
    /// most bytes of kernel-visible tensors alive at once.
    pub eager_live_peak: Option<u64>,
}

impl Default for Interp {
    fn default() -> Self {
        Interp::new(Workspace::new())
    }
}

impl Interp {
    /// An interpreter over a workspace.
    pub fn new(ws: Workspace) -> Interp {
        Interp {
            ws,
            cancel: Arc::new(AtomicBool::new(false)),
            devices: DeviceContext::new(),
            warned: HashSet::new(),
            warnings: Vec::new(),
            on_warning: None,
            train_depth: 0,
            moe_aux: HashMap::new(),
            tape: None,
            next_tape_id: 0,
            observer: None,
            reported_lr: None,
            capture_steps: true,
            loop_stats: Vec::new(),
            http: None,
            trace: None,
            trace_inputs: Vec::new(),
            frames: Vec::new(),
            defined_this_run: HashSet::new(),
        }
    }

    /// Routes warnings to `sink` as they are emitted (instead of collecting them).
    pub fn set_warning_sink(&mut self, sink: WarningSink) {
        self.on_warning = Some(sink);
    }

    /// Installs an observer told about runs and `train` loop steps (replacing any).
    pub fn set_observer(&mut self, observer: Box<dyn RunObserver>) {
        self.observer = Some(observer);
    }

    /// Removes and returns the observer.
    pub fn take_observer(&mut self) -> Option<Box<dyn RunObserver>> {
        self.observer.take()
    }

    /// Forgets the state of a run that ended by a panic (no `train` loop or loss
    /// tape is active any more), so the next run of this interpreter starts clean.
    pub fn reset_after_panic(&mut self) {
        self.train_depth = 0;
        self.tape = None;
        self.frames.clear();
    }

    /// The observer, if one is installed (used by `train` loops).
    pub(crate) fn observer_mut(&mut self) -> Option<&mut (dyn RunObserver + 'static)> {
        self.observer.as_deref_mut()
    }

    /// Records the learning rate an optimizer used, for the current `train`
    /// iteration's `step` event (optimizers may call it; otherwise a scalar
    /// variable `lr` is reported).
    pub fn report_lr(&mut self, lr: f64) {
        self.reported_lr = Some(lr);
    }

    /// The learning rate to report for the iteration that just ended (taken, so
    /// each iteration reports its own).
    pub(crate) fn take_reported_lr(&mut self) -> Option<f64> {
        let lr = self.peek_reported_lr();
        self.reported_lr = None;
        lr
    }

    /// The learning rate to report for the iteration that just ended, without
    /// taking it.
    pub(crate) fn peek_reported_lr(&self) -> Option<f64> {
        self.reported_lr.or_else(|| {
            self.ws
                .get("lr")
                .and_then(Value::as_array)
                .and_then(Array::scalar_value)
        })
    }

    /// Warnings collected since the last call (when no sink is set).
    pub fn take_warnings(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.warnings)
    }

    /// Runs a program (a file or a cell): its value is its last statement's value,
    /// `None` for an empty program. Per-run state (warning de-duplication, the
    /// device stack) is reset first.
    pub fn run(&mut self, program: &Program) -> Result<Option<Value>, Diagnostic> {
        self.warned.clear();
        self.loop_stats.clear();
        self.devices.begin_run(self.ws.default_device);
        self.frames.clear();
        self.defined_this_run.clear();
        self.cancel.store(false, Ordering::SeqCst);
        if let Some(o) = &mut self.observer {
            o.on_run_start();
        }
        let mut last = None;
        ops::note_live(&self.ws);
        for stmt in &program.stmts {
            if let Some(o) = &mut self.observer {
                o.on_statement_start(stmt.span);
            }
            let v = self.stmt(stmt);
            ops::note_live(&self.ws);
            if let Some(o) = &mut self.observer {
                o.on_statement_end(stmt.span, v.is_ok());
            }
            last = Some(v?);
        }
        Ok(last)
    }

    /// Emits a warning once per (code, location) per run (LANGUAGE §20.1).
    pub fn warn(&mut self, d: Diagnostic) {
        let at = d.primary.as_ref().map_or(usize::MAX, |l| l.span.start);
        if !self.warned.insert((d.code, at)) {
            return;
        }
        match &mut self.on_warning {
            Some(sink) => sink(&d),
            None => self.warnings.push(d),
        }
    }

    /// Fails with E0409 if the run was cancelled.
    pub fn check_cancel(&self, span: Span) -> Result<(), Diagnostic> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(Diagnostic::of(code::E0409).at(span, "cancelled here"))
        } else {
            Ok(())
        }
    }

    /// Evaluates one statement and returns its value (LANGUAGE §6.1).
    pub fn stmt(&mut self, stmt: &Stmt) -> Result<Value, Diagnostic> {
        if self.trace.is_none() {
            return self.stmt_node(stmt);
        }
        let v = self.stmt_node(stmt);
        let inputs = std::mem::take(&mut self.trace_inputs);
        let v = v?;
        let assigned = match &stmt.kind {
            StmtKind::Assign { name, .. } | StmtKind::Annotated { name, .. } => {
                self.ws.get(&name.name)
            }
            _ => None,
        };
        if let Some(op) = stmt_op(stmt, assigned) {
            if let Some(t) = &mut self.trace {
                t.push(op, stmt.span, inputs, &v);
            }
        }
        Ok(v)
    }

    /// Records the inputs of the node now being evaluated, when tracing.
    fn trace_inputs_of<'v>(&mut self, values: impl IntoIterator<Item = &'v Value>) {
        if self.trace.is_some() {
            self.trace_inputs = values.into_iter().map(TraceValue::of).collect();
        }
    }

    fn stmt_node(&mut self, stmt: &Stmt) -> Result<Value, Diagnostic> {
        self.check_cancel(stmt.span)?;
        match &stmt.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assign { name, value } => {
                let v = self.expr(value)?;
                if matches!(v, Value::Array(_)) {
                    self.trace_inputs_of([&v]);
                }
                let track = is_param_ctor(value);
                self.bind(&name.name, v.clone(), track);
                Ok(assignment_value(v))
            }
            StmtKind::Annotated { name, axes, value } => {
                let v = self.expr(value)?;
                let Value::Array(a) = v else {
                    return Err(Diagnostic::of(code::E0301)
                        .at(value.span, format!("this is a {}", v.kind_name()))
                        .note("an axis annotation names the axes of an array"));
                };
                let names: Vec<Option<String>> =
                    axes.iter().map(|i| Some(i.name.clone())).collect();
                let a = ops::label(self, a, names, value.span)?;
                let v = Value::Array(a);
                self.trace_inputs_of([&v]);
                self.bind(&name.name, v.clone(), is_param_ctor(value));
                Ok(assignment_value(v))
            }
            StmtKind::Repeat { count, body } => loops::repeat(self, count, body),
            StmtKind::Train { count, body } => loops::train(self, count, body),
            StmtKind::For { var, iter, body } => loops::for_loop(self, var, iter, body),
            StmtKind::Experiment { name, body } => loops::experiment(self, name, body, stmt.span),
            StmtKind::Fn(def) => self.define(def),
            StmtKind::Error => Err(Diagnostic::error(
                code::E0006,
                "this statement could not be parsed",
            )
            .at(stmt.span, "")),
        }
    }

    /// Evaluates a block's statements; the value is the last one's (exact 0 if empty).
    pub fn block(&mut self, stmts: &[Stmt]) -> Result<Value, Diagnostic> {
        let mut last = Value::exact(0.0);
        for s in stmts {
            last = self.stmt(s)?;
        }
        Ok(last)
    }

    /// Evaluates an expression.
    pub fn expr(&mut self, e: &Expr) -> Result<Value, Diagnostic> {
        if self.trace.is_none() {
            return self.expr_node(e);
        }
        let v = self.expr_node(e);
        let inputs = std::mem::take(&mut self.trace_inputs);
        let v = v?;
        if let Some(op) = expr_op(e) {
            if let Some(t) = &mut self.trace {
                t.push(op, e.span, inputs, &v);
            }
        }
        Ok(v)
    }

    fn expr_node(&mut self, e: &Expr) -> Result<Value, Diagnostic> {
        match &e.kind {
            ExprKind::Number(v) => Ok(Value::exact(*v)),
            ExprKind::Str(s) => Ok(Value::string(s.as_str())),
            ExprKind::Var(name) => self.var(name, e.span),
            ExprKind::Paren(inner) => self.expr(inner),
            ExprKind::Neg(inner) => {
                let v = self.expr(inner)?;
                self.trace_inputs_of([&v]);
                let a = expect_array(&v, inner.span, "unary `-`")?;
                Ok(Value::Array(ops::unary(self, UnaryOp::Neg, a, e.span)?))
            }
            ExprKind::Chain { first, links } => self.chain(first, links),
            ExprKind::List(items) => self.list(items, e.span),
            ExprKind::Ctor { kind, dims } => self.ctor(*kind, dims, e.span),
            ExprKind::Call { name, args } => self.call(&name.name, name.span, args, e.span),
            ExprKind::Device { target, body } => device::device_block(self, target, body, e.span),
            ExprKind::Error => Err(Diagnostic::error(
                code::E0006,
                "this expression could not be parsed",
            )
            .at(e.span, "")),
        }
    }

    /// A chain of operators, applied left to right in a loop (a chain of any
    /// length takes no stack of its own). Each link is a trace node (LANGUAGE
    /// §19) as if the chain were nested binary nodes: the last is the chain's
    /// own, pushed by [`Self::expr`], the others are pushed here.
    fn chain(&mut self, first: &Expr, links: &[Link]) -> Result<Value, Diagnostic> {
        let mut acc = self.expr(first)?;
        let prefixes = Expr::chain_prefixes(first, links);
        let mut left_span = first.span;
        for (i, (l, span)) in links.iter().zip(prefixes).enumerate() {
            self.check_cancel(l.op_span)?;
            let r = self.expr(&l.rhs)?;
            self.trace_inputs_of([&acc, &r]);
            let symbol = l.op.symbol();
            let la = expect_array(&acc, left_span, symbol)?;
            let ra = expect_array(&r, l.rhs.span, symbol)?;
            let placeholder;
            let left_expr = if i == 0 {
                first
            } else {
                placeholder = Expr::placeholder(left_span);
                &placeholder
            };
            let operands = ops::Operands {
                left: la,
                left_expr,
                right: ra,
                right_expr: &l.rhs,
            };
            let v = Value::Array(ops::binary(
                self,
                builtins::operator_op(l.op),
                symbol,
                &operands,
                l.op_span,
            )?);
            if i + 1 < links.len() {
                let inputs = std::mem::take(&mut self.trace_inputs);
                if let Some(t) = &mut self.trace {
                    t.push(binop_trace_op(l.op), span, inputs, &v);
                }
            }
            acc = v;
            left_span = span;
        }
        Ok(acc)
    }

    fn var(&mut self, name: &str, span: Span) -> Result<Value, Diagnostic> {
        if let Some(frame) = self.frames.last() {
            // Inside a function: its locals only. Values passed in keep their
            // tape nodes, so no name becomes a new leaf here.
            if let Some(v) = frame.locals.get(name) {
                return Ok(v.clone());
            }
            if self.ws.get(name).is_some() {
                return Err(crate::errors::signature::not_visible_error(
                    &frame.def, name, span,
                ));
            }
            let mut d = Diagnostic::error(code::E0101, format!("undefined name `{name}`"))
                .at(span, "not bound");
            let known = frame.locals.keys().map(|s| s.as_str());
            if let Some(s) = crate::errors::suggest::closest(name, known) {
                d = d.help(format!("a variable with a similar name exists: `{s}`"));
            }
            return Err(d);
        }
        match self.ws.get(name) {
            Some(v) => Ok(loss::read_variable(self, name, v.clone())),
            None => {
                let known = self.ws.bindings.keys().map(|s| s.as_str());
                let mut d = crate::errors::undefined_name(name, span, "not bound", known);
                if name == "step" {
                    d = d.note("`step` is bound by `train` loops");
                }
                Err(d)
            }
        }
    }

    fn list(&mut self, items: &[Expr], span: Span) -> Result<Value, Diagnostic> {
        let mut arrays = Vec::with_capacity(items.len());
        for item in items {
            match self.expr(item)? {
                Value::Array(a) => arrays.push((a, item.span)),
                Value::Str(_) => {
                    return Err(Diagnostic::of(code::E0305)
                        .at(item.span, "a string")
                        .note("arrays hold numbers; a list of strings is only accepted as axis names")
                        .help("pass names to `label`, `relabel` or `reshape_labeled`, or write them as one string: \"a,b\""))
                }
                other => {
                    return Err(Diagnostic::of(code::E0301)
                        .at(item.span, format!("this is a {}", other.kind_name())))
                }
            }
        }
        Ok(Value::Array(ops::stack(self, &arrays, span)?))
    }

    fn ctor(&mut self, kind: CtorKind, dims: &[Expr], span: Span) -> Result<Value, Diagnostic> {
        let mut shape = Vec::with_capacity(dims.len());
        for d in dims {
            let v = self.expr(d)?;
            let n = v.as_array().and_then(|a| a.scalar_value());
            match n {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= usize::MAX as f64 => shape.push(n as usize),
                _ => {
                    return Err(Diagnostic::of(code::E0213)
                        .at(d.span, "expected a non-negative integer scalar")
                        .note("each dimension of `param[...]` and `tensor[...]` must be a non-negative integer"))
                }
            }
        }
        let what = match kind {
            CtorKind::Param => "param",
            CtorKind::Tensor => "tensor",
        };
        ops::check_size(what, &shape, span)?;
        Ok(Value::Array(ops::zeros(self, shape, span)?))
    }

    fn call(
        &mut self,
        name: &str,
        name_span: Span,
        args: &[Expr],
        span: Span,
    ) -> Result<Value, Diagnostic> {
        let Some(b) = builtins::lookup(name) else {
            if let Some(def) = self.ws.functions.get(name).cloned() {
                return self.call_fn(def, name_span, args, span);
            }
            return Err(builtins::unknown_function(
                name,
                name_span,
                self.ws.functions.keys().map(String::as_str),
            ));
        };
        if let Some(def) = self.current_fn() {
            if b.params.iter().any(|p| p.kind == ParamKind::Lazy) {
                return Err(crate::errors::signature::by_name_builtin_in_fn(
                    def, name, name_span,
                ));
            }
        }
        let n = args.len();
        if n < b.min_args() || n > b.max_args() {
            return Err(Diagnostic::of(code::E0103)
                .at(
                    span,
                    format!("{n} argument{} given", if n == 1 { "" } else { "s" }),
                )
                .note(format!("{}, got {n}", b.arity_text()))
                .help(format!("the accepted form is `{}`", b.signature())));
        }
        let in_loss = self.tape.is_some();
        if in_loss && b.diff == Diff::Effect && !b.facts.allowed_in_loss {
            return Err(Diagnostic::of(code::E0306)
                .at(name_span, format!("`{name}` cannot be part of a loss"))
                .note(format!("`{name}` has side effects or does not return an array, so it cannot be differentiated"))
                .help("compute it before the optimizer call and use the result as a constant"));
        }
        let mut evaluated = Vec::with_capacity(n);
        for (arg, param) in args.iter().zip((0..).map_while(|i| b.param_at(i))) {
            let value = match param.kind {
                ParamKind::Names => call::eval_names(self, arg)?,
                ParamKind::Lazy => ArgValue::Lazy,
                _ => ArgValue::Value(self.expr(arg)?),
            };
            evaluated.push(Arg {
                value,
                span: arg.span,
                expr: arg,
            });
        }
        self.check_cancel(span)?;
        let mut any_live = false;
        if in_loss {
            for (arg, param) in evaluated.iter_mut().zip((0..).map_while(|i| b.param_at(i))) {
                let ArgValue::Value(Value::Array(a)) = &arg.value else {
                    continue;
                };
                if loss::live(self, a).is_none() {
                    continue;
                }
                match b.diff {
                    Diff::Yes => any_live = true,
                    // Piecewise-constant builtins see constants: no gradient flows.
                    Diff::Zero | Diff::Effect => {
                        arg.value = ArgValue::Value(Value::Array(a.clone().detached()))
                    }
                    Diff::No => {
                        return Err(Diagnostic::of(code::E0306)
                            .at(arg.span, format!("argument `{}` depends on a trainable parameter", param.name))
                            .note(format!("`{name}` is not differentiable; inside a loss it may only be applied to values that do not depend on parameters"))
                            .help("compute it outside the loss, or on data rather than on parameters"));
                    }
                }
            }
        }
        call::check_placements(name, &evaluated)?;
        let mut c = Call {
            it: self,
            builtin: b,
            span,
            name_span,
            args: evaluated,
        };
        // A failing builtin ends the run with a diagnostic; it never takes the
        // workspace (or a server holding it) down with it.
        let result =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (b.run)(&mut c))) {
                Ok(result) => result,
                Err(payload) => Err(internal_error(name, span, payload)),
            }?;
        let args = c.args;
        if self.trace.is_some() && trace::call_op(name) != "fncall" && name != "matmul" {
            // `grad` and the optimizers show no inputs, as in the original.
            self.trace_inputs.clear();
        } else if self.trace.is_some() {
            self.trace_inputs_of(args.iter().filter_map(|a| match &a.value {
                ArgValue::Value(v) => Some(v),
                _ => None,
            }));
        }
        // Safety net: a differentiable builtin must keep its result on the tape.
        if any_live {
            if let Value::Array(a) = &result {
                if loss::live(self, a).is_none() && !a.is_exact() {
                    return Err(Diagnostic::error(code::E0504, format!("internal failure in `{name}`"))
                        .at(span, "no gradient rule was recorded")
                        .note("this is a bug in MLPL Studio: the builtin is marked differentiable but dropped the gradient"));
                }
            }
        }
        Ok(result)
    }
}

/// The diagnostic for a builtin that panicked (a bug in MLPL Studio).
fn internal_error(name: &str, span: Span, payload: Box<dyn std::any::Any + Send>) -> Diagnostic {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown failure".to_string());
    Diagnostic::error(code::E0504, format!("internal failure in `{name}`"))
        .at(span, "this call failed inside MLPL Studio")
        .note(what)
        .note("this is a bug in MLPL Studio, not in your program; the workspace is intact")
}

/// The trace op of a binary operator (LANGUAGE §19).
fn binop_trace_op(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "add",
        BinOp::Sub => "sub",
        BinOp::Mul => "mul",
        BinOp::Div => "div",
    }
}

/// The trace op of an expression node (LANGUAGE §19); `None` for parentheses,
/// which are not a node of their own.
fn expr_op(e: &Expr) -> Option<&'static str> {
    Some(match &e.kind {
        ExprKind::Number(_) | ExprKind::Str(_) => "literal",
        ExprKind::Var(_) => "ident",
        ExprKind::Paren(_) | ExprKind::Error => return None,
        ExprKind::Neg(_) => "negate",
        // The last link's: the chain's value is its result.
        ExprKind::Chain { links, .. } => binop_trace_op(links.last()?.op),
        ExprKind::List(_) => "array_lit",
        ExprKind::Ctor { kind, .. } => match kind {
            CtorKind::Param => "param_ctor",
            CtorKind::Tensor => "tensor_ctor",
        },
        ExprKind::Call { name, .. } => trace::call_op(&name.name),
        ExprKind::Device { .. } => "device",
    })
}

/// The trace op of a statement (LANGUAGE §19), given the value an assignment
/// bound; `None` for an expression statement, whose expression is the node.
fn stmt_op(stmt: &Stmt, assigned: Option<&Value>) -> Option<&'static str> {
    Some(match &stmt.kind {
        // A definition evaluates nothing (functions are not in the original).
        StmtKind::Expr(_) | StmtKind::Error | StmtKind::Fn(_) => return None,
        StmtKind::Assign { .. } | StmtKind::Annotated { .. } => match assigned? {
            Value::Array(_) => "assign",
            Value::Str(_) => "assign_string",
            Value::Model(_) => "assign_model",
            Value::Tokenizer(_) => "assign_tokenizer",
        },
        StmtKind::Repeat { .. } => "repeat",
        StmtKind::Train { .. } => "train",
        StmtKind::For { .. } => "for",
        StmtKind::Experiment { .. } => "experiment",
    })
}

/// An assignment statement's value (LANGUAGE §5.7).
fn assignment_value(v: Value) -> Value {
    match v {
        Value::Array(_) => v,
        _ => Value::exact(0.0),
    }
}

/// Whether `e` is syntactically `param[...]`.
fn is_param_ctor(e: &Expr) -> bool {
    matches!(
        e.unparen().kind,
        ExprKind::Ctor {
            kind: CtorKind::Param,
            ..
        }
    )
}

/// The array inside `v`, or E0301 naming what was found.
pub fn expect_array<'v>(v: &'v Value, span: Span, what: &str) -> Result<&'v Array, Diagnostic> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(Diagnostic::of(code::E0301)
            .at(span, format!("this is a {}", other.kind_name()))
            .note(format!(
                "{what} works on arrays; no operator accepts a {}",
                other.kind_name()
            ))),
    }
}
