//! Losses, parameter references and `grad`'s variable (LANGUAGE §5.8, §12): the
//! arguments that builtins evaluate themselves (`ParamKind::Lazy`). The checker
//! analyses a loss in *loss mode*, where it proves E0306 (a builtin that cannot
//! be part of a loss, or a non-differentiable one applied to a value that depends
//! on a trainable parameter); it resolves parameter references (E0109, E0110,
//! W0302) and warns when a loss provably ignores the updated parameters (W0103).

use super::env::FxHashSet as HashSet;
use mlpl_diag::code;

use super::abstract_value::AbsValue;
use super::env::Tri;
use super::expr::Checker;
use crate::builtins::{self, Builtin, Diff};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{walk, Expr, ExprKind, Stmt, StmtKind};

/// The context of a loss being analysed. The provably trainable leaves of the
/// loss are the variables that are provably tracked parameters, and `grad`'s
/// variable.
#[derive(Clone, Debug, Default)]
pub struct LossCtx {
    /// `grad`'s variable, trainable even when not tracked.
    pub wrt: Option<String>,
}

/// What a parameter reference resolved to.
struct Params {
    /// Variable names listed directly (arrays that may be tracked).
    vars: Vec<String>,
    /// Variables listed directly that hold models.
    models: Vec<String>,
    /// Whether every entry was an array variable (no model, nothing unknown).
    only_vars: bool,
    /// Whether every entry was an array or a model variable (nothing unknown).
    resolved: bool,
}

fn not_a_reference(span: Span, what: &str) -> Diagnostic {
    Diagnostic::of(code::E0109)
        .at(span, what)
        .note("an optimizer's parameters are a tracked parameter name, a model, or a list of these, like `[W, b, model]`")
}

impl Checker {
    /// Analyses the lazy arguments of a call to `b`; returns one value per
    /// argument (`Unknown` for the others): the loss's value, `grad`'s variable.
    pub fn lazy_args(&mut self, b: &'static Builtin, args: &[Expr]) -> Vec<AbsValue> {
        let mut out = vec![AbsValue::Unknown; args.len()];
        let index = |name: &str| b.params.iter().position(|p| p.name == name);
        let mut wrt_name = None;
        if let Some(i) = index("wrt").filter(|&i| i < args.len()) {
            let wrt = args[i].unparen();
            match &wrt.kind {
                ExprKind::Var(name) => match self.env.get(name).map(|x| x.value.clone()) {
                    Some(v @ AbsValue::Array(_)) => {
                        out[i] = v;
                        wrt_name = Some(name.clone());
                    }
                    Some(AbsValue::Unknown) | None => wrt_name = Some(name.clone()),
                    Some(other) => {
                        let kind = other.kind_name().unwrap_or("value");
                        self.report(
                            Diagnostic::of(code::E0301)
                                .at(wrt.span, format!("`{name}` is a {kind}")),
                        );
                    }
                },
                _ => {
                    self.report(
                        Diagnostic::of(code::E0109)
                            .at(wrt.span, "not a variable name")
                            .note("`grad`'s second argument names the variable to differentiate with respect to, written directly: `grad(loss, W)`"),
                    );
                }
            }
        }
        let params = index("params")
            .filter(|&i| i < args.len())
            .map(|i| self.params_ref(&args[i]));
        if let Some(i) = index("loss").filter(|&i| i < args.len()) {
            let loss = &args[i];
            let saved = self.loss.replace(LossCtx { wrt: wrt_name });
            let v = self.expr(loss);
            self.loss = saved;
            if v.provably_not_array() {
                let kind = v.kind_name().unwrap_or("value");
                self.report(
                    Diagnostic::of(code::E0301)
                        .at(loss.span, format!("the loss is a {kind}"))
                        .note("a loss must evaluate to an array (usually a scalar)"),
                );
            }
            out[i] = v;
            if let Some(p) = &params {
                // The optimizer updates the parameters in place: their values
                // change, their shapes and names do not.
                for var in &p.vars {
                    if let Some(AbsValue::Array(a)) = self.env.get(var).map(|b| b.value.clone()) {
                        self.env.rebind(var, AbsValue::Array(a.with_constant(None)));
                    }
                }
            }
            if let Some(p) = params {
                let mut read = HashSet::default();
                vars_read(loss, &mut read);
                if self.provably_independent(&p, &read) {
                    self.report(
                        Diagnostic::of(code::W0103).at(loss.span, "every gradient is zero"),
                    );
                }
            }
        }
        out
    }

    /// Whether a loss that reads the variables `read` provably ignores the
    /// parameters `p` (W0103). Array parameters: the loss reads none of them.
    /// Arrays: the loss reads no model either, which could hold them as its
    /// generated parameters. Models: besides not reading them, the loss reads
    /// only untracked arrays and other plain values, so no other model or
    /// tracked array can share their parameters.
    fn provably_independent(&self, p: &Params, read: &HashSet<String>) -> bool {
        if !p.resolved || read.contains(UNPARSED) || (p.vars.is_empty() && p.models.is_empty()) {
            return false;
        }
        let listed = p.vars.iter().chain(&p.models);
        if listed.clone().any(|v| read.contains(v)) {
            return false;
        }
        // Arrays only: a model the loss reads (or a value that may be one) can
        // hold them as its generated parameters (`__linear_W_0`).
        let may_hold = |v: &String| {
            self.env
                .get(v)
                .is_none_or(|b| matches!(b.value, AbsValue::Model(_) | AbsValue::Unknown))
        };
        (p.only_vars && !read.iter().any(may_hold))
            || read.iter().all(|v| {
                self.env.get(v).is_some_and(|b| match &b.value {
                    AbsValue::Array(_) => b.tracked == Tri::No,
                    AbsValue::Str(_) => true,
                    AbsValue::Model(_) | AbsValue::Tokenizer(_) | AbsValue::Unknown => false,
                })
            })
    }

    /// Resolves a parameter reference (LANGUAGE §5.8).
    fn params_ref(&mut self, e: &Expr) -> Params {
        let e = e.unparen();
        let items: Vec<&Expr> = match &e.kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![e],
        };
        let mut p = Params {
            vars: Vec::new(),
            models: Vec::new(),
            only_vars: true,
            resolved: true,
        };
        for item in items {
            let item = item.unparen();
            match &item.kind {
                ExprKind::Var(name) => match self.env.get(name).cloned() {
                    Some(b) => match &b.value {
                        AbsValue::Array(_) => {
                            if b.tracked == Tri::No {
                                self.report(
                                    Diagnostic::of(code::E0110)
                                        .at(item.span, format!("`{name}` is an ordinary variable"))
                                        .help(format!("create it with `{name} = param[...]` to make it trainable")),
                                );
                                p.only_vars = false;
                                continue;
                            }
                            if p.vars.contains(name) {
                                self.report(
                                    Diagnostic::of(code::W0302)
                                        .at(item.span, format!("`{name}` is updated once")),
                                );
                            } else {
                                p.vars.push(name.clone());
                            }
                        }
                        AbsValue::Str(_) | AbsValue::Tokenizer(_) => {
                            let kind = b.value.kind_name().unwrap_or("value");
                            self.report(not_a_reference(
                                item.span,
                                &format!("`{name}` is a {kind}"),
                            ));
                            p.only_vars = false;
                        }
                        AbsValue::Model(_) => {
                            p.only_vars = false;
                            p.models.push(name.clone());
                        }
                        AbsValue::Unknown => {
                            p.only_vars = false;
                            p.resolved = false;
                        }
                    },
                    None => {
                        p.only_vars = false;
                        p.resolved = false;
                    }
                },
                _ => {
                    p.only_vars = false;
                    p.resolved = false;
                    match self.expr(item) {
                        AbsValue::Model(_) | AbsValue::Unknown => {}
                        other => {
                            let kind = other.kind_name().unwrap_or("value");
                            self.report(not_a_reference(
                                item.span,
                                &format!("this is a {kind} value, not a parameter name or a model"),
                            ));
                        }
                    }
                }
            }
        }
        p
    }

    /// Whether `e`, evaluated in the current loss, provably depends on a trainable
    /// parameter (its value is recorded on the tape).
    pub fn live(&self, e: &Expr) -> bool {
        let Some(loss) = &self.loss else {
            return false;
        };
        let trainable = |n: &str| {
            loss.wrt.as_deref() == Some(n) || self.env.get(n).is_some_and(|b| b.tracked == Tri::Yes)
        };
        live_in(e, &trainable)
    }
}

fn live_in(e: &Expr, trainable: &dyn Fn(&str) -> bool) -> bool {
    match &e.kind {
        ExprKind::Var(n) => trainable(n),
        ExprKind::Paren(x) | ExprKind::Neg(x) => live_in(x, trainable),
        ExprKind::Chain { first, links } => {
            live_in(first, trainable) || links.iter().any(|l| live_in(&l.rhs, trainable))
        }
        ExprKind::Call { name, args } => {
            let Some(b) = builtins::lookup(&name.name) else {
                return false;
            };
            if b.diff != Diff::Yes || args.len() < b.min_args() || args.len() > b.max_args() {
                return false;
            }
            differentiable_args(b.name)
                .iter()
                .any(|&i| args.get(i).is_some_and(|a| live_in(a, trainable)))
        }
        _ => false,
    }
}

/// The arguments through which gradients flow (LANGUAGE §10, column ∂).
fn differentiable_args(name: &str) -> &'static [usize] {
    match name {
        "add" | "sub" | "mul" | "div" | "pow" | "matmul" | "dot" | "concat" => &[0, 1],
        "scatter" => &[0, 2],
        "fill" => &[1],
        _ => &[0],
    }
}

/// Every variable an expression reads, at any depth.
pub fn vars_read(e: &Expr, out: &mut HashSet<String>) {
    match &e.kind {
        ExprKind::Var(n) => {
            out.insert(n.clone());
        }
        // A part that did not parse may read anything.
        ExprKind::Error => {
            out.insert(UNPARSED.to_string());
        }
        _ => {}
    }
    walk::children(e).for_each(|c| vars_read(c, out));
    if let Some(body) = walk::device_body(e) {
        stmts_read(&body.stmts, out);
    }
}

/// Stands for "anything" in [`vars_read`] when part of the expression did not parse.
const UNPARSED: &str = "\0unparsed";

fn stmts_read(stmts: &[Stmt], out: &mut HashSet<String>) {
    for s in stmts {
        if matches!(s.kind, StmtKind::Error) {
            out.insert(UNPARSED.to_string());
        }
        if let Some(e) = walk::stmt_expr(s) {
            vars_read(e, out);
        }
        if let Some(body) = walk::stmt_body(s) {
            stmts_read(&body.stmts, out);
        }
    }
}
