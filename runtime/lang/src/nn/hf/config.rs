//! A Hugging Face `config.json`, read for the families MLPL builds (docs/models.md):
//! the sizes, epsilons and rotary settings, in both the older layout
//! (`rope_theta`, `rope_scaling`) and the newer one (`rope_parameters`).

use serde_json::{json, Map, Value as Json};

use crate::nn::layers::RopeScaling;

/// The architectures `hf_model` builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `LlamaForCausalLM` (`model_type` "llama").
    Llama,
    /// `Qwen3ForCausalLM` (`model_type` "qwen3").
    Qwen3,
    /// `GPT2LMHeadModel` (`model_type` "gpt2").
    Gpt2,
    /// `GptOssForCausalLM` (`model_type` "gpt_oss").
    GptOss,
}

impl Family {
    /// The `model_type` of `config.json`.
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen3 => "qwen3",
            Family::Gpt2 => "gpt2",
            Family::GptOss => "gpt_oss",
        }
    }

    /// The class `transformers` loads the checkpoint with.
    pub fn architecture(self) -> &'static str {
        match self {
            Family::Llama => "LlamaForCausalLM",
            Family::Qwen3 => "Qwen3ForCausalLM",
            Family::Gpt2 => "GPT2LMHeadModel",
            Family::GptOss => "GptOssForCausalLM",
        }
    }
}

/// What MLPL needs of a checkpoint's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The architecture.
    pub family: Family,
    /// Token ids.
    pub vocab: usize,
    /// Model width.
    pub d: usize,
    /// Decoder blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head width.
    pub head_dim: usize,
    /// Hidden width of the feed-forward block.
    pub hidden: usize,
    /// Norm epsilon.
    pub eps: f64,
    /// Rotary base (Llama, Qwen).
    pub rope_theta: f64,
    /// Rotary rescaling (Llama 3.1).
    pub rope_scaling: RopeScaling,
    /// Positions of the learned position table (GPT-2).
    pub positions: usize,
    /// Whether the output head is the embedding table.
    pub tied: bool,
    /// Whether the attention projections have biases.
    pub attention_bias: bool,
    /// GPT-OSS's mixture of experts and attention (None for the other families).
    pub oss: Option<Oss>,
}

/// What GPT-OSS adds to the Llama configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Oss {
    /// `num_local_experts`.
    pub experts: usize,
    /// `num_experts_per_tok`.
    pub top_k: usize,
    /// `swiglu_alpha`.
    pub alpha: f64,
    /// `swiglu_limit`.
    pub limit: f64,
    /// `sliding_window`, when some layer slides.
    pub window: Option<usize>,
    /// Per layer, whether it is a `sliding_attention` layer (`layer_types`).
    pub sliding: Vec<bool>,
}

fn size(c: &Map<String, Json>, key: &str) -> Result<usize, String> {
    c.get(key)
        .and_then(Json::as_u64)
        .map(|v| v as usize)
        .ok_or_else(|| format!("config.json has no integer `{key}`"))
}

fn size_or(c: &Map<String, Json>, key: &str, default: usize) -> Result<usize, String> {
    match c.get(key) {
        None | Some(Json::Null) => Ok(default),
        Some(_) => size(c, key),
    }
}

fn number_or(c: &Map<String, Json>, key: &str, default: f64) -> Result<f64, String> {
    match c.get(key) {
        None | Some(Json::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| format!("config.json's `{key}` is not a number")),
    }
}

fn flag_or(c: &Map<String, Json>, key: &str, default: bool) -> Result<bool, String> {
    match c.get(key) {
        None | Some(Json::Null) => Ok(default),
        Some(v) => v
            .as_bool()
            .ok_or_else(|| format!("config.json's `{key}` is not true or false")),
    }
}

/// The rotary base and scaling, from `rope_parameters` or `rope_theta` and
/// `rope_scaling`.
fn rope(c: &Map<String, Json>) -> Result<(f64, RopeScaling), String> {
    let empty = Map::new();
    let params = c.get("rope_parameters").and_then(Json::as_object);
    let scaling = params
        .or_else(|| c.get("rope_scaling").and_then(Json::as_object))
        .unwrap_or(&empty);
    let theta = match params {
        Some(p) if p.contains_key("rope_theta") => number_or(p, "rope_theta", 10000.0)?,
        _ => number_or(c, "rope_theta", 10000.0)?,
    };
    let kind = scaling
        .get("rope_type")
        .or_else(|| scaling.get("type"))
        .and_then(Json::as_str)
        .unwrap_or("default");
    let s = match kind {
        "default" => RopeScaling::Plain,
        "yarn" => {
            for key in ["mscale", "mscale_all_dim"] {
                if scaling.get(key).is_some_and(|v| !v.is_null()) {
                    return Err(format!("YaRN's `{key}` is not supported yet"));
                }
            }
            let original = number_or(scaling, "original_max_position_embeddings", 0.0)?;
            if original <= 0.0 {
                return Err("YaRN needs `original_max_position_embeddings`".to_string());
            }
            let factor = match scaling.get("factor") {
                None | Some(Json::Null) => number_or(c, "max_position_embeddings", 0.0)? / original,
                Some(_) => number_or(scaling, "factor", 1.0)?,
            };
            let fast = number_or(scaling, "beta_fast", 32.0)?;
            let slow = number_or(scaling, "beta_slow", 1.0)?;
            let truncate = flag_or(scaling, "truncate", true)?;
            let mut y = RopeScaling::yarn(factor, original, fast, slow, truncate);
            if let (RopeScaling::Yarn { attention, .. }, Some(v)) = (
                &mut y,
                scaling.get("attention_factor").filter(|v| !v.is_null()),
            ) {
                *attention = v
                    .as_f64()
                    .ok_or("YaRN's `attention_factor` is not a number")?;
            }
            y
        }
        "llama3" => RopeScaling::Llama3 {
            factor: number_or(scaling, "factor", 8.0)?,
            low: number_or(scaling, "low_freq_factor", 1.0)?,
            high: number_or(scaling, "high_freq_factor", 4.0)?,
            original: number_or(scaling, "original_max_position_embeddings", 8192.0)?,
        },
        other => {
            return Err(format!(
                "rope type `{other}` is not supported yet (default, llama3 and yarn are)"
            ))
        }
    };
    Ok((theta, s))
}

/// GPT-OSS's experts and attention pattern, `layer_types` defaulting as
/// `GptOssConfig` does (sliding, full, sliding, …).
fn oss(c: &Map<String, Json>, layers: usize) -> Result<Oss, String> {
    let sliding: Vec<bool> = match c.get("layer_types") {
        None | Some(Json::Null) => (0..layers).map(|i| (i + 1) % 2 == 1).collect(),
        Some(Json::Array(v)) => v
            .iter()
            .map(|t| match t.as_str() {
                Some("sliding_attention") => Ok(true),
                Some("full_attention") => Ok(false),
                _ => Err(format!(
                    "layer type {t} is not sliding_attention or full_attention"
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("config.json's `layer_types` is not a list".to_string()),
    };
    if sliding.len() != layers {
        return Err(format!(
            "`layer_types` has {} entries for {layers} layers",
            sliding.len()
        ));
    }
    let window = match c.get("sliding_window") {
        None | Some(Json::Null) => None,
        Some(_) => Some(size(c, "sliding_window")?).filter(|w| *w > 0),
    };
    if window.is_none() && sliding.contains(&true) {
        return Err("sliding layers need a `sliding_window` ≥ 1".to_string());
    }
    let experts = size(c, "num_local_experts")?;
    let top_k = size(c, "num_experts_per_tok")?;
    if experts == 0 || top_k == 0 || top_k > experts {
        return Err(format!(
            "num_experts_per_tok = {top_k} is outside 1..={experts} (num_local_experts)"
        ));
    }
    let alpha = number_or(c, "swiglu_alpha", 1.702)?;
    let limit = number_or(c, "swiglu_limit", 7.0)?;
    if !(alpha > 0.0 && limit > 0.0 && alpha.is_finite() && limit.is_finite()) {
        return Err("swiglu_alpha and swiglu_limit must be finite numbers > 0".to_string());
    }
    Ok(Oss {
        experts,
        top_k,
        alpha,
        limit,
        window,
        sliding,
    })
}

/// The `rope_parameters` of a YaRN scaling.
fn yarn_json(theta: f64, s: RopeScaling) -> Json {
    let RopeScaling::Yarn {
        factor,
        original,
        beta_fast,
        beta_slow,
        truncate,
        attention,
    } = s
    else {
        return json!({ "rope_theta": theta, "rope_type": "default" });
    };
    let mut r = json!({
        "rope_theta": theta,
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": whole(original),
        "beta_fast": beta_fast,
        "beta_slow": beta_slow,
        "truncate": truncate,
    });
    if RopeScaling::yarn(factor, original, beta_fast, beta_slow, truncate) != s {
        r["attention_factor"] = json!(attention);
    }
    r
}

/// A number written as an integer when it is one (`transformers` wants
/// integer sizes).
fn whole(v: f64) -> Json {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

impl Config {
    /// Reads the text of a `config.json`.
    pub fn parse(text: &str) -> Result<Config, String> {
        let v: Json = serde_json::from_str(text).map_err(|e| format!("config.json: {e}"))?;
        let c = v
            .as_object()
            .ok_or_else(|| "config.json is not an object".to_string())?;
        let model_type = c.get("model_type").and_then(Json::as_str).unwrap_or("");
        let family = match model_type {
            "llama" => Family::Llama,
            "qwen3" => Family::Qwen3,
            "gpt2" => Family::Gpt2,
            "gpt_oss" => Family::GptOss,
            other => {
                return Err(format!(
                    "model_type `{other}` is not supported (llama, qwen3, gpt2 and gpt_oss are; see docs/models.md)"
                ))
            }
        };
        if family == Family::Gpt2 {
            let d = size(c, "n_embd")?;
            let heads = size(c, "n_head")?;
            let act = c
                .get("activation_function")
                .and_then(Json::as_str)
                .unwrap_or("gelu_new");
            if !matches!(act, "gelu_new" | "gelu_pytorch_tanh") {
                return Err(format!(
                    "GPT-2 activation `{act}` is not supported yet (gelu_new, the tanh form, is)"
                ));
            }
            if heads == 0 || d % heads != 0 {
                return Err(format!("n_head = {heads} does not divide n_embd = {d}"));
            }
            return Ok(Config {
                family,
                vocab: size(c, "vocab_size")?,
                d,
                layers: size(c, "n_layer")?,
                heads,
                kv_heads: heads,
                head_dim: d / heads,
                hidden: size_or(c, "n_inner", 4 * d)?,
                eps: number_or(c, "layer_norm_epsilon", 1e-5)?,
                rope_theta: 0.0,
                rope_scaling: RopeScaling::Plain,
                positions: size(c, "n_positions")?,
                tied: flag_or(c, "tie_word_embeddings", true)?,
                attention_bias: true,
                oss: None,
            });
        }
        let d = size(c, "hidden_size")?;
        let heads = size(c, "num_attention_heads")?;
        if heads == 0 {
            return Err("num_attention_heads is 0".to_string());
        }
        let act = c.get("hidden_act").and_then(Json::as_str).unwrap_or("silu");
        if act != "silu" && family != Family::GptOss {
            return Err(format!("hidden_act `{act}` is not supported (silu is)"));
        }
        if flag_or(c, "mlp_bias", false)? {
            return Err("mlp_bias = true is not supported yet".to_string());
        }
        if family == Family::Qwen3 && flag_or(c, "use_sliding_window", false)? {
            return Err("use_sliding_window = true is not supported yet".to_string());
        }
        let (rope_theta, rope_scaling) = rope(c)?;
        let layers = size(c, "num_hidden_layers")?;
        let oss = if family == Family::GptOss {
            Some(oss(c, layers)?)
        } else {
            None
        };
        let default_hd = if d % heads == 0 { d / heads } else { 0 };
        let head_dim = size_or(c, "head_dim", default_hd)?;
        let kv_heads = size_or(c, "num_key_value_heads", heads)?;
        if head_dim == 0 || head_dim % 2 != 0 {
            return Err(format!("head_dim = {head_dim} is not an even size ≥ 2"));
        }
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(format!(
                "num_key_value_heads = {kv_heads} does not divide num_attention_heads = {heads}"
            ));
        }
        Ok(Config {
            family,
            vocab: size(c, "vocab_size")?,
            d,
            layers,
            heads,
            kv_heads,
            head_dim,
            hidden: size(c, "intermediate_size")?,
            eps: number_or(c, "rms_norm_eps", 1e-6)?,
            rope_theta,
            rope_scaling,
            positions: size_or(c, "max_position_embeddings", 2048)?,
            tied: flag_or(c, "tie_word_embeddings", false)?,
            attention_bias: flag_or(c, "attention_bias", family == Family::GptOss)?,
            oss,
        })
    }

    /// The `config.json` that `transformers` loads this configuration from.
    pub fn to_json(&self) -> Json {
        let f = self.family;
        let mut c = match f {
            Family::Gpt2 => json!({
                "n_embd": self.d,
                "n_head": self.heads,
                "n_layer": self.layers,
                "n_inner": self.hidden,
                "n_positions": self.positions,
                "layer_norm_epsilon": self.eps,
                "activation_function": "gelu_new",
                "resid_pdrop": 0.0,
                "embd_pdrop": 0.0,
                "attn_pdrop": 0.0,
            }),
            Family::Llama | Family::Qwen3 | Family::GptOss => {
                let mut rope = json!({ "rope_theta": self.rope_theta, "rope_type": "default" });
                if let RopeScaling::Llama3 {
                    factor,
                    low,
                    high,
                    original,
                } = self.rope_scaling
                {
                    rope = json!({
                        "rope_theta": self.rope_theta,
                        "rope_type": "llama3",
                        "factor": factor,
                        "low_freq_factor": low,
                        "high_freq_factor": high,
                        "original_max_position_embeddings": whole(original),
                    });
                }
                if matches!(self.rope_scaling, RopeScaling::Yarn { .. }) {
                    rope = yarn_json(self.rope_theta, self.rope_scaling);
                }
                let mut c = json!({
                    "hidden_size": self.d,
                    "num_attention_heads": self.heads,
                    "num_key_value_heads": self.kv_heads,
                    "head_dim": self.head_dim,
                    "num_hidden_layers": self.layers,
                    "intermediate_size": self.hidden,
                    "rms_norm_eps": self.eps,
                    "hidden_act": "silu",
                    "max_position_embeddings": self.positions,
                    "attention_bias": self.attention_bias,
                    "rope_theta": self.rope_theta,
                    "rope_scaling": if self.rope_scaling == RopeScaling::Plain { Json::Null } else { rope.clone() },
                    "rope_parameters": rope,
                });
                if let Some(o) = &self.oss {
                    let types: Vec<&str> = o
                        .sliding
                        .iter()
                        .map(|&s| {
                            if s {
                                "sliding_attention"
                            } else {
                                "full_attention"
                            }
                        })
                        .collect();
                    let m = c.as_object_mut().expect("an object");
                    m.remove("rope_scaling");
                    m.insert(
                        "rope_parameters".into(),
                        yarn_json(self.rope_theta, self.rope_scaling),
                    );
                    m.insert("num_local_experts".into(), json!(o.experts));
                    m.insert("num_experts_per_tok".into(), json!(o.top_k));
                    m.insert("swiglu_alpha".into(), json!(o.alpha));
                    m.insert("swiglu_limit".into(), json!(o.limit));
                    m.insert("sliding_window".into(), json!(o.window));
                    m.insert("layer_types".into(), json!(types));
                }
                c
            }
        };
        let o = c.as_object_mut().expect("an object");
        o.insert("model_type".into(), json!(f.model_type()));
        o.insert("architectures".into(), json!([f.architecture()]));
        o.insert("vocab_size".into(), json!(self.vocab));
        o.insert("tie_word_embeddings".into(), json!(self.tied));
        o.insert("torch_dtype".into(), json!("float32"));
        c
    }
}
