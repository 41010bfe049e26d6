//! Captured `train` steps (DESIGN §5, LANGUAGE §6.3): a loop that replays its
//! recorded step gives bit for bit what interpreting every iteration gives
//! (recorded losses, bindings, optimizer state, `step`, the loop's value), and
//! a loop whose iterations could differ stays interpreted and says why.

use std::sync::{Arc, Mutex};

use mlpl_lang::eval::{Interp, RunObserver, StepMode, Workspace};
use mlpl_lang::value::Value;
use mlpl_syntax::parse;

/// One step mode the observer heard: (captured, reason, guard failed).
type Mode = (bool, Option<String>, bool);

/// What the observer heard about step modes.
type Modes = Arc<Mutex<Vec<Mode>>>;

struct ModeLog(Modes);

impl RunObserver for ModeLog {
    fn on_step_mode(&mut self, mode: &StepMode<'_>) {
        self.0.lock().unwrap().push((
            mode.captured,
            mode.reason.map(str::to_string),
            mode.guard_failed,
        ));
    }
}

/// Runs `src` with step capture on or off; returns the interpreter, the run's
/// value and the step modes reported.
fn run(src: &str, capture: bool) -> (Interp, Option<Value>, Vec<Mode>) {
    let parsed = parse(src);
    assert!(parsed.diagnostics.iter().all(|d| !d.is_error()), "parses");
    let modes = Modes::default();
    let mut it = Interp::new(Workspace::new());
    it.capture_steps = capture;
    it.set_observer(Box::new(ModeLog(modes.clone())));
    let v = it
        .run(&parsed.program)
        .unwrap_or_else(|d| panic!("run failed: {} {}", d.code, d.message));
    let modes = modes.lock().unwrap().clone();
    (it, v, modes)
}

/// The bits of every element, so that comparisons are exact (NaN included).
fn bits(v: &Value) -> String {
    match v {
        Value::Array(a) => {
            let data: Vec<u32> = a.to_f32().iter().map(|x| x.to_bits()).collect();
            format!(
                "{:?} {:?} exact={} {:?}",
                a.shape(),
                a.names(),
                a.is_exact(),
                data
            )
        }
        other => other.display(),
    }
}

/// Asserts that two interpreters hold the same bindings and optimizer state,
/// bit for bit.
fn assert_same_state(a: &Interp, b: &Interp) {
    assert_eq!(a.ws.names(), b.ws.names(), "the same variables");
    for name in a.ws.names() {
        let (x, y) = (a.ws.get(name).unwrap(), b.ws.get(name).unwrap());
        assert_eq!(bits(x), bits(y), "variable `{name}` differs");
    }
    assert_eq!(a.ws.optim.len(), b.ws.optim.len(), "optimizer states");
    for (key, s) in &a.ws.optim {
        let t = &b.ws.optim[key];
        assert_eq!(s.steps, t.steps, "{key:?}: update count");
        let same = |x: &mlpl_devices::Tensor, y: &mlpl_devices::Tensor| {
            x.host()
                .iter()
                .map(|v| v.to_bits())
                .eq(y.host().iter().map(|v| v.to_bits()))
        };
        assert!(same(&s.m, &t.m), "{key:?}: first moment differs");
        match (&s.v, &t.v) {
            (Some(x), Some(y)) => assert!(same(x, y), "{key:?}: second moment differs"),
            (None, None) => {}
            _ => panic!("{key:?}: second moment present in one run only"),
        }
    }
}

/// Runs `src` both ways and asserts identical results; returns the modes the
/// captured run reported.
fn same_both_ways(src: &str) -> Vec<Mode> {
    let (eager, ve, _) = run(src, false);
    let (captured, vc, modes) = run(src, true);
    assert_eq!(
        ve.as_ref().map(bits),
        vc.as_ref().map(bits),
        "the run's value differs"
    );
    assert_same_state(&eager, &captured);
    modes
}

const TINY_LM: &str = r#"
text = load_preloaded("tiny_shakespeare_snippet")
ids = tokenize_bytes(text)
X = split(shift_pairs_x(ids, 16), 8 / 122, 0)
Y = split(shift_pairs_y(ids, 16), 8 / 122, 0)
V = 280
d = 16
model = chain(
  embed(V, d, 0),
  residual(chain(rms_norm(d), causal_attention(d, 2, 1))),
  residual(chain(layer_norm(d), linear(d, 4 * d, 2), gelu_layer(), linear(4 * d, d, 3))),
  rms_norm(d),
  linear(d, V, 4),
)
reinit(model, "all_layers", 0.02, 5)
train 12 {
  adam(cross_entropy(apply(model, X), Y), model, 0.003, 0.9, 0.999, 1e-8)
  loss_metric = cross_entropy(apply(model, X), Y)
}
[sum(last_losses), loss_metric, step]
"#;

#[test]
fn a_captured_transformer_trains_bit_for_bit_like_the_interpreter() {
    let modes = same_both_ways(TINY_LM);
    assert_eq!(modes, vec![(true, None, false)], "the loop is captured");
}

/// Windows of T = 256: T·S = 65,536 scores per head, where the attention
/// layers run the fused, tiled `attention` kernels (`FUSED_MIN_SCORES`), here
/// with grouped-query heads, rotary embeddings, sinks and a sliding window.
const LONG_ATTENTION_LM: &str = r#"
text = load_preloaded("tiny_shakespeare_snippet")
ids = tokenize_bytes(text)
X = split(shift_pairs_x(ids, 256), 2 / 15, 0)
Y = split(shift_pairs_y(ids, 256), 2 / 15, 0)
V = 280
d = 8
model = chain(
  embed(V, d, 0),
  residual(chain(rms_norm(d), causal_attention(d, 2, 1, 1, rope(4, 10000), 0, 0, 0, 1, 100))),
  residual(chain(rms_norm(d), causal_attention(d, 2, 2))),
  linear(d, V, 4),
)
reinit(model, "all_layers", 0.05, 5)
train 4 {
  adam(cross_entropy(apply(model, X), Y), model, 0.003, 0.9, 0.999, 1e-8)
}
[sum(last_losses), step]
"#;

#[test]
fn a_captured_long_sequence_model_with_fused_attention_trains_like_the_interpreter() {
    const { assert!(256 * 256 >= mlpl_lang::nn::attention::FUSED_MIN_SCORES) };
    let modes = same_both_ways(LONG_ATTENTION_LM);
    assert_eq!(modes, vec![(true, None, false)], "the loop is captured");
}

/// The captured step's arena bytes (its own buffers and the inputs it reads
/// in place) and the eager step's live peak, from the loop's statistics.
fn step_memory(src: &str) -> (mlpl_devices::capture::ArenaBytes, u64) {
    let (it, _, modes) = run(src, true);
    assert_eq!(modes, vec![(true, None, false)], "the loop is captured");
    let s = &it.loop_stats[0];
    let arena = s.arena_bytes.expect("the step was compiled to an arena");
    (arena, s.eager_live_peak.expect("the loop was recorded"))
}

/// The arena holds what the eager step holds alive at once, within 1%: the
/// eager step now frees each value after its last reader (the loss tape keeps
/// only what backward rules read), so both hold the same values at their
/// peaks, and one block can only approach the most bytes alive at once
/// (packing leaves gaps).
fn assert_within_eager_peak(arena: mlpl_devices::capture::ArenaBytes, eager: u64) {
    assert!(
        arena.total() <= eager + eager / 100,
        "arena {arena:?} ({} bytes) over the eager live peak {eager} by more than 1%",
        arena.total()
    );
}

#[test]
fn a_captured_tiny_lm_holds_no_more_than_its_eager_step() {
    let (arena, eager) = step_memory(TINY_LM);
    assert_within_eager_peak(arena, eager);
    // X and Y (7 windows of 16 each) are read in place, not copied.
    assert!(arena.aliased >= 2 * 7 * 16 * 4, "{arena:?}");
}

#[test]
fn a_captured_mlp_holds_no_more_than_its_eager_step() {
    let src = r#"
X = reshape(iota(512), [64, 8]) / 512
T = reshape(iota(256), [64, 4]) / 256
model = chain(linear(8, 128, 1), relu_layer(), linear(128, 128, 2), tanh_layer(), linear(128, 4, 3))
train 5 {
  adam(mean((apply(model, X) - T) * (apply(model, X) - T)), model, 0.01, 0.9, 0.999, 1e-8)
}
"#;
    let (arena, eager) = step_memory(src);
    assert_within_eager_peak(arena, eager);
    assert!(arena.aliased >= (512 + 256) * 4, "{arena:?}");
}

#[test]
fn other_optimizers_and_plain_parameters_are_captured_exactly() {
    let src = r#"
W = param[4, 3]
W = W + reshape(iota(12), [4, 3]) / 10
b = param[3]
x = reshape(iota(8), [2, 4]) / 7
train 6 {
  adamw(sum((matmul(x, W) + b - 1) * (matmul(x, W) + b - 1)), [W, b], 0.05, 0.9, 0.99, 1e-8, 0.1)
  momentum_sgd(mean(tanh(matmul(x, W))), W, 0.01, 0.9)
  mean(softmax(matmul(x, W) + b, 1))
}
"#;
    let modes = same_both_ways(src);
    assert_eq!(modes, vec![(true, None, false)]);
}

/// `logsumexp` in a loss is recorded, compiled into the CPU's step program and
/// replayed with the same bits as interpreting every step.
#[test]
fn a_logsumexp_loss_is_captured_exactly() {
    let src = r#"
W = param[4, 3]
W = W + reshape(iota(12), [4, 3]) / 10
x = reshape(iota(8), [2, 4]) / 7
train 6 {
  adam(mean(logsumexp(matmul(x, W), 1)) + logsumexp(W) / 10, W, 0.05, 0.9, 0.99, 1e-8)
  logsumexp(matmul(x, W))
}
"#;
    let modes = same_both_ways(src);
    assert_eq!(modes, vec![(true, None, false)]);
}

/// The primitives of issue 17 (`slice`, `permute`, `where`, `clamp`,
/// `maximum`, `minimum`, `sin`, `cos`, `erf`, `gelu_erf`) in a loss are
/// recorded, compiled into the CPU's step program and replayed with the same
/// bits as interpreting every step, through an `adamw` with a decay group.
#[test]
fn a_loss_of_the_new_primitives_is_captured_exactly() {
    let src = r#"
W = param[4, 6]
W = W + reshape(iota(24), [4, 6]) / 20 - 0.5
x = reshape(iota(12), [3, 4]) / 9
train 6 {
  h = matmul(x, W)
  a = slice(h, 1, 0, 6, 2)
  b = permute(slice(h, -1, 1, 6, 2), 1, 0)
  r = sin(a) * cos(permute(b, 1, 0)) + gelu_erf(a) - erf(a) / 3
  r = slice(concat(r, -r, 1), 1, 1, 4)
  s = where(gt(r, 0), maximum(r, 0.1), minimum(r, -0.05))
  adamw(mean(clamp(s, -0.8, 0.8) * s), W, 0.05, 0.9, 0.99, 1e-8, 0.1, "all")
  sum(s)
}
"#;
    let modes = same_both_ways(src);
    assert_eq!(modes, vec![(true, None, false)]);
}

/// Engram in both forms: `engram_embed` first in a chain, and `engram_apply`
/// inside a user function where the hidden state and the ids are both at hand.
const ENGRAM_LM: &str = r#"
ids = tokenize_bytes(load_preloaded("tiny_shakespeare_snippet"))
X = split(shift_pairs_x(ids, 8), 12 / 252, 0)
Y = split(shift_pairs_y(ids, 8), 12 / 252, 0)
lm = chain(engram_embed(256, 16, 32, 2, 0), residual(chain(rms_norm(16), causal_attention(16, 2, 1))), linear(16, 256, 2))
train 6 {
  adam(cross_entropy(apply(lm, X), Y), lm, 0.01, 0.9, 0.999, 1e-8)
  loss_metric = cross_entropy(apply(lm, X), Y)
}
fn remember(m, h : [B, T, d], x : [B, T]) -> [B, T, d] { engram_apply(m, h, x) }
emb = embed(256, 16, 3)
mem = engram(16, 32, 2, 4)
W = param[16, 256]
W = randn(6, [16, 256]) * 0.1
train 6 {
  adam(cross_entropy(matmul(remember(mem, apply(emb, X), X), W), Y), [emb, W, mem], 0.01, 0.9, 0.999, 1e-8)
  cross_entropy(matmul(remember(mem, apply(emb, X), X), W), Y)
}
[sum(last_losses), loss_metric]
"#;

#[test]
fn engram_layers_are_captured_exactly_in_a_chain_and_in_a_function() {
    let modes = same_both_ways(ENGRAM_LM);
    assert_eq!(
        modes,
        vec![(true, None, false); 2],
        "both loops are captured"
    );
}

#[test]
fn captured_engram_training_is_bit_identical_on_every_isa_and_thread_count() {
    use mlpl_devices::cpu::{force_isa, supported_isas};
    let (base, vb, _) = run(ENGRAM_LM, true);
    for isa in supported_isas() {
        for threads in [1, 2] {
            force_isa(Some(isa)).expect("a supported level");
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool");
            let (it, v, _) = pool.install(|| run(ENGRAM_LM, true));
            assert_eq!(
                vb.as_ref().map(bits),
                v.as_ref().map(bits),
                "{isa}, {threads} threads"
            );
            assert_same_state(&base, &it);
        }
    }
    force_isa(None).expect("the initial level");
}

#[test]
fn a_non_scalar_body_value_records_its_mean() {
    let src = r#"
W = param[3]
W = W + [1, 2, 3]
train 5 {
  adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)
  W * 2
}
last_losses
"#;
    let modes = same_both_ways(src);
    assert_eq!(modes, vec![(true, None, false)]);
}

#[test]
fn a_body_that_reads_step_stays_interpreted() {
    let src = r#"
W = param[2]
train 4 { adam(sum((W - step) * (W - step)), W, 0.1, 0.9, 0.999, 1e-8); sum(W) }
"#;
    let modes = same_both_ways(src);
    assert_eq!(modes.len(), 1);
    let (captured, reason, guard) = &modes[0];
    assert!(!captured && !guard);
    assert!(reason.as_deref().unwrap().contains("`step`"), "{reason:?}");
}

#[test]
fn a_host_value_that_changes_every_iteration_keeps_the_loop_interpreted() {
    // `c` counts on the host: a replay would not update it.
    let src = r#"
W = param[2]
c = 0
train 4 { c = c + 1; adam(sum(W * W) * c, W, 0.1, 0.9, 0.999, 1e-8); sum(W) }
c
"#;
    let modes = same_both_ways(src);
    let (captured, reason, guard) = &modes[0];
    assert!(!captured && *guard, "{modes:?}");
    assert!(reason.is_some());
}

#[test]
fn gradient_clipping_reads_the_norm_on_the_host_and_stays_interpreted() {
    let src = r#"
W = param[3]
W = W + [3, -4, 5]
train 5 { adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8, 1.0); sum(W) }
"#;
    let modes = same_both_ways(src);
    let (captured, reason, guard) = &modes[0];
    assert!(!captured && *guard, "{modes:?}");
    assert!(reason.as_deref().unwrap().contains("host"), "{reason:?}");
}

#[test]
fn a_dropout_loop_is_captured_and_replays_the_eager_masks() {
    // The masks change every step (their key counts the loop's `step`); the
    // captured step counts it on, so every replayed mask, loss and parameter
    // is the interpreted loop's, bit for bit. (A replay that kept the recorded
    // mask would give other losses from the third step on.)
    let src = r#"
x = reshape(iota(12), [3, 4]) / 12
m = chain(linear(4, 8, 1), dropout(0.5, 3), linear(8, 1, 2))
train 8 { adam(mean(apply(m, x) * apply(m, x)), m, 0.05, 0.9, 0.999, 1e-8); mean(apply(m, x) * apply(m, x)) }
last_losses
"#;
    let modes = same_both_ways(src);
    assert_eq!(modes, vec![(true, None, false)], "the loop is captured");
}

#[test]
fn short_and_nested_loops_are_not_captured() {
    let modes = same_both_ways(
        "W = param[2]\ntrain 2 { adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8); sum(W) }",
    );
    assert!(!modes[0].0 && modes[0].1.as_deref().unwrap().contains("fewer than 3"));
    let modes = same_both_ways(
        "W = param[2]\ntrain 3 { repeat 2 { adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8) }; sum(W) }",
    );
    assert!(!modes[0].0 && modes[0].1.as_deref().unwrap().contains("`repeat`"));
}

#[test]
fn a_loop_that_fails_later_keeps_the_values_of_the_replayed_iterations() {
    // Cancelling is the only way a replayed loop stops early on the CPU; the
    // state written back must be that of the iterations that ran.
    let src = r#"
W = param[2]
W = W + [1, 2]
train 200000 { adam(sum(W * W), W, 0.01, 0.9, 0.999, 1e-8); sum(W) }
"#;
    let parsed = parse(src);
    let mut it = Interp::new(Workspace::new());
    let cancel = it.cancel.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        cancel.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let err = it.run(&parsed.program).expect_err("the run is cancelled");
    stopper.join().unwrap();
    assert_eq!(err.code, "E0409");
    let steps = it.ws.optim.values().next().expect("adam state").steps;
    assert!(steps > 2 && steps < 200_000, "{steps} updates");
    // W after `steps` updates equals an interpreted run of exactly that many.
    let w = bits(it.ws.get("W").unwrap());
    let replay = format!(
        "W = param[2]\nW = W + [1, 2]\ntrain {steps} {{ adam(sum(W * W), W, 0.01, 0.9, 0.999, 1e-8); sum(W) }}"
    );
    let (eager, _, _) = run(&replay, false);
    assert_eq!(w, bits(eager.ws.get("W").unwrap()));
    assert_eq!(
        bits(it.ws.get("step").unwrap()),
        bits(&Value::exact((steps - 1) as f64)),
        "`step` is the last iteration that ran"
    );
}

/// Captured and interpreted training give the same bits at every
/// instruction-set level this CPU supports, with 1 and 2 threads and with
/// other GEMM blocking sizes. (The level and blocking are process-wide, so the
/// other tests of this binary may run under the ones set here; by the GEMM's
/// numeric contract their results cannot change.)
#[test]
fn captured_training_is_bit_identical_on_every_isa_thread_count_and_blocking() {
    use mlpl_devices::cpu::{force_isa, set_gemm_blocking, supported_isas, GemmBlocking};
    let (base, vb, _) = run(TINY_LM, true);
    let small = GemmBlocking { mc: 12, nc: 48 };
    for isa in supported_isas() {
        for (threads, blocking) in [(1, None), (2, Some(small))] {
            force_isa(Some(isa)).expect("a supported level");
            set_gemm_blocking(blocking);
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool");
            for capture in [true, false] {
                let (it, v, _) = pool.install(|| run(TINY_LM, capture));
                assert_eq!(
                    vb.as_ref().map(bits),
                    v.as_ref().map(bits),
                    "{isa}, {threads} threads, {blocking:?}, capture {capture}: the run's value differs"
                );
                assert_same_state(&base, &it);
            }
        }
    }
    force_isa(None).expect("the initial level");
    set_gemm_blocking(None);
}
