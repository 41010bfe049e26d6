//! `mlpl serve --state-dir`: save, restart, restore, reattach.

mod serve_support;

use serde_json::{json, Value};
use serve_support::*;

fn vars(srv: &Server, id: &str) -> Vec<Value> {
    let (status, body) = srv.get(&format!("/v1/sessions/{id}/variables"));
    assert_eq!(status, 200, "{body}");
    body["variables"].as_array().unwrap().clone()
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
