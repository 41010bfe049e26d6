//! AdamW's weight-decay groups (LANGUAGE §12.5, docs/language.md): which
//! parameters a call of `adamw` decays, stated in the call as a group name and
//! decided by each parameter's kind in its model, never by its name.

use super::ParamSpec;

/// What a parameter is, as far as weight decay cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamClass {
    /// A weight matrix (or tensor) of a layer, or a `param[…]` variable.
    Weight,
    /// A layer's additive bias (attention sinks, additive logits, count as
    /// biases).
    Bias,
    /// A normalisation layer's gain or bias.
    Norm,
    /// An embedding table.
    Embedding,
}

impl ParamClass {
    /// The class of a model parameter, from its layer kind and role.
    pub fn of(spec: &ParamSpec) -> ParamClass {
        match (spec.kind, spec.role) {
            ("rms_norm" | "layer_norm", _) | ("attention", "qn" | "kn") => ParamClass::Norm,
            ("embed" | "pos_embed", _) => ParamClass::Embedding,
            (_, "b")
            | ("attention", "bq" | "bk" | "bv" | "bo" | "s")
            | ("moe", "bR" | "bg" | "bu" | "bd") => ParamClass::Bias,
            _ => ParamClass::Weight,
        }
    }
}

/// The parameters an `adamw` call decays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecayGroup {
    /// Every updated parameter, as PyTorch's `torch.optim.AdamW` does with one
    /// parameter group.
    All,
    /// Every parameter but biases and normalisation gains and biases (the
    /// default, LANGUAGE §12.5).
    NoBiasNorm,
    /// Every parameter but biases, normalisation parameters and embedding
    /// tables (the usual GPT recipe).
    NoBiasNormEmbed,
}

impl DecayGroup {
    /// Every group, in the order the docs list them.
    pub const ALL: [DecayGroup; 3] = [
        DecayGroup::All,
        DecayGroup::NoBiasNorm,
        DecayGroup::NoBiasNormEmbed,
    ];

    /// The group's name as written in a call.
    pub fn name(self) -> &'static str {
        match self {
            DecayGroup::All => "all",
            DecayGroup::NoBiasNorm => "no_bias_norm",
            DecayGroup::NoBiasNormEmbed => "no_bias_norm_embed",
        }
    }

    /// The group called `name`.
    pub fn parse(name: &str) -> Option<DecayGroup> {
        DecayGroup::ALL.into_iter().find(|g| g.name() == name)
    }

    /// Whether this group decays a parameter of class `class`.
    pub fn decays(self, class: ParamClass) -> bool {
        match self {
            DecayGroup::All => true,
            DecayGroup::NoBiasNorm => !matches!(class, ParamClass::Bias | ParamClass::Norm),
            DecayGroup::NoBiasNormEmbed => class == ParamClass::Weight,
        }
    }
}
