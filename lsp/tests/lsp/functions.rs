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
