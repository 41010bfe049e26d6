use super::*;
use mlpl_diag::code;

fn ok(src: &str) -> Program {
    let p = parse(src);
    assert!(
        p.diagnostics.is_empty(),
        "unexpected diagnostics for {src:?}: {:#?}",
        p.diagnostics
    );
    p.program
}

fn codes(src: &str) -> Vec<&'static str> {
    parse(src).diagnostics.iter().map(|d| d.code).collect()
}

fn expr(src: &str) -> Expr {
    let prog = ok(src);
    assert_eq!(prog.stmts.len(), 1, "{src}");
    match &prog.stmts[0].kind {
        StmtKind::Expr(e) => e.clone(),
        StmtKind::Assign { value, .. } => value.clone(),
        other => panic!("{other:?}"),
    }
}

/// A compact rendering of an expression tree.
fn sexp(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Number(v) => format!("{v}"),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Var(n) => n.clone(),
        ExprKind::Call { name, args } => {
            format!(
                "{}({})",
                name.name,
                args.iter().map(sexp).collect::<Vec<_>>().join(", ")
            )
        }
        ExprKind::List(items) => format!(
            "[{}]",
            items.iter().map(sexp).collect::<Vec<_>>().join(", ")
        ),
        ExprKind::Neg(e) => format!("(neg {})", sexp(e)),
        // Rendered left-nested, as a chain associates.
        ExprKind::Chain { first, links } => links.iter().fold(sexp(first), |acc, l| {
            format!("({acc} {} {})", l.op.symbol(), sexp(&l.rhs))
        }),
        ExprKind::Paren(e) => format!("{{{}}}", sexp(e)),
        ExprKind::Ctor { kind, dims } => {
            format!(
                "{kind:?}[{}]",
                dims.iter().map(sexp).collect::<Vec<_>>().join(", ")
            )
        }
        ExprKind::Device { target, body } => {
            format!("device({}){{{}}}", sexp(target), body.stmts.len())
        }
        ExprKind::Error => "ERR".into(),
    }
}

fn s(src: &str) -> String {
    sexp(&expr(src))
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(s("1 + 2 * 3"), "(1 + (2 * 3))");
    assert_eq!(s("1 - 2 - 3"), "((1 - 2) - 3)");
    assert_eq!(s("8 / 4 / 2"), "((8 / 4) / 2)");
    assert_eq!(s("- 2 * 3"), "((neg 2) * 3)");
    assert_eq!(s("-2 * 3"), "(-2 * 3)");
    assert_eq!(s("-x * 3"), "((neg x) * 3)");
    assert_eq!(s("- - x"), "(neg (neg x))");
    assert_eq!(s("(1 + 2) * 3"), "({(1 + 2)} * 3)");
    assert_eq!(s("a * -b"), "(a * (neg b))");
}

#[test]
fn primaries() {
    assert_eq!(s("f(1, \"a\", x)"), "f(1, \"a\", x)");
    assert_eq!(s("f (x)"), "f(x)");
    assert_eq!(s("f()"), "f()");
    assert_eq!(s("[1, [2, 3], []]"), "[1, [2, 3], []]");
    assert_eq!(s("param[2, 3]"), "Param[2, 3]");
    assert_eq!(s("tensor[]"), "Tensor[]");
    assert_eq!(s("param"), "param");
    assert_eq!(s("param(3)"), "param(3)");
    assert_eq!(
        s("device(\"cuda\") { matmul(a, b) }"),
        "device(\"cuda\"){1}"
    );
}

#[test]
fn negative_literal_table() {
    let p = parse("x -1");
    assert_eq!(codes("x -1"), [code::W0002]);
    assert!(matches!(&p.program.stmts[0].kind, StmtKind::Expr(e) if sexp(e) == "(x - 1)"));
    assert_eq!(s("f(-1)"), "f(-1)");
    assert_eq!(s("[1, -2]"), "[1, -2]");
    assert_eq!(s("- 2"), "(neg 2)");
    let p = ok("repeat -1 { }");
    match &p.stmts[0].kind {
        StmtKind::Repeat { count, .. } => assert_eq!(count.kind, ExprKind::Number(-1.0)),
        other => panic!("{other:?}"),
    }
    let p = ok("a = 3\n-1");
    assert_eq!(p.stmts.len(), 2);
    assert!(
        matches!(p.stmts[1].kind, StmtKind::Expr(Expr { kind: ExprKind::Number(v), .. }) if v == -1.0)
    );
}

#[test]
fn w0002_list_subtraction() {
    let p = parse("[1 -2]");
    assert_eq!(p.diagnostics.len(), 1);
    let d = &p.diagnostics[0];
    assert_eq!(d.code, code::W0002);
    assert_eq!(d.primary.as_ref().unwrap().span, Span::new(3, 4));
    let help = d.help.as_deref().unwrap();
    assert!(
        help.contains("`1 - 2`") && help.contains("`1, -2`"),
        "{help}"
    );
    match &p.program.stmts[0].kind {
        StmtKind::Expr(e) => assert_eq!(sexp(e), "[(1 - 2)]"),
        other => panic!("{other:?}"),
    }
    assert_eq!(codes("x -1"), vec![code::W0002]);
    assert!(codes("x - 1").is_empty());
    assert!(codes("x-1").is_empty());
    assert!(codes("[1 - 2]").is_empty());
    assert!(codes("[1, -2]").is_empty());
    assert!(codes("x -y").is_empty());
}

#[test]
fn statements() {
    let p = ok("x = 1; y : [a, b,] = param[2, 3]\nrepeat 3 { x = x + 1 }\ntrain 10 { loss }\nfor r in rows { r }\nexperiment \"e\" + name { }");
    let kinds: Vec<&str> = p
        .stmts
        .iter()
        .map(|s| match &s.kind {
            StmtKind::Assign { .. } => "assign",
            StmtKind::Annotated { .. } => "annotated",
            StmtKind::Repeat { .. } => "repeat",
            StmtKind::Train { .. } => "train",
            StmtKind::For { .. } => "for",
            StmtKind::Experiment { .. } => "experiment",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "assign",
            "annotated",
            "repeat",
            "train",
            "for",
            "experiment"
        ]
    );
    match &p.stmts[1].kind {
        StmtKind::Annotated { name, axes, value } => {
            assert_eq!(name.name, "y");
            assert_eq!(
                axes.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
                ["a", "b"]
            );
            assert_eq!(sexp(value), "Param[2, 3]");
        }
        other => panic!("{other:?}"),
    }
    let p = ok("s : [] = 5");
    assert!(matches!(&p.stmts[0].kind, StmtKind::Annotated { axes, .. } if axes.is_empty()));
}

#[test]
fn spans() {
    let src = "x = f(1, 2)\n";
    let p = ok(src);
    assert_eq!(p.stmts[0].span, Span::new(0, 11));
    match &p.stmts[0].kind {
        StmtKind::Assign { name, value } => {
            assert_eq!(name.span, Span::new(0, 1));
            assert_eq!(value.span, Span::new(4, 11));
        }
        other => panic!("{other:?}"),
    }
    let p = ok("repeat 2 {\n a\n}");
    match &p.stmts[0].kind {
        StmtKind::Repeat { body, .. } => assert_eq!(body.span, Span::new(9, 15)),
        other => panic!("{other:?}"),
    }
    let e = expr("a + b * c");
    match &e.kind {
        ExprKind::Chain { links, .. } => assert_eq!(links[0].op_span, Span::new(2, 3)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn newlines_inside_brackets() {
    let src = "model = chain(\n    embed(V, d, 0),\n    residual(chain(rms_norm(d), causal_attention(d, 4, 1))),\n    linear(d, V, 2),          # trailing comma allowed\n)\n";
    let p = ok(src);
    assert_eq!(p.stmts.len(), 1);
    assert_eq!(s("[1,\n 2\n ,3]"), "[1, 2, 3]");
    // A block inside a call argument has statement separators again.
    let p = ok("x = f(device(\"cpu\") {\n a = 1\n a\n})");
    match &p.stmts[0].kind {
        StmtKind::Assign { value, .. } => match &value.kind {
            ExprKind::Call { args, .. } => match &args[0].kind {
                ExprKind::Device { body, .. } => assert_eq!(body.stmts.len(), 2),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn juxtaposition_table() {
    let cases: &[(&str, usize, &str)] = &[
        ("z = 2x", 2, "`2 * x`"),
        ("x = 1 y = 2", 2, "`x = 1; y = 2`"),
        ("x [1, 2]", 2, "`x; [1, 2]`"),
        ("train 3 { loss } loss", 2, "put `loss` on its own line"),
        ("lr = 2e", 2, "`2 * e`"),
        ("a = 1_", 2, "`_`"),
    ];
    for (src, n, needle) in cases {
        let p = parse(src);
        assert_eq!(p.program.stmts.len(), *n, "{src}");
        assert_eq!(p.diagnostics.len(), 1, "{src}: {:#?}", p.diagnostics);
        let d = &p.diagnostics[0];
        assert_eq!(d.code, code::W0001, "{src}");
        let help = d.help.clone().unwrap_or_default();
        assert!(
            help.contains(needle),
            "{src}: help {help:?} should contain {needle}"
        );
    }
    let p = parse("z = 2x");
    assert_eq!(
        p.diagnostics[0].primary.as_ref().unwrap().span,
        Span::new(4, 6)
    );
    assert!(
        matches!(&p.program.stmts[0].kind, StmtKind::Assign { value, .. } if value.kind == ExprKind::Number(2.0))
    );
    assert!(
        matches!(&p.program.stmts[1].kind, StmtKind::Expr(e) if e.kind == ExprKind::Var("x".into()))
    );
    assert!(codes("x = 1; y = 2").is_empty());
    assert!(codes("x = 1\ny = 2").is_empty());
}

#[test]
fn error_codes() {
    let cases: &[(&str, &[&str])] = &[
        ("x = (1", &[code::E0007]),
        ("x = 1)", &[code::E0008]),
        ("train = 1", &[code::E0009]),
        ("for repeat in x { }", &[code::E0009]),
        ("x = repeat 3 { }", &[code::E0010]),
        ("a = b = 1", &[code::E0010]),
        ("f(x = 1)", &[code::E0010]),
        ("x : [a, 1] = 2", &[code::E0011]),
        ("x : [a] 2", &[code::E0011]),
        ("f(a,,b)", &[code::E0012]),
        ("[,]", &[code::E0012]),
        ("f(,)", &[code::E0012]),
        ("x = ", &[code::E0006]),
        ("f(1 2)", &[code::E0006]),
    ];
    for (src, want) in cases {
        assert_eq!(codes(src), *want, "{src}: {:#?}", parse(src).diagnostics);
    }
}

#[test]
fn unclosed_paren_is_one_error() {
    let p = parse("x = f(1, 2\ny = 3\nz = g(y)\n");
    assert_eq!(codes("x = f(1, 2\ny = 3\nz = g(y)\n"), vec![code::E0007]);
    assert_eq!(
        p.diagnostics[0].primary.as_ref().unwrap().span,
        Span::new(5, 6)
    );
    assert_eq!(p.program.stmts.len(), 3);
}
