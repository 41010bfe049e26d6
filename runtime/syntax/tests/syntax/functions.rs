//! Function definitions: `fn name(params) [-> shape] { body }` (docs/language.md,
//! "Functions"): the tree they produce, their spans, and their syntax errors.

use mlpl_diag::Diagnostic;
use mlpl_syntax::token::TokenKind;
use mlpl_syntax::*;

fn codes(src: &str) -> Vec<&'static str> {
    parse(src).diagnostics.iter().map(|d| d.code).collect()
}

fn the_fn(src: &str) -> FnDef {
    let p = parse(src);
    assert!(p.diagnostics.is_empty(), "{src:?}: {:#?}", p.diagnostics);
    match &p.program.stmts[0].kind {
        StmtKind::Fn(f) => (**f).clone(),
        other => panic!("not a definition: {other:?}"),
    }
}

fn text(src: &str, d: &Diagnostic) -> String {
    let s = d.primary.as_ref().unwrap().span;
    src[s.start..s.end].to_string()
}

#[test]
fn a_definition_with_named_shapes() {
    let src = "fn attend(x : [batch, T, d], w : [d, d]) -> [batch, T, d] {\n  s = matmul(x, w)\n  softmax(s, -1)\n}\n";
    let f = the_fn(src);
    assert_eq!(f.name.name, "attend");
    assert_eq!(f.params.len(), 2);
    assert_eq!(f.params[0].name.name, "x");
    let x = f.params[0].shape.as_ref().unwrap();
    assert_eq!(x.text(), "[batch, T, d]");
    assert_eq!(&src[x.span.start..x.span.end], "[batch, T, d]");
    assert_eq!(
        &src[f.params[1].span.start..f.params[1].span.end],
        "w : [d, d]"
    );
    assert_eq!(f.ret.as_ref().unwrap().text(), "[batch, T, d]");
    assert_eq!(f.body.stmts.len(), 2);
    assert_eq!(
        &src[f.sig_span.start..f.sig_span.end],
        "fn attend(x : [batch, T, d], w : [d, d]) -> [batch, T, d]"
    );
    assert_eq!(
        f.signature(),
        "fn attend(x : [batch, T, d], w : [d, d]) -> [batch, T, d]"
    );
}

#[test]
fn annotations_are_optional_and_dims_may_use_arithmetic() {
    let f = the_fn("fn f(a, b : [n, 2 * d, d / heads, (d + 1) - 1, _, 3]) { a }");
    assert!(f.params[0].shape.is_none());
    assert!(f.ret.is_none());
    let dims = &f.params[1].shape.as_ref().unwrap().dims;
    assert_eq!(dims.len(), 6);
    assert_eq!(dims[0].kind, DimSigKind::Name("n".into()));
    assert_eq!(dims[1].text(), "2 * d");
    assert_eq!(dims[2].text(), "d / heads");
    assert_eq!(dims[3].text(), "(d + 1) - 1");
    assert_eq!(dims[4].kind, DimSigKind::Any);
    assert_eq!(dims[5].kind, DimSigKind::Size(3));
    assert_eq!(dims[2].names(), vec!["d", "heads"]);
    let env = |n: &str| match n {
        "d" => Some(8),
        "heads" => Some(2),
        _ => None,
    };
    assert_eq!(dims[1].eval(&env), Some(16));
    assert_eq!(dims[2].eval(&env), Some(4));
    assert_eq!(dims[3].eval(&env), Some(8));
    assert_eq!(dims[0].eval(&env), None);
    // Division must be exact.
    assert_eq!(
        dims[2].eval(&|n: &str| if n == "d" { Some(7) } else { Some(2) }),
        None
    );
}

#[test]
fn empty_parameters_trailing_commas_and_a_multiline_list() {
    let f = the_fn("fn zero() { 0 }");
    assert!(f.params.is_empty());
    let f = the_fn("fn g(\n  x : [a,],\n  y,\n) -> [a] {\n  x + y\n}");
    assert_eq!(f.params.len(), 2);
    assert_eq!(f.params[0].shape.as_ref().unwrap().dims.len(), 1);
}

#[test]
fn fn_and_arrow_are_tokens() {
    let (toks, _) = lexer::lex("fn f() -> [] {}");
    assert_eq!(toks[0].kind, TokenKind::Fn);
    assert!(toks.iter().any(|t| t.kind == TokenKind::Arrow));
    // `x - 1` and `x -1` are unchanged.
    let (toks, _) = lexer::lex("x->y");
    assert_eq!(toks[1].kind, TokenKind::Arrow);
    assert_eq!(codes("y = x - 1"), Vec::<&str>::new());
}

#[test]
fn fn_is_a_reserved_keyword() {
    assert_eq!(codes("fn = 3"), ["E0009"]);
    assert_eq!(codes("fn repeat(x) { x }"), ["E0009"]);
    assert_eq!(codes("fn f(in) { 1 }"), ["E0009"]);
}

#[test]
fn malformed_signatures_are_e0011_at_the_mistake() {
    let src = "fn f(x : [a, \"b\"]) { x }";
    let p = parse(src);
    assert_eq!(codes(src), ["E0011"]);
    assert_eq!(text(src, &p.diagnostics[0]), "\"b\"");
    assert!(matches!(p.program.stmts[0].kind, StmtKind::Error));

    let src = "fn f(x : [a, g(b)]) { x }";
    assert_eq!(codes(src), ["E0011"]);
    assert_eq!(text(src, &parse(src).diagnostics[0]), "g(b)");

    let src = "fn f(x : [-1]) { x }";
    assert_eq!(codes(src), ["E0011"]);

    let src = "fn f(x : a) { x }";
    assert_eq!(codes(src), ["E0011"]);

    let src = "fn f(x) -> y { x }";
    assert_eq!(codes(src), ["E0011"]);
    assert_eq!(text(src, &parse(src).diagnostics[0]), "y");

    let src = "fn f(x, x) { x }";
    assert_eq!(codes(src), ["E0011"]);

    let src = "fn f(1) { 1 }";
    assert_eq!(codes(src), ["E0011"]);
}

#[test]
fn missing_pieces_are_e0006() {
    assert_eq!(codes("fn (x) { x }"), ["E0006"]);
    assert_eq!(codes("fn f { x }"), ["E0006"]);
    assert_eq!(codes("fn f(x) x"), ["E0006"]);
    assert_eq!(codes("fn f(x y) { x }"), ["E0006"]);
    assert_eq!(codes("fn f(x,, y) { x }"), ["E0012"]);
}

#[test]
fn a_definition_inside_a_block_is_reported_and_dropped() {
    let src = "repeat 2 {\n  fn f(x) { x }\n}\ny = 1";
    let p = parse(src);
    assert_eq!(codes(src), ["E0006"]);
    assert!(p.diagnostics[0].message.contains("inside a block"));
    assert_eq!(text(src, &p.diagnostics[0]), "fn f(x)");
    // The statement after the loop still parses.
    assert!(matches!(p.program.stmts[1].kind, StmtKind::Assign { .. }));
    assert_eq!(codes("fn f(x) {\n  fn g(y) { y }\n  x\n}"), ["E0006"]);
}

#[test]
fn recovery_keeps_the_following_statements() {
    let src = "fn f(x : [a, ) { x }\ny = 2\nfn g(z) { z }";
    let p = parse(src);
    assert!(p.has_errors());
    let last = p.program.stmts.last().unwrap();
    assert!(
        matches!(last.kind, StmtKind::Fn(_)),
        "{:?}",
        p.program.stmts
    );
    // An unclosed parameter list stops at the next statement.
    let src = "fn f(x\ny = 2";
    let p = parse(src);
    assert!(p.has_errors());
    assert!(p
        .program
        .stmts
        .iter()
        .any(|s| matches!(&s.kind, StmtKind::Assign { name, .. } if name.name == "y")));
}

#[test]
fn two_definitions_on_one_line_are_w0001() {
    assert_eq!(codes("fn f(x) { x } fn g(y) { y }"), ["W0001"]);
    assert_eq!(codes("fn f(x) { x }; fn g(y) { y }"), Vec::<&str>::new());
}

#[test]
fn walk_visits_function_bodies() {
    let p = parse("fn f(x : [n]) -> [n] { y = relu(x); y * 2 }");
    let mut seen = Vec::new();
    for s in &p.program.stmts {
        walk::each_stmt_expr(s, &mut |e| {
            if let ExprKind::Var(v) = &e.kind {
                seen.push(v.clone());
            }
        });
        assert!(walk::fn_def(s).is_some());
        assert_eq!(walk::stmt_body(s).unwrap().stmts.len(), 2);
    }
    // The signature's `n` is not a variable read.
    assert_eq!(seen, ["x", "y"]);
}
