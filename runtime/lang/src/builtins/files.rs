//! Files and corpora (LANGUAGE §10.9, §16): `load` and `save` inside the data
//! directory, and the compiled-in corpora of `load_preloaded`.

use super::site::CallSite;
use mlpl_diag::code;
use std::collections::HashMap;

use safetensors::tensor::{Dtype, SafeTensors, TensorInfo, TensorView};

use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::data::files::tensor_values;
use crate::data::safetensors_file::{ReadError, SafetensorsFile};
use crate::data::{corpora, files};
use crate::eval::Call;
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "load",
        params: &[req("path", Str)],
        summary: "read a CSV, safetensors or text file from the data directory",
        doc: "`load(path)` reads a file inside the data directory: `.csv` gives a `[rows, cols]` array (a non-numeric first line is a header), `.safetensors` the single array stored there with its axis names, anything else the text. Paths must be relative and stay inside the data directory (E0404). E0403 no data directory; E0405 unreadable; E0406 malformed.",
        example: "save(label(reshape(iota(6), [2, 3]), [\"r\", \"c\"]), \"example.safetensors\")\nlabels(load(\"example.safetensors\"))",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.9",
        run: load,
        shape: Some(super::files_shapes::load),
    },
    Builtin {
        name: "load_preloaded",
        params: &[req("name", Str)],
        summary: "a corpus compiled into the runtime",
        doc: "`load_preloaded(name)` returns the text of a built-in corpus: \"tiny_corpus\" (two pangram lines) or \"tiny_shakespeare_snippet\" (2028 bytes of Shakespeare). No data directory is needed. E0104 for an unknown name.",
        example: "load_preloaded(\"tiny_corpus\")",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.9",
        run: load_preloaded,
        shape: Some(super::files_shapes::load_preloaded),
    },
    Builtin {
        name: "save",
        params: &[req("value", Any), req("path", Str)],
        summary: "write an array (or a model) to a safetensors file",
        doc: "`save(value, path)` writes a `.safetensors` file inside the data directory, creating missing directories and replacing an existing file. An array is stored under the key `array` with its axis names in the metadata (`mlpl.names.array`); a model stores one float32 tensor per distinct parameter under its structural key (`0.embed.E`, `1.1.attention.Wq`, `2.linear.W`, …, LANGUAGE §11.9). Returns the number of tensors written. E0401 unless the path ends in `.safetensors`.",
        example: "save(iota(3), \"iota.safetensors\")",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.9",
        run: save,
        shape: Some(super::files_shapes::save),
    },
    Builtin {
        name: "load_weights",
        params: &[req("model", Model), req("path", Str)],
        summary: "load a model checkpoint written by `save`",
        doc: "`load_weights(model, path)` reads a safetensors file and writes, for every distinct parameter in parameter order, the tensor stored under its structural key (LANGUAGE §11.9) into the parameter, keeping its placement; F32, F64, F16 and BF16 tensors are converted to float32. Returns the number of parameters loaded. Nothing is changed when any tensor is missing (E0407, naming the key) or has another shape (E0217); unused tensors in the file are W0401. Frozen flags and optimizer state are kept.",
        example: "m = linear(2, 2, 0)\nsave(m, \"m.safetensors\")\nload_weights(clone_model(m), \"m.safetensors\")",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.9",
        run: load_weights,
        shape: Some(super::files_shapes::load_weights),
    },
];

fn load_preloaded(c: &mut Call) -> Result<Value, Diagnostic> {
    let name = c.string(0)?;
    match corpora::preloaded(name) {
        Some(text) => Ok(Value::string(text)),
        None => Err(super::site::unknown_corpus(c, 0, name)),
    }
}

/// The diagnostic of a path error of `load` (its argument 0) or `save` (1).
fn path_error(c: &Call, e: files::PathError) -> Diagnostic {
    let i = if c.name() == "load" { 0 } else { 1 };
    super::site::path_error(c, i.min(c.len() - 1), &e)
}

fn malformed(c: &Call, message: String) -> Diagnostic {
    c.error_of(0, code::E0406, message)
}

fn load(c: &mut Call) -> Result<Value, Diagnostic> {
    let rel = c.string(0)?.to_string();
    let path = files::resolve(c.it.ws.data_dir.as_deref(), &rel).map_err(|e| path_error(c, e))?;
    let stop = super::stop_requested(c);
    let bytes = files::read_until(&path, &stop)
        .map_err(|e| c.error_of(0, code::E0405, format!("{}: {e}", path.display())))?
        .ok_or_else(|| super::cancelled(c))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "csv" => {
            let text = String::from_utf8(bytes)
                .map_err(|_| malformed(c, "the file is not valid UTF-8".into()))?;
            let t = files::parse_csv_until(&text, &stop)
                .map_err(|e| malformed(c, e.to_string()))?
                .ok_or_else(|| super::cancelled(c))?;
            Ok(Value::Array(Array::from_f64(
                vec![t.rows, t.cols],
                &t.values,
            )))
        }
        "safetensors" => load_safetensors(c, &bytes).map(Value::Array),
        _ => {
            let text = String::from_utf8(bytes)
                .map_err(|_| malformed(c, "the file is not valid UTF-8 text".into()))?;
            Ok(Value::string(text))
        }
    }
}

fn load_safetensors(c: &Call, bytes: &[u8]) -> Result<Array, Diagnostic> {
    let (_, meta) = SafeTensors::read_metadata(bytes)
        .map_err(|e| malformed(c, format!("not a safetensors file: {e}")))?;
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| malformed(c, format!("not a safetensors file: {e}")))?;
    let names = st.names();
    if names.len() != 1 {
        return Err(malformed(c, format!("the file holds {} tensors; `load` reads files with exactly one (use `load_weights` for checkpoints)", names.len())));
    }
    let key = names[0].to_string();
    let view = st.tensor(&key).map_err(|e| malformed(c, e.to_string()))?;
    let values = tensor_values(&view).ok_or_else(|| {
        malformed(
            c,
            format!("tensor `{key}` has unsupported type {:?}", view.dtype()),
        )
    })?;
    let shape = view.shape().to_vec();
    let axis_names = meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get(&format!("mlpl.names.{key}")))
        .map(|s| crate::value::split_names(s));
    Ok(Array::from_vec(shape, values).with_names(axis_names))
}

/// Serialises named float32 tensors with MLPL's metadata (LANGUAGE §11.9).
pub fn write_safetensors(tensors: &[(String, &Array)]) -> Result<Vec<u8>, String> {
    let mut meta = HashMap::new();
    meta.insert("format".to_string(), "mlpl".to_string());
    let mut owned = Vec::with_capacity(tensors.len());
    for (key, a) in tensors {
        if let Some(n) = a.names() {
            meta.insert(
                format!("mlpl.names.{key}"),
                n.iter()
                    .map(|s| s.as_deref().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        let bytes: Vec<u8> = a.to_f32().iter().flat_map(|x| x.to_le_bytes()).collect();
        owned.push((key.clone(), a.shape().to_vec(), bytes));
    }
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(k, s, b)| {
            Ok((
                k.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).map_err(|e| e.to_string())?,
            ))
        })
        .collect::<Result<_, String>>()?;
    safetensors::serialize(views, &Some(meta)).map_err(|e| e.to_string())
}

fn save(c: &mut Call) -> Result<Value, Diagnostic> {
    let rel = c.string(1)?.to_string();
    super::site::check_safetensors_path(c, 1, &rel)?;
    let tensors: Vec<(String, Array)> = match c.value(0).clone() {
        Value::Array(a) => vec![("array".to_string(), a)],
        Value::Model(m) => {
            let span = c.span;
            let mut out = Vec::new();
            for (key, p) in crate::nn::checkpoint::keyed_params(&m.0) {
                out.push((key, crate::nn::param(c.it, &p.name, span)?.detached()));
            }
            out
        }
        other => {
            return Err(c.error_of(0, code::E0301, format!("this is a {}", other.kind_name())))
        }
    };
    let path = files::resolve_for_write(c.it.ws.data_dir.as_deref(), &rel)
        .map_err(|e| path_error(c, e))?;
    let refs: Vec<(String, &Array)> = tensors.iter().map(|(k, a)| (k.clone(), a)).collect();
    let bytes = write_safetensors(&refs).map_err(|e| c.error_of(0, code::E0405, e))?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| c.error_of(1, code::E0405, format!("{}: {e}", parent.display())))?;
    }
    std::fs::write(&path, bytes)
        .map_err(|e| c.error_of(1, code::E0405, format!("{}: {e}", path.display())))?;
    Ok(Value::exact(tensors.len() as f64))
}

fn load_weights(c: &mut Call) -> Result<Value, Diagnostic> {
    let model = c.model(0)?.0.clone();
    let rel = c.string(1)?.to_string();
    let path = files::resolve(c.it.ws.data_dir.as_deref(), &rel).map_err(|e| path_error(c, e))?;
    // The header first, then each tensor read straight into its new values
    // (never the whole file in memory beside them).
    let read_error = |c: &Call, e: ReadError| match e {
        ReadError::Io(m) => c.error_of(1, code::E0405, m),
        ReadError::Malformed(m) => c.error_of(1, code::E0406, m),
    };
    let (file, infos) = SafetensorsFile::open(&path, &rel).map_err(|e| read_error(c, e))?;
    let infos: HashMap<String, TensorInfo> = infos.into_iter().collect();
    let keyed = crate::nn::checkpoint::keyed_params(&model);
    let span = c.span;
    let mut updates = Vec::with_capacity(keyed.len());
    let mut buf = Vec::new();
    for (key, p) in &keyed {
        let info = infos.get(key).ok_or_else(|| {
            c.error_of(1, code::E0407,
                format!("no tensor `{key}` in this file"),
            )
            .note(format!(
                "parameter `{}` is stored under the key `{key}`",
                p.name
            ))
            .help(
                "checkpoints load into the same architecture they were saved from (LANGUAGE §11.9)",
            )
        })?;
        let old = crate::nn::param(c.it, &p.name, span)?;
        if info.shape != old.shape() {
            return Err(c
                .error_of(
                    1,
                    code::E0217,
                    format!(
                        "`{key}` is {} in the file",
                        crate::display::format_named_shape(&info.shape, None)
                    ),
                )
                .note(format!(
                    "parameter `{}` has shape {}",
                    p.name,
                    crate::value::named_shape(&old)
                )));
        }
        if !files::converts(info.dtype) {
            return Err(c.error_of(
                1,
                code::E0406,
                format!("tensor `{key}` has unsupported type {:?}", info.dtype),
            ));
        }
        let mut values = Vec::new();
        file.read_values(info, &mut buf, &mut values)
            .map_err(|e| read_error(c, e))?;
        let new = Array::from_vec(old.shape().to_vec(), values)
            .with_names(old.names().map(|n| n.to_vec()))
            .with_placement(old.placement());
        updates.push((p.name.clone(), new));
    }
    let used: std::collections::HashSet<&str> = keyed.iter().map(|(k, _)| k.as_str()).collect();
    let mut unused: Vec<&String> = infos
        .keys()
        .filter(|k| !used.contains(k.as_str()))
        .collect();
    unused.sort();
    if let Some(first) = unused.first() {
        let label = format!(
            "{} tensor{} not used by the model, the first is `{first}`",
            unused.len(),
            if unused.len() == 1 { "" } else { "s" }
        );
        c.warn_of(1, code::W0401, label);
    }
    let n = updates.len();
    for (name, value) in updates {
        c.it.ws.bindings.insert(name, Value::Array(value));
    }
    Ok(Value::exact(n as f64))
}
