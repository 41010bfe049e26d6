//! The layer catalog (LANGUAGE §11.1–§11.6): initial values, parameter names,
//! ids and order, shapes and names of `apply` per layer, and the computations of
//! attention (multi-head, grouped-query, rotary), rope, mixture of experts and
//! dropout against independent float64 references.

use crate::common;

use mlpl_lang::data::rng;
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::{Array, Value};
use mlpl_syntax::parse;

fn run(it: &mut Interp, src: &str) -> Value {
    let p = parse(src);
    assert!(p.diagnostics.iter().all(|d| !d.is_error()), "{src}");
    match it.run(&p.program) {
        Ok(Some(v)) => v,
        Ok(None) => panic!("{src}: no value"),
        Err(d) => panic!(
            "{src}: {} {} {:?} {:?}",
            d.code, d.message, d.primary, d.notes
        ),
    }
}

fn fresh(src: &str) -> Interp {
    let mut it = Interp::new(Workspace::new());
    run(&mut it, src);
    it
}

fn array(it: &Interp, name: &str) -> Array {
    match it.ws.get(name) {
        Some(Value::Array(a)) => a.clone(),
        other => panic!("`{name}` is {other:?}"),
    }
}

fn params(it: &Interp, model: &str) -> Vec<String> {
    match it.ws.get(model) {
        Some(Value::Model(m)) => m.0.parameters(),
        other => panic!("`{model}` is {other:?}"),
    }
}

/// `scale · randn(seed, n)` rounded once to float32.
fn draws(seed: u64, n: usize, scale: f64) -> Vec<f32> {
    rng::normal_vec(seed, n)
        .into_iter()
        .map(|z| (z * scale) as f32)
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i} is {g}, expected {w}"
        );
    }
}

#[test]
fn initial_values_are_the_reference_draws_rounded_once() {
    let it = fresh(
        "a = linear(3, 2, 7)\ne = embed(5, 3, 8)\nt = attention(4, 2, 9, 1)\ns = swiglu(4, 6, 10)\nmo = moe(2, 3, 1, 5, 11)\nr = rms_norm(3, 1)\nn = layer_norm(2)",
    );
    assert_eq!(array(&it, "__linear_W_0").to_f32(), draws(7, 6, 0.5));
    assert_eq!(array(&it, "__linear_W_0").shape(), [3, 2]);
    assert_eq!(array(&it, "__linear_b_0").to_f32(), vec![0.0; 2]);
    assert_eq!(array(&it, "__linear_b_0").shape(), [1, 2]);
    assert_eq!(array(&it, "__embed_E_1").to_f32(), draws(8, 15, 0.1));
    for (i, (role, n)) in [("Wq", 16), ("Wk", 8), ("Wv", 8), ("Wo", 16)]
        .into_iter()
        .enumerate()
    {
        let w = array(&it, &format!("__attn_{role}_2"));
        assert_eq!(w.to_f32(), draws(9 + i as u64, n, 0.5), "{role}");
        assert_eq!(w.shape()[0], 4);
    }
    assert_eq!(array(&it, "__attn_Wk_2").shape(), [4, 2]);
    let (d, h) = (4f64, 6f64);
    assert_eq!(
        array(&it, "__swiglu_Wg_3").to_f32(),
        draws(10, 24, 1.0 / d.sqrt())
    );
    assert_eq!(
        array(&it, "__swiglu_Wu_3").to_f32(),
        draws(11, 24, 1.0 / d.sqrt())
    );
    assert_eq!(
        array(&it, "__swiglu_Wd_3").to_f32(),
        draws(12, 24, 1.0 / h.sqrt())
    );
    assert_eq!(array(&it, "__swiglu_Wd_3").shape(), [6, 4]);
    let s2 = 1.0 / 2f64.sqrt();
    assert_eq!(array(&it, "__moe_R_4").to_f32(), draws(11, 6, s2));
    assert_eq!(array(&it, "__moe_Wg_4").to_f32(), draws(12, 30, s2));
    assert_eq!(array(&it, "__moe_Wu_4").to_f32(), draws(13, 30, s2));
    assert_eq!(
        array(&it, "__moe_Wd_4").to_f32(),
        draws(14, 30, 1.0 / 5f64.sqrt())
    );
    assert_eq!(array(&it, "__moe_Wg_4").shape(), [3, 2, 5]);
    assert_eq!(array(&it, "__moe_Wd_4").shape(), [3, 5, 2]);
    assert_eq!(array(&it, "__rms_g_5").to_f32(), vec![1.0; 3]);
    assert_eq!(array(&it, "__ln_g_6").to_f32(), vec![1.0; 2]);
    assert_eq!(array(&it, "__ln_b_6").to_f32(), vec![0.0; 2]);
    // The causal variant draws the same values from the same seed.
    let it2 = fresh("t = causal_attention(4, 2, 9, 1)");
    assert_eq!(
        array(&it2, "__attn_Wv_0").to_f32(),
        array(&it, "__attn_Wv_2").to_f32()
    );
}

#[test]
fn parameter_names_ids_and_order() {
    let it = fresh(
        "m = chain(linear(2, 3, 0), chain(embed(4, 3, 1), rms_norm(3), rms_norm(3, 1)), residual(causal_attention(3, 1, 2)), tanh_layer(), layer_norm(3), swiglu(3, 4, 3), moe(3, 2, 1, 4, 4), dropout(0.1, 5), rope(2, 10))",
    );
    let expected = [
        "__linear_W_0",
        "__linear_b_0",
        "__embed_E_1",
        "__rms_g_2",
        "__attn_Wq_3",
        "__attn_Wk_3",
        "__attn_Wv_3",
        "__attn_Wo_3",
        "__ln_g_4",
        "__ln_b_4",
        "__swiglu_Wg_5",
        "__swiglu_Wu_5",
        "__swiglu_Wd_5",
        "__moe_R_6",
        "__moe_Wg_6",
        "__moe_Wu_6",
        "__moe_Wd_6",
    ];
    assert_eq!(params(&it, "m"), expected);
    assert_eq!(it.ws.model_counter, 7);
    for name in expected {
        assert!(it.ws.tracked.contains(name), "{name} is tracked");
    }
    assert!(it.ws.frozen.is_empty());
}

#[test]
fn shared_layers_are_listed_once_and_models_are_handles() {
    let mut it = fresh("l = linear(2, 2, 0)\nm = chain(l, tanh_layer(), l, residual(l))\nm2 = m");
    assert_eq!(params(&it, "m"), ["__linear_W_0", "__linear_b_0"]);
    // Training through one handle trains every model containing the layer.
    run(&mut it, "__linear_b_0 = [[1, 2]]");
    let a = run(&mut it, "apply(l, [[0, 0]])");
    assert_eq!(a.as_array().unwrap().to_f32(), [1.0, 2.0]);
    assert_eq!(params(&it, "m2"), params(&it, "m"));
    // Binding a parameter name to a model removes it from the tracked set.
    run(&mut it, "__linear_W_0 = m");
    assert!(!it.ws.tracked.contains("__linear_W_0"));
}

/// (model, input, expected output shape, expected names as `labels` gives them)
const SHAPES: &[(&str, &str, &[usize], &str)] = &[
    (
        "linear(3, 2, 0)",
        "label(zeros([4, 3]), [\"batch\", \"feat\"])",
        &[4, 2],
        "batch,",
    ),
    ("linear(3, 2, 0)", "zeros([3])", &[2], ""),
    (
        "linear(3, 2, 0)",
        "label(zeros([2, 5, 3]), [\"b\", \"t\", \"f\"])",
        &[2, 5, 2],
        "b,t,",
    ),
    ("embed(5, 3, 0)", "[1, 2, 0, 4]", &[4, 3], ""),
    (
        "embed(5, 3, 0)",
        "label([[1, 2], [0, 4]], [\"b\", \"t\"])",
        &[2, 2, 3],
        "",
    ),
    ("embed(5, 3, 0)", "2", &[3], ""),
    (
        "attention(4, 2, 0)",
        "label(ones([3, 4]), [\"t\", \"d\"])",
        &[3, 4],
        "",
    ),
    (
        "causal_attention(8, 4, 0, 2)",
        "ones([2, 3, 8])",
        &[2, 3, 8],
        "",
    ),
    (
        "rms_norm(7)",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "",
    ),
    ("rms_norm(3, 1)", "ones([2, 2, 3])", &[2, 2, 3], ""),
    (
        "layer_norm(3)",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "",
    ),
    (
        "tanh_layer()",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,f",
    ),
    (
        "relu_layer()",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,f",
    ),
    (
        "gelu_layer()",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,f",
    ),
    (
        "silu_layer()",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,f",
    ),
    (
        "softmax_layer()",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "",
    ),
    (
        "dropout(0.5, 1)",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,f",
    ),
    (
        "swiglu(3, 5, 0)",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,",
    ),
    (
        "rope(4, 10000)",
        "label(ones([2, 3, 4]), [\"b\", \"t\", \"f\"])",
        &[2, 3, 4],
        "b,t,f",
    ),
    (
        "moe(3, 4, 2, 5, 0)",
        "label(ones([2, 2, 3]), [\"b\", \"t\", \"f\"])",
        &[2, 2, 3],
        "b,t,",
    ),
    (
        "chain()",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,f",
    ),
    (
        "chain(linear(3, 4, 0), relu_layer(), linear(4, 2, 1))",
        "ones([5, 3])",
        &[5, 2],
        "",
    ),
    (
        "residual(linear(3, 3, 0))",
        "label(ones([2, 3]), [\"b\", \"f\"])",
        &[2, 3],
        "b,f",
    ),
    (
        "lora(linear(3, 2, 0), 1, 1, 0)",
        "label(zeros([4, 3]), [\"batch\", \"\"])",
        &[4, 2],
        "batch,",
    ),
];

#[test]
fn shapes_and_names_of_every_layer() {
    for (model, input, shape, names) in SHAPES {
        let mut it = fresh(&format!("m = {model}\ny = apply(m, {input})"));
        assert_eq!(array(&it, "y").shape(), *shape, "{model} on {input}");
        let got = run(&mut it, "labels(y)").display();
        // `labels` of an unnamed array lists one empty name per axis.
        let want = if names.is_empty() {
            ",".repeat(shape.len().saturating_sub(1))
        } else {
            names.to_string()
        };
        assert_eq!(got, want, "names of {model} on {input}");
    }
}

/// A float64 reference of LANGUAGE §11.3 for x `[T, d]`, reading the weights of
/// attention layer `k`.
#[allow(clippy::too_many_arguments)]
fn reference_attention(
    it: &Interp,
    k: usize,
    x: &[f64],
    t: usize,
    d: usize,
    heads: usize,
    kv: usize,
    causal: bool,
    rope_base: Option<f64>,
) -> (Vec<f64>, Vec<f64>) {
    let w = |r: &str| array(it, &format!("__attn_{r}_{k}")).to_f64();
    let (wq, wk, wv, wo) = (w("Wq"), w("Wk"), w("Wv"), w("Wo"));
    let hd = d / heads;
    let g = heads / kv;
    let mm = |a: &[f64], b: &[f64], n: usize, kk: usize, m: usize| {
        let mut out = vec![0.0; n * m];
        for i in 0..n {
            for j in 0..m {
                out[i * m + j] = (0..kk).map(|l| a[i * kk + l] * b[l * m + j]).sum();
            }
        }
        out
    };
    let q = mm(x, &wq, t, d, d);
    let kmat = mm(x, &wk, t, d, kv * hd);
    let v = mm(x, &wv, t, d, kv * hd);
    let rot = |m: &[f64], width: usize, col: usize| -> Vec<f64> {
        // head columns col..col+hd of m [t, width], rotated when rope is set
        let mut h: Vec<f64> = (0..t)
            .flat_map(|r| (0..hd).map(move |c| (r, c)))
            .map(|(r, c)| m[r * width + col + c])
            .collect();
        if let Some(base) = rope_base {
            let half = hd / 2;
            let orig = h.clone();
            for r in 0..t {
                for i in 0..half {
                    let phi = r as f64 * base.powf(-2.0 * i as f64 / hd as f64);
                    let (a, b) = (orig[r * hd + i], orig[r * hd + i + half]);
                    h[r * hd + i] = a * phi.cos() - b * phi.sin();
                    h[r * hd + i + half] = a * phi.sin() + b * phi.cos();
                }
            }
        }
        h
    };
    let mut o = vec![0.0; t * d];
    let mut probs = Vec::new();
    for head in 0..heads {
        let j = head / g;
        let qh = rot(&q, d, head * hd);
        let kh = rot(&kmat, kv * hd, j * hd);
        for r in 0..t {
            let mut s: Vec<f64> = (0..t)
                .map(|c| {
                    let dot: f64 = (0..hd).map(|l| qh[r * hd + l] * kh[c * hd + l]).sum();
                    if causal && c > r {
                        -1e9
                    } else {
                        dot / (hd as f64).sqrt()
                    }
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s.iter().map(|v| (v - mx).exp()).sum();
            for v in s.iter_mut() {
                *v = (*v - mx).exp() / z;
            }
            for l in 0..hd {
                o[r * d + head * hd + l] = (0..t).map(|c| s[c] * v[c * kv * hd + j * hd + l]).sum();
            }
            probs.extend(s);
        }
    }
    (mm(&o, &wo, t, d, d), probs)
}

#[test]
fn attention_matches_a_float64_reference() {
    let x: Vec<f64> = (0..24).map(|i| ((i * 7 % 11) as f64 - 5.0) / 6.0).collect();
    let x_src = format!(
        "X = reshape([{}], [3, 8])",
        x.iter()
            .map(|v| format!("{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (ctor, heads, kv, causal, rope) in [
        ("attention(8, 1, 3)", 1, 1, false, None),
        ("attention(8, 2, 3)", 2, 2, false, None),
        ("causal_attention(8, 4, 3)", 4, 4, true, None),
        ("causal_attention(8, 4, 3, 2)", 4, 2, true, None),
        ("attention(8, 4, 3, 1)", 4, 1, false, None),
        (
            "attention(8, 2, 3, 1, rope(4, 100))",
            2,
            1,
            false,
            Some(100.0),
        ),
        (
            "causal_attention(8, 4, 3, 2, rope(2, 10000))",
            4,
            2,
            true,
            Some(10000.0),
        ),
    ] {
        let mut it = fresh(&format!("m = {ctor}\n{x_src}"));
        let (want, want_p) = reference_attention(&it, 0, &x, 3, 8, heads, kv, causal, rope);
        let got = run(&mut it, "apply(m, X)").as_array().unwrap().to_f64();
        assert_close(&got, &want, 2e-5, ctor);
        let p = run(&mut it, "attention_weights(m, X)");
        let p = p.as_array().unwrap();
        let expected_shape: Vec<usize> = if heads == 1 {
            vec![3, 3]
        } else {
            vec![heads, 3, 3]
        };
        assert_eq!(p.shape(), expected_shape.as_slice(), "{ctor}");
        assert_close(&p.to_f64(), &want_p, 2e-5, ctor);
        // A batch of two copies gives the same rows for each batch element.
        let b = run(
            &mut it,
            "apply(m, reshape(concat(reshape(X, [24]), reshape(X, [24])), [2, 3, 8]))",
        );
        let b = b.as_array().unwrap().to_f64();
        assert_close(&b[..24], &want, 2e-5, ctor);
        assert_close(&b[24..], &want, 2e-5, ctor);
        let pb = run(
            &mut it,
            "attention_weights(m, reshape(concat(reshape(X, [24]), reshape(X, [24])), [2, 3, 8]))",
        );
        let mut batched_shape = vec![2];
        batched_shape.extend(&expected_shape);
        assert_eq!(pb.as_array().unwrap().shape(), batched_shape.as_slice());
    }
}

#[test]
fn attention_weights_come_from_the_first_attention_layer() {
    let mut it = fresh(
        "m = chain(embed(6, 4, 0), causal_attention(4, 2, 1), attention(4, 1, 2))\nids = [0, 3, 5]",
    );
    let p = run(&mut it, "attention_weights(m, ids)");
    let p = p.as_array().unwrap();
    assert_eq!(p.shape(), [2, 3, 3]);
    let v = p.to_f64();
    for h in 0..2 {
        for r in 0..3 {
            let row = &v[h * 9 + r * 3..h * 9 + r * 3 + 3];
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-6);
            for (c, &x) in row.iter().enumerate() {
                if c > r {
                    assert_eq!(x, 0.0, "causal");
                }
            }
        }
    }
    assert_eq!(
        run(&mut it, "labels(attention_weights(m, ids))").display(),
        ",,"
    );
}

#[test]
fn rope_rotates_pairs_by_position() {
    let mut it = fresh("X = reshape(iota(12) / 5 - 1, [3, 4])");
    let got = run(&mut it, "apply(rope(4, 100), X)")
        .as_array()
        .unwrap()
        .to_f64();
    let x: Vec<f64> = (0..12).map(|i| (i as f32 / 5.0 - 1.0) as f64).collect();
    let mut want = x.clone();
    for t in 0..3 {
        for i in 0..2 {
            let phi = t as f64 * 100f64.powf(-2.0 * i as f64 / 4.0);
            let (a, b) = (x[t * 4 + i], x[t * 4 + i + 2]);
            want[t * 4 + i] = a * phi.cos() - b * phi.sin();
            want[t * 4 + i + 2] = a * phi.sin() + b * phi.cos();
        }
    }
    assert_close(&got, &want, 1e-6, "rope");
    // Position 0 is unchanged; rotation preserves the norm of each pair.
    assert_close(&got[..4], &x[..4], 0.0, "position 0");
}

/// A float64 reference of LANGUAGE §11.5 for x `[n, d]` and `moe` layer `k`:
/// the output and the aux loss.
#[allow(clippy::too_many_arguments)]
fn reference_moe(
    it: &Interp,
    k: usize,
    x: &[f64],
    n: usize,
    d: usize,
    e: usize,
    top: usize,
    hid: usize,
) -> (Vec<f64>, f64) {
    let r = array(it, &format!("__moe_R_{k}")).to_f64();
    let wg = array(it, &format!("__moe_Wg_{k}")).to_f64();
    let wu = array(it, &format!("__moe_Wu_{k}")).to_f64();
    let wd = array(it, &format!("__moe_Wd_{k}")).to_f64();
    let mut y = vec![0.0; n * d];
    let mut counts = vec![0.0; e];
    let mut mean_p = vec![0.0; e];
    for t in 0..n {
        let xt = &x[t * d..(t + 1) * d];
        let logits: Vec<f64> = (0..e)
            .map(|j| (0..d).map(|l| xt[l] * r[l * e + j]).sum())
            .collect();
        let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = logits.iter().map(|v| (v - mx).exp()).sum();
        let p: Vec<f64> = logits.iter().map(|v| (v - mx).exp() / z).collect();
        let mut order: Vec<usize> = (0..e).collect();
        order.sort_by(|&a, &b| p[b].partial_cmp(&p[a]).unwrap());
        let chosen = &order[..top];
        let total: f64 = chosen.iter().map(|&j| p[j]).sum();
        for &j in chosen {
            counts[j] += 1.0;
            let gate = if top >= 2 { p[j] / total } else { p[j] };
            let h: Vec<f64> = (0..hid)
                .map(|c| {
                    let g: f64 = (0..d).map(|l| xt[l] * wg[j * d * hid + l * hid + c]).sum();
                    let u: f64 = (0..d).map(|l| xt[l] * wu[j * d * hid + l * hid + c]).sum();
                    g / (1.0 + (-g).exp()) * u
                })
                .collect();
            for o in 0..d {
                y[t * d + o] += gate
                    * (0..hid)
                        .map(|c| h[c] * wd[j * hid * d + c * d + o])
                        .sum::<f64>();
            }
        }
        for j in 0..e {
            mean_p[j] += p[j] / n as f64;
        }
    }
    let aux = e as f64
        * (0..e)
            .map(|j| counts[j] / (n * top) as f64 * mean_p[j])
            .sum::<f64>();
    (y, aux)
}

#[test]
fn moe_matches_a_float64_reference_and_records_its_aux_loss() {
    for (e, top) in [(3, 1), (3, 2), (4, 4)] {
        let mut it = fresh(&format!(
            "m = moe(4, {e}, {top}, 6, 21)\nX = randn(77, [5, 4]) * 0.8"
        ));
        let x = array(&it, "X").to_f64();
        let (want, want_aux) = reference_moe(&it, 0, &x, 5, 4, e, top, 6);
        assert_eq!(run(&mut it, "aux_loss(m)").display(), "0", "never applied");
        let got = run(&mut it, "apply(m, X)").as_array().unwrap().to_f64();
        assert_close(&got, &want, 2e-5, "moe output");
        let aux = run(&mut it, "aux_loss(m)")
            .as_array()
            .unwrap()
            .scalar_value()
            .unwrap();
        assert!((aux - want_aux).abs() < 1e-5, "aux {aux} vs {want_aux}");
        if top == e {
            assert!(
                (aux - 1.0).abs() < 1e-5,
                "choosing every expert is balanced"
            );
        }
    }
    // Two moe layers: the sum of their most recent losses; batched input.
    let mut it = fresh("a = moe(4, 3, 1, 6, 1)\nb = moe(4, 3, 2, 6, 2)\nm = chain(a, b, a)");
    run(&mut it, "y = apply(m, randn(5, [2, 3, 4]))");
    let total = run(&mut it, "aux_loss(m)")
        .as_array()
        .unwrap()
        .scalar_value()
        .unwrap();
    let a = run(&mut it, "aux_loss(a)")
        .as_array()
        .unwrap()
        .scalar_value()
        .unwrap();
    let b = run(&mut it, "aux_loss(b)")
        .as_array()
        .unwrap()
        .scalar_value()
        .unwrap();
    assert!((total - (a + b)).abs() < 1e-6);
}

#[test]
fn aux_loss_of_a_model_without_moe_is_zero_with_w0106() {
    let o = common::run_in("aux_loss(chain(linear(2, 2, 0)))", None);
    assert_eq!(o.warning_codes(), ["W0106"]);
    assert_eq!(o.shown(), "0");
}

#[test]
fn dropout_is_active_only_while_training() {
    let mut it = fresh("d = dropout(0.4, 13)\nX = ones([4, 5])");
    assert_eq!(
        run(&mut it, "apply(d, X)").as_array().unwrap().to_f32(),
        vec![1.0; 20]
    );
    run(&mut it, "train 3 { Y = apply(d, X); Z = apply(d, X); 0 }");
    let (y, z) = (array(&it, "Y").to_f32(), array(&it, "Z").to_f32());
    assert_eq!(y, z, "the same layer in one step uses the same mask");
    let scale = (1.0 / (1.0 - 0.4f64)) as f32;
    for (i, &v) in y.iter().enumerate() {
        let keep = rng::dropout_keep(13, 2, i as u64, 0.4);
        assert_eq!(v, if keep { scale } else { 0.0 }, "element {i} at step 2");
    }
    run(&mut it, "train 1 { Y0 = apply(d, X); 0 }");
    assert_ne!(array(&it, "Y0").to_f32(), y, "another step, another mask");
    // Inside nested blocks of a train body, and in a chain.
    run(
        &mut it,
        "train 1 { repeat 1 { W = apply(chain(d, tanh_layer()), X) }; 0 }",
    );
    assert!(array(&it, "W").to_f32().contains(&0.0));
}

#[test]
fn residual_and_chain_compose() {
    let mut it = fresh("l = linear(2, 2, 3)\nX = [[1, 2], [3, -1]]");
    let a = run(&mut it, "apply(residual(l), X)")
        .as_array()
        .unwrap()
        .to_f64();
    let b = run(&mut it, "X + apply(l, X)").as_array().unwrap().to_f64();
    assert_eq!(a, b);
    let c = run(&mut it, "apply(chain(l, chain(), tanh_layer()), X)")
        .as_array()
        .unwrap()
        .to_f64();
    let d = run(&mut it, "tanh(apply(l, X))")
        .as_array()
        .unwrap()
        .to_f64();
    assert_eq!(c, d);
}

#[test]
fn layer_norm_and_rms_norm_follow_their_formulas() {
    let x = [1.0f64, 2.0, 4.0, -3.0, 0.5, 2.0];
    let mut it = fresh("X = [[1, 2, 4], [-3, 0.5, 2]]\nn = layer_norm(3)\nr = rms_norm(3, 1)");
    run(
        &mut it,
        "__ln_g_0 = [2, 1, 0.5]\n__ln_b_0 = [0, 1, -1]\n__rms_g_1 = [1, 2, 3]",
    );
    let ln = run(&mut it, "apply(n, X)").as_array().unwrap().to_f64();
    let rms = run(&mut it, "apply(r, X)").as_array().unwrap().to_f64();
    let (g, b, gr) = ([2.0, 1.0, 0.5], [0.0, 1.0, -1.0], [1.0, 2.0, 3.0]);
    for row in 0..2 {
        let v = &x[row * 3..row * 3 + 3];
        let mu = v.iter().sum::<f64>() / 3.0;
        let var = v.iter().map(|a| (a - mu) * (a - mu)).sum::<f64>() / 3.0;
        let ms = v.iter().map(|a| a * a).sum::<f64>() / 3.0;
        for c in 0..3 {
            let want = (v[c] - mu) / (var + 1e-5).sqrt() * g[c] + b[c];
            assert!((ln[row * 3 + c] - want).abs() < 1e-5);
            let want = v[c] / (ms + 1e-8).sqrt() * gr[c];
            assert!((rms[row * 3 + c] - want).abs() < 1e-5);
        }
    }
}
