//! The data directory sandbox (LANGUAGE §16.1) and CSV parsing (§16.2).
//!
//! Paths given to file builtins are relative to one data directory. A path that
//! is absolute, has a drive or root prefix, or climbs above the directory
//! (through `..` or through a symbolic link that resolves outside it) is refused.

use mlpl_diag::code;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use safetensors::tensor::{Dtype, TensorView};

/// Why a path cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// No data directory is configured (E0403).
    NoDataDir,
    /// The path is absolute or has a drive or root prefix (E0404).
    NotRelative {
        /// The path as given.
        path: String,
    },
    /// The path climbs above the data directory, through `..` or a symbolic link
    /// (E0404).
    Escapes {
        /// The path as given.
        path: String,
    },
    /// The data directory or the file cannot be accessed (E0405).
    Unreadable {
        /// The path involved, as given or as resolved.
        path: String,
        /// The operating system's explanation.
        message: String,
    },
}

impl PathError {
    /// The diagnostic code of LANGUAGE §20 this error is reported with.
    pub fn code(&self) -> &'static str {
        match self {
            PathError::NoDataDir => code::E0403,
            PathError::NotRelative { .. } | PathError::Escapes { .. } => code::E0404,
            PathError::Unreadable { .. } => code::E0405,
        }
    }

    fn unreadable(path: &Path, err: &io::Error) -> Self {
        PathError::Unreadable {
            path: path.display().to_string(),
            message: err.to_string(),
        }
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The browser build has no file system at all (docs/playground.md).
            PathError::NoDataDir if cfg!(target_arch = "wasm32") => {
                write!(f, "files are not available in the browser")
            }
            PathError::NoDataDir => write!(f, "no data directory is configured"),
            PathError::NotRelative { path } => {
                write!(f, "path \"{path}\" must be relative to the data directory")
            }
            PathError::Escapes { path } => {
                write!(f, "path \"{path}\" leads outside the data directory")
            }
            PathError::Unreadable { path, message } => {
                write!(f, "cannot access \"{path}\": {message}")
            }
        }
    }
}

impl std::error::Error for PathError {}

/// Resolves `rel` inside `data_dir` for reading: the file must exist and lie
/// inside the directory once every symbolic link is resolved.
///
/// Errors: no directory is [`PathError::NoDataDir`] (E0403); an absolute or
/// prefixed path is [`PathError::NotRelative`] and a path leading outside is
/// [`PathError::Escapes`] (E0404); a missing directory or file is
/// [`PathError::Unreadable`] (E0405). The result is the canonical data directory
/// joined with the normalised relative path.
pub fn resolve(data_dir: Option<&Path>, rel: &str) -> Result<PathBuf, PathError> {
    let (root, parts) = prepare(data_dir, rel)?;
    let path = join(&root, &parts);
    let real = match path.canonicalize() {
        Ok(real) => real,
        Err(err) => {
            // Report a missing file behind a link that leads outside as an escape.
            resolve_for_write(data_dir, rel)?;
            return Err(PathError::unreadable(&path, &err));
        }
    };
    if !real.starts_with(&root) {
        return Err(PathError::Escapes {
            path: rel.to_string(),
        });
    }
    Ok(path)
}

/// Resolves `rel` inside `data_dir` for writing: the file and its parent
/// directories may be missing (the caller creates them), but the deepest
/// existing ancestor must resolve inside the directory, and no dangling symbolic
/// link may stand where a missing directory or the file would be created.
///
/// Errors are those of [`resolve`], except that a missing file is allowed.
pub fn resolve_for_write(data_dir: Option<&Path>, rel: &str) -> Result<PathBuf, PathError> {
    let (root, parts) = prepare(data_dir, rel)?;
    let escapes = || PathError::Escapes {
        path: rel.to_string(),
    };
    let mut existing = parts.len();
    loop {
        let candidate = join(&root, &parts[..existing]);
        if let Ok(real) = candidate.canonicalize() {
            if !real.starts_with(&root) {
                return Err(escapes());
            }
            break;
        }
        if existing == 0 {
            // The root itself canonicalised in `prepare`; it vanished since.
            return Err(PathError::Unreadable {
                path: root.display().to_string(),
                message: "the data directory does not exist".to_string(),
            });
        }
        existing -= 1;
    }
    // The first missing component must not be a dangling symbolic link, which
    // writing would follow.
    if existing < parts.len() {
        let first_missing = join(&root, &parts[..=existing]);
        if std::fs::symlink_metadata(&first_missing).is_ok() {
            return Err(escapes());
        }
    }
    Ok(join(&root, &parts))
}

/// Checks the directory and the lexical form of `rel`; returns the canonical
/// directory and the normalised components (no `.` or `..`).
fn prepare(data_dir: Option<&Path>, rel: &str) -> Result<(PathBuf, Vec<String>), PathError> {
    let dir = data_dir.ok_or(PathError::NoDataDir)?;
    let parts = normalise(rel)?;
    let root = dir
        .canonicalize()
        .map_err(|e| PathError::unreadable(dir, &e))?;
    Ok((root, parts))
}

/// The lexical part of the sandbox: the components of `rel` with `.` and `..`
/// applied, or [`PathError::NotRelative`] for an absolute or prefixed path and
/// [`PathError::Escapes`] for one climbing above the directory (E0404). The
/// checker applies it before anything runs.
pub fn normalise(rel: &str) -> Result<Vec<String>, PathError> {
    let rel_path = Path::new(rel);
    let not_relative = || PathError::NotRelative {
        path: rel.to_string(),
    };
    let bytes = rel.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if rel_path.is_absolute() || rel.starts_with('/') || rel.starts_with('\\') || drive {
        return Err(not_relative());
    }
    let mut parts: Vec<String> = Vec::new();
    for component in rel_path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => return Err(not_relative()),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(PathError::Escapes {
                        path: rel.to_string(),
                    });
                }
            }
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
        }
    }
    Ok(parts)
}

fn join(root: &Path, parts: &[String]) -> PathBuf {
    let mut path = root.to_path_buf();
    for part in parts {
        path.push(part);
    }
    path
}

/// A numeric table read from CSV text: `rows · cols` values in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvTable {
    /// Number of data rows (the header, if any, is not counted).
    pub rows: usize,
    /// Number of cells per row.
    pub cols: usize,
    /// The values, row-major, in float64 (the caller stores them as float32).
    pub values: Vec<f64>,
}

/// A CSV file that cannot be read as a numeric table (E0406).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    /// The 1-based line of the problem.
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

impl CsvError {
    /// The diagnostic code of LANGUAGE §20 this error is reported with.
    pub fn code(&self) -> &'static str {
        code::E0406
    }
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for CsvError {}

/// Parses CSV text into a numeric table as LANGUAGE §16.2 prescribes.
///
/// Lines end with LF, CR LF or CR; blank lines (empty or only spaces and tabs)
/// are skipped; cells are split on `,` and trimmed of spaces and tabs. If a cell
/// of the first non-blank line is not a number, that line is a header and is
/// dropped. Every other cell must be a number and every row must have as many
/// cells as the first data row; a file without data rows is an error too.
pub fn parse_csv(text: &str) -> Result<CsvTable, CsvError> {
    parse_csv_with(text, &|| false).map(|(t, _)| t)
}

/// [`parse_csv`] that gives up (`Ok(None)`) soon after `stop` returns true;
/// `stop` is asked every few thousand lines.
pub fn parse_csv_until(text: &str, stop: &dyn Fn() -> bool) -> Result<Option<CsvTable>, CsvError> {
    let (t, stopped) = parse_csv_with(text, stop)?;
    Ok((!stopped).then_some(t))
}

/// Lines parsed between two calls of a `stop` function.
const STOP_CHECK_LINES: usize = 4096;

/// Bytes read between two calls of a `stop` function.
const STOP_CHECK_BYTES: usize = 4 << 20;

/// Reads a whole file in chunks, giving up (`Ok(None)`) soon after `stop`
/// returns true.
pub fn read_until(path: &Path, stop: &dyn Fn() -> bool) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let hint = file.metadata().map_or(0, |m| m.len());
    let mut out = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    let mut reader = file.take(u64::MAX);
    loop {
        if stop() {
            return Ok(None);
        }
        reader.set_limit(STOP_CHECK_BYTES as u64);
        if reader.read_to_end(&mut out)? == 0 {
            return Ok(Some(out));
        }
    }
}

/// The CSV parser; the flag says whether `stop` ended it early.
fn parse_csv_with(text: &str, stop: &dyn Fn() -> bool) -> Result<(CsvTable, bool), CsvError> {
    let mut rows = 0usize;
    let mut cols = 0usize;
    let mut values = Vec::new();
    let mut seen_first = false;
    let mut last_line = 1usize;
    for (index, line) in split_lines(text).enumerate() {
        let line_no = index + 1;
        last_line = line_no;
        if line_no % STOP_CHECK_LINES == 0 && stop() {
            return Ok((CsvTable { rows, cols, values }, true));
        }
        if line.trim_matches(is_space).is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split(',').map(|c| c.trim_matches(is_space)).collect();
        if !seen_first {
            seen_first = true;
            if cells.iter().any(|c| parse_number(c).is_none()) {
                continue;
            }
        }
        if rows == 0 {
            cols = cells.len();
        } else if cells.len() != cols {
            return Err(CsvError {
                line: line_no,
                message: format!("expected {cols} cells, found {}", cells.len()),
            });
        }
        for cell in &cells {
            let value = parse_number(cell).ok_or_else(|| CsvError {
                line: line_no,
                message: format!("cell \"{cell}\" is not a number"),
            })?;
            values.push(value);
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(CsvError {
            line: last_line,
            message: "the file has no data rows".to_string(),
        });
    }
    Ok((CsvTable { rows, cols, values }, false))
}

fn is_space(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// A cell as a number: decimal or exponent notation, as Rust's float parser
/// reads it (which also accepts `inf` and `NaN`, as the original did).
fn parse_number(cell: &str) -> Option<f64> {
    cell.parse::<f64>().ok()
}

/// Splits on LF, CR LF and CR; a final line terminator does not start a line.
fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match rest.find(['\n', '\r']) {
            None => {
                let line = rest;
                rest = "";
                Some(line)
            }
            Some(at) => {
                let line = &rest[..at];
                let skip = if rest[at..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[at + skip..];
                Some(line)
            }
        }
    })
}

/// Whether [`tensor_values`] converts tensors of type `dtype`.
pub fn converts(dtype: Dtype) -> bool {
    matches!(dtype, Dtype::F32 | Dtype::F64 | Dtype::F16 | Dtype::BF16)
}

/// Converts one safetensors tensor to float32 values (F32, F64, F16, BF16).
pub fn tensor_values(view: &TensorView<'_>) -> Option<Vec<f32>> {
    let mut out = Vec::new();
    extend_values(view.dtype(), view.data(), &mut out).then_some(out)
}

/// Appends the elements of `bytes` (little-endian, of type `dtype`)
/// converted to float32 to `out`; false for a type [`converts`] refuses.
/// Whole elements only: a trailing partial one is ignored.
pub fn extend_values(dtype: Dtype, bytes: &[u8], out: &mut Vec<f32>) -> bool {
    match dtype {
        Dtype::F32 => out.extend(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ),
        Dtype::F64 => out.extend(
            bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as f32),
        ),
        Dtype::F16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))),
        ),
        Dtype::BF16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)),
        ),
        _ => return false,
    }
    true
}

pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let frac = (h & 0x3ff) as f32;
    sign * match exp {
        0 => frac * 2f32.powi(-24),
        31 if frac == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        e => (1.0 + frac / 1024.0) * 2f32.powi(e as i32 - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh empty directory under the system temp directory.
    fn temp_dir(tag: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("mlpl-files-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reading_and_parsing_stop_when_asked() {
        let text: String = (0..10_000).map(|i| format!("{i},{}\n", i * 2)).collect();
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 1
        };
        assert_eq!(parse_csv_until(&text, &stop), Ok(None));
        assert_eq!(asked.get(), 2);
        let t = parse_csv_until(&text, &|| false).unwrap().unwrap();
        assert_eq!((t.rows, t.cols), (10_000, 2));
        let dir = temp_dir("read");
        let path = dir.join("big.csv");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_until(&path, &|| true).unwrap(), None);
        assert_eq!(
            read_until(&path, &|| false).unwrap().unwrap(),
            text.as_bytes()
        );
        assert!(read_until(&dir.join("missing.csv"), &|| false).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn resolve_reads_inside() {
        let dir = temp_dir("inside");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.csv"), "1,2\n").unwrap();
        let root = dir.canonicalize().unwrap();
        let got = resolve(Some(&dir), "sub/a.csv").unwrap();
        assert_eq!(got, root.join("sub").join("a.csv"));
        assert_eq!(resolve(Some(&dir), "./sub/../sub/a.csv").unwrap(), got);
        let missing = resolve(Some(&dir), "nope.csv").unwrap_err();
        assert_eq!(missing.code(), code::E0405);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resolve_refuses_escapes() {
        let dir = temp_dir("escape");
        assert_eq!(resolve(None, "a.csv"), Err(PathError::NoDataDir));
        assert_eq!(PathError::NoDataDir.code(), code::E0403);
        let abs = resolve(Some(&dir), "/etc/passwd").unwrap_err();
        assert_eq!(
            abs,
            PathError::NotRelative {
                path: "/etc/passwd".into()
            }
        );
        assert_eq!(abs.code(), code::E0404);
        assert!(matches!(
            resolve(Some(&dir), "\\x"),
            Err(PathError::NotRelative { .. })
        ));
        assert!(matches!(
            resolve(Some(&dir), "C:x"),
            Err(PathError::NotRelative { .. })
        ));
        assert!(matches!(
            resolve(Some(&dir), "c:\\x"),
            Err(PathError::NotRelative { .. })
        ));
        let up = resolve(Some(&dir), "../x").unwrap_err();
        assert_eq!(
            up,
            PathError::Escapes {
                path: "../x".into()
            }
        );
        assert_eq!(up.code(), code::E0404);
        assert!(matches!(
            resolve(Some(&dir), "a/../../x"),
            Err(PathError::Escapes { .. })
        ));
        assert!(matches!(
            resolve_for_write(Some(&dir), "a/../../x"),
            Err(PathError::Escapes { .. })
        ));
        assert!(matches!(
            resolve_for_write(Some(&dir), "/tmp/x"),
            Err(PathError::NotRelative { .. })
        ));
        assert_eq!(resolve_for_write(None, "x"), Err(PathError::NoDataDir));
        let gone = dir.join("does-not-exist");
        assert!(matches!(
            resolve(Some(&gone), "x"),
            Err(PathError::Unreadable { .. })
        ));
        assert!(matches!(
            resolve_for_write(Some(&gone), "x"),
            Err(PathError::Unreadable { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_resolving_outside_are_refused() {
        use std::os::unix::fs::symlink;
        let outside = temp_dir("outside");
        std::fs::write(outside.join("secret.txt"), "x").unwrap();
        let dir = temp_dir("links");
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/ok.txt"), "y").unwrap();
        symlink(&outside, dir.join("out")).unwrap();
        symlink(outside.join("secret.txt"), dir.join("secret.txt")).unwrap();
        symlink(dir.join("real"), dir.join("inner")).unwrap();
        symlink(outside.join("missing"), dir.join("dangling")).unwrap();
        let esc = |r: Result<PathBuf, PathError>| matches!(r, Err(PathError::Escapes { .. }));
        assert!(esc(resolve(Some(&dir), "out/secret.txt")));
        assert!(esc(resolve(Some(&dir), "secret.txt")));
        assert!(esc(resolve(Some(&dir), "out/missing.txt")));
        assert!(esc(resolve(Some(&dir), "dangling")));
        assert!(esc(resolve_for_write(Some(&dir), "out/new.txt")));
        assert!(esc(resolve_for_write(Some(&dir), "out/deeper/new.txt")));
        assert!(esc(resolve_for_write(Some(&dir), "secret.txt")));
        assert!(esc(resolve_for_write(Some(&dir), "dangling")));
        assert!(esc(resolve_for_write(Some(&dir), "dangling/x.txt")));
        // A link that stays inside is fine.
        assert!(resolve(Some(&dir), "inner/ok.txt").is_ok());
        assert!(resolve_for_write(Some(&dir), "inner/new/x.txt").is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn resolve_for_write_allows_missing_parents() {
        let dir = temp_dir("write");
        let root = dir.canonicalize().unwrap();
        assert_eq!(
            resolve_for_write(Some(&dir), "a/b/c.safetensors").unwrap(),
            root.join("a").join("b").join("c.safetensors")
        );
        std::fs::write(dir.join("exists.txt"), "z").unwrap();
        assert_eq!(
            resolve_for_write(Some(&dir), "exists.txt").unwrap(),
            root.join("exists.txt")
        );
        assert_eq!(
            resolve_for_write(Some(&dir), "x/../y.txt").unwrap(),
            root.join("y.txt")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_with_header_and_line_endings() {
        let want = CsvTable {
            rows: 2,
            cols: 3,
            values: vec![1.0, 2.0, 3.0, 4.0, 5.5, -6e2],
        };
        assert_eq!(parse_csv("a,b,c\n1,2,3\n4,5.5,-6e2\n").unwrap(), want);
        assert_eq!(parse_csv("a,b,c\r\n1,2,3\r\n4,5.5,-6e2").unwrap(), want);
        assert_eq!(parse_csv("a,b,c\r1,2,3\r4,5.5,-6e2\r").unwrap(), want);
        assert_eq!(
            parse_csv("1,2,3\n\n  \t\n4, 5.5 ,\t-6e2\n\n").unwrap(),
            CsvTable {
                rows: 2,
                cols: 3,
                values: vec![1.0, 2.0, 3.0, 4.0, 5.5, -6e2],
            }
        );
        // A header is detected by any non-numeric cell.
        assert_eq!(parse_csv("x,1\n2,3\n").unwrap().values, vec![2.0, 3.0]);
        assert_eq!(
            parse_csv("\n\n7\n").unwrap(),
            CsvTable {
                rows: 1,
                cols: 1,
                values: vec![7.0]
            }
        );
        assert_eq!(
            parse_csv("1.5e-3,.5,+2\n").unwrap().values,
            vec![0.0015, 0.5, 2.0]
        );
    }

    #[test]
    fn csv_errors_carry_line_numbers() {
        let ragged = parse_csv("a,b\n1,2\n\n3\n").unwrap_err();
        assert_eq!(ragged.line, 4);
        assert_eq!(ragged.code(), code::E0406);
        assert!(ragged.message.contains("expected 2 cells"));
        let bad = parse_csv("1,2\r\n3,x\r\n").unwrap_err();
        assert_eq!(
            bad,
            CsvError {
                line: 2,
                message: "cell \"x\" is not a number".into()
            }
        );
        assert_eq!(parse_csv("1,2\r3,\r").unwrap_err().line, 2);
        assert_eq!(parse_csv("").unwrap_err().line, 1);
        assert_eq!(parse_csv("a,b\n").unwrap_err().line, 1);
        assert_eq!(parse_csv("\n\na,b\n\n").unwrap_err().line, 4);
        assert_eq!(bad.to_string(), "line 2: cell \"x\" is not a number");
    }

    #[test]
    fn line_splitting() {
        let lines: Vec<&str> = split_lines("a\r\nb\rc\n\nd").collect();
        assert_eq!(lines, vec!["a", "b", "c", "", "d"]);
        assert_eq!(split_lines("").count(), 0);
        assert_eq!(split_lines("\r\n").collect::<Vec<_>>(), vec![""]);
        assert_eq!(split_lines("\n\r").collect::<Vec<_>>(), vec!["", ""]);
    }
}
