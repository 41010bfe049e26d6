//! `mlpl serve`: runs, events, cancel, isolation and stream resumption.

use crate::serve_support;

use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::*;

const LOSS: &str = "sum((W - [1, 2]) * (W - [1, 2]))";

fn train(n: u64) -> String {
    format!("train {n} {{ adam({LOSS}, W, 0.1, 0.9, 0.999, 1e-8); {LOSS} }}")
}

#[test]
fn a_training_cell_streams_ordered_steps_and_the_next_cell_sees_its_variables() {
    let srv = Server::start(&[]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let (status, body) = srv.post(
        &format!("/v1/sessions/{id}/runs"),
        &json!({
            "code": format!("W = param[2]\n{}", train(50)),
            "cell": {"uri": "file:///nb.mlpl", "index": 1, "start_line": 4},
        }),
    );
    assert_eq!(status, 202, "{body}");
    let run = body["run"].as_str().unwrap().to_string();
    let got = events.until_finished(&run);
    // Every event has the common fields, ids are the seqs, consecutive from 1.
    for (i, e) in got.iter().enumerate() {
        assert_eq!(e.id, i as u64 + 1);
        assert_eq!(e.data["seq"], e.id);
        assert_eq!(e.data["type"], e.event.as_str());
        assert_eq!(e.data["session"], id.as_str());
        assert_eq!(e.data["run"], run.as_str());
        assert_eq!(e.data["v"], 1);
        assert!(e.data["time"].as_u64().unwrap() > 0);
    }
    assert_eq!(got[0].event, "run_started");
    assert_eq!(got[0].data["start_line"], 5);
    assert_eq!(got[0].data["end_line"], 6);
    assert_eq!(got[0].data["cell"]["index"], 1);
    assert_eq!(got[0].data["device"], "cpu");
    let steps: Vec<&Sse> = got.iter().filter(|e| e.event == "step").collect();
    assert!(!steps.is_empty());
    let nums: Vec<u64> = steps
        .iter()
        .map(|e| e.data["step"].as_u64().unwrap())
        .collect();
    assert!(nums.windows(2).all(|w| w[0] < w[1]), "{nums:?}");
    assert_eq!(nums[0], 1);
    let last = steps.last().unwrap();
    assert_eq!(
        (last.data["step"].as_u64(), last.data["total"].as_u64()),
        (Some(50), Some(50))
    );
    assert!(last.data["loss"].as_f64().unwrap() < steps[0].data["loss"].as_f64().unwrap());
    assert!(last.data["step_ms"].as_f64().is_some());
    let fin = got.last().unwrap();
    assert_eq!(fin.data["status"], "ok");
    assert!(fin.data["elapsed_ms"].as_f64().unwrap() >= 0.0);
    assert!(got.iter().any(|e| e.event == "value"));
    assert!(got.iter().any(|e| e.event == "device"));
    // The run is finished.
    let (_, body) = srv.get(&format!("/v1/runs/{run}"));
    assert_eq!(body["status"], "ok");
    // Variables: shape, kind, param flag, preview.
    let (status, body) = srv.get(&format!("/v1/sessions/{id}/variables"));
    assert_eq!(status, 200);
    let vars = body["variables"].as_array().unwrap();
    let w = vars.iter().find(|v| v["name"] == "W").unwrap();
    assert_eq!(w["kind"], "array");
    assert_eq!(w["shape"], json!([2]));
    assert_eq!(w["param"], true);
    assert_eq!(w["device"], "cpu");
    assert!(w["preview"].as_str().unwrap().starts_with('['));
    assert!(vars.iter().any(|v| v["name"] == "last_losses"));
    // A second cell sees the first cell's variables.
    let run2 = srv.run(&id, "V : [a] = W\nV");
    let got = events.until_finished(&run2);
    let value = got.iter().find(|e| e.event == "value").unwrap();
    assert_eq!(value.data["shape"], json!([2]));
    assert_eq!(value.data["axes"], json!(["a"]));
    assert_eq!(got.last().unwrap().data["status"], "ok");
}

#[test]
fn an_erroring_cell_is_followed_by_a_good_one() {
    let srv = Server::start(&[]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let (_, body) = srv.post(
        &format!("/v1/sessions/{id}/runs"),
        &json!({
            "code": "ok = 1\nbad = missing + 1",
            "cell": {"uri": "file:///nb.mlpl", "index": 3, "start_line": 20},
        }),
    );
    let run = body["run"].as_str().unwrap().to_string();
    let got = events.until_finished(&run);
    let fin = got.last().unwrap();
    assert_eq!(fin.data["status"], "error");
    let d = &fin.data["diagnostic"];
    assert_eq!(d["code"], "E0101");
    assert_eq!(d["line"], 22);
    assert_eq!(d["column"], 7);
    assert_eq!(d["file"], "file:///nb.mlpl");
    let (_, body) = srv.get(&format!("/v1/runs/{run}"));
    assert_eq!(body["status"], "error");
    // Parse errors too.
    let run = srv.run(&id, "x = (1 +");
    assert_eq!(
        events.until_finished(&run).last().unwrap().data["status"],
        "error"
    );
    // The session lives on, with what ran before the error.
    let run = srv.run(&id, "ok + 41");
    let got = events.until_finished(&run);
    assert_eq!(got.last().unwrap().data["status"], "ok");
    let out = got.iter().find(|e| e.event == "output").unwrap();
    assert_eq!(out.data["text"], "42\n");
    // Warnings arrive as events.
    let run = srv.run(&id, "repeat 1.5 { 1 }");
    let got = events.until_finished(&run);
    let w = got.iter().find(|e| e.event == "warning").unwrap();
    assert_eq!(w.data["diagnostic"]["code"], "W0202");
}

#[test]
fn cancel_stops_training_quickly_and_keeps_the_last_step() {
    let srv = Server::start(&[]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let setup = srv.run(&id, "W = param[2]");
    events.until_finished(&setup);
    let run = srv.run(&id, &train(1_000_000));
    events.until(|e| e.event == "step");
    // A second run is refused while this one runs.
    let (status, body) = srv.post(&format!("/v1/sessions/{id}/runs"), &json!({"code": "1"}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "busy");
    assert_eq!(body["error"]["run"], run.as_str());
    let (_, list) = srv.get("/v1/sessions");
    assert_eq!(list["sessions"][0]["busy"], true);
    let asked = Instant::now();
    let (status, body) = srv.call("POST", &format!("/v1/runs/{run}/cancel"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelling"], true);
    let got = events.until_finished(&run);
    let latency = asked.elapsed();
    let fin = got.last().unwrap();
    assert_eq!(fin.data["status"], "cancelled");
    assert_eq!(fin.data["diagnostic"]["code"], "E0409");
    assert!(latency < Duration::from_secs(1), "cancel took {latency:?}");
    let last_step = got
        .iter()
        .rev()
        .find(|e| e.event == "step")
        .map(|e| e.data["step"].as_u64().unwrap())
        .unwrap();
    // The workspace holds the last completed step: `step` is its 0-based index.
    let check = srv.run(&id, "step");
    let got = events.until_finished(&check);
    let value = got.iter().find(|e| e.event == "value").unwrap();
    assert_eq!(value.data["text"], (last_step - 1).to_string());
    // Cancelling a finished run says so.
    let (status, body) = srv.call("POST", &format!("/v1/runs/{run}/cancel"), None);
    assert_eq!(status, 200);
    assert_eq!(body["cancelling"], false);
    assert_eq!(body["status"], "cancelled");
}

#[test]
fn cancel_outside_train_takes_effect_between_statements() {
    let srv = Server::start(&[]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let run = srv.run(&id, "x = 0\nrepeat 100000000 { x = x + 1 }");
    // Poll until the run is visibly running, then cancel.
    poll(|| {
        let (_, b) = srv.get(&format!("/v1/sessions/{id}/variables"));
        b["busy"].as_bool().filter(|b| *b)
    });
    let asked = Instant::now();
    srv.call("POST", &format!("/v1/runs/{run}/cancel"), None);
    let got = events.until_finished(&run);
    assert_eq!(got.last().unwrap().data["status"], "cancelled");
    assert!(asked.elapsed() < Duration::from_secs(1));
}

#[test]
fn streams_resume_after_last_event_id() {
    let srv = Server::start(&[]);
    let id = srv.session();
    let first = srv.events(&id, None);
    let mut all = Vec::new();
    for code in ["a = 1", "b = a + 1", "c = b * [1, 2, 3]"] {
        let run = srv.run(&id, code);
        all.extend(first.until_finished(&run));
    }
    let n = all.len() as u64;
    assert_eq!(all.last().unwrap().id, n);
    // Reconnect after event k: exactly the events after it, in order.
    let k = 4;
    let resumed = srv.events(&id, Some(k));
    let again: Vec<Sse> = (k..n)
        .map(|_| resumed.next(WAIT).expect("a resumed event"))
        .collect();
    let ids: Vec<u64> = again.iter().map(|e| e.id).collect();
    assert_eq!(ids, (k + 1..=n).collect::<Vec<_>>());
    for (a, b) in again.iter().zip(&all[k as usize..]) {
        assert_eq!(a.data, b.data);
    }
    // `?after=` works the same, and new events follow on a resumed stream.
    let (status, _) = srv.call("GET", &format!("/v1/sessions/{id}/events?after=abc"), None);
    assert_eq!(status, 400);
    let run = srv.run(&id, "d = 4");
    let more = resumed.until_finished(&run);
    assert_eq!(more[0].id, n + 1);
    // A fully caught-up stream gets nothing until something happens.
    let tail = srv.events(&id, Some(more.last().unwrap().id));
    assert!(tail.next(Duration::from_millis(200)).is_none());
}

#[test]
fn sessions_are_independent_and_deleting_one_ends_its_stream() {
    let srv = Server::start(&[]);
    let a = srv.session();
    let b = srv.session();
    let ea = srv.events(&a, None);
    let eb = srv.events(&b, None);
    let ra = srv.run(&a, "x = 1");
    let rb = srv.run(&b, "x = 2");
    ea.until_finished(&ra);
    eb.until_finished(&rb);
    let r = srv.run(&b, "x");
    let got = eb.until_finished(&r);
    assert_eq!(
        got.iter().find(|e| e.event == "value").unwrap().data["text"],
        "2"
    );
    // A long run in `a` does not block `b`.
    let long = srv.run(&a, "repeat 100000000 { x = x + 1 }");
    let r = srv.run(&b, "x + 1");
    eb.until_finished(&r);
    let (status, _) = srv.call("DELETE", &format!("/v1/sessions/{a}"), None);
    assert_eq!(status, 200);
    // The deleted session's stream ends (its run is cancelled).
    assert!(ea.wait_closed(), "the stream of a deleted session ends");
    let (status, _) = srv.get(&format!("/v1/runs/{long}"));
    assert_eq!(status, 200);
    let (status, _) = srv.call("POST", &format!("/v1/runs/{long}/cancel"), None);
    assert_eq!(status, 404);
}

/// Runs `code` in a fresh session; returns its `run_finished` event.
fn finished_alone(srv: &Server, code: &str) -> Sse {
    let id = srv.session();
    let events = srv.events(&id, None);
    let run = srv.run(&id, code);
    events.until_finished(&run).pop().unwrap()
}

#[test]
fn device_counters_count_only_their_own_run_while_sessions_run_at_once() {
    let srv = Server::start(&[]);
    let a = format!("W = param[2]\n{}", train(30_000));
    let b = "V = param[3]\ntrain 20000 { adam(sum(V * V * V * V), V, 0.01, 0.9, 0.999, 1e-8); sum(V * V) }";
    let launches = |e: &Sse| e.data["counters"]["kernel_launches"].as_u64().unwrap();
    let (alone_a, alone_b) = (finished_alone(&srv, &a), finished_alone(&srv, b));
    assert!(launches(&alone_a) > 30_000 && launches(&alone_b) > 20_000);
    assert_ne!(launches(&alone_a), launches(&alone_b));
    // Both at once, in two sessions.
    let (sa, sb) = (srv.session(), srv.session());
    let (ea, eb) = (srv.events(&sa, None), srv.events(&sb, None));
    let (ra, rb) = (srv.run(&sa, &a), srv.run(&sb, b));
    let (got_a, got_b) = (ea.until_finished(&ra), eb.until_finished(&rb));
    let time = |e: &Sse| e.data["time"].as_u64().unwrap();
    let (fa, fb) = (got_a.last().unwrap(), got_b.last().unwrap());
    assert!(
        time(&got_a[0]) < time(fb) && time(&got_b[0]) < time(fa),
        "the two runs overlapped"
    );
    assert_eq!(launches(fa), launches(&alone_a));
    assert_eq!(launches(fb), launches(&alone_b));
    // The last `device` event of each run reports the same counts.
    for got in [&got_a, &got_b] {
        let device = got.iter().rev().find(|e| e.event == "device").unwrap();
        assert_eq!(
            device.data["counters"],
            got.last().unwrap().data["counters"]
        );
    }
}

/// About `bytes` of pseudo-random lowercase words and spaces.
fn word_soup(bytes: usize) -> String {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        let len = 2 + next() % 8;
        for _ in 0..len {
            out.push((b'a' + (next() % 26) as u8) as char);
        }
        out.push(if next() % 12 == 0 { '\n' } else { ' ' });
    }
    out
}

#[test]
fn cancel_interrupts_tokenizer_training_on_a_loaded_corpus() {
    let data = temp_dir("bpe-data");
    std::fs::write(data.join("soup.txt"), word_soup(8 << 20)).unwrap();
    let srv = Server::start(&["--data-dir", s(&data)]);
    let id = srv.session();
    let events = srv.events(&id, None);
    let load = srv.run(&id, "corpus = load(\"soup.txt\")");
    assert_eq!(
        events.until_finished(&load).last().unwrap().data["status"],
        "ok"
    );
    // Far more merges than a cancel leaves time for: training runs for seconds.
    let run = srv.run(&id, "tok = train_bpe(corpus, 1000000, 0)");
    poll(|| {
        let (_, b) = srv.get(&format!("/v1/sessions/{id}/variables"));
        b["busy"].as_bool().filter(|b| *b)
    });
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let (status, _) = srv.call("POST", &format!("/v1/runs/{run}/cancel"), None);
    assert_eq!(status, 200);
    let got = events.until_finished(&run);
    let latency = asked.elapsed();
    let fin = got.last().unwrap();
    assert_eq!(fin.data["status"], "cancelled", "{}", fin.data);
    assert_eq!(fin.data["diagnostic"]["code"], "E0409");
    // The cancel arrived while `train_bpe` ran, and it stopped right away.
    assert!(fin.data["elapsed_ms"].as_f64().unwrap() >= 300.0);
    assert!(latency < Duration::from_secs(1), "cancel took {latency:?}");
    // The session is consistent and usable: no half-trained tokenizer.
    let (_, body) = srv.get(&format!("/v1/sessions/{id}/variables"));
    let names: Vec<&str> = body["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["corpus"]);
    let check = srv.run(
        &id,
        "tok = train_bpe(load_preloaded(\"tiny_corpus\"), 260, 0)\ndecode(tok, apply_tokenizer(tok, \"the quick\"))",
    );
    let got = events.until_finished(&check);
    let fin = got.last().unwrap();
    assert_eq!(fin.data["status"], "ok", "{}", fin.data);
    let value = got.iter().find(|e| e.event == "value").unwrap();
    assert_eq!(value.data["text"], "the quick");
}

#[test]
fn cells_that_once_killed_the_server_end_with_an_error_and_the_server_lives_on() {
    let srv = Server::start(&["--memory-budget", "100000000", "--max-sessions", "3"]);
    let id = srv.session();
    let events = srv.events(&id, None);
    for (code, want) in [
        ("w = param[4096, 4096, 4096, 4096]", "E0410"),
        ("x = zeros([30000, 30000])", "E0410"),
        ("x = [1]\nrepeat 40 { x = concat(x, x) }", "E0410"),
        (
            "m = linear(2, 2, 0)\nrepeat 100000 { m = residual(m) }",
            "E0411",
        ),
        (
            "k = linear(2, 2, 0)\nrepeat 40 { k = chain(k, k) }",
            "E0411",
        ),
    ] {
        let run = srv.run(&id, code);
        let fin = events.until_finished(&run).pop().unwrap();
        assert_eq!(fin.data["status"], "error", "{code}: {:?}", fin.data);
        assert_eq!(
            fin.data["diagnostic"]["code"], want,
            "{code}: {:?}",
            fin.data
        );
    }
    // The same session still runs cells, and lists its variables.
    let run = srv.run(
        &id,
        "m = linear(2, 2, 0)\nrepeat 10 { m = chain(m, m) }\nshape(apply(m, ones([1, 2])))",
    );
    let got = events.until_finished(&run);
    assert_eq!(
        got.last().unwrap().data["status"],
        "ok",
        "{:?}",
        got.last().unwrap().data
    );
    let (status, vars) = srv.get(&format!("/v1/sessions/{id}/variables"));
    assert_eq!(status, 200, "{vars}");
    // The session cap: three in all, a fourth is refused until one goes.
    let (_a, b) = (srv.session(), srv.session());
    let (status, body) = srv.call("POST", "/v1/sessions", None);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "too_many_sessions", "{body}");
    let (status, _) = srv.call("DELETE", &format!("/v1/sessions/{b}"), None);
    assert_eq!(status, 200);
    srv.session();
}
