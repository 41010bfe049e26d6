//! Products fused with the call that consumes them in a compiled step
//! ([`super::program`]): a matrix product whose only reader is one kernel —
//! the bias and activation after a linear layer (`bias_act`), a
//! residual addition (`+` of two same-shape values), an activation's gradient
//! applied to a gradient the product just computed (`unary_backward`) — runs
//! that kernel's arithmetic on the product's rows inside the GEMM, while they
//! are still in cache, instead of writing the product out and reading it back.
//!
//! Only where the data go changes, never an operation: each row is finished
//! once it holds the product's final value (after the last block of `k`),
//! by the consumer's own kernel on that row, so the results are the unfused
//! kernels' bits (tests compare them). The fused step is one kernel, reported
//! to observers as the product's call (its whole time) followed by the
//! consumer's.

use super::gemm::{matmul_into_then, MatmulPlan, RowFinish};
use super::nn;
use crate::backend::{BinaryOp, UnaryOp};
use crate::capture::{Origin, StepPlan, ValueId};
use crate::kernels::Op;
use crate::tensor::numel_of;

/// What the consumer does to the product's rows. Its other operands follow
/// the product's two in the fused step's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Then {
    /// `act(p + bias)`; input 2 is the bias (the product's `n` elements).
    BiasAct(UnaryOp),
    /// `p + other` (`other + p` when `product_first` is false); input 2 is
    /// `other`, as many elements as the product.
    Add { product_first: bool },
    /// `op'(x, y)·p`; inputs 2 and 3 are `x` and `y`, as many elements as
    /// the product.
    UnaryBackward(UnaryOp),
}

/// A product fused into its consumer: the calls' indices and what the
/// consumer does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Fusion {
    /// The product's call (`matmul` or `matmul_t`).
    pub(super) product: usize,
    /// The consumer's call: the one call (not a view) that reads the product.
    pub(super) consumer: usize,
    /// What the consumer computes.
    pub(super) then: Then,
    /// The consumer's inputs other than the product, in [`Then`]'s order.
    pub(super) others: [Option<ValueId>; 2],
    /// Whether the fusion keeps an operand alive longer than unfused.
    pub(super) extends: bool,
}

/// Elements of a row finished at a time (a stack buffer holds the product's
/// values while the consumer's kernel writes the row).
const PIECE: usize = 512;

/// The products of `plan` that can be fused into their consumer, in call
/// order. A product qualifies when it is one GEMM (no batch of separate
/// products), its value (or a view of it) is read once, by one call that is
/// not a view, and not kept after the step, and that call is a `bias_act` of
/// it, a `+` of it and a value of its shape, or a `unary_backward` whose
/// gradient it is. The fused step runs where the consumer ran, so the
/// product's operands live until then (the compiled step's layout sees to
/// it); the calls in between cannot change them (values are never
/// overwritten) and do not read the product. A fusion is made only when the
/// operands it keeps alive longer are together no larger than the product,
/// whose buffer it saves, so the step needs no more memory.
pub(super) fn find(plan: &StepPlan) -> Vec<Fusion> {
    let trace = &plan.trace;
    let n = trace.values.len();
    let shape = |v: ValueId| trace.values[v.index()].shape.as_slice();
    let mut root: Vec<usize> = (0..n).collect();
    // Reads of each root by calls that are not views, and the last such call.
    let mut reads = vec![0usize; n];
    let mut reader = vec![0usize; n];
    for (k, c) in trace.calls.iter().enumerate() {
        let in_range = |v: &ValueId| v.index() < n;
        if !c.inputs.iter().all(in_range) || !c.outputs.iter().all(in_range) {
            return Vec::new();
        }
        if c.op == Op::View {
            root[c.outputs[0].index()] = root[c.inputs[0].index()];
        } else {
            for v in &c.inputs {
                reads[root[v.index()]] += 1;
                reader[root[v.index()]] = k;
            }
        }
    }
    let mut kept = vec![false; n];
    for v in plan.live_at_end() {
        if let Some(r) = root.get(v.index()) {
            kept[*r] = true;
        }
    }
    // Roots alive for the whole step anyway: inputs and kept values.
    let held: Vec<bool> = (0..n)
        .map(|r| kept[r] || matches!(trace.values[r].origin, Origin::Input(_)))
        .collect();
    let mut out = Vec::new();
    for (i, c) in trace.calls.iter().enumerate() {
        let (ta, tb) = match c.op {
            Op::Matmul => (false, false),
            Op::MatmulT {
                transpose_a,
                transpose_b,
            } => (transpose_a, transpose_b),
            _ => continue,
        };
        let (Some(&a), Some(&b), Some(&p)) = (c.inputs.first(), c.inputs.get(1), c.outputs.first())
        else {
            continue;
        };
        let r = root[p.index()];
        if r != p.index()
            || kept[r]
            || reads[r] != 1
            || trace.values[r].origin != (Origin::Output { call: i, index: 0 })
        {
            continue;
        }
        if !MatmulPlan::for_op(shape(a), ta, shape(b), tb).is_one_product() {
            continue;
        }
        let j = reader[r];
        // One product per consumer: the other operand of a `+` of two
        // products is then a stored value.
        if out.iter().any(|f: &Fusion| f.consumer == j) {
            continue;
        }
        // Operands that would now live until `j` instead of dying earlier:
        // together no larger than the product, whose place they take, so
        // the step's memory does not grow.
        let mut extended: Vec<usize> = [a, b]
            .iter()
            .map(|v| root[v.index()])
            .filter(|&x| !held[x] && reader[x] < j)
            .collect();
        extended.dedup();
        let cost: usize = extended
            .iter()
            .map(|&x| numel_of(&trace.values[x].shape))
            .sum();
        if cost > numel_of(shape(p)) {
            continue;
        }
        let consumer = &trace.calls[j];
        let is_p = |v: &ValueId| root[v.index()] == r;
        let len = numel_of(shape(p));
        let cols = shape(p).last().copied().unwrap_or(1);
        let same = |v: &ValueId| !is_p(v) && numel_of(shape(*v)) == len;
        let fused = match (&consumer.op, consumer.inputs.as_slice()) {
            (Op::BiasAct { act }, [x, bias])
                if is_p(x)
                    && shape(*x).last() == Some(&cols)
                    && !is_p(bias)
                    && numel_of(shape(*bias)) == cols =>
            {
                Some((Then::BiasAct(*act), [Some(*bias), None]))
            }
            (Op::Binary { op: BinaryOp::Add }, [x, y])
                if shape(*x) == shape(*y)
                    && (is_p(x) != is_p(y))
                    && same(if is_p(x) { y } else { x }) =>
            {
                let product_first = is_p(x);
                let other = if product_first { *y } else { *x };
                Some((Then::Add { product_first }, [Some(other), None]))
            }
            (Op::UnaryBackward { op }, [x, y, g]) if is_p(g) && same(x) && same(y) => {
                Some((Then::UnaryBackward(*op), [Some(*x), Some(*y)]))
            }
            _ => None,
        };
        if let Some((then, others)) = fused {
            let extends = !extended.is_empty();
            for x in extended {
                reader[x] = j;
            }
            out.push(Fusion {
                product: i,
                consumer: j,
                then,
                others,
                extends,
            });
        }
    }
    out
}

/// Runs a fused step: the product `plan` of `a` and `b` into `out`, each row
/// finished by `then` with its `others` operands.
pub(super) fn run(
    plan: &MatmulPlan,
    then: Then,
    a: &[f32],
    b: &[f32],
    others: [&[f32]; 2],
    out: &mut [f32],
) {
    let n = plan.n();
    let finish = |row: usize, col: usize, seg: &mut [f32]| {
        let mut p = [0.0f32; PIECE];
        for (q, piece) in seg.chunks_mut(PIECE).enumerate() {
            let (col, len) = (col + q * PIECE, piece.len());
            let at = row * n + col;
            let p = &mut p[..len];
            p.copy_from_slice(piece);
            match then {
                Then::BiasAct(act) => nn::bias_act_into(act, p, &others[0][col..col + len], piece),
                Then::Add { product_first } => {
                    let other = &others[0][at..at + len];
                    for ((d, &x), &y) in piece.iter_mut().zip(&*p).zip(other) {
                        // The operands' order decides which NaN's payload
                        // the sum keeps, as in the eager addition.
                        #[allow(clippy::if_same_then_else)]
                        let sum = if product_first { x + y } else { y + x };
                        *d = sum;
                    }
                }
                Then::UnaryBackward(op) => {
                    let (x, y) = (&others[0][at..at + len], &others[1][at..at + len]);
                    nn::unary_backward_into(op, x, y, p, piece)
                }
            }
        }
    };
    let finish: RowFinish = &finish;
    matmul_into_then(plan, a, b, out, Some(finish));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::capture::{plan, Recorder, StepProgram};
    use crate::cpu::program::compile;
    use crate::cpu::CpuBackend;
    use crate::tensor::Tensor;
    use std::sync::Arc;

    fn data(shape: &[usize], seed: u32) -> Tensor {
        let len = numel_of(shape);
        let v = (0..len as u32)
            .map(|i| {
                let h = (i ^ seed).wrapping_mul(2654435761).rotate_left(13) ^ seed;
                (h % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        Tensor::from_vec(shape.to_vec(), v)
    }

    /// Records `step` twice (its state, a counter, goes up by one each time;
    /// its results are kept), compiles the plan, runs it once, and checks
    /// that the program fused `fused` products and that each kept result has
    /// the bits of `step` run eagerly.
    fn check(fused: usize, step: impl Fn(&dyn Backend) -> Vec<Tensor>) {
        let cpu = Arc::new(CpuBackend::new());
        let inner: Arc<dyn Backend> = cpu.clone();
        let eager = step(&*inner);
        let run = |counter: &Tensor| {
            let rec = Recorder::start(inner.clone());
            let next = rec
                .binary(BinaryOp::Add, counter, &Tensor::scalar(1.0))
                .unwrap();
            let outs = step(&*rec);
            (rec.finish(), next, outs)
        };
        let (first, next, _) = run(&Tensor::scalar(0.0));
        let (second, next2, outs) = run(&next);
        let keep: Vec<ValueId> = std::iter::once(&next2)
            .chain(&outs)
            .map(|t| second.find(t).unwrap())
            .collect();
        let p = plan(&first, second, keep.clone()).unwrap();
        assert_eq!(find(&p).len(), fused, "fusions in {:?}", p.trace.calls);
        let mut prog = compile(&p, cpu.kernel_launches.clone()).unwrap();
        prog.run_observed(None).unwrap();
        for (i, (v, want)) in keep[1..].iter().zip(&eager).enumerate() {
            let got = prog.tensor(*v).unwrap();
            let bits = |t: &Tensor| t.host().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(got.shape(), want.shape(), "result {i}");
            assert!(
                bits(&got) == bits(want),
                "result {i} differs from the eager kernels'"
            );
        }
    }

    /// Shapes that take each of the GEMM's paths on two threads: small
    /// (read in place), row slabs, column slabs, runs of blocks of k.
    /// Tiles of every kind, and matrix-vector products (one row, a few rows,
    /// one column).
    const SHAPES: [(usize, usize, usize); 7] = [
        (24, 40, 36),
        (300, 72, 530),
        (70, 600, 300),
        (64, 48, 1100),
        (1, 2100, 530),
        (3, 2100, 530),
        (300, 1, 530),
    ];

    #[test]
    fn bias_and_activation_after_a_product_keep_their_bits() {
        for (m, n, k) in SHAPES {
            for act in [UnaryOp::Relu, UnaryOp::Gelu, UnaryOp::Tanh, UnaryOp::Silu] {
                let (x, w, bias) = (data(&[m, k], 1), data(&[k, n], 2), data(&[1, n], 3));
                check(1, |b| {
                    let p = b.matmul(&x, &w).unwrap();
                    vec![b.bias_act(&p, &bias, act).unwrap()]
                });
            }
        }
    }

    #[test]
    fn an_addition_to_a_product_keeps_its_bits_in_either_order_and_through_a_view() {
        for (m, n, k) in SHAPES {
            let (x, w, r) = (data(&[m, k], 4), data(&[n, k], 5), data(&[m, n], 6));
            check(2, |b| {
                let p = b.matmul_t(&x, &w, false, true).unwrap();
                let q = b.matmul_t(&x, &w, false, true).unwrap();
                vec![
                    b.binary(BinaryOp::Add, &p, &r).unwrap(),
                    b.binary(BinaryOp::Add, &r, &q).unwrap(),
                ]
            });
            if m % 2 == 1 {
                continue; // no view of two batches
            }
            let batched = r.reshape(vec![2, m / 2, n]);
            check(1, |b| {
                let p = b.matmul(&x, &w.reshape(vec![k, n])).unwrap();
                vec![b
                    .binary(BinaryOp::Add, &batched, &p.reshape(vec![2, m / 2, n]))
                    .unwrap()]
            });
        }
    }

    #[test]
    fn an_activation_gradient_of_a_product_keeps_its_bits() {
        for (m, n, k) in SHAPES {
            let (g, w) = (data(&[k, m], 7), data(&[n, k], 8));
            let (x, y) = (data(&[m, n], 9), data(&[m, n], 10));
            for op in [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid] {
                check(1, |b| {
                    let p = b.matmul_t(&g, &w, true, true).unwrap();
                    vec![b.unary_backward(op, &x, &y, &p).unwrap()]
                });
            }
        }
    }

    #[test]
    fn products_read_twice_kept_or_batched_are_not_fused() {
        let (x, w, r) = (
            data(&[40, 30], 11),
            data(&[30, 20], 12),
            data(&[40, 20], 13),
        );
        // Read by two calls.
        check(0, |b| {
            let p = b.matmul(&x, &w).unwrap();
            let s = b.binary(BinaryOp::Add, &p, &r).unwrap();
            vec![s, b.unary(UnaryOp::Exp, &p).unwrap()]
        });
        // Kept after the step.
        check(0, |b| {
            let p = b.matmul(&x, &w).unwrap();
            vec![b.binary(BinaryOp::Add, &p, &r).unwrap(), p]
        });
        // A batch of separate products.
        let (xb, wb, rb) = (
            data(&[3, 40, 30], 14),
            data(&[3, 30, 20], 15),
            data(&[3, 40, 20], 16),
        );
        check(0, |b| {
            let p = b.matmul(&xb, &wb).unwrap();
            vec![b.binary(BinaryOp::Add, &p, &rb).unwrap()]
        });
        // Two products added: one is fused, the other stored.
        check(1, |b| {
            let p = b.matmul(&x, &w).unwrap();
            let q = b.matmul(&x, &w).unwrap();
            vec![b.binary(BinaryOp::Add, &p, &q).unwrap()]
        });
    }
}
