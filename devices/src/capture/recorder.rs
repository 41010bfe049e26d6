//! [`Recorder`]: a [`Backend`] that runs every kernel on another backend and
//! writes the call into a [`Trace`].

use super::op::Op;
use super::trace::{Call, Origin, Trace, ValueId, ValueInfo};
use crate::backend::{
    AdamStep, Backend, BinaryOp, Counters, DeviceKind, ReduceOp, Result, UnaryOp,
};
use crate::host_reads::{self, unnoted};
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct State {
    trace: Trace,
    /// The latest value of each storage.
    by_storage: HashMap<usize, ValueId>,
}

impl State {
    fn push_value(&mut self, t: &Tensor, origin: Origin) -> ValueId {
        let id = ValueId(self.trace.values.len() as u32);
        self.trace.values.push(ValueInfo {
            shape: t.shape().to_vec(),
            origin,
        });
        self.trace.tensors.push(t.clone());
        self.by_storage.insert(t.storage_key(), id);
        id
    }

    /// The value `t` is: a known value, a view of one (recorded as a
    /// [`Op::View`] call the first time), or a new input.
    fn value_of(&mut self, t: &Tensor) -> ValueId {
        let Some(&base) = self.by_storage.get(&t.storage_key()) else {
            let i = self.trace.inputs.len();
            let id = self.push_value(t, Origin::Input(i));
            self.trace.inputs.push((id, t.clone()));
            return id;
        };
        if self.trace.value(base).shape == t.shape() {
            return base;
        }
        if let Some(view) = self.view_of(base, t.shape()) {
            return view;
        }
        let call = self.trace.calls.len();
        let view = self.push_value(t, Origin::Output { call, index: 0 });
        // The storage keeps naming the viewed value.
        self.by_storage.insert(t.storage_key(), base);
        self.trace.calls.push(Call {
            op: Op::View,
            inputs: vec![base],
            outputs: vec![view],
        });
        view
    }

    /// The view of `v` with `shape` recorded earlier, if any.
    fn view_of(&self, v: ValueId, shape: &[usize]) -> Option<ValueId> {
        self.trace.calls.iter().rev().find_map(|c| {
            (c.op == Op::View && c.inputs[0] == v && self.trace.value(c.outputs[0]).shape == shape)
                .then_some(c.outputs[0])
        })
    }

    fn record(&mut self, op: Op, inputs: &[&Tensor], outputs: &[&Tensor]) {
        let ins: Vec<ValueId> = inputs.iter().map(|t| self.value_of(t)).collect();
        let fresh = outputs
            .iter()
            .all(|t| !self.by_storage.contains_key(&t.storage_key()));
        if outputs.is_empty() || !fresh {
            // No result (a backend without a dropout-mask kernel), or the kernel
            // handed back a tensor it was given (an identity, such as an upload
            // on the CPU): nothing to replay.
            return;
        }
        let call = self.trace.calls.len();
        let outs = outputs
            .iter()
            .enumerate()
            .map(|(index, t)| self.push_value(t, Origin::Output { call, index }))
            .collect();
        self.trace.calls.push(Call {
            op,
            inputs: ins,
            outputs: outs,
        });
    }
}

/// A backend that runs every kernel on an inner backend and records it.
///
/// Create one with [`Recorder::start`] on the thread that will run the step,
/// give it to the code that runs the step in place of the inner backend, then
/// call [`Recorder::finish`] on the same thread. Every tensor the calls see is
/// kept in the trace until it is dropped, so storages are never reused while
/// recording and identify values. While recording, reads of tensor elements on
/// the host by anything but the kernels are noted ([`Trace::host_reads`]).
#[derive(Debug)]
pub struct Recorder {
    inner: Arc<dyn Backend>,
    state: Mutex<State>,
}

impl Recorder {
    /// Starts recording the calls made through the returned backend; host reads
    /// on the calling thread are noted until [`Recorder::finish`].
    pub fn start(inner: Arc<dyn Backend>) -> Arc<Recorder> {
        host_reads::start();
        Arc::new(Recorder {
            inner,
            state: Mutex::new(State::default()),
        })
    }

    /// Stops noting host reads and returns what was recorded.
    pub fn finish(&self) -> Trace {
        let reads = host_reads::stop();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = std::collections::HashSet::new();
        for key in reads {
            if let Some(&v) = state.by_storage.get(&key) {
                if seen.insert(v) {
                    state.trace.host_reads.push(v);
                }
            }
        }
        std::mem::take(&mut state.trace)
    }

    /// Runs `f` on the inner backend, then records `op` with the tensors
    /// `inputs` and the results `outputs(&result)` gives.
    fn run<T>(
        &self,
        op: Op,
        inputs: &[&Tensor],
        f: impl FnOnce(&dyn Backend) -> Result<T>,
        outputs: impl FnOnce(&T) -> Vec<&Tensor>,
    ) -> Result<T> {
        let result = unnoted(|| f(&*self.inner))?;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.record(op, inputs, &outputs(&result));
        Ok(result)
    }
}

impl Drop for Recorder {
    /// Stops noting host reads (when [`Recorder::finish`] was not reached, as
    /// when the step panicked).
    fn drop(&mut self) {
        host_reads::stop();
    }
}

/// The single output of a kernel that returns one tensor.
fn one(t: &Tensor) -> Vec<&Tensor> {
    vec![t]
}

impl Backend for Recorder {
    fn kind(&self) -> DeviceKind {
        self.inner.kind()
    }

    fn counters(&self) -> Counters {
        self.inner.counters()
    }

    fn reset_counters(&self) {
        self.inner.reset_counters()
    }

    fn take_fallbacks(&self) -> Vec<&'static str> {
        self.inner.take_fallbacks()
    }

    fn upload(&self, t: &Tensor) -> Result<Tensor> {
        self.run(Op::Upload, &[t], |b| b.upload(t), one)
    }

    fn download(&self, t: &Tensor) -> Result<Tensor> {
        self.run(Op::Download, &[t], |b| b.download(t), one)
    }

    fn unary(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        self.run(Op::Unary(op), &[x], |b| b.unary(op, x), one)
    }

    fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.run(Op::Binary(op), &[a, b], |k| k.binary(op, a, b), one)
    }

    fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.run(Op::Matmul, &[a, b], |k| k.matmul(a, b), one)
    }

    fn matmul_t(
        &self,
        a: &Tensor,
        b: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Tensor> {
        let op = Op::MatmulT {
            transpose_a,
            transpose_b,
        };
        self.run(
            op,
            &[a, b],
            |k| k.matmul_t(a, b, transpose_a, transpose_b),
            one,
        )
    }

    fn reduce(&self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.run(
            Op::Reduce { op, axis },
            &[x],
            |b| b.reduce(op, x, axis),
            one,
        )
    }

    fn argmax(&self, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.run(Op::Argmax { axis }, &[x], |b| b.argmax(x, axis), one)
    }

    fn softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.run(Op::Softmax { axis }, &[x], |b| b.softmax(x, axis), one)
    }

    fn log_softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.run(
            Op::LogSoftmax { axis },
            &[x],
            |b| b.log_softmax(x, axis),
            one,
        )
    }

    fn logsumexp(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.run(Op::LogSumExp { axis }, &[x], |b| b.logsumexp(x, axis), one)
    }

    fn softmax_backward(&self, y: &Tensor, dy: &Tensor, axis: usize) -> Result<Tensor> {
        self.run(
            Op::SoftmaxBackward { axis },
            &[y, dy],
            |b| b.softmax_backward(y, dy, axis),
            one,
        )
    }

    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        want_grad: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.run(
            Op::CrossEntropy { want_grad },
            &[logits, targets],
            |b| b.cross_entropy(logits, targets, want_grad),
            |(loss, grad)| std::iter::once(loss).chain(grad.as_ref()).collect(),
        )
    }

    fn permute(&self, x: &Tensor, perm: &[usize]) -> Result<Tensor> {
        let op = Op::Permute {
            perm: perm.to_vec(),
        };
        self.run(op, &[x], |b| b.permute(x, perm), one)
    }

    fn gather_rows(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
        self.run(
            Op::GatherRows,
            &[table, ids],
            |b| b.gather_rows(table, ids),
            one,
        )
    }

    fn scatter_add_rows(&self, ids: &Tensor, src: &Tensor, vocab: usize) -> Result<Tensor> {
        self.run(
            Op::ScatterAddRows { vocab },
            &[ids, src],
            |b| b.scatter_add_rows(ids, src, vocab),
            one,
        )
    }

    fn sum_to_shape(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        let op = Op::SumToShape {
            shape: shape.to_vec(),
        };
        self.run(op, &[g], |b| b.sum_to_shape(g, shape), one)
    }

    fn rms_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
        self.run(
            Op::RmsNorm { eps },
            &[x],
            |b| b.rms_norm(x, eps),
            |(y, r)| vec![y, r],
        )
    }

    fn rms_norm_backward(&self, x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Result<Tensor> {
        self.run(
            Op::RmsNormBackward,
            &[x, inv_rms, dy],
            |b| b.rms_norm_backward(x, inv_rms, dy),
            one,
        )
    }

    fn layer_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor, Tensor)> {
        self.run(
            Op::LayerNorm { eps },
            &[x],
            |b| b.layer_norm(x, eps),
            |(y, m, s)| vec![y, m, s],
        )
    }

    fn layer_norm_backward(
        &self,
        x: &Tensor,
        mean: &Tensor,
        inv_std: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        self.run(
            Op::LayerNormBackward,
            &[x, mean, inv_std, dy],
            |b| b.layer_norm_backward(x, mean, inv_std, dy),
            one,
        )
    }

    fn unary_backward(&self, op: UnaryOp, x: &Tensor, y: &Tensor, dy: &Tensor) -> Result<Tensor> {
        self.run(
            Op::UnaryBackward(op),
            &[x, y, dy],
            |b| b.unary_backward(op, x, y, dy),
            one,
        )
    }

    fn bias_act(&self, x: &Tensor, bias: &Tensor, act: UnaryOp) -> Result<Tensor> {
        self.run(
            Op::BiasAct(act),
            &[x, bias],
            |b| b.bias_act(x, bias, act),
            one,
        )
    }

    fn bias_act_backward(
        &self,
        x: &Tensor,
        bias: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        act: UnaryOp,
        want_bias: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.run(
            Op::BiasActBackward { act, want_bias },
            &[x, bias, y, dy],
            |b| b.bias_act_backward(x, bias, y, dy, act, want_bias),
            |(dx, db)| std::iter::once(dx).chain(db.as_ref()).collect(),
        )
    }

    fn masked_softmax(&self, x: &Tensor, divisor: f32, causal: bool) -> Result<Tensor> {
        self.run(
            Op::MaskedSoftmax { divisor, causal },
            &[x],
            |b| b.masked_softmax(x, divisor, causal),
            one,
        )
    }

    fn masked_softmax_backward(
        &self,
        y: &Tensor,
        dy: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        self.run(
            Op::MaskedSoftmaxBackward { divisor, causal },
            &[y, dy],
            |b| b.masked_softmax_backward(y, dy, divisor, causal),
            one,
        )
    }

    fn dropout_mask(&self, shape: &[usize], key: u64, p: f64) -> Result<Option<Tensor>> {
        self.run(
            Op::DropoutMask {
                shape: shape.to_vec(),
                key,
                p,
            },
            &[],
            |b| b.dropout_mask(shape, key, p),
            |m| m.iter().collect(),
        )
    }

    fn adam_update(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        step: &AdamStep,
    ) -> Result<()> {
        let (p0, m0, v0) = (p.clone(), m.clone(), v.clone());
        unnoted(|| self.inner.adam_update(p, g, m, v, step))?;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.record(Op::AdamUpdate(*step), &[&p0, g, &m0, &v0], &[p, m, v]);
        Ok(())
    }
}
