//! Shape rules of the axis-name builtins (LANGUAGE §8, §10.11), next to their
//! runtime implementations in `axes.rs`. `label` records where the names were
//! attached, so later shape errors can point there.

use super::site::CallSite;
use crate::check::abstract_value::{AbsArray, AbsValue, AxisName, Dim};
use crate::check::ctx::ShapeCtx;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

/// Attaches the names of argument `i` to `x` (E0209, W0201), as `ops::label`.
fn labelled(c: &mut ShapeCtx, x: AbsArray, i: usize) -> Result<AbsArray, Diagnostic> {
    let Some(names) = c.names(i).map(|n| n.to_vec()) else {
        // Names not known: the rank is kept, the names are not.
        let mut out = x;
        out.names = vec![AxisName::Unknown; out.rank().unwrap_or(0)];
        out.origin = Some(c.span);
        return Ok(out);
    };
    let is_list = c.args[i].is_list;
    let names = match x.rank() {
        Some(1) if names.is_empty() && !is_list => vec![None],
        None if names.is_empty() && !is_list => {
            // `""` names a scalar or an unnamed vector: either way, no names.
            let mut out = x;
            out.names = Vec::new();
            return Ok(AbsArray {
                constant: None,
                ..out
            });
        }
        _ => names,
    };
    let span = c.arg_span(i);
    let mut x = x;
    match x.rank() {
        Some(r) if r != names.len() => {
            return Err(crate::errors::label_count_error(
                span,
                names.len(),
                &x.shape_text(),
                r,
            ));
        }
        Some(_) => {}
        None => {
            x.dims = Some(vec![Dim::Unknown; names.len()]);
            x.constant = None;
        }
    }
    if let Some(n) = crate::errors::first_duplicate(&names) {
        c.warnings
            .push(crate::errors::duplicate_name_warning(span, n));
    }
    let mut out = x.with_names(Some(names));
    out.origin = Some(c.span);
    Ok(out)
}

/// `label(x, names)` and `relabel(x, names)`.
pub fn label(c: &mut ShapeCtx) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::any_array());
    };
    Ok(AbsValue::Array(labelled(c, x, 1)?))
}

/// `reshape_labeled(x, dims, names)`: `reshape`, then `label`.
pub fn reshape_labeled(c: &mut ShapeCtx) -> Rule {
    let shaped = super::construct_shapes::reshaped(c)?;
    Ok(AbsValue::Array(labelled(c, shaped, 2)?))
}

/// `labels(x)`: the names as one string (LANGUAGE §8.2), when known.
pub fn labels(c: &mut ShapeCtx) -> Rule {
    let Some(x) = c.array(0)? else {
        return Ok(AbsValue::Str(None));
    };
    let (Some(rank), Some(names)) = (x.rank(), x.known_names()) else {
        return Ok(AbsValue::Str(None));
    };
    let s = if names.iter().all(|n| n.is_none()) {
        if rank <= 1 {
            String::new()
        } else {
            vec![""; rank].join(",")
        }
    } else {
        names
            .iter()
            .map(|s| s.as_deref().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(",")
    };
    Ok(AbsValue::Str(Some(s)))
}
