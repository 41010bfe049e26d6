//! Model surgery, checkpoints, placement and estimates (LANGUAGE §10.14, §11.7–
//! §11.9, §14.5, §15.2): `clone_model`, `freeze`, `unfreeze`, `lora`,
//! `perturb_params`, `reinit`, `embed_table`, `save`/`load_weights` with
//! structural keys, `to_device` of models and `estimate_train`.

use crate::common;

use std::path::Path;

use common::{temp_dir, Session};
use mlpl_lang::data::rng;
use mlpl_lang::value::{Array, Placement, Value};
use safetensors::tensor::{Dtype, SafeTensors};

fn array(s: &Session, name: &str) -> Array {
    match s.it.ws.get(name) {
        Some(Value::Array(a)) => a.clone(),
        other => panic!("`{name}` is {other:?}"),
    }
}

fn params(s: &Session, model: &str) -> Vec<String> {
    match s.it.ws.get(model) {
        Some(Value::Model(m)) => m.0.parameters(),
        other => panic!("`{model}` is {other:?}"),
    }
}

fn values(s: &mut Session, src: &str) -> Vec<f32> {
    match s.run(src).result {
        Ok(Some(Value::Array(a))) => a.to_f32(),
        other => panic!("{src}: {:?}", other.map(|v| v.map(|v| v.display()))),
    }
}

fn draws(seed: u64, n: usize, scale: f64) -> Vec<f32> {
    rng::normal_vec(seed, n)
        .into_iter()
        .map(|z| (z * scale) as f32)
        .collect()
}

#[test]
fn clone_model_copies_values_under_new_names() {
    let mut s = Session::new(None, None);
    s.eval("l = linear(3, 3, 0)\nm = chain(l, relu_layer(), l, residual(rms_norm(3, 1)))\nfreeze(m)\nto_device(m, \"cpu\")\nc = clone_model(m)");
    assert_eq!(
        params(&s, "c"),
        ["__linear_W_2", "__linear_b_2", "__rms_g_3"]
    );
    assert_eq!(
        array(&s, "__linear_W_2").to_f32(),
        array(&s, "__linear_W_0").to_f32()
    );
    assert_eq!(
        array(&s, "__linear_W_2").placement(),
        array(&s, "__linear_W_0").placement()
    );
    assert!(matches!(
        array(&s, "__linear_W_2").placement(),
        Placement::Placed(_)
    ));
    for p in params(&s, "c") {
        assert!(s.it.ws.tracked.contains(&p), "{p} tracked");
        assert!(!s.it.ws.frozen.contains(&p), "{p} not frozen");
    }
    // Independent: changing the copy leaves the original alone.
    s.eval("__linear_W_2 = __linear_W_2 * 0");
    let x = "[[1, 2, 3], [3, 4, -1]]";
    assert_ne!(
        values(&mut s, &format!("apply(c, {x})")),
        values(&mut s, &format!("apply(m, {x})"))
    );
    // A clone of a clone.
    s.eval("c2 = clone_model(c)");
    assert_eq!(
        params(&s, "c2"),
        ["__linear_W_4", "__linear_b_4", "__rms_g_5"]
    );
}

#[test]
fn freeze_and_unfreeze() {
    let mut s = Session::new(None, None);
    assert_eq!(
        s.eval("m = chain(linear(2, 2, 0), layer_norm(2))\nfreeze(m)"),
        "0"
    );
    assert_eq!(s.eval("freeze(m)"), "0");
    assert_eq!(s.it.ws.frozen.len(), 4);
    let before = array(&s, "__linear_W_0").to_f32();
    s.eval("X = [[1, 2]]\nadam(sum(apply(m, X) * apply(m, X)), m, 0.1, 0.9, 0.999, 1e-8)");
    assert_eq!(
        array(&s, "__linear_W_0").to_f32(),
        before,
        "frozen parameters do not move"
    );
    // Frozen parameters still get gradients.
    assert_ne!(
        values(&mut s, "grad(sum(apply(m, X) * [[1, 3]]), __linear_W_0)"),
        vec![0.0; 4]
    );
    assert_eq!(s.eval("unfreeze(m)"), "0");
    assert!(s.it.ws.frozen.is_empty());
    s.eval("adam(sum(apply(m, X) * [[1, 3]]), m, 0.1, 0.9, 0.999, 1e-8)");
    assert_ne!(array(&s, "__linear_W_0").to_f32(), before);
}

#[test]
fn lora_students_start_identical_with_a_frozen_base() {
    let mut s = Session::new(None, None);
    s.eval("m = chain(embed(6, 4, 0), residual(linear(4, 4, 1)), causal_attention(4, 2, 2), linear(4, 6, 3))\nstudent = lora(m, 2, 8, 100)");
    // The clone takes ids 4..7 depth first; the adapters then take 8 and 9.
    assert_eq!(
        params(&s, "student"),
        [
            "__embed_E_4",
            "__linear_W_5",
            "__linear_b_5",
            "__lora_A_8",
            "__lora_B_8",
            "__attn_Wq_6",
            "__attn_Wk_6",
            "__attn_Wv_6",
            "__attn_Wo_6",
            "__linear_W_7",
            "__linear_b_7",
            "__lora_A_9",
            "__lora_B_9",
        ]
    );
    assert_eq!(array(&s, "__lora_A_8").to_f32(), draws(100, 8, 0.5));
    assert_eq!(array(&s, "__lora_A_9").to_f32(), draws(101, 8, 0.5));
    assert_eq!(array(&s, "__lora_A_9").shape(), [4, 2]);
    assert_eq!(array(&s, "__lora_B_9").to_f32(), vec![0.0; 12]);
    assert_eq!(array(&s, "__lora_B_9").shape(), [2, 6]);
    for p in params(&s, "student") {
        let adapter = p.starts_with("__lora_");
        assert_eq!(s.it.ws.frozen.contains(&p), !adapter, "{p}");
    }
    let x = "[[0, 1, 2], [5, 4, 3]]";
    assert_eq!(
        values(&mut s, &format!("apply(student, {x})")),
        values(&mut s, &format!("apply(m, {x})"))
    );
    // Fine-tuning moves only the adapters.
    let base = array(&s, "__linear_W_7").to_f32();
    let teacher = array(&s, "__linear_W_3").to_f32();
    s.eval(&format!("Y = [[1, 2, 3], [4, 5, 0]]\ntrain 3 {{ adam(cross_entropy(apply(student, {x}), Y), student, 0.05, 0.9, 0.999, 1e-8); 0 }}"));
    assert_eq!(array(&s, "__linear_W_7").to_f32(), base);
    assert_eq!(array(&s, "__linear_W_3").to_f32(), teacher);
    assert_ne!(array(&s, "__lora_B_9").to_f32(), vec![0.0; 12]);
    assert_ne!(
        values(&mut s, &format!("apply(student, {x})")),
        values(&mut s, &format!("apply(m, {x})"))
    );
    // unfreeze re-enables full fine-tuning.
    s.eval("unfreeze(student)");
    assert!(params(&s, "student")
        .iter()
        .all(|p| !s.it.ws.frozen.contains(p)));
}

#[test]
fn lora_adapters_are_placed_like_their_weights() {
    let mut s = Session::new(None, None);
    s.eval("m = linear(3, 2, 0)\nto_device(m, \"cuda\")\nst = lora(m, 1, 2, 0)");
    assert_eq!(
        array(&s, "__lora_A_2").placement(),
        array(&s, "__linear_W_1").placement()
    );
    assert!(matches!(
        array(&s, "__lora_B_2").placement(),
        Placement::Placed(_)
    ));
}

#[test]
fn perturb_params_adds_seeded_noise_to_a_family() {
    let mut s = Session::new(None, None);
    s.eval("m = chain(embed(4, 2, 0), causal_attention(2, 1, 1), linear(2, 3, 2), swiglu(3, 2, 3), linear(3, 4, 4))");
    let before: Vec<Vec<f32>> = params(&s, "m")
        .iter()
        .map(|p| array(&s, p).to_f32())
        .collect();
    assert_eq!(s.eval("perturb_params(m, \"mlp_only\", 0.5, 40)"), "0");
    // mlp_only: the non-head linear (W, b), then the swiglu weights; not the head.
    let members = [
        "__linear_W_2",
        "__linear_b_2",
        "__swiglu_Wg_3",
        "__swiglu_Wu_3",
        "__swiglu_Wd_3",
    ];
    for (name, old) in params(&s, "m").iter().zip(&before) {
        let now = array(&s, name).to_f32();
        match members.iter().position(|m| m == name) {
            Some(i) => {
                let noise = rng::normal_vec(40 + i as u64, now.len());
                let want: Vec<f32> = old
                    .iter()
                    .zip(noise)
                    .map(|(&v, z)| (v as f64 + 0.5 * z) as f32)
                    .collect();
                assert_eq!(now, want, "{name}");
            }
            None => assert_eq!(&now, old, "{name} unchanged"),
        }
    }
    s.eval("perturb_params(m, \"embed_and_head\", 1, 7)");
    assert_ne!(array(&s, "__linear_W_4").to_f32(), before[10]);
    assert_ne!(array(&s, "__embed_E_0").to_f32(), before[0]);
    s.eval("perturb_params(m, \"attention_only\", 1, 7)");
    assert_ne!(array(&s, "__attn_Wq_1").to_f32(), before[1]);
}

#[test]
fn the_head_is_a_bare_linear_or_the_last_plain_linear_of_a_chain() {
    let mut s = Session::new(None, None);
    s.eval("a = linear(2, 2, 0)\nb = chain(linear(2, 2, 1), chain(linear(2, 2, 2)))\nc = residual(linear(2, 2, 3))");
    let snapshot = |s: &Session| -> Vec<Vec<f32>> {
        [
            "__linear_W_0",
            "__linear_W_1",
            "__linear_W_2",
            "__linear_W_3",
        ]
        .iter()
        .map(|p| array(s, p).to_f32())
        .collect()
    };
    let before = snapshot(&s);
    s.eval("perturb_params(a, \"mlp_only\", 1, 0)\nperturb_params(b, \"mlp_only\", 1, 0)\nperturb_params(c, \"embed_and_head\", 1, 0)");
    let after = snapshot(&s);
    assert_eq!(after[0], before[0], "a bare linear is its own head");
    assert_eq!(
        after[1], before[1],
        "the chain's head is its last direct linear"
    );
    assert_ne!(after[2], before[2], "a nested linear is not the head");
    assert_eq!(after[3], before[3], "a residual has no head");
}

#[test]
fn reinit_redraws_weights_but_not_biases_gains_or_adapters() {
    let mut s = Session::new(None, None);
    s.eval(
        "m = lora(chain(embed(4, 2, 0), layer_norm(2), linear(2, 3, 1), rms_norm(3, 1)), 1, 1, 0)",
    );
    let before: Vec<(String, Vec<f32>)> = params(&s, "m")
        .iter()
        .map(|p| (p.clone(), array(&s, p).to_f32()))
        .collect();
    assert_eq!(s.eval("reinit(m, \"all_layers\", 0.02, 9)"), "0");
    let redrawn = ["__embed_E_4", "__linear_W_6"];
    for (name, old) in &before {
        let now = array(&s, name).to_f32();
        match redrawn.iter().position(|r| r == name) {
            Some(i) => assert_eq!(now, draws(9 + i as u64, now.len(), 0.02), "{name}"),
            None => assert_eq!(&now, old, "{name} kept"),
        }
    }
}

#[test]
fn embed_table_copies_the_first_table() {
    let mut s = Session::new(None, None);
    s.eval("m = chain(linear(2, 2, 0), residual(chain(embed(5, 2, 1))), embed(3, 2, 2))\nT = embed_table(m)");
    assert_eq!(array(&s, "T").shape(), [5, 2]);
    assert_eq!(array(&s, "T").to_f32(), array(&s, "__embed_E_1").to_f32());
    s.eval("T = T * 0");
    assert_ne!(array(&s, "__embed_E_1").to_f32(), vec![0.0; 10]);
}

fn keys(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut k: Vec<String> = st.names().into_iter().cloned().collect();
    k.sort();
    k
}

#[test]
fn checkpoints_use_structural_keys() {
    let dir = temp_dir("models-ckpt");
    let mut s = Session::new(Some(&dir), None);
    let n = s.eval("m = chain(embed(11, 8, 0), residual(chain(rms_norm(8, 1), causal_attention(8, 4, 1))), linear(8, 11, 2))\nsave(m, \"a.safetensors\")");
    assert_eq!(n, "8");
    let mut want = vec![
        "0.embed.E",
        "1.0.rms_norm.g",
        "1.1.attention.Wq",
        "1.1.attention.Wk",
        "1.1.attention.Wv",
        "1.1.attention.Wo",
        "2.linear.W",
        "2.linear.b",
    ];
    want.sort();
    assert_eq!(keys(&dir.join("a.safetensors")), want);
    s.eval("save(linear(2, 3, 0), \"b.safetensors\")");
    assert_eq!(keys(&dir.join("b.safetensors")), ["linear.W", "linear.b"]);
    // A shared parameter is stored once, under its first key.
    s.eval("l = linear(2, 2, 0)\nsave(chain(l, relu_layer(), l), \"c.safetensors\")");
    assert_eq!(
        keys(&dir.join("c.safetensors")),
        ["0.linear.W", "0.linear.b"]
    );
    s.eval("save(lora(linear(3, 3, 0), 1, 1, 0), \"d.safetensors\")");
    assert_eq!(
        keys(&dir.join("d.safetensors")),
        ["lora.A", "lora.B", "lora.W", "lora.b"]
    );
    s.eval("save(chain(layer_norm(2), swiglu(2, 3, 0), moe(2, 2, 1, 3, 0)), \"e.safetensors\")");
    assert_eq!(
        keys(&dir.join("e.safetensors")),
        [
            "0.layer_norm.b",
            "0.layer_norm.g",
            "1.swiglu.Wd",
            "1.swiglu.Wg",
            "1.swiglu.Wu",
            "2.moe.R",
            "2.moe.Wd",
            "2.moe.Wg",
            "2.moe.Wu"
        ]
    );
    // Metadata: the format, and the names of named parameters.
    s.eval("k = linear(2, 2, 0)\n__linear_W_12 = label(__linear_W_12, [\"in\", \"out\"])\nsave(k, \"f.safetensors\")");
    let bytes = std::fs::read(dir.join("f.safetensors")).unwrap();
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let meta = meta.metadata().clone().unwrap();
    assert_eq!(meta.get("format").map(String::as_str), Some("mlpl"));
    assert_eq!(
        meta.get("mlpl.names.linear.W").map(String::as_str),
        Some("in,out")
    );
}

#[test]
fn checkpoints_round_trip_into_another_program() {
    let dir = temp_dir("models-roundtrip");
    let arch = |seed: u64| {
        format!("chain(embed(11, 8, {seed}), residual(chain(rms_norm(8, 1), causal_attention(8, 4, {}))), linear(8, 11, {}))", seed + 1, seed + 2)
    };
    let mut a = Session::new(Some(&dir), None);
    a.eval(&format!(
        "m = {}\nperturb_params(m, \"all_layers\", 0.1, 5)\nsave(m, \"m.safetensors\")",
        arch(0)
    ));
    let ids = "[[1, 2, 3], [4, 5, 6]]";
    let want = values(&mut a, &format!("apply(m, {ids})"));
    let mut b = Session::new(Some(&dir), None);
    b.eval(&format!(
        "x = linear(1, 1, 0)\nm = {}\nfreeze(m)\nto_device(m, \"cpu\")",
        arch(50)
    ));
    assert_ne!(values(&mut b, &format!("apply(m, {ids})")), want);
    assert_eq!(b.eval("load_weights(m, \"m.safetensors\")"), "8");
    assert_eq!(values(&mut b, &format!("apply(m, {ids})")), want);
    // Placement and frozen flags are kept.
    assert!(matches!(
        array(&b, "__linear_W_4").placement(),
        Placement::Placed(_)
    ));
    assert!(b.it.ws.frozen.contains("__linear_W_4"));
    assert!(b.it.ws.tracked.contains("__linear_W_4"));
}

#[test]
fn load_weights_errors_leave_the_model_unchanged() {
    let dir = temp_dir("models-load-errors");
    let mut s = Session::new(Some(&dir), None);
    s.eval("save(chain(linear(2, 3, 0), linear(3, 1, 1)), \"two.safetensors\")\nsave(linear(2, 3, 0), \"one.safetensors\")");
    // Missing key: E0407 naming the key; nothing written.
    s.eval("m = chain(linear(2, 3, 5), linear(3, 1, 6), linear(1, 1, 7))");
    let before = array(&s, "__linear_W_3").to_f32();
    let d = s
        .run("load_weights(m, \"two.safetensors\")")
        .result
        .unwrap_err();
    assert_eq!(d.code, "E0407");
    assert!(d.primary.unwrap().message.contains("`2.linear.W`"));
    assert_eq!(array(&s, "__linear_W_3").to_f32(), before);
    // Shape mismatch: E0217 with both shapes.
    s.eval("w = linear(2, 4, 0)");
    let d = s
        .run("load_weights(w, \"one.safetensors\")")
        .result
        .unwrap_err();
    assert_eq!(d.code, "E0217");
    let t = format!("{} {:?}", d.primary.unwrap().message, d.notes);
    assert!(t.contains("[2, 3]") && t.contains("[2, 4]"), "{t}");
    // Unused tensors: W0401 with the count and the first key.
    let o = s.run("load_weights(chain(linear(2, 3, 0)), \"two.safetensors\")");
    assert_eq!(o.warning_codes(), ["W0401"]);
    assert!(o.warnings[0]
        .primary
        .as_ref()
        .unwrap()
        .message
        .contains("2 tensors"));
    assert!(o.warnings[0]
        .primary
        .as_ref()
        .unwrap()
        .message
        .contains("`1.linear.W`"));
    // Files: path rules, unreadable, malformed.
    assert_eq!(
        s.error_code("load_weights(w, \"missing.safetensors\")"),
        "E0405"
    );
    assert_eq!(
        s.error_code("load_weights(w, \"../x.safetensors\")"),
        "E0404"
    );
    std::fs::write(dir.join("bad.safetensors"), b"not a checkpoint").unwrap();
    assert_eq!(
        s.error_code("load_weights(w, \"bad.safetensors\")"),
        "E0406"
    );
    // A checkpoint cut short: its header names bytes the file lacks.
    s.eval("save(w, \"whole.safetensors\")");
    let whole = std::fs::read(dir.join("whole.safetensors")).unwrap();
    std::fs::write(dir.join("cut.safetensors"), &whole[..whole.len() - 4]).unwrap();
    assert_eq!(
        s.error_code("load_weights(w, \"cut.safetensors\")"),
        "E0406"
    );
    assert_eq!(s.error_code("save(w, \"w.csv\")"), "E0401");
    let mut none = Session::new(None, None);
    assert_eq!(
        none.error_code("load_weights(linear(1, 1, 0), \"x.safetensors\")"),
        "E0403"
    );
    assert_eq!(
        none.error_code("save(linear(1, 1, 0), \"x.safetensors\")"),
        "E0403"
    );
}

/// A safetensors file with the given tensors (dtype, shape, raw bytes).
fn write_checkpoint(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(k, d, s, b)| {
            (
                k.to_string(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, &None).unwrap()).unwrap();
}

#[test]
fn load_weights_converts_float_types() {
    let dir = temp_dir("models-dtypes");
    let f64s: Vec<u8> = [1.5f64, -2.0, 0.25, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let bf16: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let f16: Vec<u8> = [0x3C00u16, 0xC000]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect(); // 1, -2
    write_checkpoint(
        &dir.join("w.safetensors"),
        &[
            ("linear.W", Dtype::F64, vec![2, 2], f64s.clone()),
            ("linear.b", Dtype::BF16, vec![1, 2], bf16.clone()),
        ],
    );
    let mut s = Session::new(Some(&dir), None);
    assert_eq!(
        s.eval("m = linear(2, 2, 0)\nload_weights(m, \"w.safetensors\")"),
        "2"
    );
    assert_eq!(array(&s, "__linear_W_0").to_f32(), [1.5, -2.0, 0.25, 4.0]);
    assert_eq!(array(&s, "__linear_b_0").to_f32(), [1.5, -2.0]);
    write_checkpoint(
        &dir.join("h.safetensors"),
        &[
            ("linear.W", Dtype::F64, vec![2, 2], f64s),
            ("linear.b", Dtype::F16, vec![1, 2], f16),
        ],
    );
    s.eval("load_weights(m, \"h.safetensors\")");
    assert_eq!(array(&s, "__linear_b_0").to_f32(), [1.0, -2.0]);
    write_checkpoint(
        &dir.join("i.safetensors"),
        &[
            ("linear.W", Dtype::I32, vec![2, 2], vec![0; 16]),
            ("linear.b", Dtype::BF16, vec![1, 2], bf16),
        ],
    );
    assert_eq!(s.error_code("load_weights(m, \"i.safetensors\")"), "E0406");
}

#[test]
fn to_device_places_every_parameter() {
    let mut s = Session::new(None, None);
    let o = s.run("m = chain(linear(2, 3, 0), layer_norm(3))\nto_device(m, \"cuda\")");
    assert_eq!(o.shown(), "0");
    for p in params(&s, "m") {
        assert!(
            matches!(array(&s, &p).placement(), Placement::Placed(_)),
            "{p}"
        );
    }
    // Placement is shared by every model containing the layers; "cpu" moves back.
    s.eval("to_device(m, \"cpu\")");
    assert_eq!(
        s.eval("shape(apply(m, to_device([[1, 2]], \"cpu\")))"),
        "1 3"
    );
    assert_eq!(s.error_code("to_device(m, \"tpu\")"), "E0502");
}

#[test]
fn estimate_train_reproduces_the_reference_example() {
    let mut s = Session::new(None, None);
    assert_eq!(
        s.eval("m = chain(embed(32, 8, 0), causal_attention(8, 2, 1), linear(8, 32, 2))\nestimate_train(m, 100, 4, 8)"),
        "800 27136 3200 12288000 0.00024576"
    );
    // dtype_bytes, throughput and frozen parameters.
    assert_eq!(
        s.eval("estimate_train(m, 100, 4, 8, 2)"),
        "800 13568 1600 12288000 0.00024576"
    );
    s.eval("mlpl_device_throughput_gflops = \"100\"");
    assert_eq!(
        s.eval("estimate_train(m, 100, 4, 8)"),
        "800 27136 3200 12288000 0.00012288"
    );
    s.eval("mlpl_device_throughput_gflops_cpu = \"25\"");
    assert_eq!(
        s.eval("estimate_train(m, 100, 4, 8)"),
        "800 27136 3200 12288000 0.00049152"
    );
    s.eval("freeze(m)");
    // Tr = 0: vram = P·dt + activations = 3200 + 14336.
    assert_eq!(
        s.eval("estimate_train(m, 100, 4, 8)"),
        "800 17536 3200 12288000 0.00049152"
    );
}

#[test]
fn estimate_train_counts_every_layer() {
    let mut s = Session::new(None, None);
    // B = 2, S = 3, R = 6, dt = 4, N = 1.
    let cases: &[(&str, f64, f64, f64)] = &[
        // (model, params, activations per token, forward flops); a LoRA
        // student's trainable parameters are its adapters only (8 + 10).
        ("linear(4, 5, 0)", 25.0, 5.0, 2.0 * 4.0 * 5.0 * 6.0),
        (
            "lora(linear(4, 5, 0), 2, 1, 0)",
            25.0 + 8.0 + 10.0,
            7.0,
            2.0 * 20.0 * 6.0 + 2.0 * 9.0 * 2.0 * 6.0,
        ),
        (
            "chain(linear(3, 4, 0), rms_norm(4, 1), tanh_layer(), dropout(0.1, 0))",
            16.0 + 4.0,
            4.0 + 5.0 + 4.0 + 8.0,
            2.0 * 12.0 * 6.0,
        ),
        (
            "chain(embed(10, 4, 0), layer_norm(4), rope(4, 10), softmax_layer())",
            40.0 + 8.0,
            4.0 + 6.0 + 4.0 + 4.0,
            0.0,
        ),
        ("swiglu(4, 6, 0)", 72.0, 4.0 * 6.0 + 4.0, 6.0 * 24.0 * 6.0),
        (
            "moe(4, 3, 2, 5, 0)",
            12.0 + 180.0,
            6.0 + 2.0 * 24.0 + 4.0,
            2.0 * 12.0 * 6.0 + 2.0 * 6.0 * 20.0 * 6.0,
        ),
        (
            "chain(embed(10, 4, 0), residual(chain(rms_norm(4), attention(4, 2, 0, 1))))",
            40.0 + 16.0 + 8.0 + 8.0 + 16.0,
            4.0 + (5.0 + 12.0 + 4.0 + 12.0) + 4.0,
            2.0 * 6.0 * 4.0 * (8.0 + 4.0) + 4.0 * 2.0 * 9.0 * 4.0,
        ),
        (
            "chain(relu_layer(), linear(2, 2, 0))",
            6.0,
            0.0 + 2.0,
            2.0 * 4.0 * 6.0,
        ),
    ];
    for (model, p, a, f) in cases {
        let got = values(&mut s, &format!("estimate_train({model}, 1, 2, 3)"));
        let act = 4.0 * 2.0 * 3.0 * a;
        let tr = if model.starts_with("lora") { 18.0 } else { *p };
        let want = [
            *p,
            4.0 * (p + 3.0 * tr) + act,
            4.0 * p,
            3.0 * f,
            3.0 * f / 50e9,
        ];
        for (g, w) in got.iter().zip(want) {
            assert_eq!(*g, w as f32, "{model}: got {got:?}, want {want:?}");
        }
    }
}
