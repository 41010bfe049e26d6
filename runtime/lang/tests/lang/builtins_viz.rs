//! Visualization builtins (LANGUAGE §10.20, §18): chart kinds, layout conventions,
//! shape errors.

use crate::common;

use common::{error_code, eval};

fn is_chart(s: &str) -> bool {
    s.starts_with("<svg")
        && s.ends_with("</svg>")
        && s.contains("viewBox=\"0 0 400 300\"")
        && s.contains("#1e1e2e")
}

#[test]
fn every_chart_type_draws() {
    for src in [
        "svg([[0, 0], [1, 1]], \"scatter\")",
        "svg([[0, 0, 0], [1, 1, 1]], \"scatter3d\")",
        "svg([[0, 0, 0, 1], [1, 1, 1, 2]], \"scatter3d\")",
        "svg([1, 3, 2], \"line\")",
        "svg(5, \"line\")",
        "svg([[0, 1], [1, 3]], \"line\")",
        "svg([1, -2, 3], \"bar\")",
        "svg([[1, 2], [3, 4]], \"heatmap\")",
        "svg([[0, 1], [1, 0]], \"decision_boundary\", [[0, 0, 0], [1, 1, 1]])",
        "hist([1, 2, 2, 3], 3)",
        "scatter_labeled([[0, 0], [1, 1]], [0, 1])",
        "loss_curve([3, 2, 1])",
        "confusion_matrix([0, 1, 1], [0, 1, 0])",
        "boundary_2d([0, 1, 1, 0], [2, 2], [[0, 0], [1, 1]], [0, 1])",
    ] {
        assert!(is_chart(&eval(src)), "{src}");
    }
}

#[test]
fn points_land_in_the_padded_area() {
    let s = eval("svg([[0, 0], [1, 2]], \"scatter\")");
    assert!(
        s.contains("cx=\"30.0\" cy=\"270.0\"") && s.contains("cx=\"370.0\" cy=\"30.0\""),
        "{s}"
    );
    // Three-D points with a cluster column get a legend with each id.
    let s = eval("svg([[0, 0, 0, 3], [1, 1, 1, 5]], \"scatter3d\")");
    assert!(s.contains(">3</text>") && s.contains(">5</text>"));
}

#[test]
fn confusion_matrix_writes_the_counts() {
    // actual [0, 1, 0], predicted [0, 1, 1]: row 0 = (1, 1), row 1 = (0, 1)
    let s = eval("confusion_matrix([0, 1, 1], [0, 1, 0])");
    assert_eq!(s.matches(">1</text>").count(), 3);
    assert_eq!(s.matches(">0</text>").count(), 1);
}

#[test]
fn chart_errors() {
    assert_eq!(error_code("svg([1, 2], \"pie\")"), "E0106");
    assert_eq!(
        error_code("svg([[0, 1], [1, 0]], \"decision_boundary\")"),
        "E0103"
    );
    assert_eq!(error_code("svg([1, 2, 3], \"scatter\")"), "E0205");
    assert_eq!(error_code("svg([[1, 2, 3]], \"scatter\")"), "E0218");
    assert_eq!(error_code("svg([[1, 2]], \"bar\")"), "E0205");
    assert_eq!(error_code("hist([1, 2], 0)"), "E0401");
    assert_eq!(error_code("hist([1, 2], [2])"), "E0205");
    assert_eq!(
        error_code("scatter_labeled([[0, 0], [1, 1]], [0])"),
        "E0218"
    );
    assert_eq!(error_code("loss_curve([[1]])"), "E0205");
    assert_eq!(
        error_code("boundary_2d([0, 1, 1], [2, 2], [[0, 0]], [0])"),
        "E0218"
    );
    assert_eq!(error_code("svg(\"x\", \"line\")"), "E0301");
}
