//! [`Recorder`]: a [`Backend`] that runs every kernel on another backend and
//! writes the call into a [`Trace`]. Its `Backend` methods are generated from
//! the kernel table (`kernels.rs`), so none can go unrecorded.

use super::release::{self, AllocatorEvent};
use super::trace::{overwritten_inputs, Call, Origin, Trace, ValueId, ValueInfo};
use crate::backend::{Backend, Result};
use crate::host_reads::{self, unnoted};
use crate::kernels::Op;
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct State {
    trace: Trace,
    /// The latest value of each storage.
    by_storage: HashMap<usize, ValueId>,
    /// Values with a storage of their own that were alive at the last sample.
    live: Vec<ValueId>,
    /// Bytes of the `live` values.
    live_bytes: u64,
    /// Inputs an Adam update overwrote, released from the trace once nothing
    /// else holds them ([`Trace::release_overwritten_inputs`]).
    overwritten: Vec<ValueId>,
    /// The live bytes after each call ([`State::sample_live`]).
    samples: Vec<u64>,
    /// For each input (by position in [`Trace::inputs`]): how many samples
    /// were taken before the step's kernels first saw it.
    input_seen_at: Vec<usize>,
    /// Whether each input holds optimizer state an Adam update overwrites.
    state_input: Vec<bool>,
}

impl State {
    fn push_value(&mut self, t: &Tensor, origin: Origin) -> ValueId {
        let id = ValueId(self.trace.values.len() as u32);
        self.trace.values.push(ValueInfo {
            shape: t.shape().to_vec(),
            origin,
        });
        self.trace.tensors.push(t.downgrade());
        self.by_storage.insert(t.storage_key(), id);
        id
    }

    /// [`State::push_value`] for a tensor with a storage of its own (not a
    /// view), counted in the live bytes.
    fn push_owner(&mut self, t: &Tensor, origin: Origin) -> ValueId {
        let id = self.push_value(t, origin);
        self.live.push(id);
        self.live_bytes += 4 * t.numel() as u64;
        id
    }

    /// Drops the values no tensor holds any more from the live bytes and
    /// raises the trace's live peak to what is left.
    fn sample_live(&mut self) {
        let (tensors, mut bytes) = (&self.trace.tensors, self.live_bytes);
        self.live.retain(|v| {
            let t = &tensors[v.index()];
            let alive = t.is_alive();
            if !alive {
                bytes -= 4 * t.numel() as u64;
            }
            alive
        });
        self.live_bytes = bytes;
        self.trace.live_peak_bytes = self.trace.live_peak_bytes.max(bytes);
        self.samples.push(bytes);
    }

    /// Counts the optimizer state (the `p`, `m`, `v` an Adam update reads)
    /// as live from the start of the step: the workspace holds it throughout,
    /// though the kernels see the moments only at the update, and the
    /// captured step's block holds it throughout too. Raises the live peak
    /// accordingly.
    fn count_state_from_start(&mut self) {
        let mut extra = vec![0i64; self.samples.len() + 1];
        for (j, (_, t)) in self.trace.inputs.iter().enumerate() {
            if !self.state_input.get(j).copied().unwrap_or(false) {
                continue;
            }
            let bytes = 4 * t.as_ref().map_or_else(
                || self.trace.tensors[self.trace.inputs[j].0.index()].numel(),
                Tensor::numel,
            ) as i64;
            // Before it was first seen, it was alive but not counted.
            extra[0] += bytes;
            extra[self.input_seen_at[j].min(self.samples.len())] -= bytes;
        }
        let mut add = 0i64;
        for (&s, e) in self.samples.iter().zip(&extra) {
            add += e;
            let live = (s as i64 + add).max(0) as u64;
            self.trace.live_peak_bytes = self.trace.live_peak_bytes.max(live);
        }
    }

    /// The value `t` is: a known value, a view of one (recorded as a
    /// [`Op::View`] call the first time), or a new input.
    fn value_of(&mut self, t: &Tensor) -> ValueId {
        let Some(&base) = self.by_storage.get(&t.storage_key()) else {
            let i = self.trace.inputs.len();
            let id = self.push_owner(t, Origin::Input(i));
            self.trace.inputs.push((id, Some(t.clone())));
            self.input_seen_at.push(self.samples.len());
            self.state_input.push(false);
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

    /// Releases the overwritten inputs nothing outside the trace holds any
    /// more (the caller of an Adam update holds its old state until the call
    /// is recorded, so they are checked again at each later call).
    fn release_overwritten(&mut self) {
        let trace = &mut self.trace;
        self.overwritten.retain(|v| {
            let Origin::Input(j) = trace.values[v.index()].origin else {
                return false;
            };
            !trace.release_input(j)
        });
    }

    fn record(&mut self, op: Op, inputs: &[&Tensor], outputs: &[&Tensor]) {
        self.release_overwritten();
        let ins: Vec<ValueId> = inputs.iter().map(|t| self.value_of(t)).collect();
        for &i in overwritten_inputs(&op) {
            let v = ins[i];
            if let Origin::Input(j) = self.trace.value(v).origin {
                self.overwritten.push(v);
                self.state_input[j] = true;
            }
        }
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
            .map(|(index, t)| self.push_owner(t, Origin::Output { call, index }))
            .collect();
        self.trace.calls.push(Call {
            op,
            inputs: ins,
            outputs: outs,
        });
        self.sample_live();
    }
}

/// A backend that runs every kernel on an inner backend and records it.
///
/// Create one with [`Recorder::start`] on the thread that will run the step,
/// give it to the code that runs the step in place of the inner backend, then
/// call [`Recorder::finish`] on the same thread. Every tensor the calls see is
/// named in the trace by a weak handle, so storages are never reused while
/// recording and identify values, while each value is still freed when the
/// step drops it (the CPU's buffer pool is bypassed on the recording thread,
/// as it would keep the buffers). The trace notes the step's live peak
/// ([`Trace::live_peak_bytes`]). While recording, reads of tensor elements on
/// the host by anything but the kernels are noted ([`Trace::host_reads`]).
#[derive(Debug)]
pub struct Recorder {
    inner: Arc<dyn Backend>,
    state: Mutex<State>,
    /// Whether [`Recorder::finish`] ran (the allocator hook is told once).
    finished: AtomicBool,
}

impl Recorder {
    /// Starts recording the calls made through the returned backend; host reads
    /// on the calling thread are noted until [`Recorder::finish`].
    pub fn start(inner: Arc<dyn Backend>) -> Arc<Recorder> {
        host_reads::start();
        crate::cpu::bypass_buffer_pool(true);
        release::notify(AllocatorEvent::RecordingStarts);
        Arc::new(Recorder {
            inner,
            state: Mutex::new(State::default()),
            finished: AtomicBool::new(false),
        })
    }

    /// Stops noting host reads and returns what was recorded, with the
    /// overwritten optimizer state released
    /// ([`Trace::release_overwritten_inputs`]).
    pub fn finish(&self) -> Trace {
        let reads = host_reads::stop();
        crate::cpu::bypass_buffer_pool(false);
        if !self.finished.swap(true, Ordering::Relaxed) {
            release::notify(AllocatorEvent::RecordingEnds);
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = std::collections::HashSet::new();
        for key in reads {
            if let Some(&v) = state.by_storage.get(&key) {
                if seen.insert(v) {
                    state.trace.host_reads.push(v);
                }
            }
        }
        state.count_state_from_start();
        let mut trace = std::mem::take(&mut state.trace);
        drop(state);
        trace.release_overwritten_inputs();
        trace
    }

    /// The backend the kernels run on.
    pub(crate) fn inner(&self) -> &dyn Backend {
        &*self.inner
    }

    /// Runs `f` on the inner backend without noting its host reads or
    /// recording anything.
    pub(crate) fn run_unrecorded<T>(&self, f: impl FnOnce(&dyn Backend) -> Result<T>) -> Result<T> {
        unnoted(|| f(&*self.inner))
    }

    /// Records `op` with the tensors `inputs` (as they were before the call)
    /// and `outputs`.
    pub(crate) fn note(&self, op: Op, inputs: &[Tensor], outputs: &[&Tensor]) {
        let inputs: Vec<&Tensor> = inputs.iter().collect();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.record(op, &inputs, outputs);
    }

    /// Runs `f` on the inner backend, then records `op` with the tensors
    /// `inputs` and the results `outputs(&result)` gives.
    pub(crate) fn run<T>(
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
    /// Stops noting host reads and tells the allocator hook that recording
    /// ended (when [`Recorder::finish`] was not reached, as when the step
    /// panicked).
    fn drop(&mut self) {
        host_reads::stop();
        crate::cpu::bypass_buffer_pool(false);
        if !self.finished.swap(true, Ordering::Relaxed) {
            release::notify(AllocatorEvent::RecordingEnds);
        }
    }
}
