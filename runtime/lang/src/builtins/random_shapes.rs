//! Shape rules of the random builtins and synthetic data sets (LANGUAGE §10.6),
//! next to their runtime implementations in `random.rs`.

use crate::check::abstract_value::{AbsArray, AbsValue, Dim};
use crate::check::ctx::ShapeCtx;
use mlpl_diag::Diagnostic;

type Rule = Result<AbsValue, Diagnostic>;

fn draw(c: &mut ShapeCtx) -> Rule {
    c.seed(0)?;
    Ok(AbsValue::Array(match c.shape_arg(1)? {
        Some(d) => AbsArray::of_dims(d),
        None => AbsArray::unknown(),
    }))
}

/// `random(seed, shape)`.
pub fn random(c: &mut ShapeCtx) -> Rule {
    draw(c)
}

/// `randn(seed, shape)`.
pub fn randn(c: &mut ShapeCtx) -> Rule {
    draw(c)
}

/// `blobs(seed, n, centers)`: `[K·n, 3]`; E0205 unless `centers` is `[K, 2]` or
/// `[2K]`.
pub fn blobs(c: &mut ShapeCtx) -> Rule {
    c.seed(0)?;
    let n = c.count(1)?;
    let k = match c.array(2)? {
        Some(centers) => match centers.dims.as_deref() {
            None => None,
            Some([k, Dim::Known(2)]) => k.known(),
            Some([_, Dim::Known(_)]) | Some([]) => {
                return Err(c.rank_error(2, &centers, super::site::BLOB_CENTERS))
            }
            Some([Dim::Known(len)]) if len % 2 != 0 => {
                return Err(c.rank_error(2, &centers, super::site::BLOB_CENTERS))
            }
            Some([Dim::Known(len)]) => Some(len / 2),
            Some(d) if d.len() > 2 => {
                return Err(c.rank_error(2, &centers, super::site::BLOB_CENTERS))
            }
            Some(_) => None,
        },
        None => None,
    };
    let rows = match (k, n) {
        (Some(k), Some(n)) => Dim::Known(k.saturating_mul(n)),
        _ => Dim::Unknown,
    };
    Ok(AbsValue::Array(AbsArray::of_dims(vec![
        rows,
        Dim::Known(3),
    ])))
}

fn rows3(c: &mut ShapeCtx) -> Rule {
    c.seed(0)?;
    let n = c.count(1)?;
    c.scalar(2)?;
    Ok(AbsValue::Array(AbsArray::of_dims(vec![
        n.map_or(Dim::Unknown, Dim::Known),
        Dim::Known(3),
    ])))
}

/// `moons(seed, n, noise)`: `[n, 3]`.
pub fn moons(c: &mut ShapeCtx) -> Rule {
    rows3(c)
}

/// `circles(seed, n, noise)`: `[n, 3]`.
pub fn circles(c: &mut ShapeCtx) -> Rule {
    rows3(c)
}
