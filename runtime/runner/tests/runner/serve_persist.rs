//! `mlpl serve --state-dir`: save, restart, restore, reattach.

use crate::serve_support;

use serde_json::{json, Value};
use serve_support::*;

fn vars(srv: &Server, id: &str) -> Vec<Value> {
    let (status, body) = srv.get(&format!("/v1/sessions/{id}/variables"));
    assert_eq!(status, 200, "{body}");
    body["variables"].as_array().unwrap().clone()
}

/// The automatic save happens just before the run's `run_finished` event: the
/// saved sequence number must be that event's, so a client that saw it resumes
/// after a restart without missing or repeating an event number.
#[test]
fn the_automatic_save_counts_the_run_finished_event() {
    let state = temp_dir("state-seq");
    let srv = Server::start(&["--state-dir", s(&state)]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let run = srv.run(&id, "x = iota(3)\nx * 2");
    let got = events.until_finished(&run);
    let finished = got.last().unwrap();
    assert_eq!(finished.data["saved"], true);
    srv.stop();

    let srv = Server::start(&["--state-dir", s(&state)]);
    let (_, list) = srv.get("/v1/sessions");
    assert_eq!(list["sessions"][0]["last_seq"], finished.id);
    let events = srv.events(&id, Some(finished.id));
    let run = srv.run(&id, "x + 1");
    let got = events.until_finished(&run);
    assert_eq!(got[0].id, finished.id + 1, "{got:?}");
    assert_eq!(got[0].event, "run_started");
}

#[test]
fn save_restart_restore_keeps_variables_and_the_event_sequence() {
    let state = temp_dir("state");
    let srv = Server::start(&["--state-dir", s(&state)]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let code = "W : [feat] = param[2]\ntrain 30 { adam(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.9, 0.999, 1e-8); sum((W - [1, 2]) * (W - [1, 2])) }\nname = \"run one\"";
    let run = srv.run(&id, code);
    let got = events.until_finished(&run);
    // Saved automatically after the run.
    assert_eq!(got.last().unwrap().data["saved"], true);
    let (status, body) = srv.post(&format!("/v1/sessions/{id}/save"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert!(body["saved"]["tensors"].as_u64().unwrap() >= 3);
    let before = vars(&srv, &id);
    let last_seq = got.last().unwrap().id;
    srv.stop();

    let srv = Server::start(&["--state-dir", s(&state)]);
    let (_, list) = srv.get("/v1/sessions");
    assert_eq!(list["sessions"][0]["id"], id.as_str());
    assert_eq!(list["sessions"][0]["last_seq"], last_seq);
    assert_eq!(vars(&srv, &id), before);
    let w = before.iter().find(|v| v["name"] == "W").unwrap();
    assert_eq!(w["axes"], json!(["feat"]));
    assert_eq!(w["param"], true);
    // The client reattaches: its stream resumes after the last event it saw,
    // and the session's optimizer state carried over.
    let events = srv.events(&id, Some(last_seq));
    let run = srv.run(&id, "adam(sum(W * W), W, 0.1, 0.9, 0.999, 1e-8)\nname");
    let got = events.until_finished(&run);
    assert_eq!(got[0].id, last_seq + 1);
    let value = got.iter().find(|e| e.event == "value").unwrap();
    assert_eq!(value.data["text"], "run one");
    // Restoring the saved state on demand replaces later changes.
    let run = srv.run(&id, "name = \"changed\"");
    events.until_finished(&run);
    let (status, body) = srv.post(&format!("/v1/sessions/{id}/restore"), &json!({}));
    assert_eq!(status, 200, "{body}");
    let name = vars(&srv, &id)
        .into_iter()
        .find(|v| v["name"] == "name")
        .unwrap();
    // The autosave after the last run saved "changed".
    assert_eq!(name["preview"], "\"changed\"");
    // Deleting the session removes its saved state.
    srv.call("DELETE", &format!("/v1/sessions/{id}"), None);
    poll(|| (!state.join(&id).exists()).then_some(()));
    srv.stop();
    let srv = Server::start(&["--state-dir", s(&state)]);
    let (_, list) = srv.get("/v1/sessions");
    assert_eq!(list["sessions"].as_array().unwrap().len(), 0);
}

#[test]
fn save_without_a_state_dir_is_a_clear_error() {
    let srv = Server::start(&[]);
    let id = srv.session();
    let (status, body) = srv.post(&format!("/v1/sessions/{id}/save"), &json!({}));
    assert_eq!(status, 409);
    assert_eq!(body["error"]["code"], "no_state_dir");
    let (status, body) = srv.post(&format!("/v1/sessions/{id}/restore"), &json!({}));
    assert_eq!(status, 409);
    assert_eq!(body["error"]["code"], "no_state_dir");
}

/// Builds and trains a small model with Adam (cell one).
const MODEL_CELL: &str = "data = moons(0, 40, 0.1)\nX : [sample, feat] = matmul(data, [[1, 0], [0, 1], [0, 0]])\ny = matmul(data, [0, 0, 1])\nmodel = chain(linear(2, 8, 1), tanh_layer(), linear(8, 2, 2))\ntrain 20 { adam(cross_entropy(apply(model, X), y), model, 0.05, 0.9, 0.999, 1e-8); cross_entropy(apply(model, X), y) }\nexperiment \"wide\" { acc_metric = 0.5 }\nexperiment \"narrow\" { acc_metric = 0.75 }";

/// Compares the experiments recorded by cell one (cell three).
const COMPARE_CELL: &str = "compare(\"wide\", \"narrow\")";

/// Continues training and reports outputs and losses (cell two).
const CONTINUE_CELL: &str = "before = apply(model, X)\ntrain 5 { adam(cross_entropy(apply(model, X), y), model, 0.05, 0.9, 0.999, 1e-8); cross_entropy(apply(model, X), y) }\nlast_losses + sum(before * before)";

fn run_value(srv: &Server, events: &Events, id: &str, code: &str) -> String {
    let run = srv.run(id, code);
    let got = events.until_finished(&run);
    let last = got.last().unwrap();
    assert_eq!(last.data["status"], "ok", "{}", last.data);
    let value = got.iter().find(|e| e.event == "value").unwrap();
    value.data["text"].as_str().unwrap().to_string()
}

#[test]
fn a_trained_model_its_optimizer_state_and_experiments_survive_a_server_restart() {
    // Without a restart: both cells in one session.
    let srv = Server::start(&[]);
    let id = srv.session();
    let events = srv.events(&id, None);
    run_value(&srv, &events, &id, MODEL_CELL);
    let want = run_value(&srv, &events, &id, CONTINUE_CELL);
    let compared = run_value(&srv, &events, &id, COMPARE_CELL);
    srv.stop();

    // With one: the first cell, restart, restore, the second cell.
    let state = temp_dir("model-state");
    let srv = Server::start(&["--state-dir", s(&state)]);
    let id = srv.session();
    let events = srv.events(&id, None);
    run_value(&srv, &events, &id, MODEL_CELL);
    srv.stop();
    let srv = Server::start(&["--state-dir", s(&state)]);
    let model = vars(&srv, &id)
        .into_iter()
        .find(|v| v["name"] == "model")
        .expect("the model was restored");
    assert_eq!(model["kind"], "model");
    assert_eq!(model["parameters"].as_array().unwrap().len(), 4);
    let events = srv.events(&id, None);
    // Same outputs before training, same losses while training: the parameters,
    // Adam's moments and step counts all came back.
    assert_eq!(run_value(&srv, &events, &id, CONTINUE_CELL), want);
    // The session's experiment records came back too.
    assert_eq!(run_value(&srv, &events, &id, COMPARE_CELL), compared);
    srv.stop();
}

/// Defines two functions, one calling the other (cell one).
const FN_CELL: &str = "fn proj(x : [n, d], w : [d, k]) -> [n, k] {\n  matmul(x, w)\n}\nfn block(x : [n, d], w : [d, d]) -> [n, d] {\n  h = proj(x, w)\n  x + tanh(h)\n}\nW = param[2, 2]\nW = [[0.5, -0.25], [0.125, 1]]";

/// Calls them from a later cell, and trains through them.
const CALL_CELL: &str = "X = [[1, 2], [3, 4], [5, 6]]\ntrain 3 { adam(sum(block(X, W) * block(X, W)), W, 0.1, 0.9, 0.999, 1e-8); sum(block(X, W)) }\nlast_losses + sum(block(X, W))";

#[test]
fn functions_defined_in_one_cell_are_called_from_later_cells_and_survive_a_server_restart() {
    // Without a restart: a later cell of the same session calls them.
    let srv = Server::start(&[]);
    let id = srv.session();
    let events = srv.events(&id, None);
    run_value(&srv, &events, &id, FN_CELL);
    let want = run_value(&srv, &events, &id, CALL_CELL);
    srv.stop();

    // With one: define, restart, restore, call.
    let state = temp_dir("fn-state");
    let srv = Server::start(&["--state-dir", s(&state)]);
    let id = srv.session();
    let events = srv.events(&id, None);
    run_value(&srv, &events, &id, FN_CELL);
    srv.stop();
    let saved: Value =
        serde_json::from_slice(&std::fs::read(state.join(&id).join("session.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = saved["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["block", "proj"]);
    let srv = Server::start(&["--state-dir", s(&state)]);
    let events = srv.events(&id, None);
    assert_eq!(run_value(&srv, &events, &id, CALL_CELL), want);
    srv.stop();
}
