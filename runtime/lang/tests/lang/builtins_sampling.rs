//! Sampling (LANGUAGE §10.7, §13.6): sample and top_k. Expected draws were
//! computed from §13.6: weights exp((x − max)/T) in float64, one uniform from
//! xorshift64 seeded with mix(seed).

use crate::common;

use common::{error_code, eval};

const LOGITS: &str = "[0.1, 2.0, -1.0, 0.5, 0.3]";

#[test]
fn temperature_zero_takes_the_first_maximum() {
    assert_eq!(eval("sample([1, 3, 3, 2], 0, 5)"), "1");
    assert_eq!(eval("sample([1, 3, 3, 2], 0, 6)"), "1");
    assert_eq!(eval("sample([7], 0, 0)"), "0");
    assert_eq!(eval(&format!("sample({LOGITS}, 0, 123)")), "1");
    assert_eq!(eval("shape(sample([1, 2], 0, 0))"), "[]");
}

#[test]
fn sampling_follows_section_13_6() {
    let t08 = [1, 1, 4, 1, 1, 3, 1, 1];
    for (seed, want) in t08.iter().enumerate() {
        assert_eq!(
            eval(&format!("sample({LOGITS}, 0.8, {seed})")),
            want.to_string(),
            "seed {seed}"
        );
    }
    let t5 = [1, 1, 4, 1, 0, 4, 2, 0, 1, 2, 1, 2];
    for (seed, want) in t5.iter().enumerate() {
        assert_eq!(
            eval(&format!("sample({LOGITS}, 5, {seed})")),
            want.to_string(),
            "seed {seed}"
        );
    }
}

#[test]
fn minus_infinity_is_never_drawn() {
    for seed in 0..20 {
        assert_eq!(
            eval(&format!("sample(concat(log([0]), [0]), 1, {seed})")),
            "1"
        );
        assert_eq!(
            eval(&format!("sample(concat([0], log([0, 0])), 3, {seed})")),
            "0"
        );
    }
}

#[test]
fn sample_errors() {
    assert_eq!(error_code("sample(zeros([0]), 1, 0)"), "E0216");
    assert_eq!(error_code("sample([1, 2], -1, 0)"), "E0401");
    assert_eq!(error_code("sample(zeros([2, 2]), 1, 0)"), "E0205");
    assert_eq!(error_code("sample(1, 1, 0)"), "E0205");
    assert_eq!(error_code("sample([1, 2], [1], 0)"), "E0205");
    assert_eq!(error_code("sample([1, 2], 1, [0])"), "E0205");
    assert_eq!(error_code("sample([1, 2], 1)"), "E0103");
    assert_eq!(error_code("sample(\"a\", 1, 0)"), "E0301");
}

#[test]
fn top_k_masks_all_but_the_k_largest() {
    assert_eq!(eval(&format!("top_k({LOGITS}, 2)")), "-inf 2 -inf 0.5 -inf");
    assert_eq!(
        eval(&format!("top_k({LOGITS}, 1)")),
        "-inf 2 -inf -inf -inf"
    );
    assert_eq!(eval(&format!("top_k({LOGITS}, 5)")), "0.1 2 -1 0.5 0.3");
    // Among equal values the lower index is kept.
    assert_eq!(eval("top_k([1, 3, 3, 2], 1)"), "-inf 3 -inf -inf");
    assert_eq!(eval("top_k([1, 3, 3, 2], 2)"), "-inf 3 3 -inf");
    assert_eq!(eval("top_k([5, 5, 5], 2)"), "5 5 -inf");
    // Names are kept.
    assert_eq!(eval("v : [vocab] = [1, 2]\nlabels(top_k(v, 1))"), "vocab");
}

#[test]
fn top_k_errors() {
    assert_eq!(error_code(&format!("top_k({LOGITS}, 0)")), "E0401");
    assert_eq!(error_code(&format!("top_k({LOGITS}, 6)")), "E0401");
    assert_eq!(error_code(&format!("top_k({LOGITS}, 1.5)")), "E0401");
    assert_eq!(error_code("top_k(zeros([2, 2]), 1)"), "E0205");
    assert_eq!(error_code("top_k(3, 1)"), "E0205");
    assert_eq!(error_code("top_k([1, 2], [1])"), "E0205");
    assert_eq!(error_code("top_k([1, 2])"), "E0103");
}
