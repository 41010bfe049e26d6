//! The layer forms the Hugging Face families need (LANGUAGE §11, docs/models.md):
//! `linear` without a bias, norm epsilons, attention with its own head width,
//! biases and q/k norm, Llama 3.1 rope scaling, the tied head `unembed`,
//! `pos_embed`, `generate` with its key/value cache, and `hf_model`'s errors,
//! sharded and bf16 checkpoints.

use std::path::Path;

use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::Value;

use super::common::{error_code, eval, run_in, run_value, temp_dir};

#[test]
fn linear_without_a_bias_has_only_its_weight() {
    // x·W with W = 0.5·randn: the same as the biased layer's output before its (zero) bias.
    assert_eq!(
        eval("apply(linear(2, 3, 0, 0), [[1, 0]])"),
        eval("apply(linear(2, 3, 0), [[1, 0]])")
    );
    let n = eval("m = linear(2, 3, 0, 0)\nshape(grad(sum(apply(m, [[1, 2]])), __linear_W_0))");
    assert_eq!(n, "2 3");
    assert_eq!(error_code("m = linear(2, 3, 0, 0)\n__linear_b_0"), "E0101");
    assert_eq!(error_code("linear(2, 3, 0, 2)"), "E0401");
}

#[test]
fn norm_epsilons_are_used() {
    // x / √(mean(x²) + 1) with mean(x²) = 1.
    assert_eq!(
        eval("apply(rms_norm(2, 0, 1), [[1, 1]])"),
        "0.70710677 0.70710677"
    );
    // (x − 2) / √(1 + 1).
    assert_eq!(
        eval("apply(layer_norm(2, 1), [[1, 3]])"),
        "-0.70710677 0.70710677"
    );
    assert_eq!(error_code("rms_norm(2, 1, 0)"), "E0401");
    assert_eq!(error_code("layer_norm(2, -1)"), "E0401");
}

#[test]
fn attention_with_its_own_head_width_biases_and_qk_norm() {
    let src = "a = causal_attention(4, 2, 1, 1, 0, 3, 1, 1e-6)\ny = apply(a, reshape(iota(20), [5, 4]) / 20)\n";
    assert_eq!(eval(&format!("{src}shape(y)")), "5 4");
    assert_eq!(eval(&format!("{src}shape(__attn_Wq_0)")), "4 6");
    assert_eq!(eval(&format!("{src}shape(__attn_Wo_0)")), "6 4");
    assert_eq!(eval(&format!("{src}shape(__attn_bk_0)")), "1 3");
    assert_eq!(eval(&format!("{src}__attn_qn_0")), "1 1 1");
    assert_eq!(error_code("causal_attention(4, 2, 1, 1, 1)"), "E0303");
    assert_eq!(
        error_code("causal_attention(4, 2, 1, 1, 0, 3, 1, -1e-6)"),
        "E0401"
    );
    // qk_norm 0 is none (so that later arguments can be given without it).
    assert_eq!(
        error_code("a = causal_attention(4, 2, 1, 1, 0, 3, 1, 0)\n__attn_qn_0"),
        "E0101"
    );
    assert_eq!(
        error_code("causal_attention(4, 2, 1, 1, rope(4, 10000), 3)"),
        "E0213"
    );
    // Without head_dim, heads must still divide d.
    assert_eq!(error_code("attention(5, 2, 1)"), "E0213");
}

#[test]
fn llama3_rope_scaling_changes_only_the_low_frequencies() {
    // head_dim 8, base 10000: wavelengths 2π·(1, 10, 100, 1000). With original
    // 16, low 1, high 4: the first (< 4) is kept, the second and later
    // (> 16) divided by 8.
    let x = "reshape(iota(32), [4, 8]) / 32";
    let plain = eval(&format!("apply(rope(8, 10000), {x})"));
    let scaled = eval(&format!("apply(rope(8, 10000, 8, 1, 4, 16), {x})"));
    assert_ne!(plain, scaled);
    // Position 0 is not rotated either way.
    let first = |s: &str| s.lines().next().unwrap().to_string();
    assert_eq!(first(&plain), first(&scaled));
    assert_eq!(error_code("rope(8, 10000, 8, 1)"), "E0401");
    assert_eq!(error_code("rope(8, 10000, 8, 4, 1, 16)"), "E0401");
}

#[test]
fn unembed_is_the_embedding_table_transposed_and_shared() {
    let src = "e = embed(5, 3, 1)\nm = chain(e, unembed(e))\n";
    assert_eq!(
        eval(&format!("{src}apply(m, [0, 4])")),
        eval(&format!(
            "{src}matmul(apply(e, [0, 4]), transpose(embed_table(e)))"
        ))
    );
    // One parameter, used twice: the model has exactly the table.
    assert_eq!(
        eval(&format!(
            "{src}shape(grad(sum(apply(m, [0, 4])), __embed_E_0))"
        )),
        "5 3"
    );
    assert_eq!(error_code("unembed(linear(2, 2, 0))"), "E0401");
}

#[test]
fn pos_embed_adds_the_rows_of_the_positions() {
    let src = "p = pos_embed(4, 2, 0)\n";
    assert_eq!(
        eval(&format!("{src}apply(p, zeros([3, 2]))")),
        eval(&format!(
            "{src}matmul([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], __pos_P_0)"
        ))
    );
    assert_eq!(
        error_code("apply(pos_embed(4, 2, 0), zeros([5, 2]))"),
        "E0211"
    );
    assert_eq!(error_code("pos_embed(0, 2, 0)"), "E0213");
}

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hf")
}

fn interp(data: &Path) -> Interp {
    let mut ws = Workspace::new();
    ws.data_dir = Some(data.to_path_buf());
    Interp::new(ws)
}

fn values(v: Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.to_f64(),
        other => panic!("{}", other.kind_name()),
    }
}

/// The cache gives what recomputing the whole sequence gives: greedy decoding
/// by `generate` equals taking the argmax of the last row of `apply` on the
/// growing sequence, for a rotary (Llama) and a learned-position (GPT-2) model.
#[test]
fn generate_with_the_cache_equals_recomputing_every_step() {
    for family in ["llama", "gpt2"] {
        let mut it = interp(&examples());
        run_value(&mut it, &format!("m = hf_model(\"{family}\")\n0"));
        let cached = values(run_value(&mut it, "generate(m, [5, 9, 11], 10)"));
        let mut seq = vec![5.0, 9.0, 11.0];
        for _ in 0..10 {
            let items: Vec<String> = seq.iter().map(|x| x.to_string()).collect();
            let logits = values(run_value(
                &mut it,
                &format!("apply(m, [{}])", items.join(", ")),
            ));
            let last = &logits[logits.len() - 64..];
            let mut best = 0;
            for (i, v) in last.iter().enumerate() {
                if *v > last[best] {
                    best = i;
                }
            }
            seq.push(best as f64);
        }
        assert_eq!(cached, seq[3..].to_vec(), "{family}");
        // Sampling is reproducible from its seed and stays among the ids.
        let a = values(run_value(&mut it, "generate(m, [5, 9, 11], 8, 1.2, 5, 3)"));
        let b = values(run_value(&mut it, "generate(m, [5, 9, 11], 8, 1.2, 5, 3)"));
        assert_eq!(a, b);
        assert!(a
            .iter()
            .all(|&t| (0.0..64.0).contains(&t) && t.fract() == 0.0));
        assert_ne!(
            a,
            cached[..8].to_vec(),
            "{family}: sampling at 1.2 should differ from greedy"
        );
    }
    assert_eq!(
        run_in(
            "e = embed(4, 2, 0)\ngenerate(chain(e, unembed(e)), [1], 2, -1)",
            None
        )
        .result
        .err()
        .map(|d| d.code),
        Some("E0401")
    );
    assert_eq!(
        run_in(
            "e = embed(4, 2, 0)\ngenerate(chain(e, attention(2, 1, 1), unembed(e)), [1], 2)",
            None
        )
        .result
        .err()
        .map(|d| d.code),
        Some("E0401")
    );
}

/// Copies a family's checkpoint into a fresh data directory as `ck`.
fn copy_checkpoint(family: &str) -> std::path::PathBuf {
    let data = temp_dir("hf-layers");
    std::fs::create_dir_all(data.join("ck")).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(examples().join(family).join(f), data.join("ck").join(f)).unwrap();
    }
    data
}

type Tensors = Vec<(String, Vec<usize>, Vec<f32>)>;

fn read_tensors(path: &Path) -> Tensors {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out: Tensors = st
        .tensors()
        .into_iter()
        .map(|(k, v)| {
            let vals = v
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (k, v.shape().to_vec(), vals)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Writes tensors as f32, or bf16 (truncated) when `bf16`.
fn write_tensors(path: &Path, tensors: &Tensors, bf16: bool) {
    use safetensors::tensor::{Dtype, TensorView};
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, v)| {
            if bf16 {
                v.iter()
                    .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
                    .collect()
            } else {
                v.iter().flat_map(|x| x.to_le_bytes()).collect()
            }
        })
        .collect();
    let dtype = if bf16 { Dtype::BF16 } else { Dtype::F32 };
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((k, s, _), b)| (k.clone(), TensorView::new(dtype, s.clone(), b).unwrap()))
        .collect();
    std::fs::write(path, safetensors::serialize(views, &None).unwrap()).unwrap();
}

#[test]
fn a_checkpoint_that_does_not_fit_names_every_wrong_tensor() {
    let data = copy_checkpoint("llama");
    let st = data.join("ck/model.safetensors");
    let mut t = read_tensors(&st);
    t.retain(|(k, _, _)| k != "model.norm.weight");
    for (k, s, _) in t.iter_mut() {
        if k == "model.layers.1.self_attn.k_proj.weight" {
            *s = vec![s[1], s[0]];
        }
    }
    t.push((
        "model.layers.9.extra.weight".into(),
        vec![2],
        vec![0.0, 1.0],
    ));
    write_tensors(&st, &t, false);
    let out = run_in("hf_model(\"ck\")", Some(&data));
    let d = out.result.expect_err("an error");
    assert_eq!(d.code, "E0407");
    let notes = d.notes.join("\n");
    for name in [
        "model.norm.weight",
        "model.layers.1.self_attn.k_proj.weight",
        "model.layers.9.extra.weight",
    ] {
        assert!(notes.contains(name), "{name} not named in {notes}");
    }
    // An unsupported family and a path outside the data directory.
    std::fs::write(data.join("ck/config.json"), "{\"model_type\": \"bert\"}").unwrap();
    assert_eq!(
        run_in("hf_model(\"ck\")", Some(&data))
            .result
            .err()
            .map(|d| d.code),
        Some("E0406")
    );
    assert_eq!(
        run_in("hf_model(\"../ck\")", Some(&data))
            .result
            .err()
            .map(|d| d.code),
        Some("E0404")
    );
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn sharded_and_bf16_checkpoints_load() {
    let data = copy_checkpoint("qwen3");
    let st = data.join("ck/model.safetensors");
    let t = read_tensors(&st);
    let x = "[55, 22, 28, 6, 24, 23, 50, 57]";
    let whole = values(run_value(
        &mut interp(&data),
        &format!("apply(hf_model(\"ck\"), {x})"),
    ));
    // Two shards named by an index, the second in bf16.
    let (a, b) = t.split_at(t.len() / 2);
    write_tensors(&data.join("ck/part-1.safetensors"), &a.to_vec(), false);
    write_tensors(&data.join("ck/part-2.safetensors"), &b.to_vec(), true);
    let mut map = serde_json::Map::new();
    for (k, _, _) in a {
        map.insert(k.clone(), "part-1.safetensors".into());
    }
    for (k, _, _) in b {
        map.insert(k.clone(), "part-2.safetensors".into());
    }
    let index = serde_json::json!({ "metadata": {}, "weight_map": map });
    std::fs::write(
        data.join("ck/model.safetensors.index.json"),
        index.to_string(),
    )
    .unwrap();
    std::fs::remove_file(&st).unwrap();
    let sharded = values(run_value(
        &mut interp(&data),
        &format!("apply(hf_model(\"ck\"), {x})"),
    ));
    let scale = whole.iter().fold(0f64, |m, v| m.max(v.abs()));
    let diff = whole
        .iter()
        .zip(&sharded)
        .fold(0f64, |m, (p, q)| m.max((p - q).abs()));
    // bf16 keeps 8 bits of mantissa: close, not equal.
    assert!(diff > 0.0 && diff < 0.05 * scale, "{diff} of {scale}");
    // A shard outside the folder is refused.
    let bad = serde_json::json!({ "weight_map": { "x": "../elsewhere.safetensors" } });
    std::fs::write(
        data.join("ck/model.safetensors.index.json"),
        bad.to_string(),
    )
    .unwrap();
    assert_eq!(
        run_in("hf_model(\"ck\")", Some(&data))
            .result
            .err()
            .map(|d| d.code),
        Some("E0406")
    );
    let _ = std::fs::remove_dir_all(&data);
}

/// A damaged checkpoint file is an error naming the file, never a crash:
/// cut short (its tensors' bytes missing), a header length past its end, a
/// tensor whose byte range does not hold its shape. Nothing is bound.
#[test]
fn damaged_checkpoint_files_are_errors() {
    let data = copy_checkpoint("llama");
    let st = data.join("ck/model.safetensors");
    let whole = std::fs::read(&st).unwrap();
    let header = u64::from_le_bytes(whole[..8].try_into().unwrap()) as usize;
    let mut text = String::from_utf8(whole[8..8 + header].to_vec()).unwrap();
    // The first tensor's end offset one element short of its shape.
    let at = text
        .find("\"data_offsets\":[0,")
        .expect("a tensor at offset 0");
    let end_at = at + "\"data_offsets\":[0,".len();
    let end: String = text[end_at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let short = (end.parse::<usize>().unwrap() - 4).to_string();
    text.replace_range(
        end_at..end_at + end.len(),
        &format!("{short:<width$}", width = end.len()),
    );
    let mut misshaped = whole[..8].to_vec();
    misshaped.extend_from_slice(text.as_bytes());
    misshaped.extend_from_slice(&whole[8 + header..]);
    let mut too_long = whole.clone();
    too_long[..8].copy_from_slice(&(whole.len() as u64).to_le_bytes());
    for (what, bytes) in [
        ("cut short", whole[..whole.len() - 100].to_vec()),
        ("header past the end", too_long),
        ("range off its shape", misshaped),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&st, bytes).unwrap();
        let out = run_in("m = hf_model(\"ck\")\n0", Some(&data));
        let d = out.result.expect_err(what);
        assert_eq!(d.code, "E0406", "{what}: {}", d.message);
        let said = format!("{:?}", d.primary);
        assert!(said.contains("model.safetensors"), "{what}: {said}");
    }
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn hf_save_refuses_a_model_of_no_family() {
    let data = temp_dir("hf-save");
    let out = run_in(
        "hf_save(chain(linear(2, 2, 0), relu_layer()), \"out\")",
        Some(&data),
    );
    assert_eq!(out.result.err().map(|d| d.code), Some("E0406"));
    let _ = std::fs::remove_dir_all(&data);
}

/// Two printed arrays equal to float32 rounding (1e-6 relative to their largest entry).
fn assert_close_text(a: &str, b: &str) {
    let p = |s: &str| -> Vec<f64> { s.split_whitespace().map(|v| v.parse().unwrap()).collect() };
    let (a, b) = (p(a), p(b));
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-6 * scale, "{a:?} against {b:?}");
    }
}

/// GPT-OSS's attention: sinks take probability mass (the weights of a row sum
/// to less than 1, to 1 again with a very negative sink), and a sliding window
/// of w zeroes every weight more than w − 1 positions back.
#[test]
fn attention_sinks_and_sliding_windows() {
    let x = "reshape(iota(20), [5, 4]) / 20";
    let sums = |src: &str| -> Vec<f64> {
        let out = eval(&format!("{src}\nsum(attention_weights(a, {x}), 2)"));
        out.split_whitespace().map(|v| v.parse().unwrap()).collect()
    };
    // Sinks start at 0: one more exp(0 − max) in each denominator.
    let with_sinks = sums("a = causal_attention(4, 2, 3, 2, 0, 0, 0, 0, 1)");
    assert!(
        with_sinks.iter().all(|&s| s < 0.999 && s > 0.0),
        "{with_sinks:?}"
    );
    let drained =
        sums("a = causal_attention(4, 2, 3, 2, 0, 0, 0, 0, 1)\n__attn_s_0 = [-1000, -1000]");
    assert!(
        drained.iter().all(|&s| (s - 1.0).abs() < 1e-6),
        "{drained:?}"
    );
    // Without sinks or a window the composed path is not taken; with window 2
    // row q sees keys q − 1 and q only.
    let w = eval(&format!(
        "a = causal_attention(4, 1, 3, 1, 0, 0, 0, 0, 0, 2)\nattention_weights(a, {x})"
    ));
    let w: Vec<f64> = w.split_whitespace().map(|v| v.parse().unwrap()).collect();
    for q in 0..5 {
        for k in 0..5 {
            let seen = k <= q && k + 2 > q;
            assert_eq!(w[q * 5 + k] != 0.0, seen, "row {q}, key {k}: {w:?}");
        }
    }
    // A window as wide as the sequence is plain causal attention.
    assert_close_text(
        &eval(&format!(
            "apply(causal_attention(4, 2, 3, 2, 0, 0, 0, 0, 0, 5), {x})"
        )),
        &eval(&format!("apply(causal_attention(4, 2, 3), {x})")),
    );
    assert_eq!(
        error_code("causal_attention(4, 2, 3, 2, 0, 0, 0, 0, 2)"),
        "E0401"
    );
    assert_eq!(
        error_code("causal_attention(4, 2, 3, 2, 0, 0, 0, 0, 0, -1)"),
        "E0213"
    );
}

/// Partial rotary: a rope narrower than the heads rotates their first entries
/// and leaves the rest, so the output differs from both no rope and a full
/// rope, and a rope wider than the heads is refused.
#[test]
fn partial_rotary_rotates_the_first_entries_of_each_head() {
    let x = "reshape(iota(24), [4, 6]) / 24";
    let none = eval(&format!("apply(causal_attention(6, 1, 2), {x})"));
    let partial = eval(&format!(
        "apply(causal_attention(6, 1, 2, 1, rope(2, 100)), {x})"
    ));
    let full = eval(&format!(
        "apply(causal_attention(6, 1, 2, 1, rope(6, 100)), {x})"
    ));
    assert_ne!(partial, none);
    assert_ne!(partial, full);
    // The rotation itself: the first 2 of 6 entries rotated as rope(2) rotates
    // them, the other 4 passed through.
    let mut it = Interp::new(Workspace::new());
    let r = mlpl_lang::nn::layers::Rope {
        head_dim: 2,
        base: 100.0,
        scaling: mlpl_lang::nn::layers::RopeScaling::Plain,
    };
    let xs: Vec<f32> = (0..18).map(|i| i as f32 / 18.0).collect();
    let x6 = mlpl_lang::value::Array::from_vec(vec![3, 6], xs.clone());
    let span = mlpl_diag::Span::default();
    let mut f = mlpl_lang::nn::apply::Forward::new(&mut it, span, span);
    let got = mlpl_lang::nn::rope::rotate_from(&mut f, &r, &x6, 0)
        .unwrap()
        .to_f64();
    for t in 0..3 {
        let (a, b) = (xs[t * 6] as f64, xs[t * 6 + 1] as f64);
        let (c, s) = ((t as f64).cos(), (t as f64).sin());
        assert!((got[t * 6] - (a * c - b * s)).abs() < 1e-6, "{got:?}");
        assert!((got[t * 6 + 1] - (b * c + a * s)).abs() < 1e-6, "{got:?}");
        for k in 2..6 {
            assert_eq!(got[t * 6 + k], xs[t * 6 + k] as f64);
        }
    }
    assert_eq!(
        error_code("causal_attention(6, 1, 2, 1, rope(8, 100))"),
        "E0213"
    );
}

/// `yarn_rope` is `rope` with YaRN's frequencies and attention factor:
/// position 0 is scaled by 0.1·ln(factor) + 1, and its arguments are checked.
#[test]
fn yarn_rope_scales_and_blends_the_frequencies() {
    // At position 0 cos = 1, sin = 0: x times the attention factor 0.1·ln 4 + 1.
    let y = eval("apply(yarn_rope(4, 100, 4, 64, 32, 1, 0), [[1, 1, 1, 1]])");
    let f = 0.1 * 4f64.ln() + 1.0;
    for v in y.split_whitespace() {
        assert!((v.parse::<f64>().unwrap() - f).abs() < 1e-6, "{y}");
    }
    // Factor 1 is plain rope.
    assert_eq!(
        eval("apply(yarn_rope(4, 100, 1, 64), reshape(iota(8), [2, 4]))"),
        eval("apply(rope(4, 100), reshape(iota(8), [2, 4]))")
    );
    assert_ne!(
        eval("apply(yarn_rope(4, 100, 4, 64), reshape(iota(8), [2, 4]))"),
        eval("apply(rope(4, 100), reshape(iota(8), [2, 4]))")
    );
    assert_eq!(error_code("yarn_rope(4, 100, 0, 64)"), "E0401");
    assert_eq!(error_code("yarn_rope(4, 100, 4, 64, 1, 32)"), "E0401");
    assert_eq!(error_code("yarn_rope(3, 100, 4, 64)"), "E0213");
}

/// GPT-OSS's `moe`: biases are parameters of the layer, the clamped gated
/// activation and softmax after top-k change the output, and bad forms are
/// refused.
#[test]
fn moe_biases_clamped_gate_and_softmax_after_top_k() {
    let x = "reshape(iota(8), [2, 4]) / 8";
    // The biases are bound and trainable.
    assert_eq!(
        eval("m = moe(4, 3, 2, 8, 0, 1)\nshape(__moe_bg_0)"),
        "3 1 8"
    );
    let plain = eval(&format!("apply(moe(4, 3, 2, 8, 0), {x})"));
    // Zero biases, SwiGLU and renormalised top-2 gates: the same output.
    assert_close_text(
        &eval(&format!("apply(moe(4, 3, 2, 8, 0, 1, 0, 7, 1), {x})")),
        &plain,
    );
    assert_ne!(
        eval(&format!("apply(moe(4, 3, 2, 8, 0, 1, 1.702, 7), {x})")),
        plain
    );
    // top-1: softmax after top-k gives gate 1, before gives the probability.
    assert_ne!(
        eval(&format!("apply(moe(4, 3, 1, 8, 0, 0, 0, 0, 1), {x})")),
        eval(&format!("apply(moe(4, 3, 1, 8, 0), {x})"))
    );
    // The experts' output bias receives a gradient.
    let g = eval(&format!(
        "m = moe(4, 3, 2, 8, 0, 1, 1.702, 7, 1)\nsum(abs(grad(sum(apply(m, {x}) * apply(m, {x})), __moe_bd_0)))"
    ));
    assert!(g.parse::<f64>().unwrap() > 0.0, "{g}");
    assert_eq!(error_code("moe(4, 3, 2, 8, 0, 1, 1.702)"), "E0401");
    assert_eq!(error_code("moe(4, 3, 2, 8, 0, 1, -1, 7)"), "E0401");
    assert_eq!(error_code("moe(4, 3, 2, 8, 0, 2)"), "E0401");
}

/// `generate` with a stop token ends at it; a batch of prompts decodes each
/// row as it would alone.
#[test]
fn generate_stops_at_the_stop_token_and_decodes_batches() {
    let mut it = interp(&examples());
    run_value(&mut it, "m = hf_model(\"llama\")\n0");
    let free = values(run_value(&mut it, "generate(m, [5, 9, 11], 6)"));
    let stop = free[2];
    let first = free.iter().position(|&t| t == stop).unwrap();
    let stopped = values(run_value(
        &mut it,
        &format!("generate(m, [5, 9, 11], 6, 0, 0, 0, {stop})"),
    ));
    assert_eq!(stopped, free[..=first].to_vec());
    let a = values(run_value(&mut it, "generate(m, [5, 9, 11], 4)"));
    let b = values(run_value(&mut it, "generate(m, [7, 3, 2], 4)"));
    let batch = run_value(&mut it, "generate(m, [[5, 9, 11], [7, 3, 2]], 4)");
    let Value::Array(batch) = batch else {
        panic!("not an array")
    };
    assert_eq!(batch.shape(), &[2, 4]);
    assert_eq!(batch.to_f64(), [a, b].concat());
    // Sampled rows: row 0 draws as the single prompt does.
    let s0 = values(run_value(&mut it, "generate(m, [5, 9, 11], 4, 1.2, 5, 3)"));
    let sb = values(run_value(
        &mut it,
        "generate(m, [[5, 9, 11], [5, 9, 11]], 4, 1.2, 5, 3)",
    ));
    assert_eq!(sb[..4].to_vec(), s0);
    assert_eq!(
        run_in(
            "e = embed(4, 2, 0)\ngenerate(chain(e, unembed(e)), 1, 2)",
            None
        )
        .result
        .err()
        .map(|d| d.code),
        Some("E0205")
    );
}

/// `hf_save(m, dir, "bfloat16")` writes bf16 tensors (rounded to nearest
/// even) and says so in config.json; loading them back gives those values.
#[test]
fn hf_save_writes_bfloat16_and_float16() {
    let data = copy_checkpoint("gpt_oss");
    let mut it = interp(&data);
    let n = values(run_value(
        &mut it,
        "m = hf_model(\"ck\")\nhf_save(m, \"bf\", \"bfloat16\")\nhf_save(m, \"h\", \"float16\")",
    ));
    assert_eq!(n, vec![37.0]);
    let original = values(run_value(&mut it, "__embed_E_0"));
    for (dir, dtype) in [("bf", "bfloat16"), ("h", "float16")] {
        let config = std::fs::read_to_string(data.join(dir).join("config.json")).unwrap();
        assert!(
            config.contains(&format!("\"dtype\": \"{dtype}\"")),
            "{config}"
        );
    }
    // The reloaded table is the bf16 rounding of the original, not the original.
    let mut it2 = interp(&data);
    let bf = values(run_value(&mut it2, "m = hf_model(\"bf\")\n__embed_E_0"));
    assert_eq!(bf.len(), original.len());
    for (b, o) in bf.iter().zip(&original) {
        let want = f32::from_bits(
            ((*o as f32).to_bits() + 0x7fff + (((*o as f32).to_bits() >> 16) & 1)) & 0xffff_0000,
        );
        assert_eq!(*b as f32, want, "{o}");
    }
    assert_ne!(bf, original);
    assert_eq!(
        run_in(
            "e = embed(4, 2, 0)\nhf_save(chain(e, rms_norm(2, 1), unembed(e)), \"x\", \"int8\")",
            Some(&data)
        )
        .result
        .err()
        .map(|d| d.code),
        Some("E0401")
    );
    let _ = std::fs::remove_dir_all(&data);
}
