//! Shared by the CPU step-program tests: record two iterations of a step on
//! the CPU backend, plan and compile them, and steps that use every kernel.

#![allow(dead_code)]

use mlpl_devices::capture::{self, Recorder, StepPlan, StepProgram, Trace, ValueId};
use mlpl_devices::{AdamStep, Backend, BinaryOp, CpuBackend, ReduceOp, Tensor, UnaryOp};
use std::sync::Arc;

/// One iteration of a step: given the backend, the 1-based iteration number
/// and the carried state, returns the new state and the other values to
/// compare.
pub type StepFn = dyn Fn(&dyn Backend, u64, &[Tensor]) -> (Vec<Tensor>, Vec<Tensor>);

/// A step recorded twice and compiled, with the values to compare.
pub struct Captured {
    /// The compiled program (its first run is iteration 3).
    pub program: Box<dyn StepProgram>,
    /// The backend it runs on.
    pub cpu: Arc<CpuBackend>,
    /// The value of each state tensor of iteration 2.
    pub state_ids: Vec<ValueId>,
    /// The value of each other compared tensor of iteration 2.
    pub kept_ids: Vec<ValueId>,
    /// The state after iteration 2 (the eager loop continues from it).
    pub state: Vec<Tensor>,
    /// Kernel launches of one eager iteration.
    pub launches_per_step: u64,
    /// The names of the recorded calls of iteration 2.
    pub ops: Vec<&'static str>,
    /// The plan the program was compiled from.
    pub plan: StepPlan,
}

/// The value of `t` in `trace`: the exact one (same storage and shape), else
/// the value whose storage it views.
fn value_of(trace: &Trace, t: &Tensor) -> ValueId {
    trace.find(t).unwrap_or_else(|| {
        let i = trace
            .tensors
            .iter()
            .rposition(|x| x.shares_storage(t) && x.numel() == t.numel())
            .expect("a compared tensor was not seen by the recorder");
        ValueId(i as u32)
    })
}

/// Records iterations 1 and 2 of `step` from `init` on a fresh CPU backend,
/// plans them keeping every state and compared tensor, and compiles the plan.
pub fn capture(init: Vec<Tensor>, step: &StepFn) -> Captured {
    let cpu = Arc::new(CpuBackend::new());
    let inner: Arc<dyn Backend> = cpu.clone();
    let rec = Recorder::start(inner.clone());
    let (s1, _) = step(&*rec, 1, &init);
    let first = rec.finish();
    drop(rec);
    let before = cpu.counters().kernel_launches;
    let rec = Recorder::start(inner.clone());
    let (s2, k2) = step(&*rec, 2, &s1);
    let second = rec.finish();
    drop(rec);
    let launches_per_step = cpu.counters().kernel_launches - before;
    let state_ids: Vec<ValueId> = s2.iter().map(|t| value_of(&second, t)).collect();
    let kept_ids: Vec<ValueId> = k2.iter().map(|t| value_of(&second, t)).collect();
    let keep = state_ids.iter().chain(&kept_ids).copied().collect();
    let ops = second.calls.iter().map(|c| c.op.name()).collect();
    let plan = capture::plan(&first, second, keep).unwrap_or_else(|e| panic!("no plan: {e}"));
    let program = capture::compile(inner, plan.clone()).expect("the plan compiles");
    Captured {
        program,
        cpu,
        state_ids,
        kept_ids,
        state: s2,
        launches_per_step,
        ops,
        plan,
    }
}

/// Every activation function (`UnaryOp` has no list of its own).
pub const ACTIVATIONS: [UnaryOp; 14] = [
    UnaryOp::Neg,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Abs,
    UnaryOp::Sigmoid,
    UnaryOp::Tanh,
    UnaryOp::Relu,
    UnaryOp::Gelu,
    UnaryOp::Silu,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Erf,
    UnaryOp::GeluErf,
];

/// A deterministic pseudo-random tensor of `shape` with values in ±`scale`.
pub fn tensor(shape: &[usize], seed: u64, scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data = (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
            (2.0 * u - 1.0) * scale
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), data)
}

/// Integer-valued ids below `below` of `shape`.
pub fn ids(shape: &[usize], below: usize, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| ((i as u64 * 7 + seed * 13 + (i as u64 * i as u64) % 5) % below as u64) as f32)
        .collect();
    Tensor::from_vec(shape.to_vec(), data)
}

/// Adam's hyper-parameters at iteration `t`.
pub fn adam(t: u64) -> AdamStep {
    AdamStep {
        lr: 1e-2,
        b1: 0.9,
        b2: 0.999,
        eps: 1e-8,
        wd: 0.01,
        t,
    }
}

/// A two-layer perceptron's training step on `x [batch, din]` with classes
/// `y`: forward, cross-entropy, backward, Adam on every parameter. State:
/// `w1, b1, w2, b2` and their Adam moments (m and v of each).
pub fn mlp(batch: usize, din: usize, hidden: usize, classes: usize) -> (Vec<Tensor>, Box<StepFn>) {
    let x = tensor(&[batch, din], 1, 1.0);
    let y = ids(&[batch], classes, 2);
    let zero = Tensor::scalar(0.0);
    let params = [
        tensor(&[din, hidden], 3, 0.3),
        tensor(&[hidden], 4, 0.1),
        tensor(&[hidden, classes], 5, 0.3),
        tensor(&[classes], 6, 0.1),
    ];
    let mut init: Vec<Tensor> = params.to_vec();
    for p in &params {
        init.push(Tensor::zeros(p.shape().to_vec()));
        init.push(Tensor::zeros(p.shape().to_vec()));
    }
    let step = move |b: &dyn Backend, it: u64, s: &[Tensor]| {
        let (w1, b1, w2, b2) = (&s[0], &s[1], &s[2], &s[3]);
        let z1 = b.matmul(&x, w1).unwrap();
        let a1 = b.binary(BinaryOp::Add, &z1, b1).unwrap();
        let h1 = b.unary(UnaryOp::Relu, &a1).unwrap();
        let z2 = b.matmul(&h1, w2).unwrap();
        let logits = b.binary(BinaryOp::Add, &z2, b2).unwrap();
        let (loss, dlogits) = b.cross_entropy(&logits, &y, true).unwrap();
        let dlogits = dlogits.unwrap();
        let dw2 = b.matmul_t(&h1, &dlogits, true, false).unwrap();
        let db2 = b.sum_to_shape(&dlogits, &[classes]).unwrap();
        let dh1 = b.matmul_t(&dlogits, w2, false, true).unwrap();
        let on = b.binary(BinaryOp::Gt, &a1, &zero).unwrap();
        let da1 = b.binary(BinaryOp::Mul, &dh1, &on).unwrap();
        let dw1 = b.matmul_t(&x, &da1, true, false).unwrap();
        let db1 = b.sum_to_shape(&da1, &[hidden]).unwrap();
        let mut next: Vec<Tensor> = s.to_vec();
        for (i, g) in [dw1, db1, dw2, db2].iter().enumerate() {
            let (mut p, mut m, mut v) = (s[i].clone(), s[4 + 2 * i].clone(), s[5 + 2 * i].clone());
            b.adam_update(&mut p, g, &mut m, &mut v, adam(it)).unwrap();
            next[i] = p;
            next[4 + 2 * i] = m;
            next[5 + 2 * i] = v;
        }
        (next, vec![loss, logits])
    };
    (init, Box::new(step))
}

/// The matrix products of [`mlp`]'s step alone, with the same shapes and
/// transpose flags, on constant operands.
pub fn mlp_products(
    batch: usize,
    din: usize,
    hidden: usize,
    classes: usize,
) -> (Vec<Tensor>, Box<StepFn>) {
    let x = tensor(&[batch, din], 1, 1.0);
    let w1 = tensor(&[din, hidden], 3, 0.3);
    let h1 = tensor(&[batch, hidden], 7, 1.0);
    let w2 = tensor(&[hidden, classes], 5, 0.3);
    let dlogits = tensor(&[batch, classes], 8, 0.1);
    let step = move |b: &dyn Backend, _: u64, _: &[Tensor]| {
        let out = vec![
            b.matmul(&x, &w1).unwrap(),
            b.matmul(&h1, &w2).unwrap(),
            b.matmul_t(&h1, &dlogits, true, false).unwrap(),
            b.matmul_t(&dlogits, &w2, false, true).unwrap(),
            b.matmul_t(&x, &h1, true, false).unwrap(),
        ];
        (Vec::new(), out)
    };
    (Vec::new(), Box::new(step))
}

/// A step that calls every CPU kernel (every fast path of the broadcasting,
/// product, permutation, reduction and sum-to-shape kernels) on values
/// computed from a parameter `p [rows, cols]` (`rows` even), and updates `p`
/// with Adam; without the matrix products when `products` is false. State:
/// `p, m, v`, a counter carried without Adam, and a reshaped product carried
/// as a view. Returns every kernel result to compare.
pub fn every_kernel(rows: usize, cols: usize, products: bool) -> (Vec<Tensor>, Box<StepFn>) {
    assert!(rows.is_multiple_of(2));
    let half = rows / 2;
    let p = tensor(&[rows, cols], 11, 1.0);
    let other = tensor(&[rows, cols], 12, 1.0);
    let w = tensor(&[cols, 5], 13, 0.5);
    let wb = tensor(&[2, cols, 4], 14, 0.5);
    let wt_a = tensor(&[rows, 5], 15, 0.5);
    let wt_n1 = tensor(&[rows, 1], 16, 0.5);
    let wt_b = tensor(&[5, cols], 17, 0.5);
    let wt_ab = tensor(&[4, rows], 18, 0.5);
    let row = tensor(&[cols], 19, 1.0);
    let plane = tensor(&[half, cols], 20, 1.0);
    let col3 = tensor(&[half, 1], 21, 1.0);
    let dy3 = tensor(&[2, half, cols], 22, 1.0);
    let targets = ids(&[rows], cols, 23);
    let table_ids = ids(&[2, 3], rows, 24);
    let conv_rows = ids(&[3], rows, 26);
    let scalar = Tensor::scalar(0.5);
    let one = Tensor::from_vec(vec![1], vec![1.0]);
    let init = vec![
        p.clone(),
        Tensor::zeros(vec![rows, cols]),
        Tensor::zeros(vec![rows, cols]),
        Tensor::zeros(vec![1]),
        tensor(&[rows * cols], 25, 1.0),
    ];
    let step = move |b: &dyn Backend, it: u64, s: &[Tensor]| {
        let (x, counter, carried_view) = (&s[0], &s[3], &s[4]);
        let mut out: Vec<Tensor> = Vec::new();
        let x3 = x.reshape(vec![2, half, cols]);
        for op in ACTIVATIONS {
            out.push(b.unary(op, x).unwrap());
        }
        for op in [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Pow,
            BinaryOp::Gt,
            BinaryOp::Lt,
            BinaryOp::Eq,
            BinaryOp::Max,
            BinaryOp::Min,
        ] {
            out.push(b.binary(op, x, &other).unwrap());
        }
        // Scalar on either side, a trailing block on either side, strided.
        out.push(b.binary(BinaryOp::Mul, x, &scalar).unwrap());
        out.push(b.binary(BinaryOp::Sub, &scalar, x).unwrap());
        out.push(b.binary(BinaryOp::Add, &x3, &row).unwrap());
        out.push(b.binary(BinaryOp::Div, &plane, &x3).unwrap());
        let x_col = b.reduce(ReduceOp::Sum, &x3, Some(2)).unwrap();
        let x_col = x_col.reshape(vec![2, half, 1]);
        out.push(b.binary(BinaryOp::Mul, &x_col, &row).unwrap());
        out.push(b.binary(BinaryOp::Sub, &col3, &x_col).unwrap());
        let x_first = x3.reshape(vec![2, half * cols]);
        let x_first = b.reduce(ReduceOp::Max, &x_first, Some(1)).unwrap();
        let x_first = x_first.reshape(vec![2, 1, 1]);
        out.push(b.binary(BinaryOp::Add, &x_first, &plane).unwrap());
        // Products: plain, batched, folded batch, broadcast batch, every flag.
        if products {
            out.push(b.matmul(x, &w).unwrap());
            out.push(b.matmul(&x3, &wb).unwrap());
            let w_one = w.reshape(vec![1, cols, 5]);
            out.push(b.matmul(&x3, &w_one).unwrap());
            let x_mean = b.reduce(ReduceOp::Mean, &x3, Some(0)).unwrap();
            out.push(b.matmul(&x_mean.reshape(vec![1, half, cols]), &wb).unwrap());
            out.push(b.matmul_t(x, &w, false, false).unwrap());
            out.push(b.matmul_t(x, &wt_a, true, false).unwrap());
            out.push(b.matmul_t(x, &wt_n1, true, false).unwrap());
            out.push(b.matmul_t(x, &wt_b, false, true).unwrap());
            out.push(b.matmul_t(x, &wt_ab, true, true).unwrap());
        }
        // Reductions and argmax over everything, the first and the last axis.
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Mean, ReduceOp::Max] {
            for axis in [None, Some(0), Some(1), Some(2)] {
                out.push(b.reduce(op, &x3, axis).unwrap());
            }
        }
        for axis in [None, Some(0), Some(2)] {
            out.push(b.argmax(&x3, axis).unwrap());
        }
        // Softmax family along the last and a middle axis.
        for axis in [2, 1] {
            let y = b.softmax(&x3, axis).unwrap();
            out.push(b.softmax_backward(&y, &dy3, axis).unwrap());
            out.push(y);
            out.push(b.log_softmax(&x3, axis).unwrap());
            out.push(b.logsumexp(&x3, axis).unwrap());
        }
        let (loss, grad) = b.cross_entropy(x, &targets, true).unwrap();
        out.push(loss);
        out.push(grad.unwrap());
        out.push(
            b.cross_entropy(&x3, &targets.reshape(vec![2, half]), false)
                .unwrap()
                .0,
        );
        // Permutations: rows, transpose, gather.
        for perm in [[1, 0, 2], [0, 2, 1], [2, 1, 0]] {
            out.push(b.permute(&x3, &perm).unwrap());
        }
        let gathered = b.gather_rows(x, &table_ids).unwrap();
        out.push(b.scatter_add_rows(&table_ids, &gathered, rows).unwrap());
        out.push(gathered);
        // Engram: hashed n-gram rows, the causal convolution and its gradient
        // (the kernel's weights are rows of the carried state, so they change).
        out.push(b.engram_hash(&table_ids, &[2, 3], 2, 7, 0xE9).unwrap());
        let wk = b.gather_rows(x, &conv_rows).unwrap();
        out.push(b.causal_conv(&x3, &wk).unwrap());
        let (dxc, dwc) = b.causal_conv_backward(&x3, &wk, &dy3).unwrap();
        out.extend([dxc, dwc]);
        // Sum to shape: an axis pair, the general walk, everything.
        for shape in [
            vec![half, cols],
            vec![cols],
            vec![2, 1, cols],
            vec![1, half, 1],
            vec![],
        ] {
            out.push(b.sum_to_shape(&x3, &shape).unwrap());
        }
        // Selection (same shapes, broadcast condition and operands) and slices.
        let cond = b.binary(BinaryOp::Gt, x, &other).unwrap();
        out.push(b.select(&cond, x, &other).unwrap());
        out.push(b.select(&x_col, &row, &scalar).unwrap());
        let sl = b.slice_axis(&x3, 1, 1, 2, (half - 1).div_ceil(2)).unwrap();
        out.push(b.unslice_axis(&sl, &[2, half, cols], 1, 1, 2).unwrap());
        out.push(sl);
        out.push(b.slice_axis(x, 1, 0, 3, cols.div_ceil(3)).unwrap());
        // Norms and their gradients.
        let (yr, inv) = b.rms_norm(&x3, 1e-5).unwrap();
        let dr = b.rms_norm_backward(&x3, &inv, &dy3).unwrap();
        let (yl, mean, inv_std) = b.layer_norm(x, 1e-5).unwrap();
        let dl = b.layer_norm_backward(x, &mean, &inv_std, &other).unwrap();
        let mask = b
            .dropout_mask(
                &[rows, cols],
                // The iteration counts on, as a loop's `step` does.
                mlpl_devices::DropoutKey {
                    stream: 0xD00D,
                    counter: it,
                },
                0.25,
            )
            .unwrap()
            .expect("the CPU makes masks");
        let g = b
            .binary(BinaryOp::Add, &dr.reshape(vec![rows, cols]), &dl)
            .unwrap();
        let g = b.binary(BinaryOp::Mul, &g, &mask).unwrap();
        out.extend([yr, inv, yl, mean, inv_std, mask]);
        // State: Adam on p, a counter, a view of a product carried.
        let (mut p, mut m, mut v) = (s[0].clone(), s[1].clone(), s[2].clone());
        b.adam_update(&mut p, &g, &mut m, &mut v, adam(it)).unwrap();
        let counter = b.binary(BinaryOp::Add, counter, &one).unwrap();
        out.push(b.unary(UnaryOp::Tanh, carried_view).unwrap());
        let doubled = b
            .binary(
                BinaryOp::Mul,
                x,
                &b.binary(BinaryOp::Add, &one, &one).unwrap(),
            )
            .unwrap();
        let view = doubled.reshape(vec![rows * cols]);
        (vec![p, m, v, counter, view], out)
    };
    (init, Box::new(step))
}
