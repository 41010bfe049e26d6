//! Benchmark of the CPU backend's non-GEMM kernels of a training step at every
//! instruction-set level this CPU supports (not a timed test).
//!
//! `cargo run --release -p mlpl-devices --example bench_kernels` times, level
//! after level for each kernel (interleaved, best of 5 batches of ~0.1 s), the
//! element-wise, normalisation, softmax and cross-entropy kernels at the sizes
//! of the bench/train step (N = 2048 tokens, d = 256, 4d = 1024, V = 280,
//! attention scores [32, 256, 256]) and prints a Markdown table of µs per call
//! and the speed of each level over the scalar one. It also checks that every
//! level gives the scalar level's bits and says so per row. The program's
//! thread is worker 0 of rayon's pool, as in `mlpl run`.

use mlpl_devices::cpu::{force_isa, supported_isas, Isa};
use mlpl_devices::{Backend, BinaryOp, CpuBackend, Tensor, UnaryOp};
#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/timing.rs"]
mod timing;

fn data(shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|i| {
            let x = (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(97));
            (x % 10007) as f32 / 10007.0 * 6.0 - 3.0
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), v)
}

/// The bits of every output of a kernel.
fn bits(ts: &[Tensor]) -> Vec<u32> {
    ts.iter()
        .flat_map(|t| t.host().iter().map(|v| v.to_bits()))
        .collect()
}

fn main() {
    rayon::ThreadPoolBuilder::new()
        .use_current_thread()
        .build_global()
        .expect("the global pool is not built yet");
    let be = CpuBackend::new();
    let (n, d, f, v) = (2048, 256, 1024, 280);
    let x = data(&[n, d], 1);
    let dy = data(&[n, d], 2);
    let h = data(&[n, f], 3);
    let h2 = data(&[n, f], 4);
    let bias = data(&[f], 5);
    let logits = data(&[n, v], 6);
    let targets = Tensor::from_vec(vec![n], (0..n).map(|i| (i * 7 % v) as f32).collect());
    let scores = data(&[32, 256, 256], 7);
    let (_, inv) = be.rms_norm(&x, 1e-8).unwrap();
    let y = be.masked_softmax(&scores, 8.0, true).unwrap();
    let gelu_y = be.bias_act(&h, &bias, UnaryOp::Gelu).unwrap();
    let silu_y = be.bias_act(&h, &bias, UnaryOp::Silu).unwrap();
    let tanh_y = be.unary(UnaryOp::Tanh, &h).unwrap();
    type Kernel<'a> = Box<dyn Fn() -> Vec<Tensor> + 'a>;
    let kernels: Vec<(&str, String, Kernel)> = vec![
        (
            "add",
            format!("[{n}, {f}] + [{n}, {f}]"),
            Box::new(|| vec![be.binary(BinaryOp::Add, &h, &h2).unwrap()]),
        ),
        (
            "mul by a row",
            format!("[{n}, {f}] · [{f}]"),
            Box::new(|| vec![be.binary(BinaryOp::Mul, &h, &bias).unwrap()]),
        ),
        (
            "exp",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.unary(UnaryOp::Exp, &h).unwrap()]),
        ),
        (
            "gelu",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.unary(UnaryOp::Gelu, &h).unwrap()]),
        ),
        (
            "sigmoid",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.unary(UnaryOp::Sigmoid, &h).unwrap()]),
        ),
        (
            "silu",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.unary(UnaryOp::Silu, &h).unwrap()]),
        ),
        (
            "tanh",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.unary(UnaryOp::Tanh, &h).unwrap()]),
        ),
        (
            "tanh backward",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.unary_backward(UnaryOp::Tanh, &h, &tanh_y, &h2).unwrap()]),
        ),
        (
            "bias + gelu",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.bias_act(&h, &bias, UnaryOp::Gelu).unwrap()]),
        ),
        (
            "bias + gelu backward (dx, dbias)",
            format!("[{n}, {f}]"),
            Box::new(|| {
                let (dx, db) = be
                    .bias_act_backward(&h, &bias, &gelu_y, &h2, UnaryOp::Gelu, true)
                    .unwrap();
                vec![dx, db.unwrap()]
            }),
        ),
        (
            "bias + silu backward (dx, dbias)",
            format!("[{n}, {f}]"),
            Box::new(|| {
                let (dx, db) = be
                    .bias_act_backward(&h, &bias, &silu_y, &h2, UnaryOp::Silu, true)
                    .unwrap();
                vec![dx, db.unwrap()]
            }),
        ),
        (
            "bias + relu",
            format!("[{n}, {f}]"),
            Box::new(|| vec![be.bias_act(&h, &bias, UnaryOp::Relu).unwrap()]),
        ),
        (
            "bias gradient (column sums)",
            format!("[{n}, {f}] → [{f}]"),
            Box::new(|| vec![be.sum_to_shape(&h, &[f]).unwrap()]),
        ),
        (
            "bias gradient (column sums)",
            format!("[{n}, {v}] → [{v}]"),
            Box::new(|| vec![be.sum_to_shape(&logits, &[v]).unwrap()]),
        ),
        (
            "rms_norm",
            format!("[{n}, {d}]"),
            Box::new(|| {
                let (a, b) = be.rms_norm(&x, 1e-8).unwrap();
                vec![a, b]
            }),
        ),
        (
            "rms_norm backward",
            format!("[{n}, {d}]"),
            Box::new(|| vec![be.rms_norm_backward(&x, &inv, &dy).unwrap()]),
        ),
        (
            "softmax",
            format!("[{n}, {v}]"),
            Box::new(|| vec![be.softmax(&logits, 1).unwrap()]),
        ),
        (
            "cross_entropy + grad",
            format!("[{n}, {v}]"),
            Box::new(|| {
                let (l, g) = be.cross_entropy(&logits, &targets, true).unwrap();
                vec![l, g.unwrap()]
            }),
        ),
        (
            "scale + causal mask + softmax",
            "[32, 256, 256]".to_string(),
            Box::new(|| vec![be.masked_softmax(&scores, 8.0, true).unwrap()]),
        ),
        (
            "its backward",
            "[32, 256, 256]".to_string(),
            Box::new(|| vec![be.masked_softmax_backward(&y, &scores, 8.0, true).unwrap()]),
        ),
    ];
    let isas = supported_isas();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    println!(
        "CPU: {cpu}; {} threads; µs per call, best of 5 batches, levels interleaved per kernel\n",
        rayon::current_num_threads()
    );
    let head: Vec<String> = isas.iter().map(|i| format!("{i} µs")).collect();
    let speed: Vec<String> = isas[1..]
        .iter()
        .map(|i| format!("{i} ÷ scalar speed"))
        .collect();
    println!(
        "| kernel | shape | {} | {} | same bits |",
        head.join(" | "),
        speed.join(" | ")
    );
    println!("|---|---|{}---|", "---:|".repeat(2 * isas.len() - 1));
    for (name, shape, k) in &kernels {
        let mut times = Vec::new();
        let mut same = true;
        let mut want = None;
        for &isa in &isas {
            force_isa(Some(isa)).expect("a supported level");
            let got = bits(&k());
            same &= *want.get_or_insert_with(|| got.clone()) == got;
            times.push(timing::best_per_call(0.1, || drop(k())) * 1e6);
        }
        force_isa(None).expect("the initial level");
        let cells: Vec<String> = times.iter().map(|t| format!("{t:.1}")).collect();
        let ratios: Vec<String> = times[1..]
            .iter()
            .map(|t| format!("{:.2}", times[0] / t))
            .collect();
        println!(
            "| {name} | {shape} | {} | {} | {} |",
            cells.join(" | "),
            ratios.join(" | "),
            if same { "yes" } else { "NO" }
        );
    }
    assert!(isas.contains(&Isa::Scalar));
}
