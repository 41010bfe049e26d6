//! The diagnostic catalog's examples and fixes are real MLPL, as the parser sees it.

use mlpl_diag::codes;

/// Examples and fixes are real MLPL: every syntax example (E00xx, W0001–W0003)
/// makes the parser report its own code, every other program parses without a
/// syntax diagnostic, and every fix parses cleanly. (E0005 cannot be shown: its
/// example is valid UTF-8 by necessity.)
#[test]
fn examples_and_fixes_parse_as_documented() {
    for c in codes::all() {
        let syntax_code = c.code.starts_with("E00") || c.code.starts_with("W000");
        let example: Vec<&str> = mlpl_syntax::parse(c.example)
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect();
        if syntax_code && c.code != "E0005" {
            assert!(
                example.contains(&c.code),
                "{}: parser reported {example:?}",
                c.code
            );
        } else {
            assert!(
                example.is_empty(),
                "{}: example has syntax errors {example:?}",
                c.code
            );
        }
        for program in c.fixed_programs() {
            let fix: Vec<&str> = mlpl_syntax::parse(&program)
                .diagnostics
                .iter()
                .map(|d| d.code)
                .collect();
            assert!(
                fix.is_empty(),
                "{}: fix has syntax diagnostics {fix:?}",
                c.code
            );
        }
    }
}
