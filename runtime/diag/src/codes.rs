//! The catalog of diagnostic codes (LANGUAGE §20.2–20.8): for each code its severity,
//! headline, phase, an explanation, an example program that triggers it and its fix.
//!
//! `mlpl explain CODE` prints [`explain`]; `docs/diagnostics.md` is
//! [`catalog_markdown`], checked by a test so the two cannot drift (run
//! `MLPL_BLESS=1 cargo test -p mlpl-diag` to regenerate the file).
//!
//! Conventions of the text fields: `explanation` is one paragraph; `example` is a
//! complete MLPL program; `fix` is a paragraph, optionally followed by a blank line
//! and the corrected program indented by four spaces.

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
    CODES.iter().find(|c| c.code.eq_ignore_ascii_case(code))
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

/// The user documentation `docs/diagnostics.md`, generated from [`CODES`].
pub fn catalog_markdown() -> String {
    let mut s = String::new();
    s.push_str("# MLPL diagnostic codes\n\n");
    s.push_str(
        "<!-- Generated from runtime/diag/src/codes.rs (catalog_markdown). Do not edit by \
         hand:\n     change the catalog, then run `MLPL_BLESS=1 cargo test -p mlpl-diag`. \
         -->\n\n",
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
    for c in CODES {
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
    for c in CODES {
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

/// Every diagnostic code, sorted by code.
pub const CODES: &[CodeInfo] = &[
    CodeInfo {
        code: "E0001",
        severity: Severity::Error,
        headline: "unexpected character",
        phase: "S",
        explanation: concat!(
            "The lexer met a character that does not start any token. MLPL has no ",
            "`==`, `<`, `>`, `!`, `&`, `|`, `%`, `^`, `**`, `.`, `@` or `'` ",
            "operators, no member access and no `:`-commands; comparisons and powers ",
            "are builtins. The help names the builtin to use (`eq`, `gt`, `lt`, ",
            "`pow`). The original MLPL reported `unexpected character 'c'`.",
        ),
        example: concat!("a = [1, 2, 3]\n", "mask = a == 2",),
        fix: concat!(
            "Use the builtin instead of the operator.\n",
            "\n",
            "    a = [1, 2, 3]\n",
            "    mask = eq(a, 2)",
        ),
    },
    CodeInfo {
        code: "E0002",
        severity: Severity::Error,
        headline: "malformed number",
        phase: "S",
        explanation: concat!(
            "A number literal is not well formed. A decimal point needs a digit on ",
            "both sides (`1.` and `.5` are errors; write `1.0` and `0.5`), and a ",
            "literal must have a finite value (`1e400` overflows). Exponents (`1e-4`) ",
            "and digit separators (`4_000`) are allowed. The original MLPL reported ",
            "`invalid number`.",
        ),
        example: "lr = .5",
        fix: concat!(
            "Write a digit on both sides of the decimal point.\n",
            "\n",
            "    lr = 0.5",
        ),
    },
    CodeInfo {
        code: "E0003",
        severity: Severity::Error,
        headline: "unterminated string",
        phase: "S",
        explanation: concat!(
            "A string literal starts with `\"` but the file ends before its closing ",
            "quote. Strings may span lines, so the error points at the opening quote; ",
            "everything after it was read as part of the string. The original MLPL ",
            "reported `unclosed '\"'`.",
        ),
        example: concat!("text = \"hello\n", "n = 3",),
        fix: concat!(
            "Close the string.\n",
            "\n",
            "    text = \"hello\"\n",
            "    n = 3",
        ),
    },
    CodeInfo {
        code: "E0004",
        severity: Severity::Error,
        headline: "unknown escape in string",
        phase: "S",
        explanation: concat!(
            "A backslash in a string literal must start one of the escapes `\\\"`, ",
            "`\\\\`, `\\n`, `\\t` or `\\r`; any other character after it (`\\q`, `\\%`, ",
            "`\\d`) is an error. To write a backslash, double it. The original MLPL ",
            "reported `unexpected character`.",
        ),
        example: "msg = \"50\\% done\"",
        fix: concat!(
            "Remove the backslash, or write `\\\\` for a literal backslash.\n",
            "\n",
            "    msg = \"50% done\"",
        ),
    },
    CodeInfo {
        code: "E0005",
        severity: Severity::Error,
        headline: "invalid UTF-8",
        phase: "S",
        explanation: concat!(
            "MLPL source is UTF-8. The file (or a string literal in it) contains a ",
            "byte sequence that is not valid UTF-8, usually because the file was ",
            "saved in a legacy encoding such as Latin-1 or Windows-1252. The error ",
            "points at the first invalid byte. The original MLPL reported `invalid ",
            "UTF-8 in string literal`.",
        ),
        example: concat!(
            "# this file was saved as Latin-1, so the é below is the single byte E9\n",
            "name = \"café\"",
        ),
        fix: concat!(
            "Save the file as UTF-8 (in most editors: \"Save with Encoding\", UTF-8); ",
            "the text itself does not change.\n",
            "\n",
            "    name = \"café\"",
        ),
    },
    CodeInfo {
        code: "E0006",
        severity: Severity::Error,
        headline: "unexpected token",
        phase: "S",
        explanation: concat!(
            "The parser found a token where the grammar does not allow it, and no ",
            "more specific syntax code applies. The message says what was expected at ",
            "that point (an expression, `in`, `{`, `,` or a closing bracket, ...). ",
            "The parser recovers at the next statement or bracket, so later errors ",
            "are still reported. The original MLPL reported `unexpected token '…'`.",
        ),
        example: "for i iota(3) { i * 2 }",
        fix: concat!(
            "Add what the message says is missing; here a `for` loop needs `in` ",
            "before the array it iterates over.\n",
            "\n",
            "    for i in iota(3) { i * 2 }",
        ),
    },
    CodeInfo {
        code: "E0007",
        severity: Severity::Error,
        headline: "unclosed delimiter",
        phase: "S",
        explanation: concat!(
            "An opening `(`, `[` or `{` has no closing partner before the end of the ",
            "file. The error points at the opener. Because newlines inside `( )` and ",
            "`[ ]` are whitespace, everything after an unclosed `(` or `[` is read as ",
            "part of that expression. The original MLPL reported `unclosed '('`.",
        ),
        example: "m = chain(linear(4, 8, 0), relu_layer()",
        fix: concat!(
            "Add the missing closing delimiter.\n",
            "\n",
            "    m = chain(linear(4, 8, 0), relu_layer())",
        ),
    },
    CodeInfo {
        code: "E0008",
        severity: Severity::Error,
        headline: "unmatched closing delimiter",
        phase: "S",
        explanation: concat!(
            "A closing `)`, `]` or `}` appears without a matching opener, usually one ",
            "closer too many or a closer of the wrong kind. The original MLPL ",
            "reported `unexpected token`.",
        ),
        example: concat!("x = iota(4)\n", "y = sum(x))",),
        fix: concat!(
            "Remove the extra closer, or add the opener it was meant to close.\n",
            "\n",
            "    x = iota(4)\n",
            "    y = sum(x)",
        ),
    },
    CodeInfo {
        code: "E0009",
        severity: Severity::Error,
        headline: "keyword used as a name",
        phase: "S",
        explanation: concat!(
            "`repeat`, `train`, `for`, `in`, `experiment` and `device` are reserved ",
            "keywords and cannot be used as variable names or loop variables. ",
            "(Builtin names such as `sum` are not reserved; see W0105.) The original ",
            "MLPL reported `unexpected token`.",
        ),
        example: "train = iota(10)",
        fix: concat!("Choose another name.\n", "\n", "    train_ids = iota(10)",),
    },
    CodeInfo {
        code: "E0010",
        severity: Severity::Error,
        headline: "statement used as an expression",
        phase: "S",
        explanation: concat!(
            "`repeat`, `train`, `for` and `experiment` are statements: they cannot ",
            "appear where a value is expected, such as the right-hand side of an ",
            "assignment or a call argument. `=` is also only allowed at the start of ",
            "a statement, so chained assignments (`a = b = 1`) and keyword-style ",
            "arguments (`f(x = 1)`) are errors. A `device(...) { }` block is the one ",
            "block that is also an expression. The original MLPL reported `unexpected ",
            "token`.",
        ),
        example: "a = b = 0",
        fix: concat!(
            "Split the statement: assign each name on its own.\n",
            "\n",
            "    b = 0\n",
            "    a = b",
        ),
    },
    CodeInfo {
        code: "E0011",
        severity: Severity::Error,
        headline: "malformed axis annotation",
        phase: "S",
        explanation: concat!(
            "An annotation `X : [a, b] = e` names the axes of `X`: the brackets must ",
            "hold identifiers separated by commas (possibly none), and the `]` must ",
            "be followed by `=` and an expression. A number, string or other ",
            "expression inside the brackets, or a missing `=`, is an error. To leave ",
            "an axis unnamed, use `label` with an empty name. The original MLPL ",
            "reported `unexpected token`.",
        ),
        example: "x : [batch, 10] = zeros([32, 10])",
        fix: concat!(
            "Put an axis name in every position (or use `label(e, [\"batch\", \"\"])` to ",
            "leave one unnamed).\n",
            "\n",
            "    x : [batch, feat] = zeros([32, 10])",
        ),
    },
    CodeInfo {
        code: "E0012",
        severity: Severity::Error,
        headline: "empty list element",
        phase: "S",
        explanation: concat!(
            "A call's argument list, an array literal or constructor dimensions ",
            "contain an empty element: two commas in a row, or a comma with nothing ",
            "before it (`f(a,,b)`, `[,]`, `f(,)`). A single trailing comma is ",
            "allowed. The original MLPL reported `unexpected token`.",
        ),
        example: "x = zeros([2, , 3])",
        fix: concat!(
            "Remove the extra comma or fill in the missing element.\n",
            "\n",
            "    x = zeros([2, 3])",
        ),
    },
    CodeInfo {
        code: "E0101",
        severity: Severity::Error,
        headline: "undefined name",
        phase: "S, R",
        explanation: concat!(
            "A variable is read before anything was assigned to it. The checker ",
            "reports it when no assignment can have run before the read; the runtime ",
            "reports it when the variable is unbound at that moment. The help ",
            "suggests defined names that are spelled alike. The original MLPL ",
            "reported `undefined variable: x`.",
        ),
        example: concat!("weights = zeros([3])\n", "y = weight + 1",),
        fix: concat!(
            "Fix the spelling, or assign the variable before it is used.\n",
            "\n",
            "    weights = zeros([3])\n",
            "    y = weights + 1",
        ),
    },
    CodeInfo {
        code: "E0102",
        severity: Severity::Error,
        headline: "unknown function",
        phase: "S",
        explanation: concat!(
            "A call names something that is not a builtin. MLPL has no user-defined ",
            "functions, so every call must name a builtin; the help suggests builtins ",
            "with similar names. The arguments of an unknown function are not ",
            "evaluated. The original MLPL reported `unknown function: f`.",
        ),
        example: "y = sofmax(iota(3))",
        fix: concat!(
            "Use the builtin's correct name.\n",
            "\n",
            "    y = softmax(iota(3))",
        ),
    },
    CodeInfo {
        code: "E0103",
        severity: Severity::Error,
        headline: "wrong number of arguments",
        phase: "S",
        explanation: concat!(
            "A builtin was called with too few or too many arguments. The message ",
            "lists the forms the builtin accepts, for example `adam takes 6 or 7 ",
            "arguments, got 5`. The original MLPL reported `f expects N arguments, ",
            "got M`.",
        ),
        example: "m = linear(4, 8)",
        fix: concat!(
            "Pass the arguments the builtin expects; `linear` takes the input size, ",
            "the output size and a seed.\n",
            "\n",
            "    m = linear(4, 8, 0)",
        ),
    },
    CodeInfo {
        code: "E0104",
        severity: Severity::Error,
        headline: "unknown corpus",
        phase: "S, R",
        explanation: concat!(
            "`load_preloaded` was given a name that is not one of the compiled-in ",
            "corpora. The message lists the known names: `tiny_corpus` and ",
            "`tiny_shakespeare_snippet`. The original MLPL reported `unsupported: …`.",
        ),
        example: "text = load_preloaded(\"shakespeare\")",
        fix: concat!(
            "Use one of the listed names, or `load` a file of your own from the data ",
            "directory.\n",
            "\n",
            "    text = load_preloaded(\"tiny_shakespeare_snippet\")",
        ),
    },
    CodeInfo {
        code: "E0105",
        severity: Severity::Error,
        headline: "unknown architecture",
        phase: "S, R",
        explanation: concat!(
            "`estimate_hypothetical` was given an architecture name it does not know. ",
            "The message lists the built-in ones: `smollm-135m`, `smollm-360m`, ",
            "`smollm-1.7b`, `llama-3.2-1b` and `qwen-2.5-0.5b`. The original MLPL ",
            "reported `unsupported: …`.",
        ),
        example: "est = estimate_hypothetical(\"gpt-5\", 1000, 8, 512)",
        fix: concat!(
            "Use one of the listed names, or build the model and use ",
            "`estimate_train`.\n",
            "\n",
            "    est = estimate_hypothetical(\"smollm-135m\", 1000, 8, 512)",
        ),
    },
    CodeInfo {
        code: "E0106",
        severity: Severity::Error,
        headline: "unknown chart type",
        phase: "S, R",
        explanation: concat!(
            "`svg` was given a chart type it does not draw. The message lists the ",
            "types: `scatter`, `scatter3d`, `line`, `bar`, `heatmap` and ",
            "`decision_boundary`. The original MLPL reported `unknown svg type: 'x'`.",
        ),
        example: "chart = svg(iota(10), \"pie\")",
        fix: concat!(
            "Use one of the listed chart types.\n",
            "\n",
            "    chart = svg(iota(10), \"bar\")",
        ),
    },
    CodeInfo {
        code: "E0107",
        severity: Severity::Error,
        headline: "unknown parameter family",
        phase: "S, R",
        explanation: concat!(
            "`perturb_params` and `reinit` select parameters by family; the name ",
            "given is not one of `all_layers`, `attention_only`, `mlp_only` or ",
            "`embed_and_head`. The original MLPL reported `unsupported: …`.",
        ),
        example: concat!(
            "m = chain(linear(4, 8, 0), relu_layer(), linear(8, 2, 1))\n",
            "perturb_params(m, \"mlp\", 0.01, 0)",
        ),
        fix: concat!(
            "Use one of the family names.\n",
            "\n",
            "    m = chain(linear(4, 8, 0), relu_layer(), linear(8, 2, 1))\n",
            "    perturb_params(m, \"mlp_only\", 0.01, 0)",
        ),
    },
    CodeInfo {
        code: "E0108",
        severity: Severity::Error,
        headline: "no run with that name",
        phase: "R",
        explanation: concat!(
            "`compare` looks up the most recent experiment run with each name, in the ",
            "workspace's log and in the experiment directory; no run has the name ",
            "given. Runs are recorded only when an `experiment` block finishes ",
            "without error. The original MLPL reported `compare: no run named \"x\"`.",
        ),
        example: concat!(
            "experiment \"baseline\" {\n",
            "  loss_metric = 0.5\n",
            "}\n",
            "compare(\"baseline\", \"tuned\")",
        ),
        fix: concat!(
            "Record a run under that name first (or fix the spelling of the name).\n",
            "\n",
            "    experiment \"baseline\" {\n",
            "      loss_metric = 0.5\n",
            "    }\n",
            "    experiment \"tuned\" {\n",
            "      loss_metric = 0.25\n",
            "    }\n",
            "    compare(\"baseline\", \"tuned\")",
        ),
    },
    CodeInfo {
        code: "E0109",
        severity: Severity::Error,
        headline: "not a parameter reference",
        phase: "S",
        explanation: concat!(
            "The `params` argument of an optimizer must name what it updates: a ",
            "variable holding a tracked parameter written directly, a model-valued ",
            "expression, or a bracketed list of these. The `wrt` argument of `grad` ",
            "must be a variable name written directly. A string, an arithmetic ",
            "expression or any other value is not a parameter reference. The original ",
            "MLPL reported `unsupported: …`.",
        ),
        example: concat!(
            "W = param[3]\n",
            "adam(sum(W * W), \"W\", 0.01, 0.9, 0.999, 1e-8)",
        ),
        fix: concat!(
            "Write the parameter's name (or the model) directly, without quotes.\n",
            "\n",
            "    W = param[3]\n",
            "    adam(sum(W * W), W, 0.01, 0.9, 0.999, 1e-8)",
        ),
    },
    CodeInfo {
        code: "E0110",
        severity: Severity::Error,
        headline: "not a tracked parameter",
        phase: "S, R",
        explanation: concat!(
            "An optimizer's `params` names a variable that is not a tracked ",
            "parameter, so there is nothing for it to update. Only variables assigned ",
            "from `param[…]` and the parameters created by layer constructors, ",
            "`clone_model` and `lora` are tracked; an array made with `zeros`, ",
            "`randn` or arithmetic is a constant. The original MLPL reported `adam: ",
            "'x' is not a tracked parameter`.",
        ),
        example: concat!(
            "W = zeros([3])\n",
            "adam(sum(W * W), W, 0.01, 0.9, 0.999, 1e-8)",
        ),
        fix: concat!(
            "Create the variable with `param[…]` (and set its initial value with a ",
            "further assignment if needed: a tracked name stays tracked when re-bound ",
            "to an array).\n",
            "\n",
            "    W = param[3]\n",
            "    W = W + randn(0, [3])\n",
            "    adam(sum(W * W), W, 0.01, 0.9, 0.999, 1e-8)",
        ),
    },
    CodeInfo {
        code: "E0201",
        severity: Severity::Error,
        headline: "shapes do not broadcast in `OP`",
        phase: "S, R",
        explanation: concat!(
            "Element-wise operations (`+ - * /`, `add sub mul div pow gt lt eq`) ",
            "align the two shapes at their last axes; each aligned pair of sizes must ",
            "be equal or one of them 1 (a missing leading axis counts as 1, and a ",
            "scalar broadcasts against anything). The diagnostic shows both operands' ",
            "named shapes and a note naming the first conflicting axis from the end. ",
            "The batch axes of `matmul` follow the same rule. OP is the operator as ",
            "written or the builtin's name. The original MLPL reported `add: expected ",
            "[..], got [..]` or `array error: shape mismatch`.",
        ),
        example: concat!(
            "x : [batch, feat] = zeros([32, 10])\n",
            "y = x + zeros([3])",
        ),
        fix: concat!(
            "Make the trailing sizes agree: give the right operand 10 elements (or 1 ",
            "to stretch it).\n",
            "\n",
            "    x : [batch, feat] = zeros([32, 10])\n",
            "    y = x + zeros([10])",
        ),
    },
    CodeInfo {
        code: "E0202",
        severity: Severity::Error,
        headline: "axis names conflict in `OP`",
        phase: "S, R",
        explanation: concat!(
            "Two aligned axes of an element-wise operation are both named, with ",
            "different names. An unnamed axis unifies with a named one, but two ",
            "different names mean the operands describe different things, even when ",
            "the sizes broadcast (a stretched axis is checked too). The note names ",
            "the first conflicting axis from the end; when sizes and names both ",
            "conflict, E0201 is reported instead. The original MLPL reported `axis ",
            "label mismatch`.",
        ),
        example: concat!(
            "x : [batch, feat] = zeros([32, 10])\n",
            "h : [hidden] = zeros([10])\n",
            "y = x + h",
        ),
        fix: concat!(
            "If the axes really are the same, rename one side.\n",
            "\n",
            "    x : [batch, feat] = zeros([32, 10])\n",
            "    h : [hidden] = zeros([10])\n",
            "    y = x + relabel(h, [\"feat\"])",
        ),
    },
    CodeInfo {
        code: "E0203",
        severity: Severity::Error,
        headline: "inner dimensions differ in `OP`",
        phase: "S, R",
        explanation: concat!(
            "`matmul(a, b)` contracts the last axis of `a` with the first (or, for ",
            "batched operands, the second-to-last) axis of `b`, and `dot(a, b)` needs ",
            "two vectors of the same length; the contracted sizes differ. The ",
            "diagnostic shows both operands' named shapes. The original MLPL reported ",
            "`matmul: expected …, got …`.",
        ),
        example: concat!(
            "x : [batch, feat] = zeros([32, 10])\n",
            "W = param[64, 32]\n",
            "h = matmul(x, W)",
        ),
        fix: concat!(
            "Make the contracted sizes equal: here `W` needs 10 rows, one per feature ",
            "of `x` (or transpose an operand that is the wrong way round).\n",
            "\n",
            "    x : [batch, feat] = zeros([32, 10])\n",
            "    W = param[10, 32]\n",
            "    h = matmul(x, W)",
        ),
    },
    CodeInfo {
        code: "E0204",
        severity: Severity::Error,
        headline: "contraction axes are named differently",
        phase: "S, R",
        explanation: concat!(
            "The two axes that `matmul` contracts are both named, with different ",
            "names, so the product would sum over unrelated things. A missing name ",
            "counts as unnamed and matches anything. The original MLPL reported ",
            "`matmul: expected …, got …`.",
        ),
        example: concat!(
            "x : [batch, feat] = zeros([32, 10])\n",
            "W : [hidden, out] = zeros([10, 4])\n",
            "y = matmul(x, W)",
        ),
        fix: concat!(
            "Name the contracted axes alike (or leave one unnamed).\n",
            "\n",
            "    x : [batch, feat] = zeros([32, 10])\n",
            "    W : [feat, out] = zeros([10, 4])\n",
            "    y = matmul(x, W)",
        ),
    },
    CodeInfo {
        code: "E0205",
        severity: Severity::Error,
        headline: "wrong rank",
        phase: "S, R",
        explanation: concat!(
            "An argument has the wrong number of axes for the builtin: for example a ",
            "matrix where a vector is required, a rank-0 operand of `matmul`, or a ",
            "non-scalar where a scalar is required (loop counts, seeds, sizes, ",
            "learning rates and other hyperparameters). The message says which rank ",
            "was expected. The original MLPL reported messages such as `repeat count ",
            "must be a scalar integer` or `index has R components but array has rank ",
            "2`.",
        ),
        example: "x = iota([2, 3])",
        fix: concat!(
            "Pass an argument of the expected rank: `iota` takes a scalar count; ",
            "reshape its result to get a matrix.\n",
            "\n",
            "    x = reshape(iota(6), [2, 3])",
        ),
    },
    CodeInfo {
        code: "E0206",
        severity: Severity::Error,
        headline: "axis out of range",
        phase: "S, R",
        explanation: concat!(
            "An axis number must be at least −rank and less than the rank of the ",
            "array: 0 is the first axis and −1 the last. The number given points past ",
            "the array's axes. The original MLPL reported `array error: index … out ",
            "of bounds`.",
        ),
        example: "s = sum(zeros([2, 3]), 2)",
        fix: concat!(
            "Use an axis the array has; `-1` always means the last one.\n",
            "\n",
            "    s = sum(zeros([2, 3]), -1)",
        ),
    },
    CodeInfo {
        code: "E0207",
        severity: Severity::Error,
        headline: "axis name not found",
        phase: "S, R",
        explanation: concat!(
            "An axis was selected by name, but no axis of the array has that name. ",
            "Names are case-sensitive; `labels(x)` shows the names an array has. The ",
            "original MLPL reported `… not found in labels`.",
        ),
        example: concat!(
            "x : [batch, feat] = zeros([32, 10])\n",
            "s = sum(x, \"features\")",
        ),
        fix: concat!(
            "Use one of the array's axis names.\n",
            "\n",
            "    x : [batch, feat] = zeros([32, 10])\n",
            "    s = sum(x, \"feat\")",
        ),
    },
    CodeInfo {
        code: "E0208",
        severity: Severity::Error,
        headline: "array has no named axes",
        phase: "S, R",
        explanation: concat!(
            "An axis was selected by name, but the array has no named axes at all (or ",
            "the name given is the empty string, which means \"unnamed\"). Arrays get ",
            "names from annotations, `label`, `relabel` and `reshape_labeled`, and ",
            "lose them in operations such as `reshape`. The original MLPL reported ",
            "`axis name \"x\" requires a labeled array`.",
        ),
        example: "s = sum(zeros([32, 10]), \"feat\")",
        fix: concat!(
            "Name the axes first, or select the axis by number.\n",
            "\n",
            "    x : [batch, feat] = zeros([32, 10])\n",
            "    s = sum(x, \"feat\")",
        ),
    },
    CodeInfo {
        code: "E0209",
        severity: Severity::Error,
        headline: "wrong number of axis names",
        phase: "S, R",
        explanation: concat!(
            "`label`, `relabel`, `reshape_labeled` and annotations take one name per ",
            "axis; the number of names differs from the array's rank. Use the empty ",
            "name `\"\"` for an axis that should stay unnamed, and `[]` (or `\"\"`) for a ",
            "scalar. The original MLPL reported `label list has N entries but array ",
            "has rank R`.",
        ),
        example: "x = label(zeros([2, 3]), [\"rows\"])",
        fix: concat!(
            "Give one name per axis.\n",
            "\n",
            "    x = label(zeros([2, 3]), [\"rows\", \"cols\"])",
        ),
    },
    CodeInfo {
        code: "E0210",
        severity: Severity::Error,
        headline: "reshape changes the element count",
        phase: "S, R",
        explanation: concat!(
            "`reshape` and `reshape_labeled` keep every element, so the new shape ",
            "must hold exactly as many elements as the old one. A single −1 in the ",
            "new shape is inferred; this error is also reported when no size makes ",
            "the count match. The original MLPL reported `array error: shape ",
            "mismatch: S vs T elements`.",
        ),
        example: "m = reshape(iota(6), [4, 2])",
        fix: concat!(
            "Choose sizes whose product is the element count (6 here), or let −1 ",
            "infer one.\n",
            "\n",
            "    m = reshape(iota(6), [3, -1])",
        ),
    },
    CodeInfo {
        code: "E0211",
        severity: Severity::Error,
        headline: "layer input has the wrong shape",
        phase: "S, R",
        explanation: concat!(
            "`apply` passes an input to a model whose layer expects another rank or ",
            "last-axis size: `linear(in, out, …)` needs `[…, in]`, attention needs ",
            "`[T, d]` or `[B, T, d]`, and so on. The message names the layer, its ",
            "expected pattern and the actual named shape. The original MLPL reported ",
            "`array error: …`.",
        ),
        example: concat!("m = linear(4, 8, 0)\n", "y = apply(m, ones([10, 3]))",),
        fix: concat!(
            "Give the input the size the first layer expects (or build the layer for ",
            "the data you have).\n",
            "\n",
            "    m = linear(4, 8, 0)\n",
            "    y = apply(m, ones([10, 4]))",
        ),
    },
    CodeInfo {
        code: "E0212",
        severity: Severity::Error,
        headline: "residual block changes the shape",
        phase: "S, R",
        explanation: concat!(
            "`residual(m)` computes `x + m(x)`, so `m` must map its input to an ",
            "output of the same shape. The inner block changes the shape, for example ",
            "a `linear` layer whose output size differs from its input size. The ",
            "original MLPL reported `residual: inner block must preserve input ",
            "shape`.",
        ),
        example: concat!(
            "block = residual(linear(16, 32, 0))\n",
            "y = apply(block, ones([4, 16]))",
        ),
        fix: concat!(
            "Make the inner block shape-preserving, for example by projecting back to ",
            "the input size.\n",
            "\n",
            "    block = residual(chain(linear(16, 32, 0), relu_layer(), linear(32, 16, 1)))\n",
            "    y = apply(block, ones([4, 16]))",
        ),
    },
    CodeInfo {
        code: "E0213",
        severity: Severity::Error,
        headline: "invalid dimension",
        phase: "S, R",
        explanation: concat!(
            "A size argument is not a valid dimension: negative or not an integer (in ",
            "`param[…]`, `tensor[…]` or a layer constructor), `heads` not dividing ",
            "`d`, `kv_heads` not dividing `heads`, an odd `rope` size or one ",
            "different from `d / heads`, a LoRA rank of 0 or above min(in, out) of a ",
            "linear layer, or two −1 in a `reshape`. The original MLPL reported ",
            "`shape dimension must be a non-negative scalar integer` or `lora: rank R ",
            "exceeds …`.",
        ),
        example: "att = attention(64, 5, 0)",
        fix: concat!(
            "Use a head count that divides the width.\n",
            "\n",
            "    att = attention(64, 4, 0)",
        ),
    },
    CodeInfo {
        code: "E0214",
        severity: Severity::Error,
        headline: "target count differs from the rows of the logits",
        phase: "S, R",
        explanation: concat!(
            "`cross_entropy(logits, targets)` needs one target per row of the logits: ",
            "N targets for `[N, V]` logits, B·T for `[B, T, V]`. The message shows ",
            "the expected `[N]` and the actual target shape. The original MLPL ",
            "reported `cross_entropy: expected [N], got …`.",
        ),
        example: concat!(
            "logits = randn(0, [8, 5])\n",
            "targets = iota(6)\n",
            "loss = cross_entropy(logits, targets)",
        ),
        fix: concat!(
            "Pass exactly one class id per row.\n",
            "\n",
            "    logits = randn(0, [8, 5])\n",
            "    targets = [0, 1, 2, 3, 4, 0, 1, 2]\n",
            "    loss = cross_entropy(logits, targets)",
        ),
    },
    CodeInfo {
        code: "E0215",
        severity: Severity::Error,
        headline: "loop values differ in shape",
        phase: "S, R",
        explanation: concat!(
            "A `for` loop stacks the value of each iteration into `last_rows`, so ",
            "every iteration must end with an array of the same shape as the first. ",
            "One iteration produced a different shape. The original MLPL reported ",
            "`array error: …`.",
        ),
        example: "for n in [1, 2, 3] { iota(n) }",
        fix: concat!(
            "End every iteration with a value of one fixed shape, for example a ",
            "reduction.\n",
            "\n",
            "    for n in [1, 2, 3] { sum(iota(n)) }",
        ),
    },
    CodeInfo {
        code: "E0216",
        severity: Severity::Error,
        headline: "empty array",
        phase: "S, R",
        explanation: concat!(
            "The builtin needs at least one element or row: `argmax` and `sample` of ",
            "an empty array, `last_row` of a matrix with zero rows, or `split` and ",
            "`val_split` of fewer than two rows (both parts must be non-empty). The ",
            "original MLPL reported `cannot index an empty array`, or crashed.",
        ),
        example: concat!("data = ones([1, 3])\n", "train_rows = split(data, 0.8, 7)",),
        fix: concat!(
            "Make sure the data has enough rows before splitting it.\n",
            "\n",
            "    data = ones([10, 3])\n",
            "    train_rows = split(data, 0.8, 7)",
        ),
    },
    CodeInfo {
        code: "E0217",
        severity: Severity::Error,
        headline: "checkpoint shape differs",
        phase: "R",
        explanation: concat!(
            "`load_weights` found the tensor for a parameter in the checkpoint, but ",
            "its shape is not the parameter's shape, so the checkpoint was saved from ",
            "a different architecture. The message shows both shapes and the tensor's ",
            "key. Nothing was loaded.",
        ),
        example: concat!(
            "save(linear(4, 8, 0), \"small.safetensors\")\n",
            "m = linear(4, 16, 1)\n",
            "load_weights(m, \"small.safetensors\")",
        ),
        fix: concat!(
            "Build the model with the architecture the checkpoint was saved from.\n",
            "\n",
            "    save(linear(4, 8, 0), \"small.safetensors\")\n",
            "    m = linear(4, 8, 1)\n",
            "    load_weights(m, \"small.safetensors\")",
        ),
    },
    CodeInfo {
        code: "E0218",
        severity: Severity::Error,
        headline: "wrong argument size",
        phase: "S, R",
        explanation: concat!(
            "An argument that must have a fixed number of elements has another: ",
            "`grid` bounds `[4]`, the `feasible` estimate `[5]` and budget `[3]`, ",
            "`boundary_2d` dims `[2]`, or paired `[N]` arguments (points and labels, ",
            "predictions and actual classes) of different lengths. The original MLPL ",
            "reported messages such as `feasible: estimate must be rank-1 [5], got ",
            "[..]`.",
        ),
        example: "g = grid([0, 1, 0], 10)",
        fix: concat!(
            "Pass the expected number of elements; `grid` bounds are xmin, xmax, ",
            "ymin, ymax.\n",
            "\n",
            "    g = grid([0, 1, 0, 1], 10)",
        ),
    },
    CodeInfo {
        code: "E0301",
        severity: Severity::Error,
        headline: "expected an array",
        phase: "S, R",
        explanation: concat!(
            "An operator or an array argument of a builtin was given a string, a ",
            "model or a tokenizer. No operator accepts a string; a model is used ",
            "through `apply`, a tokenizer through `apply_tokenizer`. The original ",
            "MLPL reported `expected an array value, got a string`.",
        ),
        example: "y = \"abc\" + 1",
        fix: concat!(
            "Convert the value to an array first (here the string's bytes), or use ",
            "the right variable.\n",
            "\n",
            "    y = tokenize_bytes(\"abc\") + 1",
        ),
    },
    CodeInfo {
        code: "E0302",
        severity: Severity::Error,
        headline: "expected a string",
        phase: "S, R",
        explanation: concat!(
            "A path, a name, a chart type, a device target or an `llm_call` argument ",
            "must be a string, and the value given is an array, model or tokenizer. ",
            "The original MLPL reported `expected a string value`.",
        ),
        example: "text = load_preloaded(42)",
        fix: concat!(
            "Pass a string.\n",
            "\n",
            "    text = load_preloaded(\"tiny_corpus\")",
        ),
    },
    CodeInfo {
        code: "E0303",
        severity: Severity::Error,
        headline: "expected a model",
        phase: "S, R",
        explanation: concat!(
            "A builtin that works on models (`apply`, `chain`, `residual`, `freeze`, ",
            "`lora`, `estimate_train`, `save` of a model, …) was given an array, ",
            "string or tokenizer there. A weight matrix is not a model: build layers ",
            "with the layer constructors. The original MLPL reported `… is not a ",
            "model` or `first argument must be a model`.",
        ),
        example: "y = apply(ones([4, 4]), ones([2, 4]))",
        fix: concat!(
            "Pass a model built with the layer constructors.\n",
            "\n",
            "    m = linear(4, 4, 0)\n",
            "    y = apply(m, ones([2, 4]))",
        ),
    },
    CodeInfo {
        code: "E0304",
        severity: Severity::Error,
        headline: "expected a tokenizer",
        phase: "S, R",
        explanation: concat!(
            "`apply_tokenizer` and `decode` take a tokenizer as their first argument ",
            "(from `tokenizer()` or `train_bpe`), and got another kind of value, ",
            "often because the arguments are in the wrong order. The original MLPL ",
            "reported `expected …`.",
        ),
        example: "text = decode([104, 105], tokenizer())",
        fix: concat!(
            "Pass the tokenizer first.\n",
            "\n",
            "    text = decode(tokenizer(), [104, 105])",
        ),
    },
    CodeInfo {
        code: "E0305",
        severity: Severity::Error,
        headline: "strings in an array literal",
        phase: "S",
        explanation: concat!(
            "Arrays hold numbers only, so `[\"a\", \"b\"]` is not a value. A bracketed ",
            "list of strings is allowed only directly as the *names* argument of ",
            "`label`, `relabel` and `reshape_labeled`. To keep names in a variable, ",
            "use the comma-separated string form that `labels` returns. The original ",
            "MLPL reported `expected an array value, got a string`.",
        ),
        example: concat!(
            "names = [\"batch\", \"feat\"]\n",
            "x = label(zeros([2, 3]), names)",
        ),
        fix: concat!(
            "Store the names as one comma-separated string (or write the list inside ",
            "the `label` call).\n",
            "\n",
            "    names = \"batch,feat\"\n",
            "    x = label(zeros([2, 3]), names)",
        ),
    },
    CodeInfo {
        code: "E0306",
        severity: Severity::Error,
        headline: "not allowed in a loss",
        phase: "S, R",
        explanation: concat!(
            "The loss of `grad`, `adam`, `adamw` or `momentum_sgd` is differentiated, ",
            "so it may only use differentiable (✓) and piecewise-constant (0) ",
            "builtins on values that depend on a trainable parameter. A ",
            "non-differentiable (✗) builtin was applied to such a value, or a builtin ",
            "with side effects (—), `grad` or an optimizer appears inside the loss. ",
            "The message names the builtin and the argument. The original MLPL ",
            "reported `grad: function 'f' not supported inside grad()`.",
        ),
        example: concat!(
            "m = linear(2, 1, 0)\n",
            "X = randn(1, [16, 2])\n",
            "adam(mean(shuffle(apply(m, X), 3)), m, 0.01, 0.9, 0.999, 1e-8)",
        ),
        fix: concat!(
            "Do the non-differentiable work on constants outside the loss, here by ",
            "shuffling the data before the optimizer call.\n",
            "\n",
            "    m = linear(2, 1, 0)\n",
            "    X = randn(1, [16, 2])\n",
            "    Xs = shuffle(X, 3)\n",
            "    adam(mean(apply(m, Xs)), m, 0.01, 0.9, 0.999, 1e-8)",
        ),
    },
    CodeInfo {
        code: "E0307",
        severity: Severity::Error,
        headline: "loop body did not end with an array",
        phase: "S, R",
        explanation: concat!(
            "The last statement of a `train` iteration is recorded as that ",
            "iteration's loss, and the last value of each `for` iteration is stacked ",
            "into `last_rows`; both must be arrays. The body ended with a string, ",
            "model or tokenizer instead. (An assignment's value is the assigned ",
            "array, or 0 for other kinds.) The original MLPL reported `expected an ",
            "array value, …`.",
        ),
        example: concat!(
            "W = param[2]\n",
            "tag = \"quadratic\"\n",
            "train 10 {\n",
            "  adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\n",
            "  tag\n",
            "}",
        ),
        fix: concat!(
            "End the body with the value to record, usually the loss.\n",
            "\n",
            "    W = param[2]\n",
            "    train 10 {\n",
            "      adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\n",
            "      loss_metric = sum(W * W)\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "E0308",
        severity: Severity::Error,
        headline: "model has no layer of the required kind",
        phase: "S, R",
        explanation: concat!(
            "`embed_table` needs a model with an `embed` layer, and ",
            "`attention_weights` one with an `attention` or `causal_attention` layer ",
            "(also inside `chain` and `residual`). The model given has none. The ",
            "original MLPL reported `model contains no Embedding layer` or `no ",
            "Attention layer found`.",
        ),
        example: "E = embed_table(linear(4, 8, 0))",
        fix: concat!(
            "Pass the model that contains the layer.\n",
            "\n",
            "    m = chain(embed(100, 16, 0), linear(16, 100, 1))\n",
            "    E = embed_table(m)",
        ),
    },
    CodeInfo {
        code: "E0309",
        severity: Severity::Error,
        headline: "model has no parameters",
        phase: "S, R",
        explanation: concat!(
            "`estimate_train` estimates the cost of training a model's parameters, ",
            "and the model given has none (it is made only of parameterless layers ",
            "such as activations, `softmax_layer` or `rms_norm` without gain). The ",
            "original MLPL reported `model has no trainable parameters`.",
        ),
        example: "est = estimate_train(chain(relu_layer()), 100, 8, 64)",
        fix: concat!(
            "Estimate the model that has the weights.\n",
            "\n",
            "    est = estimate_train(chain(linear(64, 64, 0), relu_layer()), 100, 8, 64)",
        ),
    },
    CodeInfo {
        code: "E0310",
        severity: Severity::Error,
        headline: "model already has LoRA adapters",
        phase: "S, R",
        explanation: concat!(
            "`lora(m, …)` wraps every linear layer of `m` with new adapters, and `m` ",
            "is already a LoRA student. Adapters are not stacked. The original MLPL ",
            "reported `unsupported: …`.",
        ),
        example: concat!(
            "base = chain(linear(8, 8, 0), relu_layer(), linear(8, 2, 1))\n",
            "student = lora(base, 2, 4, 0)\n",
            "student2 = lora(student, 2, 4, 1)",
        ),
        fix: concat!(
            "Make each student from the base model.\n",
            "\n",
            "    base = chain(linear(8, 8, 0), relu_layer(), linear(8, 2, 1))\n",
            "    student = lora(base, 2, 4, 0)\n",
            "    student2 = lora(base, 2, 4, 1)",
        ),
    },
    CodeInfo {
        code: "E0311",
        severity: Severity::Error,
        headline: "value cannot be placed on a device",
        phase: "S, R",
        explanation: concat!(
            "`to_device` places arrays and the parameters of models; strings and ",
            "tokenizers always live in host memory. The argument that is not the ",
            "target is a string or a tokenizer. The original MLPL reported `expected ",
            "…`.",
        ),
        example: concat!("tok = tokenizer()\n", "to_device(tok, \"cuda\")",),
        fix: concat!(
            "Place the arrays the tokenizer produces instead.\n",
            "\n",
            "    tok = tokenizer()\n",
            "    ids = to_device(apply_tokenizer(tok, \"hello\"), \"cuda\")",
        ),
    },
    CodeInfo {
        code: "E0401",
        severity: Severity::Error,
        headline: "invalid argument value",
        phase: "S, R",
        explanation: concat!(
            "A numeric argument is outside the range the builtin allows (for example ",
            "`k`, a fraction, a perplexity, a temperature, a dropout probability, ",
            "`weight_decay`, `max_grad_norm` or a feasibility size), is not finite ",
            "where a finite value is required, or is not an integer where the ",
            "builtin's table says \"integer\". The message gives the allowed range. The ",
            "original MLPL reported `unsupported: …`.",
        ),
        example: concat!("X = randn(0, [10, 4])\n", "neighbours = knn(X, 10)",),
        fix: concat!(
            "Pass a value in the allowed range: `knn` needs 1 ≤ k < N (a row never ",
            "lists itself).\n",
            "\n",
            "    X = randn(0, [10, 4])\n",
            "    neighbours = knn(X, 3)",
        ),
    },
    CodeInfo {
        code: "E0402",
        severity: Severity::Error,
        headline: "id or index out of range",
        phase: "S, R",
        explanation: concat!(
            "An id or index does not fit the size it indexes into: a `one_hot` id ≥ ",
            "k, a `cross_entropy` target outside [0, V), an embedding id outside the ",
            "vocabulary, a `scatter` index outside the buffer, a byte above 255, or ",
            "an id that is negative or not an integer. The original MLPL reported ",
            "messages such as `unsupported: cross_entropy: target[i] = t is not a ",
            "valid class index in 0..V`.",
        ),
        example: "y = one_hot([0, 3, 5], 4)",
        fix: concat!(
            "Make the size large enough for every id (or fix the ids).\n",
            "\n",
            "    y = one_hot([0, 3, 5], 6)",
        ),
    },
    CodeInfo {
        code: "E0403",
        severity: Severity::Error,
        headline: "no data directory",
        phase: "R",
        explanation: concat!(
            "File builtins (`load`, `save`, `load_weights`) resolve paths inside the ",
            "data directory, and none is configured for this run. The CLI uses ",
            "`--data-dir` and otherwise the script's directory; the editor's runner ",
            "uses the workspace folder. The original MLPL reported `unsupported: … ",
            "use load_preloaded`.",
        ),
        example: concat!(
            "# run where no data directory is configured\n",
            "data = load(\"iris.csv\")",
        ),
        fix: concat!(
            "Configure a data directory, for example `mlpl run --data-dir data ",
            "train.mlpl`, or use a compiled-in corpus.\n",
            "\n",
            "    text = load_preloaded(\"tiny_corpus\")",
        ),
    },
    CodeInfo {
        code: "E0404",
        severity: Severity::Error,
        headline: "path outside the data directory",
        phase: "S, R",
        explanation: concat!(
            "Paths given to file builtins must stay inside the data directory: ",
            "absolute paths, drive or root prefixes, `..` that climbs above the ",
            "directory, and symbolic links that resolve outside it are refused. The ",
            "original MLPL reported `unsupported: …`.",
        ),
        example: "data = load(\"../secrets/iris.csv\")",
        fix: concat!(
            "Put the file inside the data directory (or point `--data-dir` at its ",
            "folder) and use a relative path.\n",
            "\n",
            "    data = load(\"iris.csv\")",
        ),
    },
    CodeInfo {
        code: "E0405",
        severity: Severity::Error,
        headline: "file cannot be read or written",
        phase: "R",
        explanation: concat!(
            "The operating system refused a file operation: the file does not exist, ",
            "permission was denied, the disk is full, or the path names a directory. ",
            "The message carries the system's error and the path. The original MLPL ",
            "reported `unsupported: …`.",
        ),
        example: "data = load(\"irsi.csv\")",
        fix: concat!(
            "Check the file's name and location relative to the data directory.\n",
            "\n",
            "    data = load(\"iris.csv\")",
        ),
    },
    CodeInfo {
        code: "E0406",
        severity: Severity::Error,
        headline: "malformed data file",
        phase: "R",
        explanation: concat!(
            "A file was read but its content is not valid for its type: a CSV with ",
            "rows of different lengths or a non-numeric cell (the message gives the ",
            "line), a safetensors file that is corrupt, holds more than one tensor ",
            "for `load`, or uses an unsupported tensor type, or a text file that is ",
            "not UTF-8. The original MLPL reported `unsupported: …`.",
        ),
        example: concat!(
            "# data.csv:\n",
            "#   x,y\n",
            "#   1,2\n",
            "#   3\n",
            "data = load(\"data.csv\")",
        ),
        fix: concat!(
            "Repair the file so that every row has the same number of numeric cells.\n",
            "\n",
            "    # data.csv:\n",
            "    #   x,y\n",
            "    #   1,2\n",
            "    #   3,4\n",
            "    data = load(\"data.csv\")",
        ),
    },
    CodeInfo {
        code: "E0407",
        severity: Severity::Error,
        headline: "tensor missing from checkpoint",
        phase: "R",
        explanation: concat!(
            "`load_weights` looks up each parameter of the model by its structural ",
            "key (such as `0.embed.E` or `1.linear.W`), and the checkpoint has no ",
            "tensor under that key, so it was saved from a model with another ",
            "structure. The message names the key. Nothing was loaded.",
        ),
        example: concat!(
            "save(linear(4, 8, 0), \"head.safetensors\")\n",
            "m = chain(embed(100, 4, 1), linear(4, 8, 2))\n",
            "load_weights(m, \"head.safetensors\")",
        ),
        fix: concat!(
            "Load into the same architecture the checkpoint was saved from (keys ",
            "depend on the model's structure, not on parameter names).\n",
            "\n",
            "    save(chain(embed(100, 4, 1), linear(4, 8, 2)), \"model.safetensors\")\n",
            "    m = chain(embed(100, 4, 3), linear(4, 8, 4))\n",
            "    load_weights(m, \"model.safetensors\")",
        ),
    },
    CodeInfo {
        code: "E0408",
        severity: Severity::Error,
        headline: "request failed",
        phase: "R",
        explanation: concat!(
            "`llm_call` could not get a reply: the server could not be reached, it ",
            "answered with a status other than 2xx (the message includes the start of ",
            "the body), or the reply was not JSON with a `response` string. The ",
            "message includes the resolved address (`…/api/generate`). The original ",
            "MLPL reported `unsupported: llm_call: …`.",
        ),
        example: "reply = llm_call(\"http://localhost:11434\", \"Say hello\", \"llama3\")",
        fix: concat!(
            "Start the Ollama-compatible server (or correct the address) and make ",
            "sure the model is available on it.\n",
            "\n",
            "    # after `ollama serve` and `ollama pull llama3`\n",
            "    reply = llm_call(\"http://localhost:11434\", \"Say hello\", \"llama3\")",
        ),
    },
    CodeInfo {
        code: "E0409",
        severity: Severity::Error,
        headline: "run cancelled",
        phase: "R",
        explanation: concat!(
            "The run was cancelled (from the editor or the runner) before it ",
            "finished. Cancellation takes effect before a statement, before a loop ",
            "iteration or between array operations; an optimizer update is applied to ",
            "all of its parameters or to none, so the workspace stays consistent, and ",
            "bindings made before the cancellation are kept.",
        ),
        example: concat!(
            "W = param[1000]\n",
            "train 1000000 {\n",
            "  adam(sum(W * W), W, 0.001, 0.9, 0.999, 1e-8)\n",
            "  loss_metric = sum(W * W)\n",
            "}",
        ),
        fix: concat!(
            "Nothing is broken: the workspace keeps the state it had when the run ",
            "stopped. Run again, with fewer steps if the run took too long.\n",
            "\n",
            "    W = param[1000]\n",
            "    train 1000 {\n",
            "      adam(sum(W * W), W, 0.001, 0.9, 0.999, 1e-8)\n",
            "      loss_metric = sum(W * W)\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "E0410",
        severity: Severity::Error,
        headline: "out of host memory",
        phase: "R",
        explanation: concat!(
            "An allocation in host memory failed, usually because an array is far ",
            "larger than intended (a float32 array takes 4 bytes per element). The ",
            "run stops; the workspace stays usable. The original MLPL crashed.",
        ),
        example: "x = zeros([100000, 100000, 100])",
        fix: concat!(
            "Use smaller arrays, or process the data in batches.\n",
            "\n",
            "    x = zeros([1000, 1000])",
        ),
    },
    CodeInfo {
        code: "E0501",
        severity: Severity::Error,
        headline: "device mismatch in `OP`",
        phase: "S, R",
        explanation: concat!(
            "Two operands of an operation were explicitly placed (with `to_device`) ",
            "on different devices. Placed arrays never move implicitly, so the ",
            "operation cannot run. The message names the operation, both operands and ",
            "both devices. Floating arrays (not placed) move freely and never cause ",
            "this error. The original MLPL reported `device mismatch: OP on A vs B`.",
        ),
        example: concat!(
            "a = to_device(ones([4, 4]), \"cuda\")\n",
            "b = to_device(ones([4, 4]), \"cpu\")\n",
            "c = matmul(a, b)",
        ),
        fix: concat!(
            "Place both operands on the same device.\n",
            "\n",
            "    a = to_device(ones([4, 4]), \"cuda\")\n",
            "    b = to_device(ones([4, 4]), \"cuda\")\n",
            "    c = matmul(a, b)",
        ),
    },
    CodeInfo {
        code: "E0502",
        severity: Severity::Error,
        headline: "unknown device target",
        phase: "S, R",
        explanation: concat!(
            "`to_device` was given a target that is not a device name: targets are ",
            "`\"cpu\"`, `\"cuda\"`, `\"cuda:N\"` and `\"mlx\"`. (A `device` block with an ",
            "unknown target warns instead, W0502.) The original MLPL reported ",
            "`to_device: unknown target 'x' (expected 'cpu' or 'mlx')`.",
        ),
        example: "x = to_device(ones([3]), \"gpu\")",
        fix: concat!(
            "Use one of the device targets.\n",
            "\n",
            "    x = to_device(ones([3]), \"cuda\")",
        ),
    },
    CodeInfo {
        code: "E0503",
        severity: Severity::Error,
        headline: "out of device memory",
        phase: "R",
        explanation: concat!(
            "An allocation on a device failed. The message names the device, the ",
            "operation and the number of bytes requested. Activations of large ",
            "batches, and gradients and optimizer state (three times the parameters ",
            "for Adam), all need device memory; `estimate_train` predicts the total.",
        ),
        example: concat!(
            "device(\"cuda\") {\n",
            "  x = randn(0, [200000, 200000])\n",
            "  y = matmul(x, x)\n",
            "}",
        ),
        fix: concat!(
            "Make the arrays smaller (smaller batches or models), or run the work on ",
            "the CPU.\n",
            "\n",
            "    device(\"cuda\") {\n",
            "      x = randn(0, [6000, 6000])\n",
            "      y = matmul(x, x)\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "E0504",
        severity: Severity::Error,
        headline: "device backend failure",
        phase: "R",
        explanation: concat!(
            "The device backend reported an error that is not a lack of memory: a ",
            "driver or kernel failure. The message carries the backend's own text. It ",
            "usually points at the installation (driver and toolkit versions) rather ",
            "than at the program.",
        ),
        example: concat!(
            "device(\"cuda\") {\n",
            "  y = matmul(ones([1024, 1024]), ones([1024, 1024]))\n",
            "}",
        ),
        fix: concat!(
            "Check the device driver and the build's backend; meanwhile run the block ",
            "on the CPU.\n",
            "\n",
            "    device(\"cpu\") {\n",
            "      y = matmul(ones([1024, 1024]), ones([1024, 1024]))\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0001",
        severity: Severity::Warning,
        headline: "statements run together on one line",
        phase: "S",
        explanation: concat!(
            "Statement separators are optional, so a statement ends where the ",
            "expression parser stops and the next one starts at the next token. Two ",
            "statements on one line without `;` between them usually mean a typo: ",
            "`2x` is the number 2 followed by the variable `x`, and `x [1, 2]` is not ",
            "indexing (MLPL has none). The program still runs as parsed; the fix ",
            "inserts `;` or, for `2x`, `2 * x`.",
        ),
        example: concat!("x = 3\n", "z = 2x",),
        fix: concat!(
            "Write the operator you meant (or `;` if two statements were intended).\n",
            "\n",
            "    x = 3\n",
            "    z = 2 * x",
        ),
    },
    CodeInfo {
        code: "W0002",
        severity: Severity::Warning,
        headline: "this `-` subtracts",
        phase: "S",
        explanation: concat!(
            "A `-` directly before a digit is part of a negative number, except after ",
            "a value (a name, number, string, `)` or `]`), where it is subtraction. ",
            "`a -1` and `[1 -2]` therefore subtract even though the spacing suggests ",
            "a negative literal; `[1 -2]` is the one-element array `[-1]`.",
        ),
        example: "v = [1 -2]",
        fix: concat!(
            "Add a comma for two elements, or a space after `-` to make the ",
            "subtraction explicit.\n",
            "\n",
            "    v = [1, -2]",
        ),
    },
    CodeInfo {
        code: "W0003",
        severity: Severity::Warning,
        headline: "cell marker inside a block or brackets",
        phase: "S",
        explanation: concat!(
            "A `# %%` line starts a new cell, but this one is inside an open `{`, `(` ",
            "or `[`, so the cells it creates cannot run on their own: the first ends ",
            "in the middle of the block. To the language the marker is just a ",
            "comment, so running the whole file is unaffected.",
        ),
        example: concat!(
            "W = param[2]\n",
            "train 10 {\n",
            "# %% update\n",
            "  adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\n",
            "  loss_metric = sum(W * W)\n",
            "}",
        ),
        fix: concat!(
            "Move the marker outside the block.\n",
            "\n",
            "    W = param[2]\n",
            "    # %% update\n",
            "    train 10 {\n",
            "      adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\n",
            "      loss_metric = sum(W * W)\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0101",
        severity: Severity::Warning,
        headline: "`step` is not bound here",
        phase: "S",
        explanation: concat!(
            "`step` is bound only by `train`, before each iteration. Inside a ",
            "`repeat` or `for` body that is not itself inside a `train` body, `step` ",
            "holds whatever value a previous `train` loop left (or is undefined), not ",
            "the current iteration.",
        ),
        example: concat!(
            "repeat 3 {\n",
            "  lr = cosine_schedule(step, 3, 0.001, 0.01)\n",
            "}",
        ),
        fix: concat!(
            "Use `train` when the body needs the iteration number, or iterate over ",
            "`iota(n)` with `for`.\n",
            "\n",
            "    for i in iota(3) {\n",
            "      lr = cosine_schedule(i, 3, 0.001, 0.01)\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0102",
        severity: Severity::Warning,
        headline: "layer constructed on every iteration",
        phase: "S",
        explanation: concat!(
            "A layer constructor with parameters (`linear`, `embed`, `attention`, …) ",
            "creates new parameters each time it is evaluated. Inside a loop body or ",
            "a loss it builds a fresh, untrained model on every iteration, so ",
            "training never accumulates and the workspace fills with parameters. ",
            "`chain`, `residual` and parameterless layers are harmless.",
        ),
        example: concat!(
            "X = randn(0, [8, 4])\n",
            "train 100 {\n",
            "  m = linear(4, 1, 2)\n",
            "  adam(mean(apply(m, X)), m, 0.01, 0.9, 0.999, 1e-8)\n",
            "  loss_metric = mean(apply(m, X))\n",
            "}",
        ),
        fix: concat!(
            "Build the model once, before the loop.\n",
            "\n",
            "    X = randn(0, [8, 4])\n",
            "    m = linear(4, 1, 2)\n",
            "    train 100 {\n",
            "      adam(mean(apply(m, X)), m, 0.01, 0.9, 0.999, 1e-8)\n",
            "      loss_metric = mean(apply(m, X))\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0103",
        severity: Severity::Warning,
        headline: "loss does not depend on the updated parameters",
        phase: "S, R",
        explanation: concat!(
            "An optimizer evaluates its loss expression at every call to ",
            "differentiate it. The loss given is a plain variable holding a value ",
            "computed earlier, or provably does not read the parameters being ",
            "updated, so every gradient is zero (Adam still moves the parameters with ",
            "its stored moments).",
        ),
        example: concat!(
            "W = param[3]\n",
            "loss = sum(W * W)\n",
            "train 10 {\n",
            "  adam(loss, W, 0.1, 0.9, 0.999, 1e-8)\n",
            "  loss_metric = sum(W * W)\n",
            "}",
        ),
        fix: concat!(
            "Write the loss expression inside the optimizer call.\n",
            "\n",
            "    W = param[3]\n",
            "    train 10 {\n",
            "      adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\n",
            "      loss_metric = sum(W * W)\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0104",
        severity: Severity::Warning,
        headline: "train body ends with an optimizer call",
        phase: "S",
        explanation: concat!(
            "`train` records the value of the body's last statement as the ",
            "iteration's loss. An optimizer call returns 0, so when it is the last ",
            "statement every recorded loss in `last_losses` is 0.",
        ),
        example: concat!(
            "W = param[3]\n",
            "train 10 {\n",
            "  adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\n",
            "}",
        ),
        fix: concat!(
            "End the body with the loss to record.\n",
            "\n",
            "    W = param[3]\n",
            "    train 10 {\n",
            "      adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\n",
            "      loss_metric = sum(W * W)\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0105",
        severity: Severity::Warning,
        headline: "variable shadows a builtin",
        phase: "S",
        explanation: concat!(
            "A variable was given the name of a builtin. Calls always reach the ",
            "builtin, so the program works, but reading the name gives the variable, ",
            "which is easy to confuse when reading the code.",
        ),
        example: "mean = reduce_add(iota(4)) / 4",
        fix: concat!(
            "Choose a name that is not a builtin's.\n",
            "\n",
            "    avg = reduce_add(iota(4)) / 4",
        ),
    },
    CodeInfo {
        code: "W0106",
        severity: Severity::Warning,
        headline: "model has no `moe` layer",
        phase: "S, R",
        explanation: concat!(
            "`aux_loss(m)` sums the load-balancing losses of the mixture-of-experts ",
            "layers in `m`; this model has none, so the value is always 0 and adding ",
            "it to a loss has no effect. Mixture-of-experts layers are built with ",
            "`moe(d, experts, top_k, hidden, seed)`.",
        ),
        example: concat!(
            "m = chain(linear(4, 8, 0), relu_layer(), linear(8, 2, 1))\n",
            "a = aux_loss(m)",
        ),
        fix: concat!(
            "Drop the `aux_loss` term, or pass the model that contains the `moe` ",
            "layers.\n",
            "\n",
            "    m = chain(linear(4, 8, 0), moe(8, 4, 2, 16, 1), linear(8, 2, 2))\n",
            "    y = apply(m, ones([3, 4]))\n",
            "    a = aux_loss(m)",
        ),
    },
    CodeInfo {
        code: "W0201",
        severity: Severity::Warning,
        headline: "duplicate axis name",
        phase: "S, R",
        explanation: concat!(
            "A names list gives the same name to two axes. This is allowed, but a ",
            "lookup by name finds only the first of them, and broadcasting and ",
            "`matmul` compare names, so the result is rarely what was meant.",
        ),
        example: "x = label(zeros([3, 3]), [\"feat\", \"feat\"])",
        fix: concat!(
            "Give each axis its own name.\n",
            "\n",
            "    x = label(zeros([3, 3]), [\"row\", \"col\"])",
        ),
    },
    CodeInfo {
        code: "W0202",
        severity: Severity::Warning,
        headline: "fraction truncated",
        phase: "S, R",
        explanation: concat!(
            "A count, size, index or seed is read as an integer, and the value given ",
            "has a fractional part; it is truncated toward zero (`2.5` becomes 2). ",
            "There is no rounding builtin; truncation is the supported way to get an ",
            "integer, so write it on purpose.",
        ),
        example: "ids = iota(2.5)",
        fix: concat!("Pass an integer.\n", "\n", "    ids = iota(2)",),
    },
    CodeInfo {
        code: "W0203",
        severity: Severity::Warning,
        headline: "negative count treated as 0",
        phase: "S, R",
        explanation: concat!(
            "A count or size is negative; it is treated as 0, so the array is empty ",
            "or the loop does not run. This usually comes from arithmetic on sizes ",
            "(`n - k` with k larger than n). The checker reports it when it can ",
            "compute the value; the runtime when it reads it.",
        ),
        example: "ids = iota(-3)",
        fix: concat!("Pass a count of zero or more.\n", "\n", "    ids = iota(3)",),
    },
    CodeInfo {
        code: "W0204",
        severity: Severity::Warning,
        headline: "integer not exact in float32",
        phase: "S",
        explanation: concat!(
            "Arrays hold float32, which represents integers exactly only up to 2^24 = ",
            "16,777,216. A larger integer stored in an array (an id, an `iota` ",
            "element, a literal in an array literal) is rounded to a nearby float32. ",
            "Scalars computed from literals are kept in float64 and stay exact.",
        ),
        example: "big = [16777217]",
        fix: concat!(
            "Keep large integers as scalars (or use values below 2^24 in arrays).\n",
            "\n",
            "    big = 16777217",
        ),
    },
    CodeInfo {
        code: "W0301",
        severity: Severity::Warning,
        headline: "loss is not a scalar",
        phase: "S, R",
        explanation: concat!(
            "A loss should be a scalar. The loss given has more than one element, so ",
            "the sum of its elements is differentiated, which is usually not what was ",
            "meant.",
        ),
        example: concat!("W = param[3]\n", "g = grad(W * W, W)",),
        fix: concat!(
            "Reduce the loss to a scalar explicitly, with `sum` or `mean`.\n",
            "\n",
            "    W = param[3]\n",
            "    g = grad(sum(W * W), W)",
        ),
    },
    CodeInfo {
        code: "W0302",
        severity: Severity::Warning,
        headline: "parameter listed twice",
        phase: "S, R",
        explanation: concat!(
            "An optimizer's `params` mentions a parameter more than once (directly, ",
            "or through two models that share a layer). It is updated once, at its ",
            "first position.",
        ),
        example: concat!(
            "W = param[3]\n",
            "adam(sum(W * W), [W, W], 0.1, 0.9, 0.999, 1e-8)",
        ),
        fix: concat!(
            "List each parameter once.\n",
            "\n",
            "    W = param[3]\n",
            "    adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)",
        ),
    },
    CodeInfo {
        code: "W0401",
        severity: Severity::Warning,
        headline: "checkpoint has unused tensors",
        phase: "R",
        explanation: concat!(
            "`load_weights` loaded every parameter of the model, but the checkpoint ",
            "also holds tensors whose keys the model does not have, so it was ",
            "probably saved from a larger model. The message gives their count and ",
            "the first key.",
        ),
        example: concat!(
            "save(chain(linear(4, 8, 0), linear(8, 2, 1)), \"mlp.safetensors\")\n",
            "m = chain(linear(4, 8, 2))\n",
            "load_weights(m, \"mlp.safetensors\")",
        ),
        fix: concat!(
            "Load into the architecture the checkpoint was saved from.\n",
            "\n",
            "    save(chain(linear(4, 8, 0), linear(8, 2, 1)), \"mlp.safetensors\")\n",
            "    m = chain(linear(4, 8, 2), linear(8, 2, 3))\n",
            "    load_weights(m, \"mlp.safetensors\")",
        ),
    },
    CodeInfo {
        code: "W0402",
        severity: Severity::Warning,
        headline: "ids outside the vocabulary dropped",
        phase: "R",
        explanation: concat!(
            "`decode` with a BPE tokenizer skips ids at or above the vocabulary size, ",
            "as the original MLPL did silently. The message gives how many were ",
            "dropped.",
        ),
        example: concat!(
            "tok = train_bpe(\"abababab\", 258, 0)\n",
            "text = decode(tok, [97, 98, 300])",
        ),
        fix: concat!(
            "Decode only ids the tokenizer produced (below its vocabulary size).\n",
            "\n",
            "    tok = train_bpe(\"abababab\", 258, 0)\n",
            "    text = decode(tok, [97, 98, 257])",
        ),
    },
    CodeInfo {
        code: "W0403",
        severity: Severity::Warning,
        headline: "vocabulary smaller than requested",
        phase: "R",
        explanation: concat!(
            "`train_bpe` stops merging when fewer than two tokens remain, so on a ",
            "small corpus the tokenizer's vocabulary is smaller than the `vocab_size` ",
            "asked for. The tokenizer works; it just has fewer tokens.",
        ),
        example: "tok = train_bpe(\"abababab\", 260, 0)",
        fix: concat!(
            "Train on a larger corpus, or ask for a smaller vocabulary.\n",
            "\n",
            "    tok = train_bpe(load_preloaded(\"tiny_shakespeare_snippet\"), 260, 0)",
        ),
    },
    CodeInfo {
        code: "W0501",
        severity: Severity::Warning,
        headline: "device not available",
        phase: "R",
        explanation: concat!(
            "A `device` block names a valid target that this machine cannot use: the ",
            "build does not include its backend, or no such device was found (the ",
            "message says which). The block runs on the CPU instead. Reported once ",
            "per block per run.",
        ),
        example: concat!(
            "device(\"mlx\") {\n",
            "  y = matmul(ones([64, 64]), ones([64, 64]))\n",
            "}",
        ),
        fix: concat!(
            "Use a target the machine has, or build MLPL with the backend. Results ",
            "are the same on the CPU, only slower.\n",
            "\n",
            "    device(\"cpu\") {\n",
            "      y = matmul(ones([64, 64]), ones([64, 64]))\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0502",
        severity: Severity::Warning,
        headline: "unknown device",
        phase: "S, R",
        explanation: concat!(
            "A `device` block names a target that is not a device: targets are ",
            "`\"cpu\"`, `\"cuda\"`, `\"cuda:N\"` and `\"mlx\"`. The block runs on the CPU.",
        ),
        example: concat!(
            "device(\"gpu\") {\n",
            "  y = matmul(ones([64, 64]), ones([64, 64]))\n",
            "}",
        ),
        fix: concat!(
            "Use one of the device targets.\n",
            "\n",
            "    device(\"cuda\") {\n",
            "      y = matmul(ones([64, 64]), ones([64, 64]))\n",
            "    }",
        ),
    },
    CodeInfo {
        code: "W0503",
        severity: Severity::Warning,
        headline: "operation ran on the CPU",
        phase: "R",
        explanation: concat!(
            "The active device's backend has no kernel for an operation, so it ran on ",
            "the CPU (counted in `cpu_fallbacks`). The result is correct, but the ",
            "data made a round trip to host memory. Reported once per operation name ",
            "per block per run.",
        ),
        example: concat!(
            "device(\"mlx\") {\n",
            "  y = top_k(randn(0, [100]), 5)\n",
            "}",
        ),
        fix: concat!(
            "Nothing needs fixing for correctness. If the fallback is slow, move that ",
            "operation out of the block or use another device.\n",
            "\n",
            "    y = top_k(randn(0, [100]), 5)",
        ),
    },
    CodeInfo {
        code: "W0504",
        severity: Severity::Warning,
        headline: "placement not available",
        phase: "R",
        explanation: concat!(
            "`to_device` placed an array (or a model's parameters) on a valid target ",
            "that is not available on this machine. The placement is recorded, so ",
            "device checks behave as on a machine that has the device, but the data ",
            "stays in host memory and work runs on the CPU. Reported once per call ",
            "site per run.",
        ),
        example: "x = to_device(ones([3]), \"cuda\")",
        fix: concat!(
            "Nothing needs fixing if the script is meant to run on other machines ",
            "too; otherwise place the data on the CPU.\n",
            "\n",
            "    x = to_device(ones([3]), \"cpu\")",
        ),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes of LANGUAGE §20.2–20.8.
    fn expected_codes() -> Vec<String> {
        let ranges: &[(char, u32, u32)] = &[
            ('E', 1, 12),
            ('E', 101, 110),
            ('E', 201, 218),
            ('E', 301, 311),
            ('E', 401, 410),
            ('E', 501, 504),
            ('W', 1, 3),
            ('W', 101, 106),
            ('W', 201, 204),
            ('W', 301, 302),
            ('W', 401, 403),
            ('W', 501, 504),
        ];
        ranges
            .iter()
            .flat_map(|&(letter, lo, hi)| (lo..=hi).map(move |n| format!("{letter}{n:04}")))
            .collect()
    }

    #[test]
    fn every_code_appears_exactly_once_in_order() {
        let codes: Vec<String> = CODES.iter().map(|c| c.code.to_string()).collect();
        assert_eq!(codes, expected_codes());
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, codes, "codes must be sorted and unique");
    }

    #[test]
    fn fields_are_filled_in_and_consistent() {
        for c in CODES {
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
        for c in CODES {
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
        for c in CODES {
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
        for c in CODES {
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
            "{} is out of date with the catalog in runtime/diag/src/codes.rs; \
             run `MLPL_BLESS=1 cargo test -p mlpl-diag` to regenerate it",
            path.display()
        );
    }
}
