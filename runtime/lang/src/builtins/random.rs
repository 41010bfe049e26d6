//! Random data and synthetic data sets (LANGUAGE §10.6), drawn with the generators
//! of §13 in float64 and rounded to float32 once.

use super::construct::{checked_numel, shape_arg};
use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::data::{datasets, rng};
use crate::eval::Call;
use crate::value::{Array, Value};
use mlpl_diag::Diagnostic;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "random",
        params: &[req("seed", Seed), req("shape", Array)],
        summary: "uniform random numbers in [0, 1)",
        doc: "`random(seed, shape)` fills `shape` in row-major order with uniform draws on [0, 1) from xorshift64 seeded with `seed` (LANGUAGE §13).",
        example: "random(3, [4])",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.6",
        run: random,
        shape: Some(super::random_shapes::random),
    },
    Builtin {
        name: "randn",
        params: &[req("seed", Seed), req("shape", Array)],
        summary: "standard normal random numbers",
        doc: "`randn(seed, shape)` fills `shape` with standard normal draws (Box–Muller, two uniforms per draw; LANGUAGE §13.2).",
        example: "randn(7, [5])",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.6",
        run: randn,
        shape: Some(super::random_shapes::randn),
    },
    Builtin {
        name: "blobs",
        params: &[req("seed", Seed), req("n", Count), req("centers", Array)],
        summary: "Gaussian blobs around centres, rows [x, y, class]",
        doc: "`blobs(seed, n, centers)` draws n points per centre (`centers` is `[K, 2]` or `[2K]`) with σ = 0.15, grouped by class: `[K·n, 3]` rows `[x, y, class]`.",
        example: "blobs(5, 2, [[0, 0], [3, 3]])",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.6",
        run: blobs,
        shape: Some(super::random_shapes::blobs),
    },
    Builtin {
        name: "moons",
        params: &[req("seed", Seed), req("n", Count), req("noise", Scalar)],
        summary: "two interleaving half circles, rows [x, y, class]",
        doc: "`moons(seed, n, noise)` returns `[n, 3]`: ⌊n/2⌋ rows of class 0 then the rest of class 1 (LANGUAGE §13.5).",
        example: "moons(1, 3, 0.1)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.6",
        run: moons,
        shape: Some(super::random_shapes::moons),
    },
    Builtin {
        name: "circles",
        params: &[req("seed", Seed), req("n", Count), req("noise", Scalar)],
        summary: "two concentric circles, rows [x, y, class]",
        doc: "`circles(seed, n, noise)` returns `[n, 3]`: radius 0.5 for class 0 and 1.0 for class 1 (LANGUAGE §13.5).",
        example: "circles(2, 2, 0.05)",
        diff: Diff::Zero,
        facts: Facts::NONE,
        section: "10.6",
        run: circles,
        shape: Some(super::random_shapes::circles),
    },
];

fn draw(c: &mut Call, normal: bool) -> Result<Value, Diagnostic> {
    let seed = c.seed(0)?;
    let shape = shape_arg(c, 1)?;
    let n = checked_numel(c, 1, &shape)?;
    let v = if normal {
        rng::normal_vec(seed, n)
    } else {
        rng::uniform_vec(seed, n)
    };
    Ok(Value::Array(Array::from_f64(shape, &v)))
}

fn random(c: &mut Call) -> Result<Value, Diagnostic> {
    draw(c, false)
}

fn randn(c: &mut Call) -> Result<Value, Diagnostic> {
    draw(c, true)
}

fn rows3(rows: Vec<[f64; 3]>) -> Value {
    let flat: Vec<f64> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    Value::Array(Array::from_f64(vec![rows.len(), 3], &flat))
}

fn blobs(c: &mut Call) -> Result<Value, Diagnostic> {
    let seed = c.seed(0)?;
    let n = c.count(1)?;
    let centers = c.array(2)?;
    let flat = centers.to_f64();
    let ok = match centers.shape() {
        [_, 2] => true,
        [len] => len % 2 == 0,
        _ => false,
    };
    if !ok {
        return Err(c.rank_error(2, super::site::BLOB_CENTERS));
    }
    let pairs: Vec<(f64, f64)> = flat.chunks(2).map(|p| (p[0], p[1])).collect();
    checked_numel(c, 1, &[pairs.len().saturating_mul(n), 3])?;
    let rows = datasets::blobs(seed, n, &pairs).map_err(|e| c.error(e.code(), e.to_string()))?;
    Ok(rows3(rows))
}

fn moons(c: &mut Call) -> Result<Value, Diagnostic> {
    let seed = c.seed(0)?;
    let n = c.count(1)?;
    let noise = c.scalar(2)?;
    checked_numel(c, 1, &[n, 3])?;
    Ok(rows3(datasets::moons(seed, n, noise)))
}

fn circles(c: &mut Call) -> Result<Value, Diagnostic> {
    let seed = c.seed(0)?;
    let n = c.count(1)?;
    let noise = c.scalar(2)?;
    checked_numel(c, 1, &[n, 3])?;
    Ok(rows3(datasets::circles(seed, n, noise)))
}
