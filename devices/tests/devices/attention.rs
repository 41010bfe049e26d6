//! The CPU's tiled attention (`attention`, `attention_backward`) against the
//! trait's composed default (`Unfused`, which materialises the scores) within
//! float32 tolerance, the composed gradients against finite differences, and
//! the tiled kernel's bits across ISA levels and thread counts.

use mlpl_devices::cpu::{force_isa, supported_isas};
use mlpl_devices::{cpu, AttentionSpec, Backend, CpuBackend, Tensor, Unfused};

/// A deterministic pseudo-random tensor of `shape` with values in about ±`scale`.
fn tensor(shape: &[usize], seed: u64, scale: f32) -> Tensor {
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

/// One attention problem: `[b, h, t, d]` queries over `[b, kv, s, d]` keys.
#[derive(Clone, Copy, Debug)]
struct Case {
    b: usize,
    h: usize,
    kv: usize,
    t: usize,
    s: usize,
    d: usize,
    causal: bool,
    window: Option<usize>,
    sinks: bool,
}

impl Case {
    fn spec(&self) -> AttentionSpec {
        AttentionSpec {
            divisor: (self.d as f32).sqrt(),
            causal: self.causal,
            window: self.window,
        }
    }

    /// `[q, k, v, sinks, dout]` for `seed`.
    fn operands(&self, seed: u64) -> [Tensor; 5] {
        let sinks = if self.sinks {
            tensor(&[self.h], seed + 3, 2.0)
        } else {
            Tensor::zeros(vec![0])
        };
        [
            tensor(&[self.b, self.h, self.t, self.d], seed, 1.5),
            tensor(&[self.b, self.kv, self.s, self.d], seed + 1, 1.5),
            tensor(&[self.b, self.kv, self.s, self.d], seed + 2, 1.0),
            sinks,
            tensor(&[self.b, self.h, self.t, self.d], seed + 4, 1.0),
        ]
    }
}

/// The cases: causal, GQA, windows, sinks, lengths that are no multiple of
/// the tiles, a single query, queries after cached keys, no mask.
fn cases() -> Vec<Case> {
    let c = |b, h, kv, t, s, d, causal, window, sinks| Case {
        b,
        h,
        kv,
        t,
        s,
        d,
        causal,
        window,
        sinks,
    };
    vec![
        c(1, 2, 2, 1, 1, 8, true, None, false),
        c(2, 4, 4, 70, 70, 16, true, None, false),
        c(1, 4, 2, 130, 130, 8, true, None, false),
        c(1, 4, 1, 65, 65, 12, true, Some(20), false),
        c(2, 2, 1, 97, 97, 8, true, None, true),
        c(1, 4, 2, 75, 75, 16, true, Some(7), true),
        c(1, 2, 1, 3, 100, 8, true, None, false),
        c(1, 2, 2, 1, 90, 8, false, None, true),
        c(1, 2, 1, 33, 47, 8, false, None, false),
    ]
}

/// `Ok` when every element of `got` is within `tol·(1 + |want|)` of `want`.
fn close(what: &str, got: &Tensor, want: &Tensor, tol: f32) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    for (i, (g, w)) in got.host().iter().zip(want.host()).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i} is {g} (tiled), {w} (composed)"
        );
    }
}

#[test]
fn tiled_attention_matches_the_composed_default_forward_and_backward() {
    let fused = cpu();
    let composed = Unfused(CpuBackend::new());
    for (n, case) in cases().into_iter().enumerate() {
        let [q, k, v, sinks, dout] = case.operands(10 * n as u64 + 1);
        let spec = case.spec();
        let (out, lse) = fused.attention(&q, &k, &v, &sinks, spec).unwrap();
        let (out_c, lse_c) = composed.attention(&q, &k, &v, &sinks, spec).unwrap();
        let what = format!("{case:?}");
        close(&format!("out of {what}"), &out, &out_c, 2e-5);
        close(&format!("lse of {what}"), &lse, &lse_c, 2e-5);
        assert_eq!(lse.shape(), &[case.b, case.h, case.t]);
        let grads = fused
            .attention_backward(&q, &k, &v, &out, &lse, &dout, spec)
            .unwrap();
        let grads_c = composed
            .attention_backward(&q, &k, &v, &out_c, &lse_c, &dout, spec)
            .unwrap();
        close(&format!("dq of {what}"), &grads.0, &grads_c.0, 5e-5);
        close(&format!("dk of {what}"), &grads.1, &grads_c.1, 5e-5);
        close(&format!("dv of {what}"), &grads.2, &grads_c.2, 5e-5);
    }
}

#[test]
fn plain_causal_attention_equals_the_layers_masked_softmax_path() {
    // softmax(q·kᵀ / √d, causal) · v through the kernels the attention layer
    // used before the fused kernel existed.
    let be = cpu();
    let case = cases()[1];
    let [q, k, v, sinks, _] = case.operands(5);
    let scores = be.matmul_t(&q, &k, false, true).unwrap();
    let p = be
        .masked_softmax(&scores, case.spec().divisor, true)
        .unwrap();
    let want = be.matmul(&p, &v).unwrap();
    let (out, _) = be.attention(&q, &k, &v, &sinks, case.spec()).unwrap();
    close("out", &out, &want, 2e-5);
}

/// `Σ out(q, k, v)·w`, the directional loss of the finite differences.
fn loss(be: &dyn Backend, x: &[Tensor; 4], w: &Tensor, spec: AttentionSpec) -> f64 {
    let (out, _) = be.attention(&x[0], &x[1], &x[2], &x[3], spec).unwrap();
    out.host()
        .iter()
        .zip(w.host())
        .map(|(&a, &b)| a as f64 * b as f64)
        .sum()
}

#[test]
fn composed_attention_gradients_match_finite_differences() {
    let be = Unfused(CpuBackend::new());
    for case in [cases()[2], cases()[5]] {
        let case = Case {
            t: 9,
            s: 9,
            sinks: false,
            ..case
        };
        let spec = case.spec();
        let [q, k, v, sinks, dout] = case.operands(77);
        let (out, lse) = be.attention(&q, &k, &v, &sinks, spec).unwrap();
        let (dq, dk, dv) = be
            .attention_backward(&q, &k, &v, &out, &lse, &dout, spec)
            .unwrap();
        for (which, grad) in [(0, &dq), (1, &dk), (2, &dv)] {
            let x = [q.clone(), k.clone(), v.clone(), sinks.clone()];
            let dir = tensor(x[which].shape(), 99 + which as u64, 1.0);
            let eps = 1e-2f32;
            let shifted = |sign: f32| {
                let mut y = x.clone();
                let data = x[which]
                    .host()
                    .iter()
                    .zip(dir.host())
                    .map(|(&a, &e)| a + sign * eps * e)
                    .collect();
                y[which] = Tensor::from_vec(x[which].shape().to_vec(), data);
                loss(&be, &y, &dout, spec)
            };
            let numeric = (shifted(1.0) - shifted(-1.0)) / (2.0 * eps as f64);
            let analytic: f64 = grad
                .host()
                .iter()
                .zip(dir.host())
                .map(|(&g, &e)| g as f64 * e as f64)
                .sum();
            assert!(
                (numeric - analytic).abs() <= 1e-2 * (1.0 + analytic.abs()),
                "{case:?}, input {which}: finite differences {numeric}, gradient {analytic}"
            );
        }
    }
}

/// The bits of the tiled kernel's outputs, forward and backward, for `case`.
fn tiled_bits(case: &Case) -> Vec<u32> {
    let be = cpu();
    let [q, k, v, sinks, dout] = case.operands(3);
    let spec = case.spec();
    let (out, lse) = be.attention(&q, &k, &v, &sinks, spec).unwrap();
    let (dq, dk, dv) = be
        .attention_backward(&q, &k, &v, &out, &lse, &dout, spec)
        .unwrap();
    [out, lse, dq, dk, dv]
        .iter()
        .flat_map(|t| t.host().iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        .collect()
}

#[test]
fn tiled_attention_bits_do_not_depend_on_the_isa_or_the_threads() {
    // Big enough that the work items go to rayon's threads. With one thread
    // the backward pass runs in one pass per key/value head, with two or
    // three as a `dq` pass and a `dk`/`dv` pass (`cpu/nn/attention.rs`,
    // `one_pass`): the bits must not tell them apart either.
    let case = Case {
        b: 1,
        h: 4,
        kv: 2,
        t: 200,
        s: 200,
        d: 24,
        causal: true,
        window: Some(150),
        sinks: true,
    };
    let reference = tiled_bits(&case);
    for isa in supported_isas() {
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            force_isa(Some(isa)).unwrap();
            let got = pool.install(|| tiled_bits(&case));
            force_isa(None).unwrap();
            assert!(
                got == reference,
                "{isa} with {threads} threads gives other bits than the default"
            );
        }
    }
}
