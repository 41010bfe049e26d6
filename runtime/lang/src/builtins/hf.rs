//! Hugging Face checkpoints (LANGUAGE §11.12, docs/models.md): `hf_model` and
//! `hf_save`. The mapping itself lives in `crate::nn::hf`.

use super::site::CallSite;
use mlpl_diag::code;

use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::data::files;
use crate::eval::Call;
use crate::nn::hf::HfError;
use crate::value::Value;
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "hf_model",
        params: &[req("dir", Str)],
        summary: "load a Hugging Face checkpoint as a model",
        doc: "`hf_model(dir)` reads the `save_pretrained` folder dir (inside the data directory): `config.json` and `model.safetensors`, or the shards named by `model.safetensors.index.json`. It builds the family's model (Llama, Qwen 3, GPT-2 or GPT-OSS: `model_type` llama, qwen3, gpt2, gpt_oss) out of `embed`, `pos_embed`, `residual` blocks of norms, `causal_attention` (GPT-OSS: with sinks, sliding windows on its sliding layers and `yarn_rope`) and `swiglu`, `moe` (GPT-OSS) or `linear`/`gelu_layer`, a final norm and a `linear` or tied `unembed` head, and binds every parameter from its tensor, mapping the family's names and layouts (`[out, in]` weights transposed, GPT-2's fused `c_attn` split, GPT-OSS's interleaved `gate_up_proj` split; bf16, f16 and f64 converted to f32; docs/models.md). The model maps ids `[T]` or `[B, T]` to logits `[…, vocab]`. E0406 for an unsupported configuration, E0407 listing every missing, mis-shaped and unexpected tensor, E0403–E0405 for paths.",
        example: "e = embed(8, 4, 0)\nblock = residual(chain(rms_norm(4, 1, 1e-5), causal_attention(4, 2, 1, 1, rope(2, 10000))))\nmlp = residual(chain(rms_norm(4, 1, 1e-5), swiglu(4, 8, 2)))\nhf_save(chain(e, block, mlp, rms_norm(4, 1, 1e-5), unembed(e)), \"tiny\")\nm = hf_model(\"tiny\")\napply(m, [1, 2, 3])",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.9",
        run: hf_model,
        shape: Some(super::hf_shapes::hf_model),
    },
    Builtin {
        name: "hf_save",
        params: &[req("model", Model), req("dir", Str), opt("dtype", Str)],
        summary: "save a model as a Hugging Face checkpoint",
        doc: "`hf_save(model, dir [, dtype])` writes a model of one of `hf_model`'s families to the folder dir (inside the data directory) as `config.json` and `model.safetensors` in the family's own names and layouts, so `transformers`' `from_pretrained` loads it. dtype is \"float32\" (the default, the parameters exactly), \"bfloat16\" or \"float16\" (rounded to nearest even; written as the config's dtype too), E0401 otherwise. Returns the number of tensors written. E0406 when the model is not such a tree (the message says where it departs).",
        example: "e = embed(8, 4, 0)\nblock = residual(chain(rms_norm(4, 1, 1e-5), causal_attention(4, 2, 1, 1, rope(2, 10000))))\nmlp = residual(chain(rms_norm(4, 1, 1e-5), swiglu(4, 8, 2)))\nhf_save(chain(e, block, mlp, rms_norm(4, 1, 1e-5), unembed(e)), \"tiny\")",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.9",
        run: hf_save,
        shape: Some(super::hf_shapes::hf_save),
    },
];

/// The diagnostic of an [`HfError`] at argument `i` (the folder).
fn hf_error(c: &Call, i: usize, e: HfError) -> Diagnostic {
    match e {
        HfError::Io(m) => c.error_of(i, code::E0405, m),
        HfError::Malformed(m) => c
            .error_of(i, code::E0406, m)
            .note("docs/models.md lists what each family supports"),
        HfError::NotAFamily(m) => c
            .error_of(
                0,
                code::E0406,
                format!("not a checkpoint of a supported family: {m}"),
            )
            .help("`hf_save` writes models shaped as `hf_model` builds them (docs/models.md)"),
        HfError::Mismatch {
            missing,
            misshaped,
            unexpected,
        } => {
            let mut d = c.error_of(
                i,
                code::E0407,
                format!(
                    "{} missing, {} mis-shaped, {} unexpected tensor(s)",
                    missing.len(),
                    misshaped.len(),
                    unexpected.len()
                ),
            );
            for (what, list) in [
                ("missing", &missing),
                ("mis-shaped", &misshaped),
                ("unexpected", &unexpected),
            ] {
                if !list.is_empty() {
                    d = d.note(format!("{what}: {}", list.join(", ")));
                }
            }
            d.help("the checkpoint must be the `save_pretrained` output of the configuration in its config.json")
        }
    }
}

fn hf_model(c: &mut Call) -> Result<Value, Diagnostic> {
    let rel = c.string(0)?.to_string();
    let dir = files::resolve(c.it.ws.data_dir.as_deref(), &rel)
        .map_err(|e| super::site::path_error(c, 0, &e))?;
    let layer = crate::nn::hf::load(c.it, &dir).map_err(|e| hf_error(c, 0, e))?;
    super::site::check_model_extent(c, &layer)?;
    Ok(super::models::model_value(layer))
}

/// `hf_save`'s dtype argument (2): float32, bfloat16 or float16 (E0401).
pub fn save_dtype(c: &impl CallSite, name: &str) -> Result<crate::nn::hf::SaveDtype, Diagnostic> {
    crate::nn::hf::SaveDtype::parse(name).ok_or_else(|| {
        c.invalid(2, format!("unknown dtype `{name}`"))
            .help("write \"float32\", \"bfloat16\" or \"float16\"")
    })
}

fn hf_save(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let rel = c.string(1)?.to_string();
    let dir = files::resolve_for_write(c.it.ws.data_dir.as_deref(), &rel)
        .map_err(|e| super::site::path_error(c, 1, &e))?;
    let dtype = if c.has(2) {
        let name = c.string(2)?.to_string();
        save_dtype(c, &name)?
    } else {
        crate::nn::hf::SaveDtype::F32
    };
    let n = crate::nn::hf::save(c.it, &m, &dir, dtype).map_err(|e| hf_error(c, 1, e))?;
    Ok(Value::exact(n as f64))
}
