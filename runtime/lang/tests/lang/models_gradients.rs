//! Finite-difference checks of `apply` for every layer (LANGUAGE §11.2: every
//! layer is differentiable with respect to its parameters and its input, for
//! every number of heads), through the real interpreter and `grad`.
//!
//! Each case differentiates a scalar loss (usually sum(y ⊙ y) of the model's
//! output y) with respect to model parameters (by their generated names) and to
//! the input X, and compares with central differences evaluated in float32
//! (the checker of `finite_differences.rs`).

use mlpl_lang::eval::{Interp, Workspace};

use crate::common::run_value as run;
use crate::finite_differences::Check;

/// Checks sum(apply(m, X)²) for the model `m` built by `setup`.
fn check(setup: &str, wrt: &[&str]) {
    check_loss(setup, "sum(apply(m, X) * apply(m, X))", wrt);
}

/// Checks `loss` for the model `m` and input `X` built by `setup`.
fn check_loss(setup: &str, loss: &str, wrt: &[&str]) {
    Check {
        setup,
        loss: loss.into(),
        wrt,
        training: false,
        h: 3e-3,
        points: 12,
        nonzero: true,
    }
    .run();
}

/// sum(y³): not invariant under normalisations (sum(y²) of an RMS norm is constant).
const CUBES: &str = "sum(apply(m, X) * apply(m, X) * apply(m, X))";

#[test]
fn linear_and_chains() {
    check(
        "m = linear(3, 2, 0)\nX = randn(1005, [4, 3])",
        &["__linear_W_0", "__linear_b_0", "X"],
    );
    check(
        "m = linear(3, 2, 0)\nX = randn(1005, [2, 2, 3])",
        &["__linear_W_0", "X"],
    );
    check(
        "m = chain(linear(2, 3, 5), tanh_layer(), linear(3, 1, 6))\nX = [[1, 2], [-1, 0.5]]",
        &[
            "__linear_W_0",
            "__linear_b_0",
            "__linear_W_1",
            "__linear_b_1",
            "X",
        ],
    );
}

#[test]
fn embed_table_rows() {
    check(
        "m = chain(embed(5, 3, 1), tanh_layer())\nX = [[0, 4, 4], [2, 1, 0]]",
        &["__embed_E_0"],
    );
}

#[test]
fn attention_every_head_count() {
    let x = "X = randn(1003, [3, 4]) * 0.7";
    for heads in [1, 2, 4] {
        for kind in ["attention", "causal_attention"] {
            check(
                &format!("m = {kind}(4, {heads}, 2)\n{x}"),
                &[
                    "__attn_Wq_0",
                    "__attn_Wk_0",
                    "__attn_Wv_0",
                    "__attn_Wo_0",
                    "X",
                ],
            );
        }
    }
}

#[test]
fn attention_grouped_query_rope_and_batches() {
    check(
        "m = causal_attention(8, 4, 2, 2)\nX = randn(1003, [2, 3, 8]) * 0.5",
        &[
            "__attn_Wq_0",
            "__attn_Wk_0",
            "__attn_Wv_0",
            "__attn_Wo_0",
            "X",
        ],
    );
    check(
        "m = attention(8, 2, 4, 1, rope(4, 100))\nX = randn(1003, [3, 8]) * 0.5",
        &[
            "__attn_Wq_0",
            "__attn_Wk_0",
            "__attn_Wv_0",
            "__attn_Wo_0",
            "X",
        ],
    );
    check(
        "m = causal_attention(4, 2, 4, 2, rope(2, 10000))\nX = randn(1007, [2, 3, 4]) * 0.5",
        &["__attn_Wq_0", "__attn_Wk_0", "X"],
    );
}

#[test]
fn norms() {
    check_loss("m = rms_norm(3)\nX = randn(1003, [2, 3])", CUBES, &["X"]);
    check_loss(
        "m = rms_norm(3, 1)\nX = randn(1003, [2, 2, 3])",
        CUBES,
        &["__rms_g_0", "X"],
    );
    check_loss(
        "m = layer_norm(3)\nX = randn(1004, [2, 3])",
        CUBES,
        &["__ln_g_0", "__ln_b_0", "X"],
    );
    check(
        "m = chain(layer_norm(3), linear(3, 2, 1))\nX = randn(1004, [2, 3])",
        &["__ln_g_0", "__ln_b_0", "X"],
    );
}

#[test]
fn activations_and_softmax() {
    let x = "X = [[0.5, -0.7, 1.2], [-1.5, 0.3, 0.9]]";
    for layer in [
        "tanh_layer()",
        "relu_layer()",
        "gelu_layer()",
        "silu_layer()",
        "softmax_layer()",
    ] {
        check(
            &format!("m = chain(linear(3, 3, 1), {layer})\n{x}"),
            &["__linear_W_0", "X"],
        );
    }
}

#[test]
fn dropout_in_training_mode() {
    Check {
        setup: "m = chain(linear(3, 4, 1), dropout(0.4, 9))\nX = randn(1002, [5, 3])",
        loss: "sum(apply(m, X) * apply(m, X))".into(),
        wrt: &["__linear_W_0", "X"],
        training: true,
        h: 3e-3,
        points: 12,
        nonzero: true,
    }
    .run();
}

#[test]
fn swiglu_and_rope() {
    check(
        "m = swiglu(4, 6, 3)\nX = randn(1005, [2, 3, 4])",
        &["__swiglu_Wg_0", "__swiglu_Wu_0", "__swiglu_Wd_0", "X"],
    );
    check("m = rope(4, 100)\nX = randn(1005, [2, 3, 4])", &["X"]);
}

#[test]
fn mixture_of_experts_and_its_aux_loss() {
    for k in [1, 2] {
        check(
            &format!("m = moe(4, 3, {k}, 5, 8)\nX = randn(1006, [5, 4]) * 0.5"),
            &["__moe_R_0", "__moe_Wg_0", "__moe_Wu_0", "__moe_Wd_0", "X"],
        );
    }
    Check {
        setup: "m = moe(4, 3, 2, 5, 8)\nX = randn(1006, [5, 4]) * 0.5",
        loss: "sum(apply(m, X) * apply(m, X)) + 3 * aux_loss(m)".into(),
        wrt: &["__moe_R_0", "X"],
        training: false,
        h: 1e-3,
        points: 12,
        nonzero: true,
    }
    .run();
    Check {
        setup: "m = moe(4, 3, 1, 5, 8)\nX = randn(1006, [5, 4]) * 0.5",
        loss: "0 * sum(apply(m, X)) + aux_loss(m)".into(),
        wrt: &["__moe_R_0"],
        training: false,
        h: 1e-3,
        points: 12,
        nonzero: true,
    }
    .run();
}

#[test]
fn lora_adapters_and_base() {
    check(
        "m = lora(chain(linear(4, 3, 0), tanh_layer()), 2, 3, 1)\nperturb_params(m, \"all_layers\", 0.3, 9)\nX = randn(1002, [3, 4])",
        &["__lora_A_2", "__lora_B_2", "__linear_W_1", "__linear_b_1", "X"],
    );
}

#[test]
fn residual_transformer_block() {
    check(
        "m = chain(residual(chain(rms_norm(4, 1), causal_attention(4, 2, 1))), residual(chain(layer_norm(4), swiglu(4, 8, 3))))\nX = randn(1005, [2, 3, 4])",
        &["__rms_g_0", "__attn_Wq_1", "__attn_Wo_1", "__ln_g_2", "__swiglu_Wd_3", "X"],
    );
    check(
        "m = chain(embed(6, 4, 0), residual(causal_attention(4, 1, 1)), linear(4, 6, 2))\nX = [[0, 1, 2], [5, 4, 3]]",
        &["__embed_E_0", "__attn_Wv_1", "__linear_W_2"],
    );
}

#[test]
fn apply_keeps_the_gradient_of_every_layer_on_the_tape() {
    // A loss through a model gives the same gradient as the same computation
    // written with builtins.
    let mut it = Interp::new(Workspace::new());
    run(&mut it, "m = linear(3, 2, 0)\nX = randn(1005, [4, 3])");
    let a = run(
        &mut it,
        "grad(sum(apply(m, X) * apply(m, X)), __linear_W_0)",
    );
    let b = run(
        &mut it,
        "W = __linear_W_0\nb = __linear_b_0\ngrad(sum((matmul(X, __linear_W_0) + __linear_b_0) * (matmul(X, __linear_W_0) + __linear_b_0)), __linear_W_0)",
    );
    assert_eq!(
        a.as_array().unwrap().to_f32(),
        b.as_array().unwrap().to_f32()
    );
}
