//! User functions' signatures (docs/language.md, "Functions"): unifying the
//! arguments of a call, and the body's result, with the declared shapes, and the
//! E0219 / E0111 / E0112 / E0412 diagnostics. The interpreter gives exact sizes
//! and names; the checker gives what it knows (symbolic or unknown sizes and
//! names never mismatch). Both report through these functions, so a static and a
//! runtime error read the same.
//!
//! The rule (jaxtyping's, extended to axis names): a dimension name binds at its
//! first plain use, scanning the parameters left to right, to that axis's size
//! and name; every other use must agree. Sizes agree when equal; names agree
//! unless both are named differently. Arithmetic (`2 * d`) is checked once the
//! names in it are bound; `_` accepts anything.

use std::collections::HashMap;

use mlpl_diag::{code, Diagnostic, Span};
use mlpl_syntax::{DimSig, DimSigKind, FnDef, ShapeSig};

/// One axis size as a caller knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Size {
    /// Known exactly.
    Known(usize),
    /// Fixed but not known (a symbol: equal symbols are equal sizes).
    Sym(String),
    /// Not known.
    Unknown,
}

/// One axis name as a caller knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum AxName {
    /// The axis has this name.
    Named(String),
    /// The axis has no name.
    Unnamed,
    /// Not known.
    Unknown,
}

/// What is known about one argument.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgShape {
    /// An array with these axes (rank known).
    Axes(Vec<(Size, AxName)>),
    /// An array, or a value of unknown kind, whose rank is unknown.
    Unknown,
    /// Not an array: its kind's name.
    NotArray(&'static str),
}

/// What a dimension name is bound to, and where it was bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    /// Its size.
    pub size: Size,
    /// Its axis name.
    pub name: AxName,
    /// The parameter (index) and axis that bound it; `None` for the result.
    pub by: Option<(usize, usize)>,
}

/// A disagreement between an argument (or the result) and the signature.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The parameter's index, or `None` for the declared result.
    pub param: Option<usize>,
    /// What disagrees, for the label at the argument.
    pub label: String,
    /// How the name was bound, when a binding is involved.
    pub note: Option<String>,
}

/// The dimension-name bindings of one call.
#[derive(Clone, Debug, Default)]
pub struct Unifier {
    /// Each dimension name's binding.
    pub binds: HashMap<String, Bound>,
}

fn size_text(s: &Size) -> String {
    match s {
        Size::Known(n) => n.to_string(),
        Size::Sym(s) => s.clone(),
        Size::Unknown => "?".into(),
    }
}

fn shape_text(axes: &[(Size, AxName)]) -> String {
    let items: Vec<String> = axes
        .iter()
        .map(|(s, n)| match n {
            AxName::Named(n) => format!("{n}={}", size_text(s)),
            _ => size_text(s),
        })
        .collect();
    format!("[{}]", items.join(", "))
}

impl Unifier {
    fn where_bound(&self, def: &FnDef, dim: &str) -> Option<String> {
        let b = self.binds.get(dim)?;
        let (p, axis) = b.by?;
        let name = &def.params.get(p)?.name.name;
        let named = match &b.name {
            AxName::Named(n) => format!(", named `{n}`"),
            _ => String::new(),
        };
        Some(format!(
            "`{dim}` was bound to {} by `{name}` (axis {axis}{named})",
            size_text(&b.size)
        ))
    }

    /// Unifies one shape with `axes`; `who` is the parameter (or `None` for the
    /// result). `arith` selects the pass: plain names, sizes and `_` first, then
    /// the arithmetic once names are bound.
    fn shape(
        &mut self,
        def: &FnDef,
        who: Option<usize>,
        sig: &ShapeSig,
        arg: &ArgShape,
        arith: bool,
    ) -> Result<(), Mismatch> {
        let what = match who {
            Some(p) => format!("`{}`", def.params[p].name.name),
            None => "the result".to_string(),
        };
        let axes = match arg {
            ArgShape::Unknown => return Ok(()),
            ArgShape::NotArray(kind) => {
                return Err(Mismatch {
                    param: who,
                    label: format!("{what} is declared `{}` but this is a {kind}", sig.text()),
                    note: None,
                })
            }
            ArgShape::Axes(axes) => axes,
        };
        if axes.len() != sig.dims.len() {
            return Err(Mismatch {
                param: who,
                label: format!(
                    "{what} is declared `{}` (rank {}) but this has shape {} (rank {})",
                    sig.text(),
                    sig.dims.len(),
                    shape_text(axes),
                    axes.len()
                ),
                note: None,
            });
        }
        for (i, (dim, (size, name))) in sig.dims.iter().zip(axes).enumerate() {
            let fail = |label: String, note: Option<String>| Mismatch {
                param: who,
                label: format!("{what} is declared `{}`, but {label}", sig.text()),
                note,
            };
            match &dim.kind {
                DimSigKind::Any => {}
                DimSigKind::Size(k) if !arith => {
                    if let Size::Known(m) = size {
                        if m != k {
                            return Err(fail(format!("axis {i} has size {m}, not {k}"), None));
                        }
                    }
                }
                DimSigKind::Name(n) if !arith => match self.binds.get(n).cloned() {
                    None => {
                        self.binds.insert(
                            n.clone(),
                            Bound {
                                size: size.clone(),
                                name: name.clone(),
                                by: who.map(|p| (p, i)),
                            },
                        );
                    }
                    Some(b) => {
                        if let (Size::Known(a), Size::Known(m)) = (&b.size, size) {
                            if a != m {
                                return Err(fail(
                                    format!("axis {i} (`{n}`) has size {m}, and `{n}` is {a}"),
                                    self.where_bound(def, n),
                                ));
                            }
                        }
                        if let (AxName::Named(a), AxName::Named(m)) = (&b.name, name) {
                            if a != m {
                                return Err(fail(
                                    format!("axis {i} (`{n}`) is named `{m}`, and `{n}` is the axis named `{a}`"),
                                    self.where_bound(def, n),
                                ));
                            }
                        }
                        let e = self.binds.get_mut(n).expect("bound");
                        if matches!(e.size, Size::Unknown) {
                            e.size = size.clone();
                        }
                        if !matches!(e.name, AxName::Named(_)) && matches!(name, AxName::Named(_)) {
                            e.name = name.clone();
                        }
                    }
                },
                DimSigKind::Binary { .. } if arith => {
                    if let (Some(want), Size::Known(m)) = (self.eval(dim), size) {
                        if want != *m {
                            let names = dim.names();
                            let note = names
                                .iter()
                                .filter_map(|n| self.where_bound(def, n))
                                .collect::<Vec<_>>()
                                .join("; ");
                            return Err(fail(
                                format!("axis {i} (`{}` = {want}) has size {m}", dim.text()),
                                (!note.is_empty()).then_some(note),
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The size of a signature axis under the bindings, when it is known.
    pub fn eval(&self, dim: &DimSig) -> Option<usize> {
        dim.eval(&|n| match self.binds.get(n) {
            Some(Bound {
                size: Size::Known(k),
                ..
            }) => Some(*k),
            _ => None,
        })
    }

    /// Unifies every annotated parameter with its argument (`args` in
    /// parameter order). The first mismatch, if any.
    pub fn params(&mut self, def: &FnDef, args: &[ArgShape]) -> Result<(), Mismatch> {
        for arith in [false, true] {
            for (p, (param, arg)) in def.params.iter().zip(args).enumerate() {
                if let Some(sig) = &param.shape {
                    self.shape(def, Some(p), sig, arg, arith)?;
                }
            }
        }
        Ok(())
    }

    /// Unifies the body's result with the declared result shape, if any.
    pub fn result(&mut self, def: &FnDef, result: &ArgShape) -> Result<(), Mismatch> {
        let Some(sig) = &def.ret else { return Ok(()) };
        self.shape(def, None, sig, result, false)?;
        self.shape(def, None, sig, result, true)
    }

    /// A declared shape with the bound sizes and names filled in (unknown
    /// where nothing is bound).
    pub fn instantiate(&self, sig: &ShapeSig) -> Vec<(Size, AxName)> {
        sig.dims
            .iter()
            .map(|d| match &d.kind {
                DimSigKind::Name(n) => match self.binds.get(n) {
                    Some(b) => (b.size.clone(), b.name.clone()),
                    None => (Size::Unknown, AxName::Unknown),
                },
                DimSigKind::Size(k) => (Size::Known(*k), AxName::Unknown),
                _ => match self.eval(d) {
                    Some(k) => (Size::Known(k), AxName::Unknown),
                    None => (Size::Unknown, AxName::Unknown),
                },
            })
            .collect()
    }
}

/// E0219 for a mismatch at a call: at the argument (`arg_span`) or, for the
/// result, at the body's last statement, with the declaration as related
/// information.
pub fn signature_mismatch(def: &FnDef, m: &Mismatch, at: Span) -> Diagnostic {
    let f = &def.name.name;
    let (msg, decl_span, decl_label) = match m.param {
        Some(p) => {
            let param = &def.params[p];
            (
                format!(
                    "argument `{}` does not match the signature of `{f}`",
                    param.name.name
                ),
                param.span,
                format!("parameter `{}` declared here", param.name.name),
            )
        }
        None => (
            format!("the result of `{f}` does not match its declared shape"),
            def.ret.as_ref().map_or(def.sig_span, |r| r.span),
            "result shape declared here".to_string(),
        ),
    };
    let mut d = Diagnostic::error(code::E0219, msg)
        .at(at, m.label.clone())
        .with_label(decl_span, decl_label);
    if let Some(n) = &m.note {
        d = d.note(n.clone());
    }
    d.note(format!("the signature is `{}`", def.signature()))
}

/// E0103 for a call of a user function with the wrong number of arguments.
pub fn fn_arity_error(def: &FnDef, given: usize, span: Span) -> Diagnostic {
    let n = def.params.len();
    Diagnostic::of(code::E0103)
        .at(
            span,
            format!(
                "{given} argument{} given",
                if given == 1 { "" } else { "s" }
            ),
        )
        .with_label(def.sig_span, "defined here")
        .note(format!(
            "`{}` takes {n} argument{}, got {given}",
            def.name.name,
            if n == 1 { "" } else { "s" }
        ))
        .help(format!("the signature is `{}`", def.signature()))
}

/// E0111: a function body reads `name`, which is neither a parameter nor
/// assigned in the body before the read.
pub fn not_visible_error(def: &FnDef, name: &str, span: Span) -> Diagnostic {
    let f = &def.name.name;
    Diagnostic::of(code::E0111)
        .at(span, format!("`{name}` is not a parameter or local variable of `{f}`"))
        .with_label(def.sig_span, "the function's parameters")
        .note("a function sees only its arguments, the variables its body assigns, and other functions")
        .help(format!("pass `{name}` as an argument: add a parameter to `{f}` and give it at each call"))
}

/// E0111 for a builtin that reads or writes workspace variables by name
/// (`grad`, the optimizers), called inside a function.
pub fn by_name_builtin_in_fn(def: &FnDef, builtin: &str, span: Span) -> Diagnostic {
    Diagnostic::error(
        code::E0111,
        format!("`{builtin}` cannot be called inside a function"),
    )
    .at(
        span,
        format!("`{builtin}` refers to workspace variables by name"),
    )
    .with_label(def.sig_span, "inside this function")
    .note("a function sees only its arguments; `grad` and the optimizers name workspace variables")
    .help(format!(
        "call `{builtin}` outside the function, with a loss that calls `{}`",
        def.name.name
    ))
}

/// E0112: a definition named like a builtin.
pub fn builtin_name_error(def: &FnDef) -> Diagnostic {
    let f = &def.name.name;
    Diagnostic::error(
        code::E0112,
        format!("function `{f}` has the name of a builtin"),
    )
    .at(def.name.span, "a builtin has this name")
    .note("a name means one thing: functions may not shadow builtins")
    .help(format!("choose another name, e.g. `my_{f}`"))
}

/// The most deeply user functions may call each other (E0412).
pub const MAX_CALL_DEPTH: usize = 64;

/// E0412: a call past [`MAX_CALL_DEPTH`].
pub fn recursion_error(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error(
        code::E0412,
        format!("recursion too deep: more than {MAX_CALL_DEPTH} nested calls of user functions"),
    )
    .at(
        span,
        format!("this call of `{name}` would exceed the limit"),
    )
    .note(format!(
        "functions may nest at most {MAX_CALL_DEPTH} calls deep"
    ))
    .help("give the recursion a bound that ends sooner, or use a loop")
}
