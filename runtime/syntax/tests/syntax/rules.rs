//! The lexical and grammar rules of LANGUAGE §3–4 and the syntax diagnostics of §20.2
//! and §20.8 (E0001–E0012, W0001–W0003), checked through the public API.

use mlpl_diag::{Diagnostic, Severity, Span};
use mlpl_syntax::cells::split_cells;
use mlpl_syntax::lexer::{decode_source, lex};
use mlpl_syntax::token::TokenKind;
use mlpl_syntax::*;

// ----- helpers ---------------------------------------------------------------------

fn codes(src: &str) -> Vec<&'static str> {
    parse(src).diagnostics.iter().map(|d| d.code).collect()
}

fn clean(src: &str) -> Program {
    let p = parse(src);
    assert!(
        p.diagnostics.is_empty(),
        "unexpected diagnostics for {src:?}: {:#?}",
        p.diagnostics
    );
    p.program
}

fn only(src: &str, code: &str) -> (Parsed, Diagnostic) {
    let p = parse(src);
    assert_eq!(
        p.diagnostics.iter().map(|d| d.code).collect::<Vec<_>>(),
        vec![code],
        "{src:?}: {:#?}",
        p.diagnostics
    );
    let d = p.diagnostics[0].clone();
    (p, d)
}

fn primary(d: &Diagnostic) -> Span {
    d.primary
        .as_ref()
        .expect("diagnostic has a primary span")
        .span
}

fn text(src: &str, span: Span) -> &str {
    &src[span.start..span.end]
}

/// 1-based line of a byte offset; LF, CR LF and CR each end a line.
fn line_of(src: &str, offset: usize) -> usize {
    let b = &src.as_bytes()[..offset];
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\n' || (b[i] == b'\r' && b.get(i + 1) != Some(&b'\n')) {
            line += 1;
        }
        i += 1;
    }
    line
}

fn help(d: &Diagnostic) -> String {
    d.help.clone().unwrap_or_default()
}

/// Compact rendering of an expression.
fn sexp(e: &Expr) -> String {
    let list = |v: &[Expr]| v.iter().map(sexp).collect::<Vec<_>>().join(", ");
    match &e.kind {
        ExprKind::Number(v) => format!("{v}"),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Var(n) => n.clone(),
        ExprKind::Call { name, args } => format!("{}({})", name.name, list(args)),
        ExprKind::List(items) => format!("[{}]", list(items)),
        ExprKind::Neg(e) => format!("(neg {})", sexp(e)),
        // Rendered left-nested, as a chain associates.
        ExprKind::Chain { first, links } => links.iter().fold(sexp(first), |acc, l| {
            format!("({acc} {} {})", l.op.symbol(), sexp(&l.rhs))
        }),
        ExprKind::Paren(e) => format!("{{{}}}", sexp(e)),
        ExprKind::Ctor { kind, dims } => format!("{kind:?}[{}]", list(dims)),
        ExprKind::Device { target, body } => {
            format!("device({}){{{} stmts}}", sexp(target), body.stmts.len())
        }
        ExprKind::Error => "ERR".into(),
    }
}

fn stmt_sexp(s: &Stmt) -> String {
    match &s.kind {
        StmtKind::Expr(e) => sexp(e),
        StmtKind::Assign { name, value } => format!("{} = {}", name.name, sexp(value)),
        StmtKind::Annotated { name, axes, value } => format!(
            "{} : [{}] = {}",
            name.name,
            axes.iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            sexp(value)
        ),
        StmtKind::Repeat { count, body } => {
            format!("repeat {} {{{}}}", sexp(count), body.stmts.len())
        }
        StmtKind::Train { count, body } => {
            format!("train {} {{{}}}", sexp(count), body.stmts.len())
        }
        StmtKind::For { var, iter, body } => format!(
            "for {} in {} {{{}}}",
            var.name,
            sexp(iter),
            body.stmts.len()
        ),
        StmtKind::Experiment { name, body } => {
            format!("experiment {} {{{}}}", sexp(name), body.stmts.len())
        }
        StmtKind::Fn(f) => format!("{} {{{}}}", f.signature(), f.body.stmts.len()),
        StmtKind::Error => "ERROR".into(),
    }
}

fn stmts(src: &str) -> Vec<String> {
    parse(src).program.stmts.iter().map(stmt_sexp).collect()
}

fn value_of(src: &str) -> f64 {
    let prog = clean(src);
    match &prog.stmts[..] {
        [Stmt {
            kind:
                StmtKind::Expr(Expr {
                    kind: ExprKind::Number(v),
                    ..
                }),
            ..
        }] => *v,
        other => panic!("{src:?} parsed as {other:?}"),
    }
}

// ----- §3.1 source text ------------------------------------------------------------

#[test]
fn line_breaks_are_one_newline_each() {
    for src in ["a = 1\nb = 2\n", "a = 1\r\nb = 2\r\n", "a = 1\rb = 2\r"] {
        assert_eq!(stmts(src), ["a = 1", "b = 2"], "{src:?}");
    }
    // Diagnostic lines count CR LF once.
    let src = "a = 1\r\n\r\nb = )\r\n";
    let p = parse(src);
    assert_eq!(line_of(src, primary(&p.diagnostics[0]).start), 3);
}

#[test]
fn byte_order_mark_and_invalid_utf8() {
    assert_eq!(decode_source(b"\xEF\xBB\xBFx = 1\n").unwrap(), "x = 1\n");
    let err = decode_source(b"x = \"caf\xE9\"\n").unwrap_err();
    assert_eq!(err.code, "E0005");
    assert_eq!(err.severity, Severity::Error);
    assert_eq!(primary(&err), Span::new(8, 9));
    assert!(decode_source(&[0xff, 0xfe, 0x00]).is_err());
    // A BOM left in the text is ignored by the parser too.
    assert_eq!(stmts("\u{feff}x = 1"), ["x = 1"]);
}

#[test]
fn whitespace_is_space_and_tab_only() {
    assert_eq!(stmts("x\t=\t1"), ["x = 1"]);
    assert_eq!(codes("x =\u{0c}1"), ["E0001"]);
    assert_eq!(codes("x =\u{a0}1"), ["E0001"]);
}

// ----- §3.2 comments and cell markers ----------------------------------------------

#[test]
fn comments() {
    assert_eq!(
        stmts("x = 1 # the answer\n# whole line\ny = \"# not a comment\""),
        ["x = 1", "y = \"# not a comment\""]
    );
    assert_eq!(stmts("# %% Cell title\nx = 1"), ["x = 1"]);
}

#[test]
fn cell_marker_inside_brackets_is_w0003() {
    for (src, opener) in [
        ("repeat 3 {\n  x = 1\n# %% next\n  y = 2\n}\n", "{"),
        ("x = f(1,\n# %% next\n2)\n", "("),
        ("x = [1,\n# %%\n2]\n", "["),
    ] {
        let (p, d) = only(src, "W0003");
        assert_eq!(d.severity, Severity::Warning);
        assert_eq!(text(src, primary(&d)).trim_end(), text(src, primary(&d)));
        assert!(text(src, primary(&d)).starts_with("# %%"));
        assert_eq!(text(src, d.secondary[0].span), opener);
        assert_eq!(p.program.stmts.len(), 1);
    }
    assert!(codes("x = 1\n# %% next\ny = 2\n").is_empty());
    // Not at the start of the line: an ordinary comment.
    assert!(codes("repeat 3 {\n  # %% indented\n}\n").is_empty());
}

// ----- §3.3 tokens -------------------------------------------------------------------

#[test]
fn keywords_are_reserved() {
    for kw in ["repeat", "train", "for", "in", "experiment", "device"] {
        let src = format!("{kw} = 1");
        let (_, d) = only(&src, "E0009");
        assert_eq!(text(&src, primary(&d)), kw);
    }
    let (_, d) = only("for repeat in x { }", "E0009");
    assert_eq!(primary(&d), Span::new(4, 10));
    assert_eq!(codes("x = in + 1"), ["E0009"]);
    assert_eq!(codes("f(train)"), ["E0009"]);
    assert_eq!(codes("y = device"), ["E0009"]);
    // Builtin names are not reserved, identifiers are case-sensitive.
    assert_eq!(
        stmts("sum = 1\nRepeat = 2\nrepeat_ = 3"),
        ["sum = 1", "Repeat = 2", "repeat_ = 3"]
    );
}

#[test]
fn param_and_tensor_are_contextual() {
    assert_eq!(stmts("w = param[2, 3]"), ["w = Param[2, 3]"]);
    assert_eq!(stmts("t = tensor[4]"), ["t = Tensor[4]"]);
    assert_eq!(stmts("p = param[]"), ["p = Param[]"]);
    assert_eq!(
        stmts("param = 3\ntensor + param"),
        ["param = 3", "(tensor + param)"]
    );
    assert_eq!(stmts("param(1)"), ["param(1)"]);
    // Newlines inside the dims are whitespace.
    assert_eq!(stmts("w = param[\n 2,\n 3,\n]"), ["w = Param[2, 3]"]);
}

#[test]
fn unexpected_characters_name_the_builtin() {
    let cases = [
        ("a == b", "eq"),
        ("a < b", "lt"),
        ("a > b", "gt"),
        ("a ** 2", "pow"),
        ("a ^ 2", "pow"),
        ("a @ b", "matmul"),
        ("x.shape", "shape("),
        ("a % b", "remainder"),
        ("!m", "1 - m"),
        ("a & b", "a * b"),
        ("a | b", "gt("),
        ("x = 'abc'", "\"abc\""),
    ];
    for (src, needle) in cases {
        let (p, d) = only(src, "E0001");
        let all = format!(
            "{} {} {}",
            d.message,
            d.primary.as_ref().unwrap().message,
            help(&d)
        );
        assert!(
            all.contains(needle),
            "{src}: {all:?} should mention {needle:?}"
        );
        // The parser adds nothing for the same mistake.
        assert_eq!(p.program.stmts.len(), 1, "{src}");
    }
    let (_, d) = only("x = a == b", "E0001");
    assert_eq!(primary(&d), Span::new(6, 8));
}

#[test]
fn repl_command_lines() {
    let src = "x = 1\n:vars\ny = 2\n  :describe x\n";
    let p = parse(src);
    assert_eq!(
        p.diagnostics.iter().map(|d| d.code).collect::<Vec<_>>(),
        ["E0001", "E0001"]
    );
    assert_eq!(text(src, primary(&p.diagnostics[0])), ":vars");
    assert_eq!(text(src, primary(&p.diagnostics[1])), ":describe x");
    assert_eq!(p.program.stmts.len(), 4);
}

// ----- §3.4 number literals --------------------------------------------------------

#[test]
fn number_literal_table() {
    assert_eq!(value_of("1e-4"), 1e-4);
    assert_eq!(value_of("2.5E3"), 2500.0);
    assert_eq!(value_of("1e5"), 100000.0);
    assert_eq!(value_of("6.02e+23"), 6.02e23);
    assert_eq!(value_of("4_000_000_000"), 4_000_000_000.0);
    assert_eq!(value_of("1_000.000_1"), 1000.0001);
    assert_eq!(value_of("1e1_0"), 1e10);
    assert_eq!(value_of("0.1"), 0.1);
    // Integer literals beyond 64 bits round to the nearest f64.
    assert_eq!(value_of("18446744073709551617"), 18446744073709551616.0);
    assert_eq!(
        value_of("340282366920938463463374607431768211456"),
        2f64.powi(128)
    );
}

#[test]
fn exponent_and_underscore_endings() {
    // `2e` is 2 followed by the identifier `e` (W0001).
    for (src, first, second) in [
        ("lr = 2e", "lr = 2", "e"),
        ("x = 1_", "x = 1", "_"),
        ("x = 1__0", "x = 1", "__0"),
        ("x = 2e+", "x = 2", "ERR"),
    ] {
        let p = parse(src);
        let got: Vec<String> = p.program.stmts.iter().map(stmt_sexp).collect();
        assert_eq!(got[0], first, "{src}");
        if second != "ERR" {
            assert_eq!(got, [first, second], "{src}");
            assert_eq!(codes(src), ["W0001"], "{src}");
        }
    }
}

#[test]
fn malformed_numbers_are_e0002() {
    let (p, d) = only("x = 1.", "E0002");
    assert_eq!(primary(&d), Span::new(4, 6));
    assert!(help(&d).contains("`1.0`"));
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "x = 1");
    let (_, d) = only("x = .5", "E0002");
    assert!(help(&d).contains("`0.5`"));
    let (p, d) = only("x = 1e400", "E0002");
    assert_eq!(primary(&d), Span::new(4, 9));
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "x = ERR");
    assert_eq!(codes("x = -1e400"), ["E0002"]);
    assert!(codes("x = 1e-400").is_empty());
    assert!(codes("x = 1.7976931348623157e308").is_empty());
}

// ----- §3.5 negative literals ------------------------------------------------------

#[test]
fn negative_literal_table() {
    // `x -1` is `x - 1` (with W0002).
    let p = parse("x -1");
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "(x - 1)");
    // `f(-1)`, `[1, -2]`, `repeat -1 { }` contain the literal −1.
    assert_eq!(stmts("f(-1)"), ["f(-1)"]);
    assert_eq!(stmts("[1, -2]"), ["[1, -2]"]);
    assert_eq!(stmts("repeat -1 { }"), ["repeat -1 {0}"]);
    // `[1 -2]` is `[1 - 2]`, that is `[-1]`, with W0002.
    let (p, d) = only("[1 -2]", "W0002");
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "[(1 - 2)]");
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(primary(&d), Span::new(3, 4));
    assert!(
        help(&d).contains("`1 - 2`") && help(&d).contains("`1, -2`"),
        "{}",
        help(&d)
    );
    // `- 2` is unary minus applied to 2.
    assert_eq!(stmts("- 2"), ["(neg 2)"]);
    // `a = 3` NEWLINE `-1`: two statements, the second the literal −1.
    let prog = clean("a = 3\n-1");
    assert_eq!(
        prog.stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
        ["a = 3", "-1"]
    );
}

#[test]
fn negative_literal_details() {
    assert!(codes("x - 1").is_empty());
    assert!(codes("x-1").is_empty());
    assert_eq!(stmts("x-1"), ["(x - 1)"]);
    assert_eq!(
        stmts("f(x) -y"),
        ["(f(x) - (neg y))"].map(|s| s.replace("(neg y)", "y"))
    );
    assert_eq!(stmts("2 * -3"), ["(2 * -3)"]);
    assert_eq!(stmts("x = -2 * 3"), ["x = (-2 * 3)"]);
    assert_eq!(codes("f(x) -1"), ["W0002"]);
    assert_eq!(codes("[x\n-1]"), ["W0002"]);
    // Inside brackets a newline is not significant: still a subtraction.
    assert_eq!(stmts("[x\n-1]"), ["[(x - 1)]"]);
    // Inside braces it is: a new statement.
    assert_eq!(stmts("repeat 2 {\nx\n-1\n}"), ["repeat 2 {2}"]);
}

// ----- §3.6 strings ------------------------------------------------------------------

#[test]
fn strings_and_escapes() {
    assert_eq!(
        stmts(r#"s = "a\"b\\c\nd\te\rf""#),
        [r#"s = "a\"b\\c\nd\te\rf""#]
    );
    assert_eq!(
        stmts("s = \"one\r\ntwo\rthree\""),
        ["s = \"one\\ntwo\\nthree\""]
    );
    assert_eq!(stmts("s = \"π ≈ 3.14 # ✓\""), ["s = \"π ≈ 3.14 # ✓\""]);
    let (_, d) = only(r#"s = "a\qb""#, "E0004");
    assert_eq!(primary(&d), Span::new(6, 8));
    let src = "x = \"abc\ny = 2\n";
    let (_, d) = only(src, "E0003");
    assert_eq!(primary(&d), Span::new(4, 5));
    // An unterminated string inside a call does not also report the `(`.
    assert_eq!(codes("x = f(\"abc)\n"), ["E0003"]);
}

// ----- §3.7 and §4.1 grammar ------------------------------------------------------------

#[test]
fn newlines_inside_brackets() {
    let src = "model = chain(\n    embed(V, d, 0),\n    residual(chain(rms_norm(d), causal_attention(d, 4, 1))),\n    linear(d, V, 2),          # trailing comma allowed\n)\n";
    assert_eq!(
        stmts(src),
        ["model = chain(embed(V, d, 0), residual(chain(rms_norm(d), causal_attention(d, 4, 1))), linear(d, V, 2))"]
    );
    assert_eq!(stmts("x = (1\n+\n2)"), ["x = {(1 + 2)}"]);
    // The innermost bracket decides: a block inside a call has separators again.
    assert_eq!(
        stmts("r = f(device(\"cpu\") {\n a = 1\n b = 2\n})"),
        ["r = f(device(\"cpu\"){2 stmts})"]
    );
}

#[test]
fn precedence() {
    assert_eq!(stmts("1 + 2 * 3 - 4 / 2"), ["((1 + (2 * 3)) - (4 / 2))"]);
    assert_eq!(stmts("-2 * 3"), ["(-2 * 3)"]);
    assert_eq!(stmts("-x * 3"), ["((neg x) * 3)"]);
    assert_eq!(stmts("a - b - c"), ["((a - b) - c)"]);
    assert_eq!(stmts("a / b / c"), ["((a / b) / c)"]);
    assert_eq!(stmts("(a + b) * c"), ["({(a + b)} * c)"]);
}

#[test]
fn statement_forms() {
    let src = "x = 1\ny : [batch, feat] = param[2, 3]\ns : [] = 5\nrepeat 3 { x = x + 1 }\ntrain n { adam(l, m, 0.1, 0.9, 0.999, 1e-8); l }\nfor r in rows { r }\nexperiment \"run_\" + name { a_metric = 1 }\nv = device(\"cuda\") { matmul(a, b) }";
    assert_eq!(
        clean(src).stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
        [
            "x = 1",
            "y : [batch, feat] = Param[2, 3]",
            "s : [] = 5",
            "repeat 3 {1}",
            "train n {2}",
            "for r in rows {1}",
            "experiment (\"run_\" + name) {1}",
            "v = device(\"cuda\"){1 stmts}",
        ]
    );
}

#[test]
fn calls_and_trailing_commas() {
    assert_eq!(stmts("f (x)"), ["f(x)"]);
    assert_eq!(stmts("f(a, b,)"), ["f(a, b)"]);
    assert_eq!(stmts("[1, 2,]"), ["[1, 2]"]);
    assert_eq!(stmts("x : [a, b,] = 1"), ["x : [a, b] = 1"]);
    assert_eq!(stmts("f()"), ["f()"]);
    assert_eq!(stmts("[]"), ["[]"]);
}

#[test]
fn spans_cover_the_source() {
    let src = "w = matmul(x, W) + b\n";
    let prog = clean(src);
    let s = &prog.stmts[0];
    assert_eq!(text(src, s.span), "w = matmul(x, W) + b");
    let StmtKind::Assign { name, value } = &s.kind else {
        panic!()
    };
    assert_eq!(text(src, name.span), "w");
    assert_eq!(text(src, value.span), "matmul(x, W) + b");
    let ExprKind::Chain { first, links } = &value.kind else {
        panic!()
    };
    assert_eq!(text(src, links[0].op_span), "+");
    let ExprKind::Call { name, args } = &first.kind else {
        panic!()
    };
    assert_eq!(text(src, name.span), "matmul");
    assert_eq!(text(src, args[1].span), "W");
    assert_eq!(prog.span, Span::new(0, src.len()));
}

// ----- §4.2 statement separation ---------------------------------------------------

#[test]
fn juxtaposition_table() {
    let rows: [(&str, [&str; 2], &str); 5] = [
        ("z = 2x", ["z = 2", "x"], "`z = 2 * x`"),
        ("x = 1 y = 2", ["x = 1", "y = 2"], "`x = 1; y = 2`"),
        ("x [1, 2]", ["x", "[1, 2]"], "`x; [1, 2]`"),
        (
            "train 3 { l } loss",
            ["train 3 {1}", "loss"],
            "put `loss` on its own line",
        ),
        ("lr = 2e", ["lr = 2", "e"], "`lr = 2 * e`"),
    ];
    for (src, parsed, fix) in rows {
        let (p, d) = only(src, "W0001");
        assert_eq!(
            p.program.stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
            parsed,
            "{src}"
        );
        assert_eq!(d.severity, Severity::Warning);
        let h = help(&d);
        // The table's fixes are whole-statement rewrites; our help quotes the
        // changed part, so compare modulo the leading `name = `.
        let fix_core = fix.replace("`z = ", "`").replace("`lr = ", "`");
        assert!(
            h.contains(fix) || h.contains(&fix_core),
            "{src}: help {h:?} should contain {fix}"
        );
    }
    let (_, d) = only("lr = 2e", "W0001");
    assert!(help(&d).contains("exponent"));
    let (_, d) = only("x [1, 2]", "W0001");
    assert!(help(&d).contains("no indexing"));
    let (_, d) = only("z = 2x", "W0001");
    assert_eq!(primary(&d), Span::new(4, 6));
}

#[test]
fn separators() {
    assert!(codes("x = 1; y = 2").is_empty());
    assert!(codes("x = 1\ny = 2").is_empty());
    assert!(codes(";;\n\nx = 1;;\n;").is_empty());
    assert!(codes("").is_empty());
    assert!(clean("").stmts.is_empty());
    assert!(clean("\n  # only a comment\n").stmts.is_empty());
    assert!(codes("repeat 2 { a = 1; b = 2 }").is_empty());
    assert_eq!(codes("repeat 2 { a = 1 b = 2 }"), ["W0001"]);
}

// ----- §20.2 error table -------------------------------------------------------------

#[test]
fn syntax_error_table() {
    let rows: &[(&str, &str, &str)] = &[
        ("x = 5 % 2", "E0001", "%"),
        ("x = 1.", "E0002", "1."),
        ("x = \"abc", "E0003", "\""),
        ("x = \"a\\qb\"", "E0004", "\\q"),
        ("x = (1 + 2", "E0007", "("),
        ("x = [1, 2", "E0007", "["),
        ("repeat 3 { x = 1", "E0007", "{"),
        ("x = 1)", "E0008", ")"),
        ("x = [1]]", "E0008", "]"),
        ("}", "E0008", "}"),
        ("train = 1", "E0009", "train"),
        ("for repeat in x { }", "E0009", "repeat"),
        ("x = repeat 3 { y }", "E0010", "repeat"),
        ("a = b = 1", "E0010", "="),
        ("f(x = 1)", "E0010", "="),
        ("x : [a, 1] = 2", "E0011", "1"),
        ("x : [a, b] 2", "E0011", "2"),
        ("x : a = 2", "E0011", "a"),
        ("f(a,,b)", "E0012", ","),
        ("[,]", "E0012", ","),
        ("f(,)", "E0012", ","),
        ("x = * 2", "E0006", "*"),
        ("f(1 2)", "E0006", "2"),
        ("repeat 3 x", "E0006", "x"),
        ("for x xs { }", "E0006", "xs"),
        ("2 = x", "E0006", "="),
    ];
    for (src, code, at) in rows {
        let (_, d) = only(src, code);
        assert_eq!(d.severity, Severity::Error);
        assert_eq!(text(src, primary(&d)), *at, "{src}: {d:#?}");
    }
}

#[test]
fn e0006_says_what_was_expected() {
    let (_, d) = only("f(1 2)", "E0006");
    assert!(d.message.contains("expected `,` or `)`"), "{}", d.message);
    let (_, d) = only("x = ", "E0006");
    assert!(
        d.message.contains("expected an expression"),
        "{}",
        d.message
    );
    let (_, d) = only("repeat 3 x", "E0006");
    assert!(d.message.contains("expected `{`"), "{}", d.message);
    let (_, d) = only("for x xs { }", "E0006");
    assert!(d.message.contains("expected `in`"), "{}", d.message);
}

#[test]
fn e0007_points_at_the_opener_once() {
    let src = "x = f(1, 2\ny = 3\nz = [4, 5\nw = 6\n";
    let p = parse(src);
    assert_eq!(
        p.diagnostics.iter().map(|d| d.code).collect::<Vec<_>>(),
        ["E0007", "E0007"]
    );
    assert_eq!(primary(&p.diagnostics[0]), Span::new(5, 6));
    assert_eq!(line_of(src, primary(&p.diagnostics[1]).start), 3);
    assert_eq!(text(src, primary(&p.diagnostics[1])), "[");
    assert_eq!(
        p.program.stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
        ["x = f(1, 2)", "y = 3", "z = [4, 5]", "w = 6"]
    );
    // A mismatched closer: the `(` is unclosed, the `]` closes the `[`.
    let (_, d) = only("x = [f(1, 2), 3", "E0007");
    assert_eq!(primary(&d), Span::new(4, 5));
    let (_, d) = only("repeat 1 { x = f(1, 2 }", "E0007");
    assert_eq!(primary(&d), Span::new(16, 17));
    assert_eq!(d.secondary[0].span, Span::new(22, 23));
    // Many lines after an unclosed paren do not produce E0006s.
    let many = format!("x = f(1\n{}", "a = 1\nb = g(a)\n".repeat(20));
    assert_eq!(codes(&many), ["E0007"]);
}

#[test]
fn e0008_drops_the_closer() {
    let (p, d) = only("x = (1 + 2)) * 3", "E0008");
    assert_eq!(primary(&d), Span::new(11, 12));
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "x = ({(1 + 2)} * 3)");
    // A typo for the open bracket's closer is one mistake.
    let (p, d) = only("f(a]", "E0008");
    assert!(help(&d).contains("`)`"));
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "f(a)");
    let (p, _) = only(
        "x = [1, 2)
y = 3",
        "E0008",
    );
    assert_eq!(
        p.program.stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
        ["x = [1, 2]", "y = 3"]
    );
    // An extra closer before the real one is just extra.
    let (p, d) = only("x = [f(a)), 2]", "E0008");
    assert_eq!(primary(&d), Span::new(9, 10));
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "x = [f(a), 2]");
}

#[test]
fn e0010_statement_in_expression() {
    for src in [
        "x = repeat 3 { y }",
        "x = train 10 { loss }",
        "x = for r in rows { r }",
        "x = experiment \"e\" { }",
    ] {
        let (p, _) = only(src, "E0010");
        assert_eq!(stmt_sexp(&p.program.stmts[0]), "x = ERR", "{src}");
    }
    let (_, d) = only("a = b = c = 1", "E0010");
    assert_eq!(primary(&d), Span::new(6, 7));
    let (_, d) = only("f(x = 1)", "E0010");
    assert!(help(&d).contains("keyword arguments"));
    // A device block is an expression.
    assert!(codes("x = device(\"cuda\") { matmul(a, b) }").is_empty());
}

#[test]
fn e0011_annotations() {
    for (src, at) in [
        ("x : [a, 1] = 2", "1"),
        ("x : [a, \"b\"] = 2", "\"b\""),
        ("x : [a] 2", "2"),
        ("x : [a]\ny = 1", "]"),
        ("x : (a) = 1", "("),
        ("x : [a b] = 1", "b"),
    ] {
        let (p, d) = only(src, "E0011");
        assert_eq!(text(src, primary(&d)), at, "{src}");
        assert_eq!(stmt_sexp(&p.program.stmts[0]), "ERROR", "{src}");
    }
}

#[test]
fn e0012_empty_elements() {
    let (p, d) = only("f(a,,b)", "E0012");
    assert_eq!(primary(&d), Span::new(4, 5));
    assert_eq!(stmt_sexp(&p.program.stmts[0]), "f(a, b)");
    assert_eq!(codes("[1,,,2]"), ["E0012", "E0012"]);
    assert_eq!(codes("param[,]"), ["E0012"]);
    assert_eq!(codes("x : [a,,b] = 1"), ["E0012"]);
}

// ----- recovery ----------------------------------------------------------------------

#[test]
fn several_mistakes_in_one_file() {
    let src = "\
x = 5 % 2
y = 1.
z = \"bad \\q escape\"
ok1 = 1
train = 3
w = f(a,,b)
v = a = 1
m : [a, 2] = zeros([2, 2])
q = 2x
r = [1 -2]
u = * 4
s = (1 + 2))
ok2 = matmul(x, y)
t = g(1, 2
";
    let p = parse(src);
    let got: Vec<(&str, usize)> = p
        .diagnostics
        .iter()
        .map(|d| (d.code, line_of(src, primary(d).start)))
        .collect();
    assert_eq!(
        got,
        [
            ("E0001", 1),
            ("E0002", 2),
            ("E0004", 3),
            ("E0009", 5),
            ("E0012", 6),
            ("E0010", 7),
            ("E0011", 8),
            ("W0001", 9),
            ("W0002", 10),
            ("E0006", 11),
            ("E0008", 12),
            ("E0007", 14),
        ]
    );
    let got: Vec<String> = p.program.stmts.iter().map(stmt_sexp).collect();
    assert_eq!(got.len(), 15);
    assert!(got.contains(&"ok1 = 1".to_string()));
    assert!(got.contains(&"ok2 = matmul(x, y)".to_string()));
    assert!(got.contains(&"ERROR".to_string()));
}

#[test]
fn errors_inside_blocks_recover_at_statement_boundaries() {
    let src = "repeat 3 {\n  a = (1 +)\n  b = 2\n  c = f(,)\n}\nd = 4\n";
    let p = parse(src);
    let got: Vec<(&str, usize)> = p
        .diagnostics
        .iter()
        .map(|d| (d.code, line_of(src, primary(d).start)))
        .collect();
    assert_eq!(got, [("E0006", 2), ("E0012", 4)]);
    assert_eq!(
        p.program.stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
        ["repeat 3 {3}", "d = 4"]
    );
}

#[test]
fn recovery_nodes() {
    let p = parse("x = )(\ny = 1");
    assert!(p.has_errors());
    let p = parse("= 5\ny = 1");
    assert_eq!(
        p.program.stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
        ["ERROR", "y = 1"]
    );
    let p = parse("{ x = 1 }\ny = 1");
    assert_eq!(codes("{ x = 1 }\ny = 1"), ["E0006"]);
    assert_eq!(
        p.program.stmts.iter().map(stmt_sexp).collect::<Vec<_>>(),
        ["ERROR", "y = 1"]
    );
}

// ----- nesting depth -----------------------------------------------------------------

fn assert_deep_ok(src: String) {
    // Run on a small stack: the parser must not recurse deeply.
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let p = parse(&src);
            assert!(p.has_errors());
            assert!(
                p.diagnostics.len() <= 300,
                "{} diagnostics",
                p.diagnostics.len()
            );
            assert!(p
                .diagnostics
                .iter()
                .any(|d| d.code == "E0006" && d.message.contains("nesting")));
            drop(p);
        })
        .unwrap();
    handle.join().expect("parser survived deep nesting");
}

#[test]
fn deep_nesting_is_a_diagnostic() {
    let n = 100_000;
    assert_deep_ok("(".repeat(n));
    assert_deep_ok(format!("x = {}1{}", "(".repeat(n), ")".repeat(n)));
    assert_deep_ok(format!("x = {}1{}", "[".repeat(n), "]".repeat(n)));
    assert_deep_ok(format!("x = {}", "f(".repeat(n)));
    assert_deep_ok("repeat 1 {".repeat(n));
    assert_deep_ok(format!("{}{}", "repeat 1 {".repeat(n), "}".repeat(n)));
    assert_deep_ok(format!("x = {}1", "-".repeat(n)));
    assert_deep_ok(format!("x = {}", "device(\"c\") {".repeat(n)));
    // Within the limit, nesting is fine.
    let ok = format!("x = {}1{}", "(".repeat(100), ")".repeat(100));
    assert!(codes(&ok).is_empty());
}

#[test]
fn long_flat_chains_are_one_node_not_nesting() {
    // 100,000 operands in a row of every chain kind, parsed and dropped on a
    // small stack: a chain is one node, not one level per operator.
    let n = 100_000;
    let chains = [
        format!("x = {}", vec!["1"; n].join(" + ")),
        format!("x = {}", vec!["a"; n].join(" * ")),
        format!("x = {}", vec!["b"; n].join(" - ")),
        format!("x = {}", vec!["c"; n].join(" / ")),
        format!("x = f({})", vec!["1"; n].join(", ")),
        format!("x = [{}]", vec!["1 + 2 * 3"; n].join(", ")),
    ];
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            for src in chains {
                let p = parse(&src);
                assert!(p.diagnostics.is_empty(), "{:?}", &p.diagnostics[..1]);
                let StmtKind::Assign { value, .. } = &p.program.stmts[0].kind else {
                    panic!("not an assignment")
                };
                match &value.kind {
                    ExprKind::Chain { links, .. } => assert_eq!(links.len(), n - 1),
                    ExprKind::Call { args: items, .. } | ExprKind::List(items) => {
                        assert_eq!(items.len(), n)
                    }
                    other => panic!("{other:?}"),
                }
                assert_eq!(value.span.end, src.len());
            }
        })
        .unwrap();
    handle.join().expect("parser survived long chains");
    // Mixed levels keep their precedence and associate to the left.
    let p = clean("a - b + c * d / e - f");
    assert_eq!(stmt_sexp(&p.stmts[0]), "(((a - b) + ((c * d) / e)) - f)");
}

#[test]
fn a_signature_axis_takes_at_most_64_operators_in_a_row() {
    let axis = |n: usize| vec!["d"; n + 1].join(" + ");
    let ok = format!("fn f(x : [{}]) {{ x }}", axis(64));
    assert!(codes(&ok).is_empty(), "{:?}", codes(&ok));
    let long = format!("fn f(x : [{}]) {{ x }}", axis(65));
    assert_eq!(codes(&long), ["E0011"]);
}

// ----- cells -----------------------------------------------------------------------

#[test]
fn cells_split_at_markers() {
    let src = "# header comment\n\n# %% Load\nx = 1\n# %% Train the model\ny = 2\n";
    let cells = split_cells(src);
    assert_eq!(cells.len(), 2);
    assert_eq!(
        (cells[0].index, cells[0].title.as_str(), cells[0].start_line),
        (0, "Load", 2)
    );
    assert_eq!(text(src, cells[0].span), "# %% Load\nx = 1\n");
    assert_eq!(
        (cells[1].index, cells[1].title.as_str(), cells[1].start_line),
        (1, "Train the model", 4)
    );
    assert_eq!(text(src, cells[1].span), "# %% Train the model\ny = 2\n");
    // Code before the first marker is cell 0.
    let cells = split_cells("a = 1\n# %% B\nb = 2\n");
    assert_eq!(
        cells.iter().map(|c| c.title.as_str()).collect::<Vec<_>>(),
        ["", "B"]
    );
    // Without markers the file is one cell.
    let cells = split_cells("a = 1\n");
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].span, Span::new(0, 6));
}

#[test]
fn lexer_api() {
    let (tokens, diags) = lex("x = -1");
    assert!(diags.is_empty());
    let kinds: Vec<TokenKind> = tokens.into_iter().map(|t| t.kind).collect();
    assert_eq!(
        kinds,
        [
            TokenKind::Ident("x".into()),
            TokenKind::Eq,
            TokenKind::Number(-1.0),
            TokenKind::Eof
        ]
    );
}
