//! The model DSL (LANGUAGE §11): layers, parameter naming and creation,
//! application (every computation goes through `eval::ops`, so gradients flow),
//! model surgery, checkpoint keys and feasibility costs.
//!
//! Layout: [`layers`] (the tree), [`init`] (ids, names, initial values),
//! [`apply`] (the forward pass and its input checks), [`attention`], [`rope`],
//! [`moe`] (with [`route`], where its tokens go), [`engram`] (Engram conditional memory), [`dropout`], [`generate`] (decoding with a key/value cache), [`hf`] (Hugging Face checkpoints), [`decay`] (AdamW's weight-decay groups), [`clone`] (`clone_model`), [`lora`], [`families`]
//! (`perturb_params`, `reinit`), [`checkpoint`] (structural keys), [`persist`] (the structure as data, for
//! saved sessions) and
//! [`estimate`] (FLOPs and activations of `estimate_train`).

pub mod apply;
pub mod attention;
pub mod checkpoint;
pub mod clone;
pub mod decay;
pub mod dropout;
pub mod engram;
pub mod estimate;
pub mod families;
pub mod generate;
pub mod hf;
pub mod init;
pub mod layers;
pub mod lora;
pub mod moe;
pub mod persist;
pub mod rope;
pub mod route;

pub use decay::{DecayGroup, ParamClass};
pub use layers::{
    Activation, Extent, Layer, ParamSpec, LN_EPS, MAX_MODEL_DEPTH, MAX_MODEL_LAYERS, RMS_EPS,
};

use crate::eval::{loss, Interp};
use crate::value::{Array, Value};
use mlpl_diag::code;
use mlpl_diag::{Diagnostic, Span};

/// Reads the parameter `name` of a model: its array, which is a trainable leaf
/// while a loss that differentiates it is being recorded (LANGUAGE §12.2).
/// E0101 when the name is no longer bound, E0301 when it holds another kind.
pub fn param(it: &mut Interp, name: &str, span: Span) -> Result<Array, Diagnostic> {
    let Some(v) = it.ws.get(name).cloned() else {
        return Err(crate::errors::undefined_name(
            name,
            span,
            "a parameter of this model is no longer bound",
            [],
        )
        .note("model parameters live in the workspace under generated names"));
    };
    match loss::read_variable(it, name, v) {
        Value::Array(a) => Ok(a),
        other => Err(Diagnostic::of(code::E0301)
            .at(
                span,
                format!("parameter `{name}` holds a {}", other.kind_name()),
            )
            .note("model parameters must stay arrays")),
    }
}
