//! The workspace: everything a program can observe between statements (LANGUAGE §5.6).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::data::experiments::RunRecord;
use crate::value::{DeviceTarget, Value};

/// Bindings and the state that outlives a single statement.
#[derive(Debug, Default)]
pub struct Workspace {
    /// One namespace for every kind of value.
    pub bindings: HashMap<String, Value>,
    /// Names of tracked parameters (LANGUAGE §12.1).
    pub tracked: HashSet<String>,
    /// Tracked parameters that optimizers skip.
    pub frozen: HashSet<String>,
    /// Next id handed to a parameterised layer (LANGUAGE §11.1).
    pub model_counter: u64,
    /// Experiment runs recorded in this workspace (LANGUAGE §17).
    pub experiments: Vec<RunRecord>,
    /// Where file builtins resolve paths (LANGUAGE §16.1); `None` disables them.
    pub data_dir: Option<PathBuf>,
    /// Where experiment records are written, if anywhere.
    pub exp_dir: Option<PathBuf>,
    /// The device for code outside any `device` block.
    pub default_device: Option<DeviceTarget>,
    /// Optimizer state per (optimizer, parameter name) (LANGUAGE §12.5).
    pub optim: HashMap<(String, String), OptimState>,
    /// User-defined functions by name (docs/language.md, "Functions").
    pub functions: HashMap<String, std::sync::Arc<mlpl_syntax::FnDef>>,
    /// The calibration cache `estimate_train` reads (loaded by the runner; none
    /// in a bare interpreter, which then uses LANGUAGE §15's formulas).
    pub calibration: Option<std::sync::Arc<crate::estimate::calibration::Calibration>>,
}

/// The state one optimizer keeps for one parameter.
#[derive(Clone, Debug)]
pub struct OptimState {
    /// First moment (Adam, AdamW) or velocity (momentum SGD).
    pub m: mlpl_devices::Tensor,
    /// Second moment (Adam, AdamW only).
    pub v: Option<mlpl_devices::Tensor>,
    /// Updates applied to this parameter by this optimizer.
    pub steps: u64,
}

impl Workspace {
    /// An empty workspace.
    pub fn new() -> Workspace {
        Workspace::default()
    }

    /// The value bound to `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.bindings.get(name)
    }

    /// Binds `name`, applying the tracking rules of LANGUAGE §5.7 (`track` is true
    /// when the right-hand side was syntactically `param[...]`).
    pub fn assign(&mut self, name: &str, value: Value, track: bool) {
        if track {
            self.tracked.insert(name.to_string());
        } else if !matches!(value, Value::Array(_)) {
            self.tracked.remove(name);
            self.frozen.remove(name);
        }
        super::ops::note_rebind(name, self.bindings.get(name), &value);
        self.bindings.insert(name.to_string(), value);
    }

    /// Names of all bindings, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.bindings.keys().map(|s| s.as_str()).collect();
        v.sort_unstable();
        v
    }
}
