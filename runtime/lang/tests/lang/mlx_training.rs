//! Training on MLX matches the CPU: the loss curves (`last_losses`) of the
//! training examples agree within float32 tolerance, parameters and optimizer
//! state stay MLX arrays across steps (no upload per step after warm-up, about
//! one download per step, the loss) and nothing falls back to the CPU. (Out
//! of MLX memory is tested in `devices/tests/devices/mlx_parity.rs`: here the
//! interpreter's host-memory check, E0410, comes first.) Needs a build
//! with `--features mlpl-devices/mlx`: elsewhere each test says why it skips,
//! unless `MLPL_REQUIRE_MLX=1` (set by `scripts/test-all.sh` when it builds MLX).

use mlpl_lang::eval::DeviceContext;
use mlpl_lang::value::DeviceTarget;

use crate::common::{warning_codes, Session};
use crate::device_training::{assert_curves_match, example, run_on};

fn mlx() -> DeviceTarget {
    DeviceTarget::parse("mlx").unwrap()
}

/// `examples/tiny_lm.mlpl` (BPE tokens, 2-head causal attention, MLP, Adam)
/// trained for `steps` steps instead of 200, ending with its loss curve.
fn tiny_lm(steps: usize) -> String {
    example("tiny_lm.mlpl")
        .replace("train 200", &format!("train {steps}"))
        .replace("zeros([200])", &format!("zeros([{steps}])"))
        + "\nlast_losses\n"
}

/// Whether MLX can run here; says why not otherwise.
fn have_mlx(test: &str) -> bool {
    match DeviceContext::new().availability(mlx()) {
        Ok(()) => true,
        Err(why) => {
            let required = std::env::var("MLPL_REQUIRE_MLX").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "MLPL_REQUIRE_MLX=1 but MLX is unavailable: {}",
                why.reason()
            );
            eprintln!("SKIPPED {test}: {}", why.reason());
            false
        }
    }
}

#[test]
fn mlx_blocks_and_placements_run_there_without_warnings() {
    if !have_mlx("mlx_blocks_and_placements_run_there_without_warnings") {
        return;
    }
    assert!(warning_codes("device(\"mlx\") { matmul(ones([4, 3]), ones([3, 2])) }").is_empty());
    assert!(warning_codes("to_device([1, 2], \"mlx\")").is_empty());
    let mut s = Session::new(None, None);
    assert_eq!(
        s.eval("x = to_device([1, 2, 3], \"mlx\")\ndevice(\"mlx\") { x * 2 + 1 }"),
        "3 5 7"
    );
}

#[test]
fn tiny_mlp_loss_curve_matches_the_cpu() {
    if !have_mlx("tiny_mlp_loss_curve_matches_the_cpu") {
        return;
    }
    let src = example("tiny_mlp.mlpl") + "\nlast_losses\n";
    let (g, c) = (run_on(&src, mlx()), run_on(&src, DeviceTarget::CPU));
    assert_curves_match("tiny_mlp on mlx", &g, &c);
}

#[test]
fn tiny_lm_loss_curve_matches_the_cpu() {
    if !have_mlx("tiny_lm_loss_curve_matches_the_cpu") {
        return;
    }
    let src = tiny_lm(30);
    let (g, c) = (run_on(&src, mlx()), run_on(&src, DeviceTarget::CPU));
    assert_curves_match("tiny_lm on mlx", &g, &c);
}

#[test]
fn training_keeps_parameters_in_mlx_arrays() {
    if !have_mlx("training_keeps_parameters_in_mlx_arrays") {
        return;
    }
    let scope = mlpl_devices::CounterScope::enter();
    let counts = scope.counts();
    let now = || counts.snapshot(mlpl_devices::DeviceKind::Mlx);
    let steps = 10;
    let short = tiny_lm(3);
    let long = tiny_lm(3 + steps);
    // Per-step transfers: the difference between a long and a short run.
    let c0 = now();
    run_on(&short, mlx());
    let c1 = now();
    run_on(&long, mlx());
    let c2 = now();
    let per_step = |a: u64, b: u64, c: u64| ((c - b) as f64 - (b - a) as f64) / steps as f64;
    let downloads = per_step(c0.downloads, c1.downloads, c2.downloads);
    let bytes_up = per_step(c0.bytes_up, c1.bytes_up, c2.bytes_up);
    let evaluations = per_step(c0.evaluations, c1.evaluations, c2.evaluations);
    let launches = per_step(c0.kernel_launches, c1.kernel_launches, c2.kernel_launches);
    eprintln!(
        "tiny_lm on mlx per step: {downloads:.1} downloads, {bytes_up:.0} bytes up, {evaluations:.1} evaluations, {launches:.0} kernel calls, {} CPU fallbacks in all",
        c2.cpu_fallbacks - c0.cpu_fallbacks
    );
    assert!(
        downloads <= 2.0,
        "{downloads} downloads per step: something reads MLX data on the host"
    );
    // The parameters (about 32k floats) are not uploaded each step.
    assert!(bytes_up < 20_000.0, "{bytes_up} bytes uploaded per step");
    assert!(
        evaluations >= 1.0,
        "{evaluations} evaluations per step: the step's state is never settled"
    );
    assert_eq!(
        c2.cpu_fallbacks - c0.cpu_fallbacks,
        0,
        "CPU fallbacks while training"
    );
}

/// `src` run on MLX with step capture on or off: its last value, the
/// replayed iterations' program kind and how many iterations were replayed.
fn run_mlx_capture(src: &str, capture: bool) -> (Vec<f32>, Option<&'static str>, u64) {
    let (out, kind, replayed, _) = run_captured_on(src, mlx(), capture);
    (out, kind, replayed)
}

/// `src` run on `device` with step capture on or off: its last value, the
/// replayed iterations' program kind, how many were replayed, and why the
/// loop stayed eager.
fn run_captured_on(
    src: &str,
    device: DeviceTarget,
    capture: bool,
) -> (Vec<f32>, Option<&'static str>, u64, Option<String>) {
    use mlpl_lang::eval::{Interp, Workspace};
    use mlpl_lang::value::Value;
    let parsed = mlpl_syntax::parse(src);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    let mut ws = Workspace::new();
    ws.default_device = Some(device);
    let mut it = Interp::new(ws);
    it.capture_steps = capture;
    let out = match it.run(&parsed.program) {
        Ok(Some(Value::Array(a))) => a.tensor().to_vec(),
        other => panic!("expected an array, got {other:?}"),
    };
    let stats = it.loop_stats.first().expect("one train loop");
    (
        out,
        stats.replay_kind,
        stats.replayed,
        stats.eager_reason.clone(),
    )
}

/// The values of `a` (compiled graph) and `b` (call by call) agree within
/// float32 tolerance, element by element.
#[track_caller]
fn assert_close(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-4 + 1e-3 * y.abs(),
            "{what}: element {i}: compiled {x} vs call by call {y}"
        );
    }
}

/// A captured step on MLX is one compiled graph: traced once, one evaluation
/// per replayed step, and the same losses and parameters as the same
/// kernels run call by call (capture off).
fn compiled_equals_call_by_call(what: &str, src: &str, steps: u64) {
    let before = mlpl_devices::mlx::graphs_traced();
    let scope = mlpl_devices::CounterScope::enter();
    let counts = scope.counts();
    let c0 = counts.snapshot(mlpl_devices::DeviceKind::Mlx);
    let (compiled, kind, replayed) = run_mlx_capture(src, true);
    let c1 = counts.snapshot(mlpl_devices::DeviceKind::Mlx);
    let traced = mlpl_devices::mlx::graphs_traced() - before;
    let (eager, eager_kind, _) = run_mlx_capture(src, false);
    assert_eq!(
        kind,
        Some("graph"),
        "{what}: the step is not a compiled MLX graph"
    );
    assert_eq!(eager_kind, None);
    assert_eq!(replayed, steps - 2, "{what}: iterations replayed");
    assert_eq!(
        traced, 1,
        "{what}: the step's graph was traced {traced} times"
    );
    assert_close(what, &compiled, &eager);
    // The two recorded iterations run eagerly; each replayed step is one
    // evaluation (the loss is read from the evaluated graph outputs).
    let evaluations = c1.evaluations - c0.evaluations;
    eprintln!(
        "{what} on mlx: {evaluations} evaluations in {steps} steps ({replayed} replayed), graph traced {traced} time(s)"
    );
    let eager_part = evaluations.saturating_sub(replayed);
    assert!(
        evaluations >= replayed && eager_part <= 40,
        "{what}: {evaluations} evaluations for {replayed} replayed steps"
    );
}

#[test]
fn compiled_mlp_step_equals_call_by_call() {
    if !have_mlx("compiled_mlp_step_equals_call_by_call") {
        return;
    }
    let src = r#"
X = reshape(iota(24), [6, 4]) / 24
y = [0, 1, 1, 0, 1, 0]
m = chain(linear(4, 8, 1), relu_layer(), linear(8, 2, 2))
train 8 { adam(cross_entropy(apply(m, X), y), m, 0.01, 0.9, 0.999, 1e-8) }
concat(last_losses, reshape(apply(m, X), [12]), 0)
"#;
    compiled_equals_call_by_call("mlp", src, 8);
}

#[test]
fn compiled_tiny_lm_step_equals_call_by_call() {
    if !have_mlx("compiled_tiny_lm_step_equals_call_by_call") {
        return;
    }
    compiled_equals_call_by_call("tiny_lm", &tiny_lm(6), 6);
}

#[test]
fn compiled_step_evaluates_once_per_step() {
    if !have_mlx("compiled_step_evaluates_once_per_step") {
        return;
    }
    // The difference between a long and a short captured run: per replayed step.
    let scope = mlpl_devices::CounterScope::enter();
    let counts = scope.counts();
    let now = || counts.snapshot(mlpl_devices::DeviceKind::Mlx);
    let extra = 10;
    // A first run uploads what lives across runs (the corpus) once: the two
    // measured runs then differ only by their steps.
    run_mlx_capture(&tiny_lm(4), true);
    let c0 = now();
    run_mlx_capture(&tiny_lm(4), true);
    let c1 = now();
    run_mlx_capture(&tiny_lm(4 + extra), true);
    let c2 = now();
    let per_step = |a: u64, b: u64, c: u64| ((c - b) as f64 - (b - a) as f64) / extra as f64;
    let evaluations = per_step(c0.evaluations, c1.evaluations, c2.evaluations);
    let downloads = per_step(c0.downloads, c1.downloads, c2.downloads);
    let uploads = per_step(c0.uploads, c1.uploads, c2.uploads);
    eprintln!(
        "tiny_lm compiled on mlx per step: {evaluations} evaluations, {downloads} downloads, {uploads} uploads"
    );
    assert_eq!(evaluations, 1.0, "evaluations per compiled step");
    assert_eq!(downloads, 1.0, "downloads per compiled step (the loss)");
    assert_eq!(uploads, 0.0, "uploads per compiled step");
}

#[test]
fn dropout_training_on_mlx_uses_the_cpus_masks() {
    if !have_mlx("dropout_training_on_mlx_uses_the_cpus_masks") {
        return;
    }
    // The masks change every step: their key counts the loop's `step`. The
    // captured step takes each mask's key as an input of the compiled graph,
    // so the replayed steps make the eager steps' masks, which are the CPU's.
    let src = r#"
x = reshape(iota(24), [6, 4]) / 24
m = chain(linear(4, 16, 1), dropout(0.5, 3), linear(16, 1, 2))
train 30 {
  adam(mean(apply(m, x) * apply(m, x)), m, 0.05, 0.9, 0.999, 1e-8)
  loss = mean(apply(m, x) * apply(m, x))
}
last_losses
"#;
    let before = mlpl_devices::mlx::graphs_traced();
    let scope = mlpl_devices::CounterScope::enter();
    let counts = scope.counts();
    let (g, kind, replayed, why) = run_captured_on(src, mlx(), true);
    let on_mlx = counts.snapshot(mlpl_devices::DeviceKind::Mlx);
    let traced = mlpl_devices::mlx::graphs_traced() - before;
    let (eager, eager_kind, _, _) = run_captured_on(src, mlx(), false);
    let (c, cpu_kind, cpu_replayed, cpu_why) = run_captured_on(src, DeviceTarget::CPU, true);
    let (c_eager, ..) = run_captured_on(src, DeviceTarget::CPU, false);
    // Both loops are captured: MLX's as one compiled graph, the CPU's as its
    // arena program, each replaying 28 of the 30 steps.
    assert_eq!(
        (kind, cpu_kind),
        (Some("graph"), Some("arena")),
        "{why:?} {cpu_why:?}"
    );
    assert_eq!((replayed, cpu_replayed, eager_kind), (28, 28, None));
    assert_eq!(traced, 1, "the step's graph was traced {traced} times");
    // Replayed = eager: bit for bit on the CPU, within tolerance on MLX.
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&c),
        bits(&c_eager),
        "captured vs eager losses on the CPU"
    );
    assert_close("dropout on mlx, compiled vs eager", &g, &eager);
    assert_curves_match("dropout on mlx", &g, &c);
    assert_eq!(
        on_mlx.cpu_fallbacks, 0,
        "dropout masks fell back to the CPU"
    );
    // Parameters, optimizer state, data and scalars, but no mask: two masks
    // of 6·16 floats a step would be 23 040 bytes in 30 steps.
    assert!(
        on_mlx.bytes_up < 6_000,
        "{} bytes uploaded: dropout masks were made on the host",
        on_mlx.bytes_up
    );
}
