//! Property tests of the checker: randomly generated well-shaped programs (which
//! the interpreter runs without error) never get a checker error, and randomly
//! mutated programs never crash it. The programs define and call user
//! functions (annotated with dimension names, unannotated, calling each other),
//! and programs of random signatures and calls, recursion included, crash
//! neither the checker nor the interpreter.

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
    // User functions defined so far: name and the rank their signature takes.
    let mut fns: Vec<(String, usize)> = Vec::new();
    let mut out = String::new();
    let dims = [1usize, 2, 3, 4];
    for i in 0..len {
        let name = format!("v{i}");
        let choice = if vars.is_empty() { 0 } else { r.below(14) };
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
            11 | 12 => {
                // A call of a user function taking the rank of `a` (its shape
                // and names come back): an existing one, or one defined here
                // with one dimension name per axis, whose body may call an
                // earlier function of the same rank.
                let a = r.pick(&vars).clone();
                let rank = a.shape.len();
                let same: Vec<&(String, usize)> = fns.iter().filter(|f| f.1 == rank).collect();
                let f = if rank > 0 && (same.is_empty() || r.below(2) == 0) {
                    let f = format!("f{i}");
                    let sig = (0..rank)
                        .map(|k| format!("d{k}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let inner = match same.first() {
                        Some((g, _)) if r.below(2) == 0 => format!("{g}(x)"),
                        _ => "x".to_string(),
                    };
                    out.push_str(&format!(
                        "fn {f}(x : [{sig}]) -> [{sig}] {{\n  y = {inner} * 2\n  y - x\n}}\n"
                    ));
                    fns.push((f.clone(), rank));
                    f
                } else if let Some((g, _)) = same.first() {
                    g.clone()
                } else {
                    // Rank 0: an unannotated function.
                    let f = format!("f{i}");
                    out.push_str(&format!("fn {f}(x) {{ x + 1 }}\n"));
                    fns.push((f.clone(), 0));
                    f
                };
                (format!("{f}({})", a.name), a.shape.clone(), a.names.clone())
            }
            13 => {
                // An unannotated function of two arguments that broadcast.
                let a = r.pick(&vars).clone();
                let b = r.pick(&vars).clone();
                let g = format!("g{i}");
                out.push_str(&format!("fn {g}(x, y) {{ x * y + x }}\n"));
                match compatible(&a, &b) {
                    Some((s, n)) => (format!("{g}({}, {})", a.name, b.name), s, n),
                    None => (
                        format!("{g}({}, 2)", a.name),
                        a.shape.clone(),
                        a.names.clone(),
                    ),
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
            "fn h(x : [n, d]) -> [n] { ", "fn ", " -> [d, 2 * d]", ": [d / 2, _]", "f1(", "g2(v0, ", "fn f1(x) { f1(x) }\n",
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
fn generator_covers_named_looping_and_function_programs() {
    let src: String = (0..20).map(|s| well_shaped(s, 25)).collect();
    assert!(src.contains("label("));
    assert!(src.contains("matmul("));
    assert!(src.contains("repeat") || src.contains("train"));
    assert!(src.contains("fn f") && src.contains("fn g"));
    assert!(src.contains("-> [d0, d1]"), "a rank-2 signature");
    // A body calling an earlier function.
    assert!(src.contains("y = f"), "{src}");
}

/// A program of random definitions and calls: signatures over names, `_`,
/// sizes and arithmetic; bodies that add, multiply, reduce, call the other
/// function or recurse; arguments of every kind.
fn random_signatures(seed: u64) -> String {
    let mut r = Rng(seed);
    const DIMS: &[&str] = &[
        "n", "d", "2 * d", "d / 2", "_", "3", "n + 1", "d - 4", "n * d",
    ];
    const BODIES: &[&str] = &[
        "x0",
        "x0 + x1",
        "matmul(x0, x1)",
        "sum(x0, 0)",
        "g(x0)",
        "f(x0, x1)",
        "transpose(x0)",
        "reshape(x0, [-1])",
        "h = x0 * 2\n  h + x1",
        "apply(linear(3, 2, 0), x0)",
        "f(x0 + 1, x1)",
    ];
    const ARGS: &[&str] = &[
        "ones([2, 3])",
        "ones([3])",
        "iota(4)",
        "\"s\"",
        "linear(2, 3, 0)",
        "ones([6, 3])",
        "ones([0])",
        "2",
        "ones([3, 3])",
        "label(ones([2, 3]), [\"a\", \"b\"])",
    ];
    let mut out = String::new();
    for f in ["f", "g"] {
        let params: Vec<String> = (0..2)
            .map(|k| {
                if r.below(3) == 0 {
                    format!("x{k}")
                } else {
                    let dims: Vec<&str> = (0..r.below(3) + 1).map(|_| *r.pick(DIMS)).collect();
                    format!("x{k} : [{}]", dims.join(", "))
                }
            })
            .collect();
        let ret = if r.below(2) == 0 {
            format!(" -> [{}]", r.pick(DIMS))
        } else {
            String::new()
        };
        let body = r
            .pick(BODIES)
            .replace("x1", if f == "g" { "x0" } else { "x1" });
        let params = if f == "g" { &params[..1] } else { &params[..] };
        out.push_str(&format!(
            "fn {f}({}){ret} {{\n  {body}\n}}\n",
            params.join(", ")
        ));
    }
    for i in 0..1 + r.below(3) {
        let call = if r.below(2) == 0 {
            format!("f({}, {})", r.pick(ARGS), r.pick(ARGS))
        } else {
            format!("g({})", r.pick(ARGS))
        };
        out.push_str(&format!("r{i} = {call}\n"));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_signatures_and_calls_never_crash_the_checker_or_the_interpreter(seed in any::<u64>()) {
        let src = random_signatures(seed);
        let checked = check_source(&src);
        let mut it = Interp::new(Workspace::new());
        // An error must come with a place in the source.
        if let Err(d) = it.run(&checked.program) {
            prop_assert!(d.primary.is_some(), "{d:?}\n{src}");
        }
    }
}
