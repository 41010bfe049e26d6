//! The fused attention op: gradient checks by central differences (queries,
//! keys, values and sinks, through the CPU's tiled kernel), and the same
//! values and gradients, within float32 rounding, as the materialised path
//! the attention layer takes below `FUSED_MIN_SCORES` (scores, scale, mask,
//! sink column, softmax, values) on the tape.

use super::{check_with, Rng};
use crate::autograd::{Tape, Var};
use mlpl_devices::{cpu, AttentionSpec, Result, Tensor};

/// `[b, h, kv, t, s, d]`, the mask and whether there are sinks.
#[derive(Clone, Copy, Debug)]
struct Case {
    dims: [usize; 6],
    causal: bool,
    window: Option<usize>,
    sinks: bool,
}

const fn case(dims: [usize; 6], causal: bool, window: Option<usize>, sinks: bool) -> Case {
    Case {
        dims,
        causal,
        window,
        sinks,
    }
}

impl Case {
    fn spec(&self) -> AttentionSpec {
        AttentionSpec {
            divisor: (self.dims[5] as f32).sqrt(),
            causal: self.causal,
            window: self.window,
        }
    }

    /// `q`, `k`, `v` and, when the case has them, the sinks.
    fn inputs(&self) -> Vec<Tensor> {
        let [b, h, kv, t, s, d] = self.dims;
        let mut r = Rng::named(&format!("{self:?}"));
        let mut xs = vec![
            r.normal_tensor(&[b, h, t, d], 1.0),
            r.normal_tensor(&[b, kv, s, d], 1.0),
            r.normal_tensor(&[b, kv, s, d], 1.0),
        ];
        if self.sinks {
            xs.push(r.normal_tensor(&[h], 1.0));
        }
        xs
    }

    /// The fused op on the tape.
    fn fused(&self, t: &mut Tape, v: &[Var]) -> Result<Var> {
        t.attention(v[0], v[1], v[2], v.get(3).copied(), self.spec())
    }

    /// The layer's materialised path on the tape.
    fn materialised(&self, t: &mut Tape, v: &[Var]) -> Result<Var> {
        let [b, h, kv, tq, s, d] = self.dims;
        let g = h / kv;
        let q = t.reshape(v[0], vec![b, kv, g, tq, d])?;
        let k = t.reshape(v[1], vec![b, kv, 1, s, d])?;
        let vv = t.reshape(v[2], vec![b, kv, 1, s, d])?;
        let kt = t.permute(k, &[0, 1, 2, 4, 3])?;
        let scores = t.matmul(q, kt)?;
        let mut x = t.div_scalar(scores, self.spec().divisor)?;
        let past = s - tq;
        let mask: Vec<f32> = (0..tq * s)
            .map(|i| {
                let (r, c) = (i / s + past, i % s);
                let seen = (!self.causal || c <= r) && self.window.is_none_or(|w| c + w > r);
                if seen {
                    0.0
                } else {
                    -1e30
                }
            })
            .collect();
        let mask = t.constant(Tensor::from_vec(vec![tq, s], mask));
        x = t.add(x, mask)?;
        if let Some(&sinks) = v.get(3) {
            let sk = t.reshape(sinks, vec![1, kv, g, 1, 1])?;
            let zeros = t.constant(Tensor::zeros(vec![b, kv, g, tq, 1]));
            let col = t.add(zeros, sk)?;
            x = t.concat_axis(x, col, 4)?;
        }
        let mut p = t.softmax(x, 4)?;
        if v.len() > 3 {
            p = t.slice_axis(p, 4, 0, 1, s)?;
        }
        let o = t.matmul(p, vv)?;
        t.reshape(o, vec![b, h, tq, d])
    }
}

/// GQA, windows, sinks, lengths that are no multiple of the tiles, T = 1 and
/// queries after cached keys.
const CASES: [Case; 6] = [
    case([1, 2, 2, 1, 1, 4], true, None, false),
    case([1, 4, 2, 70, 70, 8], true, None, false),
    case([2, 2, 1, 37, 37, 4], true, Some(9), true),
    case([1, 2, 1, 67, 67, 8], true, None, true),
    case([1, 2, 2, 5, 40, 4], true, Some(30), false),
    case([1, 2, 1, 1, 20, 4], false, None, true),
];

#[test]
fn attention_gradients_match_central_differences() {
    // Small sizes: every element is perturbed twice.
    for c in [
        case([1, 2, 1, 5, 5, 3], true, None, true),
        case([1, 2, 2, 4, 6, 2], true, Some(2), false),
        case([1, 1, 1, 1, 3, 2], false, None, true),
    ] {
        let inputs: Vec<(Tensor, bool)> = c.inputs().into_iter().map(|x| (x, true)).collect();
        check_with(
            &format!("attention {c:?}"),
            &inputs,
            &|t, v| c.fused(t, v),
            1e-2,
            2e-2,
            2e-3,
        );
    }
}

/// The value and the gradients of `sum(y · R)` for every input.
fn run(inputs: &[Tensor], f: &dyn Fn(&mut Tape, &[Var]) -> Result<Var>) -> Vec<Tensor> {
    let mut t = Tape::new(cpu());
    let vs: Vec<Var> = inputs.iter().map(|x| t.leaf(x.clone(), true)).collect();
    let y = f(&mut t, &vs).unwrap();
    let proj = Rng::named("projection").normal_tensor(t.shape(y), 1.0);
    let p = t.constant(proj);
    let yp = t.mul(y, p).unwrap();
    let loss = t.sum(yp, None).unwrap();
    let g = t.backward(loss).unwrap();
    let mut out = vec![t.value(y).unwrap()];
    out.extend(vs.iter().map(|v| g[*v].clone()));
    out
}

#[test]
fn fused_attention_matches_the_materialised_path_on_the_tape() {
    for c in CASES {
        let inputs = c.inputs();
        let fused = run(&inputs, &|t, v| c.fused(t, v));
        let plain = run(&inputs, &|t, v| c.materialised(t, v));
        for (i, (a, b)) in fused.iter().zip(&plain).enumerate() {
            assert_eq!(a.shape(), b.shape(), "{c:?}: part {i}");
            for (j, (x, y)) in a.host().iter().zip(b.host()).enumerate() {
                assert!(
                    (x - y).abs() <= 5e-5 * (1.0 + y.abs()),
                    "{c:?}: part {i} (0: value, then the gradients) element {j}: fused {x}, materialised {y}"
                );
            }
        }
    }
}
