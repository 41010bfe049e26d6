//! In a `chain`, a `linear` layer (or a LoRA-wrapped one) directly followed by
//! an element-wise activation layer runs as one fused bias + activation kernel,
//! and attention runs its scale, causal mask and softmax as one kernel. The
//! outputs and every gradient must be the same bits as the unfused forms: the
//! activation in a nested chain (which is not fused) or as a builtin call.

use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::{Array, Value};
use mlpl_syntax::parse;

use crate::common::run_value;

fn run(it: &mut Interp, src: &str) -> Array {
    match run_value(it, src) {
        Value::Array(a) => a,
        other => panic!("{src}: {other:?}"),
    }
}

fn bits(a: &Array) -> Vec<u32> {
    a.to_f32().iter().map(|v| v.to_bits()).collect()
}

/// Evaluates each pair of expressions after `setup` and asserts the same shape
/// and bits.
fn same(setup: &str, pairs: &[(String, String)]) {
    let mut it = Interp::new(Workspace::new());
    let p = parse(setup);
    assert!(p.diagnostics.iter().all(|d| !d.is_error()), "{setup}");
    it.run(&p.program).expect("setup runs");
    for (fused, plain) in pairs {
        let (a, b) = (run(&mut it, fused), run(&mut it, plain));
        assert_eq!(a.shape(), b.shape(), "{fused} vs {plain}: shapes");
        assert!(
            bits(&a) == bits(&b),
            "{fused} differs from {plain}:\n{:?}\n{:?}",
            a.to_f32(),
            b.to_f32()
        );
    }
}

#[test]
fn linear_then_activation_matches_the_unfused_layers() {
    for act in ["relu", "gelu", "silu", "tanh"] {
        let setup = format!(
            "lin = linear(6, 9, 1)\nX = randn(7, [3, 4, 6])\nR = randn(8, [3, 4, 9])\n\
             fused = chain(lin, {act}_layer())\nplain = chain(lin, chain({act}_layer()))"
        );
        let loss = |m: &str| format!("sum(apply({m}, X) * R)");
        let mut pairs = vec![
            ("apply(fused, X)".to_string(), "apply(plain, X)".to_string()),
            (
                "apply(fused, X)".to_string(),
                format!("{act}(apply(lin, X))"),
            ),
        ];
        for wrt in ["__linear_W_0", "__linear_b_0", "X"] {
            pairs.push((
                format!("grad({}, {wrt})", loss("fused")),
                format!("grad({}, {wrt})", loss("plain")),
            ));
        }
        same(&setup, &pairs);
    }
}

#[test]
fn lora_then_activation_matches_the_unfused_layers() {
    for act in ["relu", "tanh"] {
        let setup = format!(
            "s = lora(linear(5, 8, 2), 2, 4, 9)\nX = randn(3, [6, 5])\nR = randn(4, [6, 8])\n\
             fused = chain(s, {act}_layer())\nplain = chain(s, chain({act}_layer()))"
        );
        let mut pairs = vec![("apply(fused, X)".to_string(), "apply(plain, X)".to_string())];
        for wrt in ["__linear_W_0", "__linear_b_0", "X"] {
            pairs.push((
                format!("grad(sum(apply(fused, X) * R), {wrt})"),
                format!("grad(sum(apply(plain, X) * R), {wrt})"),
            ));
        }
        same(&setup, &pairs);
    }
}

#[test]
fn attention_probabilities_match_the_unfused_operations() {
    // attention_weights are the fused kernel's probabilities; the same
    // softmax(q·kᵀ/√hd + mask) written out with builtins must agree bit for bit.
    let setup = "a = causal_attention(8, 1, 3)\nX = randn(5, [7, 8])\n\
                 q = matmul(X, __attn_Wq_0)\nk = matmul(X, __attn_Wk_0)\n\
                 s = matmul(q, transpose(k)) / sqrt(8)";
    same(
        setup,
        &[(
            "attention_weights(a, X)".to_string(),
            "softmax(s + gt(reshape(iota(7), [1, 7]), reshape(iota(7), [7, 1])) * -1000000000)"
                .to_string(),
        )],
    );
}
