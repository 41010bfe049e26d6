//! Captured `train` steps (DESIGN §5, LANGUAGE §6.3): the first two iterations
//! of a `train` body run eagerly while their kernel calls are recorded; when
//! both did the same computation, later iterations replay it as a compiled
//! step (no interpretation of the body, and on the CPU no allocation), and the
//! variables the body sets are written back when the loop ends. Whatever the
//! replay could get wrong keeps the loop eager, with the reason reported:
//!
//! - from the syntax ([`static_reason`]): nested loops, `device` blocks, reads
//!   of `step`, builtins with effects outside the arrays (files, charts,
//!   parameter freezing, timing);
//! - from the two recorded iterations ([`mlpl_devices::capture::plan`]):
//!   different kernels, shapes or arguments, host-made inputs that change,
//!   computed values read on the host;
//! - from the workspace ([`HostState`]): variables set to values not computed
//!   by kernels that change, new parameters or layers, other optimizer state.
//!
//! Observable behaviour is that of eager evaluation: the same recorded losses,
//! bindings, optimizer state and `step`; warnings come from the two eager
//! iterations and are de-duplicated per run as always.

use mlpl_diag::code;
use std::collections::HashMap;
use std::sync::Arc;

use mlpl_devices::capture::{self, Origin, Recorder, StepProgram, Trace, ValueId};
use mlpl_devices::{Backend, Tensor, WeakTensor};

use super::Interp;
use crate::value::{Array, Names, Placement, Value};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{walk, Block, Expr, ExprKind, Stmt, StmtKind};

/// Why a body with these statements cannot be captured, judged from its
/// syntax alone; `None` when it may be.
pub fn static_reason(body: &Block) -> Option<String> {
    body.stmts.iter().find_map(stmt_reason)
}

/// Why a body cannot be captured because of a user function it calls
/// (directly or through other functions): the same syntactic reasons, found
/// in the functions' bodies.
pub fn functions_reason(
    body: &Block,
    fns: &std::collections::HashMap<String, std::sync::Arc<mlpl_syntax::FnDef>>,
) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let mut todo: Vec<&Block> = vec![body];
    while let Some(b) = todo.pop() {
        let mut called = Vec::new();
        for s in &b.stmts {
            walk::each_stmt_expr(s, &mut |e| {
                if let ExprKind::Call { name, .. } = &e.kind {
                    called.push(name.name.clone());
                }
            });
        }
        for name in called {
            let Some(f) = fns.get(&name) else { continue };
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(r) = static_reason(&f.body) {
                return Some(format!("{r} (in function `{name}`)"));
            }
            todo.push(&f.body);
        }
    }
    None
}

fn stmt_reason(s: &Stmt) -> Option<String> {
    match &s.kind {
        StmtKind::Expr(e) => expr_reason(e),
        StmtKind::Assign { value, .. } | StmtKind::Annotated { value, .. } => expr_reason(value),
        StmtKind::Repeat { .. } => Some("the body contains a `repeat` loop".into()),
        StmtKind::Train { .. } => Some("the body contains a `train` loop".into()),
        StmtKind::For { .. } => Some("the body contains a `for` loop".into()),
        StmtKind::Experiment { .. } => Some("the body contains an `experiment`".into()),
        StmtKind::Fn(_) => Some("the body defines a function".into()),
        StmtKind::Error => Some("the body has a statement that did not parse".into()),
    }
}

fn expr_reason(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Error => None,
        ExprKind::Var(name) if name == "step" => {
            Some("the body reads `step`, so its iterations can differ".into())
        }
        ExprKind::Var(_) => None,
        ExprKind::Call { name, .. } => {
            if crate::builtins::has_fact(&name.name, |f| f.effectful) {
                return Some(format!(
                    "the body calls `{}`, which has effects beyond its result",
                    name.name
                ));
            }
            walk::children(e).find_map(expr_reason)
        }
        ExprKind::List(_)
        | ExprKind::Neg(_)
        | ExprKind::Paren(_)
        | ExprKind::Chain { .. }
        | ExprKind::Ctor { .. } => walk::children(e).find_map(expr_reason),
        ExprKind::Device { .. } => Some("the body contains a `device` block".into()),
    }
}

/// What the workspace holds outside the kernels' values, compared between the
/// ends of the two recorded iterations: replays only update kernel-computed
/// values, so everything else must already have stopped changing.
#[derive(Debug)]
pub struct HostState {
    bindings: HashMap<String, HostValue>,
    tracked: usize,
    frozen: usize,
    model_counter: u64,
    experiments: usize,
    optim: Vec<((String, String), Held, Option<Held>)>,
}

/// A tensor of the workspace as [`HostState`] keeps it.
#[derive(Debug)]
enum Held {
    /// Computed by the iteration's kernels: only its identity matters, so it
    /// is held weakly (the next iteration may update it in place).
    Computed(WeakTensor),
    /// Anything else: its elements are compared, so it is kept.
    Tensor(Tensor),
}

impl Held {
    /// `t` as held after an iteration traced as `trace`.
    fn of(t: &Tensor, trace: &Trace) -> Held {
        match trace.find(t).map(|v| trace.value(v).origin) {
            Some(Origin::Output { .. }) => Held::Computed(t.downgrade()),
            _ => Held::Tensor(t.clone()),
        }
    }
}

#[derive(Debug)]
enum HostValue {
    Tensor(Held),
    Exact(u64),
    Str(Arc<str>),
    /// A model or tokenizer, by the address of what it shares.
    Shared(usize),
}

impl HostState {
    /// The workspace's state after an iteration traced as `trace` (`step`
    /// excluded: the loop sets it).
    pub fn of(it: &Interp, trace: &Trace) -> HostState {
        let bindings = it
            .ws
            .bindings
            .iter()
            .filter(|(k, _)| k.as_str() != "step")
            .map(|(k, v)| {
                let h = match v {
                    Value::Array(a) => match a.tensor_ref() {
                        Some(t) => HostValue::Tensor(Held::of(t, trace)),
                        None => HostValue::Exact(a.exact_value().unwrap_or(f64::NAN).to_bits()),
                    },
                    Value::Str(s) => HostValue::Str(s.clone()),
                    Value::Model(m) => HostValue::Shared(Arc::as_ptr(&m.0) as usize),
                    Value::Tokenizer(t) => HostValue::Shared(Arc::as_ptr(t) as usize),
                };
                (k.clone(), h)
            })
            .collect();
        let mut optim: Vec<_> = it
            .ws
            .optim
            .iter()
            .map(|(k, s)| {
                let v = s.v.as_ref().map(|v| Held::of(v, trace));
                (k.clone(), Held::of(&s.m, trace), v)
            })
            .collect();
        optim.sort_by(|a, b| a.0.cmp(&b.0));
        HostState {
            bindings,
            tracked: it.ws.tracked.len(),
            frozen: it.ws.frozen.len(),
            model_counter: it.ws.model_counter,
            experiments: it.ws.experiments.len(),
            optim,
        }
    }
}

/// Whether the workspace changed between `a` (the end of the first recorded
/// iteration) and `b` (the end of the second) only in values the kernels
/// computed; otherwise why not.
fn host_state_reason(a: &HostState, b: &HostState) -> Option<String> {
    if a.tracked != b.tracked
        || a.frozen != b.frozen
        || a.model_counter != b.model_counter
        || a.experiments != b.experiments
    {
        return Some("the body creates parameters, layers or experiments".into());
    }
    if a.optim.len() != b.optim.len() || a.bindings.len() != b.bindings.len() {
        return Some("the body creates new variables or optimizer state".into());
    }
    let same_tensor = |x: &Held, y: &Held| match (x, y) {
        (Held::Computed(_), Held::Computed(_)) => true,
        (Held::Computed(w), Held::Tensor(t)) | (Held::Tensor(t), Held::Computed(w)) => {
            w.shares_storage(t)
        }
        (Held::Tensor(x), Held::Tensor(y)) => {
            x.shares_storage(y)
                || (x.shape() == y.shape()
                    && x.host()
                        .iter()
                        .map(|v| v.to_bits())
                        .eq(y.host().iter().map(|v| v.to_bits())))
        }
    };
    for (name, hb) in &b.bindings {
        let Some(ha) = a.bindings.get(name) else {
            return Some(format!("the body creates the variable `{name}`"));
        };
        let same = match (ha, hb) {
            (HostValue::Tensor(x), HostValue::Tensor(y)) => same_tensor(x, y),
            (HostValue::Exact(x), HostValue::Exact(y)) => x == y,
            (HostValue::Str(x), HostValue::Str(y)) => x == y,
            (HostValue::Shared(x), HostValue::Shared(y)) => x == y,
            _ => false,
        };
        if !same {
            return Some(format!(
                "the body sets `{name}` to a value that changes but is not computed by array kernels"
            ));
        }
    }
    for ((ka, ma, va), (kb, mb, vb)) in a.optim.iter().zip(&b.optim) {
        let same_v = match (va, vb) {
            (Some(x), Some(y)) => same_tensor(x, y),
            (None, None) => true,
            _ => false,
        };
        if ka != kb || !same_tensor(ma, mb) || !same_v {
            return Some("the body changes optimizer state outside its kernels".into());
        }
    }
    None
}

/// Where a replayed value is written back when the loop ends.
#[derive(Debug)]
enum Target {
    /// A variable, with the axis names and placement of the array the
    /// second iteration left in it.
    Binding(String, Names, Placement),
    /// An optimizer's first moment.
    Moment1((String, String)),
    /// An optimizer's second moment.
    Moment2((String, String)),
}

/// The body's last value in a replayed iteration.
#[derive(Debug)]
enum LastValue {
    /// Computed by the step: this array with the value's elements.
    Computed(ValueId, Array),
    /// The same every iteration.
    Fixed(Value),
}

/// A captured `train` step, replayed by a compiled program.
pub struct Replay {
    program: Box<dyn StepProgram>,
    writeback: Vec<(Target, ValueId)>,
    last: LastValue,
    /// The learning rate the optimizer reported in the recorded iteration.
    pub lr: Option<f64>,
    /// Optimizer states whose update count grows by one per replayed step.
    counted: Vec<(String, String)>,
    replayed: u64,
}

/// The two recorded iterations of a loop being captured.
#[derive(Default)]
pub struct Recording {
    first: Option<(Trace, HostState)>,
}

/// Runs `f` (one iteration of the body) with every kernel of the active device
/// recorded; returns `f`'s result and the trace.
pub fn recorded<T>(it: &mut Interp, f: impl FnOnce(&mut Interp) -> T) -> (T, Trace) {
    let inner: Arc<dyn Backend> = it.devices.active_backend();
    let rec = Recorder::start(inner);
    it.devices
        .set_recording(Some(rec.clone() as Arc<dyn Backend>));
    let out = f(it);
    it.devices.set_recording(None);
    let trace = rec.finish();
    (out, trace)
}

impl Recording {
    /// Keeps the first recorded iteration (its trace and the workspace after it).
    pub fn first_done(&mut self, it: &Interp, trace: Trace) {
        let state = HostState::of(it, &trace);
        self.first = Some((trace, state));
    }

    /// After the second recorded iteration (trace `second`, body value `last`,
    /// learning rate `lr`): the compiled replay, or why the loop stays eager.
    pub fn second_done(
        self,
        it: &Interp,
        second: Trace,
        last: &Value,
        lr: Option<f64>,
    ) -> Result<Replay, String> {
        let (first, state_a) = self
            .first
            .ok_or_else(|| "the first iteration was not recorded".to_string())?;
        let state_b = HostState::of(it, &second);
        if let Some(why) = host_state_reason(&state_a, &state_b) {
            return Err(why);
        }
        let computed = |x: &Tensor| {
            second
                .find(x)
                .filter(|&v| matches!(second.value(v).origin, Origin::Output { .. }))
        };
        let mut writeback = Vec::new();
        let mut counted = Vec::new();
        for (name, v) in &it.ws.bindings {
            let Value::Array(a) = v else { continue };
            if let Some(id) = a.tensor_ref().and_then(computed) {
                let names = a.names().map(<[Option<String>]>::to_vec);
                writeback.push((Target::Binding(name.clone(), names, a.placement()), id));
            }
        }
        for (key, s) in &it.ws.optim {
            if let Some(id) = computed(&s.m) {
                writeback.push((Target::Moment1(key.clone()), id));
                counted.push(key.clone());
            }
            if let Some(id) = s.v.as_ref().and_then(computed) {
                writeback.push((Target::Moment2(key.clone()), id));
            }
        }
        let last = match last {
            Value::Array(a) => match a.tensor_ref().and_then(computed) {
                Some(id) => LastValue::Computed(id, a.clone().detached()),
                None => LastValue::Fixed(last.clone()),
            },
            other => LastValue::Fixed(other.clone()),
        };
        let mut keep: Vec<ValueId> = writeback.iter().map(|(_, v)| *v).collect();
        if let LastValue::Computed(id, _) = &last {
            keep.push(*id);
        }
        let plan = capture::plan(&first, second, keep)?;
        drop(first);
        let backend = it.devices.active_backend();
        let program = capture::compile(backend, plan)
            .map_err(|e| format!("the step could not be compiled: {e}"))?;
        Ok(Replay {
            program,
            writeback,
            last,
            lr,
            counted,
            replayed: 0,
        })
    }
}

impl Replay {
    /// Runs one more iteration; returns its recorded loss.
    pub fn step(&mut self, span: Span) -> Result<f32, Diagnostic> {
        self.program
            .run()
            .map_err(|e| crate::errors::device_error(e, "train", span))?;
        self.replayed += 1;
        match &self.last {
            LastValue::Computed(id, a) if a.rank() == 0 => self
                .program
                .first_element(*id)
                .map_err(|e| crate::errors::device_error(e, "train", span)),
            LastValue::Computed(id, a) => {
                let t = self
                    .program
                    .tensor(*id)
                    .map_err(|e| crate::errors::device_error(e, "train", span))?;
                super::loops::recorded_loss_of(&Value::Array(a.clone().with_tensor(t)))
                    .ok_or_else(|| unreachable_loss(span))
            }
            LastValue::Fixed(v) => {
                super::loops::recorded_loss_of(v).ok_or_else(|| unreachable_loss(span))
            }
        }
    }

    /// Writes the state of the last replayed iteration back into the
    /// workspace and returns the body's last value.
    pub fn finish(mut self, it: &mut Interp, span: Span) -> Result<Value, Diagnostic> {
        let dev = |e| crate::errors::device_error(e, "train", span);
        let mut ids: Vec<ValueId> = self.writeback.iter().map(|(_, id)| *id).collect();
        if let LastValue::Computed(id, _) = &self.last {
            ids.push(*id);
        }
        let mut read = self.program.take_kept(&ids).into_iter();
        let mut failed = None;
        for (target, _) in &self.writeback {
            let t = match read.next().expect("one per id") {
                Ok(t) => t,
                Err(e) => {
                    failed.get_or_insert(e);
                    continue;
                }
            };
            match target {
                Target::Binding(name, names, placement) => {
                    let a = Array::from_tensor(t)
                        .with_names(names.clone())
                        .with_placement(*placement);
                    it.ws.bindings.insert(name.clone(), Value::Array(a));
                }
                Target::Moment1(key) => {
                    if let Some(s) = it.ws.optim.get_mut(key) {
                        s.m = t;
                    }
                }
                Target::Moment2(key) => {
                    if let Some(s) = it.ws.optim.get_mut(key) {
                        s.v = Some(t);
                    }
                }
            }
        }
        for key in &self.counted {
            if let Some(s) = it.ws.optim.get_mut(key) {
                s.steps += self.replayed;
            }
        }
        if let Some(e) = failed {
            return Err(dev(e));
        }
        Ok(match self.last {
            LastValue::Computed(_, a) => {
                Value::Array(a.with_tensor(read.next().expect("the last value").map_err(dev)?))
            }
            LastValue::Fixed(v) => v,
        })
    }

    /// Stops the workspace holding the state the program carries from step
    /// to step in its own block (the variables and optimizer moments
    /// [`Replay::finish`] writes back): as the second recorded iteration left
    /// it, that state would otherwise be held twice for the whole replayed
    /// loop. Until `finish`, those variables are unbound and those moments
    /// empty; nothing reads them while the program replays. Only what the
    /// program can give back now ([`StepProgram::readable`]: after compiling,
    /// the carried state, which the first run copies into the block and then
    /// drops, so it is never held twice; after a run, everything written
    /// back), and only for a program with its own block (`arena_bytes`): one
    /// that runs calls on device tensors keeps the workspace as it is.
    /// Called after compiling and again after the first run.
    pub fn release_carried(&self, it: &mut Interp) {
        if self.program.arena_bytes().is_none() {
            return;
        }
        let held = self
            .writeback
            .iter()
            .filter(|(_, id)| self.program.readable(*id));
        for (target, _) in held {
            match target {
                Target::Binding(name, ..) => {
                    it.ws.bindings.remove(name);
                }
                Target::Moment1(key) => {
                    if let Some(s) = it.ws.optim.get_mut(key) {
                        s.m = Tensor::zeros(vec![0]);
                    }
                }
                Target::Moment2(key) => {
                    if let Some(s) = it.ws.optim.get_mut(key) {
                        s.v = None;
                    }
                }
            }
        }
        capture::released_after_compile();
    }

    /// Iterations replayed so far.
    pub fn replayed(&self) -> u64 {
        self.replayed
    }

    /// Time spent in kernels over the replayed iterations.
    pub fn kernel_time(&self) -> std::time::Duration {
        self.program.kernel_time()
    }

    /// How the program runs (`"arena"` or `"calls"`).
    pub fn kind(&self) -> &'static str {
        self.program.kind()
    }

    /// The memory the program's arena holds, when it has one.
    pub fn arena_bytes(&self) -> Option<capture::ArenaBytes> {
        self.program.arena_bytes()
    }
}

fn unreachable_loss(span: Span) -> Diagnostic {
    Diagnostic::of(code::E0307).at(span, "the captured step's value is not an array")
}
