//! The interface between the checker and the shape rules of the builtin registry:
//! a [`ShapeCtx`] holds one call's abstract arguments with their spans, and offers
//! the same argument readers as the interpreter's `Call` (kinds, ranks, scalars,
//! counts, axes, shapes), raising the same diagnostics with the same wording, but
//! only when the condition is proven.

use super::abstract_value::{AbsArray, AbsValue, AxisName, Dim, MAX_CONST};
use super::env::FxHashMap;
use crate::builtins::site::CallSite;
use crate::builtins::Builtin;
use crate::display::format_f64;
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

/// One argument of a call, evaluated abstractly.
#[derive(Clone, Debug)]
pub struct RuleArg<'a> {
    /// Its abstract value (`Unknown` for names and lazy arguments).
    pub value: AbsValue,
    /// For a names argument (LANGUAGE §5.8): the names, when they are constants.
    pub names: Option<Vec<Option<String>>>,
    /// For a names argument: whether it was written as a bracketed list.
    pub is_list: bool,
    /// Its source span.
    pub span: Span,
    /// Its expression.
    pub expr: &'a Expr,
}

/// Fresh size symbols (`N`, `C`, `T`, ...), one per call site, so that sizes
/// read from the same site compare equal and sizes from different sites do not.
#[derive(Debug, Default, Clone)]
pub struct Symbols {
    by_site: FxHashMap<(usize, String), String>,
    counts: FxHashMap<String, usize>,
    /// The next placeholder parameter id for statically built layers.
    next_id: u64,
}

impl Symbols {
    /// The symbol for `base` at the call starting at byte `site`.
    pub fn get(&mut self, site: usize, base: &str) -> String {
        if let Some(s) = self.by_site.get(&(site, base.to_string())) {
            return s.clone();
        }
        let n = self.counts.entry(base.to_string()).or_insert(0);
        *n += 1;
        let s = if *n == 1 {
            base.to_string()
        } else {
            format!("{base}{n}")
        };
        self.by_site.insert((site, base.to_string()), s.clone());
        s
    }
}

/// One builtin call under analysis.
pub struct ShapeCtx<'a> {
    /// The builtin being called.
    pub builtin: &'static Builtin,
    /// The whole call expression.
    pub span: Span,
    /// The builtin's name in the source.
    pub name_span: Span,
    /// The arguments.
    pub args: Vec<RuleArg<'a>>,
    /// Warnings the rule proved (W0202, W0203, ...).
    pub warnings: Vec<Diagnostic>,
    /// Set by a rule whose builtin re-binds a bare variable argument to its result
    /// (`to_device(x, "cuda")`): the index of that argument.
    pub rebind: Option<usize>,
    pub(crate) symbols: &'a mut Symbols,
    /// Inside a loop body a call site can give a different size on every
    /// iteration, so fresh symbols are not used there.
    pub(crate) in_loop: bool,
}

impl CallSite for ShapeCtx<'_> {
    fn builtin(&self) -> &'static Builtin {
        self.builtin
    }

    fn arg_span(&self, i: usize) -> Span {
        self.args.get(i).map_or(self.span, |a| a.span)
    }

    fn push_warning(&mut self, d: Diagnostic) {
        self.warnings.push(d);
    }
}

impl<'a> ShapeCtx<'a> {
    /// A context for a call (used by the checker and by tests of rules).
    pub fn new(
        builtin: &'static Builtin,
        span: Span,
        name_span: Span,
        args: Vec<RuleArg<'a>>,
        symbols: &'a mut Symbols,
        in_loop: bool,
    ) -> ShapeCtx<'a> {
        ShapeCtx {
            builtin,
            span,
            name_span,
            args,
            warnings: Vec::new(),
            rebind: None,
            symbols,
            in_loop,
        }
    }

    /// Number of arguments given.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Whether no argument was given.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// Whether argument `i` was given.
    pub fn has(&self, i: usize) -> bool {
        i < self.args.len()
    }

    /// The abstract value of argument `i` (`Unknown` if absent).
    pub fn value(&self, i: usize) -> &AbsValue {
        static UNKNOWN: AbsValue = AbsValue::Unknown;
        self.args.get(i).map_or(&UNKNOWN, |a| &a.value)
    }

    /// A fresh placeholder id for a layer built statically (distinct layers get
    /// distinct parameter names, so parameter counts are right).
    pub fn fresh_id(&mut self) -> u64 {
        self.symbols.next_id += 1;
        self.symbols.next_id
    }

    /// A size symbol for this call site (`N`, `T`, ...), or an unknown size inside
    /// a loop body.
    pub fn fresh(&mut self, base: &str) -> Dim {
        if self.in_loop {
            Dim::Unknown
        } else {
            Dim::Symbol(self.symbols.get(self.span.start, base))
        }
    }

    /// The kind error (E0301–E0304) for argument `i` holding a `got`.
    pub fn kind_error(
        &self,
        i: usize,
        code: &'static str,
        headline: &str,
        got: &str,
    ) -> Diagnostic {
        let expected = self
            .builtin
            .param_at(i)
            .map_or("value", |p| p.kind.describe());
        Diagnostic::error(code, headline)
            .at(self.arg_span(i), format!("this is a {got}"))
            .note(format!(
                "argument `{}` of `{}` must be a {expected}",
                self.param_name(i),
                self.name()
            ))
    }

    /// Argument `i` as an array: `Some` when it is one, `None` when its kind is
    /// unknown, E0301 when it is provably something else.
    pub fn array(&self, i: usize) -> Result<Option<AbsArray>, Diagnostic> {
        match self.value(i) {
            AbsValue::Array(a) => Ok(Some(a.clone())),
            AbsValue::Unknown => Ok(None),
            other => Err(self.kind_error(
                i,
                code::E0301,
                "expected an array",
                other.kind_name().unwrap_or("value"),
            )),
        }
    }

    /// Argument `i` as a string: `Ok(Some(text))` for a constant, `Ok(None)` when
    /// not known, E0302 when it is provably not a string.
    pub fn string(&self, i: usize) -> Result<Option<String>, Diagnostic> {
        match self.value(i) {
            AbsValue::Str(s) => Ok(s.clone()),
            AbsValue::Unknown => Ok(None),
            other => Err(self.kind_error(
                i,
                code::E0302,
                "expected a string",
                other.kind_name().unwrap_or("value"),
            )),
        }
    }

    /// Argument `i` as a model: `Ok(Some(tree))` when its layers are known,
    /// `Ok(None)` when not, E0303 when it is provably not a model.
    pub fn model(&self, i: usize) -> Result<Option<super::models::AbsModel>, Diagnostic> {
        match self.value(i) {
            AbsValue::Model(m) => Ok(m.clone()),
            AbsValue::Unknown => Ok(None),
            other => Err(self.kind_error(
                i,
                code::E0303,
                "expected a model",
                other.kind_name().unwrap_or("value"),
            )),
        }
    }

    /// Checks that argument `i` can be a tokenizer (E0304 otherwise).
    pub fn tokenizer(&self, i: usize) -> Result<(), Diagnostic> {
        match self.value(i) {
            AbsValue::Tokenizer(_) | AbsValue::Unknown => Ok(()),
            other => Err(self.kind_error(
                i,
                code::E0304,
                "expected a tokenizer",
                other.kind_name().unwrap_or("value"),
            )),
        }
    }

    /// E0205 for argument `i` (of shape `got`) having the wrong rank.
    pub fn rank_error(&self, i: usize, got: &AbsArray, expected: &str) -> Diagnostic {
        self.rank_error_for(i, &got.shape_text(), expected)
    }

    /// Argument `i` as an array whose rank, when known, is `rank` (E0205 otherwise).
    pub fn array_of_rank(
        &self,
        i: usize,
        rank: usize,
        expected: &str,
    ) -> Result<Option<AbsArray>, Diagnostic> {
        let Some(a) = self.array(i)? else {
            return Ok(None);
        };
        match a.rank() {
            Some(r) if r != rank => Err(self.rank_error(i, &a, expected)),
            _ => Ok(Some(a)),
        }
    }

    /// Argument `i` as a scalar: its value when constant (E0205 "a scalar" when its
    /// rank is provably not 0).
    pub fn scalar(&self, i: usize) -> Result<Option<f64>, Diagnostic> {
        Ok(self
            .array_of_rank(i, 0, "a scalar")?
            .and_then(|a| a.scalar_value()))
    }

    /// Reads a constant `v` of argument `i` as a count (LANGUAGE §6.7), with W0202
    /// and W0203 as at run time.
    pub fn to_count(&mut self, i: usize, v: f64) -> usize {
        if v.is_nan() {
            return 0;
        }
        if v.fract() != 0.0 && v.is_finite() {
            self.warn_of(
                i,
                code::W0202,
                format!("{} is read as {}", format_f64(v), v.trunc()),
            );
        }
        if v < 0.0 {
            self.warn_of(i, code::W0203, "negative");
            return 0;
        }
        v.trunc().min(usize::MAX as f64) as usize
    }

    /// Argument `i` as a count: its value when constant.
    pub fn count(&mut self, i: usize) -> Result<Option<usize>, Diagnostic> {
        Ok(self.scalar(i)?.map(|v| self.to_count(i, v)))
    }

    /// Argument `i` as a seed: a scalar, with W0202 for a constant fraction.
    pub fn seed(&mut self, i: usize) -> Result<(), Diagnostic> {
        if let Some(v) = self.scalar(i)? {
            if v.fract() != 0.0 && v.is_finite() {
                self.warn_of(
                    i,
                    code::W0202,
                    format!("seed {} is read as {}", format_f64(v), v.trunc()),
                );
            }
        }
        Ok(())
    }

    /// Argument `i` as an exact integer: its value when constant (E0401 for a
    /// constant that is not an integer).
    pub fn integer(&self, i: usize) -> Result<Option<i64>, Diagnostic> {
        match self.scalar(i)? {
            Some(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15 => Ok(Some(v as i64)),
            Some(v) => Err(self.invalid(i, format!("{} is not an integer", format_f64(v)))),
            None => Ok(None),
        }
    }

    /// Argument `i` as an axis of `a` (LANGUAGE §8.5): the axis number when it is
    /// proven; E0206, E0207 and E0208 when they are.
    pub fn axis(&self, i: usize, a: &AbsArray) -> Result<Option<usize>, Diagnostic> {
        match self.value(i) {
            AbsValue::Str(name) => {
                let Some(name) = name else { return Ok(None) };
                if !name.is_empty() && a.rank().is_none() {
                    return Ok(None);
                }
                if name.is_empty() || a.provably_unnamed() {
                    return Err(Diagnostic::of(code::E0208)
                        .at(self.arg_span(i), format!("axis name \"{name}\""))
                        .note(format!("the array has shape {}", a.shape_text()))
                        .help("name its axes first, for example with `label(x, [\"batch\", \"feat\"])`, or pass an axis number"));
                }
                if let Some(p) = a.names.iter().position(|n| n.named() == Some(name)) {
                    // The first axis with that name, unless an earlier one is unknown.
                    if a.names[..p].iter().all(|n| *n != AxisName::Unknown) {
                        return Ok(Some(p));
                    }
                    return Ok(None);
                }
                if a.names.iter().all(|n| *n != AxisName::Unknown) {
                    return Err(Diagnostic::of(code::E0207)
                        .at(self.arg_span(i), format!("no axis is named \"{name}\""))
                        .note(format!("the array has shape {}", a.shape_text())));
                }
                Ok(None)
            }
            AbsValue::Array(_) => {
                let Some(v) = self.scalar(i)? else {
                    return Ok(None);
                };
                let Some(rank) = a.rank() else {
                    return Ok(None);
                };
                let n = v.trunc();
                let r = rank as f64;
                if !(n >= -r && n < r) || v.is_nan() {
                    return Err(Diagnostic::of(code::E0206)
                        .at(self.arg_span(i), format!("axis {}", format_f64(v)))
                        .note(format!(
                            "the array has rank {rank} (shape {}); valid axes are {} to {}",
                            a.shape_text(),
                            -(rank as i64),
                            rank as i64 - 1
                        )));
                }
                Ok(Some(if n < 0.0 {
                    (n + r) as usize
                } else {
                    n as usize
                }))
            }
            AbsValue::Unknown => Ok(None),
            other => Err(self.kind_error(
                i,
                code::E0301,
                "expected an array",
                other.kind_name().unwrap_or("value"),
            )),
        }
    }

    /// A shape argument (`zeros(shape)`, `random(seed, shape)`): an array whose
    /// elements are the sizes, read as counts. The sizes when the element count is
    /// known (each one known when the argument is a constant).
    pub fn shape_arg(&mut self, i: usize) -> Result<Option<Vec<Dim>>, Diagnostic> {
        let Some(a) = self.array(i)? else {
            return Ok(None);
        };
        if let Some(c) = &a.constant {
            let c = c.clone();
            return Ok(Some(
                c.into_iter()
                    .map(|v| Dim::Known(self.to_count(i, v)))
                    .collect(),
            ));
        }
        // A rank past any real array's: the sizes are not kept (the run refuses
        // the shape).
        Ok(a.numel()
            .filter(|&n| n <= MAX_CONST)
            .map(|n| vec![Dim::Unknown; n]))
    }

    /// The names of a names argument, when they are constants (LANGUAGE §5.8).
    pub fn names(&self, i: usize) -> Option<&[Option<String>]> {
        self.args.get(i)?.names.as_deref()
    }
}
