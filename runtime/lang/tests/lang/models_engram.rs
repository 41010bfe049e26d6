//! Engram conditional memory (docs/language.md, "Engram conditional memory"):
//! `engram_apply` and `engram_embed` against an f64 reference of the documented
//! formula (hash rows from `mlpl_devices::engram`, the parameters read from the
//! workspace), finite-difference gradients, errors both statically and at run
//! time, `estimate_engram`, and `clone_model`.

use mlpl_devices::engram;
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::Value;

use crate::common::{error_code, run_value};
use crate::finite_differences::Check;

fn values(it: &Interp, name: &str) -> Vec<f64> {
    match it.ws.get(name) {
        Some(Value::Array(a)) => a.to_f64(),
        other => panic!("`{name}` is {other:?}"),
    }
}

/// The formula of docs/language.md in f64 for layer `id` (`engram(d, rows,
/// heads, seed)`), hidden states `h` (`ids.len() × d`) and `ids` made of
/// sequences of `t` ids.
#[allow(clippy::too_many_arguments)]
fn reference(
    it: &Interp,
    id: u64,
    (d, rows, heads, seed): (usize, usize, usize, u64),
    h: &[f64],
    ids: &[f32],
    t: usize,
) -> Vec<f64> {
    let table = values(it, &format!("__engram_T_{id}"));
    let wk = values(it, &format!("__engram_Wk_{id}"));
    let wv = values(it, &format!("__engram_Wv_{id}"));
    let taps = values(it, &format!("__engram_C_{id}"));
    let slots = 2 * heads;
    let w = d / slots;
    let n = ids.len();
    let mut u = vec![0f64; n * d];
    for (p, urow) in u.chunks_mut(d).enumerate() {
        let (seq, pos) = (&ids[p / t * t..p / t * t + t], p % t);
        let mut e = Vec::with_capacity(d);
        for (oi, order) in [2usize, 3].into_iter().enumerate() {
            for head in 0..heads {
                let slot = oi * heads + head;
                let key = engram::key(seed, order, head);
                let r = engram::row(seq, pos, order, slot, key, rows);
                e.extend_from_slice(&table[r * w..(r + 1) * w]);
            }
        }
        let proj = |m: &[f64]| -> Vec<f64> {
            (0..d)
                .map(|j| (0..d).map(|i| e[i] * m[i * d + j]).sum())
                .collect()
        };
        let (k, v) = (proj(&wk), proj(&wv));
        let hr = &h[p * d..(p + 1) * d];
        let rms = |x: &[f64]| (x.iter().map(|a| a * a).sum::<f64>() / d as f64 + 1e-8).sqrt();
        let (rh, rk) = (rms(hr), rms(&k));
        let s: f64 = hr.iter().zip(&k).map(|(a, b)| a / rh * (b / rk)).sum();
        let gate = 1.0 / (1.0 + (-s / (d as f64).sqrt()).exp());
        for (o, vj) in urow.iter_mut().zip(&v) {
            *o = gate * vj;
        }
    }
    let mut out = vec![0f64; n * d];
    for p in 0..n {
        let pos = p % t;
        for c in 0..d {
            let conv: f64 = (0..4.min(pos + 1))
                .map(|j| taps[j * d + c] * u[(p - j) * d + c])
                .sum();
            let silu = conv / (1.0 + (-conv).exp());
            out[p * d + c] = h[p * d + c] + u[p * d + c] + silu;
        }
    }
    out
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 2e-5 * (1.0 + w.abs()),
            "element {i}: {g} vs reference {w}"
        );
    }
}

const SETUP: &str = "m = engram(8, 11, 2, 5)\n__engram_C_0 = randn(3, [4, 8]) * 0.5\nH = randn(7, [2, 5, 8])\nI = [[1, 2, 3, 1, 2], [4, 4, 4, 4, 9]]";

#[test]
fn engram_apply_follows_the_documented_formula() {
    let mut it = Interp::new(Workspace::new());
    let got = match run_value(&mut it, &format!("{SETUP}\nengram_apply(m, H, I)")) {
        Value::Array(a) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(got.shape(), &[2, 5, 8]);
    let h = values(&it, "H");
    let ids: Vec<f32> = values(&it, "I").iter().map(|&v| v as f32).collect();
    let want = reference(&it, 0, (8, 11, 2, 5), &h, &ids, 5);
    assert_close(&got.to_f64(), &want);
}

/// With h = 0 the gate is σ(0) = ½ and with C = 0 the convolution adds
/// silu(0) = 0: each row is ½·e·Wv, so positions whose 2- and 3-grams agree
/// (2 and 5 of 1 2 3 1 2 3) read the same rows, and others do not.
#[test]
fn equal_ngrams_read_equal_rows() {
    let mut it = Interp::new(Workspace::new());
    let v = run_value(
        &mut it,
        "m = engram(8, 64, 2, 1)\nengram_apply(m, zeros([6, 8]), [1, 2, 3, 1, 2, 3])",
    );
    let Value::Array(a) = v else { panic!() };
    let y = a.to_f64();
    let row = |p: usize| &y[p * 8..(p + 1) * 8];
    assert_eq!(row(2), row(5));
    assert_ne!(row(0), row(3), "(start, 1) and (3, 1) differ");
    assert!(row(2).iter().any(|&x| x != 0.0));
}

#[test]
fn engram_embed_adds_memory_to_its_embedding() {
    let mut it = Interp::new(Workspace::new());
    let v = run_value(
        &mut it,
        "m = engram_embed(12, 8, 11, 2, 5)\n__engram_C_0 = randn(4, [4, 8]) * 0.5\napply(m, [[3, 1, 4, 1], [5, 9, 2, 6]])",
    );
    let Value::Array(a) = v else { panic!() };
    assert_eq!(a.shape(), &[2, 4, 8]);
    let table = values(&it, "__engram_E_0");
    let ids = [3f32, 1., 4., 1., 5., 9., 2., 6.];
    let h: Vec<f64> = ids
        .iter()
        .flat_map(|&i| table[i as usize * 8..(i as usize + 1) * 8].to_vec())
        .collect();
    let want = reference(&it, 0, (8, 11, 2, 5), &h, &ids, 4);
    assert_close(&a.to_f64(), &want);
}

#[test]
fn gradients_reach_the_tables_the_gate_the_convolution_and_h() {
    Check {
        setup: SETUP,
        loss: "sum(engram_apply(m, H, I) * engram_apply(m, H, I))".into(),
        wrt: &[
            "__engram_T_0",
            "__engram_Wk_0",
            "__engram_Wv_0",
            "__engram_C_0",
            "H",
        ],
        training: false,
        h: 3e-3,
        points: 16,
        nonzero: true,
    }
    .run();
    Check {
        setup: "m = chain(engram_embed(12, 8, 11, 2, 5), linear(8, 3, 1))\n__engram_C_0 = randn(4, [4, 8]) * 0.5\nX = [[3, 1, 4, 1], [5, 9, 2, 6]]",
        loss: "sum(apply(m, X) * apply(m, X))".into(),
        wrt: &["__engram_E_0", "__engram_T_0", "__engram_C_0"],
        training: false,
        h: 3e-3,
        points: 16,
        nonzero: true,
    }
    .run();
}

/// The table's gradient is a scatter-add: rows no n-gram selected get exactly 0.
#[test]
fn table_gradients_touch_only_the_selected_rows() {
    let mut it = Interp::new(Workspace::new());
    let v = run_value(
        &mut it,
        "m = engram(4, 50, 1, 2)\ng = grad(sum(engram_apply(m, ones([3, 4]), [7, 8, 9])), __engram_T_0)\ng",
    );
    let Value::Array(g) = v else { panic!() };
    assert_eq!(g.shape(), &[100, 2]);
    let touched = g
        .to_f64()
        .chunks(2)
        .filter(|r| r.iter().any(|&x| x != 0.0))
        .count();
    assert!(
        (1..=6).contains(&touched),
        "{touched} rows touched by 3 tokens × 2 slots"
    );
}

#[test]
fn errors_name_the_mismatch_at_run_time_and_statically() {
    let cases = [
        (
            "m = engram(8, 16, 2, 0)\nengram_apply(m, ones([4, 8]), [1, 2, 3])",
            "E0230",
        ),
        (
            "m = engram(8, 16, 2, 0)\nengram_apply(m, ones([3, 6]), [1, 2, 3])",
            "E0230",
        ),
        ("m = engram(8, 16, 2, 0)\napply(m, ones([3, 8]))", "E0231"),
        (
            "m = chain(linear(8, 8, 0), engram(8, 16, 2, 0))\napply(m, ones([3, 8]))",
            "E0231",
        ),
        ("m = engram(6, 16, 2, 0)", "E0213"),
        ("m = engram(8, 0, 2, 0)", "E0213"),
        ("m = engram(8, 16, 0, 0)", "E0213"),
        ("m = engram(4, 9000000, 1, 0)", "E0213"),
        (
            "m = linear(8, 8, 0)\nengram_apply(m, ones([3, 8]), [1, 2, 3])",
            "E0308",
        ),
        ("m = engram_embed(5, 4, 8, 1, 0)\napply(m, [1, 5])", "E0402"),
    ];
    for (src, code) in cases {
        assert_eq!(error_code(src), code, "{src}");
        let checked = mlpl_lang::check::check_source(src);
        let codes: Vec<&str> = checked.diagnostics.iter().map(|d| d.code).collect();
        assert!(codes.contains(&code), "{src}: the checker says {codes:?}");
    }
    assert_eq!(
        error_code("m = engram(8, 16, 2, 0)\nengram_apply(m, ones([3, 8]), [1, 2.5, 3])"),
        "E0402"
    );
}

#[test]
fn estimate_engram_counts_the_tables_apart() {
    let mut it = Interp::new(Workspace::new());
    let src =
        "m = chain(engram_embed(32, 8, 64, 2, 0), linear(8, 32, 1))\nestimate_engram(m, 4, 16)";
    let Value::Array(a) = run_value(&mut it, src) else {
        panic!()
    };
    // 4 slots × 64 rows of width 2; weights + gradient + two moments at 4 bytes;
    // 4 slots × 4 × 16 tokens read at most all 256 rows.
    assert_eq!(a.to_f64(), vec![512.0, 8192.0, 256.0]);
    let Value::Array(a) = run_value(&mut it, "estimate_engram(m, 1, 2, 2)") else {
        panic!()
    };
    assert_eq!(a.to_f64(), vec![512.0, 4096.0, 8.0]);
    let Value::Array(a) = run_value(&mut it, "freeze(m)\nestimate_engram(m, 1, 2)") else {
        panic!()
    };
    assert_eq!(a.to_f64(), vec![512.0, 2048.0, 8.0]);
    let Value::Array(e) = run_value(&mut it, "unfreeze(m)\nestimate_train(m, 1, 4, 16)") else {
        panic!()
    };
    // The tables are part of the parameters: E 256, T 512, Wk, Wv 64 each, C 32, linear 288.
    assert_eq!(
        e.to_f64()[0],
        (256 + 512 + 64 + 64 + 32 + 8 * 32 + 32) as f64
    );
}

#[test]
fn clone_model_copies_an_engram_layer() {
    let mut it = Interp::new(Workspace::new());
    let a = run_value(
        &mut it,
        "m = engram(8, 16, 2, 0)\nc = clone_model(m)\nengram_apply(c, ones([3, 8]), [1, 2, 3]) - engram_apply(m, ones([3, 8]), [1, 2, 3])",
    );
    let Value::Array(a) = a else { panic!() };
    assert!(a.to_f64().iter().all(|&x| x == 0.0));
    assert!(
        it.ws.get("__engram_T_1").is_some(),
        "the clone has its own table"
    );
}
