//! Broadcasting and named-axis unification over abstract arrays (LANGUAGE §9):
//! the rules of `eval::ops::broadcast` where sizes may be symbolic or unknown and
//! names unknown. An error is reported only when it is certain, with the same
//! diagnostic the interpreter gives, plus secondary labels at the places where
//! the operands got their axis names. Also constant folding of element-wise
//! operations, so small constants stay exact.

use mlpl_devices::{BinaryOp, UnaryOp};

use super::abstract_value::{AbsArray, AxisName, Dim, MAX_CONST};
use mlpl_diag::{Diagnostic, Span};
use mlpl_syntax::Expr;

/// One operand of a binary operation: its abstract value and its expression.
#[derive(Clone, Copy)]
pub struct Operand<'a> {
    /// What is known about it.
    pub array: &'a AbsArray,
    /// Where it is written.
    pub expr: &'a Expr,
}

/// The outcome of abstract broadcasting.
pub struct Broadcast {
    /// The result (shape, names, placement; no constant).
    pub array: AbsArray,
    /// Whether the operation provably succeeds (sizes and names all agree), so
    /// that later checks of the same operation (placement) can be reported.
    pub certain: bool,
}

/// Adds a secondary label at the place where an operand got its axis names, when
/// that place is outside the operand's own expression.
pub fn origin_label(d: Diagnostic, op: Operand<'_>, role: &str) -> Diagnostic {
    match op.array.origin {
        Some(o) if op.array.has_named_axis() && !inside(o, op.expr.span) => {
            d.with_label(o, format!("the {role} got its axis names here"))
        }
        _ => d,
    }
}

fn inside(inner: Span, outer: Span) -> bool {
    inner.start >= outer.start && inner.end <= outer.end
}

/// Broadcasts two operands (LANGUAGE §9.1–9.2): E0201 when two aligned known
/// sizes differ and neither is 1; E0202 when all sizes provably broadcast and two
/// aligned names differ. `name` is the operator or builtin as written.
pub fn broadcast(name: &str, l: Operand<'_>, r: Operand<'_>) -> Result<Broadcast, Diagnostic> {
    let placed = l.array.placed.or(r.array.placed);
    let (Some(da), Some(db)) = (&l.array.dims, &r.array.dims) else {
        let mut array = AbsArray::unknown();
        array.placed = placed;
        return Ok(Broadcast {
            array,
            certain: false,
        });
    };
    let rank = da.len().max(db.len());
    let mut dims = vec![Dim::Unknown; rank];
    let mut names = vec![AxisName::Unnamed; rank];
    let mut size_conflict = None;
    let mut name_conflict = None;
    let mut sizes_certain = true;
    for k in 1..=rank {
        let a = (k <= da.len()).then(|| &da[da.len() - k]);
        let b = (k <= db.len()).then(|| &db[db.len() - k]);
        let na = (k <= da.len()).then(|| l.array.name_of(da.len() - k));
        let nb = (k <= db.len()).then(|| r.array.name_of(db.len() - k));
        dims[rank - k] = match (a, b) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) => match (x, y) {
                (Dim::Known(p), Dim::Known(q)) if p == q || *q == 1 => Dim::Known(*p),
                (Dim::Known(1), Dim::Known(q)) => Dim::Known(*q),
                (Dim::Known(p), Dim::Known(q)) => {
                    size_conflict.get_or_insert((k, *p, *q));
                    Dim::Known(*p)
                }
                (Dim::Known(1), other) | (other, Dim::Known(1)) => other.clone(),
                (Dim::Known(p), _) | (_, Dim::Known(p)) => {
                    sizes_certain = false;
                    Dim::Known(*p)
                }
                (Dim::Symbol(s), Dim::Symbol(t)) if s == t => Dim::Symbol(s.clone()),
                _ => {
                    sizes_certain = false;
                    Dim::Unknown
                }
            },
            (None, None) => Dim::Unknown,
        };
        names[rank - k] = match (na, nb) {
            (Some(AxisName::Named(x)), Some(AxisName::Named(y))) if x != y => {
                name_conflict.get_or_insert((k, x.clone(), y.clone()));
                AxisName::Named(x.clone())
            }
            (Some(AxisName::Named(x)), _) | (_, Some(AxisName::Named(x))) => {
                AxisName::Named(x.clone())
            }
            (Some(AxisName::Unknown), _) | (_, Some(AxisName::Unknown)) => AxisName::Unknown,
            _ => AxisName::Unnamed,
        };
    }
    let left = || (l.expr.span, l.array.shape_text());
    let right = || (r.expr.span, r.array.shape_text());
    if let Some((k, x, y)) = size_conflict {
        let d = crate::errors::broadcast_size_error(name, &left(), &right(), k, x, y);
        return Err(origin_label(
            origin_label(d, l, "left operand"),
            r,
            "right operand",
        ));
    }
    let names_certain = l.array.names.iter().all(|n| *n != AxisName::Unknown)
        && r.array.names.iter().all(|n| *n != AxisName::Unknown);
    if let Some((k, x, y)) = name_conflict {
        if !sizes_certain {
            // The run fails, but possibly with E0201 first: report nothing.
            return Ok(Broadcast {
                array: AbsArray::of_dims(dims).with_names(None),
                certain: false,
            });
        }
        let plain = |a: &AbsArray| -> Vec<Option<String>> {
            a.names
                .iter()
                .map(|n| n.named().map(str::to_string))
                .collect()
        };
        let (ln, rn) = (plain(l.array), plain(r.array));
        let lr: Vec<Option<&str>> = ln.iter().map(|n| n.as_deref()).collect();
        let rr: Vec<Option<&str>> = rn.iter().map(|n| n.as_deref()).collect();
        let help = crate::errors::relabel_help(r.expr, &lr, &rr);
        let d = crate::errors::broadcast_name_error(name, &left(), &right(), k, &x, &y, help);
        return Err(origin_label(
            origin_label(d, l, "left operand"),
            r,
            "right operand",
        ));
    }
    let origin = if l.array.has_named_axis() {
        l.array.origin
    } else {
        r.array.origin
    };
    Ok(Broadcast {
        array: AbsArray {
            dims: Some(dims),
            names,
            constant: None,
            origin,
            placed,
        },
        certain: sizes_certain && names_certain,
    })
}

/// E0501 when both operands are provably placed on different devices (checked by
/// the interpreter after the shapes, so only when `certain`).
pub fn placement(name: &str, l: Operand<'_>, r: Operand<'_>) -> Result<(), Diagnostic> {
    match (l.array.placed, r.array.placed) {
        (Some(a), Some(b)) if a != b => Err(crate::errors::device_mismatch_error(
            name,
            ("left operand", a, l.expr.span),
            ("right operand", b, r.expr.span),
        )),
        _ => Ok(()),
    }
}

/// The element-wise result of `op` on two constants of known shapes broadcast to
/// `shape` (row-major), rounded to float32 unless both are scalars (LANGUAGE §7.1).
pub fn fold_binary(op: BinaryOp, a: &AbsArray, b: &AbsArray, shape: &[usize]) -> Option<Vec<f64>> {
    let (ca, cb) = (a.constant.as_ref()?, b.constant.as_ref()?);
    let (sa, sb) = (a.known_shape()?, b.known_shape()?);
    let n: usize = shape.iter().product();
    if n > MAX_CONST {
        return None;
    }
    let exact = sa.is_empty() && sb.is_empty();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let x = ca[flat_index(&idx, &sa)];
        let y = cb[flat_index(&idx, &sb)];
        let (x, y) = if exact {
            (x, y)
        } else {
            (x as f32 as f64, y as f32 as f64)
        };
        let v = crate::value::scalar::binary_f64(op, x, y);
        out.push(if exact { v } else { v as f32 as f64 });
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Some(out)
}

/// The position in an operand of shape `s` (aligned at the end, size-1 axes
/// stretched) of the result index `idx`.
fn flat_index(idx: &[usize], s: &[usize]) -> usize {
    let off = idx.len() - s.len();
    let mut flat = 0;
    for (k, &size) in s.iter().enumerate() {
        let i = if size == 1 { 0 } else { idx[off + k] };
        flat = flat * size + i;
    }
    flat
}

/// The element-wise result of a unary op on a constant.
pub fn fold_unary(op: UnaryOp, a: &AbsArray) -> Option<Vec<f64>> {
    let c = a.constant.as_ref()?;
    let exact = a.rank() == Some(0);
    Some(
        c.iter()
            .map(|&x| {
                let v = crate::value::scalar::unary_f64(op, x);
                if exact {
                    v
                } else {
                    v as f32 as f64
                }
            })
            .collect(),
    )
}

/// Applies a binary operation to two abstract operands: broadcasting, placement,
/// and the folded constant.
pub fn binary(
    op: BinaryOp,
    name: &str,
    l: Operand<'_>,
    r: Operand<'_>,
) -> Result<AbsArray, Diagnostic> {
    let b = broadcast(name, l, r)?;
    if b.certain {
        placement(name, l, r)?;
    }
    let mut out = b.array;
    if let Some(shape) = out.known_shape() {
        let c = fold_binary(op, l.array, r.array, &shape);
        out = out.with_constant(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlpl_diag::code;
    use mlpl_syntax::ExprKind;

    fn e(start: usize) -> Expr {
        Expr {
            kind: ExprKind::Error,
            span: Span::new(start, start + 1),
        }
    }

    fn named(shape: &[usize], names: &[&str]) -> AbsArray {
        AbsArray::of_shape(shape).with_names(Some(
            names
                .iter()
                .map(|n| (!n.is_empty()).then(|| n.to_string()))
                .collect(),
        ))
    }

    #[test]
    fn broadcasting_follows_section_9() {
        let (el, er) = (e(0), e(4));
        let x = named(&[32, 10], &["batch", "feat"]);
        let ok = |b: &AbsArray| {
            broadcast(
                "+",
                Operand {
                    array: &x,
                    expr: &el,
                },
                Operand {
                    array: b,
                    expr: &er,
                },
            )
            .map(|r| r.array.shape_text())
        };
        assert_eq!(ok(&AbsArray::scalar(1.0)).unwrap(), "[batch=32, feat=10]");
        assert_eq!(
            ok(&AbsArray::of_shape(&[10])).unwrap(),
            "[batch=32, feat=10]"
        );
        assert_eq!(ok(&AbsArray::of_shape(&[3])).unwrap_err().code, code::E0201);
        assert_eq!(
            ok(&named(&[10], &["hidden"])).unwrap_err().code,
            code::E0202
        );
        assert_eq!(
            ok(&named(&[1, 10], &["sample", "feat"])).unwrap_err().code,
            code::E0202
        );
        // A symbolic or unknown size never errors.
        let n = AbsArray::of_dims(vec![Dim::Symbol("N".into())]);
        assert_eq!(ok(&n).unwrap(), "[batch=32, feat=10]");
        // A name conflict next to an unknown size is not reported (E0201 may win).
        let u = AbsArray::of_dims(vec![Dim::Unknown, Dim::Known(10)])
            .with_names(Some(vec![None, Some("hidden".into())]));
        assert!(ok(&u).is_ok());
    }

    #[test]
    fn folding_broadcasts_constants() {
        let a = AbsArray::constant(&[2, 1], vec![1.0, 2.0]);
        let b = AbsArray::constant(&[3], vec![10.0, 20.0, 30.0]);
        assert_eq!(
            fold_binary(BinaryOp::Add, &a, &b, &[2, 3]).unwrap(),
            vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]
        );
    }
}
