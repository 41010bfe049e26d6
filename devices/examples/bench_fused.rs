//! Benchmark of the CPU's fused kernels against the kernel sequences they
//! replace (not a timed test).
//!
//! `cargo run --release -p mlpl-devices --example bench_fused` prints one line
//! per case: `fused NAME SHAPE US_FUSED US_UNFUSED RATIO`, the best
//! microseconds per call (forward and backward together) of the fused kernels
//! and of the unfused sequence, measured in interleaved batches in the same
//! run, and unfused / fused. The shapes are those of the benchmark language
//! model's training step (64 windows of T = 32, d = 32, 128, 256): the MLP's
//! bias + ReLU (and GELU) on `[2048, 4d]`, and the attention probabilities on
//! `[64, 1, 1, 32, 32]` scores.
//!
//! The unfused sequences are the kernels the loss tape ran before fusion:
//! `binary(Add)`, `unary(act)`; the activation's derivative composed from
//! element-wise kernels, `sum_to_shape` for the bias; `binary(Div)` by the
//! scale, the causal mask (`x·(1 − m) + m·fill`, mask made and uploaded each
//! time), `softmax`; `softmax_backward`, times the kept mask, `binary(Div)`.

use mlpl_devices::{Backend, BinaryOp, CpuBackend, Tensor, UnaryOp, Unfused, CAUSAL_FILL};
use std::hint::black_box;
#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/timing.rs"]
mod timing;

fn data(shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 250.0 - 2.0
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), v)
}

fn report(name: &str, shape: &[usize], (fused, unfused): (f64, f64)) {
    println!(
        "fused {name} {shape:?} {:.1} {:.1} {:.2}",
        fused * 1e6,
        unfused * 1e6,
        unfused / fused
    );
}

fn bias_act_case(f: &CpuBackend, u: &Unfused<CpuBackend>, rows: usize, n: usize, act: UnaryOp) {
    let x = data(&[rows, n], 1);
    let bias = data(&[1, n], 2);
    let dy = data(&[rows, n], 3);
    let times = timing::interleaved(
        || {
            let y = f.bias_act(&x, &bias, act).unwrap();
            black_box(f.bias_act_backward(&x, &bias, &y, &dy, act, true).unwrap());
        },
        || {
            let pre = u.binary(BinaryOp::Add, &x, &bias).unwrap();
            let y = u.unary(act, &pre).unwrap();
            let dpre = u.unary_backward(act, &pre, &y, &dy).unwrap();
            black_box(u.sum_to_shape(&dpre, bias.shape()).unwrap());
        },
        7,
        0.1,
    );
    report(&format!("bias_{act:?}").to_lowercase(), &[rows, n], times);
}

fn masked_softmax_case(f: &CpuBackend, u: &Unfused<CpuBackend>, shape: &[usize], d: usize) {
    let x = data(shape, 4);
    let dy = data(shape, 5);
    let divisor = (d as f64).sqrt() as f32;
    let (t, s) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let times = timing::interleaved(
        || {
            let p = f.masked_softmax(&x, divisor, true).unwrap();
            black_box(f.masked_softmax_backward(&p, &dy, divisor, true).unwrap());
        },
        || {
            let c = u.upload(&Tensor::scalar(divisor)).unwrap();
            let v = u.binary(BinaryOp::Div, &x, &c).unwrap();
            let m: Vec<f32> = (0..t * s)
                .map(|i| if i % s > i / s { 1.0 } else { 0.0 })
                .collect();
            let m = u.upload(&Tensor::from_vec(vec![t, s], m)).unwrap();
            let one = u.upload(&Tensor::scalar(1.0)).unwrap();
            let keep = u.binary(BinaryOp::Sub, &one, &m).unwrap();
            let fill = u.upload(&Tensor::scalar(CAUSAL_FILL)).unwrap();
            let kept = u.binary(BinaryOp::Mul, &v, &keep).unwrap();
            let filled = u.binary(BinaryOp::Mul, &m, &fill).unwrap();
            let v = u.binary(BinaryOp::Add, &kept, &filled).unwrap();
            let p = u.softmax(&v, shape.len() - 1).unwrap();
            let g = u.softmax_backward(&p, &dy, shape.len() - 1).unwrap();
            let g = u.binary(BinaryOp::Mul, &g, &keep).unwrap();
            black_box(u.binary(BinaryOp::Div, &g, &c).unwrap());
        },
        7,
        0.1,
    );
    report("causal_softmax", shape, times);
}

fn main() {
    let (f, u) = (CpuBackend::new(), Unfused(CpuBackend::new()));
    for d in [32, 128, 256] {
        bias_act_case(&f, &u, 2048, 4 * d, UnaryOp::Relu);
        bias_act_case(&f, &u, 2048, 4 * d, UnaryOp::Gelu);
        masked_softmax_case(&f, &u, &[64, 1, 1, 32, 32], d);
    }
}
