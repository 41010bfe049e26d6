//! [`CompiledStep`]: a captured `train` step on MLX as one graph compiled with
//! MLX's `compile` transform: forward, backward and the optimizer updates
//! traced once from the plan's calls, cached by MLX, and run once per step
//! with a single evaluation.
//!
//! The graph's inputs are every input of the plan (parameters and optimizer
//! moments carried from the previous step, the batch and the constants made
//! on the host), so nothing of the data is captured as a constant, and, per
//! Adam update, its two bias corrections (they depend on the update count),
//! and, per dropout mask, its key (it depends on the step: the graph makes
//! each step's mask from the key it is given, the eager step's bits).
//! Its outputs are the values a step leaves for the next one or for the host;
//! they stay MLX arrays. A step whose kernels MLX lacks (one that would run on
//! the CPU) cannot be one graph: [`compile_step`] then says so and the loop
//! stays eager, as with the CPU's guards.

use std::sync::Arc;
use std::time::Duration;

use mlx_rs::error::Exception;
use mlx_rs::Array;

use super::backend::{dims, locked, mlx_error, traced, MlxBackend, DEVICE};
use super::kernels::adam_arrays;
use crate::backend::{AdamStep, DeviceError, DropoutKey, Result};
use crate::capture::{replay, CallObserver, Op, StepPlan, StepProgram, ValueId};
use crate::clock::Instant;
use crate::tensor::Tensor;
use crate::CpuFallback;

/// What the traced function needs of the plan: its calls, the values' shapes,
/// which values are the graph's inputs and which its outputs.
#[derive(Debug)]
struct Graph {
    calls: Vec<(Op, Vec<ValueId>, Vec<ValueId>)>,
    shapes: Vec<Vec<usize>>,
    inputs: Vec<ValueId>,
    outputs: Vec<ValueId>,
}

/// The compiled function: MLX's compiled closure, called only while holding
/// the MLX lock.
struct Compiled(Option<Box<dyn FnMut(&[Array]) -> std::result::Result<Vec<Array>, Exception>>>);

// SAFETY: mlx-rs marks a compiled function as not `Send` (an `Rc` marker)
// because MLX's graph must not be used from two threads at once. This one is
// owned by one program and called (and dropped) only while holding the MLX
// lock, which serializes every use of MLX in the process.
unsafe impl Send for Compiled {}

impl Drop for Compiled {
    fn drop(&mut self) {
        let f = self.0.take();
        locked(move || drop(f));
    }
}

/// A captured step as one compiled MLX graph.
pub struct CompiledStep {
    backend: Arc<CpuFallback<MlxBackend>>,
    graph: Arc<Graph>,
    compiled: Compiled,
    /// Per graph input: its array for the next run.
    args: Vec<Array>,
    /// Per graph input: the output (index into `graph.outputs`) it is carried
    /// from, for state; `None` for data and constants.
    carried: Vec<Option<usize>>,
    /// The Adam updates of the step, in call order.
    adam: Vec<AdamStep>,
    /// The dropout masks of the step, in call order.
    dropout: Vec<DropoutKey>,
    /// Per value: its tensor after the last run (the graph's outputs).
    results: Vec<Option<Tensor>>,
    runs: u64,
    kernel: Duration,
}

/// The MLX program of `plan`: one compiled graph, or why it cannot be one
/// (the runtime then keeps the loop eager and reports the reason).
pub(super) fn compile_step(mlx: &MlxBackend, plan: &StepPlan) -> Result<Box<dyn StepProgram>> {
    let t = &plan.trace;
    let graph = Arc::new(Graph {
        calls: t
            .calls
            .iter()
            .map(|c| (c.op.clone(), c.inputs.clone(), c.outputs.clone()))
            .collect(),
        shapes: t.values.iter().map(|v| v.shape.clone()).collect(),
        inputs: plan.inputs.iter().map(|i| i.value).collect(),
        outputs: plan.live_at_end(),
    });
    let adam: Vec<AdamStep> = t
        .calls
        .iter()
        .filter_map(|c| match c.op {
            Op::AdamUpdate { step } => Some(step),
            _ => None,
        })
        .collect();
    let dropout: Vec<DropoutKey> = t
        .calls
        .iter()
        .filter_map(|c| match c.op {
            Op::DropoutMask { key, .. } => Some(key),
            _ => None,
        })
        .collect();
    let carried = plan
        .inputs
        .iter()
        .map(|i| {
            i.carried_from.map(|from| {
                graph
                    .outputs
                    .binary_search(&from)
                    .expect("carried values are live at the end")
            })
        })
        .collect();
    let mut args = Vec::with_capacity(plan.inputs.len());
    for input in &plan.inputs {
        args.push(locked(|| mlx.array(&input.initial))?);
    }
    let backend = MlxBackend::shared_backend();
    let traced_with = backend.clone();
    let traced_graph = graph.clone();
    let f = move |xs: &[Array]| -> std::result::Result<Vec<Array>, Exception> {
        super::TRACES.with(|n| n.set(n.get() + 1));
        trace(&traced_with, &traced_graph, xs).map_err(|e| Exception::custom(e.to_string()))
    };
    let compiled = mlx_rs::transforms::compile::compile(f, false);
    let mut step = CompiledStep {
        backend,
        graph,
        compiled: Compiled(Some(Box::new(compiled))),
        args,
        carried,
        adam,
        dropout,
        results: vec![None; t.values.len()],
        runs: 0,
        kernel: Duration::ZERO,
    };
    // Trace (and compile) now, lazily (nothing is computed), so that a step
    // MLX cannot run as one graph is known before the loop goes on.
    let inputs = step.inputs();
    let tried = traced(|| locked(|| step.call(&inputs)));
    match tried {
        Ok(Ok(_)) => Ok(Box::new(step)),
        Ok(Err(e)) => Err(e),
        Err(why) => Err(DeviceError::Backend {
            device: DEVICE.to_string(),
            message: format!("{}, which one compiled MLX graph cannot do", spoiled(why)),
        }),
    }
}

/// What spoiled a trace, in words.
fn spoiled(why: &str) -> String {
    if why.starts_with("a ") {
        format!("the step needs {why}")
    } else {
        format!("`{why}` has no MLX kernel and would run on the CPU")
    }
}

/// The step's graph: the plan's calls made on MLX with `xs` (the graph's
/// inputs, then two bias corrections per Adam update, then one key per dropout
/// mask) as the inputs' arrays; the arrays of the graph's outputs.
fn trace(b: &CpuFallback<MlxBackend>, g: &Graph, xs: &[Array]) -> Result<Vec<Array>> {
    let err = |e: Exception| mlx_error("tracing the step", e);
    let mut vals: Vec<Option<Array>> = vec![None; g.shapes.len()];
    for (v, x) in g.inputs.iter().zip(xs) {
        vals[v.index()] = Some(x.clone());
    }
    let updates = g
        .calls
        .iter()
        .filter(|(op, ..)| matches!(op, Op::AdamUpdate { .. }))
        .count();
    let (corrections, keys) = xs[g.inputs.len()..].split_at(2 * updates);
    let (mut corrections, mut keys) = (corrections.chunks(2), keys.iter());
    let get = |vals: &[Option<Array>], v: ValueId| -> Result<Array> {
        vals[v.index()].clone().ok_or_else(|| DeviceError::Backend {
            device: DEVICE.to_string(),
            message: format!("captured step: value {} is not defined before its use", v.0),
        })
    };
    for (op, ins, outs) in &g.calls {
        let args: Vec<Array> = ins.iter().map(|&v| get(&vals, v)).collect::<Result<_>>()?;
        let results: Vec<Array> = match op {
            Op::View => vec![args[0]
                .reshape(&dims(&g.shapes[outs[0].index()]))
                .map_err(err)?],
            // Inside one graph a copy between host and MLX is the identity.
            Op::Upload | Op::Download => vec![args[0].clone()],
            Op::AdamUpdate { step } => {
                let [bc1, bc2] = corrections.next().expect("two corrections per update") else {
                    unreachable!("chunks of two")
                };
                let k = step.constants();
                let (p, m, v) = adam_arrays(&k, bc1, bc2, [&args[0], &args[1], &args[2], &args[3]])
                    .map_err(err)?;
                vec![p, m, v]
            }
            Op::DropoutMask { shape, p, .. } => {
                let key = keys.next().expect("one key per dropout mask");
                let n: usize = shape.iter().product();
                if n == 0 {
                    vec![Array::zeros::<f32>(&[0]).map_err(err)?]
                } else {
                    vec![super::integer::dropout_mask(n, key, *p).map_err(err)?]
                }
            }
            op => {
                let tensors: Vec<Tensor> = ins
                    .iter()
                    .zip(args)
                    .map(|(&v, a)| as_tensor(&b.0, a, &g.shapes[v.index()]))
                    .collect::<Result<_>>()?;
                let outputs = replay(b, op, tensors, 0)?;
                if let Some(why) = super::backend::trace_fallback() {
                    return Err(DeviceError::Backend {
                        device: DEVICE.to_string(),
                        message: spoiled(why),
                    });
                }
                outputs.iter().map(array_of).collect::<Result<_>>()?
            }
        };
        for (v, a) in outs.iter().zip(results) {
            let shape = dims(&g.shapes[v.index()]);
            let a = if a.shape() == shape.as_slice() {
                a
            } else {
                a.reshape(&shape).map_err(err)?
            };
            vals[v.index()] = Some(a);
        }
    }
    g.outputs.iter().map(|&v| get(&vals, v)).collect()
}

/// `a` (an array being traced) as a tensor of `shape`, for a kernel.
fn as_tensor(mlx: &MlxBackend, a: Array, shape: &[usize]) -> Result<Tensor> {
    let a = a
        .reshape(&dims(shape))
        .map_err(|e| mlx_error("tracing the step", e))?;
    mlx.tensor(a)
}

/// The array a kernel's result holds (a host result, such as an empty one, as a constant).
fn array_of(t: &Tensor) -> Result<Array> {
    match t
        .device_buffer()
        .and_then(|b| b.as_any().downcast_ref::<super::buffer::MlxBuffer>())
    {
        Some(b) => Ok(b.array()),
        None => Ok(Array::from_slice(t.host(), &dims(t.shape()))),
    }
}

impl CompiledStep {
    /// The graph's inputs for the next run: the inputs' arrays, each Adam
    /// update's bias corrections at its update count this run and each dropout
    /// mask's key at this run's step.
    fn inputs(&self) -> Vec<Array> {
        let mut xs = self.args.clone();
        for step in &self.adam {
            // The update count of this run, as every replay counts it.
            let k = crate::declare::Attr::replayed(step, self.runs).constants();
            xs.push(Array::from_f32(k.bc1));
            xs.push(Array::from_f32(k.bc2));
        }
        for key in &self.dropout {
            // The step of this run, as every replay counts it.
            let k = crate::declare::Attr::replayed(key, self.runs).key();
            xs.push(super::integer::u64s(k));
        }
        xs
    }

    /// Calls the compiled graph (holding the MLX lock).
    fn call(&mut self, xs: &[Array]) -> Result<Vec<Array>> {
        let f = self
            .compiled
            .0
            .as_mut()
            .expect("the compiled function lives until dropped");
        f(xs).map_err(|e| mlx_error("the compiled step", e))
    }

    fn mlx(&self) -> &MlxBackend {
        &self.backend.0
    }
}

impl StepProgram for CompiledStep {
    fn run_observed(&mut self, _after_call: Option<CallObserver<'_>>) -> Result<()> {
        let started = Instant::now();
        if self.runs > 0 {
            for (i, from) in self.carried.iter().enumerate() {
                if let Some(o) = from {
                    let v = self.graph.outputs[*o];
                    if let Some(t) = &self.results[v.index()] {
                        self.args[i] = self.mlx().array(t)?;
                    }
                }
            }
        }
        let xs = self.inputs();
        let outs = locked(|| self.call(&xs))?;
        self.mlx().stats.kernel();
        {
            let refs: Vec<&Array> = outs.iter().collect();
            self.mlx().settle(&refs, "the compiled step")?;
        }
        self.results.iter_mut().for_each(|r| *r = None);
        for (&v, a) in self.graph.outputs.iter().zip(outs) {
            let t = locked(|| self.mlx().tensor(a))?;
            self.results[v.index()] = Some(t);
        }
        self.kernel += started.elapsed();
        self.runs += 1;
        Ok(())
    }

    fn first_element(&self, v: ValueId) -> Result<f32> {
        Ok(self.tensor(v)?.host()[0])
    }

    fn tensor(&self, v: ValueId) -> Result<Tensor> {
        self.results[v.index()]
            .clone()
            .ok_or_else(|| DeviceError::Backend {
                device: DEVICE.to_string(),
                message: format!("captured step: value {} is not kept after a step", v.0),
            })
    }

    fn kernel_time(&self) -> Duration {
        self.kernel
    }

    fn kind(&self) -> &'static str {
        "graph"
    }
}
