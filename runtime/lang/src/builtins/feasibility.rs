//! Feasibility builtins that need no model (LANGUAGE §10.17, §15).

use mlpl_devices::clock::Instant;

use super::site::CallSite;
use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::data::files;
use crate::estimate;
use crate::estimate::calibration::DeviceModel;
use crate::estimate::hypothetical::{self, Architecture};
use crate::estimate::spec::{self, Spec};
use crate::eval::{Call, Interp};
use crate::nn::hf::config::{Config, Family};
use crate::step_cost::cost::estimate_step;
use crate::step_cost::kernels::{LossKind, StepShape};
use crate::value::{named_shape, Array, Value};
use mlpl_diag::{code, Diagnostic};

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "estimate_train",
        params: &[req("model", Model), req("steps", Scalar), req("batch_size", Scalar), req("seq_len", Scalar), opt("dtype_bytes", Scalar)],
        summary: "feasibility of training a model",
        doc: "`estimate_train(model, steps, batch, seq [, dtype_bytes = 4])` returns `[params, vram_bytes, disk_bytes, flops, wall_seconds]` (LANGUAGE §15.2): parameters counted once each, memory for weights, gradients, two Adam moments of the unfrozen parameters and the activations of a `[batch, seq]` batch, FLOPs as three forward passes per step counted per layer from the rows that enter it, and the time at the configured throughput. When the runner loaded a calibration cache with a model of the active device (`mlpl calibrate`) and no throughput variable is set, memory and time are that model's: peak memory, and steps × the time of the step's kernels (docs/estimates.md). E0309 for a model without parameters; E0401 for arguments that are not finite and positive.",
        example: "estimate_train(chain(embed(32, 8, 0), causal_attention(8, 2, 1), linear(8, 32, 2)), 100, 4, 8)",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.17",
        run: estimate_train,
        shape: Some(super::feasibility_shapes::estimate_train),
    },
    Builtin {
        name: "estimate_hypothetical",
        params: &[req("name", Str), req("steps", Scalar), req("batch_size", Scalar), req("seq_len", Scalar), opt("dtype_bytes", Scalar), opt("lora_rank", Scalar)],
        summary: "feasibility of training a transformer architecture",
        doc: "`estimate_hypothetical(name, steps, batch, seq [, dtype_bytes [, lora_rank]])` returns `[params, vram_bytes, disk_bytes, flops, wall_seconds]` for a decoder-only transformer (LANGUAGE §15.3, docs/estimates.md). name is one of the table's architectures (smollm-135m, smollm-360m, smollm-1.7b, llama-3.2-1b, qwen-2.5-0.5b, llama-3-8b, qwen3-0.6b, qwen3-8b, gpt-oss-20b, gpt-oss-120b); a description that starts from a family (llama, qwen3, gpt_oss) or a table name and sets fields, `\"llama(vocab = 32000, d = 2048, layers = 16, ff = 5632, heads = 32, kv_heads = 4)\"` or `\"qwen3-8b(layers = 12)\"` (fields vocab, d, layers, ff, heads, kv_heads, head_dim, tied, qk_norm, qkv_bias, attention_bias, sinks, experts, top_k, window, sliding_layers); or the path of a Hugging Face `config.json` (or of its folder) in the data directory, of a Llama, Qwen 3 or GPT-OSS checkpoint. Parameters count every expert; FLOPs count the k experts a token is routed to and, on sliding layers, the window's keys. Throughput comes from `mlpl_device_throughput_gflops_DEV`, then `mlpl_device_throughput_gflops`, else 50 GFLOPS. E0105 for an unknown name or a description it cannot read (the message says which field and how to fix it); E0403–E0406 for the config path and file.",
        example: "estimate_hypothetical(\"gpt_oss(vocab = 1000, d = 64, layers = 2, ff = 64, heads = 4, kv_heads = 2, experts = 8, top_k = 2, window = 16)\", 100, 4, 512)",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.17",
        run: estimate_hypothetical,
        shape: Some(super::feasibility_shapes::estimate_hypothetical),
    },
    Builtin {
        name: "calibrate_device",
        params: &[opt("size", Scalar)],
        summary: "measure the active device's GFLOPS",
        doc: "`calibrate_device([size])` times 10 `[size, size]` matmuls (after one warm-up) on the active device, stores the GFLOPS in `mlpl_device_throughput_gflops` and `mlpl_device_throughput_gflops_DEV`, and returns it.",
        example: "gt(calibrate_device(64), 0)",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.17",
        run: calibrate_device,
        shape: Some(super::feasibility_shapes::calibrate_device),
    },
    Builtin {
        name: "feasible",
        params: &[req("est", Array), req("budget", Array)],
        summary: "whether an estimate fits a budget",
        doc: "`feasible(est, budget)`: 1 when est `[5]` respects budget `[vram_bytes, disk_bytes, wall_seconds]` (0 entries are not checked), else 0. E0218 for wrong sizes.",
        example: "feasible(estimate_hypothetical(\"smollm-135m\", 100, 4, 512), [8e9, 0, 0])",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.17",
        run: feasible,
        shape: Some(super::feasibility_shapes::feasible),
    },
];

/// The throughput for estimates on the active device (LANGUAGE §15.1).
pub fn throughput_gflops(it: &Interp) -> f64 {
    let kind = it.devices.active().kind.name();
    let read = |name: &str| match it.ws.get(name) {
        Some(Value::Str(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|g| g.is_finite() && *g > 0.0),
        _ => None,
    };
    read(&format!("mlpl_device_throughput_gflops_{kind}"))
        .or_else(|| read("mlpl_device_throughput_gflops"))
        .unwrap_or(estimate::DEFAULT_GFLOPS)
}

/// The calibrated cost model of the active device from the calibration cache
/// the runner loaded (`Workspace::calibration`), unless a throughput variable
/// overrides it (LANGUAGE §15.1's configuration wins).
pub fn calibrated_model(it: &Interp) -> Option<DeviceModel> {
    let kind = it.devices.active().kind.name();
    let overridden = [
        "mlpl_device_throughput_gflops".to_string(),
        format!("mlpl_device_throughput_gflops_{kind}"),
    ]
    .iter()
    .any(|n| it.ws.get(n).is_some());
    if overridden {
        return None;
    }
    it.ws.calibration.as_ref()?.entry(kind)?.model.clone()
}

/// A finite positive scalar argument (E0205, E0401).
pub fn positive(c: &Call, i: usize) -> Result<f64, Diagnostic> {
    let v = c.scalar(i)?;
    super::site::check_finite_positive(c, i, v)?;
    Ok(v)
}

fn estimate_train(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let steps = positive(c, 1)?;
    let batch = positive(c, 2)?;
    let seq = positive(c, 3)?;
    let dt = if c.has(4) { positive(c, 4)? } else { 4.0 };
    super::site::check_trainable(c, &m)?;
    let g = throughput_gflops(c.it);
    let mut e = crate::nn::estimate::estimate_train(&m, &c.it.ws.frozen, steps, batch, seq, dt, g);
    if let Some(model) = calibrated_model(c.it) {
        // The kernel-level model of the calibration cache (docs/estimates.md):
        // peak memory and the time of `steps` captured steps.
        let step = StepShape {
            batch,
            seq,
            loss: LossKind::CrossEntropy,
            forwards: 1.0,
            slots: 2.0,
        };
        let s = estimate_step(&m, &c.it.ws.frozen, &step, true, &model);
        e.vram_bytes = s.memory.total;
        e.wall_seconds = steps * s.seconds.mid;
    }
    Ok(Value::Array(Array::from_f64(vec![5], &e.to_array())))
}

fn estimate_hypothetical(c: &mut Call) -> Result<Value, Diagnostic> {
    let arch = architecture(c, 0)?;
    let steps = positive(c, 1)?;
    let batch = positive(c, 2)?;
    let seq = positive(c, 3)?;
    let dt = if c.has(4) { positive(c, 4)? } else { 4.0 };
    let r = if c.has(5) { positive(c, 5)? } else { 0.0 };
    let e = arch.estimate(steps, batch, seq, dt, r, throughput_gflops(c.it));
    Ok(Value::Array(Array::from_f64(vec![5], &e.to_array())))
}

/// The architecture argument `i` names: a table name or a description
/// (E0105), or a Hugging Face `config.json` (or the folder holding one) in the
/// data directory, read with `hf_model`'s parser (E0403–E0406).
fn architecture(c: &Call, i: usize) -> Result<Architecture, Diagnostic> {
    let rel = match spec::parse(c.string(i)?) {
        Err(e) => return Err(super::site::unknown_architecture(c, i, &e)),
        Ok(Spec::Arch(a)) => return Ok(a),
        Ok(Spec::Config(rel)) => rel,
    };
    let dir = c.it.ws.data_dir.as_deref();
    let resolve =
        |rel: &str| files::resolve(dir, rel).map_err(|e| super::site::path_error(c, i, &e));
    let mut path = resolve(&rel)?;
    if path.is_dir() {
        path = resolve(&format!("{}/config.json", rel.trim_end_matches('/')))?;
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| c.error_of(i, code::E0405, format!("{}: {e}", path.display())))?;
    let malformed = |m: String| {
        c.error_of(i, code::E0406, m)
            .note("`estimate_hypothetical` reads the config.json of Llama, Qwen 3 and GPT-OSS checkpoints (docs/estimates.md)")
    };
    let config = Config::parse(&text).map_err(malformed)?;
    config_architecture(&config).map_err(malformed)
}

/// The architecture of a Hugging Face configuration (Llama, Qwen 3 and
/// GPT-OSS; GPT-2's layer norms and two-matrix MLP are not this shape).
pub fn config_architecture(c: &Config) -> Result<Architecture, String> {
    let base = match c.family {
        Family::Llama => hypothetical::LLAMA,
        Family::Qwen3 => hypothetical::QWEN3,
        Family::GptOss => hypothetical::GPT_OSS,
        Family::Gpt2 => {
            return Err(
                "a GPT-2 configuration is not a shape `estimate_hypothetical` models (llama, qwen3 and gpt_oss are)"
                    .to_string(),
            )
        }
    };
    let oss = c.oss.as_ref();
    Ok(Architecture {
        vocab: c.vocab as u64,
        d: c.d as u64,
        layers: c.layers as u64,
        ff: c.hidden as u64,
        heads: c.heads as u64,
        kv_heads: c.kv_heads as u64,
        head_dim: c.head_dim as u64,
        qkv_bias: c.attention_bias,
        o_bias: c.attention_bias,
        tied: c.tied,
        experts: oss.map_or(0, |o| o.experts as u64),
        top_k: oss.map_or(0, |o| o.top_k as u64),
        window: oss.and_then(|o| o.window).unwrap_or(0) as u64,
        sliding_layers: oss.map_or(0, |o| o.sliding.iter().filter(|s| **s).count() as u64),
        ..base
    })
}

fn calibrate_device(c: &mut Call) -> Result<Value, Diagnostic> {
    let size = if c.has(0) { positive(c, 0)? } else { 1024.0 };
    super::site::check_calibration_size(c, size)?;
    let n = size as usize;
    let (a, b) = estimate::calibration_matrices(n);
    let a = Array::from_vec(vec![n, n], a).tensor();
    let b = Array::from_vec(vec![n, n], b).tensor();
    let backend = c.it.devices.active_backend();
    let err = |e| crate::errors::device_error(e, "calibrate_device", c.span);
    backend.matmul(&a, &b).map_err(err)?;
    let start = Instant::now();
    for _ in 0..10 {
        backend.matmul(&a, &b).map_err(err)?;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let g = 2.0 * size.powi(3) * 10.0 / secs / 1e9;
    let text = crate::display::format_f64(g);
    let kind = c.it.devices.active().kind.name();
    c.it.ws.assign(
        "mlpl_device_throughput_gflops",
        Value::string(text.as_str()),
        false,
    );
    c.it.ws.assign(
        &format!("mlpl_device_throughput_gflops_{kind}"),
        Value::string(text.as_str()),
        false,
    );
    Ok(Value::exact(g))
}

fn feasible(c: &mut Call) -> Result<Value, Diagnostic> {
    let est = c.array(0)?;
    if est.shape() != [5] {
        return Err(super::site::feasible_shape_error(c, 0, &named_shape(est)));
    }
    let budget = c.array(1)?;
    if budget.shape() != [3] {
        return Err(super::site::feasible_shape_error(
            c,
            1,
            &named_shape(budget),
        ));
    }
    let e: [f64; 5] = est.to_f64().try_into().expect("checked shape");
    let b: [f64; 3] = budget.to_f64().try_into().expect("checked shape");
    Ok(Value::Array(Array::scalar_f32(
        if estimate::feasible(&e, &b) { 1.0 } else { 0.0 },
    )))
}
