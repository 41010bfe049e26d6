//! "Did you mean" suggestions for misspelled names.

/// The candidate closest to `name` by edit distance, if it is close enough
/// (at most a third of the name's length, and at least 1 edit allowed).
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .filter(|c| *c != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_close_names() {
        assert_eq!(
            closest(
                "reduce_ad",
                ["reduce_add", "reduce_mul", "iota"].into_iter()
            ),
            Some("reduce_add")
        );
        assert_eq!(closest("xyz", ["reduce_add"].into_iter()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
