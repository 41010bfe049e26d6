//! The editors' highlighting word lists agree with the language: the VS Code
//! TextMate grammar names every keyword of `mlpl_syntax::token::KEYWORDS` and
//! every builtin of the registry (and nothing else), and the browser
//! playground's highlighter knows exactly the keywords.

use std::collections::BTreeSet;
use std::path::Path;

fn repo_file(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The words of a `\b(a|b|c)\b…` alternation.
fn alternation(pattern: &str) -> BTreeSet<String> {
    let start = pattern.find("\\b(").expect("a \\b( group") + 3;
    let end = start + pattern[start..].find(")\\b").expect("a )\\b end");
    pattern[start..end].split('|').map(str::to_string).collect()
}

fn keywords() -> BTreeSet<String> {
    mlpl_syntax::token::KEYWORDS
        .iter()
        .map(|k| k.to_string())
        .collect()
}

fn grammar_rule(name: &str) -> String {
    let g: serde_json::Value =
        serde_json::from_str(&repo_file("vscode-extension/syntaxes/mlpl.tmLanguage.json"))
            .expect("the grammar is JSON");
    g["repository"][name]["match"]
        .as_str()
        .unwrap_or_else(|| panic!("the grammar has a `{name}` match rule"))
        .to_string()
}

#[test]
fn the_textmate_grammar_names_every_keyword() {
    assert_eq!(alternation(&grammar_rule("keyword")), keywords());
}

#[test]
fn the_textmate_grammar_names_every_builtin_and_nothing_else() {
    let listed = alternation(&grammar_rule("builtin-call"));
    let registry: BTreeSet<String> = mlpl_lang::builtins::all()
        .map(|b| b.name.to_string())
        .collect();
    let missing: Vec<_> = registry.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&registry).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "vscode-extension/syntaxes/mlpl.tmLanguage.json: builtins missing {missing:?}, not builtins {extra:?}; \
         the whole list is\n{}",
        registry.iter().map(String::as_str).collect::<Vec<_>>().join("|")
    );
}

#[test]
fn the_playground_highlights_exactly_the_keywords() {
    let js = repo_file("web/www/src/main.js");
    let line = js
        .lines()
        .find(|l| l.starts_with("const KEYWORDS = new Set(["))
        .expect("web/www/src/main.js declares KEYWORDS");
    let words: BTreeSet<String> = line
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert_eq!(words, keywords());
}
