//! Step capture through the public API: two recorded steps of a small MLP
//! trained with Adam, planned and replayed by the generic call-by-call replay
//! and by the CPU's compiled program, compared bit for bit with eager steps;
//! and the reasons `plan` gives for steps it cannot replay.

use std::sync::Arc;

use mlpl_devices::capture::{
    self, AllocatorEvent, BackendReplay, Recorder, StepProgram, Trace, ValueId,
};
use mlpl_devices::{cpu, AdamStep, Backend, BinaryOp, Tensor, UnaryOp};

/// Deterministic pseudo-random values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(shape.to_vec(), values(shape.iter().product(), seed))
}

/// The trainable state: parameters and their Adam moments.
#[derive(Clone)]
struct State {
    params: Vec<Tensor>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    t: u64,
}

impl State {
    fn new() -> State {
        let params = vec![tensor(&[6, 16], 1), tensor(&[16], 2), tensor(&[16, 7], 3)];
        let zeros = |p: &Tensor| Tensor::zeros(p.shape().to_vec());
        State {
            m: params.iter().map(zeros).collect(),
            v: params.iter().map(zeros).collect(),
            params,
            t: 0,
        }
    }
}

/// One training step of `relu(x·W1 + b1)·W2` with cross-entropy, backward by
/// hand through the backend's kernels, and Adam; returns the loss.
fn step(b: &dyn Backend, s: &mut State, x: &Tensor, y: &Tensor) -> Tensor {
    let (w1, b1, w2) = (&s.params[0], &s.params[1], &s.params[2]);
    let pre = b
        .binary(BinaryOp::Add, &b.matmul(x, w1).unwrap(), b1)
        .unwrap();
    let h = b.unary(UnaryOp::Relu, &pre).unwrap();
    let logits = b.matmul(&h, w2).unwrap();
    let (loss, dlogits) = b.cross_entropy(&logits, y, true).unwrap();
    let dlogits = dlogits.unwrap();
    let dw2 = b.matmul_t(&h, &dlogits, true, false).unwrap();
    let dh = b.matmul_t(&dlogits, w2, false, true).unwrap();
    let on = b.binary(BinaryOp::Gt, &pre, &Tensor::scalar(0.0)).unwrap();
    let dpre = b.binary(BinaryOp::Mul, &dh, &on).unwrap();
    let db1 = b.sum_to_shape(&dpre, &[16]).unwrap();
    let dw1 = b.matmul_t(x, &dpre, true, false).unwrap();
    s.t += 1;
    for (i, g) in [dw1, db1, dw2].iter().enumerate() {
        let h = AdamStep {
            lr: 0.01,
            b1: 0.9,
            b2: 0.999,
            eps: 1e-8,
            wd: 0.0,
            t: s.t,
        };
        let (p, m, v) = (&mut s.params[i], &mut s.m[i], &mut s.v[i]);
        b.adam_update(p, g, m, v, h).unwrap();
    }
    loss
}

fn data() -> (Tensor, Tensor) {
    let x = tensor(&[10, 6], 7);
    let y = Tensor::from_vec(vec![10], (0..10).map(|i| (i * 3 % 7) as f32).collect());
    (x, y)
}

/// Records one step through a fresh recorder.
fn record(s: &mut State, x: &Tensor, y: &Tensor) -> (Trace, Tensor) {
    let rec = Recorder::start(cpu());
    let loss = step(&*rec, s, x, y);
    (rec.finish(), loss)
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.host().iter().map(|x| x.to_bits()).collect()
}

/// Two recorded steps, the values to keep (loss, then parameters), and the
/// state after them.
fn two_recorded_steps() -> (Trace, Trace, Vec<ValueId>, State) {
    let (x, y) = data();
    let mut s = State::new();
    let (first, _) = record(&mut s, &x, &y);
    let (second, loss) = record(&mut s, &x, &y);
    let mut keep = vec![second.find(&loss).expect("the loss is a recorded value")];
    keep.extend(
        s.params
            .iter()
            .map(|p| second.find(p).expect("updated parameters are recorded")),
    );
    (first, second, keep, s)
}

fn replays_like_eager(mut program: Box<dyn StepProgram>, keep: &[ValueId], mut eager: State) {
    let (x, y) = data();
    for run in 0..6 {
        program.run().unwrap();
        let loss = step(&*cpu(), &mut eager, &x, &y);
        assert_eq!(
            program.first_element(keep[0]).unwrap().to_bits(),
            loss.host()[0].to_bits(),
            "{}: loss of replay {run}",
            program.kind()
        );
    }
    for (i, &v) in keep[1..].iter().enumerate() {
        assert_eq!(
            bits(&program.tensor(v).unwrap()),
            bits(&eager.params[i]),
            "{}: parameter {i}",
            program.kind()
        );
    }
}

#[test]
fn generic_replay_and_cpu_program_match_eager_steps_bit_for_bit() {
    let (first, second, keep, after) = two_recorded_steps();
    let plan = capture::plan(&first, second, keep.clone()).expect("the steps are the same");
    let carried = plan
        .inputs
        .iter()
        .filter(|i| i.carried_from.is_some())
        .count();
    assert_eq!(carried, 9, "3 parameters and 6 moments are carried");
    let generic = Box::new(BackendReplay::new(cpu(), plan.clone()));
    assert_eq!(generic.kind(), "calls");
    replays_like_eager(generic, &keep, after.clone());
    let compiled = capture::compile(cpu(), plan).unwrap();
    assert_eq!(compiled.kind(), "arena", "the CPU compiles its own program");
    replays_like_eager(compiled, &keep, after);
}

#[test]
fn a_host_constant_that_changes_is_refused() {
    let (x, y) = data();
    let mut s = State::new();
    let b = cpu();
    let traced = |s: &mut State, k: f32| {
        let rec = Recorder::start(b.clone());
        let scaled = rec.binary(BinaryOp::Mul, &x, &Tensor::scalar(k)).unwrap();
        let loss = step(&*rec, s, &scaled, &y);
        (rec.finish(), loss)
    };
    let (first, _) = traced(&mut s, 1.0);
    let (second, _) = traced(&mut s, 2.0);
    let why = capture::plan(&first, second, vec![]).unwrap_err();
    assert!(why.contains("changes between iterations"), "{why}");
}

#[test]
fn different_shapes_are_refused() {
    let (x, y) = data();
    let mut s = State::new();
    let (first, _) = record(&mut s, &x, &y);
    let x2 = tensor(&[5, 6], 9);
    let y2 = Tensor::from_vec(vec![5], vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    let (second, _) = record(&mut s, &x2, &y2);
    let why = capture::plan(&first, second, vec![]).unwrap_err();
    assert!(why.contains("shape"), "{why}");
}

#[test]
fn a_computed_value_read_on_the_host_is_refused() {
    let (x, y) = data();
    let mut s = State::new();
    let traced = |s: &mut State| {
        let rec = Recorder::start(cpu());
        let loss = step(&*rec, s, &x, &y);
        // Host code deciding something from a computed value.
        let _ = loss.host()[0] > 1.0;
        (rec.finish(), loss)
    };
    let (first, _) = traced(&mut s);
    let (second, _) = traced(&mut s);
    let why = capture::plan(&first, second, vec![]).unwrap_err();
    assert!(why.contains("on the host"), "{why}");
}

#[test]
fn kernels_run_on_other_threads_are_not_host_reads() {
    // The recorder's own kernels read their inputs; only code outside kernels counts.
    // The state stays alive: a plan takes the carried values from it.
    let (first, second, keep, _state) = two_recorded_steps();
    assert!(second.host_reads.is_empty(), "{:?}", second.host_reads);
    assert!(capture::plan(&first, second, keep).is_ok());
    let _ = Arc::strong_count(&cpu());
}

/// A step that multiplies `x` by the dropout mask of `counter`.
fn dropout_step(counter: u64, p: f64) -> Trace {
    let rec = Recorder::start(cpu());
    let x = tensor(&[4, 8], 5);
    let key = mlpl_devices::DropoutKey {
        stream: 77,
        counter,
    };
    let mask = rec.dropout_mask(&[4, 8], key, p).unwrap().unwrap();
    let _ = rec.binary(BinaryOp::Mul, &x, &mask).unwrap();
    rec.finish()
}

#[test]
fn dropout_masks_replay_with_the_step_counted_on() {
    // Consecutive counters (the loop's `step`): replay run r makes the mask of
    // counter 6 + r + 1, as the eager step would, on every replay.
    let first = dropout_step(5, 0.5);
    let second = dropout_step(6, 0.5);
    let mask = second.calls[0].outputs[0];
    let plan = capture::plan(&first, second, vec![mask]).unwrap();
    let mut replay = BackendReplay::new(cpu(), plan.clone());
    let mut program = capture::compile(cpu(), plan).unwrap();
    for run in 0..3u64 {
        replay.run().unwrap();
        program.run().unwrap();
        let key = mlpl_devices::DropoutKey {
            stream: 77,
            counter: 7 + run,
        };
        let want = cpu().dropout_mask(&[4, 8], key, 0.5).unwrap().unwrap();
        let bits = |t: &Tensor| t.host().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&replay.tensor(mask).unwrap()),
            bits(&want),
            "replay run {run}"
        );
        assert_eq!(
            bits(&program.tensor(mask).unwrap()),
            bits(&want),
            "program run {run}"
        );
    }
}

#[test]
fn dropout_masks_of_other_steps_or_rates_are_refused() {
    // Not one step apart: a replay could not know the next counter.
    let why = capture::plan(&dropout_step(5, 0.5), dropout_step(7, 0.5), vec![]).unwrap_err();
    assert!(why.contains("not consecutive"), "{why}");
    let why = capture::plan(&dropout_step(5, 0.5), dropout_step(6, 0.25), vec![]).unwrap_err();
    assert!(why.contains("`dropout_mask`"), "{why}");
}

#[test]
fn a_recorded_step_does_not_hold_the_state_adam_overwrote() {
    let (x, y) = data();
    let mut s = State::new();
    let before: Vec<_> = s
        .params
        .iter()
        .chain(&s.m)
        .chain(&s.v)
        .map(Tensor::downgrade)
        .collect();
    let rec = Recorder::start(cpu());
    step(&*rec, &mut s, &x, &y);
    // The old state is released at the next recorded call, before the step
    // ends (an eager step updates it in place and never holds it twice).
    rec.unary(UnaryOp::Neg, &x).unwrap();
    for (i, w) in before.iter().enumerate() {
        assert!(
            !w.is_alive(),
            "state tensor {i} is still held by the recording"
        );
    }
    let trace = rec.finish();
    let released = trace.inputs.iter().filter(|(_, t)| t.is_none()).count();
    assert_eq!(released, 9, "3 parameters and 6 moments are released");
    let x_input = trace.find(&x).expect("the data is an input");
    assert!(
        trace
            .inputs
            .iter()
            .any(|(v, t)| *v == x_input && t.is_some()),
        "the data, still held by the caller, stays in the trace"
    );
}

#[test]
fn a_host_made_input_compared_with_released_state_is_refused() {
    // Each step starts from fresh host-made parameters: the second step's
    // would have to be compared with the first's, which Adam overwrote and the
    // recording released, so the plan is refused rather than guessed.
    let (x, y) = data();
    let traced = |t: u64| {
        let mut s = State::new();
        s.t = t;
        let rec = Recorder::start(cpu());
        let loss = step(&*rec, &mut s, &x, &y);
        (rec.finish(), loss)
    };
    let (first, _) = traced(0);
    let (second, _) = traced(1);
    let why = capture::plan(&first, second, vec![]).unwrap_err();
    assert!(why.contains("changes between iterations"), "{why}");
}

/// The allocator events told on this thread, in order.
static EVENTS: std::sync::Mutex<Vec<(std::thread::ThreadId, AllocatorEvent)>> =
    std::sync::Mutex::new(Vec::new());

fn note_event(e: AllocatorEvent) {
    EVENTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((std::thread::current().id(), e));
}

#[test]
fn the_allocator_hook_is_told_of_recording_and_of_the_compiled_step() {
    capture::set_allocator_hook(Some(note_event));
    // The state the second step left must be held while planning.
    let (first, second, keep, _state) = two_recorded_steps();
    let plan = capture::plan(&first, second, keep).unwrap();
    drop(first);
    let program = capture::compile(cpu(), plan).unwrap();
    capture::set_allocator_hook(None);
    let me = std::thread::current().id();
    let mine: Vec<AllocatorEvent> = EVENTS
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| *t == me)
        .map(|(_, e)| *e)
        .collect();
    use AllocatorEvent::*;
    assert_eq!(
        mine,
        vec![
            RecordingStarts,
            RecordingEnds,
            RecordingStarts,
            RecordingEnds,
            StepCompiled
        ]
    );
    assert_eq!(program.kind(), "arena");
}
