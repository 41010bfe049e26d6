//! Hugging Face checkpoints, directly (docs/models.md): `hf_model(dir)` reads a
//! `save_pretrained` folder (`config.json` and `model.safetensors`, or the shards
//! of `model.safetensors.index.json`), builds the family's layer tree
//! ([`mapping::build`]) and binds every parameter from its tensor in the
//! family's names and layouts (bf16, f16 and f64 converted to f32);
//! `hf_save(model, dir)` writes the same layout back, so `transformers` loads
//! it. Paths are resolved by the caller inside the data directory; shard names
//! must be plain file names in the same folder.

pub mod config;
pub mod mapping;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use safetensors::tensor::{Dtype, TensorInfo, TensorView};

use self::config::Config;
use self::mapping::{Binding, Layout};
use super::init::{bind_param, next_id};
use super::layers::Layer;
use crate::data::files::converts;
use crate::data::safetensors_file::{ReadError, SafetensorsFile};
use crate::eval::Interp;
use crate::value::{Array, Value};

/// Why a checkpoint could not be read or written.
#[derive(Debug, Clone, PartialEq)]
pub enum HfError {
    /// A file could not be read or written (E0405).
    Io(String),
    /// A file is not what the family needs (E0406): bad JSON, an unsupported
    /// configuration, a tensor of an unsupported type.
    Malformed(String),
    /// The tensors do not fit the configuration (E0407): every missing,
    /// mis-shaped and unexpected tensor.
    Mismatch {
        /// Tensors the model needs that the checkpoint lacks.
        missing: Vec<String>,
        /// `name: found [..], expected [..]`.
        misshaped: Vec<String>,
        /// Tensors the checkpoint holds that the model does not use.
        unexpected: Vec<String>,
    },
    /// The model is not one of the families' trees (E0406 at `hf_save`).
    NotAFamily(String),
}

fn read(path: &Path) -> Result<Vec<u8>, HfError> {
    std::fs::read(path).map_err(|e| HfError::Io(format!("{}: {e}", path.display())))
}

/// The `.safetensors` files of the checkpoint in `dir`: `model.safetensors`,
/// or the shards `model.safetensors.index.json` names.
fn shard_files(dir: &Path) -> Result<Vec<String>, HfError> {
    let index = dir.join("model.safetensors.index.json");
    if !index.exists() {
        return Ok(vec!["model.safetensors".to_string()]);
    }
    let text = String::from_utf8(read(&index)?)
        .map_err(|_| HfError::Malformed("model.safetensors.index.json is not UTF-8".into()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| HfError::Malformed(format!("model.safetensors.index.json: {e}")))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| {
            HfError::Malformed("model.safetensors.index.json has no `weight_map`".into())
        })?;
    let shards: BTreeSet<String> = map
        .values()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect();
    for s in &shards {
        let plain = Path::new(s)
            .file_name()
            .map(|f| f.to_string_lossy() == s.as_str())
            == Some(true);
        if !plain || !s.ends_with(".safetensors") {
            return Err(HfError::Malformed(format!(
                "shard `{s}` is not a `.safetensors` file name in the checkpoint's folder"
            )));
        }
    }
    Ok(shards.into_iter().collect())
}

/// The files of the checkpoint in `dir`, open, and where each tensor is: its
/// file's index and its type, shape and bytes there, by name.
type Index = (Vec<SafetensorsFile>, BTreeMap<String, (usize, TensorInfo)>);

/// Opens every file of the checkpoint in `dir` and reads their headers.
fn open_shards(dir: &Path) -> Result<Index, HfError> {
    let mut shards = Vec::new();
    let mut tensors = BTreeMap::new();
    for f in shard_files(dir)? {
        let (shard, infos) = SafetensorsFile::open(&dir.join(&f), &f)?;
        for (name, info) in infos {
            if !converts(info.dtype) {
                return Err(HfError::Malformed(format!(
                    "tensor `{name}` of {f} has unsupported type {:?}",
                    info.dtype
                )));
            }
            tensors.insert(name, (shards.len(), info));
        }
        shards.push(shard);
    }
    Ok((shards, tensors))
}

impl From<ReadError> for HfError {
    fn from(e: ReadError) -> HfError {
        match e {
            ReadError::Io(m) => HfError::Io(m),
            ReadError::Malformed(m) => HfError::Malformed(m),
        }
    }
}

/// Tensors of a checkpoint that are buffers, not parameters.
fn ignorable(name: &str, tied: bool) -> bool {
    name.ends_with(".attn.bias")
        || name.ends_with(".attn.masked_bias")
        || name.ends_with("rotary_emb.inv_freq")
        || (tied && name == "lm_head.weight")
}

/// Binding `b`'s parameter values (MLPL's layout) out of the values of its
/// checkpoint tensor of shape `shape` (the caller has checked it is `b.hf_shape`).
pub fn to_param<T: Copy + Default>(b: &Binding, shape: &[usize], values: &[T]) -> Vec<T> {
    match b.layout {
        Layout::Same | Layout::Row => values.to_vec(),
        Layout::Transposed => transposed(shape[0], shape[1], values),
        Layout::Columns { start } => {
            let total = *shape.last().unwrap_or(&0);
            let (rows, w) = (b.shape[0], b.shape[1]);
            let mut out = Vec::with_capacity(rows * w);
            for r in 0..rows {
                out.extend_from_slice(&values[r * total + start..r * total + start + w]);
            }
            out
        }
        Layout::Interleaved { offset } => {
            let total = *shape.last().unwrap_or(&0);
            let rows = values.len() / total.max(1);
            let w = total / 2;
            let mut out = Vec::with_capacity(rows * w);
            for r in 0..rows {
                out.extend((0..w).map(|j| values[r * total + 2 * j + offset]));
            }
            out
        }
    }
}

/// The `[c, r]` transpose of the row-major `[r, c]` matrix `values`, in
/// square blocks, so that both the rows read and the rows written stay in
/// the cache (element by element, a `[8192, 2048]` weight was read a column
/// at a time, 8192 floats each 8 KiB apart).
fn transposed<T: Copy + Default>(r: usize, c: usize, values: &[T]) -> Vec<T> {
    const BLOCK: usize = 32;
    let mut out = vec![T::default(); r * c];
    for i0 in (0..r).step_by(BLOCK) {
        let rows = i0..(i0 + BLOCK).min(r);
        for j0 in (0..c).step_by(BLOCK) {
            for j in j0..(j0 + BLOCK).min(c) {
                for i in rows.clone() {
                    out[j * r + i] = values[i * c + j];
                }
            }
        }
    }
    out
}

/// Writes a parameter's values into its checkpoint tensor (the inverse of
/// [`to_param`]).
fn place(b: &Binding, values: &[f32], into: &mut [f32]) {
    match b.layout {
        Layout::Same | Layout::Row => into.copy_from_slice(values),
        Layout::Transposed => {
            let (r, c) = (b.hf_shape[0], b.hf_shape[1]);
            for i in 0..r {
                for j in 0..c {
                    into[i * c + j] = values[j * r + i];
                }
            }
        }
        Layout::Columns { start } => {
            let total = *b.hf_shape.last().unwrap_or(&0);
            let (rows, w) = (b.shape[0], b.shape[1]);
            for r in 0..rows {
                into[r * total + start..r * total + start + w]
                    .copy_from_slice(&values[r * w..(r + 1) * w]);
            }
        }
        Layout::Interleaved { offset } => {
            let total = *b.hf_shape.last().unwrap_or(&0);
            let w = total / 2;
            for (r, row) in values.chunks(w.max(1)).enumerate() {
                for (j, v) in row.iter().enumerate() {
                    into[r * total + 2 * j + offset] = *v;
                }
            }
        }
    }
}

fn shape_text(s: &[usize]) -> String {
    crate::display::format_named_shape(s, None)
}

/// Builds the model of the checkpoint in `dir` and binds its parameters.
pub fn load(it: &mut Interp, dir: &Path) -> Result<Layer, HfError> {
    let text = String::from_utf8(read(&dir.join("config.json"))?)
        .map_err(|_| HfError::Malformed("config.json is not UTF-8".into()))?;
    let config = Config::parse(&text).map_err(HfError::Malformed)?;
    let (shards, tensors) = open_shards(dir)?;
    let layer = mapping::build(&config, &mut || next_id(it));
    let (_, bindings) = mapping::plan(&layer).map_err(HfError::NotAFamily)?;
    let mut missing = BTreeSet::new();
    let mut misshaped = BTreeSet::new();
    let used: BTreeSet<&str> = bindings.iter().map(|b| b.hf.as_str()).collect();
    for b in &bindings {
        match tensors.get(&b.hf) {
            None => {
                missing.insert(b.hf.clone());
            }
            Some((_, t)) if t.shape != b.hf_shape => {
                misshaped.insert(format!(
                    "`{}` is {}, expected {}",
                    b.hf,
                    shape_text(&t.shape),
                    shape_text(&b.hf_shape)
                ));
            }
            _ => {}
        }
    }
    let unexpected: Vec<String> = tensors
        .keys()
        .filter(|k| !used.contains(k.as_str()) && !ignorable(k, config.tied))
        .map(|k| format!("`{k}`"))
        .collect();
    if !missing.is_empty() || !misshaped.is_empty() || !unexpected.is_empty() {
        return Err(HfError::Mismatch {
            missing: missing.into_iter().map(|k| format!("`{k}`")).collect(),
            misshaped: misshaped.into_iter().collect(),
            unexpected,
        });
    }
    // One tensor read and converted at a time, straight into its parameter
    // (`SafetensorsFile::read_values`): the load holds the model's parameters and, for
    // a tensor in another layout, its values in a buffer reused from tensor
    // to tensor (fresh memory is zeroed by the system: new buffers each time
    // doubled the load's time), converted once for consecutive bindings of
    // it (GPT-2's `c_attn`). Bound only once all are read.
    let mut bytes = Vec::new();
    let mut scratch: (Option<&str>, Vec<f32>) = (None, Vec::new());
    let mut params = Vec::with_capacity(bindings.len());
    for b in &bindings {
        let (shard, info) = &tensors[&b.hf];
        let values = if matches!(b.layout, Layout::Same | Layout::Row) {
            let mut values = Vec::new();
            shards[*shard].read_values(info, &mut bytes, &mut values)?;
            values
        } else {
            if scratch.0 != Some(b.hf.as_str()) {
                shards[*shard].read_values(info, &mut bytes, &mut scratch.1)?;
                scratch.0 = Some(&b.hf);
            }
            to_param(b, &info.shape, &scratch.1)
        };
        params.push((&b.param, Array::from_vec(b.shape.clone(), values)));
    }
    for (name, values) in params {
        bind_param(it, name, values);
    }
    Ok(layer)
}

/// The floating-point type `hf_save` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveDtype {
    /// float32 (the default): the parameters exactly.
    F32,
    /// bfloat16, rounded to nearest even.
    Bf16,
    /// float16, rounded to nearest even (out of range: ±inf).
    F16,
}

impl SaveDtype {
    /// The type called `name` as `transformers` writes it in `config.json`.
    pub fn parse(name: &str) -> Option<SaveDtype> {
        match name {
            "float32" => Some(SaveDtype::F32),
            "bfloat16" => Some(SaveDtype::Bf16),
            "float16" => Some(SaveDtype::F16),
            _ => None,
        }
    }

    /// Its name in `config.json`.
    pub fn name(self) -> &'static str {
        match self {
            SaveDtype::F32 => "float32",
            SaveDtype::Bf16 => "bfloat16",
            SaveDtype::F16 => "float16",
        }
    }

    fn dtype(self) -> Dtype {
        match self {
            SaveDtype::F32 => Dtype::F32,
            SaveDtype::Bf16 => Dtype::BF16,
            SaveDtype::F16 => Dtype::F16,
        }
    }

    /// The little-endian bytes of `values` in this type.
    fn bytes(self, values: &[f32]) -> Vec<u8> {
        match self {
            SaveDtype::F32 => values.iter().flat_map(|x| x.to_le_bytes()).collect(),
            SaveDtype::Bf16 => values
                .iter()
                .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
                .collect(),
            SaveDtype::F16 => values
                .iter()
                .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                .collect(),
        }
    }
}

/// Writes `model` (a tree of one of the families) to `dir` as `config.json` and
/// `model.safetensors` in the family's names and layouts, the tensors in
/// `dtype`; returns the number of tensors written.
pub fn save(
    it: &mut Interp,
    model: &Layer,
    dir: &Path,
    dtype: SaveDtype,
) -> Result<usize, HfError> {
    let (config, bindings) = mapping::plan(model).map_err(HfError::NotAFamily)?;
    let mut tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)> = BTreeMap::new();
    for b in &bindings {
        let values = match it.ws.get(&b.param) {
            Some(Value::Array(a)) if a.shape() == b.shape.as_slice() => a.to_f32(),
            _ => {
                return Err(HfError::NotAFamily(format!(
                    "parameter `{}` is not an array of shape {}",
                    b.param,
                    shape_text(&b.shape)
                )))
            }
        };
        let n: usize = b.hf_shape.iter().product();
        let entry = tensors
            .entry(b.hf.clone())
            .or_insert_with(|| (b.hf_shape.clone(), vec![0.0; n]));
        place(b, &values, &mut entry.1);
    }
    let owned: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(k, (s, v))| (k, s, dtype.bytes(&v)))
        .collect();
    let views = owned
        .iter()
        .map(|(k, s, b)| {
            TensorView::new(dtype.dtype(), s.clone(), b)
                .map(|v| (k.clone(), v))
                .map_err(|e| HfError::Malformed(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    let bytes = safetensors::serialize(views, &Some(meta))
        .map_err(|e| HfError::Malformed(e.to_string()))?;
    std::fs::create_dir_all(dir).map_err(|e| HfError::Io(format!("{}: {e}", dir.display())))?;
    let st = dir.join("model.safetensors");
    std::fs::write(&st, bytes).map_err(|e| HfError::Io(format!("{}: {e}", st.display())))?;
    let cj = dir.join("config.json");
    let mut json = config.to_json();
    json["torch_dtype"] = serde_json::json!(dtype.name());
    json["dtype"] = serde_json::json!(dtype.name());
    let text = serde_json::to_string_pretty(&json).expect("JSON") + "\n";
    std::fs::write(&cj, text).map_err(|e| HfError::Io(format!("{}: {e}", cj.display())))?;
    Ok(owned.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_transposition_is_the_transpose() {
        // Sizes across and off the 32-element blocks.
        for (r, c) in [(1, 1), (3, 70), (32, 32), (37, 64), (65, 33)] {
            let values: Vec<u32> = (0..(r * c) as u32).collect();
            let t = transposed(r, c, &values);
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(t[j * r + i], values[i * c + j], "[{r}, {c}] at ({i}, {j})");
                }
            }
        }
    }
}
