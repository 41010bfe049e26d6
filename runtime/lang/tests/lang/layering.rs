//! The layering of `docs/architecture.md`, enforced: the crates depend on each
//! other only downwards (its "Crates" table), `mlpl-lang` and `mlpl-lsp` pull in
//! no runner crates, and inside `mlpl-lang` every `crate::…` path of a module
//! names a module its row of the "Modules of `mlpl-lang`" table allows. The
//! tables are read from the document itself, so the map and the code cannot drift.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the Markdown table that follows the heading `heading`: the
/// backticked name of the first cell and the backticked names of the last cell.
fn table(doc: &str, heading: &str) -> BTreeMap<String, BTreeSet<String>> {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/architecture.md has no heading {heading:?}"));
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in doc[start..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Some(name) = backticked(cells[0]).into_iter().next() else {
            continue; // the header and the separator row
        };
        let uses = backticked(cells[cells.len() - 1]).into_iter().collect();
        rows.insert(name, uses);
    }
    assert!(!rows.is_empty(), "the table under {heading:?} is empty");
    rows
}

/// The `code` spans of a table cell, without any `::path` after a name.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.split("::").next().unwrap_or(s).to_string())
        .collect()
}

/// `text` without comments, string and char literals (so a path written in a
/// doc comment or a message is not an import).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            // A raw string, r"…" or r#"…"#: no escapes; it ends at the quote
            // followed by as many hashes.
            b'r' if raw_string_start(b, i).is_some() => {
                let hashes = raw_string_start(b, i).unwrap_or(0);
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += 2 + hashes;
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 3,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// The number of `#`s when a raw string literal starts at `i` (`r"`, `r#"`, …,
/// not inside an identifier).
fn raw_string_start(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    (b.get(i + 1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// The top-level modules of the crate that `code` (a file at module depth
/// `depth`: 1 for `src/m.rs` and `src/m/mod.rs`) names through `crate::` or
/// through as many `super::` as lead to the crate root.
fn modules_named(code: &str, depth: usize, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let root_super = "super::".repeat(depth);
    for prefix in ["crate::".to_string(), root_super] {
        for (at, _) in code.match_indices(&prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at + prefix.len()..];
            let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end].split(',').collect()
            } else {
                vec![rest]
            };
            for n in names {
                let n: String = n
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if modules.contains(&n) {
                    found.insert(n);
                }
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Where a source file of `src` sits: its top-level module and module depth.
fn place(src: &Path, file: &Path) -> Option<(String, usize)> {
    let rel = file.strip_prefix(src).unwrap();
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts == ["lib"] {
        return None;
    }
    let depth = parts.len() - usize::from(parts.last().is_some_and(|p| p == "mod"));
    Some((parts[0].clone(), depth))
}

/// Every `crate::` reference of `mlpl-lang` that its row does not allow, as
/// `file: module uses other`.
fn upward_imports(
    src: &Path,
    files: &[(PathBuf, String)],
    rules: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let modules: BTreeSet<String> = rules.keys().cloned().collect();
    let mut bad = Vec::new();
    for (path, text) in files {
        let Some((module, depth)) = place(src, path) else {
            continue;
        };
        let Some(allowed) = rules.get(&module) else {
            bad.push(format!("{}: module `{module}` has no row", path.display()));
            continue;
        };
        for used in modules_named(&code_only(text), depth, &modules) {
            if used != module && !allowed.contains(&used) {
                bad.push(format!("{}: `{module}` uses `{used}`", path.display()));
            }
        }
    }
    bad
}

fn lang_sources() -> (PathBuf, Vec<(PathBuf, String)>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    let files = paths
        .into_iter()
        .map(|p| {
            let text = read(&p);
            (p, text)
        })
        .collect();
    (src, files)
}

fn architecture() -> String {
    read(&repo().join("docs/architecture.md"))
}

#[test]
fn every_module_of_mlpl_lang_uses_only_the_modules_its_row_allows() {
    let rules = table(&architecture(), "## Modules of `mlpl-lang`");
    let (src, files) = lang_sources();
    let on_disk: BTreeSet<String> = files
        .iter()
        .filter_map(|(p, _)| place(&src, p))
        .map(|p| p.0)
        .collect();
    let documented: BTreeSet<String> = rules.keys().cloned().collect();
    assert_eq!(on_disk, documented, "modules on disk vs rows of the table");
    let bad = upward_imports(&src, &files, &rules);
    assert!(bad.is_empty(), "imports that point up:\n{}", bad.join("\n"));
}

/// The architecture invariant the table alone cannot state, since `builtins`
/// holds both sides: the checker, and the shape rules it runs, never use the
/// interpreter.
#[test]
fn the_checker_and_the_shape_rules_never_use_the_interpreter() {
    let (src, files) = lang_sources();
    let checker: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter(|(p, _)| {
            let rel = p
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            rel.starts_with("check/")
                || (rel.starts_with("builtins/") && rel.ends_with("_shapes.rs"))
                || rel.starts_with("errors/")
        })
        .collect();
    assert!(checker.len() > 20, "found the checker's files");
    let modules: BTreeSet<String> = ["eval".to_string()].into();
    let bad: Vec<String> = checker
        .iter()
        .filter(|(p, text)| {
            let depth = place(&src, p).unwrap().1;
            !modules_named(&code_only(text), depth, &modules).is_empty()
        })
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert!(bad.is_empty(), "these use `eval`:\n{}", bad.join("\n"));
}

/// The table is enforced: an upward `use` added to a low module is reported,
/// as is one written through `super::` or in a `use crate::{…}` group.
#[test]
fn an_upward_import_is_reported() {
    let rules = table(&architecture(), "## Modules of `mlpl-lang`");
    let src = PathBuf::from("src");
    let probe = |file: &str, text: &str| {
        upward_imports(&src, &[(src.join(file), text.to_string())], &rules)
    };
    assert_eq!(probe("data/x.rs", "use crate::eval::Interp;\n").len(), 1);
    assert_eq!(
        probe("check/x.rs", "use crate::{eval::ops, value};\n").len(),
        1
    );
    assert_eq!(
        probe("display.rs", "fn f() { super::check::run() }\n").len(),
        1
    );
    assert_eq!(
        probe("errors/x.rs", "use super::super::builtins::all;\n").len(),
        1
    );
    // Paths in comments and strings are not imports.
    assert!(probe(
        "data/x.rs",
        "// crate::eval\nconst S: &str = \"crate::eval\";\n"
    )
    .is_empty());
    assert!(probe("data/x.rs", "use crate::display::format_f;\n").is_empty());
    // A raw string with quotes inside hides nothing after it, and is no import.
    let after_raw = "const R: &str = r#\"say \"hi\"#;\nuse crate::eval::Interp;\n";
    assert_eq!(probe("data/x.rs", after_raw).len(), 1);
    assert!(probe("data/x.rs", "const R: &str = r\"crate::eval\";\n").is_empty());
}

/// The `[dependencies]` (not dev or build) of a manifest, by package name.
fn dependencies(manifest: &str) -> BTreeSet<String> {
    dependency_lines(manifest).map(|(name, _)| name).collect()
}

/// The `[dependencies]` of a manifest with their lines.
fn dependency_lines(manifest: &str) -> impl Iterator<Item = (String, String)> + '_ {
    let mut in_deps = false;
    manifest.lines().filter_map(move |line| {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            return None;
        }
        if !in_deps || line.starts_with('#') {
            return None;
        }
        let name = line.split(['=', '.']).next().map(str::trim)?;
        (!name.is_empty()).then(|| (name.to_string(), line.to_string()))
    })
}

/// The dependencies a member builds with its default features (`defaults`)
/// or without them: an `optional = true` dependency only with them (the
/// optional ones are the features' `dep:`s, all of them default where a crate
/// has any, as `mlpl-lsp`'s `server`).
fn built_dependencies(manifest: &str, defaults: bool) -> Vec<(String, bool)> {
    dependency_lines(manifest)
        .filter(|(_, line)| defaults || !line.contains("optional = true"))
        .map(|(name, line)| (name, !line.contains("default-features = false")))
        .collect()
}

/// Each workspace member's directory (the root manifest's `members`), by
/// package name.
fn members() -> BTreeMap<String, PathBuf> {
    let root = read(&repo().join("Cargo.toml"));
    let list = root
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("the workspace lists its members")
        .0;
    let mut out = BTreeMap::new();
    for dir in list
        .split(',')
        .map(|d| d.trim().trim_matches('"'))
        .filter(|d| !d.is_empty())
    {
        let path = repo().join(dir);
        let manifest = read(&path.join("Cargo.toml"));
        let name = manifest
            .lines()
            .find_map(|l| l.trim().strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        out.insert(name, path);
    }
    out
}

#[test]
fn every_crate_depends_only_on_the_crates_its_row_allows() {
    let rules = table(&architecture(), "## Crates");
    let members = members();
    assert_eq!(
        members.keys().cloned().collect::<BTreeSet<_>>(),
        rules.keys().cloned().collect::<BTreeSet<_>>(),
        "workspace members vs rows of the table"
    );
    for (name, dir) in &members {
        let ours: BTreeSet<String> = dependencies(&read(&dir.join("Cargo.toml")))
            .into_iter()
            .filter(|d| members.contains_key(d))
            .collect();
        let extra: Vec<&String> = ours.difference(&rules[name]).collect();
        assert!(
            extra.is_empty(),
            "{name} depends on {extra:?}, which its row does not allow"
        );
    }
}

/// Every package that building `package` (not its tests) compiles: its own
/// `[dependencies]` for workspace members, then `Cargo.lock`'s graph.
fn build_closure(package: &str) -> BTreeSet<String> {
    let members = members();
    let lock = read(&repo().join("Cargo.lock"));
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        let deps: Vec<String> = block
            .split_once("dependencies = [")
            .map(|(_, rest)| {
                rest[..rest.find(']').unwrap()]
                    .split(',')
                    .filter_map(|d| d.trim().trim_matches('"').split(' ').next())
                    .filter(|d| !d.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        graph.entry(name).or_default().extend(deps);
    }
    // A member is visited with or without its default features (how the
    // member that reached it names it); others by the lock's graph.
    let mut seen = BTreeSet::new();
    let mut todo = vec![(package.to_string(), true)];
    while let Some((p, defaults)) = todo.pop() {
        if !seen.insert((p.clone(), defaults)) {
            continue;
        }
        match members.get(&p) {
            Some(dir) => todo.extend(built_dependencies(&read(&dir.join("Cargo.toml")), defaults)),
            None => todo.extend(
                graph
                    .get(&p)
                    .into_iter()
                    .flatten()
                    .map(|d| (d.clone(), true)),
            ),
        }
    }
    seen.into_iter().map(|(p, _)| p).collect()
}

/// The language core builds without the runner's crates (so it also builds for
/// the browser), the language server links none of them, and the browser build
/// none at all.
#[test]
fn the_language_core_and_the_language_server_pull_in_no_runner_crates() {
    let runner_only = [
        "axum",
        "hyper",
        "clap",
        "indicatif",
        "tokio",
        "mimalloc",
        "mlpl-runner",
    ];
    for (package, allowed) in [
        ("mlpl-lang", &[][..]),
        ("mlpl-lsp", &["tokio", "mimalloc"][..]),
        ("mlpl-web", &[][..]),
    ] {
        let closure = build_closure(package);
        assert!(closure.len() > 3, "{package}: read its dependency graph");
        let pulled: Vec<&str> = runner_only
            .iter()
            .copied()
            .filter(|c| !allowed.contains(c) && closure.contains(*c))
            .collect();
        assert!(pulled.is_empty(), "{package} builds {pulled:?}");
    }
}
