//! The estimates' model of a training step (docs/estimates.md): the kernel list
//! derived from a model's layers against the kernels a real step calls, hand
//! counts of its cost and memory, the calibration cache `estimate_train` reads,
//! and the loop facts (batch, metric passes, device block).

use std::collections::BTreeMap;
use std::sync::Arc;

use mlpl_devices::profile::KernelLog;
use mlpl_lang::check::query::check_with_facts;
use mlpl_lang::estimate::calibration::{
    Calibration, DeviceModel, GemmPoint, Measured, TranscendentalPoint,
};
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::step_cost::cost::estimate_step;
use mlpl_lang::step_cost::kernels::{step_kernels, totals, Transcendental};
use mlpl_lang::train_loops::loops::{train_loops, TrainLoop};

use crate::common::run_value;

fn first_loop(src: &str) -> TrainLoop {
    let (checked, facts) = check_with_facts(src);
    train_loops(&checked.program, &facts)
        .into_iter()
        .next()
        .expect("an estimable train loop")
}

fn trainable(lp: &TrainLoop) -> Vec<f64> {
    lp.model
        .param_specs()
        .iter()
        .filter(|p| !lp.frozen.contains(&p.name))
        .map(|p| p.shape.iter().map(|&d| d as f64).product())
        .collect()
}

/// Kernel names and counts of one step of `src` (a `train 1` loop) as it runs.
fn recorded_step(src: &str) -> BTreeMap<String, usize> {
    let log = Arc::new(KernelLog::new(100_000));
    let mut it = Interp::new(Workspace::new());
    it.capture_steps = false;
    it.devices.set_profile(Some(log.clone()));
    // The data is made before the loop: only the loop's kernels are counted.
    let (setup, train) = src.split_at(src.find("train 1").expect("a train 1 loop"));
    run_value(&mut it, &format!("{setup}0"));
    log.restart();
    run_value(&mut it, &format!("{train}0"));
    let mut out = BTreeMap::new();
    for e in log.events() {
        *out.entry(e.name.to_string()).or_insert(0) += 1;
    }
    out
}

fn estimated_step(src: &str) -> BTreeMap<String, usize> {
    let lp = first_loop(src);
    let mut out = BTreeMap::new();
    for k in step_kernels(&lp.model, &lp.step, &trainable(&lp)) {
        *out.entry(k.name.to_string()).or_insert(0) += 1;
    }
    out
}

const MLP: &str = "X = randn(1, [64, 32])
y = argmax(randn(2, [64, 8]), 1)
model = chain(linear(32, 128, 1), relu_layer(), linear(128, 8, 2))
train 1 {
  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)
}
";

const LM: &str = "X = argmax(randn(1, [4, 8, 64]), 2)
Y = argmax(randn(2, [4, 8, 64]), 2)
model = chain(
  embed(64, 16, 0),
  residual(chain(rms_norm(16, 1), causal_attention(16, 2, 1))),
  residual(chain(layer_norm(16), linear(16, 64, 2), gelu_layer(), linear(64, 16, 3))),
  rms_norm(16, 1),
  linear(16, 64, 4),
)
train 1 {
  adam(cross_entropy(apply(model, X), Y), model, 0.003, 0.9, 0.999, 1e-8)
}
";

/// A LoRA student of a tanh MLP (the base frozen, as `lora` leaves it).
const LORA: &str = "X = randn(1, [64, 8])
y = argmax(randn(2, [64, 4]), 1)
base = chain(linear(8, 16, 5), tanh_layer(), linear(16, 4, 6))
student = lora(base, 2, 4, 9)
train 1 {
  adam(cross_entropy(apply(student, X), y), student, 0.02, 0.9, 0.999, 1e-8)
}
";

#[test]
fn kernel_lists_match_a_recorded_step() {
    for (name, src) in [("mlp", MLP), ("lm", LM), ("lora", LORA)] {
        assert_eq!(estimated_step(src), recorded_step(src), "{name}");
    }
}

#[test]
fn a_recorded_metric_runs_the_forward_again() {
    let with_metric = LM.replace(
        "1e-8)\n}",
        "1e-8)\n  loss_metric = cross_entropy(apply(model, X), Y)\n}",
    );
    let lp = first_loop(&with_metric);
    assert_eq!(lp.step.forwards, 2.0);
    assert_eq!(first_loop(LM).step.forwards, 1.0);
    let one = totals(&step_kernels(
        &first_loop(LM).model,
        &first_loop(LM).step,
        &trainable(&lp),
    ));
    let two = totals(&step_kernels(&lp.model, &lp.step, &trainable(&lp)));
    // The metric's forward: the forward's GEMMs once more, and the loss without
    // its gradient.
    let fwd_flops: f64 = {
        let (d, r, v, ff) = (16.0, 32.0, 64.0, 64.0);
        // q, k, v, output projections; scores and mixing (4·b·h·s·s·hd); the MLP; the head.
        2.0 * r * d * d * 4.0
            + 2.0 * 4.0 * 2.0 * 8.0 * 8.0 * 8.0 * 2.0
            + 2.0 * r * d * ff * 2.0
            + 2.0 * r * d * v
    };
    assert_eq!(two.flops - one.flops, fwd_flops);
}

#[test]
fn moe_is_costed_with_the_routed_rows() {
    use mlpl_lang::step_cost::kernels::moe_layout;
    let src = |k: usize| {
        format!(
            "X = randn(1, [16, 8])\ny = argmax(randn(2, [16, 8]), 1)\nmodel = chain(moe(8, 4, {k}, 16, 1), linear(8, 8, 2))\ntrain 1 {{\n  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)\n}}\n"
        )
    };
    let cost = |k| {
        let lp = first_loop(&src(k));
        totals(&step_kernels(&lp.model, &lp.step, &trainable(&lp))).flops
    };
    // Only the routed positions reach the experts (nn/route.rs): C·E·width
    // rows, each expert's tokens padded to the busiest one's. Seven products
    // of 2·positions·d·hidden FLOPs each: the three forward, their weight
    // gradients and the down product's input gradient (the first layer's
    // input takes no gradient).
    let (r, d, hidden) = (16.0, 8.0, 16.0);
    let positions = |k| {
        let (c, w) = moe_layout(r, 4, k);
        c * 4.0 * w
    };
    let per_position = 7.0 * 2.0 * d * hidden;
    assert_eq!(
        cost(2) - cost(1),
        per_position * (positions(2) - positions(1))
    );
    // Every token choosing every expert fills each expert's rows exactly.
    assert_eq!(positions(4), 4.0 * r);
    assert_eq!(cost(4) - cost(1), per_position * (4.0 * r - positions(1)));
}

#[test]
fn moe_layout_pads_to_the_expected_busiest_expert() {
    use mlpl_lang::step_cost::kernels::moe_layout;
    // 1904 tokens in 8 blocks of up to 256; top-2 of 4 experts: a block's
    // count per expert has mean 128 and deviation 8, and the largest of 32
    // such counts is expected √(2·ln 32) = 2.63 deviations above the mean.
    assert_eq!(moe_layout(1904.0, 4, 2), (8.0, 150.0));
    // One block of 16 tokens, top-1 of 4: mean 4, deviation √3, √(2·ln 4).
    let z = (2.0f64 * 4f64.ln()).sqrt();
    assert_eq!(
        moe_layout(16.0, 4, 1),
        (1.0, (4.0 + z * 3f64.sqrt()).ceil())
    );
    // Never more rows than the block has tokens.
    assert_eq!(moe_layout(3.0, 64, 63), (1.0, 3.0));
}

/// A one-step loop of a `moe` model over `tokens` rows: with one choice per
/// token and an even split its kernel list is the recorded one.
fn moe_step(tokens: usize) -> String {
    format!(
        "X = randn(1, [{tokens}, 8])\ny = argmax(randn(2, [{tokens}, 8]), 1)\nmodel = chain(moe(8, 2, 1, 16, 1), linear(8, 8, 2))\ntrain 1 {{\n  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)\n}}\n"
    )
}

#[test]
fn moe_kernel_list_matches_a_recorded_step() {
    assert_eq!(estimated_step(&moe_step(16)), recorded_step(&moe_step(16)));
}

#[test]
fn the_loop_knows_its_device_block_and_batch() {
    let lp = first_loop(&format!("device(\"cuda\") {{\n{MLP}}}\n"));
    assert_eq!(lp.device.as_deref(), Some("cuda"));
    assert!(lp.batch.known());
    assert_eq!((lp.step.batch, lp.step.seq), (64.0, 1.0));
    let lp = first_loop(LM);
    assert_eq!(lp.device, None);
    assert_eq!((lp.step.batch, lp.step.seq), (4.0, 8.0));
}

#[test]
fn a_bpe_pipeline_over_a_constant_text_has_a_known_batch() {
    // As examples/tiny_lm.mlpl: the checker trains the tokenizer on the
    // preloaded text, so the windows, and the batch, are exact.
    let src = |corpus: &str| {
        format!(
            "{corpus}
tok = train_bpe(text, 300, 0)
ids = apply_tokenizer(tok, text)
X = shift_pairs_x(ids, 16)
Y = shift_pairs_y(ids, 16)
model = chain(embed(300, 8, 0), linear(8, 300, 1))
train 1 {{
  adam(cross_entropy(apply(model, X), Y), model, 0.001, 0.9, 0.999, 1e-8)
}}
X
"
        )
    };
    let known = src("text = load_preloaded(\"tiny_shakespeare_snippet\")");
    let lp = first_loop(&known);
    assert!(lp.batch.known(), "{:?}", lp.batch);
    // The batch is what the program computes.
    let mut it = Interp::new(Workspace::new());
    let x = run_value(&mut it, &known);
    let rows = match x {
        mlpl_lang::value::Value::Array(a) => a.shape()[0] as f64,
        _ => panic!("X is an array"),
    };
    assert_eq!((lp.step.batch, lp.step.seq), (rows, 16.0));
    // A text known only at run time keeps the batch unknown (and labelled).
    let lp = first_loop(&src("text = load(\"corpus.txt\")"));
    assert!(!lp.batch.known());
}

/// A model counted by hand: 2 µs per kernel, every GEMM at 10 GFLOP/s, 5 GB/s,
/// no spread, no step factor.
fn hand_model() -> DeviceModel {
    let mut m = DeviceModel::assumed("cpu", 10.0);
    m.dispatch_s = Measured::exact(2e-6);
    m.interp_s = Measured::exact(3e-6);
    m.cache_bandwidth_gbs = Measured::exact(5.0);
    m.bandwidth_gbs = Measured::exact(5.0);
    m.transcendental_s = Measured::exact(0.0);
    for p in &mut m.gemm {
        p.gflops = Measured::exact(10.0);
    }
    m.baseline_bytes = 2e7;
    m.arena_factor = 2.0;
    m.param_factor = 3.0;
    m
}

#[test]
fn cost_and_memory_match_hand_counts() {
    let lp = first_loop(MLP);
    let m = hand_model();
    let s = estimate_step(&lp.model, &lp.frozen, &lp.step, true, &m);
    let t = s.totals;
    // ReLU's backward (`unary_backward` from its output) and the bias sum
    // are two kernels.
    assert_eq!(t.kernels, 17.0);
    let want = 17.0 * 2e-6 + t.flops / 10e9 + t.bytes / 5e9;
    assert!(
        (s.seconds.mid - want).abs() < 1e-15,
        "{} vs {want}",
        s.seconds.mid
    );
    assert_eq!(s.seconds.lo, s.seconds.hi);
    let eager = estimate_step(&lp.model, &lp.frozen, &lp.step, false, &m);
    assert!((eager.seconds.mid - want - 17.0 * 3e-6).abs() < 1e-15);
    let p = 32.0 * 128.0 + 128.0 + 128.0 * 8.0 + 8.0;
    let mem = &s.memory;
    assert_eq!(mem.weights + mem.grads + mem.optimizer, 16.0 * p);
    // Step buffers: activation outputs × 2 and parameters × 3 (4 bytes each).
    let act = t.out_elems - 4.0 * p;
    assert_eq!(mem.arena, 4.0 * (2.0 * act + 3.0 * p));
    assert_eq!(mem.total, 16.0 * p + mem.tape + mem.arena + 2e7);
    // A learnt correction scales both.
    let mut c = m.clone();
    c.correction.add(2.0, 0.5);
    let s2 = estimate_step(&lp.model, &lp.frozen, &lp.step, true, &c);
    assert!((s2.seconds.mid / s.seconds.mid - 2.0).abs() < 1e-12);
    assert!((s2.memory.total / s.memory.total - 0.5).abs() < 1e-12);
}

#[test]
fn estimate_train_reads_the_calibration_cache() {
    let src = "m = chain(linear(32, 128, 1), relu_layer(), linear(128, 8, 2))\nestimate_train(m, 100, 64, 1)";
    // Without a cache: LANGUAGE §15.2's formulas at 50 GFLOPS.
    let mut it = Interp::new(Workspace::new());
    let plain = run_value(&mut it, src).display();
    // With one (as `mlpl run` loads it): the kernel-level model.
    let mut cal = Calibration::default();
    let e = cal.entry_mut("cpu");
    e.gflops = 10.0;
    e.model = Some(hand_model());
    let mut ws = Workspace::new();
    ws.calibration = Some(Arc::new(cal.clone()));
    let mut it = Interp::new(ws);
    let got: Vec<f64> = run_value(&mut it, src)
        .display()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let lp = first_loop(MLP);
    let s = estimate_step(&lp.model, &lp.frozen, &lp.step, true, &hand_model());
    assert_eq!(got[1] as f32, s.memory.total as f32);
    assert_eq!(got[4] as f32, (100.0 * s.seconds.mid) as f32);
    assert_ne!(plain, run_value(&mut it, src).display());
    // A throughput variable is the user's configuration: it wins (§15.1).
    let mut ws = Workspace::new();
    ws.calibration = Some(Arc::new(cal));
    let mut it = Interp::new(ws);
    run_value(&mut it, "mlpl_device_throughput_gflops = \"50\"\n0");
    assert_eq!(run_value(&mut it, src).display(), plain);
}

#[test]
fn the_cache_round_trips_and_reads_version_1() {
    let mut cal = Calibration::default();
    cal.entry_mut("cpu").model = Some(hand_model());
    cal.entry_mut("cpu").gflops = 10.0;
    let text = serde_json::to_string(&cal).unwrap();
    assert_eq!(Calibration::parse(&text).unwrap().devices, cal.devices);
    let v1 = Calibration::parse(r#"{"version":1,"devices":[{"device":"cuda:0","gflops":1234}]}"#)
        .unwrap();
    let e = v1.entry("cuda").unwrap();
    assert!(e.model.is_none());
    assert_eq!(e.device_model(), DeviceModel::assumed("cuda", 1234.0));
    assert!(Calibration::parse("not json").is_none());
    let m = Measured::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
    assert_eq!((m.lo, m.median, m.hi), (1.0, 3.0, 5.0));
}

/// A tanh MLP on 200 rows with two output classes (the shapes of the small examples).
const TANH_MLP: &str = "X = randn(1, [200, 2])
y = argmax(randn(2, [200, 2]), 1)
model = chain(linear(2, 16, 1), tanh_layer(), linear(16, 2, 2))
train 3 {
  adam(cross_entropy(apply(model, X), y), model, 0.01, 0.9, 0.999, 1e-8)
}
";

fn ks_tanh(lp: &TrainLoop) -> Vec<mlpl_lang::step_cost::kernels::Kernel> {
    step_kernels(&lp.model, &lp.step, &trainable(lp))
}

#[test]
fn transcendental_kernels_count_their_evaluations() {
    let lp = first_loop(TANH_MLP);
    let ks = step_kernels(&lp.model, &lp.step, &trainable(&lp));
    let evals = |name: &str| -> Vec<f64> {
        ks.iter()
            .filter(|k| k.name == name)
            .map(|k| k.evals)
            .collect()
    };
    // The tanh fused into the first linear's bias: one per element of [200, 16].
    assert_eq!(evals("bias_act"), vec![200.0 * 16.0]);
    // Cross-entropy: an exponential per logit and a logarithm per row.
    assert_eq!(evals("cross_entropy"), vec![200.0 * 2.0 + 200.0]);
    // The tanh backward works from the saved output; matmuls and the update none.
    assert_eq!(evals("bias_act_backward"), vec![0.0]);
    assert!(ks
        .iter()
        .filter(|k| k.name.starts_with("matmul") || k.name == "adam_update")
        .all(|k| k.evals == 0.0));
    // A relu network evaluates nothing.
    let relu = first_loop(&TANH_MLP.replace("tanh_layer", "relu_layer"));
    let ks = step_kernels(&relu.model, &relu.step, &trainable(&relu));
    assert_eq!(
        ks.iter()
            .filter(|k| k.name == "bias_act")
            .map(|k| k.evals)
            .sum::<f64>(),
        0.0
    );
    // Each is costed as its own function: the tanh as `tanh`, the
    // cross-entropy's as `exp`; a GELU's forward and backward as theirs.
    let func = |ks: &[mlpl_lang::step_cost::kernels::Kernel], name: &str| {
        ks.iter().find(|k| k.name == name).map(|k| k.func)
    };
    assert_eq!(func(&ks_tanh(&lp), "bias_act"), Some(Transcendental::Tanh));
    assert_eq!(
        func(&ks_tanh(&lp), "cross_entropy"),
        Some(Transcendental::Exp)
    );
    let gelu = first_loop(&TANH_MLP.replace("tanh_layer", "gelu_layer"));
    let ks = step_kernels(&gelu.model, &gelu.step, &trainable(&gelu));
    assert_eq!(func(&ks, "bias_act"), Some(Transcendental::Gelu));
    assert_eq!(
        func(&ks, "bias_act_backward"),
        Some(Transcendental::GeluBackward)
    );
    assert_eq!(
        ks.iter()
            .filter(|k| k.name == "bias_act_backward")
            .map(|k| k.evals)
            .collect::<Vec<_>>(),
        vec![200.0 * 16.0]
    );
    // Each evaluation costs the calibrated seconds.
    let mut m = hand_model();
    let s0 = estimate_step(&lp.model, &lp.frozen, &lp.step, true, &m);
    m.transcendental_s = Measured::exact(1e-9);
    let s1 = estimate_step(&lp.model, &lp.frozen, &lp.step, true, &m);
    let all: f64 = s1.kernels.iter().map(|k| k.evals).sum();
    assert!(all >= 3800.0);
    assert!((s1.seconds.mid - s0.seconds.mid - all * 1e-9).abs() < 1e-15);
}

#[test]
fn products_cost_whole_tiles_and_kernels_their_factors() {
    use mlpl_lang::step_cost::cost::kernel_seconds;
    use mlpl_lang::step_cost::kernels::{Kernel, Work};
    let gemm = |m: f64, k: f64, n: f64| Kernel {
        name: "matmul",
        work: Work::Gemm {
            batch: 1.0,
            m,
            k,
            n,
            layout: Default::default(),
        },
        out_elems: m * n,
        evals: 0.0,
        func: Default::default(),
        rows: 0.0,
    };
    let mut model = hand_model();
    model.tile = [12, 32];
    // Calibrated shapes of whole tiles (one tile of depth 1, and 384 = 32·12),
    // so that every product runs at 10 GFLOP/s of its padded work.
    model.gemm = [(12u64, 1u64, 32u64), (384, 384, 384)]
        .iter()
        .map(|&(m, k, n)| GemmPoint::plain(m, k, n, Measured::exact(10.0)))
        .collect();
    let pick = |x: &Measured| x.median;
    let d = 2e-6;
    // [200, 16]·[16, 2] computes [204, 16]·[16, 32].
    let t = kernel_seconds(&model, &gemm(200.0, 16.0, 2.0), pick);
    assert!(
        (t - d - 2.0 * 204.0 * 16.0 * 32.0 / 10e9).abs() < 1e-15,
        "{t}"
    );
    // Whole tiles cost what they did.
    let t = kernel_seconds(&model, &gemm(24.0, 16.0, 64.0), pick);
    assert!((t - d - 2.0 * 24.0 * 16.0 * 64.0 / 10e9).abs() < 1e-15);
    // A kernel's calibrated factor scales its work (not its dispatch); kernels
    // without one take the step factor; plain products take neither (their
    // shapes are calibrated).
    let base = kernel_seconds(&model, &gemm(24.0, 16.0, 64.0), pick) - d;
    model.kernel_factors.insert("attention".into(), 3.0);
    model.kernel_factors.insert("matmul".into(), 7.0);
    model.step_factor = 5.0;
    let mut fused = gemm(24.0, 16.0, 64.0);
    fused.name = "attention";
    let t = kernel_seconds(&model, &fused, pick);
    assert!((t - d - 3.0 * base).abs() < 1e-15);
    fused.name = "attention_backward";
    let t = kernel_seconds(&model, &fused, pick);
    assert!((t - d - 5.0 * base).abs() < 1e-15);
    for name in ["matmul", "matmul_t"] {
        let mut plain = gemm(24.0, 16.0, 64.0);
        plain.name = name;
        let t = kernel_seconds(&model, &plain, pick);
        assert!((t - d - base).abs() < 1e-15, "{name}: {t}");
    }
}

#[test]
fn calibrated_points_count_their_own_padding() {
    use mlpl_lang::step_cost::cost::kernel_work_seconds;
    use mlpl_lang::step_cost::kernels::{Kernel, Work};
    // An 8³ product measured at 2 GFLOP/s (1024 FLOPs in 0.512 µs) computes a
    // 12 × 32 tile: a product of that shape costs what the measurement took,
    // not its padded work at the measured rate (six times as much).
    let mut model = hand_model();
    model.tile = [12, 32];
    model.gemm = vec![
        GemmPoint::plain(8, 8, 8, Measured::exact(2.0)),
        GemmPoint::plain(384, 384, 384, Measured::exact(40.0)),
    ];
    let k = Kernel {
        name: "matmul",
        work: Work::Gemm {
            batch: 1.0,
            m: 8.0,
            k: 8.0,
            n: 8.0,
            layout: Default::default(),
        },
        out_elems: 64.0,
        evals: 0.0,
        func: Default::default(),
        rows: 0.0,
    };
    let t = kernel_work_seconds(&model, &k, |x| x.median);
    assert!((t - 2.0 * 512.0 / 2e9).abs() < 1e-15, "{t}");
}

#[test]
fn products_take_the_throughput_of_the_nearest_calibrated_shapes() {
    use mlpl_lang::step_cost::cost::gemm_gflops;
    use mlpl_lang::step_cost::kernels::GemmLayout::{Plain, TransposedA, TransposedB};
    // Squares, and a wide layer on 64 rows measured far slower than a square
    // product of its work.
    let mut model = hand_model();
    model.tile = [1, 1];
    model.gemm = vec![
        GemmPoint::plain(64, 64, 64, Measured::exact(100.0)),
        GemmPoint::plain(512, 512, 512, Measured::exact(200.0)),
        GemmPoint::plain(64, 2048, 2048, Measured::exact(50.0)),
    ];
    let g = |m: f64, k: f64, n: f64| gemm_gflops(&model, 1.0, m, k, n, Plain, |x| x.median);
    // A calibrated shape is taken as measured.
    assert_eq!(g(512.0, 512.0, 512.0), 200.0);
    assert_eq!(g(64.0, 2048.0, 2048.0), 50.0);
    // A wider layer on 64 rows (more work than any point) runs like the
    // 64-row point, not like the largest square.
    let wide = g(64.0, 4096.0, 4096.0);
    assert!((50.0..60.0).contains(&wide), "{wide}");
    // A square between the squares lies between them.
    let mid = g(181.0, 181.0, 181.0);
    assert!((100.0..200.0).contains(&mid), "{mid}");
    // Below the smallest point's work, throughput falls with its square root.
    assert!((g(16.0, 16.0, 16.0) - 100.0 * (1.0f64 / 64.0).sqrt()).abs() < 1e-9);
    // A batch of small products is its own dimension: far from a point with
    // one product, near a batched one.
    model.gemm.push(GemmPoint {
        batch: 64,
        ..GemmPoint::plain(32, 16, 32, Measured::exact(20.0))
    });
    let batched = gemm_gflops(&model, 64.0, 32.0, 16.0, 32.0, Plain, |x| x.median);
    assert_eq!(batched, 20.0);
    // A layer's input gradient on one row (its weight read transposed) takes
    // the transposed point near it, not the plain forward of the same shape.
    model.gemm = vec![
        GemmPoint::plain(1, 256, 256, Measured::exact(10.0)),
        GemmPoint {
            tb: true,
            ..GemmPoint::plain(1, 256, 256, Measured::exact(3.0))
        },
        GemmPoint::plain(512, 512, 512, Measured::exact(200.0)),
    ];
    let at = |layout| gemm_gflops(&model, 1.0, 1.0, 256.0, 256.0, layout, |x| x.median);
    assert_eq!(at(Plain), 10.0);
    assert_eq!(at(TransposedB), 3.0);
    // A layout with no point of its own takes the other layouts' points.
    let ta = at(TransposedA);
    assert!((3.0..=10.0).contains(&ta), "{ta}");
}

#[test]
fn a_large_memory_bound_kernel_is_bounded_by_bandwidth_not_its_factor() {
    use mlpl_lang::step_cost::cost::kernel_time;
    use mlpl_lang::step_cost::kernels::{Kernel, Work};
    let mut model = hand_model();
    model.cache_bandwidth_gbs = Measured::exact(100.0);
    model.bandwidth_gbs = Measured::exact(20.0);
    model.kernel_factors.insert("adam_update".into(), 4.0);
    let adam = |bytes: f64| Kernel {
        name: "adam_update",
        work: Work::Memory { bytes },
        out_elems: bytes / 28.0,
        evals: 0.0,
        func: Default::default(),
        rows: 0.0,
    };
    let pick = |x: &Measured| x.median;
    // In cache: the factor times the bytes at the in-cache bandwidth.
    let small = kernel_time(&model, &adam(1e6), pick);
    assert!((small - 4.0 * 1e6 / 100e9).abs() < 1e-15, "{small}");
    // From memory, the factor's compute time (4 / 100 GB/s = 25 GB/s) is
    // below the memory traffic's (20 GB/s): the traffic decides.
    let large = kernel_time(&model, &adam(470e6), pick);
    assert!((large - 470e6 / 20e9).abs() < 1e-12, "{large}");
    // A faster memory than the factor's per-element work: the work decides.
    model.bandwidth_gbs = Measured::exact(40.0);
    let large = kernel_time(&model, &adam(470e6), pick);
    assert!((large - 4.0 * 470e6 / 100e9).abs() < 1e-12, "{large}");
}

fn point(func: &str, elems: u64, secs: f64) -> TranscendentalPoint {
    TranscendentalPoint {
        func: func.into(),
        elems,
        seconds: Measured::exact(secs),
    }
}

#[test]
fn transcendental_cost_follows_its_function_and_the_array_size() {
    let mut m = hand_model();
    m.transcendental_s = Measured::exact(9e-9);
    m.transcendentals = vec![
        // Out of order on purpose: the model sorts by size.
        point("gelu", 1 << 20, 2e-9),
        point("gelu", 1 << 14, 8e-9),
        point("gelu", 1 << 15, 4e-9),
        point("exp", 1 << 14, 1e-9),
    ];
    let s = |f: &str, n: f64| m.transcendental_seconds(f, n, |x| x.median);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b;
    // At and below the smallest array: one thread's figure.
    assert!(close(s("gelu", 100.0), 8e-9));
    assert!(close(s("gelu", 16384.0), 8e-9));
    // At a point, its figure; between two, the log-log interpolation
    // (halfway in log size: the geometric mean); beyond the largest, its.
    assert!(close(s("gelu", 32768.0), 4e-9));
    let mid = (32768.0f64 * 1048576.0).sqrt();
    assert!(
        close(s("gelu", mid), (4e-9f64 * 2e-9).sqrt()),
        "{}",
        s("gelu", mid)
    );
    assert!(close(s("gelu", 1e9), 2e-9));
    // Falling with the size in between.
    assert!(s("gelu", 20000.0) < 8e-9 && s("gelu", 20000.0) > 4e-9);
    // One point: its figure at every size.
    assert!(close(s("exp", 1e7), 1e-9));
    // A function without points (a cache written before they were
    // measured): the pooled figure.
    assert!(close(s("tanh", 1e6), 9e-9));
    m.transcendentals.clear();
    assert!(close(
        m.transcendental_seconds("gelu", 1e6, |x| x.median),
        9e-9
    ));
}

#[test]
fn a_kernel_factor_does_not_scale_calibrated_transcendentals() {
    use mlpl_lang::step_cost::cost::{kernel_time, kernel_work_parts};
    use mlpl_lang::step_cost::kernels::{Kernel, Work};
    let mut m = hand_model();
    m.cache_bandwidth_gbs = Measured::exact(100.0);
    m.bandwidth_gbs = Measured::exact(100.0);
    m.transcendental_s = Measured::exact(5e-9);
    m.kernel_factors.insert("bias_act".into(), 3.0);
    let n = 500_000.0;
    let k = Kernel {
        name: "bias_act",
        work: Work::Memory { bytes: 8.0 * n },
        out_elems: n,
        evals: n,
        func: Transcendental::Gelu,
        rows: 0.0,
    };
    let pick = |x: &Measured| x.median;
    let bytes = 8.0 * n / 100e9;
    // A cache without per-function figures: the factor scales the pooled
    // evaluations too, as it was fitted.
    let (scaled, evals) = kernel_work_parts(&m, &k, pick);
    assert!((scaled - (bytes + n * 5e-9)).abs() < 1e-15 && evals == 0.0);
    let t = kernel_time(&m, &k, pick);
    assert!((t - 3.0 * (bytes + n * 5e-9)).abs() < 1e-12, "{t}");
    // With the GELU's own figures: the factor scales the bytes only, the
    // evaluations cost their calibrated seconds at this size.
    m.transcendentals = vec![point("gelu", 1 << 14, 8e-9), point("gelu", 1 << 20, 2e-9)];
    let per = m.transcendental_seconds("gelu", n, pick);
    assert!(per > 2e-9 && per < 8e-9);
    let (scaled, evals) = kernel_work_parts(&m, &k, pick);
    assert!((scaled - bytes).abs() < 1e-15);
    assert!((evals - n * per).abs() < 1e-15);
    let t = kernel_time(&m, &k, pick);
    assert!((t - (3.0 * bytes + n * per)).abs() < 1e-12, "{t}");
    // The same kernel on a small array pays one thread's cost per element.
    let small = Kernel {
        work: Work::Memory {
            bytes: 8.0 * 4096.0,
        },
        out_elems: 4096.0,
        evals: 4096.0,
        ..k
    };
    let (_, evals) = kernel_work_parts(&m, &small, pick);
    assert!((evals - 4096.0 * 8e-9).abs() < 1e-18);
}

#[test]
fn a_kernel_factor_is_fitted_to_the_time_its_evaluations_leave() {
    use mlpl_lang::train_loops::measure::KernelWork;
    // 10 µs measured, 4 of them the calibrated evaluations, 2 modelled for
    // the rest: the factor is 3.
    let w = KernelWork {
        measured: 10e-6,
        scaled: 2e-6,
        evals: 4e-6,
    };
    assert!((w.ratio() - 3.0).abs() < 1e-12);
    // Evaluations that take more than was measured (noise) leave a tenth.
    let w = KernelWork { evals: 12e-6, ..w };
    assert!((w.ratio() - 0.5).abs() < 1e-12);
}

#[test]
fn dispatch_is_what_a_step_takes_beyond_its_modelled_work() {
    use mlpl_lang::train_loops::measure::dispatch_per_kernel;
    // Steps of 10 and 12 µs, 4 µs of them modelled work, 4 kernels: 1.5 and
    // 2 µs a kernel (dividing the whole step would say 2.5 and 3).
    let d = dispatch_per_kernel(&[10e-6, 12e-6], 4e-6, 4.0);
    assert!(
        (d[0] - 1.5e-6).abs() < 1e-15 && (d[1] - 2e-6).abs() < 1e-15,
        "{d:?}"
    );
    // A model rating the work above the step leaves a quarter of it.
    let d = dispatch_per_kernel(&[10e-6], 20e-6, 4.0);
    assert!((d[0] - 0.625e-6).abs() < 1e-15, "{d:?}");
}

#[test]
fn a_cache_without_per_function_figures_still_loads() {
    // A version 2 model as the previous release wrote it: no
    // `transcendentals`.
    let old = DeviceModel::assumed("cpu", 20.0);
    let mut v = serde_json::to_value(&old).unwrap();
    assert!(v.get("transcendentals").is_none());
    v.as_object_mut().unwrap().remove("transcendentals");
    let text = format!(r#"{{"version":2,"devices":[{{"device":"cpu","gflops":20,"model":{v}}}]}}"#);
    let cal = Calibration::parse(&text).expect("an older cache parses");
    let m = cal.entry("cpu").unwrap().device_model();
    assert!(m.transcendentals.is_empty());
    assert_eq!(m, old);
    // Nor the fused attention's points or the per-row cost.
    let mut v = serde_json::to_value(&old).unwrap();
    assert!(v.get("attention").is_none());
    v.as_object_mut().unwrap().remove("row_s");
    let m: DeviceModel = serde_json::from_value(v).expect("a cache without row_s parses");
    assert!(m.attention.is_empty());
    assert_eq!(m.row_s, Measured::default());
    // With them, they survive a round trip, a function name this release
    // does not know (a later release's) included.
    let mut new = old.clone();
    new.transcendentals = vec![
        point("gelu", 1 << 14, 8e-9),
        point("erf_backward", 64, 1e-9),
    ];
    let back: DeviceModel = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
    assert_eq!(back, new);
}

#[test]
fn a_step_of_changing_shapes_holds_the_buffer_pool() {
    use mlpl_lang::step_cost::cost::POOL_SWEEP_BYTES;
    // A small mixture of experts: its live buffers are far below what the
    // pool keeps before releasing, which is what its run holds.
    let lp = first_loop(&moe_step(16));
    let m = hand_model();
    let s = estimate_step(&lp.model, &lp.frozen, &lp.step, false, &m);
    assert_eq!(s.memory.tape + s.memory.arena, POOL_SWEEP_BYTES);
    // The same model without the experts keeps its own buffers.
    let dense = first_loop(MLP);
    let d = estimate_step(&dense.model, &dense.frozen, &dense.step, true, &m);
    assert!(d.memory.tape + d.memory.arena < 1e7);
}

#[test]
fn kernel_times_read_a_timeline() {
    use mlpl_lang::train_loops::measure::kernel_times;
    // Six steps of two kernels each: `matmul` twice per step (3 + 1 µs, the
    // last step 40 µs), `binary` once (2 µs); the first three steps are skipped.
    let mut events = Vec::new();
    for s in 0..6 {
        let t0 = 1000.0 * s as f64;
        events.push(format!(
            r#"{{"cat":"train_step","ph":"X","name":"step","ts":{t0},"dur":900}}"#
        ));
        let mm = if s == 5 { 39.0 } else { 3.0 };
        for (i, (name, dur)) in [("matmul", mm), ("matmul", 1.0), ("binary", 2.0)]
            .iter()
            .enumerate()
        {
            events.push(format!(
                r#"{{"cat":"kernel","ph":"X","name":"{name}","ts":{},"dur":{dur},"args":{{"replayed":true}}}}"#,
                t0 + 10.0 + 100.0 * i as f64
            ));
        }
        // An interpreted kernel outside the replay is not counted.
        events.push(format!(
            r#"{{"cat":"kernel","ph":"X","name":"binary","ts":{},"dur":50,"args":{{"replayed":false}}}}"#,
            t0 + 500.0
        ));
    }
    let trace = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
    let got = kernel_times(&trace).unwrap();
    // Steps 3, 4, 5: matmul 4, 4, 40 µs (median 4), binary 2 µs.
    let k = &got.kernels;
    assert_eq!(k.len(), 2);
    assert!((k["matmul"].0 - 4e-6).abs() < 1e-12 && k["matmul"].1 == 2.0);
    assert!((k["binary"].0 - 2e-6).abs() < 1e-12 && k["binary"].1 == 1.0);
    // Every step lasts 900 µs: 150 times the kernels' 6 µs of medians.
    assert!((got.step - 900e-6).abs() < 1e-12);
    assert!((got.skew() - 150.0).abs() < 1e-9);
    assert!(kernel_times(r#"{"traceEvents":[]}"#).is_err());
    assert!(kernel_times("not json").is_err());
}

#[test]
fn the_loop_knows_whether_it_will_be_captured() {
    assert!(first_loop(MLP).captured());
    // adamw with a max_grad_norm: the clipping scale is made on the host each step.
    let clipped = "X = randn(1, [8, 4])\ny = argmax(randn(2, [8, 2]), 1)\nm = linear(4, 2, 0)\ntrain 5 {\n  adamw(cross_entropy(apply(m, X), y), m, 0.01, 0.9, 0.95, 1e-8, 0.1, 1.0)\n}\n";
    let lp = first_loop(clipped);
    assert!(!lp.captured());
    assert!(lp.not_captured.unwrap().contains("clipping"));
    // No clipping (absent, or 0): captured.
    assert!(first_loop(&clipped.replace(", 0.1, 1.0)", ", 0.1)")).captured());
    assert!(first_loop(&clipped.replace(", 0.1, 1.0)", ", 0.1, 0)")).captured());
    // A mixture of experts routes on the host.
    let moe = "X = randn(1, [8, 16])\ny = argmax(randn(2, [8, 16]), 1)\nm = chain(moe(16, 4, 2, 32, 1))\ntrain 5 {\n  adam(cross_entropy(apply(m, X), y), m, 0.01, 0.9, 0.999, 1e-8)\n}\n";
    let lp = first_loop(moe);
    assert!(lp.not_captured.unwrap().contains("mixture of experts"));
    // The interpreted estimate is the one to show: it costs more per kernel.
    let m = hand_model();
    let a = estimate_step(&lp.model, &lp.frozen, &lp.step, true, &m);
    let b = estimate_step(&lp.model, &lp.frozen, &lp.step, lp.captured(), &m);
    assert!(b.seconds.mid > a.seconds.mid);
}

/// A one-block LM on 256 positions: its attention runs the fused kernel.
fn fused_lm(heads: usize) -> String {
    format!(
        "X = argmax(randn(1, [2, 256, 32]), 2)
Y = argmax(randn(2, [2, 256, 32]), 2)
model = chain(embed(32, 64, 0), residual(causal_attention(64, {heads}, 1)), linear(64, 32, 4))
train 1 {{
  adam(cross_entropy(apply(model, X), Y), model, 0.001, 0.9, 0.999, 1e-8)
}}
"
    )
}

#[test]
fn attention_work_counts_whole_key_tiles_and_the_causal_half() {
    use mlpl_lang::step_cost::kernels::{
        attention_backward_one_pass, attention_fmas, ATTENTION_KEY_TILE,
    };
    assert_eq!(ATTENTION_KEY_TILE, 64);
    // Causal over 256 positions: row r sees keys 0..=r, in r / 64 + 1 tiles
    // (64 rows each of 1, 2, 3, 4 tiles), 256·257/2 pairs.
    let (tiles, pairs) = (64.0 * 10.0, 256.0 * 257.0 / 2.0);
    let fwd = attention_fmas(256, 256, 64, true, None, None);
    assert_eq!(fwd, (64.0 * tiles + pairs) * 64.0);
    // The backward pass: two score rows per tile and three weighted sums in
    // one pass; the score rows twice in two passes.
    let bwd = attention_fmas(256, 256, 64, true, None, Some(true));
    assert_eq!(bwd, (2.0 * 64.0 * tiles + 3.0 * pairs) * 64.0);
    let two = attention_fmas(256, 256, 64, true, None, Some(false));
    assert_eq!(two, (4.0 * 64.0 * tiles + 3.0 * pairs) * 64.0);
    // Without the mask: every row sees all four tiles.
    let full = attention_fmas(256, 256, 64, false, None, None);
    assert_eq!(full, (64.0 * 1024.0 + 65536.0) * 64.0);
    // The causal half costs a little over half (the diagonal tiles are whole).
    assert!(fwd > 0.5 * full && fwd < 0.7 * full, "{fwd} {full}");
    // A window of 64 keys: one tile for the first 64 rows and for the rows
    // whose window is one whole tile (127, 191, 255), two for the others.
    let w = attention_fmas(256, 256, 64, true, Some(64), None);
    let (wt, wp) = (64.0 + 3.0 + 189.0 * 2.0, 64.0 * 65.0 / 2.0 + 192.0 * 64.0);
    assert_eq!(w, (64.0 * wt + wp) * 64.0);
    // The step's fused kernels carry that work, per head and batch row.
    let lp = first_loop(&fused_lm(2));
    let ks = step_kernels(&lp.model, &lp.step, &trainable(&lp));
    let f = ks
        .iter()
        .find(|k| k.name == "attention")
        .expect("the fused kernel");
    assert_eq!(
        f.flops(),
        2.0 * 2.0 * 2.0 * attention_fmas(256, 256, 32, true, None, None)
    );
    assert_eq!(f.evals, 2.0 * 2.0 * pairs);
    let b = ks.iter().find(|k| k.name == "attention_backward").unwrap();
    assert_eq!(
        b.flops(),
        2.0 * 2.0
            * 2.0
            * attention_fmas(
                256,
                256,
                32,
                true,
                None,
                Some(attention_backward_one_pass(2, 2, 2, 256, 32))
            )
    );
}

#[test]
fn fused_attention_costs_its_calibrated_rate() {
    use mlpl_lang::estimate::calibration::AttentionPoint;
    use mlpl_lang::step_cost::cost::kernel_seconds;
    let lp = first_loop(&fused_lm(2));
    let ks = step_kernels(&lp.model, &lp.step, &trainable(&lp));
    let fwd = *ks.iter().find(|k| k.name == "attention").unwrap();
    let bwd = *ks.iter().find(|k| k.name == "attention_backward").unwrap();
    let pick = |x: &Measured| x.median;
    let mut m = hand_model();
    m.transcendental_s = Measured::exact(1e-9);
    // Without calibrated points: per-head products at the GEMM points, scaled
    // by the kernel's factor, plus the exponentials.
    let old = kernel_seconds(&m, &fwd, pick);
    assert!(old.is_finite() && old > 2e-6 + fwd.evals * 1e-9);
    m.kernel_factors.insert("attention".into(), 5.0);
    assert!(kernel_seconds(&m, &fwd, pick) > 4.0 * (old - 2e-6 - fwd.evals * 1e-9));
    // With them: the counted work at the kernel's own rate for its head
    // width (here 32, interpolated in log width between 16 and 64), no factor
    // and no separate price for the exponentials.
    let point = |backward: bool, d: u64, g: f64| AttentionPoint {
        backward,
        heads: 16,
        t: 256,
        d,
        causal: true,
        gflops: Measured::exact(g),
    };
    m.attention = vec![
        point(false, 16, 10.0),
        point(false, 64, 40.0),
        point(true, 64, 30.0),
    ];
    let g = m.attention_gflops(false, 32.0, pick).unwrap();
    assert!((g - 20.0).abs() < 1e-9, "{g}");
    let t = kernel_seconds(&m, &fwd, pick);
    assert!((t - 2e-6 - fwd.flops() / 20e9).abs() < 1e-15, "{t}");
    // Beyond the points: the nearest one's rate.
    let t = kernel_seconds(&m, &bwd, pick);
    assert!((t - 2e-6 - bwd.flops() / 30e9).abs() < 1e-15, "{t}");
    // A backward pass does not take the forward's points.
    m.attention.pop();
    assert!(m.attention_gflops(true, 32.0, pick).is_none());
}

#[test]
fn row_wise_kernels_pay_a_setup_per_row() {
    use mlpl_lang::step_cost::cost::{kernel_time, row_seconds};
    // 200 rows of 2 classes (the LoRA example's loss).
    let src = "X = randn(1, [200, 8])
y = argmax(randn(2, [200, 2]), 1)
model = chain(linear(8, 16, 1), relu_layer(), linear(16, 2, 2))
train 1 {
  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)
}
";
    let lp = first_loop(src);
    let ks = step_kernels(&lp.model, &lp.step, &trainable(&lp));
    let ce = *ks.iter().find(|k| k.name == "cross_entropy").unwrap();
    assert_eq!(ce.rows, 200.0);
    // Element-wise and product kernels have no rows.
    assert!(ks
        .iter()
        .filter(|k| k.name != "cross_entropy")
        .all(|k| k.rows == 0.0));
    let pick = |x: &Measured| x.median;
    let mut m = hand_model();
    let before = kernel_time(&m, &ce, pick);
    m.row_s = Measured::exact(80e-9);
    assert!((row_seconds(&m, &ce, pick) - 200.0 * 80e-9).abs() < 1e-18);
    let after = kernel_time(&m, &ce, pick);
    assert!(
        (after - before - 200.0 * 80e-9).abs() < 1e-15,
        "{before} {after}"
    );
    // No kernel factor scales it.
    m.kernel_factors.insert("cross_entropy".into(), 3.0);
    let scaled = kernel_time(&m, &ce, pick);
    assert!((scaled - 3.0 * before - 200.0 * 80e-9).abs() < 1e-15);
    // The norms and the attention's softmax are row-wise too.
    let lp = first_loop(LM);
    let ks = step_kernels(&lp.model, &lp.step, &trainable(&lp));
    for name in [
        "rms_norm",
        "rms_norm_backward",
        "layer_norm",
        "layer_norm_backward",
        "masked_softmax",
        "masked_softmax_backward",
    ] {
        let k = ks.iter().find(|k| k.name == name).expect(name);
        let rows = if name.contains("softmax") {
            4.0 * 2.0 * 8.0
        } else {
            32.0
        };
        assert_eq!(k.rows, rows, "{name}");
    }
}
