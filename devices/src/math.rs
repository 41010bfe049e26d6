//! Element-wise math with one result on every CPU.
//!
//! `f32::exp`, `f64::ln` and the other transcendental methods of the standard
//! library call the C library of the machine, whose results may depend on the
//! CPU (glibc, for one, picks an FMA or a non-FMA variant of `exp`, `log`, `sin`
//! and `pow` when a program starts) and differ between C libraries and their
//! versions. The functions here are CORE-MATH's (the `core-math` crate), which
//! are *correctly rounded*: each returns the float nearest the exact value, so
//! there is only one possible answer and every CPU, compiler and operating
//! system gives it. Every kernel and host algorithm whose numbers a user sees
//! calls these; square roots, `abs`, `min`, `max`, `powi` and the four basic
//! operations are exact IEEE operations already. A unit test fails when the
//! sources call the standard library's transcendental methods outside tests.

pub use core_math::{
    cos, cosf, exp, expf, log, log10, log10f, logf, pow, powf, sin, sinf, tanh, tanhf,
};

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The standard library's transcendental float methods (`log`, with a
    /// base, is left out: too many loggers share the name).
    const FORBIDDEN: &[&str] = &[
        "exp", "exp2", "exp_m1", "ln", "ln_1p", "log2", "log10", "powf", "sin", "cos", "tan",
        "sinh", "cosh", "tanh", "asin", "acos", "atan", "atan2", "cbrt", "hypot",
    ];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    rust_files(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(path);
            }
        }
    }

    /// The lines of `text` before its first `#[cfg(test)]` (test modules sit
    /// at the end of a file) that call a forbidden method (`x.exp(`) or name
    /// one (`f32::exp`).
    fn forbidden_calls(text: &str) -> Vec<String> {
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let is_ident = |c: char| c.is_alphanumeric() || c == '_';
        let mut found = Vec::new();
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            let hit = FORBIDDEN.iter().any(|name| {
                line.contains(&format!(".{name}("))
                    || ["f32::", "f64::"].iter().any(|ty| {
                        line.match_indices(&format!("{ty}{name}"))
                            .any(|(i, m)| !line[i + m.len()..].starts_with(is_ident))
                    })
            });
            if hit {
                found.push(format!("line {}: {}", n + 1, line.trim()));
            }
        }
        found
    }

    #[test]
    fn the_sources_use_the_portable_functions() {
        assert!(!forbidden_calls("let y = x.exp();").is_empty());
        assert!(!forbidden_calls("map(src, f32::tanh);").is_empty());
        assert!(!forbidden_calls("a.powf(b)").is_empty());
        assert!(forbidden_calls("let y = math::expf(x); // x.exp()").is_empty());
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for crate_dir in ["devices/src", "runtime/src", "lsp/src"] {
            rust_files(&root.join(crate_dir), &mut files);
        }
        assert!(files.len() > 20, "found the workspace's sources");
        let bad: Vec<String> = files
            .iter()
            .flat_map(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                forbidden_calls(&text)
                    .into_iter()
                    .map(move |c| format!("{}: {c}", f.display()))
            })
            .collect();
        assert!(
            bad.is_empty(),
            "call mlpl_devices::math (same bits on every CPU) instead of the standard library:\n{}",
            bad.join("\n")
        );
    }
}
