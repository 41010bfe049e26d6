//! The registry's static shape rules: every builtin has one, and no rule panics
//! whatever abstract arguments it is given.

use mlpl_diag::Span;
use mlpl_lang::builtins;
use mlpl_lang::check::abstract_value::{AbsArray, AbsValue, Dim};
use mlpl_lang::check::ctx::{RuleArg, ShapeCtx, Symbols};
use mlpl_syntax::{Expr, ExprKind};

#[test]
fn every_builtin_has_a_shape_rule() {
    let missing: Vec<&str> = builtins::all()
        .filter(|b| builtins::shape_rule(b).is_none())
        .map(|b| b.name)
        .collect();
    assert!(
        missing.is_empty(),
        "builtins without a shape rule: {missing:?}"
    );
}

/// A sample of abstract values of every kind and many shapes.
fn samples() -> Vec<AbsValue> {
    let sym = |s: &str| Dim::Symbol(s.to_string());
    vec![
        AbsValue::Unknown,
        AbsValue::scalar(0.0),
        AbsValue::scalar(-1.0),
        AbsValue::scalar(2.5),
        AbsValue::scalar(3.0),
        AbsValue::scalar(1e300),
        AbsValue::scalar(f64::NAN),
        AbsValue::any_scalar(),
        AbsValue::any_array(),
        AbsValue::Array(AbsArray::constant(&[3], vec![0.0, 1.0, 2.0])),
        AbsValue::Array(AbsArray::constant(&[2], vec![-1.0, -1.0])),
        AbsValue::Array(AbsArray::constant(&[2], vec![1e300, 4.0])),
        AbsValue::Array(AbsArray::of_shape(&[0])),
        AbsValue::Array(AbsArray::of_shape(&[0, 3])),
        AbsValue::Array(AbsArray::of_shape(&[4, 3])),
        AbsValue::Array(AbsArray::of_shape(&[2, 3, 4])),
        AbsValue::Array(AbsArray::of_shape(&[2, 3, 4, 5])),
        AbsValue::Array(AbsArray::of_dims(vec![sym("N"), Dim::Known(3)])),
        AbsValue::Array(AbsArray::of_dims(vec![Dim::Unknown, Dim::Unknown])),
        AbsValue::Array(AbsArray::of_shape(&[4, 3]).with_names(Some(vec![Some("b".into()), None]))),
        AbsValue::Str(None),
        AbsValue::Str(Some(String::new())),
        AbsValue::Str(Some("b".into())),
        AbsValue::Str(Some("cuda".into())),
        AbsValue::Str(Some("x.csv".into())),
        AbsValue::Str(Some("/etc/x".into())),
        AbsValue::Str(Some("scatter".into())),
        AbsValue::Str(Some("tiny_corpus".into())),
        AbsValue::Model(None),
        AbsValue::Tokenizer(None),
        AbsValue::Tokenizer(Some(std::sync::Arc::new(
            mlpl_lang::data::tokenizer::Tokenizer::Bytes,
        ))),
    ]
}

#[test]
fn no_rule_panics_on_any_arguments() {
    let expr = Expr {
        kind: ExprKind::Error,
        span: Span::new(0, 1),
    };
    let values = samples();
    let mut symbols = Symbols::default();
    let mut calls = 0usize;
    for b in builtins::all() {
        let Some(rule) = builtins::shape_rule(b) else {
            continue;
        };
        let lo = b.min_args();
        let hi = b.max_args().min(lo + 2).min(6);
        for n in lo..=hi {
            // Every value in every position, the others cycling through the sample.
            for pos in 0..n.max(1) {
                for (k, v) in values.iter().enumerate() {
                    let args: Vec<RuleArg> = (0..n)
                        .map(|i| {
                            let value = if i == pos {
                                v.clone()
                            } else {
                                values[(k + 3 * i + 1) % values.len()].clone()
                            };
                            RuleArg {
                                value,
                                names: (i == pos).then(|| vec![Some("b".into()), None]),
                                is_list: k % 2 == 0,
                                span: Span::new(i, i + 1),
                                expr: &expr,
                            }
                        })
                        .collect();
                    let mut ctx = ShapeCtx::new(
                        b,
                        Span::new(0, 9),
                        Span::new(0, 2),
                        args,
                        &mut symbols,
                        k % 3 == 0,
                    );
                    let _ = rule(&mut ctx);
                    calls += 1;
                }
            }
        }
    }
    assert!(calls > 5000, "only {calls} rule calls");
}
