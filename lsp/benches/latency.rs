//! Editor latency of `mlpl-lsp` (not a timed test): the server runs in-process on
//! a pipe with the same framing as stdio, driven by the test client.
//!
//! - `didChange` → `publishDiagnostics` on a 5,000-line document: one incremental
//!   edit, timed until the diagnostics of that version arrive (debounce set to 0,
//!   so this is analysis plus publication; the editor adds its debounce, 30 ms by
//!   default, on top);
//! - hover on a variable at the end of the document (analysis cached, as after the
//!   debounced analysis) and right after an edit (analysis included);
//! - hover on a call at the end of the document, whose result shape the checker
//!   computes by replaying the program up to it (`check::query::value_at`);
//! - completion of an identifier at the end of the document.
//!
//! Usage: `cargo bench -p mlpl-lsp --bench latency [-- --rounds N]`.

#[path = "../tests/lsp/common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::TestClient;
use serde_json::json;

fn document(lines: usize) -> String {
    let mut s = String::new();
    let mut k = 0;
    while s.lines().count() < lines {
        s.push_str(&format!(
            "# %% Cell {k}
X{k} : [batch, feat] = reshape(iota(12), [4, 3])
W{k} : [feat, hidden] = ones([3, 2]) / 3
H{k} = matmul(X{k}, W{k})
s{k} = sum(H{k}, \"batch\")
m{k} = chain(linear(2, 16, {k}), tanh_layer(), linear(16, 2, {k}))
y{k} = apply(m{k}, zeros([8, 2]))
train 10 {{
  adam(sum(apply(m{k}, zeros([8, 2]))), m{k}, 0.01, 0.9, 0.999, 1e-8)
}}
"
        ));
        k += 1;
    }
    s.lines().take(lines).collect::<Vec<_>>().join("\n") + "\n"
}

/// Best-of-`n` times in ms on `text` of `mlpl check`'s work (`check_source`),
/// of the same with the facts the server needs (`check::query::check_with_facts`,
/// one pass) and of the server's whole analysis (that, plus lexing, cells and
/// occurrences).
fn analysis_phases(text: &str, n: usize) -> (f64, f64, f64) {
    let best = |f: &mut dyn FnMut()| {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    };
    let check = best(&mut || {
        std::hint::black_box(mlpl_lang::check::check_source(text));
    });
    let facts = best(&mut || {
        std::hint::black_box(mlpl_lang::check::query::check_with_facts(text));
    });
    let whole = best(&mut || {
        std::hint::black_box(mlpl_lsp::analysis::Analysis::new(text));
    });
    (check, facts, whole)
}

fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p = |q: f64| ms(v[((v.len() - 1) as f64 * q).round() as usize]);
    (p(0.5), p(0.9), ms(*v.last().unwrap()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(30);
    let text = document(5000);
    let lines = text.lines().count() as u32;
    let phases = analysis_phases(&text, 15);
    let (c, _) = TestClient::start(json!({"debounceMs": 0})).await;
    let uri = "file:///bench.mlpl";
    let t = Instant::now();
    c.open(uri, &text, 1).await;
    c.diagnostics(uri, 1).await;
    let open_ms = t.elapsed().as_secs_f64() * 1e3;

    // didChange → publishDiagnostics: change the `12` of line 1 back and forth.
    let (el, ec) = common::pos_of(&text, "iota(12)", 5);
    let edit = [el, ec, el, ec + 2];
    let mut change = Vec::new();
    let mut version = 1;
    for i in 0..rounds {
        version += 1;
        let new = if i % 2 == 0 { "13" } else { "12" };
        let t = Instant::now();
        c.change(uri, version, edit, new).await;
        c.diagnostics(uri, version).await;
        change.push(t.elapsed());
    }
    // Hover with the analysis cached.
    let last_x = lines - 9; // `X{k} : …` of the last full cell
    let mut hover = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let h = c
            .request("textDocument/hover", TestClient::at(uri, last_x, 0))
            .await;
        hover.push(t.elapsed());
        assert!(h["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("[batch=4, feat=3]"));
    }
    // Hover on a call in the last cell: its result's shape, which the checker
    // computes by replaying the program up to it (`check::query::value_at`).
    let h_line = lines - 7; // `H{k} = matmul(X{k}, W{k})`
    let h_text = text.lines().nth(h_line as usize).unwrap();
    let h_col = h_text.find("matmul").unwrap() as u32 + 1;
    let mut hover_expr = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let h = c
            .request("textDocument/hover", TestClient::at(uri, h_line, h_col))
            .await;
        hover_expr.push(t.elapsed());
        assert!(
            h["contents"]["value"]
                .as_str()
                .unwrap()
                .contains("result: `[batch=4, hidden=2]`"),
            "{h}"
        );
    }
    // Hover right after an edit (includes one analysis of the new version).
    let mut hover_after_edit = Vec::new();
    for i in 0..rounds {
        version += 1;
        let new = if i % 2 == 0 { "13" } else { "12" };
        c.change(uri, version, edit, new).await;
        let t = Instant::now();
        c.request("textDocument/hover", TestClient::at(uri, last_x, 0))
            .await;
        hover_after_edit.push(t.elapsed());
        c.diagnostics(uri, version).await;
    }
    // Completion of `m` at the end of the document.
    c.change(uri, version + 1, [lines, 0, lines, 0], "z = m")
        .await;
    c.diagnostics(uri, version + 1).await;
    let mut completion = Vec::new();
    let mut n_items = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        let items = c
            .request("textDocument/completion", TestClient::at(uri, lines, 5))
            .await;
        completion.push(t.elapsed());
        n_items = items["items"].as_array().map_or(0, Vec::len);
    }

    let rows = [
        (
            "didChange → publishDiagnostics (5,000 lines, debounce 0)",
            stats(change),
        ),
        ("hover on a variable (analysis cached)", stats(hover)),
        (
            "hover on a call at the end (checker replay to it)",
            stats(hover_expr),
        ),
        (
            "hover right after an edit (includes the analysis)",
            stats(hover_after_edit),
        ),
        (&*format!("completion ({n_items} items)"), stats(completion)),
    ];
    println!("document: {lines} lines, {} bytes; didOpen → first diagnostics {open_ms:.1} ms; {rounds} rounds", text.len());
    println!(
        "in-process, best of 15: check_source {:.1} ms, check::query::check_with_facts {:.1} ms, whole analysis {:.1} ms",
        phases.0, phases.1, phases.2
    );
    println!("| measurement | median ms | p90 ms | max ms |");
    println!("|---|---:|---:|---:|");
    for (name, (m, p90, max)) in &rows {
        println!("| {name} | {m:.2} | {p90:.2} | {max:.2} |");
    }
}
