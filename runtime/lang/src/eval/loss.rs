//! Losses on a tape (LANGUAGE §12.2): while a loss expression is evaluated, every
//! tracked parameter it reads becomes a trainable leaf and every operation on a
//! value that depends on one is recorded, so gradients can be computed afterwards
//! through the same device backend.

use mlpl_diag::code;
use std::collections::{HashMap, HashSet};

use mlpl_devices::Tensor;

use super::Interp;
use crate::autograd::{Tape, Var};
use crate::value::{Array, TapeNode, Value};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

/// The tape being recorded while a loss is evaluated.
pub struct LossTape {
    /// Distinguishes this tape from earlier ones (arrays remember it).
    pub id: u64,
    /// The recorded operations.
    pub tape: Tape,
    /// Variable names that become trainable leaves when read.
    pub trainable: HashSet<String>,
    /// The leaf created for each trainable name read so far.
    pub leaves: HashMap<String, Var>,
}

/// A loss after evaluation: its value and the gradients of the requested names.
pub struct EvaluatedLoss {
    /// The loss value (its tape node is no longer live).
    pub value: Array,
    /// Whether the loss depends on any trainable leaf.
    pub depends_on_params: bool,
    /// Gradient per requested name (zeros when the loss does not read it).
    pub grads: HashMap<String, Tensor>,
}

/// The variable of `a` on the live tape, if it was recorded there.
pub fn live(it: &Interp, a: &Array) -> Option<Var> {
    let t = it.tape.as_ref()?;
    a.node().filter(|n| n.tape == t.id).map(|n| n.var)
}

/// Whether any of `arrays` is recorded on the live tape.
pub fn any_live(it: &Interp, arrays: &[&Array]) -> bool {
    arrays.iter().any(|a| live(it, a).is_some())
}

/// The tape variable for `a`: its node, or a new constant.
pub fn var_of(it: &mut Interp, a: &Array) -> Var {
    if let Some(v) = live(it, a) {
        return v;
    }
    let t = it.tape.as_mut().expect("a loss tape is being recorded");
    t.tape.constant(a.tensor())
}

/// Records an operation on the live tape and returns its result as an array
/// (unnamed, floating; the caller sets names and placement).
pub fn record(
    it: &mut Interp,
    op: &str,
    span: Span,
    f: impl FnOnce(&mut Tape) -> mlpl_devices::Result<Var>,
) -> Result<Array, Diagnostic> {
    let t = it.tape.as_mut().expect("a loss tape is being recorded");
    let var = f(&mut t.tape).map_err(|e| crate::errors::device_error(e, op, span))?;
    let value = t
        .tape
        .take_value(var)
        .map_err(|e| crate::errors::device_error(e, op, span))?;
    Ok(Array::from_tensor(value).with_node(TapeNode { tape: t.id, var }))
}

/// What reading variable `name` gives inside a loss: a trainable leaf for the
/// names being differentiated, the plain value otherwise.
pub fn read_variable(it: &mut Interp, name: &str, value: Value) -> Value {
    let Some(t) = it.tape.as_mut() else {
        return value;
    };
    let Value::Array(a) = value else { return value };
    if !t.trainable.contains(name) {
        return Value::Array(a);
    }
    let var = match t.leaves.get(name) {
        Some(&v) => v,
        None => {
            let v = t.tape.leaf(a.tensor(), true);
            t.leaves.insert(name.to_string(), v);
            v
        }
    };
    let id = t.id;
    // A leaf is a float32 array even when the variable held an exact scalar, so
    // that operations on it are recorded instead of folded in float64.
    let leaf = if a.is_exact() {
        Array::from_tensor(a.tensor())
    } else {
        a.detached()
    };
    Value::Array(leaf.with_node(TapeNode { tape: id, var }))
}

/// Evaluates `loss` on a fresh tape where the `trainable` names are leaves, then
/// differentiates it (summing its elements when it is not a scalar) with respect
/// to each of `wanted`.
pub fn evaluate(
    it: &mut Interp,
    loss: &Expr,
    trainable: HashSet<String>,
    wanted: &[String],
) -> Result<EvaluatedLoss, Diagnostic> {
    if it.tape.is_some() {
        return Err(Diagnostic::of(code::E0306)
            .at(loss.span, "a loss inside another loss")
            .note("`grad` and the optimizers cannot be used inside a loss (no higher-order gradients)"));
    }
    it.next_tape_id += 1;
    let backend = it.devices.active_backend();
    it.tape = Some(LossTape {
        id: it.next_tape_id,
        tape: Tape::new(backend),
        trainable,
        leaves: HashMap::new(),
    });
    let result = it.expr(loss);
    let t = it.tape.take().expect("the loss tape is still there");
    let value = result?;
    let Value::Array(a) = value else {
        return Err(Diagnostic::of(code::E0301)
            .at(loss.span, format!("the loss is a {}", value.kind_name()))
            .note("a loss must evaluate to an array (usually a scalar)"));
    };
    let loss_var = a.node().filter(|n| n.tape == t.id).map(|n| n.var);
    let mut grads = HashMap::new();
    if let Some(lv) = loss_var {
        let mut all = t
            .tape
            .backward_releasing(lv)
            .map_err(|e| crate::errors::device_error(e, "backward", loss.span))?;
        for name in wanted {
            if let Some(&leaf) = t.leaves.get(name) {
                if let Some(g) = all.remove(leaf) {
                    grads.insert(name.clone(), g);
                }
            }
        }
    }
    Ok(EvaluatedLoss {
        value: a.detached(),
        depends_on_params: loss_var.is_some(),
        grads,
    })
}
