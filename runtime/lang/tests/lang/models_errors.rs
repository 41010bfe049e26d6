//! Argument and input checks of the model builtins (LANGUAGE §10.13, §10.14,
//! §11.2, §15.2) and the diagnostics they give.

use crate::common;

use common::{error_code, error_of, run_in, warning_codes};

fn text(d: &mlpl_diag::Diagnostic) -> String {
    let mut s = d.message.clone();
    if let Some(p) = &d.primary {
        s.push('\n');
        s.push_str(&p.message);
    }
    for n in &d.notes {
        s.push('\n');
        s.push_str(n);
    }
    s
}

#[test]
fn e0211_names_the_layer_the_pattern_and_the_named_shape() {
    let d = error_of("apply(linear(3, 2, 0), label(zeros([4, 5]), [\"batch\", \"\"]))");
    assert_eq!(d.code, "E0211");
    let t = text(&d);
    assert!(
        t.contains("`linear(3, 2)` expects […, 3], got [batch=4, 5]"),
        "{t}"
    );
    // The span is the input argument.
    let p = d.primary.unwrap().span;
    assert_eq!(p.start, "apply(linear(3, 2, 0), ".len());
    let d = error_of("apply(attention(4, 2, 0), zeros([4]))");
    assert!(
        text(&d).contains("`attention(4, 2)` expects [T, 4] or [B, T, 4], got [4]"),
        "{}",
        text(&d)
    );
    let d = error_of("apply(chain(linear(3, 4, 0), causal_attention(2, 1, 0, 1)), zeros([2, 3]))");
    assert!(
        text(&d).contains("`causal_attention(2, 1)` expects [T, 2] or [B, T, 2], got [2, 4]"),
        "{}",
        text(&d)
    );
}

#[test]
fn e0211_for_every_layer_with_an_input_rule() {
    for src in [
        "apply(linear(3, 2, 0), 1)",
        "apply(linear(3, 2, 0), zeros([3, 2]))",
        "apply(attention(4, 2, 0), zeros([1, 2, 3, 4]))",
        "apply(attention(4, 2, 0), zeros([3, 5]))",
        "apply(causal_attention(4, 2, 0), zeros([2, 3, 3]))",
        "apply(rms_norm(3, 1), zeros([2, 4]))",
        "apply(rms_norm(3), 2)",
        "apply(layer_norm(3), zeros([3, 2]))",
        "apply(softmax_layer(), 1)",
        "apply(swiglu(4, 8, 0), zeros([2, 3]))",
        "apply(rope(4, 100), zeros([4]))",
        "apply(rope(4, 100), zeros([3, 2]))",
        "apply(moe(4, 2, 1, 4, 0), zeros([2, 3]))",
        "apply(lora(linear(4, 2, 0), 1, 1, 0), zeros([1, 3]))",
        "attention_weights(attention(4, 2, 0), zeros([4]))",
    ] {
        assert_eq!(error_code(src), "E0211", "{src}");
    }
    // `rms_norm` without a gain accepts any width.
    assert_eq!(
        common::eval("shape(apply(rms_norm(3), ones([2, 5])))"),
        "2 5"
    );
}

#[test]
fn e0212_residual_blocks_must_keep_the_shape() {
    let d = error_of("apply(residual(linear(2, 3, 0)), [[1, 2]])");
    assert_eq!(d.code, "E0212");
    assert!(text(&d).contains("[1, 2] to [1, 3]"));
    // Checked on every path, also nested.
    assert_eq!(
        error_code("apply(chain(residual(chain(residual(linear(2, 1, 0)))) ), [[1, 2]])"),
        "E0212"
    );
}

#[test]
fn e0213_invalid_dimensions() {
    for src in [
        "linear(-1, 2, 0)",
        "linear(1.5, 2, 0)",
        "linear(2, 0 / 0, 0)",
        "embed(3, -2, 0)",
        "attention(4, 0, 0)",
        "attention(4, 3, 0)",
        "causal_attention(4, 2, 0, 0)",
        "attention(4, 4, 0, 3)",
        "attention(8, 2, 0, 2, rope(6, 100))",
        "rms_norm(-3)",
        "layer_norm(2.5)",
        "swiglu(4, 0, 0)",
        "rope(3, 100)",
        "rope(0, 100)",
        "moe(4, 0, 1, 4, 0)",
        "moe(4, 2, 0, 4, 0)",
        "moe(4, 2, 3, 4, 0)",
        "moe(4, 2, 1, 0, 0)",
        "lora(linear(4, 2, 0), 0, 1, 0)",
        "lora(linear(4, 2, 0), 1.5, 1, 0)",
        "lora(linear(4, 2, 0), 3, 1, 0)",
        "lora(chain(linear(4, 8, 0), linear(8, 1, 1)), 2, 1, 0)",
    ] {
        assert_eq!(error_code(src), "E0213", "{src}");
    }
    let d = error_of("lora(linear(4, 2, 0), 3, 1, 0)");
    assert!(text(&d).contains("min(in, out) = 2"), "{}", text(&d));
}

#[test]
fn failed_constructors_take_no_model_id() {
    let mut s = common::Session::new(None, None);
    assert_eq!(s.error_code("attention(4, 3, 0)"), "E0213");
    s.eval("m = linear(1, 1, 0)");
    assert!(s.it.ws.get("__linear_W_0").is_some());
}

#[test]
fn e0401_invalid_values() {
    for src in [
        "rms_norm(3, 2)",
        "rms_norm(3, 0.5)",
        "dropout(1, 0)",
        "dropout(-0.1, 0)",
        "dropout(0 / 0, 0)",
        "rope(4, 0)",
        "rope(4, -1)",
        "attention(4, 2, 0, 2, linear(2, 2, 0))",
        "reinit(linear(2, 2, 0), \"all_layers\", -1, 0)",
        "estimate_train(linear(2, 2, 0), 0, 1, 1)",
        "estimate_train(linear(2, 2, 0), 1, -4, 1)",
        "estimate_train(linear(2, 2, 0), 1, 1, 1, 0)",
        "estimate_train(linear(2, 2, 0), 1 / 0, 1, 1)",
    ] {
        assert_eq!(error_code(src), "E0401", "{src}");
    }
}

#[test]
fn e0402_embedding_ids() {
    for ids in ["[0, 5]", "[-1]", "[0.5]", "[[1, 2], [3, 7]]", "0 / 0"] {
        let src = format!("apply(embed(5, 2, 0), {ids})");
        assert_eq!(error_code(&src), "E0402", "{src}");
    }
    let d = error_of("apply(embed(5, 2, 0), [0, 5])");
    assert!(text(&d).contains("id 5 at position 1"), "{}", text(&d));
}

#[test]
fn e0303_model_arguments() {
    for src in [
        "apply(1, [1])",
        "apply(\"m\", [1])",
        "chain(linear(1, 1, 0), 2)",
        "residual([1, 2])",
        "attention_weights(1, [[1]])",
        "aux_loss(1)",
        "clone_model(1)",
        "freeze(tokenizer())",
        "unfreeze(1)",
        "lora(1, 1, 1, 0)",
        "perturb_params(1, \"all_layers\", 1, 0)",
        "reinit(1, \"all_layers\", 1, 0)",
        "embed_table(1)",
        "estimate_train(1, 1, 1, 1)",
        "load_weights(1, \"x.safetensors\")",
    ] {
        assert_eq!(error_code(src), "E0303", "{src}");
    }
}

#[test]
fn kind_rank_and_arity_errors() {
    assert_eq!(error_code("apply(linear(1, 1, 0), \"x\")"), "E0301");
    assert_eq!(error_code("linear([1, 2], 2, 0)"), "E0205");
    assert_eq!(error_code("linear(1, 2, [0, 1])"), "E0205");
    assert_eq!(
        error_code("estimate_train(linear(1, 1, 0), [1, 2], 1, 1)"),
        "E0205"
    );
    assert_eq!(
        error_code("perturb_params(linear(1, 1, 0), 1, 1, 0)"),
        "E0302"
    );
    let d = error_of("attention(4, 2, 0, 2, rope(2, 1), 2, 0, 1e-6, 1, 2, 7)");
    assert_eq!(d.code, "E0103");
    assert!(
        text(&d).contains("`attention` takes 3 to 10 arguments, got 11"),
        "{}",
        text(&d)
    );
    assert_eq!(error_code("estimate_train(linear(1, 1, 0), 1, 1)"), "E0103");
    // `chain` takes any number of models.
    assert_eq!(
        common::eval(
            "shape(apply(chain(relu_layer(), relu_layer(), relu_layer(), relu_layer()), [1, -1]))"
        ),
        "2"
    );
    let b = mlpl_lang::builtins::lookup("chain").unwrap();
    assert_eq!(b.signature(), "chain([models, …])");
    assert_eq!(b.arity_text(), "`chain` takes any number of arguments");
}

#[test]
fn e0107_unknown_family() {
    for src in [
        "perturb_params(linear(2, 2, 0), \"heads\", 1, 0)",
        "reinit(linear(2, 2, 0), \"\", 1, 0)",
    ] {
        let d = error_of(src);
        assert_eq!(d.code, "E0107", "{src}");
        assert!(text(&d).contains("all_layers, attention_only, mlp_only, embed_and_head"));
    }
}

#[test]
fn e0308_e0309_e0310() {
    assert_eq!(error_code("embed_table(chain(linear(2, 2, 0)))"), "E0308");
    assert_eq!(
        error_code("attention_weights(chain(linear(2, 2, 0)), [[1, 2]])"),
        "E0308"
    );
    assert_eq!(
        error_code("estimate_train(chain(relu_layer(), rms_norm(3)), 1, 1, 1)"),
        "E0309"
    );
    assert_eq!(error_code("estimate_train(chain(), 1, 1, 1)"), "E0309");
    assert_eq!(
        error_code("s = lora(linear(4, 4, 0), 2, 1, 0)\nlora(s, 1, 1, 0)"),
        "E0310"
    );
    assert_eq!(
        error_code("s = lora(linear(4, 4, 0), 2, 1, 0)\nlora(chain(residual(chain(s))), 1, 1, 0)"),
        "E0310"
    );
}

#[test]
fn w0106_aux_loss_without_moe() {
    assert_eq!(
        warning_codes("aux_loss(chain(linear(2, 2, 0), relu_layer()))"),
        ["W0106"]
    );
    assert!(warning_codes("aux_loss(chain(moe(2, 2, 1, 2, 0)))").is_empty());
}

#[test]
fn e0218_a_parameter_rebound_to_another_shape() {
    let d = error_of("m = linear(2, 3, 0)\n__linear_W_0 = zeros([3, 3])\napply(m, [[1, 2]])");
    assert_eq!(d.code, "E0218");
    assert!(
        text(&d).contains("`__linear_W_0` has shape [3, 3]"),
        "{}",
        text(&d)
    );
    // Re-bound to a string (which also untracks it): E0301, not a crash.
    assert_eq!(
        error_code("m = linear(2, 3, 0)\n__linear_b_0 = \"x\"\napply(m, [[1, 2]])"),
        "E0301"
    );
}

#[test]
fn e0501_parameters_and_input_on_different_devices() {
    let o = run_in(
        "m = linear(2, 2, 0)\nto_device(m, \"cuda\")\napply(m, to_device([[1, 2]], \"cpu\"))",
        None,
    );
    let d = o.result.expect_err("device mismatch");
    assert_eq!(d.code, "E0501");
    // Moving the input to the model's device fixes it.
    let o = run_in(
        "m = linear(2, 2, 0)\nto_device(m, \"cuda\")\nshape(apply(m, to_device([[1, 2]], \"cuda\")))",
        None,
    );
    assert_eq!(o.shown(), "1 2");
}

#[test]
fn e0306_non_differentiable_model_builtins_in_a_loss() {
    for src in [
        "m = attention(2, 1, 0)\nX = [[1, 2], [3, 4]]\ngrad(sum(attention_weights(m, X * __attn_Wq_0)), __attn_Wq_0)",
        "m = linear(2, 2, 0)\ngrad(sum(embed_table(m)), __linear_W_0)",
        "m = linear(2, 2, 0)\ngrad(sum(apply(clone_model(m), [[1, 2]])), __linear_W_0)",
        "m = linear(2, 2, 0)\ngrad(freeze(m) + sum(apply(m, [[1, 2]])), __linear_W_0)",
    ] {
        assert_eq!(error_code(src), "E0306", "{src}");
    }
    // Constructors are allowed in a loss (they create new parameters each time).
    assert_eq!(
        common::eval(
            "W = param[1]\nshape(grad(sum(apply(linear(2, 2, 0), [[1, 2]])) + sum(W), W))"
        ),
        "1"
    );
}

#[test]
fn model_builtins_never_crash_on_odd_inputs() {
    for src in [
        "apply(linear(0, 3, 0), zeros([2, 0]))",
        "apply(linear(3, 0, 0), zeros([2, 3]))",
        "apply(linear(3, 2, 0), zeros([0, 3]))",
        "apply(embed(0, 3, 0), zeros([0]))",
        "apply(embed(4, 0, 0), [1, 2])",
        "apply(attention(0, 1, 0), zeros([2, 0]))",
        "apply(attention(4, 2, 0), zeros([0, 3, 4]))",
        "attention_weights(causal_attention(4, 2, 0), zeros([2, 0, 4]))",
        "apply(moe(4, 2, 1, 3, 0), zeros([0, 4]))",
        "aux_loss(chain(moe(4, 2, 1, 3, 0)))",
        "m = moe(4, 2, 1, 3, 0)\ny = apply(m, zeros([0, 4]))\naux_loss(m)",
        "apply(moe(0, 2, 1, 3, 0), zeros([2, 0]))",
        "apply(swiglu(0, 2, 0), zeros([2, 0]))",
        "apply(layer_norm(0), zeros([2, 0]))",
        "apply(rope(2, 1e30), ones([3, 2]))",
        "apply(dropout(0.5, -1), 3)",
        "train 2 { apply(dropout(0.999, 0), ones([3])) }",
        "apply(tanh_layer(), 3)",
        "estimate_train(linear(1, 1, 0), 1e30, 1e30, 1e30, 1e30)",
        "m = linear(2, 2, 0)\nperturb_params(m, \"attention_only\", 1, 0)",
        "m = linear(2, 2, 0)\nperturb_params(m, \"all_layers\", 0 / 0, 0)",
        "m = linear(2, 2, 0)\n__linear_W_0 = \"gone\"\nclone_model(m)",
        "m = linear(2, 2, 0)\n__linear_W_0 = \"gone\"\nperturb_params(m, \"all_layers\", 1, 0)",
    ] {
        let o = run_in(src, None);
        if let Err(d) = &o.result {
            assert!(d.code != "E0504", "{src}: internal failure {:?}", d.notes);
        }
    }
}

#[test]
fn every_model_operation_on_every_odd_input_ends_in_a_value_or_a_diagnostic() {
    let models = [
        "linear(3, 2, 0)",
        "linear(0, 0, 0)",
        "embed(4, 3, 0)",
        "attention(4, 2, 0)",
        "causal_attention(4, 4, 0, 2, rope(1*2, 10))",
        "rms_norm(3)",
        "rms_norm(3, 1)",
        "layer_norm(4)",
        "tanh_layer()",
        "softmax_layer()",
        "dropout(0.5, 3)",
        "swiglu(3, 2, 0)",
        "rope(2, 10)",
        "moe(4, 2, 1, 3, 0)",
        "moe(3, 3, 3, 1, 0)",
        "chain()",
        "residual(relu_layer())",
        "residual(linear(3, 3, 0))",
        "lora(linear(3, 3, 0), 2, 1, 0)",
        "chain(embed(4, 4, 0), attention(4, 1, 0))",
    ];
    let inputs = [
        "1",
        "-1.5",
        "[]",
        "[1, 2, 3]",
        "[[1, 0, 2], [0, 1, 1]]",
        "zeros([0, 3])",
        "zeros([2, 0])",
        "reshape(iota(24), [2, 3, 4])",
        "reshape(iota(24), [6, 4]) / 24",
        "[0, 3, 1]",
        "zeros([1, 1, 1, 4])",
        "label(ones([3, 3]), [\"a\", \"b\"])",
        "0 / 0 * ones([2, 4])",
        "1 / 0 * ones([3, 3])",
        "to_device(ones([2, 4]), \"cuda\")",
    ];
    let ops = [
        "apply(M, X)",
        "attention_weights(M, X)",
        "aux_loss(M)",
        "grad(sum(apply(M, X)), X)",
        "train 2 { Z = apply(M, X); 0 }",
        "estimate_train(M, 1, 2, 3)",
        "save(M, \"f.safetensors\")\nload_weights(M, \"f.safetensors\")",
        "perturb_params(M, \"mlp_only\", 1, 0)",
        "reinit(M, \"all_layers\", 1, 0)",
        "clone_model(M)",
        "lora(M, 1, 1, 0)",
        "embed_table(M)",
        "to_device(M, \"cuda\")\napply(M, X)",
        "apply(chain(M, M), X)",
        "apply(residual(M), X)",
    ];
    let dir = common::temp_dir("fuzz");
    let mut n = 0;
    for m in models {
        for x in inputs {
            for op in ops {
                let src = format!("M = {m}\nX = {x}\n{}", op);
                let o = common::run_in(&src, Some(&dir));
                n += 1;
                if let Err(d) = &o.result {
                    assert!(d.code != "E0504", "{src}: {} {:?}", d.message, d.notes);
                }
            }
        }
    }
    assert_eq!(n, models.len() * inputs.len() * ops.len());
}
