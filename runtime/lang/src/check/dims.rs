//! Size arithmetic over [`Dim`]s for shape rules: products, divisions and
//! derived symbols. A derived symbol is a canonical text (`B·16`, `⌊T/17⌋`), so
//! two sizes derived the same way from the same symbols compare equal.

use super::abstract_value::{Dim, MAX_CONST};

/// The product of sizes: known when all are, 0 when one is known to be 0, a
/// canonical symbol (`N·C·4`) when the unknown factors are all symbols.
pub fn product(dims: &[Dim]) -> Dim {
    if dims.contains(&Dim::Known(0)) {
        return Dim::Known(0);
    }
    let mut known: usize = 1;
    let mut symbols: Vec<&str> = Vec::new();
    for d in dims {
        match d {
            Dim::Known(n) => match known.checked_mul(*n) {
                Some(k) => known = k,
                None => return Dim::Unknown,
            },
            Dim::Symbol(s) => symbols.push(s),
            Dim::Unknown => return Dim::Unknown,
        }
    }
    if symbols.is_empty() {
        return Dim::Known(known);
    }
    symbols.sort_unstable();
    let mut s = symbols.join("·");
    if known != 1 {
        s.push_str(&format!("·{known}"));
    }
    Dim::Symbol(s)
}

/// ⌈d / k⌉ for a positive `k`.
pub fn ceil_div(d: &Dim, k: usize) -> Dim {
    match d {
        _ if k == 0 => Dim::Unknown,
        Dim::Known(n) => Dim::Known(n.div_ceil(k)),
        Dim::Symbol(s) if k == 1 => Dim::Symbol(s.clone()),
        Dim::Symbol(s) => Dim::Symbol(format!("⌈{s}/{k}⌉")),
        Dim::Unknown => Dim::Unknown,
    }
}

/// ⌊d / k⌋ for a positive `k`.
pub fn floor_div(d: &Dim, k: usize) -> Dim {
    match d {
        _ if k == 0 => Dim::Unknown,
        Dim::Known(n) => Dim::Known(n / k),
        Dim::Symbol(s) if k == 1 => Dim::Symbol(s.clone()),
        Dim::Symbol(s) => Dim::Symbol(format!("⌊{s}/{k}⌋")),
        Dim::Unknown => Dim::Unknown,
    }
}

/// A size derived from `d` by a named function with constant arguments, e.g.
/// `split(N, 0.8)`; known when `f` can compute it.
pub fn derived(d: &Dim, label: &str, f: impl Fn(usize) -> Option<usize>) -> Dim {
    match d {
        Dim::Known(n) => f(*n).map_or(Dim::Unknown, Dim::Known),
        Dim::Symbol(s) => Dim::Symbol(format!("{label}({s})")),
        Dim::Unknown => Dim::Unknown,
    }
}

/// Reduces constant data of `shape` along `axis` with `f` over each lane; `None`
/// when the result would not be a small constant (an empty input of huge sizes,
/// `zeros([1e20, 0])`, reduces to 10^20 elements: the sizes are never allocated).
pub fn fold_axis(
    data: &[f64],
    shape: &[usize],
    axis: usize,
    f: impl Fn(&[f64]) -> f64,
) -> Option<Vec<f64>> {
    let product = |s: &[usize]| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let outer = product(&shape[..axis])?;
    let len = shape[axis];
    let inner = product(&shape[axis + 1..])?;
    let count = outer.checked_mul(inner).filter(|&n| n <= MAX_CONST)?;
    if count.checked_mul(len) != Some(data.len()) {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    let mut lane = Vec::with_capacity(len);
    for o in 0..outer {
        for i in 0..inner {
            lane.clear();
            lane.extend((0..len).map(|k| data[(o * len + k) * inner + i]));
            out.push(f(&lane));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_are_canonical() {
        let b = Dim::Symbol("B".into());
        assert_eq!(
            product(&[b.clone(), Dim::Known(16)]),
            Dim::Symbol("B·16".into())
        );
        assert_eq!(
            product(&[Dim::Known(16), b.clone()]),
            Dim::Symbol("B·16".into())
        );
        assert_eq!(product(&[Dim::Known(2), Dim::Known(3)]), Dim::Known(6));
        assert_eq!(product(&[Dim::Unknown, Dim::Known(0)]), Dim::Known(0));
        assert_eq!(product(std::slice::from_ref(&b)), b);
        assert_eq!(
            floor_div(&Dim::Symbol("T".into()), 17),
            Dim::Symbol("⌊T/17⌋".into())
        );
        assert_eq!(ceil_div(&Dim::Known(5), 2), Dim::Known(3));
    }

    #[test]
    fn folding_along_an_axis() {
        let data: Vec<f64> = (0..6).map(f64::from).collect();
        assert_eq!(
            fold_axis(&data, &[2, 3], 1, |l| l.iter().sum()).unwrap(),
            vec![3.0, 12.0]
        );
        assert_eq!(
            fold_axis(&data, &[2, 3], 0, |l| l.iter().sum()).unwrap(),
            vec![3.0, 5.0, 7.0]
        );
    }
}
