//! Static checker speed (not a timed test): generates a 10,000-line script of
//! realistic MLPL (loaded data, named axes, matmuls, reductions, `train` and
//! `for` loops, device blocks) and times `check_source` on it (parse, name checks
//! and the shape/named-axis abstract interpretation). Prints one JSON line per
//! round and a summary with the median.
//!
//! Usage: `cargo bench -p mlpl-lang --bench check [-- --rounds N]`. With
//! `MLPL_BENCH_PROFILE_ANALYSIS=1` it only runs the shape analysis N times (for a
//! profiler) and prints nothing.

use std::time::Instant;

/// The allocator of the `mlpl` and `mlpl-lsp` binaries, so this measures what they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use mlpl_lang::check::check_source;

/// One block of 20 lines; `i` makes its names unique.
fn block(i: usize) -> String {
    format!(
        r#"# %% block {i}
data{i} = load("train{i}.csv")
X{i} : [batch, feat] = randn({i}, [32, 16])
W{i} : [feat, hidden] = param[16, 8]
b{i} : [hidden] = param[8]
H{i} = relu(matmul(X{i}, W{i}) + b{i})
s{i} = sum(H{i}, "batch")
m{i} = mean(H{i}, 1)
y{i} = iota(32) - 16 * gt(iota(32), 15)
train 3 {{
  adam(cross_entropy(matmul(relu(matmul(X{i}, W{i}) + b{i}), transpose(relabel(W{i}, ["out", "hidden"]))), y{i}), [W{i}, b{i}], 0.01, 0.9, 0.999, 1e-8)
  loss_metric = mean(H{i})
}}
for r{i} in reshape(iota(12), [4, 3]) {{
  r{i} * 2 + [1, 2, 3]
}}
g{i} = device("cpu") {{ matmul(transpose(H{i}), H{i}) }}
f{i} = matmul(data{i}, ones([3, 2])) + [1, 2]
t{i} = reshape(transpose(g{i}), [-1])
c{i} = concat(t{i}, [1, 2])
"#
    )
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let src: String = (0..500).map(block).collect();
    if std::env::var_os("MLPL_BENCH_PROFILE_ANALYSIS").is_some() {
        let program = mlpl_syntax::parse(&src).program;
        for _ in 0..rounds {
            let mut c = mlpl_lang::check::Checker::new();
            c.program(&program, |_, _, _| {});
            std::hint::black_box(c);
        }
        return;
    }
    let lines = src.lines().count();
    // Warm-up, and a sanity check: the script is clean.
    let checked = check_source(&src);
    let errors = checked.diagnostics.iter().filter(|d| d.is_error()).count();
    if let Some(d) = checked.diagnostics.iter().find(|d| d.is_error()) {
        panic!("the benchmark script should check clean: {d:?}");
    }
    let _ = errors;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        let checked = check_source(&src);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        std::hint::black_box(checked);
        println!("{{\"case\":\"check_10k_lines\",\"lines\":{lines},\"ms\":{ms:.2}}}");
        times.push(ms);
    }
    let mut parse_times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        std::hint::black_box(mlpl_syntax::parse(&src));
        parse_times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    parse_times.sort_by(|a, b| a.total_cmp(b));
    let program = mlpl_syntax::parse(&src).program;
    let mut abs_times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        let mut c = mlpl_lang::check::Checker::new();
        c.program(&program, |_, _, _| {});
        std::hint::black_box(c);
        abs_times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    abs_times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "of which shape analysis: median {:.2} ms",
        abs_times[abs_times.len() / 2]
    );
    println!(
        "of which parsing alone: median {:.2} ms",
        parse_times[parse_times.len() / 2]
    );
    times.sort_by(|a, b| a.total_cmp(b));
    let median = times[times.len() / 2];
    let min = times[0];
    println!(
        "check_source on {lines} lines ({} bytes): median {median:.2} ms, min {min:.2} ms over {rounds} rounds",
        src.len()
    );
}
