//! Shared by the checker's integration tests: the comparison of the checker's
//! abstract values with the values the interpreter computes.

#![allow(dead_code)]

use std::path::Path;

use mlpl_lang::check::{assignment_values, bindings_after_statements, check_source, AbsValue};
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_lang::value::Value;
use mlpl_syntax::{parse, Program};

/// Compares one static value with the runtime value; `Err` describes a mismatch.
pub fn agree(stat: &AbsValue, dynamic: &Value) -> Result<bool, String> {
    match (stat, dynamic) {
        (AbsValue::Unknown, _) => Ok(false),
        (AbsValue::Array(a), Value::Array(r)) => {
            let Some(shape) = a.known_shape() else {
                if let Some(rank) = a.rank() {
                    if rank != r.rank() {
                        return Err(format!("rank {rank} vs runtime {:?}", r.shape()));
                    }
                    for (d, &n) in a.dims.as_ref().unwrap().iter().zip(r.shape()) {
                        if let Some(k) = d.known() {
                            if k != n {
                                return Err(format!(
                                    "{} vs runtime {:?}",
                                    a.shape_text(),
                                    r.shape()
                                ));
                            }
                        }
                    }
                }
                return Ok(false);
            };
            if shape != r.shape() {
                return Err(format!(
                    "shape {} vs runtime {:?}",
                    a.shape_text(),
                    r.shape()
                ));
            }
            let runtime_names: Vec<Option<String>> = match r.names() {
                Some(n) => n.to_vec(),
                None => vec![None; r.rank()],
            };
            for (axis, n) in a.names.iter().enumerate() {
                use mlpl_lang::check::AxisName;
                let rt = &runtime_names[axis];
                let ok = match n {
                    AxisName::Named(s) => rt.as_deref() == Some(&**s),
                    AxisName::Unnamed => rt.is_none(),
                    AxisName::Unknown => true,
                };
                if !ok {
                    return Err(format!(
                        "names {} vs runtime {:?}",
                        a.shape_text(),
                        runtime_names
                    ));
                }
            }
            if let Some(c) = &a.constant {
                let v = r.to_f64();
                let close = c.len() == v.len()
                    && c.iter().zip(&v).all(|(x, y)| {
                        x == y
                            || (x - y).abs() <= 1e-5 * (1.0 + y.abs())
                            || (x.is_nan() && y.is_nan())
                    });
                if !close {
                    return Err(format!("constant {c:?} vs runtime {v:?}"));
                }
            }
            Ok(true)
        }
        (AbsValue::Str(s), Value::Str(r)) => match s {
            Some(s) if **s != **r => Err(format!("string {s:?} vs runtime {r:?}")),
            _ => Ok(true),
        },
        (AbsValue::Model(m), Value::Model(r)) => {
            if let Some(m) = m {
                let (sc, rc) = (
                    m.signature().param_count,
                    mlpl_lang::nn::estimate::param_count(&r.0),
                );
                if sc != rc {
                    return Err(format!("model with {sc} parameters vs runtime {rc}"));
                }
                if m.0.describe() != r.0.describe() {
                    return Err(format!(
                        "model {} vs runtime {}",
                        m.0.describe(),
                        r.0.describe()
                    ));
                }
            }
            Ok(true)
        }
        (AbsValue::Tokenizer(_), Value::Tokenizer(_)) => Ok(true),
        (s, d) => Err(format!("kind {s:?} vs runtime {}", d.kind_name())),
    }
}

/// Runs `program` statement by statement and checks every top-level assignment
/// and, after each statement, every variable the checker knows; returns how many
/// assignment values were fully known and agreed.
pub fn check_agreement(name: &str, src: &str, data_dir: Option<&Path>) -> usize {
    let checked = check_source(src);
    assert!(
        !checked.diagnostics.iter().any(|d| d.is_error()),
        "{name} has check errors: {:?}",
        checked.diagnostics
    );
    let program = parse(src).program;
    let statics = assignment_values(&program);
    let envs = bindings_after_statements(&program);
    assert_eq!(envs.len(), program.stmts.len());
    let mut ws = Workspace::new();
    ws.data_dir = data_dir.map(Path::to_path_buf);
    ws.exp_dir = None;
    let mut it = Interp::new(ws);
    let mut known = 0;
    let mut next = statics.iter().peekable();
    for (i, stmt) in program.stmts.iter().enumerate() {
        let one = Program {
            stmts: vec![stmt.clone()],
            span: program.span,
        };
        if let Err(d) = it.run(&one) {
            panic!(
                "{name}: statement {i} failed at run time: {} {}",
                d.code, d.message
            );
        }
        while let Some(s) = next.next_if(|s| s.stmt == i) {
            let value = it.ws.get(&s.name).expect("assigned").clone();
            match agree(&s.value, &value) {
                Ok(true) => known += 1,
                Ok(false) => {}
                Err(e) => panic!("{name}: `{}` (statement {i}): {e}", s.name),
            }
        }
        for (var, stat) in &envs[i] {
            match it.ws.get(var) {
                Some(value) => {
                    if let Err(e) = agree(stat, value) {
                        panic!("{name}: `{var}` after statement {i}: {e}");
                    }
                }
                None => assert!(
                    *stat == AbsValue::Unknown,
                    "{name}: `{var}` is not bound after statement {i} but the checker says {stat:?}"
                ),
            }
        }
    }
    known
}
