//! Property tests of the checker: randomly generated well-shaped programs (which
//! the interpreter runs without error) never get a checker error, and randomly
//! mutated programs never crash it.

use mlpl_lang::check::check_source;
use mlpl_lang::eval::{Interp, Workspace};
use mlpl_syntax::parse;
use proptest::prelude::*;

use crate::check_support;

/// A tiny deterministic generator (SplitMix64) driving the program builder.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// A variable of the generated program: its shape and axis names.
#[derive(Clone)]
struct Var {
    name: String,
    shape: Vec<usize>,
    names: Vec<Option<String>>,
}

const AXES: &[&str] = &["batch", "feat", "hidden", "time"];

fn shape_lit(s: &[usize]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Whether two named shapes broadcast without error (LANGUAGE §9).
fn compatible(a: &Var, b: &Var) -> Option<(Vec<usize>, Vec<Option<String>>)> {
    let rank = a.shape.len().max(b.shape.len());
    let mut shape = vec![0; rank];
    let mut names = vec![None; rank];
    for k in 1..=rank {
        let da = (k <= a.shape.len()).then(|| a.shape[a.shape.len() - k]);
        let db = (k <= b.shape.len()).then(|| b.shape[b.shape.len() - k]);
        let na = (k <= a.names.len())
            .then(|| a.names[a.names.len() - k].clone())
            .flatten();
        let nb = (k <= b.names.len())
            .then(|| b.names[b.names.len() - k].clone())
            .flatten();
        shape[rank - k] = match (da, db) {
            (Some(x), Some(y)) if x == y || y == 1 => x,
            (Some(1), Some(y)) => y,
            (Some(_), Some(_)) => return None,
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => unreachable!(),
        };
        names[rank - k] = match (na, nb) {
            (Some(x), Some(y)) if x != y => return None,
            (Some(x), _) | (None, Some(x)) => Some(x),
            (None, None) => None,
        };
    }
    Some((shape, names))
}

/// A random program whose every statement is well shaped.
fn well_shaped(seed: u64, len: usize) -> String {
    let mut r = Rng(seed);
    let mut vars: Vec<Var> = Vec::new();
    let mut out = String::new();
    let dims = [1usize, 2, 3, 4];
    for i in 0..len {
        let name = format!("v{i}");
        let choice = if vars.is_empty() { 0 } else { r.below(11) };
        let (expr, shape, names): (String, Vec<usize>, Vec<Option<String>>) = match choice {
            0 | 1 => {
                let rank = r.below(3);
                let s: Vec<usize> = (0..rank).map(|_| *r.pick(&dims)).collect();
                let e = match r.below(3) {
                    0 => format!("zeros({})", shape_lit(&s)),
                    1 => format!("randn({}, {})", r.below(9), shape_lit(&s)),
                    _ => format!(
                        "reshape(iota({}), {})",
                        s.iter().product::<usize>(),
                        shape_lit(&s)
                    ),
                };
                let n = vec![None; s.len()];
                (e, s, n)
            }
            2 => {
                // Label with distinct names (an annotation or `label`).
                let v = r.pick(&vars).clone();
                let mut pool: Vec<&str> = AXES.to_vec();
                let names: Vec<Option<String>> = (0..v.shape.len())
                    .map(|_| {
                        let k = r.below(pool.len());
                        Some(pool.remove(k).to_string())
                    })
                    .collect();
                let list = names
                    .iter()
                    .map(|n| format!("\"{}\"", n.as_deref().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(", ");
                (
                    format!("label({}, [{list}])", v.name),
                    v.shape.clone(),
                    names,
                )
            }
            3 | 4 => {
                let a = r.pick(&vars).clone();
                let b = r.pick(&vars).clone();
                match compatible(&a, &b) {
                    Some((s, n)) => {
                        let op = r.pick(&["+", "-", "*", "/"]);
                        (format!("{} {op} {}", a.name, b.name), s, n)
                    }
                    None => (format!("{} * 2", a.name), a.shape.clone(), a.names.clone()),
                }
            }
            5 => {
                let a = r.pick(&vars).clone();
                let rev_s: Vec<usize> = a.shape.iter().rev().cloned().collect();
                let rev_n: Vec<Option<String>> = a.names.iter().rev().cloned().collect();
                (format!("transpose({})", a.name), rev_s, rev_n)
            }
            6 => {
                let a = r.pick(&vars).clone();
                if a.shape.is_empty() {
                    (format!("sum({})", a.name), vec![], vec![])
                } else {
                    let ax = r.below(a.shape.len());
                    let mut s = a.shape.clone();
                    s.remove(ax);
                    let mut n = a.names.clone();
                    n.remove(ax);
                    let f = r.pick(&["sum", "mean", "reduce_mul"]);
                    (format!("{f}({}, {ax})", a.name), s, n)
                }
            }
            7 => {
                // A matmul whose inner sizes and names agree by construction.
                let a = r.pick(&vars).clone();
                if a.shape.len() == 2 {
                    let n = *r.pick(&dims);
                    let b_names = vec![a.names[1].clone(), None];
                    let lit = match &a.names[1] {
                        Some(x) => format!("label(ones([{}, {n}]), [\"{x}\", \"\"])", a.shape[1]),
                        None => format!("ones([{}, {n}])", a.shape[1]),
                    };
                    let _ = b_names;
                    (
                        format!("matmul({}, {lit})", a.name),
                        vec![a.shape[0], n],
                        vec![a.names[0].clone(), None],
                    )
                } else {
                    (format!("neg({})", a.name), a.shape.clone(), a.names.clone())
                }
            }
            8 => {
                let a = r.pick(&vars).clone();
                let n: usize = a.shape.iter().product();
                (format!("reshape({}, [{n}])", a.name), vec![n], vec![None])
            }
            9 => {
                let a = r.pick(&vars).clone();
                if a.shape.is_empty() {
                    (format!("exp({})", a.name), vec![], vec![])
                } else {
                    (
                        format!("softmax({})", a.name),
                        a.shape.clone(),
                        vec![None; a.shape.len()],
                    )
                }
            }
            _ => {
                // A loop that keeps the shape of what it updates.
                let a = r.pick(&vars).clone();
                let kw = r.pick(&["repeat", "train"]);
                out.push_str(&format!(
                    "{kw} {} {{\n  {} = {} * 0.5\n  sum({})\n}}\n",
                    1 + r.below(3),
                    a.name,
                    a.name,
                    a.name
                ));
                (format!("{} + 0", a.name), a.shape.clone(), a.names.clone())
            }
        };
        let names = if names.iter().all(|n| n.is_none()) {
            vec![None; shape.len()]
        } else {
            names
        };
        out.push_str(&format!("{name} = {expr}\n"));
        vars.push(Var { name, shape, names });
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn well_shaped_programs_check_clean(seed in any::<u64>(), len in 1usize..30) {
        let src = well_shaped(seed, len);
        // The generator is right only if the interpreter agrees.
        let mut it = Interp::new(Workspace::new());
        let run = it.run(&parse(&src).program);
        prop_assert!(run.is_ok(), "generated program fails at run time: {:?}\n{src}", run.err());
        let errors: Vec<_> = check_source(&src)
            .diagnostics
            .into_iter()
            .filter(|d| d.is_error())
            .collect();
        prop_assert!(errors.is_empty(), "false alarm: {errors:?}\n{src}");
    }

    #[test]
    fn well_shaped_programs_agree_with_the_runtime(seed in any::<u64>(), len in 1usize..30) {
        let src = well_shaped(seed, len);
        check_support::check_agreement("generated", &src, None);
    }

    #[test]
    fn mutated_programs_never_crash_the_checker(
        seed in any::<u64>(),
        len in 1usize..20,
        edits in proptest::collection::vec((any::<u16>(), 0usize..12), 1..6),
    ) {
        let mut src: Vec<char> = well_shaped(seed, len).chars().collect();
        const PIECES: &[&str] = &[
            "(", ")", "[", "]", "{", "}", ",", "-1", "0", "1e9", "\"x\"", "matmul(", "repeat 3 {",
            "for i in ", "device(\"cuda\") {", "param[", ":", "=", "label(", "train 2 {", "\n", "#",
            "reshape(", "[-1, -1]", "step", "last_rows", "grad(", "adam(", "1e300", "apply(chain(linear(4, 2, 0), relu_layer()), ", "residual(", "attention(8, 2, 0", "svg(", "2.5", "\"a,b\"",
        ];
        for (pos, kind) in edits {
            let at = if src.is_empty() { 0 } else { pos as usize % (src.len() + 1) };
            match kind {
                0..=3 => {
                    let end = (at + 1 + kind).min(src.len());
                    src.drain(at..end);
                }
                _ => {
                    let piece = PIECES[(pos as usize + kind) % PIECES.len()];
                    for (k, ch) in piece.chars().enumerate() {
                        src.insert(at + k, ch);
                    }
                }
            }
        }
        let text: String = src.into_iter().collect();
        let _ = check_source(&text);
    }
}

#[test]
fn generator_covers_named_and_looping_programs() {
    let src: String = (0..20).map(|s| well_shaped(s, 25)).collect();
    assert!(src.contains("label("));
    assert!(src.contains("matmul("));
    assert!(src.contains("repeat") || src.contains("train"));
}
