//! What `estimate_hypothetical`'s first argument names (docs/estimates.md,
//! "Hypothetical models"): a table name (`"llama-3-8b"`), a description that
//! starts from a family or a table name and sets sizes
//! (`"llama(vocab = 128256, d = 4096, layers = 32, ff = 14336, heads = 32, kv_heads = 8)"`,
//! `"qwen3-8b(layers = 12)"`), or the path of a Hugging Face `config.json` (or
//! of the folder holding one) inside the data directory.

use super::hypothetical::{self, Architecture, FAMILIES};

/// What the text names.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec {
    /// A table entry or a description.
    Arch(Architecture),
    /// A `config.json` (or a folder with one), relative to the data directory.
    Config(String),
}

/// Why a text names no architecture (E0105).
#[derive(Clone, Debug, PartialEq)]
pub struct SpecError {
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: String,
}

/// The fields a description may set, with what each is.
pub const FIELDS: &[(&str, &str)] = &[
    ("vocab", "vocabulary size"),
    ("d", "model width"),
    ("layers", "decoder layers"),
    ("ff", "feed-forward width (of each expert)"),
    ("heads", "attention heads"),
    ("kv_heads", "key/value heads (default: heads)"),
    ("head_dim", "head width (default: d / heads)"),
    ("tied", "1 when the head is the embedding table"),
    ("qk_norm", "1 for per-head q/k RMS norms"),
    ("qkv_bias", "1 for q/k/v biases"),
    ("attention_bias", "1 for q/k/v and output biases"),
    ("sinks", "1 for a sink logit per head"),
    ("experts", "experts of the feed-forward block (0: dense)"),
    ("top_k", "experts per token"),
    ("window", "sliding window of the sliding layers"),
    (
        "sliding_layers",
        "layers that slide (default: every other one)",
    ),
];

/// The fields a family description must set.
const REQUIRED: &[&str] = &["vocab", "d", "layers", "ff", "heads"];

/// Whether `text` is a path rather than a name or a description: it ends in
/// `.json` or holds a `/`.
pub fn is_path(text: &str) -> bool {
    let t = text.trim();
    !t.contains('(') && (t.ends_with(".json") || t.contains('/'))
}

fn err(message: impl Into<String>, help: impl Into<String>) -> SpecError {
    SpecError {
        message: message.into(),
        help: help.into(),
    }
}

fn family_names() -> String {
    FAMILIES
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn field_names() -> String {
    FIELDS.iter().map(|f| f.0).collect::<Vec<_>>().join(", ")
}

/// The architecture, description or path `text` names.
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let t = text.trim();
    if is_path(t) {
        return Ok(Spec::Config(t.to_string()));
    }
    let (base, body) = match t.find('(') {
        None => (t, None),
        Some(open) => {
            let Some(inner) = t[open + 1..].strip_suffix(')') else {
                return Err(err(
                    format!("the description `{t}` does not end with `)`"),
                    "write it as `family(key = value, …)`, e.g. \"llama(vocab = 32000, d = 2048, layers = 16, ff = 5632, heads = 32)\"",
                ));
            };
            (t[..open].trim(), Some(inner))
        }
    };
    if let Some(a) = hypothetical::lookup(base) {
        let mut a = *a;
        if let Some(body) = body {
            set_fields(&mut a, body, false)?;
        }
        return Ok(Spec::Arch(a));
    }
    let Some(fam) = hypothetical::family(base) else {
        return Err(err(
            format!("unknown architecture `{base}`"),
            format!(
                "use a known name ({}), a family with sizes ({}: e.g. \"llama(vocab = 32000, d = 2048, layers = 16, ff = 5632, heads = 32)\") or the path of a config.json",
                hypothetical::names(),
                family_names()
            ),
        ));
    };
    let mut a = *fam;
    set_fields(&mut a, body.unwrap_or(""), true)?;
    Ok(Spec::Arch(a))
}

/// Applies `key = value, …` to `a`; with `fresh` (a family), the required sizes
/// must be among them and the defaults that follow from them are filled in.
fn set_fields(a: &mut Architecture, body: &str, fresh: bool) -> Result<(), SpecError> {
    let mut seen: Vec<&str> = Vec::new();
    for item in body.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(err(
                format!("`{item}` is not `key = value`"),
                format!("the fields are {}", field_names()),
            ));
        };
        let key = key.trim();
        let Some(&(name, _)) = FIELDS.iter().find(|f| f.0 == key) else {
            return Err(err(
                format!("unknown field `{key}`"),
                format!("the fields are {}", field_names()),
            ));
        };
        if seen.contains(&name) {
            return Err(err(format!("`{name}` is set twice"), "keep one"));
        }
        seen.push(name);
        let value = value.trim();
        let v: u64 = value.parse().map_err(|_| {
            err(
                format!("`{name} = {value}` is not a whole number"),
                "sizes are whole numbers; flags are 0 or 1",
            )
        })?;
        set(a, name, v)?;
    }
    if fresh {
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|r| !seen.contains(r))
            .collect();
        let needs_experts = a.name == hypothetical::GPT_OSS.name && !seen.contains(&"experts");
        if !missing.is_empty() || needs_experts {
            let mut all = missing;
            if needs_experts {
                all.push("experts");
                if !seen.contains(&"top_k") {
                    all.push("top_k");
                }
            }
            return Err(err(
                format!("the `{}` description lacks {}", a.name, all.join(", ")),
                format!("set every one of them, e.g. \"{}\"", example(a.name)),
            ));
        }
    }
    if !seen.contains(&"kv_heads") && (fresh || seen.contains(&"heads")) {
        a.kv_heads = a.heads;
    }
    if !seen.contains(&"head_dim") && (fresh || seen.contains(&"d") || seen.contains(&"heads")) {
        if a.heads == 0 || !a.d.is_multiple_of(a.heads) {
            return Err(err(
                format!("heads = {} does not divide d = {}", a.heads, a.d),
                "set `head_dim` too",
            ));
        }
        a.head_dim = a.d / a.heads;
    }
    if a.window > 0 && !seen.contains(&"sliding_layers") && (fresh || seen.contains(&"window")) {
        a.sliding_layers = a.layers.div_ceil(2);
    }
    validate(a)
}

/// An example description of family `name`.
fn example(name: &str) -> &'static str {
    match name {
        "gpt_oss" => "gpt_oss(vocab = 201088, d = 2880, layers = 24, ff = 2880, heads = 64, kv_heads = 8, head_dim = 64, experts = 32, top_k = 4, window = 128)",
        "qwen3" => "qwen3(vocab = 151936, d = 1024, layers = 28, ff = 3072, heads = 16, kv_heads = 8, head_dim = 128, tied = 1)",
        _ => "llama(vocab = 128256, d = 4096, layers = 32, ff = 14336, heads = 32, kv_heads = 8)",
    }
}

fn flag(name: &str, v: u64) -> Result<bool, SpecError> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(err(
            format!("`{name} = {v}` is not 0 or 1"),
            "flags are 0 or 1",
        )),
    }
}

fn set(a: &mut Architecture, name: &str, v: u64) -> Result<(), SpecError> {
    match name {
        "vocab" => a.vocab = v,
        "d" => a.d = v,
        "layers" => a.layers = v,
        "ff" => a.ff = v,
        "heads" => a.heads = v,
        "kv_heads" => a.kv_heads = v,
        "head_dim" => a.head_dim = v,
        "tied" => a.tied = flag(name, v)?,
        "qk_norm" => a.qk_norm = flag(name, v)?,
        "qkv_bias" => a.qkv_bias = flag(name, v)?,
        "attention_bias" => {
            a.qkv_bias = flag(name, v)?;
            a.o_bias = a.qkv_bias;
        }
        "sinks" => a.sinks = flag(name, v)?,
        "experts" => a.experts = v,
        "top_k" => a.top_k = v,
        "window" => a.window = v,
        "sliding_layers" => a.sliding_layers = v,
        _ => unreachable!("every field of FIELDS is set"),
    }
    Ok(())
}

/// Sizes that make a model: positive, heads divisible by kv_heads, 1 ≤ top_k ≤
/// experts, sliding layers within the layers.
fn validate(a: &Architecture) -> Result<(), SpecError> {
    for (name, v) in [
        ("vocab", a.vocab),
        ("d", a.d),
        ("layers", a.layers),
        ("ff", a.ff),
        ("heads", a.heads),
        ("kv_heads", a.kv_heads),
        ("head_dim", a.head_dim),
    ] {
        if v == 0 {
            return Err(err(format!("`{name}` is 0"), "sizes are whole numbers ≥ 1"));
        }
    }
    if !a.heads.is_multiple_of(a.kv_heads) {
        return Err(err(
            format!(
                "kv_heads = {} does not divide heads = {}",
                a.kv_heads, a.heads
            ),
            "grouped-query attention shares each key/value head among heads / kv_heads query heads",
        ));
    }
    if a.experts > 0 && !(1..=a.experts).contains(&a.top_k) {
        return Err(err(
            format!("top_k = {} is outside 1..={} (experts)", a.top_k, a.experts),
            "set `top_k` to the experts each token is routed to",
        ));
    }
    if a.experts == 0 && a.top_k > 0 {
        return Err(err(
            format!("top_k = {} without experts", a.top_k),
            "set `experts` too, or drop `top_k`",
        ));
    }
    if a.sliding_layers > a.layers {
        return Err(err(
            format!(
                "sliding_layers = {} is more than layers = {}",
                a.sliding_layers, a.layers
            ),
            "at most every layer slides",
        ));
    }
    if a.sliding_layers > 0 && a.window == 0 {
        return Err(err(
            format!("{} sliding layers without a window", a.sliding_layers),
            "set `window` too",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch(text: &str) -> Architecture {
        match parse(text) {
            Ok(Spec::Arch(a)) => a,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Err(e) => format!("{} / {}", e.message, e.help),
            Ok(s) => panic!("{text}: {s:?}"),
        }
    }

    #[test]
    fn descriptions_reproduce_the_table() {
        let llama = arch(
            "llama(vocab = 128256, d = 4096, layers = 32, ff = 14336, heads = 32, kv_heads = 8)",
        );
        assert_eq!(llama.params(), 8030261248.0);
        let q = arch("qwen3(vocab=151936, d=1024, layers=28, ff=3072, heads=16, kv_heads=8, head_dim=128, tied=1)");
        assert_eq!(
            q.params(),
            hypothetical::lookup("qwen3-0.6b").unwrap().params()
        );
        let o = arch("gpt_oss(vocab = 201088, d = 2880, layers = 24, ff = 2880, heads = 64, kv_heads = 8, head_dim = 64, experts = 32, top_k = 4, window = 128)");
        let table = hypothetical::lookup("gpt-oss-20b").unwrap();
        assert_eq!(o.params(), table.params());
        assert_eq!(o.sliding_layers, 12);
        assert_eq!(o.active_params(), table.active_params());
    }

    #[test]
    fn a_table_name_takes_overrides() {
        let a = arch("llama-3-8b(layers = 16)");
        let full = hypothetical::lookup("llama-3-8b").unwrap();
        assert_eq!(a.layers, 16);
        assert!(a.params() < full.params());
        assert_eq!(arch(" llama-3-8b "), *full);
        // Changing heads re-derives head_dim and kv_heads unless given.
        let b = arch("llama-3-8b(heads = 16)");
        assert_eq!((b.head_dim, b.kv_heads), (256, 16));
    }

    #[test]
    fn paths_are_configs() {
        assert_eq!(
            parse("hf/tiny/config.json"),
            Ok(Spec::Config("hf/tiny/config.json".into()))
        );
        assert_eq!(parse("config.json"), Ok(Spec::Config("config.json".into())));
        assert_eq!(parse("models/qwen"), Ok(Spec::Config("models/qwen".into())));
    }

    #[test]
    fn errors_name_the_fix() {
        let e = error("gpt-5");
        assert!(
            e.contains("unknown architecture `gpt-5`")
                && e.contains("llama-3-8b")
                && e.contains("gpt_oss"),
            "{e}"
        );
        let e = error("llama(d = 4096, layers = 32)");
        assert!(e.contains("lacks vocab, ff, heads"), "{e}");
        let e = error("gpt_oss(vocab = 10, d = 8, layers = 2, ff = 8, heads = 2)");
        assert!(e.contains("lacks experts, top_k"), "{e}");
        let e = error("llama(vocab = 10, d = 8, layers = 2, ff = 8, heads = 2, width = 3)");
        assert!(
            e.contains("unknown field `width`") && e.contains("kv_heads"),
            "{e}"
        );
        let e = error("llama(vocab = 10, d = 8, layers = 2, ff = 8, heads = 3)");
        assert!(e.contains("heads = 3 does not divide d = 8"), "{e}");
        let e = error("llama(vocab = 10, d = 8, layers = 2, ff = 8, heads = 4, kv_heads = 3)");
        assert!(e.contains("kv_heads = 3 does not divide heads = 4"), "{e}");
        let e = error("llama(vocab = 10, d = 8.5, layers = 2, ff = 8, heads = 2)");
        assert!(e.contains("not a whole number"), "{e}");
        let e = error("llama(vocab = 10, d = 8, layers = 2, ff = 8, heads = 2, tied = 2)");
        assert!(e.contains("not 0 or 1"), "{e}");
        let e = error("gpt-oss-20b(top_k = 40)");
        assert!(e.contains("top_k = 40 is outside 1..=32"), "{e}");
        let e = error("llama(vocab = 10");
        assert!(e.contains("does not end with `)`"), "{e}");
        let e = error("llama(vocab = 10, vocab = 11, d = 8, layers = 2, ff = 8, heads = 2)");
        assert!(e.contains("set twice"), "{e}");
    }
}
