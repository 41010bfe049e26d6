//! What a session shows of its values: the Variables view (name, kind, shape with
//! axis names, device, a short preview) and the bodies of `value` events.

use serde::{Deserialize, Serialize};

use super::events::EventBody;
use mlpl_lang::display;
use mlpl_lang::eval::Workspace;
use mlpl_lang::value::{named_shape, Array, Placement, Value};

/// Longest `text` in a `value` event.
const MAX_TEXT: usize = 1 << 20;
/// Elements shown in a preview.
const PREVIEW_ELEMENTS: usize = 6;
/// Characters of a string shown in a preview.
const PREVIEW_CHARS: usize = 60;

/// One variable of a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VariableInfo {
    /// The variable's name.
    pub name: String,
    /// `array`, `string`, `model` or `tokenizer`.
    pub kind: String,
    /// The shape of an array.
    pub shape: Option<Vec<usize>>,
    /// Axis names of an array (`null` entries for unnamed axes); `null` when none is named.
    pub axes: Option<Vec<Option<String>>>,
    /// The shape as MLPL prints it, e.g. `[batch=32, 10]`.
    pub named_shape: Option<String>,
    /// `f32` or `exact` for arrays.
    pub dtype: Option<String>,
    /// Where an array lives: `cpu` for floating arrays in this build, or the
    /// target it was placed on with `to_device`.
    pub device: Option<String>,
    /// Whether the array was placed explicitly.
    pub placed: bool,
    /// A tracked (trainable) parameter.
    pub param: bool,
    /// A frozen parameter.
    pub frozen: bool,
    /// A name the runtime generated (a model's parameter, such as
    /// `__linear_W_0`; LANGUAGE Appendix A) rather than one the program assigned.
    #[serde(default)]
    pub generated: bool,
    /// Parameter names of a model.
    pub parameters: Option<Vec<String>>,
    /// A one-line preview.
    pub preview: String,
}

/// The variables of a workspace, sorted by name.
pub fn variables(ws: &Workspace) -> Vec<VariableInfo> {
    ws.names()
        .into_iter()
        .filter_map(|name| ws.get(name).map(|v| variable(ws, name, v)))
        .collect()
}

fn variable(ws: &Workspace, name: &str, v: &Value) -> VariableInfo {
    let mut info = VariableInfo {
        name: name.to_string(),
        kind: v.kind_name().to_string(),
        shape: None,
        axes: None,
        named_shape: None,
        dtype: None,
        device: None,
        placed: false,
        param: ws.tracked.contains(name),
        frozen: ws.frozen.contains(name),
        generated: name.starts_with("__"),
        parameters: None,
        preview: preview(v),
    };
    match v {
        Value::Array(a) => {
            info.shape = Some(a.shape().to_vec());
            info.axes = a.names().map(<[Option<String>]>::to_vec);
            info.named_shape = Some(named_shape(a));
            info.dtype = Some(dtype(a).to_string());
            let (device, placed) = match a.placement() {
                Placement::Floating => ("cpu".to_string(), false),
                Placement::Placed(t) => (t.to_string(), true),
            };
            info.device = Some(device);
            info.placed = placed;
        }
        Value::Model(m) => info.parameters = Some(m.0.parameters()),
        Value::Str(_) | Value::Tokenizer(_) => {}
    }
    info
}

fn dtype(a: &Array) -> &'static str {
    if a.is_exact() {
        "exact"
    } else {
        "f32"
    }
}

/// A one-line preview of a value: the first few elements of an array, the start
/// of a string, a model's parameter count or a tokenizer's description.
pub fn preview(v: &Value) -> String {
    match v {
        Value::Array(a) => array_preview(a),
        Value::Str(s) => {
            let mut p: String = s.chars().take(PREVIEW_CHARS).collect();
            if s.chars().nth(PREVIEW_CHARS).is_some() {
                p.push('…');
            }
            format!("{p:?}")
        }
        Value::Model(m) => {
            let n = m.0.parameters().len();
            format!("<model: {n} parameter{}>", if n == 1 { "" } else { "s" })
        }
        Value::Tokenizer(t) => format!("<tokenizer: {}>", t.describe()),
    }
}

fn array_preview(a: &Array) -> String {
    if let Some(x) = a.exact_value() {
        return display::format_f64(x);
    }
    let data: Vec<String> = match a.tensor_ref() {
        Some(t) => t
            .host()
            .iter()
            .take(PREVIEW_ELEMENTS)
            .map(|&x| display::format_f32(x))
            .collect(),
        None => Vec::new(),
    };
    if a.rank() == 0 {
        return data.into_iter().next().unwrap_or_default();
    }
    let more = if a.numel() > PREVIEW_ELEMENTS {
        ", …"
    } else {
        ""
    };
    format!("[{}{more}]", data.join(", "))
}

/// The body of a `value` event for `v`, named `name` when the run's last
/// statement assigned it.
pub fn value_event(name: Option<String>, v: &Value) -> EventBody {
    let mut text = v.display();
    let truncated = text.len() > MAX_TEXT;
    if truncated {
        let mut cut = MAX_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let (shape, axes, ns, dt) = match v {
        Value::Array(a) => (
            Some(a.shape().to_vec()),
            a.names().map(<[Option<String>]>::to_vec),
            Some(named_shape(a)),
            Some(dtype(a).to_string()),
        ),
        _ => (None, None, None, None),
    };
    EventBody::Value {
        name,
        kind: v.kind_name().to_string(),
        shape,
        axes,
        named_shape: ns,
        dtype: dt,
        preview: preview(v),
        text,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews() {
        assert_eq!(preview(&Value::exact(3.0)), "3");
        let a = Array::from_vec(vec![8], (0..8).map(|x| x as f32).collect());
        assert_eq!(preview(&Value::Array(a)), "[0, 1, 2, 3, 4, 5, …]");
        let a = Array::from_vec(vec![2], vec![0.5, 1.5]);
        assert_eq!(preview(&Value::Array(a)), "[0.5, 1.5]");
        assert_eq!(preview(&Value::string("hi")), "\"hi\"");
        let long = "x".repeat(100);
        assert!(preview(&Value::string(long.as_str())).ends_with("…\""));
    }

    #[test]
    fn variables_report_shapes_names_and_params() {
        let mut ws = Workspace::new();
        let a = Array::from_vec(vec![2, 3], vec![0.0; 6])
            .with_names(Some(vec![Some("batch".into()), None]));
        ws.assign("W", Value::Array(a), true);
        ws.assign("s", Value::string("text"), false);
        let vars = variables(&ws);
        assert_eq!(vars.len(), 2);
        assert_eq!(vars[0].name, "W");
        assert!(vars[0].param);
        assert_eq!(vars[0].shape, Some(vec![2, 3]));
        assert_eq!(vars[0].named_shape.as_deref(), Some("[batch=2, 3]"));
        assert_eq!(vars[0].device.as_deref(), Some("cpu"));
        assert!(!vars[0].generated);
        assert_eq!(vars[1].kind, "string");
    }

    #[test]
    fn model_parameters_are_marked_generated() {
        let mut it = mlpl_lang::eval::Interp::new(Workspace::new());
        let program = mlpl_syntax::parse("m = linear(2, 3, 0)").program;
        it.run(&program).unwrap();
        let vars = variables(&it.ws);
        let w = vars
            .iter()
            .find(|v| v.name.starts_with("__linear_W_"))
            .unwrap();
        assert!(w.generated && w.param, "{w:?}");
        let m = vars.iter().find(|v| v.name == "m").unwrap();
        assert!(!m.generated);
    }
}
