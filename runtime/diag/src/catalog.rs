//! The diagnostic catalog's data files, `runtime/diag/catalog/*.txt` (one per
//! group of codes), parsed into [`CodeInfo`]s. Edit the text files to change a
//! diagnostic's headline, explanation, example or fix; `docs/diagnostics.md` is
//! generated from them.
//!
//! Format: lines starting with `#` before the first entry are comments. Each
//! entry is
//!
//! ```text
//! === E0201 S, R
//! the headline (`OP` stands for the operator or builtin)
//! --- explanation
//! one paragraph
//! --- example
//! a complete MLPL program that triggers the code
//! --- fix
//! a paragraph, then optionally a blank line and the corrected program
//! indented by four spaces
//! ```
//!
//! The header names the code and its phase (`S`, `R` or `S, R`); the severity is
//! the code's letter (`E` error, `W` warning). A field runs to the next `--- `
//! or `=== ` line, without the newlines that end it; fields keep their text
//! verbatim (no escapes), so no line of one may start with `--- ` or `=== `.

use crate::codes::CodeInfo;
use crate::Severity;

/// The data files, in code order.
const FILES: &[(&str, &str)] = &[
    ("E00.txt", include_str!("../catalog/E00.txt")),
    ("E01.txt", include_str!("../catalog/E01.txt")),
    ("E02.txt", include_str!("../catalog/E02.txt")),
    ("E03.txt", include_str!("../catalog/E03.txt")),
    ("E04.txt", include_str!("../catalog/E04.txt")),
    ("E05.txt", include_str!("../catalog/E05.txt")),
    ("W0.txt", include_str!("../catalog/W0.txt")),
];

/// Every entry of every data file, checked to be in strictly increasing code
/// order; the error names the file and the entry.
pub(crate) fn parse_all() -> Result<Vec<CodeInfo>, String> {
    let mut all: Vec<CodeInfo> = Vec::new();
    for (name, text) in FILES {
        for entry in parse(text).map_err(|e| format!("catalog/{name}: {e}"))? {
            if let Some(last) = all.last() {
                if last.code >= entry.code {
                    return Err(format!(
                        "catalog/{name}: {} comes after {}",
                        entry.code, last.code
                    ));
                }
            }
            all.push(entry);
        }
    }
    Ok(all)
}

/// The entries of one data file.
pub(crate) fn parse(text: &'static str) -> Result<Vec<CodeInfo>, String> {
    let mut entries = Vec::new();
    let mut rest = match text.find("\n=== ") {
        Some(i) => &text[i + 1..],
        None if text.starts_with("=== ") => text,
        None => return Ok(entries),
    };
    while let Some(after) = rest.strip_prefix("=== ") {
        let end = after.find("\n=== ").map_or(after.len(), |i| i + 1);
        let (block, next) = after.split_at(end);
        entries.push(entry(block)?);
        rest = next;
    }
    Ok(entries)
}

/// One entry: the text after `=== ` up to the next entry.
fn entry(block: &'static str) -> Result<CodeInfo, String> {
    let (header, body) = block.split_once('\n').ok_or("an entry with no headline")?;
    let (code, phase) = header
        .split_once(' ')
        .ok_or_else(|| format!("`=== {header}`: write `=== CODE PHASE`"))?;
    let severity = match code.as_bytes().first() {
        Some(b'E') => Severity::Error,
        Some(b'W') => Severity::Warning,
        _ => return Err(format!("{code}: a code starts with E or W")),
    };
    if !matches!(phase, "S" | "R" | "S, R") {
        return Err(format!("{code}: phase `{phase}` is not S, R or `S, R`"));
    }
    let (headline, fields) = body
        .split_once('\n')
        .ok_or_else(|| format!("{code}: no fields after the headline"))?;
    let mut found = [None; 3];
    let names = ["explanation", "example", "fix"];
    let mut rest = fields;
    while let Some(after) = rest.strip_prefix("--- ") {
        let (name, tail) = after
            .split_once('\n')
            .ok_or_else(|| format!("{code}: field `{after}` is empty"))?;
        let end = tail.find("\n--- ").map_or(tail.len(), |i| i + 1);
        let (value, next) = tail.split_at(end);
        let slot = names
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| format!("{code}: unknown field `{name}`"))?;
        if found[slot].replace(value.trim_end_matches('\n')).is_some() {
            return Err(format!("{code}: field `{name}` given twice"));
        }
        rest = next;
    }
    if !rest.trim().is_empty() {
        return Err(format!("{code}: text outside a field: {rest:?}"));
    }
    let field = |i: usize| found[i].ok_or_else(|| format!("{code}: no `--- {}`", names[i]));
    Ok(CodeInfo {
        code,
        severity,
        headline,
        phase,
        explanation: field(0)?,
        example: field(1)?,
        fix: field(2)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_data_file_parses_in_code_order() {
        let all = parse_all().unwrap();
        assert!(all.len() > 80, "{} codes", all.len());
        assert!(all
            .iter()
            .all(|c| !c.explanation.is_empty() && !c.example.is_empty()));
    }

    #[test]
    fn entries_and_their_errors() {
        let text = "# comment\n\n=== E0999 S\nhead `OP`\n--- explanation\nwhy\n--- example\na = 1\nb = 2\n--- fix\ndo\n\n    a = 2\n\n=== W0999 R\nh\n--- explanation\ne\n--- example\nx\n--- fix\nf\n";
        let e = parse(text).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].code, "E0999");
        assert_eq!(e[0].severity, Severity::Error);
        assert_eq!(e[0].headline, "head `OP`");
        assert_eq!(e[0].example, "a = 1\nb = 2");
        assert_eq!(e[0].fix, "do\n\n    a = 2");
        assert_eq!(e[1].severity, Severity::Warning);
        assert_eq!(e[1].fix, "f");
        for (bad, why) in [
            (
                "=== E1 Q\nh\n--- explanation\ne\n--- example\nx\n--- fix\nf\n",
                "phase",
            ),
            (
                "=== E1 S\nh\n--- explanation\ne\n--- fix\nf\n",
                "no `--- example`",
            ),
            (
                "=== E1 S\nh\n--- explanation\ne\n--- colour\nx\n",
                "unknown field",
            ),
            ("=== X1 S\nh\n--- explanation\ne\n", "starts with E or W"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }
}
