//! [`plan`]: turning two recorded steps into a [`StepPlan`] that can be
//! replayed, or the reason it cannot.

use super::trace::{Origin, Trace, ValueId};
use crate::kernels::Op;
use crate::tensor::Tensor;

/// Where a replayed step's input comes from.
#[derive(Clone, Debug)]
pub struct PlanInput {
    /// The input's value in the plan's trace.
    pub value: ValueId,
    /// What it holds for the first replayed step.
    pub initial: Tensor,
    /// For state carried from step to step (parameters, optimizer moments,
    /// variables the body reassigns): the value of the previous step it takes.
    /// `None` for inputs that are the same every step (data, constants).
    pub carried_from: Option<ValueId>,
}

/// A step that can be replayed: the second recorded step's calls, where each of
/// its inputs comes from, and which values are read after a step.
#[derive(Clone, Debug)]
pub struct StepPlan {
    /// The calls of the step (the second recorded one).
    pub trace: Trace,
    /// One entry per [`Trace::inputs`] entry, in the same order.
    pub inputs: Vec<PlanInput>,
    /// Values read after a step (the loss, what is written back); kept until
    /// the next step starts.
    pub keep: Vec<ValueId>,
}

impl StepPlan {
    /// Every value that must survive to the end of a step: the kept ones and
    /// the sources of carried inputs.
    pub fn live_at_end(&self) -> Vec<ValueId> {
        let mut v = self.keep.clone();
        v.extend(self.inputs.iter().filter_map(|i| i.carried_from));
        v.sort();
        v.dedup();
        v
    }
}

/// Compares two consecutive recorded steps and, when they are the same
/// computation, returns the plan that replays the second one.
///
/// They are the same computation when they make the same calls with the same
/// arguments and shapes (Adam's update count and dropout's step one higher),
/// each input of the
/// second step is either state the first step computed (carried), the same
/// tensor as in the first step, or a tensor made on the host with the same
/// elements as the first step's, and no value the step computes was read on the
/// host (the host could decide differently next time). `keep` are values of
/// `second` that will be read after each step. The traces name their values
/// weakly: the state `second` left (what the next step reads) must still be
/// held by the caller, as the plan starts from it.
pub fn plan(first: &Trace, second: Trace, keep: Vec<ValueId>) -> Result<StepPlan, String> {
    if first.calls.len() != second.calls.len() {
        return Err(format!(
            "the first two iterations ran different kernels ({} then {} calls)",
            first.calls.len(),
            second.calls.len()
        ));
    }
    for (k, (a, b)) in first.calls.iter().zip(&second.calls).enumerate() {
        same_call(first, &second, k, a, b)?;
    }
    let mut inputs = Vec::with_capacity(second.inputs.len());
    for (j, (v, t)) in second.inputs.iter().enumerate() {
        inputs.push(classify(first, &second, j, *v, t.as_ref())?);
    }
    for &r in &second.host_reads {
        let computed = match second.value(r).origin {
            Origin::Output { .. } => true,
            Origin::Input(j) => inputs[j].carried_from.is_some(),
        };
        if computed {
            return Err(format!(
                "the body reads a computed value ({}) on the host, so later iterations could differ",
                describe(&second, r)
            ));
        }
    }
    Ok(StepPlan {
        trace: second,
        inputs,
        keep,
    })
}

/// The call that made `v`, or that it is an input, in words.
fn describe(t: &Trace, v: ValueId) -> String {
    match t.value(v).origin {
        Origin::Output { call, .. } => {
            format!(
                "the result of `{}`, call {}",
                t.calls[call].op.name(),
                call + 1
            )
        }
        Origin::Input(j) => format!("input {}", j + 1),
    }
}

/// Checks that call `k` is the same in both steps.
fn same_call(
    first: &Trace,
    second: &Trace,
    k: usize,
    a: &super::trace::Call,
    b: &super::trace::Call,
) -> Result<(), String> {
    let differs = |what: String| {
        Err(format!(
            "the first two iterations differ at kernel call {} (`{}`): {what}",
            k + 1,
            b.op.name()
        ))
    };
    let same_op = match (&a.op, &b.op) {
        (Op::AdamUpdate { step: x }, Op::AdamUpdate { step: y }) => {
            if y.t != x.t + 1 {
                return differs("the update counts are not consecutive".into());
            }
            crate::AdamStep { t: y.t, ..*x } == *y
        }
        // A dropout mask's counter is the loop's `step`: one higher each
        // iteration, which replays continue (`DropoutKey`'s `Attr`).
        (
            Op::DropoutMask {
                shape: sx,
                key: x,
                p: px,
            },
            Op::DropoutMask {
                shape: sy,
                key: y,
                p: py,
            },
        ) => {
            if y.counter != x.counter.wrapping_add(1) {
                return differs("the dropout masks' steps are not consecutive".into());
            }
            sx == sy && x.stream == y.stream && px.to_bits() == py.to_bits()
        }
        (x, y) => x == y,
    };
    if !same_op {
        return differs(format!("{:?} then {:?}", a.op, b.op));
    }
    if a.inputs.len() != b.inputs.len() || a.outputs.len() != b.outputs.len() {
        return differs("different numbers of arguments".into());
    }
    for (&x, &y) in a
        .inputs
        .iter()
        .zip(&b.inputs)
        .chain(a.outputs.iter().zip(&b.outputs))
    {
        let (sx, sy) = (&first.value(x).shape, &second.value(y).shape);
        if sx != sy {
            return differs(format!("shape {sx:?} then {sy:?}"));
        }
        let (ox, oy) = (first.value(x).origin, second.value(y).origin);
        match (ox, oy) {
            (Origin::Output { .. }, Origin::Output { .. }) if ox != oy => {
                return differs("an argument comes from a different call".into())
            }
            (Origin::Output { .. }, Origin::Input(_))
            | (Origin::Input(_), Origin::Output { .. }) => {
                return differs("an argument is computed in one iteration and not the other".into())
            }
            _ => {}
        }
    }
    Ok(())
}

/// Where input `j` of the second step (value `v`, tensor `t`, `None` when the
/// trace released it as overwritten state) comes from.
fn classify(
    first: &Trace,
    second: &Trace,
    j: usize,
    v: ValueId,
    t: Option<&Tensor>,
) -> Result<PlanInput, String> {
    // State computed by the first step and read by the second: carried.
    let seen = &second.tensors[v.index()];
    let prev = first
        .tensors
        .iter()
        .rposition(|x| x.storage_key() == seen.storage_key() && x.numel() == seen.numel());
    if let Some(prev) = prev.map(|i| ValueId(i as u32)) {
        match first.value(prev).origin {
            Origin::Output { call, index } => {
                let from = second.calls[call].outputs[index];
                let initial = second.tensor(from).ok_or_else(|| {
                    format!(
                        "{} is carried from {}, which the second iteration did not keep",
                        describe_use(second, v),
                        describe(second, from)
                    )
                })?;
                return Ok(PlanInput {
                    value: v,
                    initial,
                    carried_from: Some(from),
                });
            }
            // The same tensor as in the first step: data that does not change.
            Origin::Input(_) => {
                if let Some(t) = t {
                    return Ok(PlanInput {
                        value: v,
                        initial: t.clone(),
                        carried_from: None,
                    });
                }
            }
        }
    }
    // A tensor made on the host during the step: it must be the same as the
    // first step's at the same place (both still held: state an Adam update
    // overwrote is released when recorded, and cannot be compared).
    let same = |t: &Tensor| {
        first.inputs.get(j).is_some_and(|(_, ft)| {
            ft.as_ref().is_some_and(|ft| {
                ft.shape() == t.shape()
                    && ft
                        .host()
                        .iter()
                        .map(|x| x.to_bits())
                        .eq(t.host().iter().map(|x| x.to_bits()))
            })
        })
    };
    match t {
        Some(t) if same(t) => Ok(PlanInput {
            value: v,
            initial: t.clone(),
            carried_from: None,
        }),
        _ => Err(format!(
            "{} changes between iterations (a value made on the host, such as a dropout mask, a random draw or a value that depends on `step`)",
            describe_use(second, v)
        )),
    }
}

/// The first call that reads `v`, in words.
fn describe_use(t: &Trace, v: ValueId) -> String {
    match t.calls.iter().position(|c| c.inputs.contains(&v)) {
        Some(k) => format!(
            "an argument of `{}` (kernel call {})",
            t.calls[k].op.name(),
            k + 1
        ),
        None => "an input of the step".into(),
    }
}
