//! The catalog of diagnostic codes (LANGUAGE §20.2–20.8): for each code its severity,
//! headline, phase, an explanation, an example program that triggers it and its fix,
//! read from the data files in `runtime/diag/catalog/` ([`crate::catalog`]).
//!
//! `mlpl explain CODE` prints [`explain`]; `docs/diagnostics.md` is
//! [`catalog_markdown`], checked by a test so the two cannot drift (run
//! `MLPL_BLESS=1 cargo test -p mlpl-diag` to regenerate the file).
//!
//! Conventions of the text fields: `explanation` is one paragraph; `example` is a
//! complete MLPL program; `fix` is a paragraph, optionally followed by a blank line
//! and the corrected program indented by four spaces.

use std::sync::OnceLock;

use super::Severity;

/// One diagnostic code of the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeInfo {
    /// The code, such as `E0201`.
    pub code: &'static str,
    /// Error or warning (codes starting with `E` are errors, `W` warnings).
    pub severity: Severity,
    /// The headline of LANGUAGE §20, verbatim (`OP` stands for the operator or builtin).
    pub headline: &'static str,
    /// Who reports it: `"S"` (static checker), `"R"` (runtime) or `"S, R"` (both).
    pub phase: &'static str,
    /// What the code means and when it is raised.
    pub explanation: &'static str,
    /// A small MLPL program that triggers it.
    pub example: &'static str,
    /// How to fix it: a paragraph, then (usually) the corrected program indented by
    /// four spaces.
    pub fix: &'static str,
}

impl CodeInfo {
    /// The phase in words: "static checker", "runtime" or "static checker and runtime".
    pub fn phase_text(&self) -> &'static str {
        match self.phase {
            "S" => "static checker",
            "R" => "runtime",
            _ => "static checker and runtime",
        }
    }

    /// The corrected programs of [`CodeInfo::fix`]: its blocks indented by four
    /// spaces, without the indentation.
    pub fn fixed_programs(&self) -> Vec<String> {
        fix_blocks(self.fix)
            .into_iter()
            .filter_map(|(is_code, block)| is_code.then_some(block))
            .collect()
    }

    /// `"error"` or `"warning"`.
    pub fn severity_word(&self) -> &'static str {
        match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// Looks up a code, ignoring the case of its letter: `E0201` and `e0201` both work.
pub fn lookup(code: &str) -> Option<&'static CodeInfo> {
    let code = code.trim();
    all().iter().find(|c| c.code.eq_ignore_ascii_case(code))
}

/// The text `mlpl explain CODE` prints: the headline, the phase, the explanation,
/// `Example:` with the program and `Fix:` with the fix; `None` for an unknown code.
pub fn explain(code: &str) -> Option<String> {
    let info = lookup(code)?;
    let mut s = format!(
        "{}[{}]: {}\n",
        info.severity_word(),
        info.code,
        info.headline
    );
    s.push_str(&format!(
        "Reported by: {} ({})\n\n",
        info.phase_text(),
        info.phase
    ));
    s.push_str(&wrap(info.explanation, 80));
    s.push_str("\n\nExample:\n\n");
    s.push_str(&indent(info.example));
    s.push_str("\n\nFix:\n\n");
    for (i, (is_code, block)) in fix_blocks(info.fix).into_iter().enumerate() {
        if i > 0 {
            s.push_str("\n\n");
        }
        if is_code {
            s.push_str(&indent(&block));
        } else {
            s.push_str(&wrap(&block, 80));
        }
    }
    s.push('\n');
    Some(s)
}

/// The group a code belongs to, as titled in LANGUAGE §20.
pub fn group_title(code: &str) -> &'static str {
    match code.get(..3).map(|p| p.to_ascii_uppercase()).as_deref() {
        Some("E00") => "Lexical and syntax errors (E00xx)",
        Some("E01") => "Name and arity errors (E01xx)",
        Some("E02") => "Shape and axis errors (E02xx)",
        Some("E03") => "Kind errors (E03xx)",
        Some("E04") => "Runtime errors (E04xx)",
        Some("E05") => "Device errors (E05xx)",
        _ => "Warnings (W0xxx)",
    }
}

/// The user documentation `docs/diagnostics.md`, generated from [`all`].
pub fn catalog_markdown() -> String {
    let mut s = String::new();
    s.push_str("# MLPL diagnostic codes\n\n");
    s.push_str(
        "<!-- Generated from the catalog's data files, runtime/diag/catalog/*.txt \
         (catalog_markdown). Do not edit by hand:\n     change the catalog, then run \
         `MLPL_BLESS=1 cargo test -p mlpl-diag`. -->\n\n",
    );
    s.push_str(&wrap(
        "Every error and warning that `mlpl check`, `mlpl run` and the editor report has a \
         stable code, a one-line headline, a primary span and optionally labelled secondary \
         spans, notes and a help line (LANGUAGE.md §20). `mlpl explain CODE` prints the \
         entry of one code as given below. A run stops at its first error; warnings never \
         stop a run. The phase says who reports a code: S, the static checker, which \
         reports a problem only when it can prove it; R, the runtime, when it meets the \
         condition. In headlines, OP stands for the operator as written (`+`, `-`, `*`, \
         `/`) or the builtin's name.",
        88,
    ));
    s.push_str("\n\n## Index\n\n| Code | Severity | Headline | Phase |\n|---|---|---|---|\n");
    for c in all() {
        s.push_str(&format!(
            "| [{}](#{}) | {} | {} | {} |\n",
            c.code,
            c.code.to_ascii_lowercase(),
            c.severity_word(),
            c.headline,
            c.phase
        ));
    }
    let mut group = "";
    for c in all() {
        let g = group_title(c.code);
        if g != group {
            s.push_str(&format!("\n## {g}\n"));
            group = g;
        }
        s.push_str(&format!(
            "\n<a id=\"{}\"></a>\n\n### {}: {}\n\n",
            c.code.to_ascii_lowercase(),
            c.code,
            c.headline
        ));
        let severity = match c.severity {
            Severity::Error => "Error",
            Severity::Warning => "Warning",
        };
        s.push_str(&format!(
            "{severity}; reported by the {} ({}).\n\n",
            c.phase_text(),
            c.phase
        ));
        s.push_str(&wrap(c.explanation, 88));
        s.push_str("\n\nExample:\n\n```mlpl\n");
        s.push_str(c.example);
        s.push_str("\n```\n\nFix:");
        for (is_code, block) in fix_blocks(c.fix) {
            if is_code {
                s.push_str("\n\n```mlpl\n");
                s.push_str(&block);
                s.push_str("\n```");
            } else {
                s.push_str("\n\n");
                s.push_str(&wrap(&block, 88));
            }
        }
        s.push('\n');
    }
    s
}

/// Splits a `fix` text into blocks separated by blank lines: `(true, code)` for a
/// block whose lines are all indented by four spaces (returned without the
/// indentation), `(false, prose)` otherwise.
fn fix_blocks(fix: &str) -> Vec<(bool, String)> {
    fix.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            if b.lines().all(|l| l.starts_with("    ") || l.is_empty()) {
                (
                    true,
                    b.lines()
                        .map(|l| l.get(4..).unwrap_or(""))
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            } else {
                (false, b.to_string())
            }
        })
        .collect()
}

/// Indents every non-empty line by four spaces.
fn indent(s: &str) -> String {
    s.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("    {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Wraps a paragraph at `width` columns (words longer than the width stay whole).
fn wrap(s: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line_len = 0;
    for word in s.split_whitespace() {
        let n = word.chars().count();
        if line_len > 0 && line_len + 1 + n > width {
            out.push('\n');
            line_len = 0;
        } else if line_len > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(word);
        line_len += n;
    }
    out
}

/// Every diagnostic code, sorted by code: the entries of the catalog's data
/// files (`runtime/diag/catalog/*.txt`, see [`crate::catalog`]).
pub fn all() -> &'static [CodeInfo] {
    static ALL: OnceLock<Vec<CodeInfo>> = OnceLock::new();
    ALL.get_or_init(|| {
        crate::catalog::parse_all().unwrap_or_else(|e| panic!("the diagnostic catalog: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes of LANGUAGE §20.2–20.8, W0404 (`llm_call`'s notice that a
    /// request was sent, an extension documented in docs/language.md), E0411
    /// (models too deep or too large, docs/limits.md) and the functions codes
    /// E0111, E0112, E0219 and E0412 (docs/language.md, "Functions"),
    /// E0220–E0222 (`slice`, `permute`, `concat` along an axis; docs/language.md)
    /// and the Engram codes E0230 and E0231 (docs/language.md, "Engram conditional memory").
    fn expected_codes() -> Vec<String> {
        let ranges: &[(char, u32, u32)] = &[
            ('E', 1, 12),
            ('E', 101, 112),
            ('E', 201, 222),
            ('E', 230, 231),
            ('E', 301, 311),
            ('E', 401, 412),
            ('E', 501, 504),
            ('W', 1, 3),
            ('W', 101, 106),
            ('W', 201, 204),
            ('W', 301, 302),
            ('W', 401, 404),
            ('W', 501, 504),
        ];
        ranges
            .iter()
            .flat_map(|&(letter, lo, hi)| (lo..=hi).map(move |n| format!("{letter}{n:04}")))
            .collect()
    }

    #[test]
    fn every_code_appears_exactly_once_in_order() {
        let codes: Vec<String> = all().iter().map(|c| c.code.to_string()).collect();
        assert_eq!(codes, expected_codes());
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, codes, "codes must be sorted and unique");
    }

    #[test]
    fn fields_are_filled_in_and_consistent() {
        for c in all() {
            let expected = if c.code.starts_with('E') {
                Severity::Error
            } else {
                Severity::Warning
            };
            assert_eq!(c.severity, expected, "{}", c.code);
            assert!(
                ["S", "R", "S, R"].contains(&c.phase),
                "{}: phase {:?}",
                c.code,
                c.phase
            );
            assert!(!c.headline.trim().is_empty(), "{}: headline", c.code);
            assert!(!c.headline.ends_with('.'), "{}: headline", c.code);
            assert!(
                c.explanation.split(". ").count() >= 2,
                "{}: explanation",
                c.code
            );
            assert!(!c.example.trim().is_empty(), "{}: example", c.code);
            assert!(!c.fix.trim().is_empty(), "{}: fix", c.code);
            assert!(!c.fix_has_no_prose(), "{}: fix needs a sentence", c.code);
            for field in [c.headline, c.explanation, c.example, c.fix] {
                assert_eq!(field, field.trim_end(), "{}: trailing whitespace", c.code);
                assert!(!field.contains('\t'), "{}: tab", c.code);
            }
        }
    }

    impl CodeInfo {
        fn fix_has_no_prose(&self) -> bool {
            fix_blocks(self.fix).iter().all(|(is_code, _)| *is_code)
        }
    }

    #[test]
    fn headlines_match_the_reference() {
        let spot = [
            ("E0001", "unexpected character"),
            ("E0201", "shapes do not broadcast in `OP`"),
            ("E0202", "axis names conflict in `OP`"),
            ("E0203", "inner dimensions differ in `OP`"),
            ("E0214", "target count differs from the rows of the logits"),
            ("E0501", "device mismatch in `OP`"),
            ("W0002", "this `-` subtracts"),
            ("W0101", "`step` is not bound here"),
            ("W0106", "model has no `moe` layer"),
            ("W0504", "placement not available"),
        ];
        for (code, headline) in spot {
            assert_eq!(lookup(code).unwrap().headline, headline);
        }
    }

    #[test]
    fn lookup_finds_every_code_in_either_case() {
        for c in all() {
            assert_eq!(lookup(c.code).map(|i| i.code), Some(c.code));
            assert_eq!(
                lookup(&c.code.to_ascii_lowercase()).map(|i| i.code),
                Some(c.code)
            );
        }
        assert!(lookup("E9999").is_none());
        assert!(lookup("e201").is_none());
        assert!(lookup("").is_none());
        assert!(explain("X0001").is_none());
    }

    #[test]
    fn explain_prints_headline_example_and_fix() {
        let text = explain("e0201").unwrap();
        assert!(text.starts_with("error[E0201]: shapes do not broadcast in `OP`\n"));
        assert!(text.contains("Reported by: static checker and runtime (S, R)\n"));
        assert!(text.contains(
            "Example:\n\n    x : [batch, feat] = zeros([32, 10])\n    y = x + zeros([3])\n"
        ));
        assert!(text.contains("\nFix:\n\n"));
        assert!(text.contains("    y = x + zeros([10])\n"));
        assert!(text
            .lines()
            .all(|l| l.chars().count() <= 80 || l.starts_with("    ")));
        let w = explain("W0001").unwrap();
        assert!(w.starts_with("warning[W0001]: statements run together on one line\n"));
        for c in all() {
            let text = explain(c.code).unwrap();
            assert!(
                text.contains("Example:") && text.contains("Fix:"),
                "{}",
                c.code
            );
            assert!(
                text.ends_with('\n') && !text.ends_with("\n\n"),
                "{}",
                c.code
            );
        }
    }

    #[test]
    fn markdown_lists_every_code() {
        let md = catalog_markdown();
        for c in all() {
            let heading = format!("\n### {}: {}\n", c.code, c.headline);
            assert_eq!(md.matches(&heading).count(), 1, "{}", c.code);
            assert!(md.contains(c.example), "{}", c.code);
        }
        assert_eq!(
            md.matches("```mlpl\n").count(),
            md.matches("\n```\n").count()
        );
    }

    /// `docs/diagnostics.md` must equal [`catalog_markdown`]. With `MLPL_BLESS=1` the
    /// file is rewritten instead.
    #[test]
    fn docs_diagnostics_md_matches_the_catalog() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/diagnostics.md");
        let want = catalog_markdown();
        if std::env::var("MLPL_BLESS").is_ok_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .replace("\r\n", "\n");
        assert!(
            have == want,
            "{} is out of date with the catalog in runtime/diag/catalog/; \
             run `MLPL_BLESS=1 cargo test -p mlpl-diag` to regenerate it",
            path.display()
        );
    }
}
