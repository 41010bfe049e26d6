//! The builtin registry is the single source of truth (DESIGN §3): every builtin
//! has docs and an example that runs.

use crate::common;

use std::collections::HashSet;

use mlpl_lang::builtins;

/// Appendix B of the language reference.
const APPENDIX_B: &str = "abs adam adamw add apply apply_tokenizer argmax argtop_k attention attention_weights aux_loss batch batch_mask blobs boundary_2d calibrate_device causal_attention chain circles clone_model compare concat confusion_matrix cosine_schedule cross_entropy decode decode_bytes div dot dropout embed embed_table eq estimate_hypothetical estimate_train exp feasible fill freeze gelu gelu_layer grad grid gt hist iota knn label labels last_row layer_norm linear linear_warmup llm_call load load_preloaded load_weights log log_softmax lora loss_curve lt matmul mean moe momentum_sgd moons mul neg one_hot ones pairwise_sqdist pca perturb_params pow randn random rank reduce_add reduce_mul reinit relabel relu relu_layer reshape reshape_labeled residual rms_norm rope sample save scatter scatter_labeled shape shift_pairs_x shift_pairs_y shuffle sigmoid silu silu_layer sinusoidal_encoding softmax softmax_layer split sqrt sub sum svg swiglu tanh tanh_fn tanh_layer to_device tokenize_bytes tokenizer top_k train_bpe transpose tsne unfreeze val_split zeros";

/// Every registered builtin beyond the reference (one an issue added) has a
/// section in the project's own language page, `docs/language.md`, so a new
/// builtin fails here until it is documented.
#[test]
fn every_extension_is_documented_in_docs_language_md() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/language.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let reference: HashSet<&str> = APPENDIX_B.split_whitespace().collect();
    let extensions: Vec<&str> = builtins::all()
        .map(|b| b.name)
        .filter(|n| !reference.contains(n))
        .collect();
    assert!(extensions.contains(&"logsumexp"), "{extensions:?}");
    for name in extensions {
        assert!(
            page.contains(&format!("### `{name}(")),
            "`{name}` is not in LANGUAGE.md Appendix B and has no section in {}",
            path.display()
        );
    }
}

#[test]
fn appendix_b_lists_122_builtins() {
    assert_eq!(APPENDIX_B.split_whitespace().count(), 122);
}

#[test]
fn every_builtin_is_declared_once() {
    let mut seen = HashSet::new();
    for b in builtins::all() {
        assert!(seen.insert(b.name), "`{}` is declared twice", b.name);
    }
}

#[test]
fn every_reference_builtin_is_registered_or_listed_as_not_yet_available() {
    for name in APPENDIX_B.split_whitespace() {
        let registered = builtins::lookup(name).is_some();
        let pending = builtins::NOT_YET_AVAILABLE.contains(&name);
        assert!(
            registered != pending,
            "`{name}`: registered={registered}, listed as not yet available={pending}"
        );
    }
}

#[test]
fn every_builtin_has_docs_and_a_runnable_example() {
    let dir = std::env::temp_dir().join(format!("mlpl-registry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for b in builtins::all() {
        assert!(!b.summary.trim().is_empty(), "`{}` has no summary", b.name);
        assert!(
            b.doc.len() > b.summary.len(),
            "`{}` needs a longer doc than its summary",
            b.name
        );
        assert!(
            b.example.contains(&format!("{}(", b.name)),
            "`{}`'s example does not call it",
            b.name
        );
        assert!(!b.section.is_empty());
        let out = common::run_in(b.example, Some(&dir));
        // `llm_call`'s example needs a server (and these runs have no HTTP
        // client): it runs up to the request, which fails as documented.
        if b.name == "llm_call" {
            assert_eq!(out.result.unwrap_err().code, "E0408");
            continue;
        }
        if let Err(d) = out.result {
            panic!(
                "example of `{}` failed: {} {}\n{}",
                b.name, d.code, d.message, b.example
            );
        }
    }
}

/// The facts on the entries agree with the rest of the entry: only a builtin
/// with side effects (∂ = —) needs leave to appear in a loss; an optimizer takes
/// its loss and parameters unevaluated and has side effects; a parameterised
/// constructor may appear in a loss.
#[test]
fn facts_agree_with_the_entries() {
    use builtins::{Diff, ParamKind};
    let mut optimizers = 0;
    for b in builtins::all() {
        let f = b.facts;
        if f.allowed_in_loss {
            assert_eq!(
                b.diff,
                Diff::Effect,
                "`{}`: allowed in a loss but ∂ is not —",
                b.name
            );
        }
        if f.optimizer {
            optimizers += 1;
            assert_eq!(b.diff, Diff::Effect, "`{}`", b.name);
            let kinds: Vec<ParamKind> = b.params.iter().take(2).map(|p| p.kind).collect();
            assert_eq!(kinds, [ParamKind::Lazy, ParamKind::Lazy], "`{}`", b.name);
        }
        if f.parameterised {
            assert!(
                f.allowed_in_loss,
                "`{}`: a constructor is allowed in a loss",
                b.name
            );
        }
    }
    assert_eq!(optimizers, 3, "adam, adamw and momentum_sgd");
}
