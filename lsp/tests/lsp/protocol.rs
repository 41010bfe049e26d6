//! The server driven over a pipe as a client would drive it: every feature, edits
//! arriving out of version order, and UTF-16 positions in non-ASCII text.

use crate::common;

use common::{pos_of, TestClient};
use serde_json::{json, Value};

const SHAPES: &str = "# %% Data
X : [batch, feat] = reshape(iota(12), [4, 3])
W = ones([5, 2])
H = matmul(X, W)
s = sum(X, \"batch\")
";

const TRAIN: &str = "# %% Model
data = moons(0, 200, 0.1)
X : [sample, feat] = matmul(data, [[1, 0], [0, 1], [0, 0]])
y = matmul(data, [0, 0, 1])
model = chain(linear(2, 16, 1), tanh_layer(), linear(16, 2, 2))
# %% Train
train 300 {
  adam(cross_entropy(apply(model, X), y), model, 0.01, 0.9, 0.999, 1e-8)
}
";

/// The file path of a `file://` URL with a fragment.
fn url_path(href: &str) -> String {
    let path = href.trim_start_matches("file://");
    path.split('#').next().unwrap().to_string()
}

fn fast() -> Value {
    json!({"debounceMs": 0, "versionGapMs": 100, "estimates": {"calibrationFile": "/nonexistent/calibration.json"}})
}

async fn hover_text(c: &TestClient, uri: &str, text: &str, needle: &str, extra: u32) -> String {
    let (l, ch) = pos_of(text, needle, extra);
    let h = c
        .request("textDocument/hover", TestClient::at(uri, l, ch))
        .await;
    h["contents"]["value"].as_str().unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_advertises_every_feature() {
    let (_c, init) = TestClient::start(fast()).await;
    let caps = &init["capabilities"];
    for key in [
        "hoverProvider",
        "completionProvider",
        "signatureHelpProvider",
        "definitionProvider",
        "referencesProvider",
        "renameProvider",
        "documentSymbolProvider",
        "foldingRangeProvider",
        "semanticTokensProvider",
        "inlayHintProvider",
        "codeActionProvider",
        "codeLensProvider",
    ] {
        assert!(!caps[key].is_null(), "missing {key}: {caps}");
    }
    assert_eq!(caps["textDocumentSync"]["change"], 2, "incremental sync");
    assert_eq!(caps["positionEncoding"], "utf-16");
    assert_eq!(init["serverInfo"]["name"], "mlpl-lsp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_have_codes_related_information_and_versions() {
    let mut opts = fast();
    opts["docsUrl"] = json!("https://example.invalid/diagnostics.md");
    let (c, _) = TestClient::start(opts).await;
    let uri = "file:///shapes.mlpl";
    c.open(uri, SHAPES, 1).await;
    let p = c.diagnostics(uri, 1).await;
    let diags = p["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d["code"], "E0203");
    assert_eq!(d["source"], "mlpl");
    assert_eq!(d["severity"], 1);
    assert!(d["message"]
        .as_str()
        .unwrap()
        .starts_with("inner dimensions differ in `matmul`"));
    assert_eq!(
        d["codeDescription"]["href"],
        "https://example.invalid/diagnostics.md#e0203"
    );
    // Without a setting, the link goes to the tree's own docs/diagnostics.md.
    let (c2, _) = TestClient::start(fast()).await;
    c2.open(uri, SHAPES, 1).await;
    let p2 = c2.diagnostics(uri, 1).await;
    let href = p2["diagnostics"][0]["codeDescription"]["href"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        href.starts_with("file://") && href.ends_with("docs/diagnostics.md#e0203"),
        "{href}"
    );
    let file = url_path(&href);
    let page = std::fs::read_to_string(&file).unwrap();
    assert!(page.contains("<a id=\"e0203\"></a>"), "{file}");
    assert!(d["data"]["explain"].as_str().unwrap().contains("E0203"));
    // The primary span is the right operand `W` on line 3.
    assert_eq!(d["range"]["start"], json!({"line": 3, "character": 14}));
    let related = d["relatedInformation"].as_array().unwrap();
    let msgs: Vec<&str> = related
        .iter()
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert!(
        msgs.iter()
            .any(|m| m.contains("left operand: [batch=4, feat=3]")),
        "{msgs:?}"
    );
    // Where the left operand got its axis names: the annotation on line 1.
    let origin = related
        .iter()
        .find(|r| {
            r["message"]
                .as_str()
                .unwrap()
                .contains("got its axis names")
        })
        .unwrap();
    assert_eq!(origin["location"]["range"]["start"]["line"], 1);

    // Fixing the shape clears the diagnostic, published for the new version.
    let (l, ch) = pos_of(SHAPES, "[5, 2]", 1);
    c.change(uri, 2, [l, ch, l, ch + 1], "3").await;
    let p = c.diagnostics(uri, 2).await;
    assert_eq!(p["diagnostics"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf16_positions_with_non_ascii_text() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///unicode.mlpl";
    // Non-BMP and accented characters before the code on the same line.
    let text = "s = \"😀é\"; X : [batch, feat] = zeros([2, 3]); Y = matmul(X, zeros([4, 2]))\n";
    c.open(uri, text, 1).await;
    let p = c.diagnostics(uri, 1).await;
    let d = &p["diagnostics"][0];
    assert_eq!(d["code"], "E0203");
    let (l, ch) = pos_of(text, "zeros([4, 2])", 0);
    assert_eq!(d["range"]["start"], json!({"line": l, "character": ch}));
    // The emoji counts as two UTF-16 units: `X` after it is where the client says.
    let h = hover_text(&c, uri, text, "Y = ", 0).await;
    assert!(h.contains("Y: unknown") || h.contains("Y:"), "{h}");
    let h = hover_text(&c, uri, text, "X :", 0).await;
    assert!(h.contains("[batch=2, feat=3]"), "{h}");

    // An incremental edit positioned after the emoji: `[4, 2]` → `[3, 2]`.
    let (l, ch) = pos_of(text, "[4, 2]", 1);
    c.change(uri, 2, [l, ch, l, ch + 1], "3").await;
    let p = c.diagnostics(uri, 2).await;
    assert_eq!(p["diagnostics"], json!([]), "{p}");
    let text2 = text.replace("[4, 2]", "[3, 2]");
    let h = hover_text(&c, uri, &text2, "Y = ", 0).await;
    assert!(h.contains("[batch=2, 2]"), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_out_of_order_are_applied_in_version_order() {
    let (c, _) = TestClient::start(json!({"debounceMs": 20, "versionGapMs": 2000})).await;
    let uri = "file:///order.mlpl";
    c.open(uri, "a = 1\n", 1).await;
    c.diagnostics(uri, 1).await;
    // Version 3 arrives before version 2: it must wait for 2.
    c.change(uri, 3, [1, 9, 1, 9], "\nc = b + 1").await; // appends after line 1 of v2's text
    c.change(uri, 2, [0, 5, 0, 5], "\nb = a + 1").await;
    // Both applied in order: `a = 1`, `b = a + 1`, `c = b + 1` (no undefined names).
    let p = c.diagnostics(uri, 3).await;
    assert_eq!(p["diagnostics"], json!([]), "{p}");
    let h = c
        .request("textDocument/hover", TestClient::at(uri, 2, 0))
        .await;
    assert!(
        h["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("c: scalar 3"),
        "{h}"
    );
    // A stale version is dropped.
    c.change(uri, 2, [0, 0, 0, 0], "zzz").await;
    c.change(uri, 4, [0, 0, 0, 0], "# v4\n").await;
    c.diagnostics(uri, 4).await;
    let h = c
        .request("textDocument/hover", TestClient::at(uri, 3, 0))
        .await;
    assert!(
        h["contents"]["value"].as_str().unwrap().contains("c:"),
        "{h}"
    );
    // Never a stale publication: versions only grow.
    let versions: Vec<i64> = c
        .published(uri)
        .iter()
        .map(|p| p["version"].as_i64().unwrap())
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_edits_publish_only_the_latest_version() {
    let (c, _) = TestClient::start(json!({"debounceMs": 150})).await;
    let uri = "file:///rapid.mlpl";
    c.open(uri, "x = 1\n", 1).await;
    c.diagnostics(uri, 1).await;
    for v in 2..=20 {
        c.change(uri, v, [1, 0, 1, 0], "y").await;
    }
    let p = c.diagnostics(uri, 20).await;
    // The text is `x = 1\n` followed by 19 `y`s: one undefined name.
    assert_eq!(p["diagnostics"][0]["code"], "E0101");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let versions: Vec<i64> = c
        .published(uri)
        .iter()
        .map(|p| p["version"].as_i64().unwrap())
        .collect();
    assert_eq!(
        versions,
        [1, 20],
        "debounced: intermediate versions are never analysed for publication"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hovers_show_shapes_docs_models_and_estimates() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///train.mlpl";
    c.open(uri, TRAIN, 1).await;
    c.diagnostics(uri, 1).await;
    let h = hover_text(&c, uri, TRAIN, "X : [sample", 0).await;
    assert!(h.contains("X: [sample=200, feat=2]"), "{h}");
    let h = hover_text(&c, uri, TRAIN, "moons(", 1).await;
    assert!(
        h.contains("moons(seed, n, noise)") && h.contains("Example:"),
        "{h}"
    );
    assert!(h.contains("result: `[200, 3]`"), "{h}");
    let h = hover_text(&c, uri, TRAIN, "model =", 1).await;
    assert!(
        h.contains("linear(2, 16)") && h.contains("parameters: 82"),
        "{h}"
    );
    // The train block: parameters, memory parts, FLOPs, time per device, verdicts, sources.
    let h = hover_text(&c, uri, TRAIN, "train 300", 1).await;
    for needle in [
        "parameters: 82",
        "B = 200, S = 1",
        "weights",
        "gradients",
        "optimizer state",
        "activations",
        "kernels",
        "the tape keeps",
        "step buffers",
        "| CPU",
        "| CUDA",
        "| MLX",
        "fits",
        "default of 50 GFLOPS",
        "known-device table",
    ] {
        assert!(h.contains(needle), "missing {needle:?} in {h}");
    }
    // The optimizer call shows the same estimate below its docs.
    let h = hover_text(&c, uri, TRAIN, "adam(", 1).await;
    assert!(
        h.contains("one Adam step") && h.contains("Feasibility of this `adam` step"),
        "{h}"
    );
    // A call: its result's shape, from the checker.
    let h = hover_text(&c, uri, TRAIN, "apply(model, X)", 2).await;
    assert!(h.contains("result: `[sample=200, 2]`"), "{h}");
}

const SUBEXPR: &str = "# %% Data
X : [batch, feat] = reshape(iota(12), [4, 3])
W2 = ones([3, 2])
Z = relu(matmul(X, W2) + 1)
d = load(\"points.csv\")
col = sum(d, 0)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hover_on_sub_expressions_and_symbolic_sizes() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///subexpr.mlpl";
    c.open(uri, SUBEXPR, 1).await;
    let p = c.diagnostics(uri, 1).await;
    assert_eq!(p["diagnostics"], json!([]), "{p}");
    // On the `+`: the innermost expression there is the sum.
    let h = hover_text(&c, uri, SUBEXPR, "+ 1", 0).await;
    assert!(h.contains("`matmul(X, W2) + 1`: `[batch=4, 2]`"), "{h}");
    // A variable read inside an expression.
    let h = hover_text(&c, uri, SUBEXPR, "W2) +", 0).await;
    assert!(h.contains("W2: [3, 2]"), "{h}");
    // Symbolic sizes (the rows and columns of a CSV file) are shown as symbols.
    let h = hover_text(&c, uri, SUBEXPR, "d = load", 0).await;
    assert!(h.contains("d: [N, C]"), "{h}");
    let h = hover_text(&c, uri, SUBEXPR, "d, 0", 0).await;
    assert!(h.contains("d: [N, C]"), "{h}");
    let h = hover_text(&c, uri, SUBEXPR, "sum(d", 1).await;
    assert!(h.contains("result: `[C]`"), "{h}");
    let hints = c
        .request(
            "textDocument/inlayHint",
            json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 6, "character": 0}}}),
        )
        .await;
    let labels: Vec<&str> = hints
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["label"].as_str().unwrap())
        .collect();
    assert!(labels.contains(&": [N, C]"), "{labels:?}");
    assert!(labels.contains(&": [C]"), "{labels:?}");
}

/// The position of byte `offset` of `text` in UTF-16 code units.
fn utf16_position(text: &str, offset: usize) -> Value {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    json!({"line": line, "character": text[start..offset].encode_utf16().count()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shape_error_diagnostic_and_hover_agree_with_mlpl_check() {
    // What `mlpl check` reports (the CLI prints `check_source`'s diagnostics).
    let checked = mlpl_lang::check::check_source(SHAPES);
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///agree.mlpl";
    c.open(uri, SHAPES, 1).await;
    let p = c.diagnostics(uri, 1).await;
    let diags = p["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), checked.diagnostics.len(), "{diags:?}");
    for (d, want) in diags.iter().zip(&checked.diagnostics) {
        assert_eq!(d["code"], want.code);
        let primary = want.primary.as_ref().unwrap();
        assert_eq!(
            d["range"]["start"],
            utf16_position(SHAPES, primary.span.start)
        );
        assert_eq!(d["range"]["end"], utf16_position(SHAPES, primary.span.end));
        let msg = d["message"].as_str().unwrap();
        assert!(msg.starts_with(&want.message), "{msg}");
        assert!(msg.contains(&primary.message), "{msg}");
    }
    // The operands' shapes in the error are the shapes the hovers show.
    let e = &checked.diagnostics[0];
    let labels: Vec<&str> = std::iter::once(e.primary.as_ref().unwrap())
        .chain(&e.secondary)
        .map(|l| l.message.as_str())
        .collect();
    for (needle, name) in [("X, W)", "X"), ("W)", "W")] {
        let h = hover_text(&c, uri, SHAPES, needle, 0).await;
        let shown = h
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no shape for {name} in {h}"));
        assert!(
            labels.iter().any(|l| l.contains(shown)),
            "{name}: {shown} not in {labels:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimates_use_the_calibration_cache() {
    let dir = std::env::temp_dir().join(format!("mlpl-lsp-cal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("calibration.json");
    std::fs::write(&file, r#"{"version":1,"devices":[{"device":"cpu","gflops":1000,"size":1024,"measured_at":1,"source":"`mlpl calibrate`"}]}"#).unwrap();
    let (c, _) = TestClient::start(json!({"debounceMs": 0, "estimates": {"calibrationFile": file.display().to_string(), "cudaDevice": "h200"}})).await;
    let uri = "file:///cal.mlpl";
    c.open(uri, TRAIN, 1).await;
    c.diagnostics(uri, 1).await;
    let h = hover_text(&c, uri, TRAIN, "train 300", 1).await;
    assert!(
        h.contains("measured by `mlpl calibrate` (calibrate_device(1024); one GEMM size only)")
            && h.contains("assumed, not calibrated"),
        "{h}"
    );
    assert!(h.contains("NVIDIA H200"), "{h}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostic_hover_explains_the_code() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///explain.mlpl";
    c.open(uri, SHAPES, 1).await;
    c.diagnostics(uri, 1).await;
    let h = hover_text(&c, uri, SHAPES, "X, W)", 3).await;
    assert!(
        h.contains("**E0203**") && h.contains("mlpl explain E0203"),
        "{h}"
    );
    assert!(h.contains("W: [5, 2]"), "{h}");
}

fn items(v: &Value) -> &Vec<Value> {
    assert_eq!(v["isIncomplete"], true, "{v}");
    v["items"].as_array().unwrap()
}

fn labels(v: &Value) -> Vec<String> {
    items(v)
        .iter()
        .map(|i| i["label"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_in_every_context() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///complete.mlpl";
    let text = "X : [batch, feat] = zeros([2, 3])\nY = \nsum(X, \"\")\nd = device(\"\") { 1 }\nt = load_preloaded(\"\")\ne = estimate_hypothetical(\"\", 1, 1, 1)\nZ : [] = 1\n";
    c.open(uri, text, 1).await;
    c.diagnostics(uri, 1).await;
    // Builtins with snippets, variables with shapes.
    let all = c
        .request("textDocument/completion", TestClient::at(uri, 1, 4))
        .await;
    let arr = items(&all);
    let matmul = arr.iter().find(|i| i["label"] == "matmul").unwrap();
    assert_eq!(matmul["insertTextFormat"], 2);
    assert_eq!(matmul["textEdit"]["newText"], "matmul(${1:a}, ${2:b})$0");
    assert_eq!(matmul["detail"], "matmul(a, b)");
    let x = arr.iter().find(|i| i["label"] == "X").unwrap();
    assert_eq!(x["detail"], "[batch=2, feat=3]");
    assert!(arr.iter().any(|i| i["label"] == "train" && i["kind"] == 14));
    // Documentation is resolved on demand.
    let doc = c.request("completionItem/resolve", matmul.clone()).await;
    assert!(
        doc["documentation"]["value"]
            .as_str()
            .unwrap()
            .contains("Example")
            || doc["documentation"]["value"]
                .as_str()
                .unwrap()
                .contains("matmul("),
        "{doc}"
    );
    // What is typed filters the list: `Y = mat` offers `matmul`, not `zeros`.
    c.change(uri, 2, [1, 4, 1, 4], "mat").await;
    c.diagnostics(uri, 2).await;
    let typed = c
        .request("textDocument/completion", TestClient::at(uri, 1, 7))
        .await;
    let l = labels(&typed);
    assert!(
        l.contains(&"matmul".to_string()) && !l.contains(&"zeros".to_string()),
        "{l:?}"
    );
    assert_eq!(
        items(&typed)
            .iter()
            .find(|i| i["label"] == "matmul")
            .unwrap()["textEdit"]["range"]["start"],
        json!({"line": 1, "character": 4})
    );
    c.change(uri, 3, [1, 4, 1, 7], "").await;
    c.diagnostics(uri, 3).await;
    // Axis names inside an axis-name string argument.
    let (l, ch) = pos_of(text, "sum(X, \"", 8);
    let items = c
        .request("textDocument/completion", TestClient::at(uri, l, ch))
        .await;
    assert_eq!(labels(&items), ["batch", "feat"]);
    // Device names.
    let (l, ch) = pos_of(text, "device(\"", 8);
    let items = c
        .request("textDocument/completion", TestClient::at(uri, l, ch))
        .await;
    assert!(
        labels(&items).contains(&"cuda".to_string()) && labels(&items).contains(&"mlx".to_string())
    );
    // Corpus names.
    let (l, ch) = pos_of(text, "load_preloaded(\"", 16);
    let items = c
        .request("textDocument/completion", TestClient::at(uri, l, ch))
        .await;
    assert!(
        labels(&items).contains(&"tiny_shakespeare_snippet".to_string()),
        "{items}"
    );
    // Architecture names.
    let (l, ch) = pos_of(text, "estimate_hypothetical(\"", 23);
    let items = c
        .request("textDocument/completion", TestClient::at(uri, l, ch))
        .await;
    assert!(
        labels(&items).contains(&"smollm-135m".to_string()),
        "{items}"
    );
    // Axis names inside an annotation.
    let (l, ch) = pos_of(text, "Z : [", 5);
    let items = c
        .request("textDocument/completion", TestClient::at(uri, l, ch))
        .await;
    assert_eq!(labels(&items), ["batch", "feat"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signature_help_tracks_the_argument() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///sig.mlpl";
    let text = "m = linear(2, 3, 0)\ny = adam(loss, m, 0.1, \n";
    c.open(uri, text, 1).await;
    let (l, ch) = pos_of(text, "0.1, ", 5);
    let s = c
        .request("textDocument/signatureHelp", TestClient::at(uri, l, ch))
        .await;
    let sig = &s["signatures"][0];
    assert_eq!(
        sig["label"],
        "adam(loss, params, lr, b1, b2, eps [, max_grad_norm])"
    );
    assert_eq!(s["activeParameter"], 3);
    let p = &sig["parameters"][3]["label"];
    assert_eq!(p, &json!([23, 25]), "label offsets of `b1`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definition_references_and_rename() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///nav.mlpl";
    let text = "X : [batch, feat] = zeros([2, 3])\nX = X * 2\ns = sum(X, \"batch\")\nt = label(s, [\"feat\"])\n";
    c.open(uri, text, 1).await;
    c.diagnostics(uri, 1).await;
    // The `X` read on line 2 is defined by the assignment on line 1.
    let (l, ch) = pos_of(text, "sum(X", 4);
    let d = c
        .request("textDocument/definition", TestClient::at(uri, l, ch))
        .await;
    assert_eq!(d["range"]["start"], json!({"line": 1, "character": 0}));
    let r = c
        .request("textDocument/references", json!({"textDocument": {"uri": uri}, "position": {"line": l, "character": ch}, "context": {"includeDeclaration": true}}))
        .await;
    assert_eq!(r.as_array().unwrap().len(), 4);
    // Rename a variable.
    let pr = c
        .request("textDocument/prepareRename", TestClient::at(uri, l, ch))
        .await;
    assert_eq!(pr["start"], json!({"line": l, "character": ch}));
    let e = c
        .request("textDocument/rename", json!({"textDocument": {"uri": uri}, "position": {"line": l, "character": ch}, "newName": "inputs"}))
        .await;
    assert_eq!(e["changes"][uri].as_array().unwrap().len(), 4);
    // Rename an axis name: the annotation and the string argument.
    let (l, ch) = pos_of(text, "batch, feat", 1);
    let e = c
        .request("textDocument/rename", json!({"textDocument": {"uri": uri}, "position": {"line": l, "character": ch}, "newName": "rows"}))
        .await;
    let edits = e["changes"][uri].as_array().unwrap();
    assert_eq!(edits.len(), 2);
    assert!(
        edits
            .iter()
            .any(|x| x["range"]["start"] == json!({"line": 2, "character": 12})),
        "{edits:?}"
    );
    // An axis defined by an annotation and used in a names list.
    let (l, ch) = pos_of(text, "\"feat\"", 1);
    let d = c
        .request("textDocument/definition", TestClient::at(uri, l, ch))
        .await;
    assert_eq!(d["range"]["start"], json!({"line": 0, "character": 12}));
    // Invalid names are refused.
    let r = c
        .request_raw("textDocument/rename", json!({"textDocument": {"uri": uri}, "position": {"line": 1, "character": 0}, "newName": "train"}))
        .await;
    assert!(
        r["error"]["message"].as_str().unwrap().contains("keyword"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symbols_folding_and_semantic_tokens() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///sym.mlpl";
    c.open(uri, TRAIN, 1).await;
    c.diagnostics(uri, 1).await;
    let s = c
        .request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let cells = s.as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0]["name"], "Model");
    let model = cells[0]["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "model")
        .unwrap();
    assert_eq!(model["kind"], 5, "models are classes");
    assert_eq!(model["detail"], "model, 82 parameters");
    let train = &cells[1]["children"][0];
    assert_eq!(train["name"], "train 300");
    assert_eq!(train["detail"], "adam step");

    let f = c
        .request(
            "textDocument/foldingRange",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let f = f.as_array().unwrap();
    assert!(f
        .iter()
        .any(|r| r["startLine"] == 0 && r["kind"] == "region"));
    assert!(
        f.iter().any(|r| r["startLine"] == 6 && r["endLine"] == 7),
        "train block {f:?}"
    );

    let t = c
        .request(
            "textDocument/semanticTokens/full",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let data = t["data"].as_array().unwrap();
    assert_eq!(data.len() % 5, 0);
    // First token: the `# %% Model` comment (type 7), at 0:0, 10 units long.
    assert_eq!(
        &data[..5],
        &[json!(0), json!(0), json!(10), json!(7), json!(0)]
    );
    let types: Vec<u64> = data.chunks(5).map(|c| c[3].as_u64().unwrap()).collect();
    // Every type but parameters and strings, which this text does not have.
    for t in 0..9 {
        if t != 3 && t != 5 {
            assert!(types.contains(&t), "token type {t} missing");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inlay_hints_follow_the_client_setting() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///hints.mlpl";
    c.open(uri, TRAIN, 1).await;
    c.diagnostics(uri, 1).await;
    let range = json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 20, "character": 0}}});
    let h = c.request("textDocument/inlayHint", range.clone()).await;
    let labels: Vec<&str> = h
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            ": [200, 3]",
            "→ [sample=200, feat=2]",
            ": [200]",
            ": model, 82 parameters"
        ]
    );
    assert_eq!(h[0]["position"], json!({"line": 1, "character": 4}));
    c.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": {"mlpl": {"inlayHints": {"enable": false}}}}),
    )
    .await;
    // The notification is handled before the next request on this connection.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let h = c.request("textDocument/inlayHint", range.clone()).await;
    assert_eq!(h, json!([]));
    c.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": {"mlpl": {"inlayHints": {"enable": true}}}}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let h = c.request("textDocument/inlayHint", range).await;
    assert_eq!(h.as_array().unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_actions_apply_the_checkers_fixes() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///fix.mlpl";
    let text = "a = zeros([2, 3])\nb = zeros([2, 3])\nc = matmul(a, b)\nd = matmull(a, a)\n";
    c.open(uri, text, 1).await;
    let p = c.diagnostics(uri, 1).await;
    let codes: Vec<&str> = p["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["E0203", "E0102"]);
    let actions = c
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 2, "character": 0}, "end": {"line": 3, "character": 20}}, "context": {"diagnostics": []}}),
        )
        .await;
    let actions = actions.as_array().unwrap();
    let titles: Vec<&str> = actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        ["Transpose the right operand", "Replace with `matmul`"]
    );
    let edit = &actions[0]["edit"]["changes"][uri][0];
    assert_eq!(edit["newText"], "transpose(b)");
    assert_eq!(edit["range"]["start"], json!({"line": 2, "character": 14}));
    assert_eq!(actions[0]["kind"], "quickfix");
    assert_eq!(actions[0]["diagnostics"][0]["code"], "E0203");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_lenses_run_cells_and_estimate_train_blocks() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///lens.mlpl";
    c.open(uri, TRAIN, 1).await;
    c.diagnostics(uri, 1).await;
    let lenses = c
        .request(
            "textDocument/codeLens",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let lenses = lenses.as_array().unwrap();
    let cmds: Vec<(&str, &str)> = lenses
        .iter()
        .map(|l| {
            (
                l["command"]["title"].as_str().unwrap(),
                l["command"]["command"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(cmds[0], ("▶ Run Cell", "mlpl.runCell"));
    assert_eq!(cmds[1], ("Run All", "mlpl.runAll"));
    assert_eq!(cmds[3], ("Run Above", "mlpl.runAbove"));
    let args = &lenses[3]["command"]["arguments"][0];
    assert_eq!(args["uri"], uri);
    assert_eq!(args["cellIndex"], 1);
    assert_eq!(args["range"]["start"], json!({"line": 5, "character": 0}));
    assert_eq!(args["range"]["end"], json!({"line": 9, "character": 0}));
    let train = lenses
        .iter()
        .find(|l| l["command"]["title"].as_str().unwrap().starts_with('≈'))
        .unwrap();
    let title = train["command"]["title"].as_str().unwrap();
    assert!(
        title.ends_with("on CPU (not calibrated) · fits (25% margin)"),
        "{title}"
    );
    assert_eq!(train["range"]["start"]["line"], 6);
    // Its command asks the client to show the block's estimate.
    assert_eq!(train["command"]["command"], "mlpl.showEstimate");
    let args = &train["command"]["arguments"][0];
    assert_eq!(args["uri"], uri);
    assert_eq!(args["range"]["start"], json!({"line": 6, "character": 0}));
    assert_eq!(args["range"]["end"], json!({"line": 8, "character": 1}));
}

/// The title of the lens on the `train` block of `TRAIN` (line 6).
async fn train_lens(c: &TestClient, uri: &str) -> String {
    let lenses = c
        .request(
            "textDocument/codeLens",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    lenses
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["command"]["command"] == "mlpl.showEstimate")
        .map(|l| l["command"]["title"].as_str().unwrap().to_string())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_measurements_show_in_the_lens_and_hover_while_the_loop_is_unchanged() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///measured.mlpl";
    c.open(uri, TRAIN, 1).await;
    c.diagnostics(uri, 1).await;
    // A runner's `step_measured` event, as the extension forwards it.
    let mut m = json!({"uri": uri, "start_line": 7, "end_line": 9, "device": "cpu",
        "mode": "captured", "step": 120, "total": 300, "measured_steps": 118,
        "step_ms": 12.3, "step_ms_lo": 11.9, "step_ms_hi": 13.0,
        "peak_rss_bytes": 410000000, "device_peak_bytes": null, "eta_s": 80.0, "done": false});
    // On a line without a `train` statement, or malformed: logged, not shown.
    let mut wrong = m.clone();
    wrong["start_line"] = json!(3);
    c.notify("mlpl/stepMeasured", wrong).await;
    c.wait_for("the log line", |v| {
        v["method"] == "window/logMessage"
            && v["params"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("no `train` statement starts on line 3"))
    })
    .await;
    c.notify("mlpl/stepMeasured", json!({"uri": uri, "step_ms": "fast"}))
        .await;
    c.wait_for("the log line", |v| {
        v["method"] == "window/logMessage"
            && v["params"]["message"]
                .as_str()
                .is_some_and(|s| s.starts_with("mlpl/stepMeasured: ignored"))
    })
    .await;
    assert!(train_lens(&c, uri).await.starts_with('≈'));
    c.notify("mlpl/stepMeasured", m.clone()).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut title = train_lens(&c, uri).await;
    while !title.starts_with("measured") && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        title = train_lens(&c, uri).await;
    }
    assert!(
        title.starts_with("measured 12.3 ms/step, peak 410 MB, ETA 1m20s · est. ≈ ")
            && title.contains(" on CPU (not calibrated) · fits (25% margin)"),
        "{title}"
    );
    let h = hover_text(&c, uri, TRAIN, "train 300", 1).await;
    assert!(
        h.starts_with("**Measured** by the runner on CPU (replayed captured steps; step 120 of 300, running)")
            && h.contains("- time per step: **12.3 ms**, the median of 118 measured steps (10th–90th percentile 11.9–13 ms); estimated ")
            && h.contains("- peak memory: **410 MB** (the process's peak resident memory)")
            && h.contains("- ETA: 1m20s")
            && h.contains("**Feasibility of `train 300`**"),
        "{h}"
    );
    // The loop's end replaces it.
    m["step"] = json!(300);
    m["eta_s"] = json!(0.0);
    m["done"] = json!(true);
    c.notify("mlpl/stepMeasured", m).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !title.contains("done (300 steps)") && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        title = train_lens(&c, uri).await;
    }
    assert!(
        title.starts_with("measured 12.3 ms/step, peak 410 MB, done (300 steps) · est."),
        "{title}"
    );
    // An edit of the loop (its learning rate) ends it: the estimate alone again.
    let (l, ch) = pos_of(TRAIN, "0.01", 0);
    c.change(uri, 2, [l, ch, l, ch + 4], "0.02").await;
    c.diagnostics(uri, 2).await;
    assert!(train_lens(&c, uri).await.starts_with('≈'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_without_markers_are_one_cell() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///one.mlpl";
    c.open(uri, "\n\nx = 1\n", 1).await;
    let lenses = c
        .request(
            "textDocument/codeLens",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let lenses = lenses.as_array().unwrap();
    assert_eq!(lenses.len(), 2);
    assert_eq!(lenses[0]["range"]["start"]["line"], 2);
    assert_eq!(
        lenses[0]["command"]["arguments"][0]["range"]["start"],
        json!({"line": 0, "character": 0})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_analysis_is_isolated() {
    let mut opts = fast();
    opts["testing"] = json!({"panicMarker": "__boom__"});
    let (c, _) = TestClient::start(opts).await;
    let bad = "file:///bad.mlpl";
    c.open(bad, "x = 1 # __boom__\n", 1).await;
    let p = c.diagnostics(bad, 1).await;
    assert_eq!(p["diagnostics"][0]["code"], "internal");
    c.wait_for("the error message", |v| {
        v["method"] == "window/showMessage"
            && v["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("internal error in analysis")
    })
    .await;
    // Requests on the broken document answer (with nothing) instead of crashing.
    let h = c
        .request("textDocument/hover", TestClient::at(bad, 0, 0))
        .await;
    assert!(h.is_null());
    // The server keeps serving other documents and later versions.
    let good = "file:///good.mlpl";
    c.open(good, SHAPES, 1).await;
    let p = c.diagnostics(good, 1).await;
    assert_eq!(p["diagnostics"][0]["code"], "E0203");
    c.change(bad, 2, [0, 6, 0, 16], "").await;
    let p = c.diagnostics(bad, 2).await;
    assert_eq!(p["diagnostics"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_clears_diagnostics_and_shutdown_answers() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///close.mlpl";
    c.open(uri, "y = undefined_thing\n", 1).await;
    let p = c.diagnostics(uri, 1).await;
    assert_eq!(p["diagnostics"][0]["code"], "E0101");
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    )
    .await;
    c.wait_for("cleared diagnostics", |v| {
        v["method"] == "textDocument/publishDiagnostics"
            && v["params"]["uri"] == uri
            && v["params"]["diagnostics"] == json!([])
    })
    .await;
    let h = c
        .request("textDocument/hover", TestClient::at(uri, 0, 0))
        .await;
    assert!(h.is_null());
    let r = c.request("shutdown", Value::Null).await;
    assert!(r.is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_versions_are_applied_after_a_short_wait() {
    // Clients may skip version numbers (Neovim sends its change tick).
    let (c, _) = TestClient::start(json!({"debounceMs": 0, "versionGapMs": 100})).await;
    let uri = "file:///gap.mlpl";
    c.open(uri, "a = 1\n", 1).await;
    c.diagnostics(uri, 1).await;
    c.change(uri, 5, [0, 4, 0, 5], "zz").await;
    let p = c.diagnostics(uri, 5).await;
    assert_eq!(p["diagnostics"][0]["code"], "E0101", "{p}");
    c.wait_for("the log line", |v| {
        v["method"] == "window/logMessage"
            && v["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("never arrived")
    })
    .await;
}

/// The primitives of issue 17 come from the registry like every builtin:
/// completion offers them with their parameters, hover shows their docs and
/// the checker's result shape with the names kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_and_hover_know_the_new_primitives() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///primitives.mlpl";
    let text = "x : [time, feat] = zeros([6, 4])\ny = slice(x, \"time\", 1, -1, 2)\nz = permute(y, \"feat\", 0)\nY = \n";
    c.open(uri, text, 1).await;
    c.diagnostics(uri, 1).await;
    let all = c
        .request("textDocument/completion", TestClient::at(uri, 3, 4))
        .await;
    let arr = items(&all);
    for (name, snippet) in [
        ("where", "where(${1:cond}, ${2:a}, ${3:b})$0"),
        ("gelu_erf", "gelu_erf(${1:x})$0"),
        ("clamp", "clamp(${1:x}, ${2:lo}, ${3:hi})$0"),
        ("maximum", "maximum(${1:a}, ${2:b})$0"),
    ] {
        let item = arr
            .iter()
            .find(|i| i["label"] == name)
            .unwrap_or_else(|| panic!("no completion for {name}"));
        assert_eq!(item["textEdit"]["newText"], snippet, "{name}");
    }
    for name in ["slice", "permute", "sin", "cos", "erf", "minimum"] {
        assert!(arr.iter().any(|i| i["label"] == name), "no {name}");
    }
    let h = hover_text(&c, uri, text, "slice(", 1).await;
    assert!(h.contains("slice(x, axis, start, stop"), "{h}");
    assert!(h.contains("result: `[time=2, feat=4]`"), "{h}");
    let h = hover_text(&c, uri, text, "permute(", 1).await;
    assert!(h.contains("result: `[feat=4, time=2]`"), "{h}");
}
