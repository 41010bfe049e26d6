//! Interpreter overhead per operation (not a timed test): runs small MLPL loops and
//! prints one JSON line per case with nanoseconds per loop iteration. The peer
//! (numpy, same loops) is measured by `bench/interp/run.sh` in the same run.
//!
//! Usage: `cargo bench -p mlpl-lang --bench interp [-- --rounds N]`.

use std::time::Instant;

use mlpl_lang::eval::{Interp, Workspace};
use mlpl_syntax::parse;

/// (name, setup, body, iterations): the body runs `iterations` times in `repeat`.
const CASES: &[(&str, &str, &str, usize)] = &[
    ("scalar_add", "x = 0", "x = x + 1", 200_000),
    ("vec8_add", "x = zeros([8])", "x = x + 1", 200_000),
    (
        "vec8_exp_mul",
        "x = zeros([8])",
        "x = exp(x * 0.5) - 1",
        100_000,
    ),
    (
        "mat16_matmul",
        "a = ones([16, 16]) / 16\nx = ones([16, 16])",
        "x = matmul(x, a)",
        50_000,
    ),
    (
        "mat64_matmul",
        "a = ones([64, 64]) / 64\nx = ones([64, 64])",
        "x = matmul(x, a)",
        10_000,
    ),
    (
        "softmax_32x64",
        "x = randn(1, [32, 64])",
        "y = softmax(x)",
        20_000,
    ),
];

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    for _ in 0..rounds {
        for (name, setup, body, iters) in CASES {
            let src = format!("{setup}\nrepeat {iters} {{ {body} }}");
            let program = parse(&src).program;
            let mut it = Interp::new(Workspace::new());
            let start = Instant::now();
            it.run(&program).expect("benchmark program runs");
            let ns = start.elapsed().as_nanos() as f64 / *iters as f64;
            println!("{{\"impl\":\"mlpl\",\"case\":\"{name}\",\"ns_per_iter\":{ns:.1}}}");
        }
    }
}
