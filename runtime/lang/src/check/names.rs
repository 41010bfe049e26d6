//! Name and arity checks: E0101 (a variable read before any assignment can have
//! bound it), E0102 (unknown function), E0103 (wrong number of arguments) and
//! W0105 (a variable shadowing a builtin).

use super::env::FxHashSet as HashSet;
use mlpl_diag::code;

use crate::builtins;
use crate::builtins::unknown_function;
use crate::errors::signature;
use mlpl_diag::Diagnostic;
use mlpl_syntax::{walk, Expr, ExprKind, FnDef, Program, Stmt, StmtKind};

/// Checks a program in source order with one flat scope (LANGUAGE §6.4); a
/// function's body has a scope of its own (its parameters and what it assigns),
/// and every function of the program may be called anywhere in it.
pub fn check(program: &Program) -> Vec<Diagnostic> {
    let fns = super::functions_of(program);
    let mut c = NameChecker {
        bound: HashSet::default(),
        out: Vec::new(),
        fns: &fns,
        in_fn: None,
    };
    c.stmts(&program.stmts);
    c.out
}

struct NameChecker<'a> {
    bound: HashSet<String>,
    out: Vec<Diagnostic>,
    /// The program's functions.
    fns: &'a super::env::FxHashMap<String, &'a FnDef>,
    /// Inside a body: the function and the names bound outside it.
    in_fn: Option<(&'a FnDef, HashSet<String>)>,
}

impl<'a> NameChecker<'a> {
    /// A definition: E0112 for a builtin's name, then the body in its own scope.
    fn define(&mut self, def: &'a FnDef) {
        if builtins::lookup(&def.name.name).is_some() {
            self.out.push(signature::builtin_name_error(def));
        }
        let mut inner = NameChecker {
            bound: def.params.iter().map(|p| p.name.name.clone()).collect(),
            out: Vec::new(),
            fns: self.fns,
            in_fn: Some((def, self.bound.clone())),
        };
        inner.stmts(&def.body.stmts);
        self.out.append(&mut inner.out);
    }

    fn bind(&mut self, name: &str, span: mlpl_diag::Span) {
        if builtins::lookup(name).is_some() {
            self.out.push(
                Diagnostic::warning(code::W0105, format!("variable `{name}` shadows a builtin"))
                    .at(span, "this variable")
                    .note(format!("calls like `{name}(...)` still reach the builtin")),
            );
        }
        self.bound.insert(name.to_string());
    }

    fn stmts(&mut self, stmts: &'a [Stmt]) {
        for s in stmts {
            if let StmtKind::Fn(def) = &s.kind {
                self.define(def);
            }
            self.stmt(s);
        }
    }

    /// A loop body runs repeatedly: names it binds anywhere are visible in later
    /// iterations, so a first pass collects them before reporting.
    fn loop_body(&mut self, stmts: &'a [Stmt]) {
        let mut assigned = Vec::new();
        collect_assigned(stmts, &mut assigned);
        // Only the names the body assigns matter below: remember which of them
        // were bound before the loop (copying the whole set would be quadratic).
        let was_bound: HashSet<String> = assigned
            .iter()
            .filter(|n| self.bound.contains(n.as_str()))
            .cloned()
            .collect();
        let out_len = self.out.len();
        self.stmts(stmts);
        // Keep only the E0101 reports that are errors in every iteration.
        let later: HashSet<&str> = assigned.iter().map(|s| s.as_str()).collect();
        let new: Vec<Diagnostic> = self.out.drain(out_len..).collect();
        for d in new {
            let spurious = d.code == code::E0101
                && d.message
                    .split('`')
                    .nth(1)
                    .is_some_and(|n| later.contains(n) && !was_bound.contains(n));
            if !spurious {
                self.out.push(d);
            }
        }
    }

    fn stmt(&mut self, s: &'a Stmt) {
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assign { name, value } | StmtKind::Annotated { name, value, .. } => {
                self.expr(value);
                self.bind(&name.name, name.span);
            }
            StmtKind::Repeat { count, body } => {
                self.expr(count);
                self.loop_body(&body.stmts);
            }
            StmtKind::Train { count, body } => {
                self.expr(count);
                self.bound.insert("step".into());
                self.loop_body(&body.stmts);
                self.bound.insert("last_losses".into());
            }
            StmtKind::For { var, iter, body } => {
                self.expr(iter);
                self.bound.insert(var.name.clone());
                self.loop_body(&body.stmts);
                self.bound.insert("last_rows".into());
            }
            StmtKind::Experiment { name, body } => {
                self.expr(name);
                self.stmts(&body.stmts);
            }
            StmtKind::Fn(_) => {}
            StmtKind::Error => {}
        }
    }

    fn expr(&mut self, e: &'a Expr) {
        match &e.kind {
            ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Error => {}
            ExprKind::Var(name) => {
                if !self.bound.contains(name) && !is_implicit(name) {
                    if let Some((def, outer)) = &self.in_fn {
                        if outer.contains(name) || name == "step" {
                            self.out
                                .push(signature::not_visible_error(def, name, e.span));
                            return;
                        }
                    }
                    let d = if builtins::lookup(name).is_some() {
                        crate::errors::undefined_name(
                            name,
                            e.span,
                            "not bound before this point",
                            [],
                        )
                        .help(format!("`{name}` is a builtin: call it as `{name}(...)`"))
                    } else {
                        let known = self.bound.iter().map(|s| s.as_str());
                        crate::errors::undefined_name(
                            name,
                            e.span,
                            "not bound before this point",
                            known,
                        )
                    };
                    self.out.push(d);
                }
            }
            ExprKind::Call { name, args } => match builtins::lookup(&name.name) {
                None => match self.fns.get(&name.name) {
                    Some(def) if def.params.len() != args.len() => self
                        .out
                        .push(signature::fn_arity_error(def, args.len(), e.span)),
                    Some(_) => {}
                    None => self.out.push(unknown_function(
                        &name.name,
                        name.span,
                        self.fns.keys().map(String::as_str),
                    )),
                },
                Some(b) => {
                    if let Some((def, _)) = &self.in_fn {
                        if b.params.iter().any(|p| p.kind == builtins::ParamKind::Lazy) {
                            self.out
                                .push(signature::by_name_builtin_in_fn(def, &name.name, name.span));
                        }
                    }
                    let n = args.len();
                    if n < b.min_args() || n > b.max_args() {
                        self.out.push(
                            Diagnostic::of(code::E0103)
                                .at(
                                    e.span,
                                    format!("{n} argument{} given", if n == 1 { "" } else { "s" }),
                                )
                                .note(format!("{}, got {n}", b.arity_text()))
                                .help(format!("the accepted form is `{}`", b.signature())),
                        );
                    }
                }
            },
            ExprKind::List(_)
            | ExprKind::Ctor { .. }
            | ExprKind::Neg(_)
            | ExprKind::Paren(_)
            | ExprKind::Chain { .. }
            | ExprKind::Device { .. } => {}
        }
        walk::children(e).for_each(|c| self.expr(c));
        if let Some(body) = walk::device_body(e) {
            self.stmts(&body.stmts);
        }
    }
}

/// Names bound by the runtime itself (LANGUAGE Appendix A) that a program may read
/// without assigning: generated parameter names and throughput variables.
fn is_implicit(name: &str) -> bool {
    name.starts_with("__") || name.starts_with("mlpl_device_throughput_gflops")
}

fn collect_assigned(stmts: &[Stmt], out: &mut Vec<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Assign { name, .. } | StmtKind::Annotated { name, .. } => {
                out.push(name.name.clone())
            }
            StmtKind::Repeat { body, .. } | StmtKind::Experiment { body, .. } => {
                collect_assigned(&body.stmts, out)
            }
            StmtKind::Train { body, .. } => {
                out.push("step".into());
                collect_assigned(&body.stmts, out)
            }
            StmtKind::For { var, body, .. } => {
                out.push(var.name.clone());
                collect_assigned(&body.stmts, out)
            }
            StmtKind::Expr(_) | StmtKind::Fn(_) | StmtKind::Error => {}
        }
    }
}
