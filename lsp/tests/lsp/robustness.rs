//! The server never crashes on any document: every feature on arbitrary text (MLPL
//! fragments, unbalanced brackets, non-ASCII and control characters, CR line
//! breaks) at every kind of cursor position returns without panicking.

use lsp_types::{Position, Url};
use mlpl_diag::Span;
use mlpl_lsp::analysis::Analysis;
use mlpl_lsp::{actions, feasibility, features, navigation};
use proptest::prelude::*;

const FRAGMENTS: &[&str] = &[
    "X : [batch, feat] = ",
    "zeros([2, 3])",
    "matmul(",
    "reshape(iota(12), [",
    "]",
    ")",
    "(",
    "[",
    "{",
    "}",
    "train 3 {",
    "repeat 2 {",
    "for r in X {",
    "device(\"cuda\") {",
    "adam(sum(apply(m, X)), m, 0.1, 0.9, 0.999, 1e-8)",
    "m = chain(linear(2, 3, 0), relu_layer(), linear(3, 2, 1))",
    "label(X, [\"a\", \"\"])",
    "sum(X, \"batch\")",
    "# %% cell",
    "# comment",
    "\n",
    "\r\n",
    "\r",
    ";",
    ",",
    " ",
    "é",
    "😀",
    "\"",
    "\\",
    "1e400",
    "-1",
    "2x",
    "x -1",
    "estimate_hypothetical(\"",
    "load_preloaded(\"tiny_corpus\")",
    "apply_tokenizer(tokenizer(), \"hé\")",
    "grid([0, 1, 0, 1], 99999999999)",
    "reshape(zeros([0]), [-1, 0])",
    "split(zeros([1, 2]), 0.5, 1)",
    "lora(m, 1, 1, 0)",
    "param[3, 2]",
    "W",
    "step",
    "last_losses",
    "cross_entropy(zeros([4, 3]), zeros([5]))",
    "attention(8, 0, 1)",
    "moe(4, 2, 1, 8, 0)",
    "rope(4, 10000)",
    "shift_pairs_x(iota(5), 99999999999999999999)",
    // User functions, the transformer-family primitives and layers, Engram.
    "fn f(x : [n, 2 * d], w : [d, _]) -> [n, d / 2] {",
    "fn g(x) { g(x) }",
    "f(X, W)",
    "-> [",
    "slice(X, -1, 0, 99, 2)",
    "permute(X, \"feat\", 0)",
    "where(gt(X, 0), X, -1/0)",
    "clamp(X, 1, -1)",
    "concat(X, X, 5)",
    "causal_attention(16, 2, 1, 1, rope(8, 10000, 8, 1, 4, 8192), 8, 1, 1e-6)",
    "chain(embed(9, 4, 0), pos_embed(0, 4, 1), unembed(embed(9, 4, 0)))",
    "generate(m, [1, 2], 3, 0.7, 2, 5)",
    "hf_model(\"../x\")",
    "engram_apply(engram(8, 16, 2, 0), zeros([3, 8]), [1, 2, 3])",
    "engram_embed(256, 16, 32, 2, 0)",
    "adamw(sum(apply(m, X)), m, 0.1, 0.9, 0.999, 1e-8, 0.01, \"all\")",
];

fn document() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(FRAGMENTS).prop_map(String::from),
            1 => any::<char>().prop_map(|c| c.to_string()),
        ],
        0..40,
    )
    .prop_map(|v| v.concat())
}

fn exercise(text: &str) {
    let a = Analysis::new(text);
    let uri = Url::parse("file:///fuzz.mlpl").unwrap();
    let devices = feasibility::profiles(None, "", "", Some(8e9));
    let cfg = features::FeatureConfig {
        devices: devices.clone(),
        snippets: true,
    };
    let mut offsets: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    if offsets.len() > 60 {
        let step = offsets.len() / 60;
        offsets = offsets.into_iter().step_by(step).collect();
    }
    for &o in &offsets {
        let _ = features::hover(&a, o, &cfg);
        let _ = features::completion(&a, o, &cfg);
        let _ = features::signature_help(&a, o);
        let _ = navigation::definition(&a, &uri, o);
        let _ = navigation::references(&a, &uri, o, true);
        let _ = navigation::prepare_rename(&a, o);
        let _ = navigation::rename(&a, &uri, o, "renamed");
    }
    let all = Span::new(0, text.len());
    let _ = navigation::document_symbols(&a);
    let _ = navigation::folding_ranges(&a);
    let _ = navigation::semantic_tokens(&a);
    let _ = actions::diagnostics(&a, &uri, Some("https://example.invalid/d.md"));
    let _ = actions::code_actions(&a, &uri, all, None);
    let _ = actions::inlay_hints(&a, all);
    let _ = actions::code_lenses(&a, &uri, &devices);
    // Positions past the end of lines and of the text clamp.
    for (l, c) in [(0, 999), (999, 0), (u32::MAX, u32::MAX)] {
        let o = a.lines.offset(&a.text, Position::new(l, c));
        assert!(a.text.is_char_boundary(o));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn no_feature_panics_on_any_document(text in document()) {
        exercise(&text);
    }
}

#[test]
fn edge_cases() {
    for text in [
        "",
        "\n",
        "\"",
        "# %%",
        "x : [",
        "train",
        "device(",
        "😀😀😀",
        "\r\r\n\n",
        "sum(X, \"",
        "a\u{2028}b = 1",
    ] {
        exercise(text);
    }
}

#[test]
fn a_flat_chain_of_ten_thousand_terms_gets_every_feature() {
    // On a small stack: no walk of the server recurses once per operator.
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let n = 10_000;
            let text = format!(
                "x = {}\ny = x * {}\n",
                vec!["1"; n].join(" + "),
                vec!["x"; n].join(" - ")
            );
            let a = Analysis::new(&text);
            assert!(a.diagnostics.is_empty(), "{:?}", &a.diagnostics);
            let uri = Url::parse("file:///chain.mlpl").unwrap();
            let cfg = features::FeatureConfig {
                devices: Vec::new(),
                snippets: true,
            };
            // Every feature at the start, the middle and the end of each chain
            // (`exercise` tries 60 positions, too slow for an unoptimised
            // build on a document of 60 KB).
            let mid = text.len() / 4;
            for o in [0, mid, text.find('\n').unwrap() - 1, text.len() - 2] {
                let _ = features::hover(&a, o, &cfg);
                let _ = features::completion(&a, o, &cfg);
                let _ = features::signature_help(&a, o);
                let _ = navigation::definition(&a, &uri, o);
                let _ = navigation::references(&a, &uri, o, true);
                let _ = navigation::rename(&a, &uri, o, "renamed");
            }
            let all = Span::new(0, text.len());
            assert!(!navigation::semantic_tokens(&a).is_empty());
            let _ = navigation::document_symbols(&a);
            let _ = navigation::folding_ranges(&a);
            let _ = actions::diagnostics(&a, &uri, None);
            let _ = actions::code_actions(&a, &uri, all, None);
            let _ = actions::inlay_hints(&a, all);
            let _ = actions::code_lenses(&a, &uri, &[]);
            let at_y = text.find("y =").unwrap();
            let hover = features::hover(&a, at_y, &cfg).expect("a hover on y");
            let shown = format!("{:?}", hover.contents);
            assert!(shown.contains('y'), "{shown}");
        })
        .unwrap()
        .join()
        .expect("no stack overflow");
}

fn edit_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(&["a", "é", "😀", "\n", "\r\n", "\r", " ", "x = 1"][..]),
        0..12,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Incremental edits on the rope give the same text as splicing the string at
    /// the byte offsets of the same UTF-16 positions.
    #[test]
    fn rope_edits_match_a_string_model(
        start in edit_text(),
        edits in prop::collection::vec((0u32..6, 0u32..8, 0u32..6, 0u32..8, edit_text()), 1..8),
    ) {
        let mut doc = mlpl_lsp::document::Document::new(&start, 0);
        let mut model = start.clone();
        for (i, (l0, c0, l1, c1, new)) in edits.into_iter().enumerate() {
            let range = lsp_types::Range::new(Position::new(l0, c0), Position::new(l1, c1));
            let li = mlpl_lsp::lines::LineIndex::new(&model);
            let span = li.span(&model, range);
            model.replace_range(span.start..span.end, &new);
            let change = lsp_types::TextDocumentContentChangeEvent { range: Some(range), range_length: None, text: new };
            doc.offer(i as i32 + 1, vec![change]);
            prop_assert_eq!(doc.text(), model.clone());
        }
    }
}
