//! A builtin call in progress: its evaluated arguments and the helpers builtins use
//! to read them with the language's kind, rank and integer rules (LANGUAGE §1, §6.7).

use mlpl_diag::code;
use std::sync::Arc;

use super::Interp;
use crate::builtins::site::CallSite;
use crate::builtins::Builtin;
use crate::data::tokenizer::Tokenizer;
use crate::value::{named_shape, Array, Model, Value};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{Expr, ExprKind};

/// An argument after evaluation.
#[derive(Clone, Debug)]
pub enum ArgValue {
    /// An ordinary value.
    Value(Value),
    /// A names argument (LANGUAGE §5.8), already resolved to one entry per axis
    /// (`None` for an unnamed axis).
    Names(Vec<Option<String>>),
    /// Not evaluated: the builtin evaluates the expression itself (losses,
    /// parameter references, `grad`'s `wrt`).
    Lazy,
}

/// One argument: its value, where it is written and its expression.
#[derive(Clone, Debug)]
pub struct Arg<'e> {
    /// The evaluated argument.
    pub value: ArgValue,
    /// Its source span.
    pub span: Span,
    /// Its expression (some builtins look at its form, e.g. `to_device(x, ...)`).
    pub expr: &'e Expr,
}

/// A builtin call: the interpreter, the builtin and its arguments.
pub struct Call<'i, 'e> {
    /// The interpreter (workspace, devices, warnings).
    pub it: &'i mut Interp,
    /// The builtin being called.
    pub builtin: &'static Builtin,
    /// The whole call expression.
    pub span: Span,
    /// The builtin's name in the source.
    pub name_span: Span,
    /// Evaluated arguments.
    pub args: Vec<Arg<'e>>,
}

impl CallSite for Call<'_, '_> {
    fn builtin(&self) -> &'static Builtin {
        self.builtin
    }

    fn arg_span(&self, i: usize) -> Span {
        self.args.get(i).map_or(self.span, |a| a.span)
    }

    fn push_warning(&mut self, d: Diagnostic) {
        self.it.warn(d);
    }
}

impl<'i, 'e> Call<'i, 'e> {
    /// Number of arguments given.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Whether no argument was given.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// An error at the call.
    pub fn error(&self, code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(code, message).at(self.span, "")
    }

    /// Argument `i` as a value.
    pub fn value(&self, i: usize) -> &Value {
        match &self.args[i].value {
            ArgValue::Value(v) => v,
            ArgValue::Names(_) => unreachable!("names arguments are read with `names`"),
            ArgValue::Lazy => unreachable!("lazy arguments are evaluated by the builtin"),
        }
    }

    /// Argument `i` if given.
    pub fn has(&self, i: usize) -> bool {
        i < self.args.len()
    }

    /// Argument `i` as an array (E0301 otherwise).
    pub fn array(&self, i: usize) -> Result<&Array, Diagnostic> {
        match self.value(i) {
            Value::Array(a) => Ok(a),
            other => Err(self.kind_error(i, code::E0301, "expected an array", other)),
        }
    }

    /// Argument `i` as a string (E0302 otherwise).
    pub fn string(&self, i: usize) -> Result<&str, Diagnostic> {
        match self.value(i) {
            Value::Str(s) => Ok(s),
            other => Err(self.kind_error(i, code::E0302, "expected a string", other)),
        }
    }

    /// Argument `i` as a model (E0303 otherwise).
    pub fn model(&self, i: usize) -> Result<&Model, Diagnostic> {
        match self.value(i) {
            Value::Model(m) => Ok(m),
            other => Err(self.kind_error(i, code::E0303, "expected a model", other)),
        }
    }

    /// Argument `i` as a tokenizer (E0304 otherwise).
    pub fn tokenizer(&self, i: usize) -> Result<Arc<Tokenizer>, Diagnostic> {
        match self.value(i) {
            Value::Tokenizer(t) => Ok(t.clone()),
            other => Err(self.kind_error(i, code::E0304, "expected a tokenizer", other)),
        }
    }

    fn kind_error(&self, i: usize, code: &'static str, headline: &str, got: &Value) -> Diagnostic {
        Diagnostic::error(code, headline)
            .at(self.arg_span(i), format!("this is a {}", got.kind_name()))
            .note(format!(
                "argument `{}` of `{}` must be a {}",
                self.param_name(i),
                self.name(),
                self.expected_kind(i)
            ))
    }

    fn expected_kind(&self, i: usize) -> &'static str {
        self.builtin
            .param_at(i)
            .map_or("value", |p| p.kind.describe())
    }

    /// E0205 for argument `i` having the wrong rank.
    pub fn rank_error(&self, i: usize, expected: &str) -> Diagnostic {
        let got = self
            .value(i)
            .as_array()
            .map(named_shape)
            .unwrap_or_default();
        self.rank_error_for(i, &got, expected)
    }

    /// Argument `i` as an array of rank `rank` (E0205 otherwise).
    pub fn array_of_rank(
        &self,
        i: usize,
        rank: usize,
        expected: &str,
    ) -> Result<&Array, Diagnostic> {
        let a = self.array(i)?;
        if a.rank() == rank {
            Ok(a)
        } else {
            Err(self.rank_error(i, expected))
        }
    }

    /// Argument `i` as a scalar (E0205 "expected a scalar" otherwise).
    pub fn scalar(&self, i: usize) -> Result<f64, Diagnostic> {
        let a = self.array(i)?;
        a.scalar_value()
            .ok_or_else(|| self.rank_error(i, "a scalar"))
    }

    /// Argument `i` as a count or size (LANGUAGE §6.7): fractions truncate (W0202),
    /// negatives and NaN become 0 (W0203).
    pub fn count(&mut self, i: usize) -> Result<usize, Diagnostic> {
        let v = self.scalar(i)?;
        Ok(self.to_count(i, v))
    }

    /// Reads `v` (from argument `i`) as a count, with the warnings of §6.7.
    pub fn to_count(&mut self, i: usize, v: f64) -> usize {
        if v.is_nan() {
            return 0;
        }
        if v.fract() != 0.0 && v.is_finite() {
            self.warn_of(
                i,
                code::W0202,
                format!("{} is read as {}", crate::display::format_f64(v), v.trunc()),
            );
        }
        if v < 0.0 {
            self.warn_of(i, code::W0203, "negative");
            return 0;
        }
        v.trunc().min(usize::MAX as f64) as usize
    }

    /// Argument `i` as an integer that must be exact (E0401 otherwise).
    pub fn integer(&self, i: usize) -> Result<i64, Diagnostic> {
        let v = self.scalar(i)?;
        if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15 {
            Ok(v as i64)
        } else {
            Err(self.invalid(
                i,
                format!("{} is not an integer", crate::display::format_f64(v)),
            ))
        }
    }

    /// Argument `i` as a seed (LANGUAGE §13.1): truncated toward zero, with W0202
    /// for a non-integer seed (§6.7).
    pub fn seed(&mut self, i: usize) -> Result<u64, Diagnostic> {
        let v = self.scalar(i)?;
        if v.fract() != 0.0 && v.is_finite() {
            self.warn_of(
                i,
                code::W0202,
                format!(
                    "seed {} is read as {}",
                    crate::display::format_f64(v),
                    v.trunc()
                ),
            );
        }
        Ok(crate::data::rng::seed_from_f64(v))
    }

    /// Argument `i` as an axis of `a` (LANGUAGE §8.5): a number (negative counts from
    /// the end) or a name. Errors E0206, E0207, E0208.
    pub fn axis(&self, i: usize, a: &Array) -> Result<usize, Diagnostic> {
        let rank = a.rank();
        match self.value(i) {
            Value::Str(name) => {
                if name.is_empty() || a.names().is_none() {
                    return Err(Diagnostic::of(code::E0208)
                        .at(self.arg_span(i), format!("axis name \"{name}\""))
                        .note(format!("the array has shape {}", named_shape(a)))
                        .help("name its axes first, for example with `label(x, [\"batch\", \"feat\"])`, or pass an axis number"));
                }
                a.names()
                    .and_then(|ns| ns.iter().position(|n| n.as_deref() == Some(&**name)))
                    .ok_or_else(|| {
                        Diagnostic::of(code::E0207)
                            .at(self.arg_span(i), format!("no axis is named \"{name}\""))
                            .note(format!("the array has shape {}", named_shape(a)))
                    })
            }
            Value::Array(_) => {
                let v = self.scalar(i)?;
                let n = v.trunc();
                let r = rank as f64;
                if !(n >= -r && n < r) || v.is_nan() {
                    return Err(Diagnostic::of(code::E0206)
                        .at(
                            self.arg_span(i),
                            format!("axis {}", crate::display::format_f64(v)),
                        )
                        .note(format!(
                            "the array has rank {rank} (shape {}); valid axes are {} to {}",
                            named_shape(a),
                            -(rank as i64),
                            rank as i64 - 1
                        )));
                }
                Ok(if n < 0.0 {
                    (n + r) as usize
                } else {
                    n as usize
                })
            }
            other => Err(self.kind_error(i, code::E0301, "expected an array", other)),
        }
    }

    /// Argument `i` as a names list (LANGUAGE §5.8).
    pub fn names(&self, i: usize) -> &[Option<String>] {
        match &self.args[i].value {
            ArgValue::Names(n) => n,
            ArgValue::Value(_) | ArgValue::Lazy => unreachable!("parameter declared as names"),
        }
    }
}

/// Evaluates a names argument: a bracketed list of string expressions (each an axis
/// name, `""` for unnamed) or one string with comma-separated names.
pub fn eval_names(it: &mut Interp, e: &Expr) -> Result<ArgValue, Diagnostic> {
    if let ExprKind::List(items) = &e.unparen().kind {
        let mut names = Vec::with_capacity(items.len());
        for item in items {
            match it.expr(item)? {
                Value::Str(s) => names.push(Some(s.to_string()).filter(|s| !s.is_empty())),
                other => {
                    return Err(Diagnostic::of(code::E0302)
                        .at(item.span, format!("this is a {}", other.kind_name()))
                        .note("each entry of a names list is an axis name (a string)"))
                }
            }
        }
        return Ok(ArgValue::Names(names));
    }
    match it.expr(e)? {
        Value::Str(s) => Ok(ArgValue::Names(crate::value::split_names(&s))),
        other => Err(Diagnostic::of(code::E0302)
            .at(e.span, format!("this is a {}", other.kind_name()))
            .note("axis names are a list of strings, like [\"batch\", \"feat\"], or one string like \"batch,feat\"")),
    }
}

/// E0501 when two array arguments of a builtin call are placed on different
/// devices (LANGUAGE §14.4); rank-0 and floating arrays take no part.
pub fn check_placements(op: &str, args: &[Arg<'_>]) -> Result<(), Diagnostic> {
    let mut arrays = 0;
    let mut placed = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if let ArgValue::Value(Value::Array(a)) = &arg.value {
            if a.rank() == 0 {
                continue;
            }
            arrays += 1;
            if let crate::value::Placement::Placed(t) = a.placement() {
                placed.push((i, t, arg.span));
            }
        }
    }
    match crate::errors::call_placement_conflict(op, &placed, arrays) {
        Some(d) => Err(d),
        None => Ok(()),
    }
}
