//! SVG charts (LANGUAGE §18): plain functions from numbers to SVG text. Layout:
//! `viewBox="0 0 400 300"`, a `#1e1e2e` background, 30 px padding, axis lines in
//! `#45475a`, coordinates with one decimal; a constant range is widened by ±1.

use mlpl_devices::math;
use std::fmt::Write;

const W: f64 = 400.0;
const H: f64 = 300.0;
const PAD: f64 = 30.0;
const AXIS: &str = "#45475a";
const TEXT: &str = "#cdd6f4";
const LINE: &str = "#89b4fa";

/// The 8-colour palette for anything coloured by class id (id mod 8).
pub const PALETTE: [&str; 8] = [
    "#89b4fa", "#f38ba8", "#a6e3a1", "#fab387", "#cba6f7", "#f9e2af", "#94e2d5", "#eba0ac",
];

/// The colour of class `id`.
pub fn class_colour(id: f64) -> &'static str {
    let i = if id.is_finite() && id >= 0.0 {
        id as usize
    } else {
        0
    };
    PALETTE[i % PALETTE.len()]
}

/// A value range, widened by ±1 when all values are equal (or there are none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

impl Range {
    /// The range of the finite values in `v`.
    pub fn of(v: impl IntoIterator<Item = f64>) -> Range {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for x in v.into_iter().filter(|x| x.is_finite()) {
            lo = lo.min(x);
            hi = hi.max(x);
        }
        if !lo.is_finite() {
            return Range { lo: -1.0, hi: 1.0 };
        }
        if lo == hi {
            return Range {
                lo: lo - 1.0,
                hi: hi + 1.0,
            };
        }
        Range { lo, hi }
    }
    fn frac(&self, x: f64) -> f64 {
        (x - self.lo) / (self.hi - self.lo)
    }
}

/// Maps data coordinates into the padded plot area (y grows upwards).
struct Frame {
    x: Range,
    y: Range,
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        PAD + self.x.frac(x) * (W - 2.0 * PAD)
    }
    fn py(&self, y: f64) -> f64 {
        H - PAD - self.y.frac(y) * (H - 2.0 * PAD)
    }
}

fn open(title: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 400 300\" width=\"400\" height=\"300\"><title>{}</title><rect width=\"400\" height=\"300\" fill=\"#1e1e2e\"/>",
        escape(title)
    );
    s
}

fn axes(s: &mut String) {
    let _ = write!(
        s,
        "<line x1=\"{PAD:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{AXIS}\"/><line x1=\"{PAD:.1}\" y1=\"{PAD:.1}\" x2=\"{PAD:.1}\" y2=\"{:.1}\" stroke=\"{AXIS}\"/>",
        H - PAD,
        W - PAD,
        H - PAD,
        H - PAD
    );
}

fn close(mut s: String) -> String {
    s.push_str("</svg>");
    s
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn circle(s: &mut String, x: f64, y: f64, colour: &str) {
    let _ = write!(
        s,
        "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>"
    );
}

/// Points `(x, y)` each with a colour class (`None` = the first colour).
pub fn scatter(points: &[(f64, f64)], classes: Option<&[f64]>, title: &str) -> String {
    let f = Frame {
        x: Range::of(points.iter().map(|p| p.0)),
        y: Range::of(points.iter().map(|p| p.1)),
    };
    let mut s = open(title);
    axes(&mut s);
    for (i, &(x, y)) in points.iter().enumerate() {
        let c = classes.map_or(PALETTE[0], |c| class_colour(c[i]));
        circle(&mut s, f.px(x), f.py(y), c);
    }
    close(s)
}

/// A polyline of `(x, y)` points in order.
pub fn line(points: &[(f64, f64)], title: &str) -> String {
    let f = Frame {
        x: Range::of(points.iter().map(|p| p.0)),
        y: Range::of(points.iter().map(|p| p.1)),
    };
    let mut s = open(title);
    axes(&mut s);
    let pts: Vec<String> = points
        .iter()
        .map(|&(x, y)| format!("{:.1},{:.1}", f.px(x), f.py(y)))
        .collect();
    let _ = write!(
        s,
        "<polyline fill=\"none\" stroke=\"{LINE}\" stroke-width=\"1.5\" points=\"{}\"/>",
        pts.join(" ")
    );
    close(s)
}

/// Vertical bars, one per value, from zero.
pub fn bars(values: &[f64], title: &str) -> String {
    let y = Range::of(values.iter().copied().chain([0.0]));
    let f = Frame {
        x: Range {
            lo: 0.0,
            hi: values.len().max(1) as f64,
        },
        y,
    };
    let mut s = open(title);
    axes(&mut s);
    let bw = (W - 2.0 * PAD) / values.len().max(1) as f64;
    for (i, &v) in values.iter().enumerate() {
        let (top, bottom) = (f.py(v.max(0.0)), f.py(v.min(0.0)));
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{LINE}\"/>",
            f.px(i as f64) + 1.0,
            (bw - 2.0).max(0.5),
            bottom - top
        );
    }
    close(s)
}

/// The viridis colour map at t ∈ [0, 1] (a few control points, linearly mixed).
pub fn viridis(t: f64) -> String {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    mix(&STOPS, t)
}

/// A diverging ramp (blue – light – red) at t ∈ [0, 1].
pub fn diverging(t: f64) -> String {
    const STOPS: [(f64, f64, f64); 3] = [
        (49.0, 54.0, 149.0),
        (240.0, 240.0, 240.0),
        (165.0, 0.0, 38.0),
    ];
    mix(&STOPS, t)
}

fn mix(stops: &[(f64, f64, f64)], t: f64) -> String {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (stops.len() - 1) as f64;
    let i = (pos.floor() as usize).min(stops.len() - 2);
    let u = pos - i as f64;
    let (a, b) = (stops[i], stops[i + 1]);
    let c = |x: f64, y: f64| (x + (y - x) * u).round() as u8;
    format!("#{:02x}{:02x}{:02x}", c(a.0, b.0), c(a.1, b.1), c(a.2, b.2))
}

/// A `rows × cols` grid of cells coloured by `colour(t)` of the normalised value,
/// optionally with each cell's value written in it.
pub fn grid(
    values: &[f64],
    rows: usize,
    cols: usize,
    colour: fn(f64) -> String,
    labels: bool,
    title: &str,
) -> String {
    let r = Range::of(values.iter().copied());
    let mut s = open(title);
    let (cw, ch) = (
        (W - 2.0 * PAD) / cols.max(1) as f64,
        (H - 2.0 * PAD) / rows.max(1) as f64,
    );
    for i in 0..rows {
        for j in 0..cols {
            let v = values[i * cols + j];
            let (x, y) = (PAD + j as f64 * cw, PAD + i as f64 * ch);
            let _ = write!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cw:.1}\" height=\"{ch:.1}\" fill=\"{}\"/>", colour(r.frac(v)));
            if labels {
                let _ = write!(s, "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{TEXT}\" font-size=\"10\" text-anchor=\"middle\">{}</text>", x + cw / 2.0, y + ch / 2.0 + 3.0, crate::display::format_f64(v));
            }
        }
    }
    axes(&mut s);
    close(s)
}

/// A decision boundary: the grid of model outputs in a diverging ramp, with the
/// training points `(x, y, label)` on top.
pub fn decision_boundary(
    values: &[f64],
    rows: usize,
    cols: usize,
    points: &[(f64, f64, f64)],
    title: &str,
) -> String {
    let base = grid(values, rows, cols, diverging, false, title);
    let mut s = base.trim_end_matches("</svg>").to_string();
    let f = Frame {
        x: Range::of(points.iter().map(|p| p.0)),
        y: Range::of(points.iter().map(|p| p.1)),
    };
    for &(x, y, c) in points {
        circle(&mut s, f.px(x), f.py(y), class_colour(c));
    }
    close(s)
}

/// Orthographic 3-D scatter (azimuth 30°, elevation 20°) with an axis gizmo and,
/// when clusters are given, a legend sorted by cluster id.
pub fn scatter3d(points: &[(f64, f64, f64)], clusters: Option<&[f64]>, title: &str) -> String {
    let (az, el) = (30f64.to_radians(), 20f64.to_radians());
    let project = |x: f64, y: f64, z: f64| {
        (
            x * math::cos(az) - y * math::sin(az),
            (x * math::sin(az) + y * math::cos(az)) * math::sin(el) + z * math::cos(el),
        )
    };
    let flat: Vec<(f64, f64)> = points.iter().map(|&(x, y, z)| project(x, y, z)).collect();
    let f = Frame {
        x: Range::of(flat.iter().map(|p| p.0)),
        y: Range::of(flat.iter().map(|p| p.1)),
    };
    let mut s = open(title);
    // Axis gizmo in the lower left.
    let (ox, oy) = (PAD + 10.0, H - PAD - 10.0);
    for (name, v) in [
        ("x", (1.0, 0.0, 0.0)),
        ("y", (0.0, 1.0, 0.0)),
        ("z", (0.0, 0.0, 1.0)),
    ] {
        let (dx, dy) = project(v.0, v.1, v.2);
        let (ex, ey) = (ox + dx * 20.0, oy - dy * 20.0);
        let _ = write!(s, "<line x1=\"{ox:.1}\" y1=\"{oy:.1}\" x2=\"{ex:.1}\" y2=\"{ey:.1}\" stroke=\"{AXIS}\"/><text x=\"{ex:.1}\" y=\"{ey:.1}\" fill=\"{TEXT}\" font-size=\"9\">{name}</text>");
    }
    for (i, &(x, y)) in flat.iter().enumerate() {
        let c = clusters.map_or(PALETTE[0], |c| class_colour(c[i]));
        circle(&mut s, f.px(x), f.py(y), c);
    }
    if let Some(c) = clusters {
        let mut ids: Vec<i64> = c.iter().map(|&v| v as i64).collect();
        ids.sort_unstable();
        ids.dedup();
        for (k, id) in ids.iter().enumerate() {
            let y = PAD + 12.0 * k as f64;
            let _ = write!(s, "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{TEXT}\" font-size=\"9\">{id}</text>", W - PAD - 30.0, class_colour(*id as f64), W - PAD - 24.0, y + 3.0);
        }
    }
    close(s)
}

/// Equal-width histogram of `values` with `bins` bins: the bin counts and edges.
pub fn histogram(values: &[f64], bins: usize) -> (Vec<f64>, Range) {
    let r = Range::of(values.iter().copied());
    let mut counts = vec![0.0; bins];
    for &v in values.iter().filter(|v| v.is_finite()) {
        let b = ((r.frac(v) * bins as f64) as usize).min(bins - 1);
        counts[b] += 1.0;
    }
    (counts, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_follow_the_layout_conventions() {
        let s = scatter(&[(0.0, 0.0), (1.0, 2.0)], None, "t");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("viewBox=\"0 0 400 300\"") && s.contains("#1e1e2e") && s.contains(AXIS));
        // (0, 0) maps to the lower-left corner of the padded area.
        assert!(s.contains("cx=\"30.0\" cy=\"270.0\""), "{s}");
        assert!(s.contains("cx=\"370.0\" cy=\"30.0\""), "{s}");
    }

    #[test]
    fn constant_ranges_are_widened() {
        assert_eq!(Range::of([2.0, 2.0]), Range { lo: 1.0, hi: 3.0 });
        assert_eq!(Range::of([]), Range { lo: -1.0, hi: 1.0 });
    }

    #[test]
    fn histogram_counts_every_value() {
        let (c, _) = histogram(&[0.0, 0.1, 0.5, 1.0], 2);
        assert_eq!(c, vec![2.0, 2.0]);
    }

    #[test]
    fn colour_maps_are_hex() {
        assert_eq!(viridis(0.0), "#440154");
        assert_eq!(viridis(1.0), "#fde725");
        assert_eq!(class_colour(9.0), PALETTE[1]);
        assert_eq!(diverging(0.5), "#f0f0f0");
    }
}
