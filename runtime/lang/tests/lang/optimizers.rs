//! `grad`, the optimizers and schedules: LANGUAGE §12 semantics (one loss
//! evaluation, simultaneous updates, per-parameter step counts, frozen
//! parameters, clipping) and the E0306 / E0109 / E0110 / W0103 / W0302 rules.

use crate::common;

use common::{error_code, eval, warning_codes};

fn nums(src: &str) -> Vec<f64> {
    eval(src)
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * (1.0 + b.abs())
}

#[test]
fn grad_of_simple_losses() {
    assert_eq!(
        eval("W = param[3]\nW = W + [1, 2, 3]\ngrad(sum(W * W), W)"),
        "2 4 6"
    );
    assert_eq!(eval("x = [1, 2]\ngrad(sum(x * 3), x)"), "3 3");
    assert_eq!(eval("x = 3\ngrad(x * x, x)"), "6");
    // Not read by the loss: zeros with wrt's shape and names.
    assert_eq!(
        eval("W : [a, b] = zeros([1, 2])\nlabels(grad(sum([1, 2]), W))"),
        "a,b"
    );
    assert_eq!(eval("W = zeros([2])\ngrad(sum([1, 2]), W)"), "0 0");
}

#[test]
fn grad_rules() {
    assert_eq!(error_code("W = param[2]\ngrad(sum(W), W + 1)"), "E0109");
    assert_eq!(
        error_code("W = param[2]\ngrad(sum(shuffle(W, 1)), W)"),
        "E0306"
    );
    assert_eq!(
        error_code("W = param[2]\ngrad(grad(sum(W), W), W)"),
        "E0306"
    );
    assert_eq!(
        error_code("W = param[2]\ngrad(sum(W) + rank(load_preloaded(\"tiny_corpus\")), W)"),
        "E0306"
    );
    // ✗ builtins are fine on constants inside a loss, 0 builtins anywhere.
    assert_eq!(
        eval("W = param[2]\nW = W + 1\ngrad(sum(W * shuffle([1, 2], 3)) + sum(gt(W, 0)), W)")
            .split(' ')
            .count(),
        2
    );
    assert!(warning_codes("W = param[2]\ng = grad(W * 2, W)").contains(&"W0301"));
}

#[test]
fn one_adam_step_matches_the_formula() {
    // One step: m̂ = g, v̂ = g², so p ← p − lr·g/(|g| + eps).
    let v = nums("W = param[2]\nW = W + [1, -2]\nadam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\nW");
    assert!(close(v[0], 1.0 - 0.1) && close(v[1], -2.0 + 0.1), "{v:?}");
}

#[test]
fn updates_are_simultaneous() {
    // L = sum(W·V): dL/dW = V, dL/dV = W, both taken before either moves.
    let v = nums("W = param[1]\nW = W + 2\nV = param[1]\nV = V + 3\nmomentum_sgd(sum(W * V), [W, V], 0.1, 0)\n[sum(W), sum(V)]");
    assert!(
        close(v[0], 2.0 - 0.1 * 3.0) && close(v[1], 3.0 - 0.1 * 2.0),
        "{v:?}"
    );
}

#[test]
fn momentum_accumulates() {
    let v = nums("W = param[1]\nrepeat 2 { momentum_sgd(sum(W), W, 1, 0.5) }\nW");
    // v1 = 1, p = -1; v2 = 0.5 + 1 = 1.5, p = -2.5
    assert!(close(v[0], -2.5), "{v:?}");
}

#[test]
fn adam_counts_steps_per_parameter() {
    // Training a second parameter later starts its bias correction afresh, so its
    // first step has the same size as the first parameter's first step.
    let v = nums(
        "A = param[1]\nrepeat 5 { adam(sum(A * A + A), A, 0.1, 0.9, 0.999, 1e-8) }\nB = param[1]\nadam(sum(B * B + B), B, 0.1, 0.9, 0.999, 1e-8)\nB",
    );
    assert!(close(v[0], -0.1), "{v:?}");
}

#[test]
fn a_parameter_listed_twice_is_updated_once() {
    assert!(
        warning_codes("W = param[1]\nadam(sum(W), [W, W], 0.1, 0.9, 0.999, 1e-8)")
            .contains(&"W0302")
    );
    let v = nums("W = param[1]\nrepeat 2 { adam(sum(W), [W, W], 0.1, 0.9, 0.999, 1e-8) }\nW");
    assert!(close(v[0], -0.2), "{v:?}");
}

#[test]
fn parameter_reference_errors() {
    assert_eq!(
        error_code("x = [1, 2]\nadam(sum(x), x, 0.1, 0.9, 0.999, 1e-8)"),
        "E0110"
    );
    assert_eq!(
        error_code("W = param[1]\nadam(sum(W), W + 1, 0.1, 0.9, 0.999, 1e-8)"),
        "E0109"
    );
    assert_eq!(
        error_code("W = param[1]\nadam(sum(W), \"W\", 0.1, 0.9, 0.999, 1e-8)"),
        "E0109"
    );
    assert_eq!(
        error_code("W = param[1]\nadam(sum(W), W, [0.1], 0.9, 0.999, 1e-8)"),
        "E0205"
    );
    assert_eq!(
        error_code("W = param[1]\nadam(sum(W), W, 0.1, 0.9, 0.999, 1e-8, 0)"),
        "E0401"
    );
    assert_eq!(
        error_code("W = param[1]\nadamw(sum(W), W, 0.1, 0.9, 0.999, 1e-8, -1)"),
        "E0401"
    );
    assert!(
        warning_codes("W = param[1]\nc = sum(W)\nadam(c, W, 0.1, 0.9, 0.999, 1e-8)")
            .contains(&"W0103")
    );
}

#[test]
fn clipping_scales_the_global_norm() {
    // g = [3, 4] (norm 5); max 1 scales it to [0.6, 0.8]; momentum SGD-like check via Adam's
    // first step is sign-only, so check through grad-free arithmetic: p moves by lr·ĝ/|ĝ|.
    let v = nums("W = param[2]\nadam(sum(W * [3, 4]), W, 1, 0, 0, 0, 1)\nW");
    assert!(close(v[0], -1.0) && close(v[1], -1.0), "{v:?}");
}

#[test]
fn adamw_decays_weights_but_not_biases() {
    // With a zero gradient Adam's step is 0 and only the decay moves W.
    let v = nums("W = param[1]\nW = W + 1\nadamw(sum(W * 0), W, 0.1, 0.9, 0.999, 1e-8, 0.5)\nW");
    assert!(close(v[0], 1.0 - 0.1 * 0.5), "{v:?}");
}

#[test]
fn train_records_losses_and_steps() {
    let src = "W = param[2]\ntrain 50 {\n  adam(sum((W - [1, -1]) * (W - [1, -1])), W, 0.1, 0.9, 0.999, 1e-8)\n  loss_metric = sum((W - [1, -1]) * (W - [1, -1]))\n}\n[step, sum(shape(last_losses))]";
    assert_eq!(eval(src), "49 50");
    let losses = nums("W = param[2]\ntrain 50 { adam(sum((W - [1, -1]) * (W - [1, -1])), W, 0.1, 0.9, 0.999, 1e-8); sum((W - [1, -1]) * (W - [1, -1])) }\nlast_losses");
    assert!(losses[49] < losses[0] * 0.05, "{:?}", losses);
}

#[test]
fn schedules() {
    // Exact scalars compute in float64: 0.001 + 0.5·0.009·2.
    assert_eq!(
        eval("cosine_schedule(0, 100, 0.001, 0.01)"),
        "0.010000000000000002"
    );
    assert_eq!(eval("cosine_schedule(100, 100, 0.001, 0.01)"), "0.001");
    assert_eq!(eval("cosine_schedule(50, 100, 0, 1)"), "0.5");
    assert_eq!(eval("cosine_schedule(5, 0, 0, 1)"), "1");
    assert_eq!(eval("linear_warmup(5, 10, 0.002)"), "0.001");
    assert_eq!(eval("linear_warmup(20, 10, 0.002)"), "0.002");
    assert_eq!(eval("linear_warmup(3, 0, 0.002)"), "0.002");
}

#[test]
fn a_two_layer_network_learns_blobs() {
    let src = "data = blobs(7, 100, [[-1, -1], [1, 1]])
X = matmul(data, [[1, 0], [0, 1], [0, 0]])
y = matmul(data, [0, 0, 1])
W = param[2, 8]
W = randn(1, [2, 8]) * 0.5
b = param[8]
V = param[8, 2]
V = randn(2, [8, 2]) * 0.5
train 100 {
  adam(cross_entropy(matmul(tanh(matmul(X, W) + b), V), y), [W, b, V], 0.05, 0.9, 0.999, 1e-8)
  cross_entropy(matmul(tanh(matmul(X, W) + b), V), y)
}
mean(eq(argmax(matmul(tanh(matmul(X, W) + b), V), 1), y))";
    assert_eq!(eval(src), "1");
}

/// One `adamw` step of a model with every parameter class (embedding table,
/// layer-norm gain and bias, linear weight and bias) under each decay group,
/// against PyTorch's `torch.optim.AdamW` update written out: at step 1,
/// m̂ = g and v̂ = g², so p₁ = p₀·(1 − lr·wd) − lr·g/(|g| + eps) for a decayed
/// parameter and p₀ − lr·g/(|g| + eps) for an exempt one (lr 1e-3, wd 0.01).
/// Unused embedding rows have g = 0, so only the decay moves them.
#[test]
fn adamw_decay_groups_match_torch_adamw_one_step() {
    use mlpl_lang::nn::ParamClass;
    use mlpl_lang::value::Value;
    let (lr, wd, eps) = (1e-3f64, 0.01f64, 1e-8f64);
    let setup = "m = chain(embed(6, 4, 1), layer_norm(4), linear(4, 3, 2))
ids = [0, 2, 2, 5]
t = [0, 1, 2, 1]
momentum_sgd(cross_entropy(apply(m, ids), t), m, 0.3, 0)
0";
    let loss = "cross_entropy(apply(m, ids), t)";
    // (group as written, whether each class decays: weight, bias, norm, embedding)
    let groups: [(&str, [bool; 4]); 4] = [
        ("", [true, false, false, true]),
        (", \"no_bias_norm\"", [true, false, false, true]),
        (", \"all\"", [true, true, true, true]),
        (", \"no_bias_norm_embed\"", [true, false, false, false]),
    ];
    for (group, decays) in groups {
        let mut s = common::Session::new(None, None);
        s.run(setup).result.unwrap();
        let Some(Value::Model(m)) = s.it.ws.bindings.get("m").cloned() else {
            panic!("m is a model")
        };
        let specs = m.0.param_specs();
        assert_eq!(specs.len(), 5);
        let mut before = Vec::new();
        for p in &specs {
            let p0 = common::nums_in(&mut s, &p.name);
            let g = common::nums_in(&mut s, &format!("grad({loss}, {})", p.name));
            before.push((p0, g));
        }
        s.run(&format!(
            "adamw({loss}, m, {lr}, 0.9, 0.999, {eps}, {wd}{group})"
        ))
        .result
        .unwrap();
        let mut moved_by_decay_only = 0;
        for (p, (p0, g)) in specs.iter().zip(before) {
            let class = ParamClass::of(p);
            let decayed = decays[match class {
                ParamClass::Weight => 0,
                ParamClass::Bias => 1,
                ParamClass::Norm => 2,
                ParamClass::Embedding => 3,
            }];
            let p1 = common::nums_in(&mut s, &p.name);
            for ((&a, &gv), &b) in p0.iter().zip(&g).zip(&p1) {
                let keep = if decayed { 1.0 - lr * wd } else { 1.0 };
                let want = a * keep - lr * gv / (gv.abs() + eps);
                let tol = 1e-4 * lr + a.abs() * f64::from(f32::EPSILON);
                assert!(
                    (b - want).abs() <= tol,
                    "{} ({class:?}, group{group}): {b} vs torch {want}",
                    p.name
                );
                if gv == 0.0 && decayed && a != 0.0 {
                    assert!(b != a, "{}: decay moves it", p.name);
                    moved_by_decay_only += 1;
                }
            }
        }
        // The three unused embedding rows move only where embeddings decay.
        assert_eq!(moved_by_decay_only > 0, decays[3], "group{group}");
    }
}

#[test]
fn adamw_decay_group_errors() {
    let base = "W = param[2]\nadamw(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8, 0.01";
    assert_eq!(eval(&format!("{base}, \"all\")\n1")), "1");
    assert_eq!(eval(&format!("{base}, 1, \"all\")\n1")), "1");
    for bad in [", \"matrices\")", ", \"all\", 1)", ", 1, 2)"] {
        let src = format!("{base}{bad}");
        let code = error_code(&src);
        let statics: Vec<&str> = mlpl_lang::check::check_source(&src)
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.code)
            .collect();
        assert_eq!(statics, vec![code], "{src}");
        assert!(code == "E0401" || code == "E0302", "{src}: {code}");
    }
    let d = common::error_of(&format!("{base}, \"matrices\")"));
    assert!(
        d.notes.iter().any(|n| n.contains("\"no_bias_norm_embed\"")),
        "{:?}",
        d.notes
    );
}
