//! The random number algorithms of LANGUAGE §13: seeds, the xorshift64
//! generator with its uniform and normal draws, SplitMix64 mixing, Fisher–Yates
//! permutations and dropout keep decisions.
//!
//! These are part of the language: the same seed gives the same values as the
//! original MLPL, bit for bit in float64, on every device.

use mlpl_devices::{cpu, math};
/// The golden-ratio constant used both as the generator's replacement for a zero
/// seed and as SplitMix64's increment.
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// 2^-53, the scale that turns 53 random bits into a float in [0, 1).
const TWO_POW_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;

/// The xorshift64 generator of LANGUAGE §13.2. Its state is never zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xorshift64 {
    state: u64,
}

impl Xorshift64 {
    /// A generator initialised with `seed`, or with [`GOLDEN_GAMMA`] when the seed
    /// is 0 (xorshift cannot leave the zero state).
    pub fn new(seed: u64) -> Self {
        let state = if seed == 0 { GOLDEN_GAMMA } else { seed };
        Xorshift64 { state }
    }

    /// The next raw 64-bit output: `s ^= s << 13; s ^= s >> 7; s ^= s << 17`.
    pub fn next_u64(&mut self) -> u64 {
        let mut s = self.state;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.state = s;
        s
    }

    /// A uniform draw in [0, 1): the top 53 bits of [`Self::next_u64`] times 2^-53.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * TWO_POW_MINUS_53
    }

    /// A standard normal draw by Box–Muller, consuming two fresh uniforms u1 then
    /// u2: `sqrt(-2 ln max(u1, 1e-300)) · cos(2π u2)`.
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * math::log(u1)).sqrt() * math::cos(2.0 * std::f64::consts::PI * u2)
    }
}

/// SplitMix64 mixing of LANGUAGE §13.3 (all arithmetic wrapping).
pub fn mix(z: u64) -> u64 {
    let mut z = z.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Reads a seed argument as LANGUAGE §13.1 prescribes: truncated toward zero to
/// a signed 64-bit integer (saturating at the limits, NaN gives 0), then
/// reinterpreted as unsigned (two's complement): `-1` gives `u64::MAX`.
pub fn seed_from_f64(x: f64) -> u64 {
    // `as i64` truncates toward zero, saturates and maps NaN to 0.
    (x as i64) as u64
}

/// `n` uniform draws in [0, 1) from one generator initialised with `seed`
/// (what `random(seed, shape)` fills in row-major order).
pub fn uniform_vec(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = Xorshift64::new(seed);
    (0..n).map(|_| rng.uniform()).collect()
}

/// Normal draws per parallel chunk of [`normal_vec`].
const NORMAL_CHUNK: usize = 1 << 14;

/// `n` standard normal draws from one generator initialised with `seed` (what
/// `randn(seed, shape)` fills in row-major order).
///
/// The logarithm and cosine (correctly rounded, tens of nanoseconds each) are
/// most of the cost, so the draws are computed on rayon's threads: one
/// sequential walk of the generator (a few shifts a draw) notes its state at
/// the start of every chunk of [`NORMAL_CHUNK`] draws, then each chunk runs
/// its own copy from there. Every draw is the same function of the same two
/// uniforms as in the serial order: the same bits on any number of threads.
pub fn normal_vec(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = Xorshift64::new(seed);
    let starts: Vec<Xorshift64> = (0..n.div_ceil(NORMAL_CHUNK))
        .map(|c| {
            let start = rng.clone();
            let draws = NORMAL_CHUNK.min(n - c * NORMAL_CHUNK);
            for _ in 0..2 * draws {
                rng.next_u64();
            }
            start
        })
        .collect();
    let mut out = vec![0.0; n];
    cpu::for_chunks(&mut out, NORMAL_CHUNK, true, |start, chunk| {
        let mut rng = starts[start / NORMAL_CHUNK].clone();
        for z in chunk {
            *z = rng.normal();
        }
    });
    out
}

/// The Fisher–Yates permutation of `0..n` of LANGUAGE §13.4: for i from n−1 down
/// to 1, j = next() mod (i + 1) and `perm[i]`, `perm[j]` are swapped.
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..n).collect();
    let mut rng = Xorshift64::new(seed);
    for i in (1..n).rev() {
        // i + 1 <= n <= usize::MAX, and usize fits in u64 on supported targets.
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        perm.swap(i, j);
    }
    perm
}

/// Whether element `i` is kept by a dropout layer with seed `seed` at training
/// step `step` and drop probability `p` (LANGUAGE §13.7): with
/// key = mix(mix(seed) XOR step), the element is kept when
/// `(mix(key + i·GOLDEN_GAMMA) >> 11) · 2^-53 >= p`.
pub fn dropout_keep(seed: u64, step: u64, i: u64, p: f64) -> bool {
    let key = mix(mix(seed) ^ step);
    let bits = mix(key.wrapping_add(i.wrapping_mul(GOLDEN_GAMMA))) >> 11;
    bits as f64 * TWO_POW_MINUS_53 >= p
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Parses a conformance `expected` text (rows of space-separated numbers).
    pub(crate) fn parse_expected(text: &str) -> Vec<f64> {
        text.split_whitespace()
            .map(|t| match t {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => t.parse().unwrap(),
            })
            .collect()
    }

    /// Random draws must equal the original's values rounded to float32.
    pub(crate) fn assert_f32_equal(got: &[f64], expected: &str) {
        let want = parse_expected(expected);
        assert_eq!(got.len(), want.len(), "length");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(*g as f32, *w as f32, "element {i}: got {g}, expected {w}");
        }
    }

    #[test]
    fn conformance_randn_vec() {
        assert_f32_equal(
            &normal_vec(7, 5),
            "-6.074637427370561 -0.7373349982949087 -0.29549224154138204 \
             -0.9907639263445234 -0.2045640790066751",
        );
    }

    #[test]
    fn conformance_random_vec() {
        assert_f32_equal(
            &uniform_vec(3, 4),
            "0.00000000017600987334276397 0.18751162525223186 0.6763161098893146 \
             0.5623449775993297",
        );
    }

    #[test]
    fn conformance_randn_mat() {
        assert_f32_equal(
            &normal_vec(42, 6),
            "-4.447571185078731 0.6084768532212207 -1.4698077595642407\n\
             -0.868334223070205 -0.5094283196840931 0.7573496791119535",
        );
    }

    #[test]
    fn conformance_embed_init_stream() {
        // embed(5, 3, 1) is 0.1 · randn(1, [5, 3]); rows 0 and 4.
        let draws = normal_vec(1, 15);
        let scaled: Vec<f64> = [0, 1, 2, 12, 13, 14]
            .iter()
            .map(|&i| 0.1 * draws[i])
            .collect();
        assert_f32_equal(
            &scaled,
            "0.6341693511153701 0.0966866061308505 0.11079516872483018\n\
             0.06966274117648905 0.03990052702471445 -0.09374618673108873",
        );
    }

    #[test]
    fn conformance_linear_init_stream() {
        // linear(3, 2, 0) has W = 0.5 · randn(0, [3, 2]) and b = 0; applied to the
        // identity it returns W.
        let w: Vec<f64> = normal_vec(0, 6).iter().map(|z| 0.5 * z).collect();
        assert_f32_equal(
            &w,
            "-0.21641623401912305 0.22652947151320027\n\
             -0.7873300072710386 0.29539665450060926\n\
             -0.24901182127370025 0.534047261263159",
        );
    }

    #[test]
    fn xorshift_step_by_hand() {
        let mut rng = Xorshift64::new(1);
        let mut s: u64 = 1;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        assert_eq!(rng.next_u64(), s);
        assert_eq!(s, 0x0000_0000_4082_2041);
    }

    #[test]
    fn normal_vec_in_chunks_is_the_serial_stream_bit_for_bit() {
        // Two and a half chunks: the chunk starts and the short last chunk.
        let n = 2 * NORMAL_CHUNK + NORMAL_CHUNK / 2;
        let mut rng = Xorshift64::new(99);
        let serial: Vec<u64> = (0..n).map(|_| rng.normal().to_bits()).collect();
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let chunked: Vec<u64> = pool
                .install(|| normal_vec(99, n))
                .iter()
                .map(|z| z.to_bits())
                .collect();
            assert!(chunked == serial, "{threads} threads");
        }
        assert_eq!(normal_vec(99, 3), {
            let mut rng = Xorshift64::new(99);
            vec![rng.normal(), rng.normal(), rng.normal()]
        });
    }

    #[test]
    fn zero_seed_uses_golden_gamma() {
        assert_eq!(Xorshift64::new(0), Xorshift64::new(GOLDEN_GAMMA));
        let mut rng = Xorshift64::new(0);
        assert_ne!(rng.next_u64(), 0);
    }

    #[test]
    fn uniform_range_and_normal_moments() {
        let u = uniform_vec(12345, 20000);
        assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        assert!((mean - 0.5).abs() < 0.01);
        let z = normal_vec(99, 20000);
        let zm = z.iter().sum::<f64>() / z.len() as f64;
        let zv = z.iter().map(|x| (x - zm) * (x - zm)).sum::<f64>() / z.len() as f64;
        assert!(zm.abs() < 0.03 && (zv - 1.0).abs() < 0.05);
        assert!(uniform_vec(1, 0).is_empty());
    }

    #[test]
    fn splitmix_known_values() {
        // Reference values of SplitMix64 seeded with 0 (first outputs).
        assert_eq!(mix(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix(GOLDEN_GAMMA), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn seeds_truncate_saturate_and_wrap() {
        assert_eq!(seed_from_f64(7.9), 7);
        assert_eq!(seed_from_f64(-7.9), (-7i64) as u64);
        assert_eq!(seed_from_f64(-1.0), u64::MAX);
        assert_eq!(seed_from_f64(f64::NAN), 0);
        assert_eq!(seed_from_f64(1e30), i64::MAX as u64);
        assert_eq!(seed_from_f64(-1e30), i64::MIN as u64);
        assert_eq!(seed_from_f64(f64::INFINITY), i64::MAX as u64);
        assert_eq!(seed_from_f64(9007199254740993.0), 9007199254740992);
    }

    #[test]
    fn conformance_shuffle_and_split_permutations() {
        // shuffle(reshape(iota(12), [6, 2]), 9) gives rows 2 5 0 4 1 3.
        assert_eq!(permutation(6, 9), vec![2, 5, 0, 4, 1, 3]);
        // split(reshape(iota(20), [10, 2]), 0.7, 3) gives rows 4 1 0 2 8 5 7.
        assert_eq!(&permutation(10, 3)[..7], &[4, 1, 0, 2, 8, 5, 7]);
    }

    #[test]
    fn permutation_by_hand_and_edges() {
        let mut rng = Xorshift64::new(5);
        let mut perm = vec![0, 1, 2];
        let j = (rng.next_u64() % 3) as usize;
        perm.swap(2, j);
        let j = (rng.next_u64() % 2) as usize;
        perm.swap(1, j);
        assert_eq!(permutation(3, 5), perm);
        assert!(permutation(0, 1).is_empty());
        assert_eq!(permutation(1, 1), vec![0]);
        let mut p = permutation(1000, 77);
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn dropout_mask_rule() {
        let key = mix(mix(3) ^ 10);
        for i in 0..64u64 {
            let u = (mix(key.wrapping_add(i.wrapping_mul(GOLDEN_GAMMA))) >> 11) as f64
                * TWO_POW_MINUS_53;
            assert_eq!(dropout_keep(3, 10, i, 0.5), u >= 0.5);
        }
        assert!((0..100).all(|i| dropout_keep(1, 0, i, 0.0)));
        assert!((0..100).all(|i| !dropout_keep(1, 0, i, 1.0)));
        let kept = (0..10000).filter(|&i| dropout_keep(42, 7, i, 0.3)).count();
        assert!((6700..7300).contains(&kept));
        // Different steps give different masks.
        let a: Vec<bool> = (0..64).map(|i| dropout_keep(42, 1, i, 0.5)).collect();
        let b: Vec<bool> = (0..64).map(|i| dropout_keep(42, 2, i, 0.5)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn the_devices_dropout_key_is_this_rule() {
        // The kernels get the key as its parts; they must make the same key.
        for (seed, step) in [(3, 10), (0, 0), (u64::MAX, 7), (42, u64::MAX)] {
            let parts = mlpl_devices::DropoutKey {
                stream: mix(seed),
                counter: step,
            };
            assert_eq!(
                parts.key(),
                mix(mix(seed) ^ step),
                "seed {seed}, step {step}"
            );
        }
    }
}
