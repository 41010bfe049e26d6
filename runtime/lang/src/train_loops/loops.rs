//! The `train` loops of a program as the estimates see them: the model each
//! updates, the step shape its loss and body imply (batch and sequence from the
//! checker's exact shapes, the loss, the forward passes of recorded metrics,
//! the optimizer's state), and the device of the enclosing `device(…)` block.

use std::collections::HashSet;
use std::sync::Arc;

use crate::check::query::{Facts, OptimizerCall, TrainBlock};
use crate::nn::layers::Layer;
use crate::step_cost::kernels::{routes_on_host, LossKind, StepShape};
use mlpl_diag::Span;
use mlpl_syntax::walk;
use mlpl_syntax::{Expr, ExprKind, Program};

/// What the checker knows about a loss's batch.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchInfo {
    /// B and S inferred from the loss input's exact shape.
    Known {
        /// The input's shape as text.
        shape: String,
    },
    /// The input's size is only known at run time (shown for one row).
    Unknown {
        /// The input's shape as text.
        shape: String,
    },
    /// No `apply(model, x)` in the loss.
    NoApply,
}

impl BatchInfo {
    /// Whether B and S are the checker's exact values.
    pub fn known(&self) -> bool {
        matches!(self, BatchInfo::Known { .. })
    }
}

/// One training loop (or optimizer call) to estimate.
#[derive(Clone, Debug)]
pub struct TrainLoop {
    /// The `train` statement (or the optimizer call outside one).
    pub span: Span,
    /// Steps, when constant.
    pub steps: Option<usize>,
    /// The model.
    pub model: Arc<Layer>,
    /// Frozen parameter names.
    pub frozen: HashSet<String>,
    /// The step.
    pub step: StepShape,
    /// Where B and S come from.
    pub batch: BatchInfo,
    /// The device kind of the innermost enclosing `device("…")` block
    /// (`cpu`, `cuda`, `mlx`), when there is one.
    pub device: Option<String>,
    /// The optimizer.
    pub optimizer: String,
    /// Why the loop's step will not be captured (it runs interpreted every
    /// iteration), when the program shows it; `None` when it will be.
    pub not_captured: Option<&'static str>,
}

impl TrainLoop {
    /// Whether its steps will replay from a captured step.
    pub fn captured(&self) -> bool {
        self.not_captured.is_none()
    }
}

/// Why a loop with optimizer call `args` (of optimizer `name`) training
/// `model` will not be captured: step capture replays only steps whose every
/// kernel argument is the same each iteration, and a value made on the host
/// each step (gradient clipping's scale, a mixture of experts' routing) is not.
fn not_captured(name: &str, args: &[Expr], model: &Layer) -> Option<&'static str> {
    let clips = name == "adamw"
        && args.get(7).is_some_and(|a| {
            !matches!(a.kind, ExprKind::Number(v) if v == 0.0)
                && !matches!(a.kind, ExprKind::Str(_))
        });
    if clips {
        return Some("gradient clipping computes its scale on the host each step");
    }
    if routes_on_host(model) {
        return Some("a mixture of experts routes its rows on the host each step");
    }
    None
}

/// Optimizer state slots per parameter: Adam and AdamW keep two moments,
/// momentum SGD one velocity (LANGUAGE §12).
pub fn state_slots(optimizer: &str) -> f64 {
    if optimizer == "momentum_sgd" {
        1.0
    } else {
        2.0
    }
}

/// The loop of optimizer call `o` (in `train` block `t`, when inside one).
pub fn of_optimizer(
    program: &Program,
    o: &OptimizerCall,
    t: Option<&TrainBlock>,
) -> Option<TrainLoop> {
    let m = o.model.as_ref()?;
    let (batch, seq, info) = match &o.batch {
        Some(g) => {
            let shape = g.input.shape_text();
            match (g.batch, g.seq) {
                (Some(b), Some(s)) => (b as f64, s as f64, BatchInfo::Known { shape }),
                (b, s) => (
                    b.unwrap_or(1) as f64,
                    s.unwrap_or(1) as f64,
                    BatchInfo::Unknown { shape },
                ),
            }
        }
        None => (1.0, 1.0, BatchInfo::NoApply),
    };
    let span = t.map_or(o.call_span, |t| t.span);
    let mut calls = Vec::new();
    let mut loss = LossKind::Other;
    let mut devices = Vec::new();
    let mut why = None;
    for s in &program.stmts {
        walk::each_stmt_expr(s, &mut |e: &Expr| {
            if let ExprKind::Call { name, args } = &e.kind {
                if inside(e.span, span) {
                    calls.push(name.name.clone());
                }
                if e.span == o.call_span {
                    why = not_captured(&o.name, args, &m.0);
                }
                if name.name == "cross_entropy" && inside(e.span, o.call_span) {
                    loss = LossKind::CrossEntropy;
                }
            }
            if let ExprKind::Device { target, .. } = &e.kind {
                if inside(span, e.span) {
                    if let ExprKind::Str(s) = &target.kind {
                        devices.push((e.span, s.split(':').next().unwrap_or("").to_string()));
                    }
                }
            }
        });
    }
    let forwards = calls.iter().filter(|n| *n == "apply").count().max(1) as f64;
    let device = devices
        .into_iter()
        .min_by_key(|(sp, _)| sp.end - sp.start)
        .map(|(_, d)| d);
    Some(TrainLoop {
        span,
        steps: t.map_or(o.steps, |t| t.steps),
        model: m.0.clone(),
        frozen: o.frozen.clone(),
        step: StepShape {
            batch,
            seq,
            loss,
            forwards,
            slots: state_slots(&o.name),
        },
        batch: info,
        device,
        optimizer: o.name.clone(),
        not_captured: why,
    })
}

/// Every `train` block of a program with an estimable model, in source order.
pub fn train_loops(program: &Program, facts: &Facts) -> Vec<TrainLoop> {
    facts
        .trains
        .iter()
        .filter_map(|t| of_optimizer(program, &facts.optimizers[t.optimizer?], Some(t)))
        .collect()
}

fn inside(a: Span, b: Span) -> bool {
    b.start <= a.start && a.end <= b.end
}
