//! Calls of user-defined functions (docs/language.md, "Functions").
//!
//! A call evaluates its arguments in the caller's scope, left to right, checks
//! them against the signature (E0219, naming the function and the parameter),
//! then runs the body in a frame of its own: the parameters and what the body
//! assigns. A body reads no caller variable (E0111). Calls nest at most
//! [`MAX_CALL_DEPTH`] deep (E0412): the interpreter is recursive, and that
//! depth stays far inside a 2 MiB thread stack (a test runs the limit on one).
//! Arrays passed in keep their tape node, so a loss that calls functions is
//! differentiated through them; models built or applied in a body keep their
//! parameters in the workspace, as everywhere. A call's parameters and locals
//! count against the session's memory budget until it returns
//! (docs/limits.md).

use std::collections::HashMap;
use std::sync::Arc;

use super::Interp;
use crate::errors::signature::{self, ArgShape, AxName, Size, Unifier, MAX_CALL_DEPTH};
use crate::value::Value;
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{Expr, FnDef};

/// The scope of one running call.
#[derive(Debug)]
pub struct Frame {
    /// The function being run.
    pub def: Arc<FnDef>,
    /// Its parameters and the variables its body assigned.
    pub locals: HashMap<String, Value>,
}

/// What the signature check sees of a runtime value.
pub fn arg_shape(v: &Value) -> ArgShape {
    match v {
        Value::Array(a) => {
            let names = a.names();
            ArgShape::Axes(
                a.shape()
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        let name = match names.and_then(|ns| ns.get(i)).and_then(|n| n.as_deref()) {
                            Some(s) if !s.is_empty() => AxName::Named(s.to_string()),
                            _ => AxName::Unnamed,
                        };
                        (Size::Known(n), name)
                    })
                    .collect(),
            )
        }
        other => ArgShape::NotArray(other.kind_name()),
    }
}

impl Interp {
    /// `fn name(...) { ... }`: binds the function (E0112 for a builtin's name).
    pub(super) fn define(&mut self, def: &FnDef) -> Result<Value, Diagnostic> {
        if crate::builtins::lookup(&def.name.name).is_some() {
            return Err(signature::builtin_name_error(def));
        }
        self.ws
            .functions
            .insert(def.name.name.clone(), Arc::new(def.clone()));
        self.defined_this_run.insert(def.name.name.clone());
        Ok(Value::exact(0.0))
    }

    /// The function being run, if any.
    pub(crate) fn current_fn(&self) -> Option<&Arc<FnDef>> {
        self.frames.last().map(|f| &f.def)
    }

    /// Binds a variable in the current scope: the running call's frame, or the
    /// workspace.
    pub(crate) fn bind(&mut self, name: &str, value: Value, track: bool) {
        match self.frames.last_mut() {
            Some(f) => {
                // Counted against the session's budget as a variable is, until
                // the call returns.
                let label = super::ops::local_label(name, &f.def.name.name);
                super::ops::note_rebind(&label, f.locals.get(name), &value);
                f.locals.insert(name.to_string(), value);
            }
            None => self.ws.assign(name, value, track),
        }
    }

    /// A call of the user function `def`.
    pub(super) fn call_fn(
        &mut self,
        def: Arc<FnDef>,
        name_span: Span,
        args: &[Expr],
        span: Span,
    ) -> Result<Value, Diagnostic> {
        if args.len() != def.params.len() {
            return Err(signature::fn_arity_error(&def, args.len(), span));
        }
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            values.push(self.expr(a)?);
        }
        let mut u = Unifier::default();
        let shapes: Vec<ArgShape> = values.iter().map(arg_shape).collect();
        if let Err(m) = u.params(&def, &shapes) {
            let at = m.param.map_or(span, |p| args[p].span);
            return Err(signature::signature_mismatch(&def, &m, at));
        }
        if self.frames.len() >= MAX_CALL_DEPTH {
            return Err(signature::recursion_error(&def.name.name, name_span));
        }
        self.check_cancel(span)?;
        self.frames.push(Frame {
            def: def.clone(),
            locals: HashMap::new(),
        });
        for (p, v) in def.params.iter().zip(values) {
            self.bind(&p.name.name, v, false);
        }
        let result = self.block(&def.body.stmts);
        if let Some(frame) = self.frames.pop() {
            for (name, v) in &frame.locals {
                super::ops::note_unbind(&super::ops::local_label(name, &def.name.name), v);
            }
        }
        let foreign = !self.defined_this_run.contains(&def.name.name);
        let value = match result {
            Ok(v) => v,
            // A body from an earlier cell or a restore: its spans are not this
            // program's, so the error points at the call and says where in the
            // definition it happened.
            Err(d) if foreign && in_span(&d, def.body.span) => return Err(relocate(d, &def, span)),
            // A read the body makes on every call (E0111) is the body's alone,
            // as the checker reports it; anything else points at the call too.
            Err(d)
                if self.frames.is_empty()
                    && in_span(&d, def.body.span)
                    && d.code != mlpl_diag::code::E0111 =>
            {
                return Err(d.with_label(span, format!("in this call of `{}`", def.name.name)))
            }
            Err(d) => return Err(d),
        };
        if let Err(m) = u.result(&def, &arg_shape(&value)) {
            let at = def.body.stmts.last().map_or(def.body.span, |s| s.span);
            let d = signature::signature_mismatch(&def, &m, at);
            if foreign {
                return Err(relocate(d, &def, span));
            }
            return Err(d.with_label(span, format!("in this call of `{}`", def.name.name)));
        }
        Ok(value)
    }
}

/// Notes of where in its definition an error happened, kept for at most this
/// many nested calls (a deep recursion would otherwise repeat one per level).
const MAX_RELOCATION_NOTES: usize = 8;

/// `d`, raised in the body of `def` whose text is not the running program's,
/// moved to the call at `call`: each of its places becomes a note naming the
/// line and column in the definition, with that line's text.
fn relocate(mut d: Diagnostic, def: &FnDef, call: Span) -> Diagnostic {
    let name = &def.name.name;
    let labels: Vec<_> = d
        .primary
        .take()
        .into_iter()
        .chain(d.secondary.drain(..))
        .collect();
    let mut notes: Vec<String> = labels
        .iter()
        .filter_map(|l| place_in_definition(def, l.span).map(|p| (p, &l.message)))
        .map(|((line, col, text), msg)| {
            let msg = if msg.is_empty() { String::new() } else { format!(": {msg}") };
            format!(
                "in `{name}` (defined outside this cell), line {line}, column {col} of its definition{msg}\n    {text}"
            )
        })
        .collect();
    let earlier = d
        .notes
        .iter()
        .filter(|n| n.contains("(defined outside this cell)"))
        .count();
    notes.truncate(MAX_RELOCATION_NOTES.saturating_sub(earlier));
    notes.append(&mut d.notes);
    d.notes = notes;
    d.at(
        call,
        format!("in this call of `{name}`, a function defined outside this cell"),
    )
}

/// The 1-based line and column of `span`'s start in `def.source`, with the
/// text of that line (`def.source` starts at the definition's `fn`).
fn place_in_definition(def: &FnDef, span: Span) -> Option<(usize, usize, String)> {
    let offset = span.start.checked_sub(def.sig_span.start)?;
    let before = def.source.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    let text = def.source[line_start..]
        .lines()
        .next()
        .unwrap_or("")
        .trim_end();
    Some((line, col, text.to_string()))
}

fn in_span(d: &Diagnostic, outer: Span) -> bool {
    d.primary
        .as_ref()
        .is_some_and(|l| l.span.start >= outer.start && l.span.end <= outer.end)
}
