//! THE builtin registry (DESIGN §3): every builtin is declared exactly once, with
//! its parameters, docs, example, differentiability, runtime implementation and a
//! slot for its static shape rule. Completion, hover, the checker and the
//! interpreter all read these entries.

use mlpl_diag::code;
use std::collections::HashMap;
use std::sync::OnceLock;

use crate::eval::Call;
use crate::value::Value;
use mlpl_diag::Diagnostic;

mod analysis;
mod axes;
mod construct;
mod dataprep;
mod devices;
mod elementwise;
mod engram;
mod experiments;
mod feasibility;
mod files;
mod hf;
mod linalg;
pub mod llm;
mod ml;
mod models;
mod optim;
mod random;
mod reduce;
mod sampling;
mod select;
pub mod site;
mod surgery;
mod tokenizers;
mod viz;

// Static shape rules (DESIGN §3, §4), one file per group next to it.
mod analysis_shapes;
mod axes_shapes;
mod construct_shapes;
mod dataprep_shapes;
mod devices_shapes;
mod elementwise_shapes;
mod engram_shapes;
mod experiments_shapes;
mod feasibility_shapes;
mod files_shapes;
mod hf_shapes;
mod linalg_shapes;
mod llm_shapes;
mod ml_shapes;
mod models_shapes;
mod optim_shapes;
mod random_shapes;
mod reduce_shapes;
mod sampling_shapes;
mod select_shapes;
mod surgery_shapes;
mod tokenizers_shapes;
mod viz_shapes;

pub use construct::MAX_ELEMENTS;
pub use elementwise::operator_op;

/// The `stop` function that long host loops of builtins (BPE training and
/// encoding, t-SNE, file reading and parsing) ask as they go: true once the run
/// is cancelled, so a cancel takes effect inside one long call.
fn stop_requested(c: &Call) -> impl Fn() -> bool {
    let flag = c.it.cancel.clone();
    move || flag.load(std::sync::atomic::Ordering::Relaxed)
}

/// E0409 for a builtin that stopped because the run was cancelled.
fn cancelled(c: &Call) -> Diagnostic {
    match c.it.check_cancel(c.span) {
        Err(d) => d,
        // Only reached if the flag was cleared meanwhile: still say why.
        Ok(()) => Diagnostic::of(code::E0409).at(c.span, "cancelled here"),
    }
}

/// How the interpreter prepares an argument before the builtin runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// Any array.
    Array,
    /// A rank-0 array.
    Scalar,
    /// A scalar read as a count or size (LANGUAGE §6.7).
    Count,
    /// A scalar read as a 64-bit seed (LANGUAGE §13.1).
    Seed,
    /// A string.
    Str,
    /// A model.
    Model,
    /// A tokenizer.
    Tokenizer,
    /// An axis number or name (LANGUAGE §8.5).
    Axis,
    /// A names list (LANGUAGE §5.8): a bracketed list of strings, or one string.
    Names,
    /// A value of any kind.
    Any,
    /// Not evaluated before the call: a loss expression, a parameter reference or
    /// a variable written directly (LANGUAGE §5.8).
    Lazy,
}

impl ParamKind {
    /// A short description used in signatures and messages.
    pub fn describe(self) -> &'static str {
        match self {
            ParamKind::Array => "array",
            ParamKind::Scalar => "scalar",
            ParamKind::Count => "count",
            ParamKind::Seed => "seed",
            ParamKind::Str => "string",
            ParamKind::Model => "model",
            ParamKind::Tokenizer => "tokenizer",
            ParamKind::Axis => "axis",
            ParamKind::Names => "names",
            ParamKind::Any => "value",
            ParamKind::Lazy => "expression",
        }
    }
}

/// One declared parameter.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// The name used in docs and signature help.
    pub name: &'static str,
    /// How it is evaluated and checked.
    pub kind: ParamKind,
    /// Whether it may be omitted (only trailing parameters are optional).
    pub optional: bool,
    /// Whether it may repeat any number of times (only the last parameter, as in
    /// `chain(m1, …, mn)`).
    pub variadic: bool,
}

/// A required parameter.
pub const fn req(name: &'static str, kind: ParamKind) -> Param {
    Param {
        name,
        kind,
        optional: false,
        variadic: false,
    }
}

/// An optional parameter.
pub const fn opt(name: &'static str, kind: ParamKind) -> Param {
    Param {
        name,
        kind,
        optional: true,
        variadic: false,
    }
}

/// A last parameter that takes zero or more arguments.
pub const fn rest(name: &'static str, kind: ParamKind) -> Param {
    Param {
        name,
        kind,
        optional: true,
        variadic: true,
    }
}

/// Differentiability, the ∂ column of LANGUAGE §10.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diff {
    /// ✓: gradients flow to every array argument.
    Yes,
    /// 0: piecewise constant; allowed anywhere, no gradient.
    Zero,
    /// ✗: allowed in a loss only on values that do not depend on a parameter.
    No,
    /// —: side effects or no array result; not allowed in a loss.
    Effect,
}

/// What the checker and the interpreter need to know about a builtin beyond its
/// parameters and differentiability. Written on the entry as
/// `Facts::NONE.effectful()` and so on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// A builtin with side effects (∂ = —) that may still appear inside a loss
    /// (LANGUAGE §12.2): `labels` as an argument, and the model constructors.
    pub allowed_in_loss: bool,
    /// Its effects reach beyond the arrays a step computes (files, charts, the
    /// workspace's parameter set, wall-clock timing): a `train` body calling it
    /// is never captured and replayed.
    pub effectful: bool,
    /// It constructs a layer with fresh parameters each time it is evaluated
    /// (W0102 inside a loop body or a loss).
    pub parameterised: bool,
    /// An optimizer: a call is one training step that updates the parameters
    /// it lists in place (LANGUAGE §12.4).
    pub optimizer: bool,
}

impl Facts {
    /// No fact holds.
    pub const NONE: Facts = Facts {
        allowed_in_loss: false,
        effectful: false,
        parameterised: false,
        optimizer: false,
    };
    /// With [`Facts::allowed_in_loss`].
    pub const fn allowed_in_loss(self) -> Facts {
        Facts {
            allowed_in_loss: true,
            ..self
        }
    }
    /// With [`Facts::effectful`].
    pub const fn effectful(self) -> Facts {
        Facts {
            effectful: true,
            ..self
        }
    }
    /// With [`Facts::parameterised`].
    pub const fn parameterised(self) -> Facts {
        Facts {
            parameterised: true,
            ..self
        }
    }
    /// With [`Facts::optimizer`].
    pub const fn optimizer(self) -> Facts {
        Facts {
            optimizer: true,
            ..self
        }
    }
}

/// Whether `name` is a builtin whose entry has the fact `fact`.
pub fn has_fact(name: &str, fact: impl Fn(&Facts) -> bool) -> bool {
    lookup(name).is_some_and(|b| fact(&b.facts))
}

/// A builtin's runtime implementation.
pub type RunFn = fn(&mut Call<'_, '_>) -> Result<Value, Diagnostic>;

/// One builtin.
#[derive(Debug)]
pub struct Builtin {
    /// The name as called.
    pub name: &'static str,
    /// Declared parameters in order.
    pub params: &'static [Param],
    /// One-line summary (completion detail).
    pub summary: &'static str,
    /// Longer documentation (hover).
    pub doc: &'static str,
    /// A small runnable program using the builtin.
    pub example: &'static str,
    /// Differentiability.
    pub diff: Diff,
    /// Facts the checker and the interpreter read (allowed in a loss, effectful,
    /// parameterised, optimizer).
    pub facts: Facts,
    /// The LANGUAGE.md section defining it.
    pub section: &'static str,
    /// The runtime implementation.
    pub run: RunFn,
    /// The static shape rule; `None` until the checker gives this builtin one, in
    /// which case the checker treats its result as unknown.
    pub shape: Option<crate::check::abstract_value::ShapeRule>,
}

impl Builtin {
    /// Fewest arguments accepted.
    pub fn min_args(&self) -> usize {
        self.params.iter().filter(|p| !p.optional).count()
    }
    /// Most arguments accepted (`usize::MAX` with a variadic last parameter).
    pub fn max_args(&self) -> usize {
        if self.is_variadic() {
            usize::MAX
        } else {
            self.params.len()
        }
    }
    /// Whether the last parameter takes any number of arguments.
    pub fn is_variadic(&self) -> bool {
        self.params.last().is_some_and(|p| p.variadic)
    }
    /// The parameter that argument `i` binds to (the variadic one repeats).
    pub fn param_at(&self, i: usize) -> Option<&'static Param> {
        let params: &'static [Param] = self.params;
        params
            .get(i)
            .or_else(|| params.last().filter(|p| p.variadic))
    }
    /// `name(a, b [, c])`.
    pub fn signature(&self) -> String {
        let mut s = format!("{}(", self.name);
        let mut first = true;
        let mut opened = 0;
        for p in self.params {
            if p.optional {
                s.push_str(if first { "[" } else { " [" });
                opened += 1;
            }
            if !first {
                s.push_str(", ");
            }
            s.push_str(p.name);
            if p.variadic {
                s.push_str(", …");
            }
            first = false;
        }
        for _ in 0..opened {
            s.push(']');
        }
        s.push(')');
        s
    }
    /// The arity sentence used by E0103, e.g. `adam takes 6 or 7 arguments`.
    pub fn arity_text(&self) -> String {
        let (lo, hi) = (self.min_args(), self.max_args());
        let plural = |n: usize| if n == 1 { "argument" } else { "arguments" };
        if self.is_variadic() {
            return match lo {
                0 => format!("`{}` takes any number of arguments", self.name),
                _ => format!("`{}` takes at least {lo} {}", self.name, plural(lo)),
            };
        }
        match hi - lo {
            0 => format!("`{}` takes {lo} {}", self.name, plural(lo)),
            1 => format!("`{}` takes {lo} or {hi} {}", self.name, plural(hi)),
            _ => format!("`{}` takes {lo} to {hi} arguments", self.name),
        }
    }
}

/// The builtin groups, one module each.
const GROUPS: &[&[Builtin]] = &[
    construct::BUILTINS,
    reduce::BUILTINS,
    elementwise::BUILTINS,
    select::BUILTINS,
    linalg::BUILTINS,
    ml::BUILTINS,
    random::BUILTINS,
    sampling::BUILTINS,
    dataprep::BUILTINS,
    files::BUILTINS,
    hf::BUILTINS,
    tokenizers::BUILTINS,
    axes::BUILTINS,
    experiments::BUILTINS,
    feasibility::BUILTINS,
    devices::BUILTINS,
    llm::BUILTINS,
    analysis::BUILTINS,
    optim::BUILTINS,
    models::BUILTINS,
    engram::BUILTINS,
    surgery::BUILTINS,
    viz::BUILTINS,
];

/// Every builtin, in declaration order.
pub fn all() -> impl Iterator<Item = &'static Builtin> {
    GROUPS.iter().flat_map(|g| g.iter())
}

/// The static shape rule of a builtin, as declared in its registry entry.
pub fn shape_rule(b: &Builtin) -> Option<crate::check::abstract_value::ShapeRule> {
    b.shape
}

/// The builtin called `name`.
pub fn lookup(name: &str) -> Option<&'static Builtin> {
    static MAP: OnceLock<HashMap<&'static str, &'static Builtin>> = OnceLock::new();
    MAP.get_or_init(|| all().map(|b| (b.name, b)).collect())
        .get(name)
        .copied()
}

/// Builtins of the language reference that this build does not provide yet
/// (none today; a name listed here gets E0102 with a note saying so).
pub const NOT_YET_AVAILABLE: &[&str] = &[];

/// E0102 for a call to a name that is neither a builtin nor one of
/// `functions` (the user functions defined where the call is), with the
/// closest of either as a suggestion.
pub fn unknown_function<'a>(
    name: &str,
    span: mlpl_diag::Span,
    functions: impl Iterator<Item = &'a str>,
) -> Diagnostic {
    let mut d = Diagnostic::error(code::E0102, format!("unknown function `{name}`"))
        .at(span, "not a builtin or a function defined with `fn`");
    if NOT_YET_AVAILABLE.contains(&name) {
        return d.note(format!(
            "`{name}` is part of MLPL but is not available in this build yet"
        ));
    }
    let functions: Vec<&str> = functions.collect();
    let user = crate::errors::suggest::closest(name, functions.iter().copied());
    let builtin = crate::errors::suggest::closest(name, all().map(|b| b.name));
    let distance = |s: &str| crate::errors::suggest::edit_distance(name, s);
    match (user, builtin) {
        (Some(u), Some(b)) if distance(b) < distance(u) => {
            d = d.help(format!("a builtin with a similar name exists: `{b}`"))
        }
        (Some(u), _) => d = d.help(format!("a function with a similar name is defined: `{u}`")),
        (None, Some(b)) => d = d.help(format!("a builtin with a similar name exists: `{b}`")),
        (None, None) => {}
    }
    d.note("a call names a builtin or a function defined with `fn name(x) { ... }` (docs/language.md, \"Functions\")")
}
