//! Abstract evaluation of expressions: literals, variables, operators, array
//! literals, constructor forms, device blocks and builtin calls (whose results
//! come from the shape rules of the registry).

use mlpl_devices::UnaryOp;
use mlpl_diag::code;

use super::abstract_value::{AbsArray, AbsValue, Dim, MAX_CONST};
use super::broadcast::{self, Operand};
use super::ctx::{RuleArg, ShapeCtx, Symbols};
use super::env::{Env, FxHashSet};
use super::loss::LossCtx;
use crate::builtins::{self, Builtin, Diff, ParamKind};
use crate::value::split_names;
use crate::value::DeviceTarget;
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{Block, Expr, ExprKind, Ident, Link};

/// Integers above this are not exact in float32 (W0204).
const F32_EXACT: f64 = 16_777_216.0;

/// The value of one top-level assignment, for tools and the agreement test.
#[derive(Clone, Debug, PartialEq)]
pub struct AssignedValue {
    /// Index of the statement in the program.
    pub stmt: usize,
    /// The variable assigned.
    pub name: String,
    /// The statement's span.
    pub span: Span,
    /// What the checker knows about the variable after the statement.
    pub value: AbsValue,
}

/// The abstract interpreter: an environment, the diagnostics found so far, and
/// the context of the code being analysed (loops, losses).
pub struct Checker {
    /// What is known about each variable.
    pub env: Env,
    /// Diagnostics found (errors and warnings).
    pub out: Vec<Diagnostic>,
    pub(super) seen: FxHashSet<(&'static str, usize, usize)>,
    /// Whether diagnostics are kept: off while a loop body is re-analysed to reach
    /// its fixed point (only the first iterations are reported).
    pub report: bool,
    /// Size symbols per call site.
    pub symbols: Symbols,
    /// Number of enclosing loop bodies.
    pub loop_depth: usize,
    /// Number of enclosing `train` bodies.
    pub train_depth: usize,
    /// Number of enclosing `repeat` and `for` bodies.
    pub plain_loop_depth: usize,
    /// Set while a loss expression is analysed.
    pub loss: Option<LossCtx>,
    /// The variables each loop body may bind, by the body's span (computed once).
    pub(crate) loop_names: super::env::FxHashMap<(usize, usize), std::rc::Rc<Vec<String>>>,
    /// The program's user functions by name.
    pub fns: super::env::FxHashMap<String, std::rc::Rc<mlpl_syntax::FnDef>>,
    /// The functions whose bodies are being analysed, innermost last.
    pub(crate) fn_stack: Vec<String>,
}

impl Default for Checker {
    fn default() -> Self {
        Checker::new()
    }
}

impl Checker {
    /// A checker with an empty environment.
    pub fn new() -> Checker {
        Checker {
            env: Env::default(),
            out: Vec::new(),
            seen: FxHashSet::default(),
            report: true,
            symbols: Symbols::default(),
            loop_depth: 0,
            train_depth: 0,
            plain_loop_depth: 0,
            loss: None,
            loop_names: Default::default(),
            fns: Default::default(),
            fn_stack: Vec::new(),
        }
    }

    /// Keeps a diagnostic (once per code and primary span) unless reporting is off.
    pub fn report(&mut self, d: Diagnostic) {
        if !self.report {
            return;
        }
        let (s, e) = d
            .primary
            .as_ref()
            .map_or((0, 0), |l| (l.span.start, l.span.end));
        if self.seen.insert((d.code, s, e)) {
            self.out.push(d);
        }
    }

    /// Evaluates an expression abstractly.
    pub fn expr(&mut self, e: &Expr) -> AbsValue {
        match &e.kind {
            ExprKind::Number(v) => AbsValue::scalar(*v),
            ExprKind::Str(s) => AbsValue::Str(Some(s.clone())),
            ExprKind::Var(name) => self.var(name, e.span),
            ExprKind::Paren(inner) => self.expr(inner),
            ExprKind::Neg(inner) => {
                let v = self.expr(inner);
                let Some(a) = self.expect_array(&v, inner.span, "unary `-`") else {
                    return AbsValue::Unknown;
                };
                let c = broadcast::fold_unary(UnaryOp::Neg, &a);
                AbsValue::Array(a.with_constant(c))
            }
            ExprKind::Chain { first, links } => self.chain(first, links),
            ExprKind::List(items) => self.list(items, e.span),
            ExprKind::Ctor { dims, .. } => self.ctor(dims),
            ExprKind::Call { name, args } => self.call(name, args, e.span),
            ExprKind::Device { target, body } => self.device(target, body),
            ExprKind::Error => AbsValue::Unknown,
        }
    }

    /// A chain of operators, left to right in a loop, as the interpreter
    /// applies it; a link whose operand is no array makes the value so far
    /// unknown, and the later links are still checked.
    fn chain(&mut self, first: &Expr, links: &[Link]) -> AbsValue {
        let mut acc = self.expr(first);
        let prefixes = Expr::chain_prefixes(first, links);
        let mut left_span = first.span;
        for (i, (l, span)) in links.iter().zip(prefixes).enumerate() {
            let r = self.expr(&l.rhs);
            let symbol = l.op.symbol();
            let la = self.expect_array(&acc, left_span, symbol);
            let ra = self.expect_array(&r, l.rhs.span, symbol);
            let this_left = std::mem::replace(&mut left_span, span);
            let (Some(la), Some(ra)) = (la, ra) else {
                acc = AbsValue::Unknown;
                continue;
            };
            let bop = builtins::operator_op(l.op);
            let placeholder;
            let left = Operand {
                array: &la,
                expr: if i == 0 {
                    first
                } else {
                    placeholder = Expr::placeholder(this_left);
                    &placeholder
                },
            };
            let right = Operand {
                array: &ra,
                expr: &l.rhs,
            };
            acc = match broadcast::binary(bop, symbol, left, right) {
                Ok(a) => AbsValue::Array(a),
                Err(d) => {
                    self.report(d);
                    AbsValue::any_array()
                }
            };
        }
        acc
    }

    fn var(&mut self, name: &str, span: Span) -> AbsValue {
        if name == "step" && self.plain_loop_depth > 0 && self.train_depth == 0 {
            self.report(
                Diagnostic::of(code::W0101)
                    .at(span, "read inside a loop that is not a `train` loop")
                    .note("`step` is bound by `train` loops; here it holds a stale value from an earlier `train`, if any"),
            );
        }
        self.env
            .get(name)
            .map_or(AbsValue::Unknown, |b| b.value.clone())
    }

    /// The array inside `v`: `Some` for an array or a value of unknown kind (an
    /// array of unknown shape), `None` after reporting E0301 for another kind.
    pub fn expect_array(&mut self, v: &AbsValue, span: Span, what: &str) -> Option<AbsArray> {
        match v {
            AbsValue::Array(a) => Some(a.clone()),
            AbsValue::Unknown => Some(AbsArray::unknown()),
            other => {
                let kind = other.kind_name().unwrap_or("value");
                self.report(
                    Diagnostic::of(code::E0301)
                        .at(span, format!("this is a {kind}"))
                        .note(format!(
                            "{what} works on arrays; no operator accepts a {kind}"
                        )),
                );
                None
            }
        }
    }

    fn list(&mut self, items: &[Expr], span: Span) -> AbsValue {
        let mut arrays: Vec<(AbsArray, Span)> = Vec::with_capacity(items.len());
        let mut failed = false;
        for item in items {
            match self.expr(item) {
                AbsValue::Array(a) => {
                    if let Some(v) = a.scalar_value() {
                        // An integer above 2^24 that float32 cannot hold exactly.
                        if v.fract() == 0.0
                            && v.abs() > F32_EXACT
                            && v.is_finite()
                            && v as f32 as f64 != v
                        {
                            self.report(
                                Diagnostic::of(code::W0204)
                                    .at(
                                        item.span,
                                        format!(
                                            "stored as {}",
                                            crate::display::format_f64(v as f32 as f64)
                                        ),
                                    )
                                    .note("array elements are float32, exact for integers up to 16777216"),
                            );
                        }
                    }
                    arrays.push((a, item.span));
                }
                AbsValue::Str(_) => {
                    self.report(
                        Diagnostic::of(code::E0305)
                            .at(item.span, "a string")
                            .note("arrays hold numbers; a list of strings is only accepted as axis names")
                            .help("pass names to `label`, `relabel` or `reshape_labeled`, or write them as one string: \"a,b\""),
                    );
                    failed = true;
                }
                AbsValue::Unknown => {
                    arrays.push((AbsArray::unknown(), item.span));
                }
                other => {
                    let kind = other.kind_name().unwrap_or("value");
                    self.report(
                        Diagnostic::of(code::E0301).at(item.span, format!("this is a {kind}")),
                    );
                    failed = true;
                }
            }
        }
        if failed {
            return AbsValue::any_array();
        }
        if self.loss.is_some() {
            if let Some(item) = items.iter().find(|i| self.live(i)) {
                self.report(crate::errors::literal_in_loss_error(item.span));
                return AbsValue::any_array();
            }
        }
        let Some((first, first_span)) = arrays.first() else {
            return AbsValue::Array(AbsArray::of_shape(&[0]));
        };
        let mut inner = first.clone().unnamed();
        inner.constant = None;
        for (a, s) in &arrays[1..] {
            if let (Some(x), Some(y)) = (&first.dims, &a.dims) {
                let differs = x.len() != y.len() || x.iter().zip(y).any(|(p, q)| p.provably_ne(q));
                if differs {
                    self.report(
                        crate::errors::stack_shape_error(
                            (*s, &a.shape_text()),
                            (*first_span, &first.shape_text()),
                        )
                        .or_at(span),
                    );
                    return AbsValue::any_array();
                }
            }
            inner = inner.join(&a.clone().unnamed());
        }
        let mut dims = vec![Dim::Known(arrays.len())];
        match inner.dims {
            Some(d) => dims.extend(d),
            None => return AbsValue::any_array(),
        }
        let constant: Option<Vec<f64>> = arrays
            .iter()
            .map(|(a, _)| a.constant.clone())
            .collect::<Option<Vec<Vec<f64>>>>()
            .map(|v| v.concat().into_iter().map(|x| x as f32 as f64).collect());
        AbsValue::Array(AbsArray::of_dims(dims).with_constant(constant))
    }

    fn ctor(&mut self, dims: &[Expr]) -> AbsValue {
        let mut shape = Vec::with_capacity(dims.len());
        for d in dims {
            let v = self.expr(d);
            let bad = || {
                Diagnostic::of(code::E0213)
                    .at(d.span, "expected a non-negative integer scalar")
                    .note("each dimension of `param[...]` and `tensor[...]` must be a non-negative integer")
            };
            match &v {
                AbsValue::Array(a) => match (a.rank(), a.scalar_value()) {
                    (Some(0), Some(n)) => {
                        if n >= 0.0 && n.fract() == 0.0 && n <= usize::MAX as f64 {
                            shape.push(Dim::Known(n as usize));
                        } else {
                            self.report(bad());
                            return AbsValue::any_array();
                        }
                    }
                    (Some(r), _) if r > 0 => {
                        self.report(bad());
                        return AbsValue::any_array();
                    }
                    _ => shape.push(Dim::Unknown),
                },
                AbsValue::Unknown => shape.push(Dim::Unknown),
                _ => {
                    self.report(bad());
                    return AbsValue::any_array();
                }
            }
        }
        let a = AbsArray::of_dims(shape);
        // Only a small constant is kept: the size is the program's, not ours.
        let zeros = a.numel().filter(|&n| n <= MAX_CONST).map(|n| vec![0.0; n]);
        AbsValue::Array(a.with_constant(zeros))
    }

    fn device(&mut self, target: &Expr, body: &Block) -> AbsValue {
        match self.expr(target) {
            AbsValue::Str(Some(name)) => {
                if DeviceTarget::parse(&name).is_none() {
                    self.report(
                        Diagnostic::warning(
                            code::W0502,
                            format!("unknown device `{name}`; this block runs on the CPU"),
                        )
                        .at(target.span, "not a device target")
                        .help("device targets are \"cpu\", \"cuda\", \"cuda:N\" and \"mlx\""),
                    );
                }
            }
            AbsValue::Str(None) | AbsValue::Unknown => {}
            other => {
                let kind = other.kind_name().unwrap_or("value");
                self.report(
                    Diagnostic::of(code::E0302)
                        .at(target.span, format!("this is a {kind}"))
                        .note(
                            "a device target is a string: \"cpu\", \"cuda\", \"cuda:N\" or \"mlx\"",
                        ),
                );
            }
        }
        self.block(&body.stmts)
    }

    fn call(&mut self, name: &Ident, args: &[Expr], span: Span) -> AbsValue {
        let Some(b) = builtins::lookup(&name.name) else {
            if let Some(def) = self.fns.get(&name.name).cloned() {
                return self.call_fn(def, args, span);
            }
            // E0102 is the name checker's; still look inside the arguments.
            for a in args {
                self.expr(a);
            }
            return AbsValue::Unknown;
        };
        let n = args.len();
        if n < b.min_args() || n > b.max_args() {
            for a in args {
                self.expr(a);
            }
            return AbsValue::Unknown;
        }
        if self.loss.is_some() && b.diff == Diff::Effect && !b.facts.allowed_in_loss {
            self.report(
                Diagnostic::of(code::E0306)
                    .at(name.span, format!("`{}` cannot be part of a loss", b.name))
                    .note(format!("`{}` has side effects or does not return an array, so it cannot be differentiated", b.name))
                    .help("compute it before the optimizer call and use the result as a constant"),
            );
            return AbsValue::Unknown;
        }
        self.constructor_warning(b, args, span);
        let lazy = if b.params.iter().any(|p| p.kind == ParamKind::Lazy) {
            self.lazy_args(b, args)
        } else {
            Vec::new()
        };
        let mut rargs = Vec::with_capacity(n);
        for (i, (arg, p)) in args
            .iter()
            .zip((0..).map_while(|i| b.param_at(i)))
            .enumerate()
        {
            let mut r = RuleArg {
                value: AbsValue::Unknown,
                names: None,
                is_list: false,
                span: arg.span,
                expr: arg,
            };
            match p.kind {
                ParamKind::Names => {
                    let (names, is_list) = self.names_arg(arg);
                    r.names = names;
                    r.is_list = is_list;
                }
                ParamKind::Lazy => {
                    r.value = lazy.get(i).cloned().unwrap_or(AbsValue::Unknown);
                }
                _ => r.value = self.expr(arg),
            }
            rargs.push(r);
        }
        if self.loss.is_some() && b.diff == Diff::No {
            let live = args
                .iter()
                .zip((0..).map_while(|i| b.param_at(i)))
                .find(|(a, p)| {
                    !matches!(p.kind, ParamKind::Lazy | ParamKind::Names) && self.live(a)
                });
            if let Some((a, p)) = live {
                self.report(
                    Diagnostic::of(code::E0306)
                        .at(a.span, format!("argument `{}` depends on a trainable parameter", p.name))
                        .note(format!("`{}` is not differentiable; inside a loss it may only be applied to values that do not depend on parameters", b.name))
                        .help("compute it outside the loss, or on data rather than on parameters"),
                );
                return AbsValue::Unknown;
            }
        }
        if let Some(d) = placement_conflict(b.name, &rargs) {
            self.report(d);
            return AbsValue::Unknown;
        }
        let Some(rule) = builtins::shape_rule(b) else {
            return AbsValue::Unknown;
        };
        let in_loop = self.loop_depth > 0;
        let mut ctx = ShapeCtx::new(b, span, name.span, rargs, &mut self.symbols, in_loop);
        let result = rule(&mut ctx);
        let warnings = std::mem::take(&mut ctx.warnings);
        let rebind = ctx.rebind.and_then(|i| match &args.get(i)?.unparen().kind {
            ExprKind::Var(v) => Some(v.clone()),
            _ => None,
        });
        for w in warnings {
            self.report(w);
        }
        match result {
            Ok(v) => {
                if let Some(var) = rebind {
                    self.env.rebind(&var, v.clone());
                }
                v
            }
            Err(d) => {
                self.report(d);
                AbsValue::Unknown
            }
        }
    }

    /// W0102: a parameterised layer constructor inside a loop body or a loss.
    fn constructor_warning(&mut self, b: &'static Builtin, args: &[Expr], span: Span) {
        if self.loop_depth == 0 && self.loss.is_none() {
            return;
        }
        let gain = b.name == "rms_norm"
            && args.len() == 2
            && !matches!(args[1].unparen().kind, ExprKind::Number(g) if g == 0.0);
        if b.facts.parameterised || gain {
            self.report(
                Diagnostic::of(code::W0102)
                    .at(span, "creates new parameters each time it is evaluated")
                    .help("construct the layer once, before the loop, and apply it inside"),
            );
        }
    }

    /// A names argument (LANGUAGE §5.8): the names when constant, and whether it
    /// was a bracketed list.
    fn names_arg(&mut self, e: &Expr) -> (Option<Vec<Option<String>>>, bool) {
        if let ExprKind::List(items) = &e.unparen().kind {
            let mut names = Some(Vec::with_capacity(items.len()));
            for item in items {
                match self.expr(item) {
                    AbsValue::Str(Some(s)) => {
                        if let Some(n) = &mut names {
                            n.push(Some(s).filter(|s| !s.is_empty()));
                        }
                    }
                    AbsValue::Str(None) | AbsValue::Unknown => names = None,
                    other => {
                        let kind = other.kind_name().unwrap_or("value");
                        self.report(
                            Diagnostic::of(code::E0302)
                                .at(item.span, format!("this is a {kind}"))
                                .note("each entry of a names list is an axis name (a string)"),
                        );
                        names = None;
                    }
                }
            }
            return (names, true);
        }
        match self.expr(e) {
            AbsValue::Str(Some(s)) => (Some(split_names(&s)), false),
            AbsValue::Str(None) | AbsValue::Unknown => (None, false),
            other => {
                let kind = other.kind_name().unwrap_or("value");
                self.report(
                    Diagnostic::of(code::E0302)
                        .at(e.span, format!("this is a {kind}"))
                        .note("axis names are a list of strings, like [\"batch\", \"feat\"], or one string like \"batch,feat\""),
                );
                (None, false)
            }
        }
    }
}

/// E0501 for a builtin call whose array arguments are provably placed on
/// different devices (the interpreter's `check_placements`, before the builtin
/// runs). Arrays of rank 0 are never placed, so they take no part.
fn placement_conflict(op: &str, args: &[RuleArg<'_>]) -> Option<Diagnostic> {
    let mut arrays = 0;
    let mut placed = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if let AbsValue::Array(a) = &arg.value {
            if a.dims.as_ref().is_some_and(|d| d.is_empty()) {
                continue;
            }
            arrays += 1;
            if let Some(t) = a.placed {
                placed.push((i, t, arg.span));
            }
        }
    }
    crate::errors::call_placement_conflict(op, &placed, arrays)
}
