//! User functions in the checker (docs/language.md, "Functions").
//!
//! A definition's body is checked once with symbolic dimensions: each annotated
//! parameter is an array whose axes are the signature's names as size symbols
//! (`[batch, T, d]`), with unknown axis names; an unannotated parameter is
//! unknown. Errors found there hold for every call. The declared result shape is
//! unified with the body's result.
//!
//! Each call unifies its arguments with the signature through the rule shared
//! with the interpreter ([`crate::errors::signature`]); a mismatch is reported
//! at the argument, with the parameter's declaration as related information.
//! The body is then checked again with the call's arguments (an instantiation):
//! an error that only this instantiation triggers is reported in the body with
//! a label at the call. Recursive calls and instantiations nested deeper than
//! [`MAX_INSTANTIATION`] use the declared result shape instead (or unknown).
//! Unknown sizes, names and kinds never mismatch.

use std::rc::Rc;

use super::abstract_value::{AbsArray, AbsValue, AxisName, Dim};
use super::env::Env;
use super::expr::Checker;
use crate::errors::signature::{self, ArgShape, AxName, Size, Unifier};
use mlpl_diag::Span;
use mlpl_syntax::{DimSigKind, Expr, FnDef, ShapeSig};

/// How deeply calls are re-checked with their arguments.
pub const MAX_INSTANTIATION: usize = 4;

/// What the signature check sees of an abstract value.
pub fn abs_arg_shape(v: &AbsValue) -> ArgShape {
    match v {
        AbsValue::Unknown => ArgShape::Unknown,
        AbsValue::Array(a) => match &a.dims {
            None => ArgShape::Unknown,
            Some(dims) => ArgShape::Axes(
                dims.iter()
                    .enumerate()
                    .map(|(i, d)| {
                        let size = match d {
                            Dim::Known(n) => Size::Known(*n),
                            Dim::Symbol(s) => Size::Sym(s.clone()),
                            Dim::Unknown => Size::Unknown,
                        };
                        let name = match a.name_of(i) {
                            AxisName::Named(n) => AxName::Named(n.to_string()),
                            AxisName::Unnamed => AxName::Unnamed,
                            AxisName::Unknown => AxName::Unknown,
                        };
                        (size, name)
                    })
                    .collect(),
            ),
        },
        other => ArgShape::NotArray(other.kind_name().unwrap_or("value")),
    }
}

/// An abstract array from sizes and names as the unifier knows them.
fn abs_of(axes: Vec<(Size, AxName)>) -> AbsValue {
    let mut a = AbsArray::unknown();
    a.names = axes
        .iter()
        .map(|(_, n)| match n {
            AxName::Named(n) => AxisName::Named(n.as_str().into()),
            AxName::Unnamed => AxisName::Unnamed,
            AxName::Unknown => AxisName::Unknown,
        })
        .collect();
    a.dims = Some(
        axes.into_iter()
            .map(|(s, _)| match s {
                Size::Known(n) => Dim::Known(n),
                Size::Sym(s) => Dim::Symbol(s),
                Size::Unknown => Dim::Unknown,
            })
            .collect(),
    );
    AbsValue::Array(a)
}

/// A parameter as the body sees it when checked with symbolic dimensions.
pub(crate) fn symbolic(shape: Option<&ShapeSig>) -> AbsValue {
    let Some(sig) = shape else {
        return AbsValue::Unknown;
    };
    abs_of(
        sig.dims
            .iter()
            .map(|d| {
                let size = match &d.kind {
                    DimSigKind::Name(n) => Size::Sym(n.clone()),
                    DimSigKind::Size(k) => Size::Known(*k),
                    DimSigKind::Any => Size::Unknown,
                    DimSigKind::Binary { .. } => Size::Sym(d.text()),
                };
                (size, AxName::Unknown)
            })
            .collect(),
    )
}

impl Checker {
    /// `fn name(...) { ... }`: records the function and checks its body once
    /// with symbolic dimensions.
    pub(super) fn define(&mut self, def: &FnDef) -> AbsValue {
        let def = Rc::new(def.clone());
        self.fns.insert(def.name.name.clone(), def.clone());
        let args: Vec<AbsValue> = def
            .params
            .iter()
            .map(|p| symbolic(p.shape.as_ref()))
            .collect();
        if let Some(result) = self.run_body(&def, &args) {
            let mut u = Unifier::default();
            let shapes: Vec<ArgShape> = args.iter().map(abs_arg_shape).collect();
            if u.params(&def, &shapes).is_ok() {
                if let Err(m) = u.result(&def, &abs_arg_shape(&result)) {
                    let at = def.body.stmts.last().map_or(def.body.span, |s| s.span);
                    self.report(signature::signature_mismatch(&def, &m, at));
                }
            }
        }
        AbsValue::scalar(0.0)
    }

    /// The body of `def` with its parameters bound to `args`, in a scope of its
    /// own; `None` when it is not analysed (recursion, nesting too deep).
    fn run_body(&mut self, def: &Rc<FnDef>, args: &[AbsValue]) -> Option<AbsValue> {
        if self.fn_stack.iter().any(|n| *n == def.name.name)
            || self.fn_stack.len() >= MAX_INSTANTIATION
        {
            return None;
        }
        let mut env = Env::default();
        for (p, v) in def.params.iter().zip(args) {
            env.assign(&p.name.name, v.clone(), false);
        }
        let saved_env = std::mem::replace(&mut self.env, env);
        let saved_loss = self.loss.take();
        let depths = (self.loop_depth, self.train_depth, self.plain_loop_depth);
        (self.loop_depth, self.train_depth, self.plain_loop_depth) = (0, 0, 0);
        self.fn_stack.push(def.name.name.clone());
        let v = self.block(&def.body.stmts);
        self.fn_stack.pop();
        (self.loop_depth, self.train_depth, self.plain_loop_depth) = depths;
        self.loss = saved_loss;
        self.env = saved_env;
        Some(v)
    }

    /// A call of the user function `def`.
    pub(super) fn call_fn(&mut self, def: Rc<FnDef>, args: &[Expr], span: Span) -> AbsValue {
        let vals: Vec<AbsValue> = args.iter().map(|a| self.expr(a)).collect();
        if args.len() != def.params.len() {
            // E0103 is the name checker's.
            return AbsValue::Unknown;
        }
        let shapes: Vec<ArgShape> = vals.iter().map(abs_arg_shape).collect();
        let mut u = Unifier::default();
        let declared = |u: &Unifier| {
            def.ret
                .as_ref()
                .map_or(AbsValue::Unknown, |r| abs_of(u.instantiate(r)))
        };
        if let Err(m) = u.params(&def, &shapes) {
            let at = m.param.map_or(span, |p| args[p].span);
            self.report(signature::signature_mismatch(&def, &m, at));
            return declared(&u);
        }
        let out_len = self.out.len();
        let result = self.run_body(&def, &vals);
        let label = format!("in this call of `{}`", def.name.name);
        let Some(result) = result else {
            return declared(&u);
        };
        if let Err(m) = u.result(&def, &abs_arg_shape(&result)) {
            let at = def.body.stmts.last().map_or(def.body.span, |s| s.span);
            self.report(signature::signature_mismatch(&def, &m, at));
        }
        // What only this instantiation found points at the call too.
        for d in &mut self.out[out_len..] {
            let inside = d.primary.as_ref().is_some_and(|l| {
                l.span.start >= def.body.span.start && l.span.end <= def.body.span.end
            });
            if inside {
                *d = d.clone().with_label(span, label.clone());
            }
        }
        match (&result, def.ret.as_ref()) {
            (AbsValue::Array(a), Some(_)) if a.dims.is_none() => declared(&u),
            (AbsValue::Unknown, Some(_)) => declared(&u),
            _ => result,
        }
    }
}
