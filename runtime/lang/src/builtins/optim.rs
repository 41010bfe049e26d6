//! Gradients, optimizers and schedules (LANGUAGE §10.12, §12).

use mlpl_devices::math;
use mlpl_diag::code;
use std::collections::{HashMap, HashSet};

use mlpl_devices::{AdamStep, BinaryOp, ReduceOp, Tensor};

use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::eval::{loss, Call, OptimState};
use crate::nn::{DecayGroup, ParamClass};
use crate::value::{named_shape, Array, Value};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::ExprKind;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "grad",
        params: &[req("loss", Lazy), req("wrt", Lazy)],
        summary: "gradient of a loss with respect to a variable",
        doc: "`grad(loss, wrt)` evaluates `loss` on a fresh tape and returns its gradient with respect to the variable `wrt` (a tracked parameter or any array variable), with `wrt`'s shape and names. A non-scalar loss is summed (W0301). E0109 when `wrt` is not a variable name.",
        example: "W = param[3]\nW = W + [1, 2, 3]\ngrad(sum(W * W), W)",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.12",
        run: grad,
        shape: Some(super::optim_shapes::grad),
    },
    Builtin {
        name: "adam",
        params: &[req("loss", Lazy), req("params", Lazy), req("lr", Scalar), req("b1", Scalar), req("b2", Scalar), req("eps", Scalar), opt("max_grad_norm", Scalar)],
        summary: "one Adam step on the parameters",
        doc: "`adam(loss, params, lr, b1, b2, eps [, max_grad_norm])` evaluates the loss once, computes the gradients of every listed, non-frozen parameter at the same point, optionally clips their global norm, and applies one Adam update with per-parameter step counts (LANGUAGE §12.4–12.5). `params` is a parameter name, a model, or a list of these. Returns 0.",
        example: "W = param[2]\ntrain 3 { adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8); sum(W) }",
        diff: Diff::Effect,
        facts: Facts::NONE.optimizer(),
        section: "10.12",
        run: adam,
        shape: Some(super::optim_shapes::adam),
    },
    Builtin {
        name: "adamw",
        params: &[req("loss", Lazy), req("params", Lazy), req("lr", Scalar), req("b1", Scalar), req("b2", Scalar), req("eps", Scalar), req("weight_decay", Scalar), opt("max_grad_norm", Scalar), opt("decay", Str)],
        summary: "one AdamW step (decoupled weight decay)",
        doc: "`adamw(loss, params, lr, b1, b2, eps, weight_decay [, max_grad_norm] [, decay])` is `adam` with decoupled weight decay `p -= lr·weight_decay·p`. `decay`, a trailing string, names the parameters decayed, by their kind in the model: \"no_bias_norm\" (the default) all but layer biases and normalisation gains and biases; \"all\" every parameter (PyTorch's `torch.optim.AdamW`); \"no_bias_norm_embed\" also exempts embedding tables. `param[…]` variables are weights. E0401 for another name.",
        example: "W = param[2]\ntrain 3 { adamw(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8, 0.01); sum(W) }",
        diff: Diff::Effect,
        facts: Facts::NONE.optimizer(),
        section: "10.12",
        run: adamw,
        shape: Some(super::optim_shapes::adamw),
    },
    Builtin {
        name: "momentum_sgd",
        params: &[req("loss", Lazy), req("params", Lazy), req("lr", Scalar), req("beta", Scalar)],
        summary: "one SGD step with momentum",
        doc: "`momentum_sgd(loss, params, lr, beta)`: v = beta·v + g; p = p − lr·v, for every listed non-frozen parameter, from one evaluation of the loss.",
        example: "W = param[2]\ntrain 3 { momentum_sgd(sum(W * W - W), W, 0.1, 0.9); sum(W) }",
        diff: Diff::Effect,
        facts: Facts::NONE.optimizer(),
        section: "10.12",
        run: momentum_sgd,
        shape: Some(super::optim_shapes::momentum_sgd),
    },
    Builtin {
        name: "cosine_schedule",
        params: &[req("step", Scalar), req("total", Scalar), req("lr_min", Scalar), req("lr_max", Scalar)],
        summary: "cosine learning-rate decay",
        doc: "`cosine_schedule(step, total, lr_min, lr_max)` = lr_min + ½·(lr_max − lr_min)·(1 + cos(π·t)), t = clamp(step, 0, total) / total; lr_max when total ≤ 0.",
        example: "cosine_schedule(50, 100, 0.0001, 0.01)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.12",
        run: cosine_schedule,
        shape: Some(super::optim_shapes::cosine_schedule),
    },
    Builtin {
        name: "linear_warmup",
        params: &[req("step", Scalar), req("warmup", Scalar), req("lr", Scalar)],
        summary: "linear learning-rate warm-up",
        doc: "`linear_warmup(step, warmup, lr)` = lr · clamp(step / warmup, 0, 1); lr when warmup ≤ 0.",
        example: "linear_warmup(5, 10, 0.001)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.12",
        run: linear_warmup,
        shape: Some(super::optim_shapes::linear_warmup),
    },
];

/// A scalar result: exact when every argument was exact (LANGUAGE §5.2).
fn scalar_result(c: &Call, v: f64) -> Value {
    let exact = (0..c.len()).all(|i| c.array(i).is_ok_and(|a| a.is_exact()));
    if exact {
        Value::exact(v)
    } else {
        Value::Array(Array::scalar_f32(v as f32))
    }
}

fn cosine_schedule(c: &mut Call) -> Result<Value, Diagnostic> {
    let (step, total, lo, hi) = (c.scalar(0)?, c.scalar(1)?, c.scalar(2)?, c.scalar(3)?);
    let v = if total <= 0.0 {
        hi
    } else {
        lo + 0.5
            * (hi - lo)
            * (1.0 + math::cos(std::f64::consts::PI * step.clamp(0.0, total) / total))
    };
    Ok(scalar_result(c, v))
}

fn linear_warmup(c: &mut Call) -> Result<Value, Diagnostic> {
    let (step, warmup, lr) = (c.scalar(0)?, c.scalar(1)?, c.scalar(2)?);
    let v = if warmup <= 0.0 {
        lr
    } else {
        lr * (step / warmup).clamp(0.0, 1.0)
    };
    Ok(scalar_result(c, v))
}

/// E0109 at `span`.
fn not_a_reference(span: Span, what: &str) -> Diagnostic {
    Diagnostic::of(code::E0109)
        .at(span, what)
        .note("an optimizer's parameters are a tracked parameter name, a model, or a list of these, like `[W, b, model]`")
}

fn grad(c: &mut Call) -> Result<Value, Diagnostic> {
    let wrt = c.args[1].expr.unparen();
    let ExprKind::Var(name) = &wrt.kind else {
        return Err(Diagnostic::of(code::E0109)
            .at(wrt.span, "not a variable name")
            .note("`grad`'s second argument names the variable to differentiate with respect to, written directly: `grad(loss, W)`"));
    };
    let name = name.clone();
    let target = match c.it.ws.get(&name) {
        Some(Value::Array(a)) => a.clone(),
        Some(other) => {
            return Err(Diagnostic::of(code::E0301)
                .at(wrt.span, format!("`{name}` is a {}", other.kind_name())))
        }
        None => {
            return Err(crate::errors::undefined_name(
                &name,
                wrt.span,
                "not bound",
                [],
            ))
        }
    };
    let mut trainable: HashSet<String> = c.it.ws.tracked.clone();
    trainable.insert(name.clone());
    let loss_expr = c.args[0].expr;
    let out = loss::evaluate(c.it, loss_expr, trainable, std::slice::from_ref(&name))?;
    if out.value.rank() > 0 {
        c.it.warn(Diagnostic::of(code::W0301).at(
            loss_expr.span,
            format!(
                "has shape {}; the sum of its elements is differentiated",
                named_shape(&out.value)
            ),
        ));
    }
    let g = match out.grads.get(&name) {
        Some(g) => g.clone().reshape(target.shape().to_vec()),
        None => Tensor::zeros(target.shape().to_vec()),
    };
    Ok(Value::Array(
        Array::from_tensor(g)
            .with_names(target.names().map(|n| n.to_vec()))
            .with_placement(target.placement()),
    ))
}

/// The class of the tracked variable `name` written directly in `params`: its
/// class in a model bound in the workspace that holds it, else a weight (a
/// `param[…]` variable).
fn class_of_variable(c: &Call, name: &str) -> ParamClass {
    c.it.ws
        .bindings
        .values()
        .filter_map(|v| match v {
            Value::Model(m) => m.0.param_specs().into_iter().find(|p| p.name == name),
            _ => None,
        })
        .map(|p| ParamClass::of(&p))
        .next()
        .unwrap_or(ParamClass::Weight)
}

/// The parameters of a model with their classes.
fn model_params(m: &crate::value::Model) -> Vec<(String, ParamClass)> {
    m.0.param_specs()
        .into_iter()
        .map(|p| {
            let class = ParamClass::of(&p);
            (p.name, class)
        })
        .collect()
}

/// Resolves an optimizer's `params` (LANGUAGE §5.8) to distinct tracked names,
/// each with its class for weight decay.
fn resolve_params(c: &mut Call, i: usize) -> Result<Vec<(String, ParamClass)>, Diagnostic> {
    let expr = c.args[i].expr.unparen();
    let items: Vec<&mlpl_syntax::Expr> = match &expr.kind {
        ExprKind::List(items) => items.iter().collect(),
        _ => vec![expr],
    };
    let mut names: Vec<(String, ParamClass)> = Vec::new();
    for item in items {
        let item = item.unparen();
        let found = match &item.kind {
            ExprKind::Var(name) => match c.it.ws.get(name) {
                Some(Value::Array(_)) => {
                    if !c.it.ws.tracked.contains(name) {
                        return Err(Diagnostic::of(code::E0110)
                            .at(item.span, format!("`{name}` is an ordinary variable"))
                            .help(format!(
                                "create it with `{name} = param[...]` to make it trainable"
                            )));
                    }
                    vec![(name.clone(), class_of_variable(c, name))]
                }
                Some(Value::Model(m)) => model_params(m),
                Some(other) => {
                    return Err(not_a_reference(
                        item.span,
                        &format!("`{name}` is a {}", other.kind_name()),
                    ))
                }
                None => {
                    return Err(crate::errors::undefined_name(
                        name,
                        item.span,
                        "not bound",
                        [],
                    ))
                }
            },
            _ => match c.it.expr(item)? {
                Value::Model(m) => model_params(&m),
                other => {
                    return Err(not_a_reference(
                        item.span,
                        &format!(
                            "this is a {} value, not a parameter name or a model",
                            other.kind_name()
                        ),
                    ))
                }
            },
        };
        for (n, class) in found {
            if names.iter().any(|(m, _)| *m == n) {
                c.it.warn(
                    Diagnostic::of(code::W0302).at(item.span, format!("`{n}` is updated once")),
                );
            } else {
                names.push((n, class));
            }
        }
    }
    Ok(names)
}

/// Which update rule an optimizer call applies.
#[derive(Clone, Copy)]
enum Rule {
    Adam {
        b1: f64,
        b2: f64,
        eps: f64,
        wd: f64,
        decay: DecayGroup,
    },
    Momentum {
        beta: f64,
    },
}

/// Steps 1–7 of LANGUAGE §12.4: resolve, evaluate the loss once, clip, update.
fn optimize(
    c: &mut Call,
    kind: &'static str,
    rule: Rule,
    lr: f64,
    max_norm: Option<f64>,
) -> Result<Value, Diagnostic> {
    let params = resolve_params(c, 1)?;
    let classes: HashMap<String, ParamClass> = params.iter().cloned().collect();
    let updated: Vec<String> = params
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !c.it.ws.frozen.contains(p))
        .collect();
    let trainable = c.it.ws.tracked.clone();
    let loss_expr = c.args[0].expr;
    let out = loss::evaluate(c.it, loss_expr, trainable, &updated)?;
    if !out.depends_on_params || updated.iter().all(|p| !out.grads.contains_key(p)) {
        c.it.warn(Diagnostic::of(code::W0103).at(loss_expr.span, "every gradient is zero"));
    }
    if out.value.rank() > 0 {
        c.it.warn(Diagnostic::of(code::W0301).at(
            loss_expr.span,
            format!(
                "has shape {}; the sum of its elements is differentiated",
                named_shape(&out.value)
            ),
        ));
    }
    let backend = c.it.devices.active_backend();
    let span = c.span;
    let dev = |e| crate::errors::device_error(e, kind, span);
    let mut grads: Vec<(String, Tensor)> = Vec::with_capacity(updated.len());
    for p in &updated {
        let shape = match c.it.ws.get(p) {
            Some(Value::Array(a)) => a.shape().to_vec(),
            _ => continue,
        };
        let g = out
            .grads
            .get(p)
            .cloned()
            .map(|g| g.reshape(shape.clone()))
            .unwrap_or_else(|| Tensor::zeros(shape));
        grads.push((p.clone(), g));
    }
    if let Some(max) = max_norm {
        let mut sq = 0.0f64;
        for (_, g) in &grads {
            let s = backend
                .binary(BinaryOp::Mul, g, g)
                .and_then(|gg| backend.reduce(ReduceOp::Sum, &gg, None))
                .map_err(dev)?;
            sq += s.to_vec()[0] as f64;
        }
        let factor = max / (sq.sqrt() + 1e-6);
        if factor < 1.0 {
            let f = Tensor::scalar(factor as f32);
            for (_, g) in grads.iter_mut() {
                *g = backend.binary(BinaryOp::Mul, g, &f).map_err(dev)?;
            }
        }
    }
    for (name, g) in grads {
        let Some(Value::Array(param)) = c.it.ws.bindings.remove(&name) else {
            continue;
        };
        let names = param.names().map(|n| n.to_vec());
        let placement = param.placement();
        let mut p = param.into_tensor();
        let key = (kind.to_string(), name.clone());
        let state = c.it.ws.optim.entry(key).or_insert_with(|| OptimState {
            m: Tensor::zeros(g.shape().to_vec()),
            v: matches!(rule, Rule::Adam { .. }).then(|| Tensor::zeros(g.shape().to_vec())),
            steps: 0,
        });
        state.steps += 1;
        let result = match rule {
            Rule::Adam {
                b1,
                b2,
                eps,
                wd,
                decay,
            } => {
                let class = classes.get(&name).copied().unwrap_or(ParamClass::Weight);
                let wd = if decay.decays(class) { wd } else { 0.0 };
                let v = state.v.as_mut().expect("adam state has a second moment");
                let step = AdamStep {
                    lr,
                    b1,
                    b2,
                    eps,
                    wd,
                    t: state.steps,
                };
                backend.adam_update(&mut p, &g, &mut state.m, v, step)
            }
            Rule::Momentum { beta } => backend
                .binary(BinaryOp::Mul, &state.m, &Tensor::scalar(beta as f32))
                .and_then(|bv| backend.binary(BinaryOp::Add, &bv, &g))
                .and_then(|v| {
                    state.m = v;
                    backend.binary(BinaryOp::Mul, &state.m, &Tensor::scalar(lr as f32))
                })
                .and_then(|step| backend.binary(BinaryOp::Sub, &p, &step))
                .map(|np| p = np),
        };
        let updated = Array::from_tensor(p)
            .with_names(names)
            .with_placement(placement);
        c.it.ws.bindings.insert(name, Value::Array(updated));
        result.map_err(dev)?;
    }
    Ok(Value::exact(0.0))
}

fn optional_max_norm(c: &Call, i: usize) -> Result<Option<f64>, Diagnostic> {
    if !c.has(i) {
        return Ok(None);
    }
    let v = c.scalar(i)?;
    super::site::check_max_grad_norm(c, i, v)?;
    Ok(Some(v))
}

fn adam(c: &mut Call) -> Result<Value, Diagnostic> {
    let (lr, b1, b2, eps) = (c.scalar(2)?, c.scalar(3)?, c.scalar(4)?, c.scalar(5)?);
    let max = optional_max_norm(c, 6)?;
    optimize(
        c,
        "adam",
        Rule::Adam {
            b1,
            b2,
            eps,
            wd: 0.0,
            decay: DecayGroup::All,
        },
        lr,
        max,
    )
}

fn adamw(c: &mut Call) -> Result<Value, Diagnostic> {
    let (lr, b1, b2, eps, wd) = (
        c.scalar(2)?,
        c.scalar(3)?,
        c.scalar(4)?,
        c.scalar(5)?,
        c.scalar(6)?,
    );
    super::site::check_weight_decay(c, 6, wd)?;
    // The decay group is a trailing string, after `weight_decay` or after
    // `max_grad_norm`.
    let at = (7..c.len()).find(|&i| matches!(c.value(i), Value::Str(_)));
    let max = match at {
        Some(7) => None,
        _ => optional_max_norm(c, 7)?,
    };
    let decay = super::site::adamw_decay(c, c.len(), at, |i| c.string(i).ok())?;
    optimize(
        c,
        "adamw",
        Rule::Adam {
            b1,
            b2,
            eps,
            wd,
            decay,
        },
        lr,
        max,
    )
}

fn momentum_sgd(c: &mut Call) -> Result<Value, Diagnostic> {
    let (lr, beta) = (c.scalar(2)?, c.scalar(3)?);
    optimize(c, "momentum_sgd", Rule::Momentum { beta }, lr, None)
}
