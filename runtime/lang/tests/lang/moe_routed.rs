//! The routed mixture of experts (`nn::moe`: only the chosen experts compute)
//! against a dense reference kept here: every expert on every token as one
//! batched product, masked by the choice, the way `moe` used to evaluate. The
//! outputs, the load-balancing loss and every gradient must be the same bits,
//! for the plain and GPT-OSS forms, top-1 and top-2 (and top-3), an expert that
//! gets no token, a single token and more tokens than one GEMM block of `k`.

use std::collections::HashMap;
use std::sync::Arc;

use mlpl_devices::profile::KernelLog;
use mlpl_devices::{cpu, Tensor, UnaryOp};
use mlpl_lang::autograd::{Tape, Var};
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::nn::moe::choose;
use mlpl_lang::value::Value;

use crate::common::run_value;

/// A `moe` layer's sizes and form, and the input's shape.
#[derive(Clone, Copy, Debug)]
struct Case {
    d: usize,
    experts: usize,
    k: usize,
    hidden: usize,
    /// GPT-OSS's form: biases, the clamped gate (alpha 1.702, limit 7) and the
    /// softmax of the chosen logits.
    gpt_oss: bool,
    tokens: usize,
}

impl Case {
    fn layer(&self) -> String {
        let Case {
            d,
            experts,
            k,
            hidden,
            ..
        } = *self;
        if self.gpt_oss {
            format!("moe({d}, {experts}, {k}, {hidden}, 5, 1, 1.702, 7, 1)")
        } else {
            format!("moe({d}, {experts}, {k}, {hidden}, 5)")
        }
    }

    fn params(&self) -> Vec<&'static str> {
        let mut p = vec!["R", "Wg", "Wu", "Wd"];
        if self.gpt_oss {
            p.extend(["bR", "bg", "bu", "bd"]);
        }
        p
    }

    /// An interpreter holding the layer `m`, its input `X` `[tokens, d]` and
    /// the weights `T` of the loss `sum(apply(m, X) * T) + 3 · aux_loss(m)`.
    fn setup(&self) -> Interp {
        let mut it = Interp::new(Workspace::new());
        let (n, d) = (self.tokens, self.d);
        run_value(
            &mut it,
            &format!(
                "m = {}\nperturb_params(m, \"all_layers\", 0.3, 9)\nX = randn(71, [{n}, {d}])\nT = randn(72, [{n}, {d}])\n0",
                self.layer()
            ),
        );
        it
    }
}

const LOSS: &str = "sum(apply(m, X) * T) + 3 * aux_loss(m)";

fn tensor(it: &mut Interp, name: &str) -> Tensor {
    match run_value(it, name) {
        Value::Array(a) => a.tensor(),
        v => panic!("{name} is a {}", v.kind_name()),
    }
}

/// Whether `a` and `b` have the same shape and values: the same bits, up to
/// the sign of zero (the dense form's masked zeros may be −0, e.g. the bias
/// gradient of an expert no token chose).
fn same(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape() && a.to_vec().iter().zip(b.to_vec()).all(|(&x, y)| x == y)
}

/// The routed layer's output, aux loss and gradients (of [`LOSS`], by name).
fn routed(it: &mut Interp, case: &Case) -> (Tensor, Tensor, HashMap<String, Tensor>) {
    let y = tensor(it, "apply(m, X)");
    let aux = tensor(it, "aux_loss(m)");
    let mut grads = HashMap::new();
    for p in case.params() {
        let name = format!("__moe_{p}_0");
        grads.insert(name.clone(), tensor(it, &format!("grad({LOSS}, {name})")));
    }
    grads.insert("X".into(), tensor(it, &format!("grad({LOSS}, X)")));
    (y, aux, grads)
}

/// The dense evaluation: every expert on every token, masked by the choice,
/// with the ops the interpreter records for it. Returns the output, the aux
/// loss, the gradients of [`LOSS`] by name and the tokens each expert got.
fn dense(it: &mut Interp, case: &Case) -> (Tensor, Tensor, HashMap<String, Tensor>, Vec<usize>) {
    let Case {
        d, experts: e, k, ..
    } = *case;
    let n = case.tokens;
    let mut t = Tape::new(cpu());
    let mut leaves: Vec<(String, Var)> = Vec::new();
    let mut leaf = |t: &mut Tape, it: &mut Interp, name: &str| {
        let v = t.leaf(tensor(it, name), true);
        leaves.push((name.to_string(), v));
        v
    };
    let x2 = leaf(&mut t, it, "X");
    let param = |p: &str| format!("__moe_{p}_0");
    let r = leaf(&mut t, it, &param("R"));
    let (wg, wu, wd) = (
        leaf(&mut t, it, &param("Wg")),
        leaf(&mut t, it, &param("Wu")),
        leaf(&mut t, it, &param("Wd")),
    );
    let biases = if case.gpt_oss {
        Some([
            leaf(&mut t, it, &param("bR")),
            leaf(&mut t, it, &param("bg")),
            leaf(&mut t, it, &param("bu")),
            leaf(&mut t, it, &param("bd")),
        ])
    } else {
        None
    };
    let add = |t: &mut Tape, x: Var, i: usize| match biases {
        Some(b) => t.add(x, b[i]).unwrap(),
        None => x,
    };
    let logits = t.matmul(x2, r).unwrap();
    let logits = add(&mut t, logits, 0);
    let p = t.softmax(logits, 1).unwrap();
    let (mask, counts) = choose(&t.value(p).unwrap().to_vec(), n, e, k);
    let keep: Vec<f32> = mask
        .iter()
        .map(|&c| if c == 1.0 { 0.0 } else { -1e30 })
        .collect();
    let keep = t.constant(Tensor::from_vec(vec![n, e], keep));
    let chosen = t.constant(Tensor::from_vec(vec![n, e], mask));
    let pc = t.mul(p, chosen).unwrap();
    let gates = if case.gpt_oss {
        let kept = t.add(logits, keep).unwrap();
        t.softmax(kept, 1).unwrap()
    } else if k >= 2 {
        let total = t.sum(pc, Some(1)).unwrap();
        let total = t.reshape(total, vec![n, 1]).unwrap();
        t.div(pc, total).unwrap()
    } else {
        pc
    };
    let x3 = t.reshape(x2, vec![1, n, d]).unwrap();
    let g = t.matmul(x3, wg).unwrap();
    let g = add(&mut t, g, 1);
    let u = t.matmul(x3, wu).unwrap();
    let u = add(&mut t, u, 2);
    let h = if case.gpt_oss {
        let g = t.clamp(g, f32::NEG_INFINITY, 7.0).unwrap();
        let u = t.clamp(u, -7.0, 7.0).unwrap();
        let ag = t.mul_scalar(g, 1.702).unwrap();
        let sg = t.unary(UnaryOp::Sigmoid, ag).unwrap();
        let glu = t.mul(g, sg).unwrap();
        let u1 = t.add_scalar(u, 1.0).unwrap();
        t.mul(u1, glu).unwrap()
    } else {
        let g = t.unary(UnaryOp::Silu, g).unwrap();
        t.mul(g, u).unwrap()
    };
    let y = t.matmul(h, wd).unwrap();
    let y = add(&mut t, y, 3);
    let gt = t.permute(gates, &[1, 0]).unwrap();
    let gt = t.reshape(gt, vec![e, n, 1]).unwrap();
    let y = t.mul(y, gt).unwrap();
    let y = t.sum(y, Some(0)).unwrap();
    let scaled: Vec<f32> = counts
        .iter()
        .map(|&c| (e as f64 * c as f64 / (n as f64 * k as f64)) as f32)
        .collect();
    let scaled = t.constant(Tensor::from_vec(vec![e], scaled));
    let mean_p = t.mean(p, Some(0)).unwrap();
    let weighted = t.mul(mean_p, scaled).unwrap();
    let aux = t.sum(weighted, None).unwrap();

    let w = t.constant(tensor(it, "T"));
    let yw = t.mul(y, w).unwrap();
    let s = t.sum(yw, None).unwrap();
    let a3 = t.mul_scalar(aux, 3.0).unwrap();
    let loss = t.add(s, a3).unwrap();
    let grads = t.backward(loss).unwrap();
    let by_name = leaves
        .iter()
        .map(|(name, v)| (name.clone(), grads.get(*v).unwrap().clone()))
        .collect();
    (t.value(y).unwrap(), t.value(aux).unwrap(), by_name, counts)
}

/// Routed and dense agree bit for bit; returns the tokens per expert.
fn agree(case: Case) -> Vec<usize> {
    let mut it = case.setup();
    let (y, aux, grads) = routed(&mut it, &case);
    let (dy, daux, dgrads, counts) = dense(&mut it, &case);
    assert!(same(&y, &dy), "{case:?}: output {y:?} vs {dy:?}");
    assert!(same(&aux, &daux), "{case:?}: aux loss {aux:?} vs {daux:?}");
    assert_eq!(grads.len(), dgrads.len());
    for (name, g) in &grads {
        let want = &dgrads[name];
        assert!(
            same(g, want),
            "{case:?}: gradient of {name}: {g:?} vs {want:?}"
        );
        assert!(
            g.to_vec().iter().any(|&v| v != 0.0),
            "{case:?}: gradient of {name} is zero"
        );
    }
    counts
}

const PLAIN: Case = Case {
    d: 8,
    experts: 4,
    k: 2,
    hidden: 12,
    gpt_oss: false,
    tokens: 15,
};

#[test]
fn plain_form_top1_and_top2_match_the_dense_form() {
    for k in [1, 2, 3] {
        agree(Case { k, ..PLAIN });
    }
}

#[test]
fn gpt_oss_form_top1_and_top2_match_the_dense_form() {
    for k in [1, 2] {
        agree(Case {
            k,
            gpt_oss: true,
            ..PLAIN
        });
    }
}

#[test]
fn a_single_token_leaves_experts_without_tokens() {
    for gpt_oss in [false, true] {
        let counts = agree(Case {
            k: 1,
            tokens: 1,
            gpt_oss,
            ..PLAIN
        });
        assert_eq!(counts.iter().filter(|&&c| c == 0).count(), 3, "{counts:?}");
    }
}

#[test]
fn more_tokens_than_one_gemm_block_match_the_dense_form() {
    // 600 tokens: three blocks of the GEMM's k (256), so the weight gradients
    // add per-block products in order, as the dense product over all tokens.
    for gpt_oss in [false, true] {
        agree(Case {
            d: 4,
            experts: 3,
            k: 2,
            hidden: 5,
            gpt_oss,
            tokens: 600,
        });
    }
}

/// The products of a forward pass whose right operand is an expert weight
/// `[E, a, b]`: their left operands' shapes.
fn expert_products(case: &Case) -> Vec<Vec<usize>> {
    let mut it = case.setup();
    let log = Arc::new(KernelLog::new(10_000));
    it.devices.set_profile(Some(log.clone()));
    log.restart();
    run_value(&mut it, "apply(m, X)");
    log.events()
        .into_iter()
        .filter(|ev| ev.name == "matmul" && ev.inputs[1].len() == 3)
        .map(|ev| {
            assert_eq!(ev.inputs[1][0], case.experts, "{:?}", ev.inputs);
            ev.inputs[0].clone()
        })
        .collect()
}

#[test]
fn the_expert_products_read_only_the_routed_rows() {
    let case = Case {
        tokens: 40,
        ..PLAIN
    };
    let mut it = case.setup();
    let (.., counts) = dense(&mut it, &case);
    let most = *counts.iter().max().unwrap();
    assert!(most < case.tokens, "{counts:?}");
    let products = expert_products(&case);
    // Gate, up and down products, each over [blocks, E, most tokens of an expert].
    assert_eq!(products.len(), 3, "{products:?}");
    for p in &products {
        assert_eq!(&p[..3], &[1, case.experts, most], "{products:?}");
    }
    // Rows multiplied: E·most, not E·n as the dense form did.
    assert!(case.experts * most < case.experts * case.tokens);
}

#[test]
fn too_many_token_expert_positions_is_e0410() {
    // 65 blocks of 256 tokens × 1024 experts: more positions than f32 indices
    // address exactly.
    assert_eq!(
        crate::common::error_code("m = moe(1, 1024, 1, 1, 0)\napply(m, randn(1, [16640, 1]))"),
        "E0410"
    );
}
