//! Embedding analysis (LANGUAGE §10.15): pairwise_sqdist, knn, pca, tsne.

use crate::common;

use common::{assert_close, error_code, eval, nums};

const X4: &str = "X = [[0, 0], [3, 4], [1, 1], [0, 1]]\n";

#[test]
fn pairwise_squared_distances() {
    assert_eq!(
        eval("pairwise_sqdist([[0, 0], [3, 4], [1, 1]])"),
        "0 25 2\n25 0 13\n2 13 0"
    );
    assert_eq!(eval("pairwise_sqdist([[1, 2, 3]])"), "0");
    assert_eq!(eval("shape(pairwise_sqdist(zeros([0, 2])))"), "0 0");
    assert_eq!(eval("shape(pairwise_sqdist(zeros([3, 0])))"), "3 3");
    assert_eq!(
        eval("M : [n, d] = [[0, 0], [3, 4]]\nlabels(pairwise_sqdist(M))"),
        ","
    );
    assert_eq!(error_code("pairwise_sqdist([1, 2])"), "E0205");
    assert_eq!(error_code("pairwise_sqdist(zeros([1, 2, 2]))"), "E0205");
    assert_eq!(error_code("pairwise_sqdist(\"a\")"), "E0301");
}

#[test]
fn nearest_neighbours() {
    // Row 3 (0, 1) is at distance 1 from rows 0 and 2: the lower index first.
    assert_eq!(eval(&format!("{X4}knn(X, 2)")), "3 2\n2 3\n3 0\n0 2");
    assert_eq!(eval(&format!("{X4}knn(X, 1)")), "3\n2\n3\n0");
    assert_eq!(
        eval(&format!("{X4}knn(X, 3)")),
        "3 2 1\n2 3 0\n3 0 1\n0 2 1"
    );
    assert_eq!(eval("knn([[0], [5]], 1)"), "1\n0");
    assert_eq!(eval(&format!("{X4}labels(knn(X, 1))")), ",");
}

#[test]
fn knn_errors() {
    assert_eq!(error_code(&format!("{X4}knn(X, 0)")), "E0401");
    assert_eq!(error_code(&format!("{X4}knn(X, 4)")), "E0401");
    assert_eq!(error_code(&format!("{X4}knn(X, 1.5)")), "E0401");
    assert_eq!(error_code(&format!("{X4}knn(X, -1)")), "E0401");
    assert_eq!(error_code("knn([[1]], 1)"), "E0401");
    assert_eq!(error_code(&format!("{X4}knn(X, [1])")), "E0205");
    assert_eq!(error_code("knn([1, 2], 1)"), "E0205");
    assert_eq!(error_code(&format!("{X4}knn(X)")), "E0103");
}

#[test]
fn pca_by_power_iteration() {
    // Computed from the algorithm of §10.15 in float64.
    assert_close(
        "pca([[1, 2], [3, 4], [5, 7]], 1)",
        &[-3.07098108302356, -0.2611118976401599, 3.332092980663721],
        1e-5,
    );
    assert_close(
        "pca([[1, 2], [3, 4], [5, 7]], 2)",
        &[
            -3.07098108302356,
            -0.11627395304144827,
            -0.2611118976401599,
            0.20719963325707305,
            3.332092980663721,
            -0.0909256802156253,
        ],
        1e-5,
    );
    assert_close(
        "pca([[2, 0, 1], [0, 1, 3], [1, 1, 1], [4, 2, 0]], 2)",
        &[
            0.14926193963781595,
            -1.0138702637281007,
            -2.3924442357758555,
            0.5796791559354599,
            -0.46102839051231714,
            -0.1150112376052406,
            2.704210686650357,
            0.5492023453978814,
        ],
        1e-5,
    );
    assert_eq!(eval("shape(pca(randn(1, [10, 4]), 3))"), "10 3");
    assert_eq!(eval("labels(pca([[1, 2], [3, 4]], 1))"), ",");
}

#[test]
fn pca_errors() {
    assert_eq!(error_code("pca([[1, 2], [3, 4]], 0)"), "E0401");
    assert_eq!(error_code("pca([[1, 2], [3, 4]], 3)"), "E0401");
    assert_eq!(error_code("pca([[1, 2], [3, 4]], 1.5)"), "E0401");
    assert_eq!(
        error_code("pca(reshape(concat([1, 2, 3], log([0])), [2, 2]), 1)"),
        "E0401"
    );
    assert_eq!(error_code("pca([1, 2], 1)"), "E0205");
    assert_eq!(error_code("pca([[1, 2], [3, 4]], [1])"), "E0205");
}

#[test]
fn tsne_embeds_into_two_centred_dimensions() {
    let src = "tsne(randn(1, [6, 3]), 2, 50, 0)";
    let y = nums(src);
    assert_eq!(y.len(), 12);
    assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
    // Y is re-centred at every iteration: the column means are 0.
    for col in 0..2 {
        let mean: f64 = y.iter().skip(col).step_by(2).sum::<f64>() / 6.0;
        assert!(mean.abs() < 1e-4, "column {col} mean {mean}");
    }
    // Deterministic for a seed; another seed gives another start.
    assert_eq!(eval(src), eval(src));
    assert_ne!(eval(src), eval("tsne(randn(1, [6, 3]), 2, 50, 1)"));
    assert_eq!(eval("shape(tsne(randn(2, [5, 4]), 1.5, 1, 3))"), "5 2");
    assert_eq!(eval("labels(tsne(randn(2, [5, 4]), 1.5, 1, 3))"), ",");
    // Well-separated clusters stay separated: the nearest neighbour of each
    // point in the embedding is in its own cluster.
    let clusters = "X = [[0, 0], [0.1, 0], [0, 0.1], [10, 10], [10.1, 10], [10, 10.1]]\n\
                    knn(tsne(X, 2, 300, 0), 1)";
    let nn = nums(clusters);
    for (i, j) in nn.iter().enumerate() {
        assert_eq!(i / 3, *j as usize / 3, "row {i} nearest {j}");
    }
}

#[test]
fn tsne_errors() {
    let x = "X = randn(1, [5, 3])\n";
    assert_eq!(error_code(&format!("{x}tsne(X, 0, 10, 0)")), "E0401");
    assert_eq!(error_code(&format!("{x}tsne(X, 5, 10, 0)")), "E0401");
    assert_eq!(error_code(&format!("{x}tsne(X, -1, 10, 0)")), "E0401");
    assert_eq!(error_code(&format!("{x}tsne(X, 2, 0, 0)")), "E0401");
    assert_eq!(error_code(&format!("{x}tsne(X, 2, 1.5, 0)")), "E0401");
    assert_eq!(
        error_code("tsne(reshape(concat(iota(5), log([0])), [3, 2]), 1, 10, 0)"),
        "E0401"
    );
    assert_eq!(error_code("tsne([1, 2, 3], 1, 10, 0)"), "E0205");
    assert_eq!(error_code(&format!("{x}tsne(X, [2], 10, 0)")), "E0205");
    assert_eq!(error_code(&format!("{x}tsne(X, 2, 10)")), "E0103");
}

#[test]
fn absurd_working_matrices_are_e0410() {
    // N² (or D²) cells above the allocation limit: a diagnostic, not a crash.
    assert_eq!(error_code("pairwise_sqdist(zeros([1e5, 1]))"), "E0410");
    assert_eq!(error_code("knn(zeros([1e5, 1]), 1)"), "E0410");
    assert_eq!(error_code("tsne(zeros([1e5, 1]), 1, 1, 0)"), "E0410");
    assert_eq!(error_code("pca(zeros([1, 1e5]), 1)"), "E0410");
}
