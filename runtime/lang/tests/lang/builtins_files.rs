//! Files and corpora (LANGUAGE §10.9, §16): load (CSV, safetensors, text),
//! load_preloaded, save, and the data-directory sandbox.

use crate::common;

use std::path::Path;

use common::{error_code, eval, run_in, temp_dir};

/// Runs `src` with `dir` as the data directory and returns its display.
fn eval_in(src: &str, dir: &Path) -> String {
    run_in(src, Some(dir)).shown()
}

/// Runs `src` with `dir` as the data directory and returns the error.
fn error_in(src: &str, dir: &Path) -> mlpl_diag::Diagnostic {
    match run_in(src, Some(dir)).result {
        Err(d) => d,
        Ok(v) => panic!("{src:?} should fail but gave {:?}", v.map(|v| v.display())),
    }
}

fn full_text(d: &mlpl_diag::Diagnostic) -> String {
    let mut s = d.message.clone();
    if let Some(p) = &d.primary {
        s.push('\n');
        s.push_str(&p.message);
    }
    for n in &d.notes {
        s.push('\n');
        s.push_str(n);
    }
    s
}

/// A hand-written safetensors file: 8-byte little-endian header length, JSON
/// header, data.
fn safetensors_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn csv_with_and_without_header() {
    let dir = temp_dir("csv");
    std::fs::write(dir.join("plain.csv"), "1,2\n3,4\n").unwrap();
    std::fs::write(dir.join("header.csv"), "a,b\n1,2\n3,4\n").unwrap();
    std::fs::write(dir.join("mixed_header.csv"), "x,1\n5,6\n").unwrap();
    assert_eq!(eval_in("load(\"plain.csv\")", &dir), "1 2\n3 4");
    assert_eq!(eval_in("load(\"header.csv\")", &dir), "1 2\n3 4");
    // One non-numeric cell makes the first line a header.
    assert_eq!(eval_in("load(\"mixed_header.csv\")", &dir), "5 6");
    assert_eq!(eval_in("shape(load(\"header.csv\"))", &dir), "2 2");
    // The header's text is not used as axis names.
    assert_eq!(eval_in("labels(load(\"header.csv\"))", &dir), ",");
    // Any string expression is a path.
    assert_eq!(eval_in("q = \"plain.csv\"\nload(q)", &dir), "1 2\n3 4");
}

#[test]
fn csv_line_endings_blank_lines_and_spaces() {
    let dir = temp_dir("csv-endings");
    std::fs::write(dir.join("crlf.csv"), "a,b\r\n1,2\r\n3,4\r\n").unwrap();
    std::fs::write(dir.join("cr.csv"), "1,2\r3,4\r").unwrap();
    std::fs::write(dir.join("blank.csv"), "\n1 ,\t2\n\n  \n3,4").unwrap();
    std::fs::write(dir.join("numbers.csv"), "1e2,-2.5\n0.1,+3\n").unwrap();
    assert_eq!(eval_in("load(\"crlf.csv\")", &dir), "1 2\n3 4");
    assert_eq!(eval_in("load(\"cr.csv\")", &dir), "1 2\n3 4");
    assert_eq!(eval_in("load(\"blank.csv\")", &dir), "1 2\n3 4");
    assert_eq!(eval_in("load(\"numbers.csv\")", &dir), "100 -2.5\n0.1 3");
}

#[test]
fn malformed_csv_names_the_line() {
    let dir = temp_dir("csv-bad");
    std::fs::write(dir.join("ragged.csv"), "1,2\n3\n").unwrap();
    std::fs::write(dir.join("ragged_crlf.csv"), "a,b\r\n1,2\r\n\r\n3,4,5\r\n").unwrap();
    std::fs::write(dir.join("text.csv"), "1,2\nx,3\n").unwrap();
    let d = error_in("load(\"ragged.csv\")", &dir);
    assert_eq!(d.code, "E0406");
    assert!(full_text(&d).contains("line 2"), "{}", full_text(&d));
    let d = error_in("load(\"ragged_crlf.csv\")", &dir);
    assert_eq!(d.code, "E0406");
    assert!(full_text(&d).contains("line 4"), "{}", full_text(&d));
    let d = error_in("load(\"text.csv\")", &dir);
    assert_eq!(d.code, "E0406");
    assert!(full_text(&d).contains("line 2"), "{}", full_text(&d));
    std::fs::write(dir.join("binary.csv"), [0xff, 0xfe, b'1']).unwrap();
    assert_eq!(error_in("load(\"binary.csv\")", &dir).code, "E0406");
}

#[test]
fn other_extensions_load_as_text() {
    let dir = temp_dir("text");
    std::fs::write(dir.join("notes.txt"), "hello\nworld, é").unwrap();
    std::fs::write(dir.join("noext"), "plain").unwrap();
    assert_eq!(eval_in("load(\"notes.txt\")", &dir), "hello\nworld, é");
    assert_eq!(eval_in("load(\"noext\")", &dir), "plain");
    assert_eq!(
        eval_in("tokenize_bytes(load(\"noext\"))", &dir),
        "112 108 97 105 110"
    );
    std::fs::write(dir.join("bad.txt"), [b'a', 0xc3]).unwrap();
    assert_eq!(error_in("load(\"bad.txt\")", &dir).code, "E0406");
}

#[test]
fn no_data_directory_is_e0403() {
    assert_eq!(error_code("load(\"x.csv\")"), "E0403");
    assert_eq!(error_code("save(iota(3), \"x.safetensors\")"), "E0403");
}

#[test]
fn paths_must_stay_inside_the_data_directory() {
    let dir = temp_dir("sandbox");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/a.csv"), "1\n").unwrap();
    for bad in [
        "/etc/passwd",
        "../x",
        "../x.csv",
        "sub/../../x.csv",
        "./../x.txt",
    ] {
        assert_eq!(
            error_in(&format!("load(\"{bad}\")"), &dir).code,
            "E0404",
            "load {bad}"
        );
    }
    for bad in [
        "/tmp/x.safetensors",
        "../x.safetensors",
        "sub/../../x.safetensors",
    ] {
        assert_eq!(
            error_in(&format!("save(iota(2), \"{bad}\")"), &dir).code,
            "E0404",
            "save {bad}"
        );
    }
    // `..` that stays inside is fine.
    assert_eq!(eval_in("load(\"sub/../sub/a.csv\")", &dir), "1");
    assert_eq!(eval_in("load(\"./sub/a.csv\")", &dir), "1");
    // A missing file is E0405.
    assert_eq!(error_in("load(\"missing.csv\")", &dir).code, "E0405");
    assert_eq!(error_in("load(\"sub/missing.txt\")", &dir).code, "E0405");
}

#[cfg(unix)]
#[test]
fn symbolic_links_may_not_escape() {
    use std::os::unix::fs::symlink;
    let outside = temp_dir("outside");
    std::fs::write(outside.join("secret.csv"), "1,2\n").unwrap();
    let dir = temp_dir("links");
    symlink(outside.join("secret.csv"), dir.join("link.csv")).unwrap();
    symlink(&outside, dir.join("linkdir")).unwrap();
    assert_eq!(error_in("load(\"link.csv\")", &dir).code, "E0404");
    assert_eq!(error_in("load(\"linkdir/secret.csv\")", &dir).code, "E0404");
    assert_eq!(
        error_in("save(iota(2), \"linkdir/new.safetensors\")", &dir).code,
        "E0404"
    );
    assert!(!outside.join("new.safetensors").exists());
    // A link that stays inside is fine.
    std::fs::write(dir.join("real.csv"), "7\n").unwrap();
    symlink(dir.join("real.csv"), dir.join("inner.csv")).unwrap();
    assert_eq!(eval_in("load(\"inner.csv\")", &dir), "7");
}

#[test]
fn save_and_load_round_trip_with_names() {
    let dir = temp_dir("roundtrip");
    let src = "x = label(reshape(iota(6), [2, 3]), [\"r\", \"c\"])\nn = save(x, \"sub/deep/a.safetensors\")\n";
    assert_eq!(eval_in(&format!("{src}n"), &dir), "1");
    assert!(dir.join("sub/deep/a.safetensors").is_file());
    assert_eq!(
        eval_in("load(\"sub/deep/a.safetensors\")", &dir),
        "0 1 2\n3 4 5"
    );
    assert_eq!(
        eval_in("labels(load(\"sub/deep/a.safetensors\"))", &dir),
        "r,c"
    );
    assert_eq!(
        eval_in("shape(load(\"sub/deep/a.safetensors\"))", &dir),
        "2 3"
    );
    // Partly named, unnamed, float values, scalars.
    assert_eq!(
        eval_in(
            "save(label(zeros([2, 2]), [\"\", \"c\"]), \"p.safetensors\")\nlabels(load(\"p.safetensors\"))",
            &dir
        ),
        ",c"
    );
    assert_eq!(
        eval_in(
            "save(zeros([2, 2]), \"u.safetensors\")\nlabels(load(\"u.safetensors\"))",
            &dir
        ),
        ","
    );
    assert_eq!(
        eval_in(
            "save([0.1, -2.5, 1e-3], \"f.safetensors\")\nload(\"f.safetensors\")",
            &dir
        ),
        "0.1 -2.5 0.001"
    );
    assert_eq!(
        eval_in(
            "save(5, \"s.safetensors\")\nshape(load(\"s.safetensors\"))",
            &dir
        ),
        "[]"
    );
    assert_eq!(eval_in("load(\"s.safetensors\")", &dir), "5");
    assert_eq!(
        eval_in(
            "save(zeros([0, 3]), \"e.safetensors\")\nshape(load(\"e.safetensors\"))",
            &dir
        ),
        "0 3"
    );
    // `save` replaces an existing file; its value is an exact scalar.
    assert_eq!(
        eval_in(
            "save([1, 2], \"f.safetensors\")\nload(\"f.safetensors\")",
            &dir
        ),
        "1 2"
    );
    assert_eq!(
        eval_in("save([1], \"g.safetensors\") * 0.1 + 0.2", &dir),
        "0.30000000000000004"
    );
}

#[test]
fn saved_files_are_standard_safetensors() {
    let dir = temp_dir("format");
    eval_in(
        "save(label(reshape(iota(6), [2, 3]), [\"r\", \"\"]), \"a.safetensors\")",
        &dir,
    );
    let bytes = std::fs::read(dir.join("a.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    assert_eq!(header["array"]["dtype"], "F32");
    assert_eq!(header["array"]["shape"], serde_json::json!([2, 3]));
    assert_eq!(header["__metadata__"]["format"], "mlpl");
    assert_eq!(header["__metadata__"]["mlpl.names.array"], "r,");
    let data = &bytes[8 + n..];
    let values: Vec<f32> = data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(values, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn load_converts_float_types() {
    let dir = temp_dir("dtypes");
    let f64s: Vec<u8> = [1.5f64, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(
        dir.join("f64.safetensors"),
        safetensors_bytes(
            r#"{"t":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}}"#,
            &f64s,
        ),
    )
    .unwrap();
    // F16: 1.5 = 0x3E00, −2 = 0xC000. BF16: 1.5 = 0x3FC0, −2 = 0xC000.
    let f16s: Vec<u8> = [0x3E00u16, 0xC000]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let bf16s: Vec<u8> = [0x3FC0u16, 0xC000]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(
        dir.join("f16.safetensors"),
        safetensors_bytes(
            r#"{"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#,
            &f16s,
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("bf16.safetensors"),
        safetensors_bytes(
            r#"{"t":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]}}"#,
            &bf16s,
        ),
    )
    .unwrap();
    assert_eq!(eval_in("load(\"f64.safetensors\")", &dir), "1.5 -2");
    assert_eq!(eval_in("load(\"f16.safetensors\")", &dir), "1.5 -2");
    assert_eq!(eval_in("load(\"bf16.safetensors\")", &dir), "1.5 -2");
    assert_eq!(eval_in("shape(load(\"bf16.safetensors\"))", &dir), "1 2");
    // Without MLPL metadata the array is unnamed.
    assert_eq!(eval_in("labels(load(\"bf16.safetensors\"))", &dir), ",");
}

#[test]
fn malformed_safetensors_are_e0406() {
    let dir = temp_dir("bad-st");
    let eight: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(
        dir.join("two.safetensors"),
        safetensors_bytes(
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
            &eight,
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("int.safetensors"),
        safetensors_bytes(
            r#"{"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}"#,
            &eight,
        ),
    )
    .unwrap();
    std::fs::write(dir.join("junk.safetensors"), b"not a safetensors file").unwrap();
    assert_eq!(error_in("load(\"two.safetensors\")", &dir).code, "E0406");
    assert_eq!(error_in("load(\"int.safetensors\")", &dir).code, "E0406");
    assert_eq!(error_in("load(\"junk.safetensors\")", &dir).code, "E0406");
}

#[test]
fn save_errors() {
    let dir = temp_dir("save-errors");
    assert_eq!(error_in("save(iota(2), \"a.csv\")", &dir).code, "E0401");
    assert_eq!(error_in("save(iota(2), \"a\")", &dir).code, "E0401");
    assert_eq!(error_in("save(iota(2), 5)", &dir).code, "E0302");
    assert_eq!(error_in("save(iota(2))", &dir).code, "E0103");
    // A directory where the file should be cannot be written.
    std::fs::create_dir_all(dir.join("d.safetensors")).unwrap();
    assert_eq!(
        error_in("save(iota(2), \"d.safetensors\")", &dir).code,
        "E0405"
    );
}

#[test]
fn load_errors() {
    let dir = temp_dir("load-errors");
    assert_eq!(error_in("load(5)", &dir).code, "E0302");
    assert_eq!(error_in("load()", &dir).code, "E0103");
    std::fs::create_dir_all(dir.join("folder.csv")).unwrap();
    assert_eq!(error_in("load(\"folder.csv\")", &dir).code, "E0405");
}

#[test]
fn preloaded_corpora() {
    assert_eq!(
        eval("shape(tokenize_bytes(load_preloaded(\"tiny_corpus\")))"),
        "86"
    );
    assert_eq!(
        eval("shape(tokenize_bytes(load_preloaded(\"tiny_shakespeare_snippet\")))"),
        "2028"
    );
    assert_eq!(
        eval("name = \"tiny_corpus\"\nshape(tokenize_bytes(load_preloaded(name)))"),
        "86"
    );
}

#[test]
fn unknown_corpus_lists_the_names() {
    let d = common::error_of("load_preloaded(\"shakespeare\")");
    assert_eq!(d.code, "E0104");
    let text = full_text(&d) + d.help.as_deref().unwrap_or("");
    assert!(text.contains("tiny_corpus"), "{text}");
    assert!(text.contains("tiny_shakespeare_snippet"), "{text}");
    assert_eq!(error_code("load_preloaded(5)"), "E0302");
    assert_eq!(error_code("load_preloaded()"), "E0103");
}
