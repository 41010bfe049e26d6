//! Preloaded corpora (LANGUAGE §16.3): texts compiled into the runtime so that
//! `load_preloaded(name)` needs no data directory. The bytes are exactly those of
//! the original MLPL.

/// The names `load_preloaded` accepts, in the order diagnostics list them.
pub const NAMES: &[&str] = &["tiny_corpus", "tiny_shakespeare_snippet"];

/// Two pangram lines (86 bytes).
const TINY_CORPUS: &str = include_str!("../../data/tiny_corpus.txt");

/// 2028 bytes of public-domain Shakespeare.
const TINY_SHAKESPEARE_SNIPPET: &str = include_str!("../../data/tiny_shakespeare_snippet.txt");

/// The text of the preloaded corpus `name`, or `None` for an unknown name
/// (E0104, whose message lists [`NAMES`]).
pub fn preloaded(name: &str) -> Option<&'static str> {
    match name {
        "tiny_corpus" => Some(TINY_CORPUS),
        "tiny_shakespeare_snippet" => Some(TINY_SHAKESPEARE_SNIPPET),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_corpus_bytes() {
        assert_eq!(
            preloaded("tiny_corpus"),
            Some(
                "the quick brown fox jumps over the lazy dog.\n\
                 pack my box with five dozen liquor jugs.\n"
            )
        );
        assert_eq!(preloaded("tiny_corpus").unwrap().len(), 86);
    }

    #[test]
    fn shakespeare_snippet_bytes() {
        let text = preloaded("tiny_shakespeare_snippet").unwrap();
        assert_eq!(text.len(), 2028);
        assert!(text.starts_with("First Citizen:\nBefore we proceed any further, hear me speak.\n"));
        assert!(text.ends_with("who comes here?\n"));
    }

    #[test]
    fn every_name_resolves_and_others_do_not() {
        for name in NAMES {
            assert!(preloaded(name).is_some(), "{name}");
        }
        assert_eq!(preloaded("shakespeare"), None);
        assert_eq!(preloaded(""), None);
        assert_eq!(preloaded("Tiny_Corpus"), None);
    }
}
