//! Visualization (LANGUAGE §10.20, §18): builtins that return SVG charts. The CLI
//! writes a chart to a file and prints `viz: PATH`; the editor shows it.

use super::site::CallSite;
use super::ParamKind::*;
use super::{opt, req, Builtin, Diff, Facts};
use crate::data::svg;
use crate::eval::Call;
use crate::value::{named_shape, Array, Value};
use mlpl_diag::code;
use mlpl_diag::Diagnostic;

/// The chart types of `svg`.
pub const SVG_TYPES: &[&str] = &[
    "scatter",
    "scatter3d",
    "line",
    "bar",
    "heatmap",
    "decision_boundary",
];

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "svg",
        params: &[req("data", Array), req("type", Str), opt("aux", Array)],
        summary: "an SVG chart of an array",
        doc: "`svg(data, type [, aux])` draws `data` as \"scatter\" (`[N, 2]`), \"scatter3d\" (`[N, 3]`, or `[N, 4]` with a cluster id), \"line\" (`[]`, `[N]` or `[N, 2]`), \"bar\" (rank ≤ 1), \"heatmap\" (rank 2) or \"decision_boundary\" (rank-2 grid plus the required `aux` `[N, 3]` of (x, y, label) points). E0106 unknown type; E0205/E0218 shapes; E0103 missing aux.",
        example: "svg(moons(1, 20, 0.1), \"scatter3d\")",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.20",
        run: svg_chart,
        shape: Some(super::viz_shapes::svg),
    },
    Builtin {
        name: "hist",
        params: &[req("data", Array), req("bins", Scalar)],
        summary: "a histogram chart",
        doc: "`hist(data, bins)` draws an equal-width histogram of the `[N]` values with `bins` bins (an integer > 0; E0401).",
        example: "hist(randn(1, [200]), 10)",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.20",
        run: hist,
        shape: Some(super::viz_shapes::hist),
    },
    Builtin {
        name: "scatter_labeled",
        params: &[req("points", Array), req("labels", Array)],
        summary: "a scatter plot coloured by label",
        doc: "`scatter_labeled(points, labels)` draws `[N, 2]` points coloured by the `[N]` class labels (E0218 when the counts differ).",
        example: "d = blobs(1, 10, [[0, 0], [2, 2]])\nscatter_labeled(matmul(d, [[1, 0], [0, 1], [0, 0]]), matmul(d, [0, 0, 1]))",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.20",
        run: scatter_labeled,
        shape: Some(super::viz_shapes::scatter_labeled),
    },
    Builtin {
        name: "loss_curve",
        params: &[req("losses", Array)],
        summary: "a line chart of losses",
        doc: "`loss_curve(losses)` draws the `[N]` losses against their index, e.g. `loss_curve(last_losses)` after a `train` loop.",
        example: "loss_curve([3, 2, 1.5, 1.2, 1.1])",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.20",
        run: loss_curve,
        shape: Some(super::viz_shapes::loss_curve),
    },
    Builtin {
        name: "confusion_matrix",
        params: &[req("pred", Array), req("actual", Array)],
        summary: "a confusion-matrix chart",
        doc: "`confusion_matrix(pred, actual)` counts `[N]` integer predictions against actual classes in a K×K grid (K = max id + 1; rows are actual classes, columns predicted), with the counts written in the cells.",
        example: "confusion_matrix([0, 1, 1, 0], [0, 1, 0, 0])",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.20",
        run: confusion_matrix,
        shape: Some(super::viz_shapes::confusion_matrix),
    },
    Builtin {
        name: "boundary_2d",
        params: &[req("grid_outputs", Array), req("dims", Array), req("points", Array), req("labels", Array)],
        summary: "a decision-boundary chart",
        doc: "`boundary_2d(grid_outputs, dims, points, labels)` draws model outputs over a `[rows, cols]` grid (`dims` = [rows, cols]) with the `[N, 2]` training points coloured by their `[N]` labels on top.",
        example: "g = grid([0, 1, 0, 1], 4)\nboundary_2d(matmul(g, [1, 1]), [4, 4], [[0.2, 0.3], [0.8, 0.9]], [0, 1])",
        diff: Diff::Effect,
        facts: Facts::NONE.effectful(),
        section: "10.20",
        run: boundary_2d,
        shape: Some(super::viz_shapes::boundary_2d),
    },
];

fn matrix_of(
    c: &Call,
    i: usize,
    cols: &[usize],
    expected: &str,
) -> Result<(Vec<f64>, usize, usize), Diagnostic> {
    let a: &Array = c.array(i)?;
    match a.shape() {
        [n, k] if cols.contains(k) => Ok((a.to_f64(), *n, *k)),
        [_, _] => Err(c
            .error_of(i, code::E0218, format!("has shape {}", named_shape(a)))
            .note(format!("expected {expected}"))),
        _ => Err(c.rank_error(i, expected)),
    }
}

fn vector_of(c: &Call, i: usize) -> Result<Vec<f64>, Diagnostic> {
    let a = c.array(i)?;
    if a.rank() != 1 {
        return Err(c.rank_error(i, "a vector `[N]`"));
    }
    Ok(a.to_f64())
}

fn same_count(c: &Call, i: usize, n: usize, m: usize) -> Result<(), Diagnostic> {
    super::site::check_point_count(c, i, n, m)
}

fn svg_chart(c: &mut Call) -> Result<Value, Diagnostic> {
    let kind = c.string(1)?.to_string();
    let a = c.array(0)?.clone();
    let chart = match kind.as_str() {
        "scatter" => {
            let (d, n, _) = matrix_of(c, 0, &[2], "`[N, 2]`")?;
            svg::scatter(
                &(0..n).map(|r| (d[2 * r], d[2 * r + 1])).collect::<Vec<_>>(),
                None,
                "scatter",
            )
        }
        "scatter3d" => {
            let (d, n, k) = matrix_of(c, 0, &[3, 4], "`[N, 3]` or `[N, 4]`")?;
            let pts: Vec<_> = (0..n)
                .map(|r| (d[k * r], d[k * r + 1], d[k * r + 2]))
                .collect();
            let ids: Vec<f64> = (0..n).map(|r| d[k * r + 3.min(k - 1)]).collect();
            svg::scatter3d(&pts, (k == 4).then_some(ids.as_slice()), "scatter3d")
        }
        "line" => {
            let pts: Vec<(f64, f64)> = match a.shape() {
                [] | [_] => a
                    .to_f64()
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as f64, v))
                    .collect(),
                [n, 2] => {
                    let d = a.to_f64();
                    (0..*n).map(|r| (d[2 * r], d[2 * r + 1])).collect()
                }
                _ => return Err(c.rank_error(0, "`[]`, `[N]` or `[N, 2]`")),
            };
            svg::line(&pts, "line")
        }
        "bar" => {
            if a.rank() > 1 {
                return Err(c.rank_error(0, "of rank 0 or 1"));
            }
            svg::bars(&a.to_f64(), "bar")
        }
        "heatmap" => {
            let [r, k] = a.shape() else {
                return Err(c.rank_error(0, "a matrix"));
            };
            svg::grid(&a.to_f64(), *r, *k, svg::viridis, false, "heatmap")
        }
        "decision_boundary" => {
            let [r, k] = a.shape() else {
                return Err(c.rank_error(0, "a matrix of grid outputs"));
            };
            let (r, k) = (*r, *k);
            if !c.has(2) {
                return Err(c.error(code::E0103, "wrong number of arguments").note("\"decision_boundary\" needs the training points as a third argument `[N, 3]` of (x, y, label)"));
            }
            let (p, n, _) = matrix_of(c, 2, &[3], "`[N, 3]` of (x, y, label)")?;
            let pts: Vec<_> = (0..n)
                .map(|i| (p[3 * i], p[3 * i + 1], p[3 * i + 2]))
                .collect();
            svg::decision_boundary(&a.to_f64(), r, k, &pts, "decision boundary")
        }
        other => return Err(super::site::unknown_chart(c, 1, other)),
    };
    Ok(Value::string(chart))
}

fn hist(c: &mut Call) -> Result<Value, Diagnostic> {
    let v = vector_of(c, 0)?;
    let bins = c.scalar(1)?;
    let bins = super::site::hist_bins(c, bins)?;
    let (counts, _) = svg::histogram(&v, bins);
    Ok(Value::string(svg::bars(&counts, "histogram")))
}

fn scatter_labeled(c: &mut Call) -> Result<Value, Diagnostic> {
    let (d, n, _) = matrix_of(c, 0, &[2], "`[N, 2]`")?;
    let labels = vector_of(c, 1)?;
    same_count(c, 1, n, labels.len())?;
    let pts: Vec<_> = (0..n).map(|r| (d[2 * r], d[2 * r + 1])).collect();
    Ok(Value::string(svg::scatter(&pts, Some(&labels), "scatter")))
}

fn loss_curve(c: &mut Call) -> Result<Value, Diagnostic> {
    let v = vector_of(c, 0)?;
    let pts: Vec<_> = v.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect();
    Ok(Value::string(svg::line(&pts, "loss")))
}

fn class_ids(c: &Call, i: usize) -> Result<Vec<usize>, Diagnostic> {
    vector_of(c, i)?
        .iter()
        .map(|&x| {
            if x.fract() == 0.0 && (0.0..1e5).contains(&x) {
                Ok(x as usize)
            } else {
                Err(c
                    .error_of(
                        i,
                        code::E0218,
                        format!("{} is not a class id", crate::display::format_f64(x)),
                    )
                    .note("class ids are integers in 0..100000"))
            }
        })
        .collect()
}

fn confusion_matrix(c: &mut Call) -> Result<Value, Diagnostic> {
    let (pred, actual) = (class_ids(c, 0)?, class_ids(c, 1)?);
    same_count(c, 1, pred.len(), actual.len())?;
    let k = pred.iter().chain(&actual).max().map_or(1, |m| m + 1);
    if k > 256 {
        return Err(c.invalid(0, "more than 256 classes"));
    }
    let mut counts = vec![0.0; k * k];
    for (&p, &a) in pred.iter().zip(&actual) {
        counts[a * k + p] += 1.0;
    }
    Ok(Value::string(svg::grid(
        &counts,
        k,
        k,
        svg::viridis,
        true,
        "confusion matrix",
    )))
}

fn boundary_2d(c: &mut Call) -> Result<Value, Diagnostic> {
    let out = c.array(0)?.to_f64();
    let dims = c.array(1)?.to_f64();
    if dims.len() != 2 {
        return Err(super::site::boundary_dims_error(c, dims.len()));
    }
    let (r, k) = (dims[0].max(0.0) as usize, dims[1].max(0.0) as usize);
    if r.checked_mul(k) != Some(out.len()) {
        return Err(c
            .error_of(0, code::E0218, format!("{} outputs", out.len()))
            .note(format!("dims ask for {r}·{k} grid outputs")));
    }
    let (p, n, _) = matrix_of(c, 2, &[2], "`[N, 2]`")?;
    let labels = vector_of(c, 3)?;
    same_count(c, 3, n, labels.len())?;
    let pts: Vec<_> = (0..n)
        .map(|i| (p[2 * i], p[2 * i + 1], labels[i]))
        .collect();
    Ok(Value::string(svg::decision_boundary(
        &out,
        r,
        k,
        &pts,
        "decision boundary",
    )))
}
