//! Random data and synthetic data sets (LANGUAGE §10.6, §13): random, randn,
//! blobs, moons, circles. Expected values were computed from the algorithms of
//! §13 (xorshift64, Box–Muller) in float64 and are compared after one rounding
//! to float32.

use crate::common;

use common::{assert_close, assert_f32, error_code, eval, warning_codes};

#[test]
fn random_is_uniform_xorshift() {
    // xorshift64 seeded with 1: (next() >> 11) · 2^-53.
    assert_f32(
        "random(1, [3])",
        &[
            5.866995778092132e-11,
            0.06250387570981197,
            0.6059343925285465,
        ],
    );
    // Seed 0 uses 0x9E3779B97F4A7C15.
    assert_f32("random(0, [2])", &[0.8597941207808165, 0.39430133835633674]);
    // Seeds are truncated toward zero and reinterpreted as unsigned: −1 is 2^64 − 1.
    assert_f32(
        "random(-1, [2])",
        &[5.775324662948833e-11, 0.06249618484070718],
    );
    assert_f32(
        "random(1.9, [3])",
        &[
            5.866995778092132e-11,
            0.06250387570981197,
            0.6059343925285465,
        ],
    );
    // Row-major fill from one generator.
    assert_f32(
        "reshape(random(1, [3]), [3])",
        &[
            5.866995778092132e-11,
            0.06250387570981197,
            0.6059343925285465,
        ],
    );
    assert_eq!(eval("shape(random(1, [2, 3]))"), "2 3");
    assert_eq!(eval("random(5, [2, 2]) - random(5, [2, 2])"), "0 0\n0 0");
    assert_eq!(eval("labels(random(1, [2, 2]))"), ",");
    assert_eq!(eval("random(1, [0])"), "[]");
    assert_eq!(eval("shape(random(1, 3))"), "3");
}

#[test]
fn randn_is_box_muller() {
    assert_f32(
        "randn(7, [4])",
        &[
            -6.074637427370561,
            -0.7373349982949087,
            -0.29549224154138204,
            -0.9907639263445234,
        ],
    );
    assert_f32(
        "randn(7, [2, 2])",
        &[
            -6.074637427370561,
            -0.7373349982949087,
            -0.29549224154138204,
            -0.9907639263445234,
        ],
    );
    assert_eq!(eval("shape(randn(3, [2, 3, 4]))"), "2 3 4");
    assert_eq!(eval("labels(randn(3, [2]))"), "");
}

#[test]
fn random_errors_and_warnings() {
    for f in ["random", "randn"] {
        assert_eq!(error_code(&format!("{f}([1], [2])")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}(1, \"a\")")), "E0301", "{f}");
        assert_eq!(error_code(&format!("{f}(\"1\", [2])")), "E0301", "{f}");
        assert_eq!(error_code(&format!("{f}(1)")), "E0103", "{f}");
        assert!(warning_codes(&format!("{f}(1, [-2])")).contains(&"W0203"));
        assert!(warning_codes(&format!("{f}(1, [2.5])")).contains(&"W0202"));
        // A non-integer seed is truncated (W0202, §6.7 and §20.8).
        assert!(warning_codes(&format!("{f}(1.5, [2])")).contains(&"W0202"));
        assert!(warning_codes(&format!("{f}(1, [2])")).is_empty());
        // Absurd sizes are E0410, not an allocation that kills the process.
        assert_eq!(error_code(&format!("{f}(1, [2e9, 8])")), "E0410", "{f}");
        assert_eq!(error_code(&format!("{f}(1, [1e10, 1e10])")), "E0410", "{f}");
    }
}

#[test]
fn blobs_draw_around_centres() {
    // For each class in order, n rows; x then y each get 0.15·normal().
    let expected = [
        -0.3804410840784122,
        0.03916927566658086,
        0.0,
        0.08271122823753606,
        0.05708944264733968,
        0.0,
        2.9729171161292407,
        3.0109296076728906,
        1.0,
        3.127864586632009,
        2.987917964663571,
        1.0,
    ];
    assert_f32("blobs(5, 2, [[0, 0], [3, 3]])", &expected);
    // `[2K]` centres are the same as `[K, 2]`.
    assert_f32("blobs(5, 2, [0, 0, 3, 3])", &expected);
    assert_eq!(eval("shape(blobs(5, 4, [[0, 0], [3, 3], [1, 1]]))"), "12 3");
    assert_eq!(eval("shape(blobs(5, 0, [[0, 0]]))"), "0 3");
    assert_eq!(eval("labels(blobs(5, 1, [[0, 0]]))"), ",");
}

#[test]
fn blobs_errors() {
    assert_eq!(error_code("blobs(5, 2, [0, 0, 3])"), "E0205");
    assert_eq!(error_code("blobs(5, 2, zeros([2, 3]))"), "E0205");
    assert_eq!(error_code("blobs(5, 2, zeros([1, 1, 2]))"), "E0205");
    assert_eq!(error_code("blobs([5], 2, [0, 0])"), "E0205");
    assert_eq!(error_code("blobs(5, [2], [0, 0])"), "E0205");
    assert_eq!(error_code("blobs(5, 2)"), "E0103");
    assert!(warning_codes("blobs(5, 1.5, [0, 0])").contains(&"W0202"));
}

#[test]
fn moons_without_noise_are_half_circles() {
    // n0 = 2 rows of class 0 at θ = 0, π/2; n1 = 2 rows of class 1.
    assert_close(
        "moons(1, 4, 0)",
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.5, 1.0, 1.0, -0.5, 1.0],
        1e-7,
    );
    // Odd n: ⌊n/2⌋ rows of class 0, the rest class 1.
    assert_eq!(eval("sum(moons(1, 5, 0), 0)").split(' ').nth(2), Some("3"));
}

#[test]
fn moons_with_noise() {
    assert_f32(
        "moons(1, 3, 0.1)",
        &[
            1.63416935111537,
            0.0966866061308505,
            0.0,
            0.11079516872483018,
            0.5144149193812704,
            1.0,
            0.8858843726060426,
            -0.3075033117332018,
            1.0,
        ],
    );
}

#[test]
fn circles_without_noise() {
    // Class 0 radius 0.5, class 1 radius 1, θ = 2π·i/n_c.
    assert_close(
        "circles(2, 4, 0)",
        &[0.5, 0.0, 0.0, -0.5, 0.0, 0.0, 1.0, 0.0, 1.0, -1.0, 0.0, 1.0],
        1e-7,
    );
}

#[test]
fn circles_with_noise() {
    assert_f32(
        "circles(2, 5, 0.05)",
        &[
            0.7390801059476805,
            -0.08731970523518733,
            0.0,
            -0.5159562940140543,
            -0.00856641136210023,
            0.0,
            1.0438791003532797,
            0.07674532898776298,
            1.0,
            -0.4243849875805175,
            0.8829342524032948,
            1.0,
            -0.5490324283240551,
            -0.9082065799991839,
            1.0,
        ],
    );
}

#[test]
fn moons_and_circles_errors() {
    for f in ["moons", "circles"] {
        assert_eq!(error_code(&format!("{f}(1, [3], 0.1)")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}(1, 3, [0.1])")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}([1], 3, 0.1)")), "E0205", "{f}");
        assert_eq!(error_code(&format!("{f}(1, 3)")), "E0103", "{f}");
        assert_eq!(eval(&format!("shape({f}(1, 2.5, 0))")), "2 3", "{f}");
        assert!(warning_codes(&format!("{f}(1, 2.5, 0)")).contains(&"W0202"));
        assert!(warning_codes(&format!("{f}(1, -2, 0)")).contains(&"W0203"));
        assert_eq!(eval(&format!("shape({f}(1, 0, 0))")), "0 3", "{f}");
        assert_eq!(eval(&format!("labels({f}(1, 2, 0))")), ",", "{f}");
    }
}

#[test]
fn absurd_data_sets_are_e0410() {
    assert_eq!(error_code("blobs(1, 1e10, [0, 0])"), "E0410");
    assert_eq!(error_code("blobs(1, 1e18, zeros([1e3, 2]))"), "E0410");
    assert_eq!(error_code("moons(1, 1e11, 0)"), "E0410");
    assert_eq!(error_code("circles(1, 1e11, 0)"), "E0410");
}
