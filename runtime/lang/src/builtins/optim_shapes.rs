//! Shape rules of `grad`, the optimizers and the schedules (LANGUAGE §10.12),
//! next to their runtime implementations in `optim.rs`. The checker analyses the
//! lazy arguments itself (losses, parameter references, `grad`'s variable; see
//! `check::loss`) and passes the loss's value and `wrt`'s value here.

use super::site::CallSite;
use crate::check::abstract_value::AbsValue;
use crate::check::ctx::ShapeCtx;
use mlpl_devices::math;
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// W0301 when the loss (argument 0) is provably not a scalar.
fn scalar_loss(c: &mut ShapeCtx) {
    if let AbsValue::Array(a) = c.value(0) {
        if a.rank().is_some_and(|r| r > 0) {
            let shape = a.shape_text();
            c.warn_of(
                0,
                code::W0301,
                format!("has shape {shape}; the sum of its elements is differentiated"),
            );
        }
    }
}

/// `grad(loss, wrt)`: the gradient, with `wrt`'s shape and names.
pub fn grad(c: &mut ShapeCtx) -> Rule {
    scalar_loss(c);
    Ok(match c.value(1) {
        AbsValue::Array(a) => AbsValue::Array(a.clone().with_constant(None)),
        _ => AbsValue::any_array(),
    })
}

fn max_norm(c: &ShapeCtx, i: usize) -> Result<(), Diagnostic> {
    if !c.has(i) {
        return Ok(());
    }
    match c.scalar(i)? {
        Some(v) => super::site::check_max_grad_norm(c, i, v),
        None => Ok(()),
    }
}

/// `adam(loss, params, lr, b1, b2, eps [, max_grad_norm])`: the exact scalar 0.
pub fn adam(c: &mut ShapeCtx) -> Rule {
    for i in 2..6 {
        c.scalar(i)?;
    }
    max_norm(c, 6)?;
    scalar_loss(c);
    Ok(AbsValue::scalar(0.0))
}

/// `adamw(loss, params, lr, b1, b2, eps, weight_decay [, max_grad_norm] [, decay])`.
pub fn adamw(c: &mut ShapeCtx) -> Rule {
    for i in 2..6 {
        c.scalar(i)?;
    }
    if let Some(wd) = c.scalar(6)? {
        super::site::check_weight_decay(c, 6, wd)?;
    }
    let at = (7..c.len()).find(|&i| matches!(c.value(i), AbsValue::Str(_)));
    if at != Some(7) {
        max_norm(c, 7)?;
    }
    let strings: Vec<Option<String>> = (0..c.len())
        .map(|i| match c.value(i) {
            AbsValue::Str(s) => s.clone(),
            _ => None,
        })
        .collect();
    let unknown = |i: usize| matches!(c.value(i), AbsValue::Unknown);
    if at.is_some() || !(c.len() > 8 && unknown(8)) {
        super::site::adamw_decay(c, c.len(), at, |i| strings[i].as_deref())?;
    }
    scalar_loss(c);
    Ok(AbsValue::scalar(0.0))
}

/// `momentum_sgd(loss, params, lr, beta)`.
pub fn momentum_sgd(c: &mut ShapeCtx) -> Rule {
    c.scalar(2)?;
    c.scalar(3)?;
    scalar_loss(c);
    Ok(AbsValue::scalar(0.0))
}

/// `cosine_schedule(step, total, lr_min, lr_max)`: a scalar, folded when constant.
pub fn cosine_schedule(c: &mut ShapeCtx) -> Rule {
    let v: Vec<Option<f64>> = (0..4).map(|i| c.scalar(i)).collect::<Result<_, _>>()?;
    Ok(match (v[0], v[1], v[2], v[3]) {
        (Some(step), Some(total), Some(lo), Some(hi)) => AbsValue::scalar(if total <= 0.0 {
            hi
        } else {
            lo + 0.5
                * (hi - lo)
                * (1.0 + math::cos(std::f64::consts::PI * step.clamp(0.0, total) / total))
        }),
        _ => AbsValue::any_scalar(),
    })
}

/// `linear_warmup(step, warmup, lr)`: a scalar, folded when constant.
pub fn linear_warmup(c: &mut ShapeCtx) -> Rule {
    let v: Vec<Option<f64>> = (0..3).map(|i| c.scalar(i)).collect::<Result<_, _>>()?;
    Ok(match (v[0], v[1], v[2]) {
        (Some(step), Some(warmup), Some(lr)) => AbsValue::scalar(if warmup <= 0.0 {
            lr
        } else {
            lr * (step / warmup).clamp(0.0, 1.0)
        }),
        _ => AbsValue::any_scalar(),
    })
}
