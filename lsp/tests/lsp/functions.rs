//! User functions in the editor: a signature mismatch shows at the call as you
//! type (with the parameter's declaration as related information), hover on a
//! function name shows its signature, and completion offers user functions.

use crate::common;

use common::{pos_of, TestClient};
use serde_json::{json, Value};

fn fast() -> Value {
    json!({"debounceMs": 0, "versionGapMs": 100, "estimates": {"calibrationFile": "/nonexistent/calibration.json"}})
}

const SRC: &str = "fn proj(x : [n, d], w : [d, k]) -> [n, k] {
  matmul(x, w)
}
X = ones([4, 3])
y = proj(X, ones([3, 2]))
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mismatch_shows_at_the_call_as_you_type_and_hover_shows_the_signature() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///functions.mlpl";
    c.open(uri, SRC, 1).await;
    let clean = c.diagnostics(uri, 1).await;
    assert_eq!(clean["diagnostics"], json!([]), "{clean}");

    // Hover on the call's name: the signature and this call's result.
    let (l, ch) = pos_of(SRC, "proj(X", 1);
    let h = c
        .request("textDocument/hover", TestClient::at(uri, l, ch))
        .await;
    let text = h["contents"]["value"].as_str().unwrap_or("");
    assert!(
        text.contains("fn proj(x : [n, d], w : [d, k]) -> [n, k]"),
        "{text}"
    );
    assert!(text.contains("[4, 2]"), "{text}");
    // The dimension names as this call binds them.
    assert!(
        text.contains("this call: `n` = 4, `d` = 3, `k` = 2"),
        "{text}"
    );
    // And on the definition's name.
    let h = c
        .request("textDocument/hover", TestClient::at(uri, 0, 4))
        .await;
    assert!(h["contents"]["value"]
        .as_str()
        .unwrap_or("")
        .contains("user-defined function"));

    // Typing a wrong size into the call: E0219 at the argument.
    let (l, ch) = pos_of(SRC, "[3, 2]", 1);
    c.change(uri, 2, [l, ch, l, ch + 1], "5").await;
    let d = c.diagnostics(uri, 2).await;
    let diags = d["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{d}");
    assert_eq!(diags[0]["code"], "E0219");
    assert_eq!(diags[0]["range"]["start"]["line"], 4);
    let related = diags[0]["relatedInformation"].as_array().unwrap();
    assert!(
        related
            .iter()
            .any(|r| r["location"]["range"]["start"]["line"] == 0
                && r["message"]
                    .as_str()
                    .unwrap()
                    .contains("parameter `w` declared here")),
        "{related:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_offers_user_functions_with_their_parameters() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///complete_fn.mlpl";
    let text = format!("{SRC}z = pr\n");
    c.open(uri, &text, 1).await;
    c.diagnostics(uri, 1).await;
    let all = c
        .request("textDocument/completion", TestClient::at(uri, 5, 6))
        .await;
    let items = all["items"].as_array().unwrap();
    let proj = items
        .iter()
        .find(|i| i["label"] == "proj")
        .expect("proj offered");
    assert_eq!(proj["detail"], "fn proj(x : [n, d], w : [d, k]) -> [n, k]");
    assert_eq!(proj["textEdit"]["newText"], "proj(${1:x}, ${2:w})$0");
}

/// Two functions, one calling the other, a caller variable named like a
/// parameter (`x`), and two calls.
const NAV: &str = "fn proj(x : [n, d], w : [d, k]) -> [n, k] {
  h = matmul(x, w)
  h
}
fn block(x : [n, d], w : [d, d]) -> [n, d] {
  x + proj(x, w)
}
x = ones([4, 3])
W = ones([3, 3])
y = block(x, W)
z = proj(x, ones([3, 2]))
";

fn nav_at(uri: &str, needle: &str, extra: u32) -> Value {
    let (l, ch) = pos_of(NAV, needle, extra);
    TestClient::at(uri, l, ch)
}

fn with_context(mut at: Value, include: bool) -> Value {
    at["context"] = json!({ "includeDeclaration": include });
    at
}

fn with_name(mut at: Value, name: &str) -> Value {
    at["newName"] = json!(name);
    at
}

/// The (line, character) of each location or edit range's start.
fn starts(v: &Value) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let r = if x.get("range").is_some() {
                &x["range"]
            } else {
                x
            };
            (
                r["start"]["line"].as_u64().unwrap(),
                r["start"]["character"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definition_references_and_rename_of_functions_and_their_parameters() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///nav_fn.mlpl";
    c.open(uri, NAV, 1).await;
    let d = c.diagnostics(uri, 1).await;
    assert_eq!(d["diagnostics"], json!([]), "{d}");

    // Go to definition from a call (top level and inside another body).
    let d = c
        .request("textDocument/definition", nav_at(uri, "proj(x, ones", 0))
        .await;
    assert_eq!(d["range"]["start"], json!({"line": 0, "character": 3}));
    let d = c
        .request("textDocument/definition", nav_at(uri, "proj(x, w)", 1))
        .await;
    assert_eq!(d["range"]["start"], json!({"line": 0, "character": 3}));
    // From a read of a parameter in a body: the parameter in the signature.
    let d = c
        .request("textDocument/definition", nav_at(uri, "matmul(x", 7))
        .await;
    assert_eq!(d["range"]["start"], json!({"line": 0, "character": 8}));
    // From a read of a body variable: its assignment in that body.
    let d = c
        .request("textDocument/definition", nav_at(uri, "  h\n", 2))
        .await;
    assert_eq!(d["range"]["start"], json!({"line": 1, "character": 2}));

    // References of `proj`: the definition and both calls.
    let r = c
        .request(
            "textDocument/references",
            with_context(nav_at(uri, "fn proj", 3), true),
        )
        .await;
    assert_eq!(starts(&r), [(0, 3), (5, 6), (10, 4)]);
    let r = c
        .request(
            "textDocument/references",
            with_context(nav_at(uri, "fn proj", 3), false),
        )
        .await;
    assert_eq!(starts(&r), [(5, 6), (10, 4)]);
    // References of `block`'s parameter `x`: its body only, not the caller's `x`
    // nor `proj`'s parameter of the same name.
    let r = c
        .request(
            "textDocument/references",
            with_context(nav_at(uri, "block(x", 6), true),
        )
        .await;
    assert_eq!(starts(&r), [(4, 9), (5, 2), (5, 11)]);
    // And the caller's `x`: the top level only.
    let r = c
        .request(
            "textDocument/references",
            with_context(nav_at(uri, "x = ones", 0), true),
        )
        .await;
    assert_eq!(starts(&r), [(7, 0), (9, 10), (10, 9)]);

    // Rename the function: definition and every call.
    let e = c
        .request(
            "textDocument/rename",
            with_name(nav_at(uri, "proj(x, ones", 1), "project"),
        )
        .await;
    let edits = &e["changes"][uri];
    assert_eq!(starts(edits), [(0, 3), (5, 6), (10, 4)]);
    assert!(edits
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["newText"] == "project"));
    // Rename a parameter: the signature and the body.
    let e = c
        .request(
            "textDocument/rename",
            with_name(nav_at(uri, "w : [d, k]", 0), "weight"),
        )
        .await;
    assert_eq!(starts(&e["changes"][uri]), [(0, 20), (1, 16)]);

    // A signature's dimension name: its uses in that signature only (not the
    // `d` of `block`), and its definition is its first use.
    let e = c
        .request(
            "textDocument/rename",
            with_name(nav_at(uri, "d, k]", 0), "width"),
        )
        .await;
    assert_eq!(starts(&e["changes"][uri]), [(0, 16), (0, 25)]);
    let d = c
        .request("textDocument/definition", nav_at(uri, "d, k]", 0))
        .await;
    assert_eq!(d["range"]["start"], json!({"line": 0, "character": 16}));
    let h = c
        .request("textDocument/hover", nav_at(uri, "d, k]", 0))
        .await;
    let text = h["contents"]["value"].as_str().unwrap_or_default();
    assert!(text.contains("dimension name of the signature"), "{h}");

    // A builtin's name is refused with E0112's message; so is another
    // function's.
    let r = c
        .request_raw(
            "textDocument/rename",
            with_name(nav_at(uri, "fn proj", 3), "matmul"),
        )
        .await;
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("has the name of a builtin") && msg.contains("E0112"),
        "{r}"
    );
    let r = c
        .request_raw(
            "textDocument/rename",
            with_name(nav_at(uri, "fn proj", 3), "block"),
        )
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already defined"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signature_help_for_user_functions_and_hover_on_parameters() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///sig_fn.mlpl";
    let text = format!("{SRC}z = proj(X, ");
    c.open(uri, &text, 1).await;
    c.diagnostics(uri, 1).await;
    let (l, ch) = pos_of(&text, "z = proj(X, ", 12);
    let h = c
        .request("textDocument/signatureHelp", TestClient::at(uri, l, ch))
        .await;
    let sig = &h["signatures"][0];
    let label = sig["label"].as_str().unwrap();
    assert_eq!(label, "fn proj(x : [n, d], w : [d, k]) -> [n, k]");
    assert_eq!(h["activeParameter"], 1);
    let off = |i: usize| -> (usize, usize) {
        let p = &sig["parameters"][i]["label"];
        (
            p[0].as_u64().unwrap() as usize,
            p[1].as_u64().unwrap() as usize,
        )
    };
    let (a, b) = off(0);
    assert_eq!(&label[a..b], "x : [n, d]");
    let (a, b) = off(1);
    assert_eq!(&label[a..b], "w : [d, k]");
    assert!(sig["documentation"]["value"]
        .as_str()
        .unwrap()
        .contains("returns [n, k]"));

    // Hover on a parameter in the signature: its declared shape.
    let h = c
        .request("textDocument/hover", TestClient::at(uri, 0, 8))
        .await;
    let v = h["contents"]["value"].as_str().unwrap();
    assert!(v.contains("x: [n, d]") && v.contains("parameter of"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inlay_hints_inside_bodies_show_symbolic_shapes_and_tokens_mark_functions() {
    let (c, _) = TestClient::start(fast()).await;
    let uri = "file:///hints_fn.mlpl";
    let text = "fn widen(x : [n, d], w : [d, 2 * d]) -> [n, 2 * d] {\n  h = matmul(x, w)\n  s = sum(h, 1)\n  h\n}\nY = widen(ones([4, 3]), ones([3, 6]))\n";
    c.open(uri, text, 1).await;
    let d = c.diagnostics(uri, 1).await;
    assert_eq!(d["diagnostics"], json!([]), "{d}");
    let range = json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 9, "character": 0}}});
    let h = c.request("textDocument/inlayHint", range).await;
    let hints: Vec<(u64, &str)> = h
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["position"]["line"].as_u64().unwrap(),
                x["label"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hints,
        [(1, ": [n, 2 * d]"), (2, ": [n]"), (5, ": [4, 6]")],
        "{h}"
    );

    let t = c
        .request(
            "textDocument/semanticTokens/full",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let data = t["data"].as_array().unwrap();
    // Decode to (line, column, length, type, modifiers).
    let (mut line, mut col) = (0u64, 0u64);
    let mut toks = Vec::new();
    for c5 in data.chunks(5) {
        let (dl, ds) = (c5[0].as_u64().unwrap(), c5[1].as_u64().unwrap());
        if dl > 0 {
            line += dl;
            col = ds;
        } else {
            col += ds;
        }
        toks.push((
            line,
            col,
            c5[2].as_u64().unwrap(),
            c5[3].as_u64().unwrap(),
            c5[4].as_u64().unwrap(),
        ));
    }
    let at = |l: u64, c: u64| toks.iter().find(|t| t.0 == l && t.1 == c).copied();
    // `fn` is a keyword; `widen` a function declaration; `x` a parameter
    // declaration; `x` read in the body a parameter; the call a function.
    assert_eq!(at(0, 0).map(|t| t.3), Some(0), "{toks:?}");
    assert_eq!(at(0, 3).map(|t| (t.3, t.4)), Some((1, 1)), "{toks:?}");
    assert_eq!(at(0, 9).map(|t| (t.3, t.4)), Some((3, 1)), "{toks:?}");
    assert_eq!(at(1, 13).map(|t| (t.3, t.4)), Some((3, 0)), "{toks:?}");
    assert_eq!(at(5, 4).map(|t| (t.3, t.4)), Some((1, 0)), "{toks:?}");
    // Dimension names in the signature are type parameters, declared at their
    // first use: `n` (0:14), `d` (0:17), then `d` again (0:26) and in `2 * d`.
    assert_eq!(at(0, 14).map(|t| (t.3, t.4)), Some((4, 1)), "{toks:?}");
    assert_eq!(at(0, 17).map(|t| (t.3, t.4)), Some((4, 1)), "{toks:?}");
    assert_eq!(at(0, 26).map(|t| (t.3, t.4)), Some((4, 0)), "{toks:?}");
    assert_eq!(at(0, 33).map(|t| (t.3, t.4)), Some((4, 0)), "{toks:?}");
}
