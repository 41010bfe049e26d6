//! Model surgery (LANGUAGE §10.14): copies, freezing, LoRA students, in-place
//! noise and re-initialisation, and reading the embedding table.

use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::eval::Call;
use crate::nn::families::{self, Family};
use crate::nn::{clone, layers::Layer, lora};
use crate::value::{Model as Handle, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "clone_model",
        params: &[req("m", Model)],
        summary: "an independent deep copy of a model",
        doc: "`clone_model(m)` copies every layer with new parameter names (new ids, depth first); values and placements are copied and the copies are tracked, but frozen flags are not. Training the copy leaves m unchanged.",
        example: "m = linear(2, 2, 0)\nc = clone_model(m)\napply(c, [[1, 0]]) - apply(m, [[1, 0]])",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.14",
        run: clone_model,
        shape: Some(super::surgery_shapes::clone_model),
    },
    Builtin {
        name: "freeze",
        params: &[req("m", Model)],
        summary: "stop optimizers from updating a model",
        doc: "`freeze(m)` adds every parameter of m to the frozen set (idempotent) and returns 0. Optimizers skip frozen parameters; `grad` still differentiates them.",
        example: "m = linear(2, 1, 0)\nfreeze(m)",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.14",
        run: freeze,
        shape: Some(super::surgery_shapes::freeze),
    },
    Builtin {
        name: "unfreeze",
        params: &[req("m", Model)],
        summary: "let optimizers update a model again",
        doc: "`unfreeze(m)` removes every parameter of m from the frozen set and returns 0; `unfreeze(student)` after `lora` re-enables full fine-tuning.",
        example: "m = linear(2, 1, 0)\nfreeze(m)\nunfreeze(m)",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.14",
        run: unfreeze,
        shape: Some(super::surgery_shapes::unfreeze),
    },
    Builtin {
        name: "lora",
        params: &[req("m", Model), req("rank", Scalar), req("alpha", Scalar), req("seed", Seed)],
        summary: "a LoRA student of a model",
        doc: "`lora(m, rank, alpha, seed)` clones m and wraps every linear layer (the i-th depth first) with adapters A `[in, rank]` = randn(seed + i)/√in and B `[rank, out]` = 0, computing x·W + (alpha/rank)·(x·A)·B + b. Every student parameter except the adapters is frozen, so the student starts out computing exactly what m computes. E0213 for a rank of 0, a non-integer rank or one above min(in, out) of a linear layer; E0310 when m already has adapters.",
        example: "m = chain(linear(4, 3, 0), relu_layer(), linear(3, 2, 1))\ns = lora(m, 2, 4, 7)\napply(s, [[1, 0, 2, 0]]) - apply(m, [[1, 0, 2, 0]])",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.14",
        run: lora_builtin,
        shape: Some(super::surgery_shapes::lora),
    },
    Builtin {
        name: "perturb_params",
        params: &[req("m", Model), req("family", Str), req("sigma", Scalar), req("seed", Seed)],
        summary: "add Gaussian noise to a family of parameters",
        doc: "`perturb_params(m, family, sigma, seed)` adds sigma·randn(seed + i, shape) in place to the i-th parameter of the family, in parameter order, and returns 0. Families: \"all_layers\", \"attention_only\", \"mlp_only\", \"embed_and_head\" (LANGUAGE §11.8); any other is E0107.",
        example: "m = linear(2, 2, 0)\nperturb_params(m, \"all_layers\", 0.01, 3)",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.14",
        run: perturb_params,
        shape: Some(super::surgery_shapes::perturb_params),
    },
    Builtin {
        name: "reinit",
        params: &[req("m", Model), req("family", Str), req("std", Scalar), req("seed", Seed)],
        summary: "redraw a family of weights at a given scale",
        doc: "`reinit(m, family, std, seed)` sets the i-th parameter of the family, in parameter order and skipping biases, normalisation gains and LoRA adapters, to std·randn(seed + i, shape), in place; returns 0. E0107 for an unknown family; E0401 for std < 0.",
        example: "m = chain(embed(8, 4, 0), linear(4, 8, 1))\nreinit(m, \"all_layers\", 0.02, 5)",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.14",
        run: reinit,
        shape: Some(super::surgery_shapes::reinit),
    },
    Builtin {
        name: "embed_table",
        params: &[req("m", Model)],
        summary: "a copy of the first embedding table",
        doc: "`embed_table(m)` returns a copy `[vocab, d]` of the table of the first `embed` layer of m, depth first, left to right. E0308 when m has no embedding layer.",
        example: "embed_table(chain(embed(4, 2, 0), linear(2, 4, 1)))",
        diff: Diff::Effect,
        facts: Facts::NONE,
        section: "10.14",
        run: embed_table,
        shape: Some(super::surgery_shapes::embed_table),
    },
];

fn clone_model(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    Ok(Value::Model(Handle(clone::clone_model(c.it, &m))))
}

fn freeze(c: &mut Call) -> Result<Value, Diagnostic> {
    let names = c.model(0)?.0.parameters();
    c.it.ws.frozen.extend(names);
    Ok(Value::exact(0.0))
}

fn unfreeze(c: &mut Call) -> Result<Value, Diagnostic> {
    for name in c.model(0)?.0.parameters() {
        c.it.ws.frozen.remove(&name);
    }
    Ok(Value::exact(0.0))
}

fn lora_builtin(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    super::site::check_not_lora_student(c, &m)?;
    let r = c.scalar(1)?;
    super::site::check_lora_rank(c, r, Some(&m))?;
    let alpha = c.scalar(2)?;
    let seed = c.seed(3)?;
    let student = lora::lora(c.it, &m, r as usize, alpha, seed);
    Ok(Value::Model(Handle(student)))
}

fn family(c: &Call, i: usize) -> Result<Family, Diagnostic> {
    let name = c.string(i)?;
    Family::parse(name).ok_or_else(|| super::site::unknown_family(c, i, name))
}

fn perturb_params(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let fam = family(c, 1)?;
    let sigma = c.scalar(2)?;
    let seed = c.seed(3)?;
    families::perturb(c.it, &m, fam, sigma, seed);
    Ok(Value::exact(0.0))
}

fn reinit(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let fam = family(c, 1)?;
    let std = c.scalar(2)?;
    super::site::check_std(c, 2, std)?;
    let seed = c.seed(3)?;
    families::reinit(c.it, &m, fam, std, seed);
    Ok(Value::exact(0.0))
}

fn embed_table(c: &mut Call) -> Result<Value, Diagnostic> {
    let m = c.model(0)?.0.clone();
    let mut first = None;
    m.walk_distinct(&mut |l| {
        if let (Layer::Embed(e), None) = (l, &first) {
            first = Some(format!("__embed_E_{}", e.id));
        }
    });
    let Some(name) = first else {
        return Err(super::site::no_embedding_error(c));
    };
    let span = c.span;
    let table = crate::nn::param(c.it, &name, span)?;
    Ok(Value::Array(table.detached()))
}
