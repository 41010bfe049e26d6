//! Feasibility builtins (LANGUAGE §10.17, §15): estimate_hypothetical,
//! calibrate_device, feasible. Expected estimates were computed from the formulas
//! of §15.3 in float64.

use crate::common;

use common::{assert_f32, error_code, error_of, eval, nums, Session};

const SMOL: &str = "estimate_hypothetical(\"smollm-135m\", 100, 4, 512)";

#[test]
fn the_reference_example() {
    // §15.3 shows `3739.843`, which is not the shortest round-trip float32 form
    // of the computed 3739.842773 (§7.2): `3739.843` reads back as 3739.843018.
    assert_eq!(
        eval(SMOL),
        "134515008 7964464128 538060032 186992138649600 3739.8428"
    );
    assert_eq!(eval(&format!("shape({SMOL})")), "5");
    assert_eq!(eval(&format!("labels({SMOL})")), "");
}

#[test]
fn parameter_counts_match_the_published_ones() {
    for (name, p) in [
        ("smollm-135m", 134515008.0),
        ("smollm-360m", 361821120.0),
        ("smollm-1.7b", 1711376384.0),
        ("llama-3.2-1b", 1235814400.0),
        ("qwen-2.5-0.5b", 494032768.0),
    ] {
        let got = nums(&format!("estimate_hypothetical(\"{name}\", 1, 1, 1)"));
        assert_eq!(got[0] as f32, p as f32, "{name}");
        // disk = P · 4 bytes by default.
        assert_eq!(got[2] as f32, (p * 4.0) as f32, "{name}");
    }
}

#[test]
fn other_architectures_dtype_and_lora() {
    // q/k/v biases.
    assert_f32(
        "estimate_hypothetical(\"qwen-2.5-0.5b\", 1, 1, 16)",
        &[
            494032768.0,
            7966008320.0,
            1976131072.0,
            47488991232.0,
            0.94977982464,
        ],
    );
    // dtype_bytes = 2.
    assert_f32(
        "estimate_hypothetical(\"llama-3.2-1b\", 5, 1, 64, 2)",
        &[
            1235814400.0,
            10030764032.0,
            2471628800.0,
            2380686950400.0,
            47.613739008,
        ],
    );
    // LoRA rank 8: Tr counts the adapters only and c = 4.
    assert_f32(
        "estimate_hypothetical(\"smollm-360m\", 10, 2, 128, 2, 8)",
        &[
            361821120.0,
            1167550336.0,
            723642240.0,
            3825205248000.0,
            76.50410496,
        ],
    );
}

#[test]
fn throughput_variables() {
    // G = 100 halves the wall time.
    assert_f32(
        &format!("mlpl_device_throughput_gflops = \"100\"\n{SMOL}"),
        &[
            134515008.0,
            7964464128.0,
            538060032.0,
            186992138649600.0,
            1869.921386496,
        ],
    );
    // The per-device variable wins over the generic one.
    assert_f32(
        &format!(
            "mlpl_device_throughput_gflops = \"100\"\nmlpl_device_throughput_gflops_cpu = \"25\"\n{SMOL}"
        ),
        &[134515008.0, 7964464128.0, 538060032.0, 186992138649600.0, 7479.685545984],
    );
    // A value that does not parse falls back to 50.
    assert_eq!(
        eval(&format!("mlpl_device_throughput_gflops = \"fast\"\n{SMOL}")),
        "134515008 7964464128 538060032 186992138649600 3739.8428"
    );
}

#[test]
fn estimate_hypothetical_errors() {
    let d = error_of("estimate_hypothetical(\"gpt-5\", 100, 4, 512)");
    assert_eq!(d.code, "E0105");
    let text = format!("{} {:?} {:?}", d.message, d.notes, d.help);
    for name in [
        "smollm-135m",
        "smollm-360m",
        "smollm-1.7b",
        "llama-3.2-1b",
        "qwen-2.5-0.5b",
    ] {
        assert!(text.contains(name), "E0105 lists {name}: {text}");
    }
    for bad in [
        "0, 4, 512",
        "-1, 4, 512",
        "100, 0, 512",
        "100, 4, 0",
        "100, 4, 512, 0",
        "100, 4, 512, 4, 0",
        "100, 4, 512, 4, -2",
        "1 / 0, 4, 512",
        "0 / 0, 4, 512",
    ] {
        assert_eq!(
            error_code(&format!("estimate_hypothetical(\"smollm-135m\", {bad})")),
            "E0401",
            "{bad}"
        );
    }
    assert_eq!(
        error_code("estimate_hypothetical(\"smollm-135m\", [100], 4, 512)"),
        "E0205"
    );
    assert_eq!(
        error_code("estimate_hypothetical(\"smollm-135m\", 100, 4)"),
        "E0103"
    );
    assert_eq!(
        error_code("estimate_hypothetical(\"smollm-135m\", 1, 1, 1, 4, 8, 1)"),
        "E0103"
    );
    assert_eq!(error_code("estimate_hypothetical(5, 100, 4, 512)"), "E0302");
}

#[test]
fn feasible_checks_nonzero_budget_entries() {
    // est = [P, vram 7964464128, disk 538060032, flops, wall 3739.843].
    let est = format!("e = {SMOL}\n");
    let f = |budget: &str| eval(&format!("{est}feasible(e, {budget})"));
    assert_eq!(f("[8e9, 0, 0]"), "1");
    assert_eq!(f("[7e9, 0, 0]"), "0");
    assert_eq!(f("[0, 0, 0]"), "1");
    assert_eq!(f("[0, 6e8, 0]"), "1");
    assert_eq!(f("[0, 5e8, 0]"), "0");
    assert_eq!(f("[0, 0, 4000]"), "1");
    assert_eq!(f("[0, 0, 3000]"), "0");
    assert_eq!(f("[8e9, 6e8, 4000]"), "1");
    assert_eq!(f("[8e9, 6e8, 3000]"), "0");
    // Limits are inclusive.
    assert_eq!(eval("feasible([1, 10, 20, 0, 30], [10, 20, 30])"), "1");
    assert_eq!(eval("feasible([1, 11, 20, 0, 30], [10, 20, 30])"), "0");
    assert_eq!(
        eval("shape(feasible([1, 10, 20, 0, 30], [10, 20, 30]))"),
        "[]"
    );
}

#[test]
fn feasible_errors() {
    let d = error_of("feasible([1, 2, 3], [0, 0, 0])");
    assert_eq!(d.code, "E0218");
    assert!(
        format!("{d:?}").contains("estimate must be rank-1 [5]"),
        "{d:?}"
    );
    let d = error_of("feasible([1, 2, 3, 4, 5], [0, 0])");
    assert_eq!(d.code, "E0218");
    assert!(
        format!("{d:?}").contains("budget must be rank-1 [3] [vram, disk, wall]"),
        "{d:?}"
    );
    assert_eq!(error_code("feasible(zeros([5, 1]), [0, 0, 0])"), "E0218");
    assert_eq!(error_code("feasible(5, [0, 0, 0])"), "E0218");
    assert_eq!(
        error_code("feasible([1, 2, 3, 4, 5], zeros([1, 3]))"),
        "E0218"
    );
    assert_eq!(error_code("feasible(\"e\", [0, 0, 0])"), "E0301");
    assert_eq!(error_code("feasible([1, 2, 3, 4, 5])"), "E0103");
}

#[test]
fn calibrate_device_measures_and_stores_gflops() {
    let mut s = Session::new(None, None);
    let g = s.eval("g = calibrate_device(16)\ng");
    let value: f64 = g.parse().expect("a number");
    assert!(value > 0.0 && value.is_finite(), "{g}");
    // G is stored, formatted as an exact scalar, in both variables.
    assert_eq!(s.eval("mlpl_device_throughput_gflops"), g);
    assert_eq!(s.eval("mlpl_device_throughput_gflops_cpu"), g);
    // ... and then used by the estimates.
    let wall = nums(&format!(
        "mlpl_device_throughput_gflops_cpu = \"{g}\"\n{SMOL}"
    ))[4];
    assert_eq!(wall as f32, (186992138649600.0 / (value * 1e9)) as f32);
    assert_eq!(eval("shape(calibrate_device(8))"), "[]");
    // The default size is 1024.
    assert!(nums("calibrate_device()")[0] > 0.0);
}

#[test]
fn calibrate_device_errors() {
    assert_eq!(error_code("calibrate_device(0)"), "E0401");
    assert_eq!(error_code("calibrate_device(-4)"), "E0401");
    assert_eq!(error_code("calibrate_device(1 / 0)"), "E0401");
    assert_eq!(error_code("calibrate_device([8])"), "E0205");
    assert_eq!(error_code("calibrate_device(8, 8)"), "E0103");
}

#[test]
fn large_architectures_by_name_and_by_description() {
    // Published counts: Llama-3-8B 8.03 B; Qwen3-0.6B 0.6 B (0.44 B without
    // embeddings) and Qwen3-8B 8.2 B (6.95 B without); GPT-OSS 20.91 B and
    // 116.83 B total.
    for (name, described, p) in [
        ("llama-3-8b", "llama(vocab = 128256, d = 4096, layers = 32, ff = 14336, heads = 32, kv_heads = 8)", 8030261248.0),
        ("qwen3-0.6b", "qwen3(vocab = 151936, d = 1024, layers = 28, ff = 3072, heads = 16, kv_heads = 8, head_dim = 128, tied = 1)", 596049920.0),
        ("qwen3-8b", "qwen3(vocab = 151936, d = 4096, layers = 36, ff = 12288, heads = 32, kv_heads = 8, head_dim = 128)", 8190735360.0),
        ("gpt-oss-20b", "gpt_oss(vocab = 201088, d = 2880, layers = 24, ff = 2880, heads = 64, kv_heads = 8, head_dim = 64, experts = 32, top_k = 4, window = 128)", 20914757184.0),
        ("gpt-oss-120b", "gpt_oss(vocab = 201088, d = 2880, layers = 36, ff = 2880, heads = 64, kv_heads = 8, head_dim = 64, experts = 128, top_k = 4, window = 128)", 116829156672.0),
    ] {
        let by_name = nums(&format!("estimate_hypothetical(\"{name}\", 10, 2, 256, 2)"));
        let by_description = nums(&format!("estimate_hypothetical(\"{described}\", 10, 2, 256, 2)"));
        assert_eq!(by_name[0] as f32, p as f32, "{name}");
        assert_eq!(by_name, by_description, "{name}");
    }
    // GPT-OSS-20B: FLOPs are those of the 3.6 B active parameters, not the
    // 20.9 B: 6 · tokens · (active less the head) + the head + attention.
    let e = nums("estimate_hypothetical(\"gpt-oss-20b\", 1, 1, 64)");
    let dense_equivalent = 6.0 * 64.0 * 20.9e9;
    assert!(e[3] < 0.25 * dense_equivalent, "{}", e[3]);
}

#[test]
fn a_config_json_gives_the_checkpoints_parameter_count() {
    // The tiny checkpoints of examples/hf: the count from config.json equals
    // the parameters of the model `hf_model` builds from the same folder.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hf");
    for (family, arg) in [
        ("llama", "llama/config.json"),
        ("qwen3", "qwen3/config.json"),
        ("gpt_oss", "./gpt_oss"),
    ] {
        let mut s = Session::new(Some(&dir), None);
        let from_config = s.eval(&format!("estimate_hypothetical(\"{arg}\", 1, 1, 1)[0]"));
        let built = s.eval(&format!(
            "estimate_train(hf_model(\"{family}\"), 1, 1, 1)[0]"
        ));
        assert_eq!(from_config, built, "{family}");
    }
    let mut s = Session::new(Some(&dir), None);
    // GPT-2 is a checkpoint `hf_model` reads but not this shape.
    let e = s
        .run("estimate_hypothetical(\"gpt2/config.json\", 1, 1, 1)")
        .result
        .unwrap_err();
    assert_eq!(e.code, "E0406");
    assert_eq!(
        s.error_code("estimate_hypothetical(\"missing/config.json\", 1, 1, 1)"),
        "E0405"
    );
    assert_eq!(
        s.error_code("estimate_hypothetical(\"../config.json\", 1, 1, 1)"),
        "E0404"
    );
    assert_eq!(
        Session::new(None, None)
            .error_code("estimate_hypothetical(\"llama/config.json\", 1, 1, 1)"),
        "E0403"
    );
}

#[test]
fn description_errors_say_what_to_fix() {
    for (src, says) in [
        ("llama(d = 4096, layers = 32)", "lacks vocab, ff, heads"),
        (
            "gpt_oss(vocab = 64, d = 32, layers = 2, ff = 16, heads = 4)",
            "lacks experts, top_k",
        ),
        ("qwen3-8b(width = 3)", "unknown field `width`"),
        (
            "llama-3-8b(kv_heads = 5)",
            "kv_heads = 5 does not divide heads = 32",
        ),
        ("mistral(d = 8)", "unknown architecture `mistral`"),
    ] {
        let line = format!("estimate_hypothetical(\"{src}\", 1, 1, 1)");
        let d = error_of(&line);
        assert_eq!(d.code, "E0105", "{src}");
        let text = format!("{} {:?} {:?}", d.message, d.notes, d.help);
        assert!(text.contains(says), "{src}: {text}");
        // The error points at the first argument, the string.
        let at = d.primary.as_ref().expect("a span").span;
        assert_eq!(&line[at.start..at.end], format!("\"{src}\""), "{src}");
    }
}
