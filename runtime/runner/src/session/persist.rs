//! Saving a session's workspace to a directory and restoring it (DESIGN §6):
//! tensors in one safetensors file, everything else in `session.json`.
//!
//! Layout of a session directory:
//!
//! - `session.json`: [`StateFile`] (format version, ids, bindings, tracked and
//!   frozen names, optimizer state, experiments);
//! - `tensors-N.safetensors`: every float32 array, keyed `b/NAME` for bindings and
//!   `o/I/m`, `o/I/v` for optimizer moments. `N` changes on every save and
//!   `session.json` is replaced atomically (written aside, then renamed), so a
//!   crash during a save leaves the previous save readable.
//!
//! Functions: every user function of the workspace is kept as its definition's
//! text (`functions` in `session.json`, sorted by name) and parsed again on
//! restore; a text that no longer parses as one definition is reported as not
//! restored, like a model of an older file.
//!
//! Models: the layer structure of every model binding is one node table in
//! `session.json` (`models`, see [`mlpl_lang::nn::persist`]; a layer shared between
//! models stays shared); their parameters are ordinary bindings in the tensor
//! file, and their optimizer moments are in `optim`. Files written before models
//! were saved (`Model` bindings without a `node`) restore without the model, with
//! a message.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use mlpl_devices::Tensor;
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use serde::{Deserialize, Serialize};

use mlpl_lang::data::experiments::RunRecord;
use mlpl_lang::data::tokenizer::Tokenizer;
use mlpl_lang::eval::{OptimState, Workspace};
use mlpl_lang::nn::persist::{LayerRecord, ModelWriter};
use mlpl_lang::value::{Array, DeviceTarget, Placement, Value};

/// Version of the `session.json` format.
pub const STATE_VERSION: u32 = 1;

/// The JSON half of a saved session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StateFile {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The session id.
    pub session: String,
    /// When it was saved (ms since the Unix epoch).
    pub saved_at: u64,
    /// The `seq` of the last event emitted before the save.
    pub last_seq: u64,
    /// Runs the session had started.
    pub runs: u64,
    /// The tensor file next to this one, if any tensor was saved.
    pub tensors: Option<String>,
    /// `Workspace::model_counter`.
    pub model_counter: u64,
    /// Tracked parameter names.
    pub tracked: Vec<String>,
    /// Frozen parameter names.
    pub frozen: Vec<String>,
    /// Every binding.
    pub bindings: Vec<Binding>,
    /// The layer nodes of every model binding (children before parents).
    #[serde(default)]
    pub models: Vec<LayerRecord>,
    /// Optimizer state.
    pub optim: Vec<OptimRecord>,
    /// Experiment runs recorded in the session.
    pub experiments: Vec<RunRecord>,
    /// User functions, as written (absent in files of older builds).
    #[serde(default)]
    pub functions: Vec<FunctionRecord>,
}

/// One saved user function.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FunctionRecord {
    /// The function's name.
    pub name: String,
    /// Its definition as written, from `fn` to the body's `}`.
    pub source: String,
}

/// Saved functions, sorted by name.
fn function_records(ws: &Workspace) -> Vec<FunctionRecord> {
    let mut out: Vec<FunctionRecord> = ws
        .functions
        .iter()
        .map(|(name, def)| FunctionRecord {
            name: name.clone(),
            source: def.source.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The definition saved in `r`: its text must parse, without errors, as exactly
/// one definition of the function it is saved under.
fn parse_function(r: &FunctionRecord) -> Result<mlpl_syntax::FnDef, String> {
    let parsed = mlpl_syntax::parse(&r.source);
    let bad = || format!("function `{}`: its saved definition does not parse", r.name);
    if parsed.diagnostics.iter().any(|d| d.is_error()) {
        return Err(bad());
    }
    match parsed.program.stmts.as_slice() {
        [s] => match &s.kind {
            mlpl_syntax::StmtKind::Fn(def) if def.name.name == r.name => Ok((**def).clone()),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// One saved binding.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Binding {
    /// An array: exact scalars inline, float32 arrays in the tensor file.
    Array {
        /// Variable name.
        name: String,
        /// The value of an exact scalar (`"NaN"`, `"inf"`, `"-inf"` when not finite).
        exact: Option<serde_json::Value>,
        /// Key in the tensor file of a float32 array.
        tensor: Option<String>,
        /// Axis names.
        axes: Option<Vec<Option<String>>>,
        /// Explicit placement (`to_device`), if any.
        placed: Option<String>,
    },
    /// A string.
    String {
        /// Variable name.
        name: String,
        /// The text.
        value: String,
    },
    /// A tokenizer (its serde form).
    Tokenizer {
        /// Variable name.
        name: String,
        /// The tokenizer.
        tokenizer: Tokenizer,
    },
    /// A model: its root node in `models`; its parameters are ordinary bindings.
    Model {
        /// Variable name.
        name: String,
        /// The model's parameter names (saved as ordinary bindings).
        parameters: Vec<String>,
        /// Whether `node` is set (false in files of older builds).
        restorable: bool,
        /// Index of the model's root in the state file's `models` table.
        #[serde(default)]
        node: Option<usize>,
    },
}

/// One optimizer state entry.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OptimRecord {
    /// The optimizer (`adam`, `adamw`, `momentum_sgd`, …).
    pub optimizer: String,
    /// The parameter's name.
    pub param: String,
    /// Updates applied.
    pub steps: u64,
    /// Tensor key of the first moment / velocity.
    pub m: String,
    /// Tensor key of the second moment.
    pub v: Option<String>,
}

/// What a save wrote.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SaveReport {
    /// The session directory.
    pub path: PathBuf,
    /// Bindings saved.
    pub bindings: usize,
    /// Float32 tensors written.
    pub tensors: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Bindings that a restore cannot bring back, with the reason (none since
    /// models are saved; kept for clients of the save answer).
    pub not_restorable: Vec<String>,
}

/// What a restore brought back.
#[derive(Debug, Default)]
pub struct Restored {
    /// The rebuilt workspace (without data, experiment or device settings).
    pub ws: Workspace,
    /// The `seq` of the last event before the save.
    pub last_seq: u64,
    /// Runs started before the save.
    pub runs: u64,
    /// Bindings that were skipped, with the reason.
    pub skipped: Vec<String>,
}

/// The message for a model binding that a restore skips.
pub fn model_not_restorable(name: &str) -> String {
    format!("`{name}` is a model saved without its layer structure (by an older build); its parameters were restored as arrays, rebuild the model from them")
}

fn io_err(what: &str, path: &Path, e: impl std::fmt::Display) -> String {
    format!("cannot {what} {}: {e}", path.display())
}

fn num_json(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else if x.is_nan() {
        serde_json::json!("NaN")
    } else if x > 0.0 {
        serde_json::json!("inf")
    } else {
        serde_json::json!("-inf")
    }
}

fn json_num(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// Saves `ws` into `dir` (created if needed) as session `session`.
pub fn save(
    dir: &Path,
    session: &str,
    last_seq: u64,
    runs: u64,
    ws: &Workspace,
) -> Result<SaveReport, String> {
    std::fs::create_dir_all(dir).map_err(|e| io_err("create", dir, e))?;
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut bindings = Vec::new();
    let mut models = ModelWriter::new();
    for name in ws.names() {
        let Some(v) = ws.get(name) else { continue };
        let name = name.to_string();
        match v {
            Value::Array(a) => {
                let placed = match a.placement() {
                    Placement::Placed(t) => Some(t.to_string()),
                    Placement::Floating => None,
                };
                let axes = a.names().map(<[Option<String>]>::to_vec);
                if let Some(x) = a.exact_value() {
                    bindings.push(Binding::Array {
                        name,
                        exact: Some(num_json(x)),
                        tensor: None,
                        axes,
                        placed,
                    });
                } else {
                    let key = format!("b/{name}");
                    tensors.push((key.clone(), a.shape().to_vec(), f32_bytes(&a.to_f32())));
                    bindings.push(Binding::Array {
                        name,
                        exact: None,
                        tensor: Some(key),
                        axes,
                        placed,
                    });
                }
            }
            Value::Str(s) => bindings.push(Binding::String {
                name,
                value: s.to_string(),
            }),
            Value::Tokenizer(t) => bindings.push(Binding::Tokenizer {
                name,
                tokenizer: (**t).clone(),
            }),
            Value::Model(m) => bindings.push(Binding::Model {
                name,
                parameters: m.0.parameters(),
                restorable: true,
                node: Some(models.add(&m.0)),
            }),
        }
    }
    let mut optim_keys: Vec<&(String, String)> = ws.optim.keys().collect();
    optim_keys.sort();
    let mut optim = Vec::new();
    for (i, key) in optim_keys.into_iter().enumerate() {
        let Some(st) = ws.optim.get(key) else {
            continue;
        };
        let m = format!("o/{i}/m");
        tensors.push((m.clone(), st.m.shape().to_vec(), f32_bytes(&st.m.to_vec())));
        let v = st.v.as_ref().map(|t| {
            let k = format!("o/{i}/v");
            tensors.push((k.clone(), t.shape().to_vec(), f32_bytes(&t.to_vec())));
            k
        });
        optim.push(OptimRecord {
            optimizer: key.0.clone(),
            param: key.1.clone(),
            steps: st.steps,
            m,
            v,
        });
    }
    let mut tracked: Vec<String> = ws.tracked.iter().cloned().collect();
    tracked.sort();
    let mut frozen: Vec<String> = ws.frozen.iter().cloned().collect();
    frozen.sort();

    let saved_at = super::events::now_ms();
    let mut bytes = 0u64;
    let tensor_file = if tensors.is_empty() {
        None
    } else {
        let file = format!("tensors-{saved_at}-{runs}.safetensors");
        let views = tensors
            .iter()
            .map(|(k, shape, b)| {
                TensorView::new(Dtype::F32, shape.clone(), b)
                    .map(|view| (k.clone(), view))
                    .map_err(|e| format!("cannot save tensor `{k}`: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let data = safetensors::serialize(views, &None).map_err(|e| e.to_string())?;
        bytes += data.len() as u64;
        write_atomic(&dir.join(&file), &data)?;
        Some(file)
    };
    let state = StateFile {
        version: STATE_VERSION,
        session: session.to_string(),
        saved_at,
        last_seq,
        runs,
        tensors: tensor_file.clone(),
        model_counter: ws.model_counter,
        tracked,
        frozen,
        bindings,
        models: models.finish(),
        optim,
        experiments: ws.experiments.clone(),
        functions: function_records(ws),
    };
    let json = serde_json::to_vec_pretty(&state).map_err(|e| e.to_string())?;
    bytes += json.len() as u64;
    write_atomic(&dir.join("session.json"), &json)?;
    // Older tensor files are no longer referenced.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let n = entry.file_name().to_string_lossy().into_owned();
            if n.starts_with("tensors-")
                && n.ends_with(".safetensors")
                && Some(&n) != tensor_file.as_ref()
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(SaveReport {
        path: dir.to_path_buf(),
        bindings: state.bindings.len(),
        tensors: tensors.len(),
        bytes,
        not_restorable: Vec::new(),
    })
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let done = std::fs::write(&tmp, data)
        .map_err(|e| io_err("write", &tmp, e))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| io_err("replace", path, e)));
    if done.is_err() {
        // A failed save leaves no temporary file behind.
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Removes the temporary files (`*.tmp`) an interrupted save left in a session
/// directory; returns how many. Called for every saved session on start.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "tmp") && e.path().is_file())
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Reads the `session.json` of a session directory.
pub fn read_state(dir: &Path) -> Result<StateFile, String> {
    let path = dir.join("session.json");
    let text = std::fs::read(&path).map_err(|e| io_err("read", &path, e))?;
    let state: StateFile =
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if state.version != STATE_VERSION {
        return Err(format!(
            "{}: format version {} is not supported (this build reads version {STATE_VERSION})",
            path.display(),
            state.version
        ));
    }
    Ok(state)
}

/// Restores the workspace saved in `dir`. Only an unreadable `session.json`
/// fails the whole restore; a value that cannot be restored (its tensor
/// missing, corrupt or of the wrong type, its model node invalid, the tensor
/// file unreadable) is left out and named in [`Restored::skipped`] with the
/// reason, and everything else is restored.
pub fn restore(dir: &Path) -> Result<(StateFile, Restored), String> {
    let state = read_state(dir)?;
    let tensors = read_tensors(dir, &state);
    let take = |key: &str| -> Result<Tensor, String> {
        match &tensors {
            Err(why) => Err(why.clone()),
            Ok(map) => map
                .get(key)
                .cloned()
                .unwrap_or_else(|| Err(format!("tensor `{key}` is missing from the tensor file"))),
        }
    };
    let models = mlpl_lang::nn::persist::rebuild_each(&state.models);
    let mut ws = Workspace::new();
    let mut skipped = Vec::new();
    for b in &state.bindings {
        match restore_binding(b, &take, &models) {
            Ok(Some(v)) => {
                ws.bindings.insert(binding_name(b).to_string(), v);
            }
            Ok(None) => skipped.push(model_not_restorable(binding_name(b))),
            Err(why) => skipped.push(format!("`{}` was not restored: {why}", binding_name(b))),
        }
    }
    ws.tracked = state
        .tracked
        .iter()
        .filter(|n| ws.bindings.contains_key(*n))
        .cloned()
        .collect();
    ws.frozen = state
        .frozen
        .iter()
        .filter(|n| ws.bindings.contains_key(*n))
        .cloned()
        .collect();
    ws.model_counter = state.model_counter;
    ws.experiments = state.experiments.clone();
    for f in &state.functions {
        match parse_function(f) {
            Ok(def) => {
                ws.functions
                    .insert(f.name.clone(), std::sync::Arc::new(def));
            }
            Err(why) => skipped.push(why),
        }
    }
    for o in &state.optim {
        let moments = take(&o.m).and_then(|m| match &o.v {
            Some(k) => take(k).map(|v| (m, Some(v))),
            None => Ok((m, None)),
        });
        match moments {
            Ok((m, v)) => {
                ws.optim.insert(
                    (o.optimizer.clone(), o.param.clone()),
                    OptimState {
                        m,
                        v,
                        steps: o.steps,
                    },
                );
            }
            Err(why) => skipped.push(format!(
                "the {} state of `{}` was not restored (its optimizer starts afresh): {why}",
                o.optimizer, o.param
            )),
        }
    }
    let restored = Restored {
        ws,
        last_seq: state.last_seq,
        runs: state.runs,
        skipped,
    };
    Ok((state, restored))
}

/// The tensors of the tensor file, each or why it cannot be read; `Err` when
/// the file as a whole cannot be read.
fn read_tensors(
    dir: &Path,
    state: &StateFile,
) -> Result<HashMap<String, Result<Tensor, String>>, String> {
    let mut tensors = HashMap::new();
    let Some(f) = &state.tensors else {
        return Ok(tensors);
    };
    if f.contains(['/', '\\']) || f.starts_with('.') {
        return Err(format!("invalid tensor file name `{f}`"));
    }
    let p = dir.join(f);
    let bytes = std::fs::read(&p).map_err(|e| io_err("read", &p, e))?;
    let st = SafeTensors::deserialize(&bytes)
        .map_err(|e| format!("{} is not a safetensors file: {e}", p.display()))?;
    for (key, view) in st.tensors() {
        let t = tensor_of(&key, &view);
        tensors.insert(key, t);
    }
    Ok(tensors)
}

/// One tensor of the file, checked: float32, as many elements as its shape says.
fn tensor_of(key: &str, view: &TensorView<'_>) -> Result<Tensor, String> {
    if view.dtype() != Dtype::F32 {
        return Err(format!("tensor `{key}` is {:?}, not float32", view.dtype()));
    }
    let shape = view.shape().to_vec();
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= mlpl_lang::value::MAX_ELEMENTS)
        .ok_or_else(|| format!("tensor `{key}` is too large"))?;
    if numel * 4 != view.data().len() {
        return Err(format!("tensor `{key}` has the wrong number of elements"));
    }
    let data: Vec<f32> = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok(Tensor::from_vec(shape, data))
}

fn binding_name(b: &Binding) -> &str {
    match b {
        Binding::Array { name, .. }
        | Binding::String { name, .. }
        | Binding::Tokenizer { name, .. }
        | Binding::Model { name, .. } => name,
    }
}

/// The value of one saved binding; `Ok(None)` for a model saved without its
/// structure.
fn restore_binding(
    b: &Binding,
    take: &dyn Fn(&str) -> Result<Tensor, String>,
    models: &[Result<std::sync::Arc<mlpl_lang::nn::Layer>, String>],
) -> Result<Option<Value>, String> {
    Ok(Some(match b {
        Binding::Array {
            exact,
            tensor,
            axes,
            placed,
            ..
        } => {
            let mut a = match (exact, tensor) {
                (Some(x), _) => {
                    Array::exact(json_num(x).ok_or_else(|| "invalid exact value".to_string())?)
                }
                (None, Some(key)) => Array::from_tensor(take(key)?),
                (None, None) => return Err("no value saved".to_string()),
            };
            if let Some(names) = axes {
                if names.len() != a.rank() {
                    return Err(format!(
                        "{} axis names for an array of rank {}",
                        names.len(),
                        a.rank()
                    ));
                }
            }
            a = a.with_names(axes.clone());
            if let Some(t) = placed.as_deref().and_then(DeviceTarget::parse) {
                a = a.with_placement(Placement::Placed(t));
            }
            Value::Array(a)
        }
        Binding::String { value, .. } => Value::string(value.as_str()),
        Binding::Tokenizer { tokenizer, .. } => {
            Value::Tokenizer(std::sync::Arc::new(tokenizer.clone()))
        }
        Binding::Model { node, .. } => match node {
            Some(i) => match models.get(*i) {
                Some(Ok(layer)) => Value::Model(mlpl_lang::value::Model(layer.clone())),
                Some(Err(why)) => return Err(why.clone()),
                None => return Err(format!("model node {i} is missing from `models`")),
            },
            None => return Ok(None),
        },
    }))
}

/// Session directories under a state directory, by session id (directories
/// whose name is a valid id and that hold a `session.json`).
pub fn saved_sessions(state_dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if super::valid_id(&name) && path.is_dir() {
            remove_stale_temps(&path);
        }
        if super::valid_id(&name) && path.join("session.json").is_file() {
            out.insert(name, path);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mlpl-persist-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn stale_temporary_files_are_removed_when_sessions_are_listed() {
        let d = temp("stale-tmp");
        let s = d.join("s-abc");
        std::fs::create_dir_all(&s).unwrap();
        std::fs::write(s.join("session.json"), "{}").unwrap();
        std::fs::write(s.join("tensors.tmp"), vec![0u8; 1000]).unwrap();
        std::fs::write(s.join("keep.safetensors"), b"x").unwrap();
        let _ = saved_sessions(&d);
        assert!(!s.join("tensors.tmp").exists());
        assert!(s.join("keep.safetensors").exists());
        assert!(s.join("session.json").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn round_trips_arrays_strings_tokenizers_and_optimizer_state() {
        let mut ws = Workspace::new();
        let w = Array::from_vec(vec![2, 2], vec![1.0, 2.0, f32::NAN, -0.5])
            .with_names(Some(vec![Some("in".into()), Some("out".into())]));
        ws.assign("W", Value::Array(w), true);
        ws.assign("n", Value::exact(0.1), false);
        ws.assign("inf", Value::exact(f64::INFINITY), false);
        ws.assign("s", Value::string("héllo"), false);
        ws.assign(
            "tok",
            Value::Tokenizer(std::sync::Arc::new(Tokenizer::Bytes)),
            false,
        );
        ws.frozen.insert("W".into());
        ws.optim.insert(
            ("adam".into(), "W".into()),
            OptimState {
                m: Tensor::from_vec(vec![2, 2], vec![0.1; 4]),
                v: Some(Tensor::from_vec(vec![2, 2], vec![0.2; 4])),
                steps: 7,
            },
        );
        let dir = temp("rt");
        let rep = save(&dir, "abc", 12, 3, &ws).unwrap();
        assert_eq!(rep.tensors, 3);
        assert!(rep.not_restorable.is_empty());
        // A second save replaces the tensor file.
        save(&dir, "abc", 13, 4, &ws).unwrap();
        let files = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(files, 2);
        let (state, r) = restore(&dir).unwrap();
        assert_eq!(state.session, "abc");
        assert_eq!((r.last_seq, r.runs), (13, 4));
        let w = r.ws.get("W").unwrap().as_array().unwrap();
        assert_eq!(w.shape(), &[2, 2]);
        assert_eq!(w.axis_name(1), Some("out"));
        let d = w.to_f32();
        assert_eq!((d[0], d[1], d[3]), (1.0, 2.0, -0.5));
        assert!(d[2].is_nan());
        let n = r.ws.get("n").unwrap().as_array().unwrap();
        assert_eq!(n.exact_value(), Some(0.1));
        let inf = r.ws.get("inf").unwrap().as_array().unwrap();
        assert_eq!(inf.exact_value(), Some(f64::INFINITY));
        assert_eq!(r.ws.get("s").unwrap().display(), "héllo");
        assert!(matches!(r.ws.get("tok"), Some(Value::Tokenizer(_))));
        assert!(r.ws.tracked.contains("W") && r.ws.frozen.contains("W"));
        let st = &r.ws.optim[&("adam".to_string(), "W".to_string())];
        assert_eq!(st.steps, 7);
        assert_eq!(st.v.as_ref().unwrap().to_vec(), vec![0.2; 4]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn corrupt_files_are_errors_not_panics() {
        let dir = temp("bad");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(restore(&dir).is_err());
        std::fs::write(dir.join("session.json"), "{not json").unwrap();
        assert!(restore(&dir).is_err());
        let mut ws = Workspace::new();
        ws.assign(
            "x",
            Value::Array(Array::from_vec(vec![3], vec![1.0; 3])),
            false,
        );
        ws.assign("s", Value::string("kept"), false);
        save(&dir, "abc", 0, 0, &ws).unwrap();
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_name().to_string_lossy().ends_with(".safetensors") {
                std::fs::write(e.path(), b"garbage").unwrap();
            }
        }
        // A corrupt tensor file costs the values in it, named; the rest stays.
        let (_, r) = restore(&dir).unwrap();
        assert_eq!(r.ws.get("s").unwrap().display(), "kept");
        assert!(r.ws.get("x").is_none());
        assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
        assert!(
            r.skipped[0].starts_with("`x` was not restored: ")
                && r.skipped[0].contains("is not a safetensors file"),
            "{:?}",
            r.skipped
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
