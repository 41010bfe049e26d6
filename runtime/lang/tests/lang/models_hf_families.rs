//! Hugging Face checkpoints against `transformers`: the tiny random checkpoints
//! of `examples/hf/<family>/` and their `reference.json` (made by
//! `scripts/hf-fixtures.sh`; no Python is needed here). Per family: logits and
//! loss within 1e-4 relative, gradients within 1e-4 of their largest entry,
//! one AdamW step (lr 1e-3, weight decay 0.01) within 1e-4 of the step's size (plus float32 rounding of the parameter),
//! greedy generation token for token, and `hf_save` → `hf_model` bit for bit.

use std::path::{Path, PathBuf};

use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::nn::hf::{mapping, to_param};
use mlpl_lang::value::Value;
use serde_json::Value as Json;

use super::common::{run_value, temp_dir};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hf")
}

struct Family {
    it: Interp,
    reference: Json,
    bindings: Vec<mapping::Binding>,
}

fn numbers(v: &Json) -> Vec<f64> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn list(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
    format!("[{}]", items.join(", "))
}

fn values(v: Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.to_f64(),
        other => panic!("not an array: {}", other.kind_name()),
    }
}

fn load_in(data: &Path, name: &str) -> Family {
    let mut ws = Workspace::new();
    ws.data_dir = Some(data.to_path_buf());
    let mut it = Interp::new(ws);
    run_value(&mut it, &format!("m = hf_model(\"{name}\")\n0"));
    let Some(Value::Model(m)) = it.ws.get("m").cloned() else {
        panic!("m is not a model")
    };
    let (_, bindings) = mapping::plan(&m.0).expect("a family tree");
    let text = std::fs::read_to_string(examples().join(name).join("reference.json")).unwrap();
    Family {
        it,
        reference: serde_json::from_str(&text).unwrap(),
        bindings,
    }
}

fn load(name: &str) -> Family {
    load_in(&examples(), name)
}

impl Family {
    fn x(&self) -> String {
        list(&numbers(&self.reference["x"]))
    }
    fn y(&self) -> String {
        list(&numbers(&self.reference["y"]))
    }
    fn eval(&mut self, src: &str) -> Vec<f64> {
        values(run_value(&mut self.it, src))
    }
    /// The reference tensor `hf` (a name of `reference[key]`) in the layout of
    /// each parameter bound to it.
    fn reference_params(&self, key: &str) -> Vec<(mapping::Binding, Vec<f64>)> {
        let table = self.reference[key].as_object().expect("a table");
        let mut out = Vec::new();
        for (hf, v) in table {
            let values = numbers(v);
            let bound: Vec<_> = self.bindings.iter().filter(|b| &b.hf == hf).collect();
            assert!(!bound.is_empty(), "no parameter is bound to `{hf}`");
            for b in bound {
                out.push((b.clone(), to_param(b, &b.hf_shape, &values)));
            }
        }
        out
    }
}

/// max |a − b| / max |b|.
fn relative(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs()));
    let diff = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    diff / scale
}

fn logits_and_loss(name: &str) {
    let mut f = load(name);
    let (x, y) = (f.x(), f.y());
    let logits = f.eval(&format!("apply(m, {x})"));
    let want = numbers(&f.reference["logits"]);
    let r = relative(&logits, &want);
    assert!(r <= 1e-4, "{name}: logits differ by {r:e} relative");
    let loss = f.eval(&format!("cross_entropy(apply(m, {x}), {y})"))[0];
    let want = f.reference["loss"].as_f64().unwrap();
    assert!(
        ((loss - want) / want).abs() <= 1e-4,
        "{name}: loss {loss} against {want}"
    );
}

fn gradients(name: &str) {
    let mut f = load(name);
    let (x, y) = (f.x(), f.y());
    let params = f.reference_params("grads");
    assert!(
        params.len() >= 4,
        "{name}: too few gradients in the reference"
    );
    for (b, want) in params {
        let got = f.eval(&format!(
            "grad(cross_entropy(apply(m, {x}), {y}), {})",
            b.param
        ));
        let r = relative(&got, &want);
        assert!(
            r <= 1e-4,
            "{name}: gradient of `{}` ({}) differs by {r:e}",
            b.hf,
            b.param
        );
    }
}

/// One `adamw` step with the decay-group argument `group` (empty: the
/// default) against the reference's parameters `reference` after torch's step.
fn adamw_step(name: &str, reference: &str, group: &str) {
    let mut f = load(name);
    let (x, y) = (f.x(), f.y());
    let after = f.reference_params(reference);
    let before: Vec<Vec<f64>> = after.iter().map(|(b, _)| f.eval(&b.param)).collect();
    f.eval(&format!(
        "adamw(cross_entropy(apply(m, {x}), {y}), m, 0.001, 0.9, 0.999, 1e-8, 0.01{group})\n0"
    ));
    let lr = 1e-3;
    for ((b, want), old) in after.iter().zip(before) {
        let got = f.eval(&b.param);
        for i in 0..got.len() {
            // 1e-4 of the step (lr), plus the rounding of a float32 parameter.
            let ulp = (want[i].abs() as f32).max(f32::MIN_POSITIVE);
            let ulp = (f32::from_bits(ulp.to_bits() + 1) - ulp) as f64;
            let tol = 1e-4 * lr + 2.0 * ulp;
            assert!(
                (got[i] - want[i]).abs() <= tol,
                "{name} ({reference}): `{}`[{i}] is {} after the step, transformers {} (before {})",
                b.hf,
                got[i],
                want[i],
                old[i]
            );
        }
        assert!(got != old, "{name}: `{}` did not move", b.hf);
    }
}

fn greedy(name: &str) {
    let mut f = load(name);
    let x = f.x();
    let want = numbers(&f.reference["greedy"]);
    let got = f.eval(&format!("generate(m, {x}, {})", want.len()));
    assert_eq!(got, want, "{name}: greedy tokens");
}

fn save_round_trip(name: &str) {
    let data = temp_dir("hf");
    let src = examples().join(name);
    std::fs::create_dir_all(data.join("in")).unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(src.join(file), data.join("in").join(file)).unwrap();
    }
    let mut ws = Workspace::new();
    ws.data_dir = Some(data.clone());
    let mut it = Interp::new(ws);
    let x = list(&numbers(&load(name).reference["x"]));
    let first = values(run_value(
        &mut it,
        &format!("m = hf_model(\"in\")\nhf_save(m, \"out\")\napply(m, {x})"),
    ));
    let again = values(run_value(
        &mut it,
        &format!("apply(hf_model(\"out\"), {x})"),
    ));
    assert_eq!(first, again, "{name}: logits after hf_save and hf_model");
    let _ = std::fs::remove_dir_all(&data);
}

macro_rules! family {
    ($module:ident, $name:literal) => {
        mod $module {
            #[test]
            fn logits_and_loss_match_transformers() {
                super::logits_and_loss($name);
            }
            #[test]
            fn gradients_match_transformers() {
                super::gradients($name);
            }
            #[test]
            fn one_adamw_step_matches_torch() {
                super::adamw_step($name, "adamw_matrices", "");
            }
            #[test]
            fn one_adamw_step_decaying_everything_matches_torch_default() {
                super::adamw_step($name, "adamw_all", ", \"all\"");
            }
            #[test]
            fn greedy_generation_matches_generate() {
                super::greedy($name);
            }
            #[test]
            fn hf_save_then_hf_model_is_the_same_model() {
                super::save_round_trip($name);
            }
        }
    };
}

family!(llama, "llama");
family!(qwen3, "qwen3");
family!(gpt2, "gpt2");
family!(gpt_oss, "gpt_oss");
