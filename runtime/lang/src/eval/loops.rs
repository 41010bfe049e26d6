//! `repeat`, `train`, `for` and `experiment` statements (LANGUAGE §6.3, §17).

use mlpl_diag::code;
use std::collections::BTreeMap;

use super::capture::{self, Recording, Replay};
use super::{ops, Interp, LoopStats};
use crate::data::experiments::{self, ParamInfo, RunRecord};
use crate::value::{named_shape, Array, Value};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::{Block, Expr, Ident};

/// Evaluates a loop count: a scalar read as a count (LANGUAGE §6.7).
fn loop_count(it: &mut Interp, count: &Expr) -> Result<usize, Diagnostic> {
    let v = it.expr(count)?;
    let a = super::expect_array(&v, count.span, "a loop count")?;
    let Some(n) = a.scalar_value() else {
        return Err(Diagnostic::of(code::E0205)
            .at(count.span, format!("has shape {}", named_shape(a)))
            .note("a loop count must be a scalar"));
    };
    if n.is_nan() {
        return Ok(0);
    }
    if n.fract() != 0.0 && n.is_finite() {
        it.warn(
            Diagnostic::of(code::W0202)
                .at(count.span, format!("runs {} times", n.trunc().max(0.0))),
        );
    }
    if n < 0.0 {
        it.warn(Diagnostic::of(code::W0203).at(count.span, "the loop runs zero times"));
        return Ok(0);
    }
    Ok(n.trunc().min(usize::MAX as f64) as usize)
}

/// `repeat N { body }`.
pub fn repeat(it: &mut Interp, count: &Expr, body: &Block) -> Result<Value, Diagnostic> {
    let n = loop_count(it, count)?;
    let mut last = Value::exact(0.0);
    for _ in 0..n {
        it.check_cancel(body.span)?;
        last = it.block(&body.stmts)?;
    }
    Ok(last)
}

/// How many iterations' losses and times a `train` loop reserves room for up
/// front; beyond that the vectors grow as they fill (a `train 100000000` loop
/// must not reserve gigabytes before its first step).
const RESERVED_STEPS: usize = 1 << 16;

/// `train N { body }`: binds `step`, records each iteration's loss and binds
/// `last_losses` after the loop. The outermost loop of a run captures its step
/// when it can (see [`super::capture`]): iterations 1 and 2 are recorded, the
/// rest replayed.
pub fn train(it: &mut Interp, count: &Expr, body: &Block) -> Result<Value, Diagnostic> {
    let n = loop_count(it, count)?;
    let mut losses = Vec::with_capacity(n.min(RESERVED_STEPS));
    let mut last = Value::exact(0.0);
    it.train_depth += 1;
    let depth = it.train_depth;
    if let Some(o) = it.observer_mut() {
        o.on_train_start(n, depth);
    }
    let why_eager = capture_ineligible(it, n, depth, body);
    if let Some(why) = &why_eager {
        report_mode(it, depth, Some(why), false, body);
    }
    let mut recording = why_eager.is_none().then(Recording::default);
    let mut replay: Option<Replay> = None;
    let loop_started = mlpl_devices::clock::Instant::now();
    let mut replay_wall = std::time::Duration::ZERO;
    // Each replayed iteration's wall time (room for the first
    // `RESERVED_STEPS`, so recording one rarely allocates).
    let mut replay_times: Vec<std::time::Duration> = Vec::with_capacity(if why_eager.is_none() {
        n.min(RESERVED_STEPS)
    } else {
        0
    });
    let mut eager_reason = why_eager.clone();
    let mut eager_live_peak = None;
    // The outermost loop on the CPU keeps the other kernel threads polling for
    // work between its kernels (`mlpl_devices::cpu::WarmWorkers`).
    let warm = (depth == 1 && it.devices.active().kind == mlpl_devices::DeviceKind::Cpu)
        .then(mlpl_devices::cpu::WarmWorkers::new);
    let result = (|| {
        for step in 0..n {
            it.check_cancel(body.span)?;
            if let Some(w) = &warm {
                w.rearm();
            }
            let started = mlpl_devices::clock::Instant::now();
            let loss = if let Some(r) = replay.as_mut() {
                let loss = r.step(body.span);
                let took = started.elapsed();
                replay_wall += took;
                replay_times.push(took);
                let loss = loss?;
                if r.replayed() == 1 {
                    // The program now holds everything it writes back.
                    r.release_carried(it);
                }
                loss
            } else {
                it.bind("step", Value::exact(step as f64), false);
                last = match recording.as_mut() {
                    Some(rec) if step < 2 => {
                        let (value, trace) = capture::recorded(it, |it| it.block(&body.stmts));
                        let value = value?;
                        if step == 0 {
                            rec.first_done(it, trace);
                        } else {
                            let lr = it.peek_reported_lr();
                            let rec = recording.take().expect("recording");
                            let peak = trace.live_peak_bytes;
                            eager_live_peak = Some(peak);
                            let memory = |r: Option<&Replay>| Memory {
                                arena: r.and_then(Replay::arena_bytes).map(|b| b.total()),
                                eager_peak: Some(peak),
                            };
                            match rec.second_done(it, trace, &value, lr) {
                                Ok(r) => {
                                    let m = memory(Some(&r));
                                    // The program holds the carried state
                                    // until its first run copies it.
                                    r.release_carried(it);
                                    replay = Some(r);
                                    report_mode_with(it, depth, None, false, body, m);
                                }
                                Err(why) => {
                                    report_mode_with(
                                        it,
                                        depth,
                                        Some(&why),
                                        true,
                                        body,
                                        memory(None),
                                    );
                                    eager_reason = Some(why);
                                }
                            }
                        }
                        value
                    }
                    _ => it.block(&body.stmts)?,
                };
                recorded_loss(&last, body)?
            };
            losses.push(loss);
            if it.observer_mut().is_some() {
                let lr = match &replay {
                    Some(r) if step >= 2 => r.lr,
                    _ => it.take_reported_lr(),
                };
                let ms = started.elapsed().as_secs_f64() * 1e3;
                if let Some(o) = it.observer_mut() {
                    o.on_step(step + 1, n, f64::from(loss), lr, ms);
                }
            }
        }
        Ok(())
    })();
    if depth == 1 {
        it.loop_stats.push(LoopStats {
            span: body.span,
            iterations: losses.len(),
            replayed: replay.as_ref().map_or(0, Replay::replayed),
            eager_reason,
            replay_kind: replay.as_ref().map(Replay::kind),
            wall: loop_started.elapsed(),
            replay_wall,
            replay_kernels: replay
                .as_ref()
                .map_or(Default::default(), Replay::kernel_time),
            replay_median: median(&mut replay_times),
            arena_bytes: replay.as_ref().and_then(Replay::arena_bytes),
            eager_live_peak,
        });
    }
    if let Some(r) = replay.take() {
        let written = r.finish(it, body.span);
        it.bind(
            "step",
            Value::exact(losses.len().saturating_sub(1) as f64),
            false,
        );
        match written {
            Ok(v) => last = v,
            Err(e) if result.is_ok() => {
                it.train_depth -= 1;
                return Err(e);
            }
            Err(_) => {}
        }
    }
    it.train_depth -= 1;
    if it.train_depth == 0 {
        // The loop's reused kernel buffers are not needed any more.
        mlpl_devices::cpu::release_unused_buffers();
    }
    if let Some(o) = it.observer_mut() {
        o.on_train_end(losses.len(), n, depth);
    }
    result?;
    let losses = Array::from_vec(vec![losses.len()], losses);
    it.bind("last_losses", Value::Array(losses), false);
    Ok(last)
}

/// The median of `times` (the upper one of an even count), `None` when empty.
fn median(times: &mut [std::time::Duration]) -> Option<std::time::Duration> {
    times.sort_unstable();
    times.get(times.len() / 2).copied()
}

/// Tells the observer how the loop's iterations run from now on (captured when
/// `reason` is `None`).
fn report_mode(
    it: &mut Interp,
    depth: usize,
    reason: Option<&str>,
    guard_failed: bool,
    body: &Block,
) {
    report_mode_with(it, depth, reason, guard_failed, body, Memory::default());
}

/// What a recorded loop's step holds: the captured arena's bytes and the
/// eager step's live peak.
#[derive(Clone, Copy, Default)]
struct Memory {
    arena: Option<u64>,
    eager_peak: Option<u64>,
}

/// [`report_mode`] with the step's memory.
fn report_mode_with(
    it: &mut Interp,
    depth: usize,
    reason: Option<&str>,
    guard_failed: bool,
    body: &Block,
    memory: Memory,
) {
    if let Some(o) = it.observer_mut() {
        o.on_step_mode(&super::StepMode {
            depth,
            captured: reason.is_none(),
            reason,
            guard_failed,
            span: body.span,
            arena_bytes: memory.arena,
            eager_live_peak: memory.eager_peak,
        });
    }
}

/// Why this loop runs every iteration eagerly, or `None` when it records its
/// first two iterations to capture the step.
fn capture_ineligible(it: &Interp, n: usize, depth: usize, body: &Block) -> Option<String> {
    if !it.capture_steps {
        return Some("step capture is turned off".into());
    }
    if it.trace.is_some() {
        return Some("the run is traced: every iteration is evaluated and recorded".into());
    }
    if depth > 1 || it.tape.is_some() {
        return Some("only the outermost `train` loop is captured".into());
    }
    if !it.frames.is_empty() {
        return Some("the loop is inside a function".into());
    }
    if n < 3 {
        return Some("fewer than 3 iterations: nothing to replay".into());
    }
    capture::static_reason(body).or_else(|| capture::functions_reason(body, &it.ws.functions))
}

/// The loss recorded for one iteration: a scalar itself, otherwise the mean.
fn recorded_loss(v: &Value, body: &Block) -> Result<f32, Diagnostic> {
    recorded_loss_of(v).ok_or_else(|| {
        Diagnostic::of(code::E0307)
            .at(last_stmt_span(body), format!("this is a {}", v.kind_name()))
            .note("the last statement of a `train` body is the iteration's loss")
    })
}

/// The loss recorded for an iteration whose body ended with `v`: a scalar
/// itself, otherwise the mean of its elements; `None` when `v` is not an array.
pub(super) fn recorded_loss_of(v: &Value) -> Option<f32> {
    let Value::Array(a) = v else { return None };
    Some(match a.scalar_value() {
        Some(x) => x as f32,
        None => {
            let data = a.to_f32();
            (data.iter().map(|&x| x as f64).sum::<f64>() / data.len().max(1) as f64) as f32
        }
    })
}

fn last_stmt_span(body: &Block) -> Span {
    body.stmts.last().map_or(body.span, |s| s.span)
}

/// `for x in E { body }`.
pub fn for_loop(
    it: &mut Interp,
    var: &Ident,
    iter: &Expr,
    body: &Block,
) -> Result<Value, Diagnostic> {
    let v = it.expr(iter)?;
    let a = super::expect_array(&v, iter.span, "`for`")?.clone();
    if a.rank() == 0 {
        return Err(Diagnostic::of(code::E0205)
            .at(iter.span, "a scalar")
            .note("`for` iterates over the rows (axis 0) of an array of rank 1 or more"));
    }
    let rows = a.shape()[0];
    // (An array with empty rows may have very many of them: do not reserve for all.)
    let mut values: Vec<(Array, Span)> = Vec::with_capacity(rows.min(1024));
    // `last_rows` holds every iteration's value: keep it within the allocation limit.
    let mut stacked_elements = 0usize;
    let mut last = Value::exact(0.0);
    for r in 0..rows {
        it.check_cancel(body.span)?;
        let row = ops::row(it, &a, r)?;
        it.bind(&var.name, Value::Array(row), false);
        last = it.block(&body.stmts)?;
        let Value::Array(out) = &last else {
            return Err(Diagnostic::of(code::E0307)
                .at(last_stmt_span(body), format!("this is a {}", last.kind_name()))
                .note("each iteration of `for` must end with an array; they are stacked into `last_rows`"));
        };
        if let Some((first, _)) = values.first() {
            if first.shape() != out.shape() {
                return Err(Diagnostic::of(code::E0215)
                    .at(
                        last_stmt_span(body),
                        format!("iteration {r} ends with shape {}", named_shape(out)),
                    )
                    .note(format!(
                        "the first iteration ended with shape {}",
                        named_shape(first)
                    )));
            }
        }
        stacked_elements = stacked_elements.saturating_add(out.numel());
        ops::check_size("for", &[stacked_elements], last_stmt_span(body))?;
        values.push((out.clone().unnamed(), last_stmt_span(body)));
    }
    let stacked = if values.is_empty() {
        Array::from_vec(vec![0], vec![])
    } else {
        ops::stack(it, &values, iter.span)?
    };
    it.ws
        .assign("last_rows", Value::Array(stacked.unnamed()), false);
    Ok(last)
}

/// `experiment NAME { body }` (LANGUAGE §17.1).
pub fn experiment(
    it: &mut Interp,
    name: &Expr,
    body: &Block,
    span: Span,
) -> Result<Value, Diagnostic> {
    let nv = it.expr(name)?;
    let Value::Str(run_name) = &nv else {
        return Err(Diagnostic::of(code::E0302)
            .at(name.span, format!("this is a {}", nv.kind_name()))
            .note("an experiment's name is a string"));
    };
    let run_name = run_name.to_string();
    let timestamp_ns = mlpl_devices::clock::unix_nanos();
    let value = it.block(&body.stmts)?;
    let record = snapshot(it, run_name, timestamp_ns);
    if let Some(dir) = it.ws.exp_dir.clone() {
        experiments::write_record(&dir, &record).map_err(|e| {
            Diagnostic::of(code::E0405)
                .at(span, "while recording this experiment")
                .note(format!("{}: {e}", dir.display()))
        })?;
    }
    it.ws.experiments.push(record);
    Ok(value)
}

fn snapshot(it: &Interp, name: String, timestamp_ns: u128) -> RunRecord {
    let mut metrics = BTreeMap::new();
    let mut params_snapshot = BTreeMap::new();
    for (k, v) in &it.ws.bindings {
        let Value::Array(a) = v else { continue };
        if k.ends_with("_metric") {
            if let Some(x) = a.scalar_value() {
                // A float32 metric is recorded as the decimal it displays as.
                let x = if a.is_exact() {
                    x
                } else {
                    crate::display::f32_as_decimal_f64(x as f32)
                };
                metrics.insert(k.clone(), x);
            }
        }
        if it.ws.tracked.contains(k) {
            params_snapshot.insert(
                k.clone(),
                ParamInfo {
                    shape: a.shape().to_vec(),
                    labels: a.names().map(|n| n.to_vec()),
                },
            );
        }
    }
    RunRecord {
        name,
        timestamp_ns,
        metrics,
        params_snapshot,
    }
}
