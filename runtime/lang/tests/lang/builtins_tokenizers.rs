//! Tokenizers (LANGUAGE §10.10, §16.4): tokenizer, tokenize_bytes, decode_bytes,
//! train_bpe, apply_tokenizer, decode.

use crate::common;

use common::{error_code, eval, run_in, warning_codes};

#[test]
fn byte_level_tokenizer() {
    assert_eq!(
        eval("tokenizer()"),
        "<tokenizer: byte-level tokenizer (vocab=256)>"
    );
    assert_eq!(
        eval("t = tokenizer()\nt"),
        "<tokenizer: byte-level tokenizer (vocab=256)>"
    );
    assert_eq!(eval("apply_tokenizer(tokenizer(), \"hi\")"), "104 105");
    assert_eq!(eval("apply_tokenizer(tokenizer(), [104, 105])"), "104 105");
    assert_eq!(eval("decode(tokenizer(), [104, 105])"), "hi");
    assert_eq!(eval("decode(tokenizer(), [195, 169])"), "é");
    assert_eq!(eval("decode(tokenizer(), [195])"), "\u{FFFD}");
    assert_eq!(error_code("decode(tokenizer(), [256])"), "E0402");
    assert_eq!(error_code("decode(tokenizer(), [-1])"), "E0402");
    assert_eq!(error_code("decode(tokenizer(), [1.5])"), "E0402");
    assert_eq!(error_code("tokenizer(1)"), "E0103");
}

#[test]
fn tokenize_bytes_gives_utf8_bytes() {
    assert_eq!(eval("tokenize_bytes(\"hé!\")"), "104 195 169 33");
    assert_eq!(eval("tokenize_bytes(\"\")"), "[]");
    assert_eq!(eval("shape(tokenize_bytes(\"\"))"), "0");
    assert_eq!(eval("tokenize_bytes(\"a\\nb\")"), "97 10 98");
    assert_eq!(eval("labels(tokenize_bytes(\"ab\"))"), "");
    assert_eq!(error_code("tokenize_bytes(5)"), "E0302");
    assert_eq!(error_code("tokenize_bytes([104])"), "E0302");
}

#[test]
fn decode_bytes_makes_text() {
    assert_eq!(eval("decode_bytes([104, 105])"), "hi");
    assert_eq!(eval("decode_bytes(tokenize_bytes(\"héllo\"))"), "héllo");
    assert_eq!(eval("decode_bytes(104)"), "h");
    assert_eq!(eval("decode_bytes(zeros([0]))"), "");
    // Invalid UTF-8 becomes U+FFFD.
    assert_eq!(eval("decode_bytes([195])"), "\u{FFFD}");
    assert_eq!(eval("decode_bytes([104, 255, 105])"), "h\u{FFFD}i");
    assert_eq!(error_code("decode_bytes([256])"), "E0402");
    assert_eq!(error_code("decode_bytes([-1])"), "E0402");
    assert_eq!(error_code("decode_bytes([1.5])"), "E0402");
    assert_eq!(error_code("decode_bytes(zeros([1, 1]))"), "E0205");
    assert_eq!(error_code("decode_bytes(\"a\")"), "E0301");
}

#[test]
fn bpe_training_merges_the_most_frequent_pair() {
    // "abababab": (a,b) ×4 → 256; (256,256) ×3 → 257; (257,257) ×1 → 258; one
    // token left, so training stops at vocabulary 259.
    assert_eq!(
        eval("train_bpe(\"abababab\", 260, 0)"),
        "<tokenizer: BPE tokenizer (vocab=259, merges=3, trained from 8 bytes, seed=0)>"
    );
    let tok = "tok = train_bpe(\"abababab\", 260, 0)\n";
    assert_eq!(
        eval(&format!("{tok}apply_tokenizer(tok, \"abababab\")")),
        "258"
    );
    // a b a b a → 256 256 97 → 257 97.
    assert_eq!(
        eval(&format!("{tok}apply_tokenizer(tok, \"ababa\")")),
        "257 97"
    );
    assert_eq!(eval(&format!("{tok}apply_tokenizer(tok, \"ba\")")), "98 97");
    assert_eq!(eval(&format!("{tok}decode(tok, [257, 97])")), "ababa");
    assert_eq!(eval(&format!("{tok}decode(tok, [258, 98])")), "ababababb");
    assert_eq!(eval(&format!("{tok}decode(tok, zeros([0]))")), "");
}

#[test]
fn bpe_vocabulary_smaller_than_requested_is_w0403() {
    assert!(warning_codes("train_bpe(\"abababab\", 260, 0)").contains(&"W0403"));
    assert!(warning_codes("train_bpe(\"abababab\", 259, 0)").is_empty());
    assert!(warning_codes("train_bpe(\"a\", 300, 0)").contains(&"W0403"));
    assert_eq!(
        eval("train_bpe(\"abababab\", 256, 0)"),
        "<tokenizer: BPE tokenizer (vocab=256, merges=0, trained from 8 bytes, seed=0)>"
    );
    assert!(warning_codes("train_bpe(\"abababab\", 256, 0)").is_empty());
}

#[test]
fn bpe_ties_go_to_the_smallest_pair() {
    // "abcabc": (a,b) and (b,c) both occur twice; (97, 98) is smaller. Then
    // (256, c) ×2 → 257, then (257, 257) → 258.
    let tok = "tok = train_bpe(\"abcabc\", 259, 7)\n";
    assert_eq!(
        eval(&format!("{tok}tok")),
        "<tokenizer: BPE tokenizer (vocab=259, merges=3, trained from 6 bytes, seed=7)>"
    );
    assert_eq!(
        eval(&format!("{tok}apply_tokenizer(tok, \"bcab\")")),
        "98 99 256"
    );
    assert_eq!(
        eval(&format!("{tok}apply_tokenizer(tok, \"abcabc\")")),
        "258"
    );
    assert_eq!(
        eval(&format!("{tok}apply_tokenizer(tok, \"abcab\")")),
        "257 256"
    );
    // Merges apply left to right without overlap: "aaa" with (a,a) → 256 gives 256 97.
    assert_eq!(
        eval("t = train_bpe(\"aaaa\", 257, 0)\napply_tokenizer(t, \"aaa\")"),
        "256 97"
    );
}

#[test]
fn bpe_from_a_byte_array() {
    assert_eq!(
        eval("train_bpe([97, 98, 97, 98], 257, 1)"),
        "<tokenizer: BPE tokenizer (vocab=257, merges=1, trained from 4 bytes, seed=1)>"
    );
    assert_eq!(
        eval("t = train_bpe(tokenize_bytes(\"abab\"), 257, 1)\napply_tokenizer(t, [97, 98, 98])"),
        "256 98"
    );
    assert_eq!(error_code("train_bpe([300], 260, 0)"), "E0402");
    assert_eq!(error_code("train_bpe([-1], 260, 0)"), "E0402");
    assert_eq!(error_code("train_bpe(tokenizer(), 260, 0)"), "E0302");
    assert_eq!(error_code("train_bpe(\"ab\", [260], 0)"), "E0205");
    assert_eq!(error_code("train_bpe(\"ab\", 260)"), "E0103");
    assert!(warning_codes("train_bpe(\"abab\", 256.5, 0)").contains(&"W0202"));
}

#[test]
fn bpe_decode_drops_ids_outside_the_vocabulary() {
    let tok = "tok = train_bpe(\"abababab\", 260, 0)\n";
    let o = run_in(&format!("{tok}decode(tok, [258, 259, 300, 97])"), None);
    assert_eq!(o.warning_codes(), vec!["W0403", "W0402"]);
    let w = &o.warnings[1];
    let text = format!("{} {:?}", w.message, w.primary);
    assert!(
        text.contains("2 ids"),
        "the warning gives the count: {text}"
    );
    assert_eq!(o.shown(), "abababab\u{61}");
    assert_eq!(error_code(&format!("{tok}decode(tok, [-1])")), "E0402");
    assert_eq!(error_code(&format!("{tok}decode(tok, [0.5])")), "E0402");
    assert_eq!(
        error_code(&format!("{tok}decode(tok, zeros([1, 1]))")),
        "E0205"
    );
}

#[test]
fn kind_errors() {
    assert_eq!(error_code("apply_tokenizer(\"x\", \"y\")"), "E0304");
    assert_eq!(error_code("apply_tokenizer([1], \"y\")"), "E0304");
    assert_eq!(error_code("decode(5, [1])"), "E0304");
    assert_eq!(
        error_code("apply_tokenizer(tokenizer(), tokenizer())"),
        "E0302"
    );
    assert_eq!(error_code("decode(tokenizer(), \"a\")"), "E0301");
    assert_eq!(error_code("apply_tokenizer(tokenizer(), [256])"), "E0402");
}
