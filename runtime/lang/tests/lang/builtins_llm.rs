//! `llm_call` (LANGUAGE §10.19, §16.5) through the interpreter's `HttpPost` hook,
//! with a recording fake in place of the network: the address it resolves, the
//! request body, the reply's `response`, every E0408, E0302, W0404, the checker's
//! signature, and a build without an HTTP client. (The runner's tests run it
//! against a local HTTP server.)

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{error_code, run_in};
use mlpl_diag::code;
use mlpl_lang::builtins::llm::{generate_url, reply_text, request_body, TIMEOUT};
use mlpl_lang::check::{assignment_values, check_source, AbsValue};
use mlpl_lang::eval::{HttpFailure, HttpPost, HttpReply, Interp, Workspace};
use mlpl_lang::value::Value;

/// What the fake answers, and what it was asked.
struct Fake {
    answer: Result<HttpReply, HttpFailure>,
    asked: Mutex<Vec<(String, String, Duration)>>,
}

impl HttpPost for Fake {
    fn post_json(
        &self,
        url: &str,
        body: &str,
        timeout: Duration,
        _cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<HttpReply, HttpFailure> {
        self.asked
            .lock()
            .unwrap()
            .push((url.to_string(), body.to_string(), timeout));
        self.answer.clone()
    }
}

fn fake(status: u16, body: &str) -> Arc<Fake> {
    Arc::new(Fake {
        answer: Ok(HttpReply {
            status,
            body: body.to_string(),
        }),
        asked: Mutex::new(vec![]),
    })
}

/// Runs `src` with `http` installed: the result and the warnings' codes.
fn run_with(
    http: Arc<Fake>,
    src: &str,
) -> (
    Result<Option<Value>, mlpl_diag::Diagnostic>,
    Vec<&'static str>,
) {
    let mut it = Interp::new(Workspace::new());
    it.http = Some(http);
    let p = mlpl_syntax::parse(src);
    let r = it.run(&p.program);
    let w = it.take_warnings().iter().map(|d| d.code).collect();
    (r, w)
}

#[test]
fn the_address_gets_api_generate_once() {
    assert_eq!(
        generate_url("http://localhost:11434"),
        "http://localhost:11434/api/generate"
    );
    assert_eq!(
        generate_url("http://localhost:11434///"),
        "http://localhost:11434/api/generate"
    );
    assert_eq!(
        generate_url("http://h:1/api/generate"),
        "http://h:1/api/generate"
    );
    assert_eq!(
        generate_url("http://h:1/api/generate/"),
        "http://h:1/api/generate"
    );
    assert_eq!(generate_url("http://h:1/v1"), "http://h:1/v1/api/generate");
}

#[test]
fn the_body_is_model_prompt_and_no_streaming() {
    let body: serde_json::Value =
        serde_json::from_str(&request_body("Say \"hi\".\n", "llama3.2")).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"model": "llama3.2", "prompt": "Say \"hi\".\n", "stream": false})
    );
}

#[test]
fn a_reply_is_its_response_string() {
    let http = fake(
        200,
        r#"{"model":"llama3.2","response":"MLPL is an array language.","done":true}"#,
    );
    let (r, warnings) = run_with(
        http.clone(),
        "reply = llm_call(\"http://127.0.0.1:9/\", \"Summarize MLPL.\", \"llama3.2\")\nreply",
    );
    let v = r.unwrap().unwrap();
    assert_eq!(v.display(), "MLPL is an array language.");
    assert!(matches!(v, Value::Str(_)));
    assert_eq!(warnings, vec![code::W0404]);
    let asked = http.asked.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, "http://127.0.0.1:9/api/generate");
    assert_eq!(asked[0].1, request_body("Summarize MLPL.", "llama3.2"));
    assert_eq!(asked[0].2, TIMEOUT);
    assert_eq!(TIMEOUT, Duration::from_secs(120));
}

#[test]
fn the_reply_composes_with_the_rest_of_the_language() {
    let http = fake(201, r#"{"response":"hé"}"#);
    let (r, _) = run_with(
        http,
        "reply = llm_call(\"http://x\", \"p\", \"m\")\ntokenize_bytes(reply)",
    );
    assert_eq!(r.unwrap().unwrap().display(), "104 195 169");
}

#[test]
fn failures_are_e0408_naming_the_resolved_address() {
    let src = "llm_call(\"http://127.0.0.1:9\", \"p\", \"m\")";
    let url = "http://127.0.0.1:9/api/generate";
    let long = format!("{}{}", "a".repeat(200), "b".repeat(800));
    for (status, body, says) in [
        (500, long.as_str(), "status 500"),
        (404, "model not found", "status 404"),
        (200, "<html>not json</html>", "not JSON"),
        (200, r#"{"done": true}"#, "no `response`"),
        (200, r#"{"response": 3}"#, "not a string"),
        (200, r#"[1, 2]"#, "no `response`"),
    ] {
        let (r, _) = run_with(fake(status, body), src);
        let d = r.unwrap_err();
        assert_eq!(d.code, code::E0408, "{body}");
        assert!(d.message.contains(url), "{}", d.message);
        assert!(d.message.contains(says), "{}", d.message);
    }
    // At most 200 characters of a non-2xx body.
    let (r, _) = run_with(fake(500, &long), src);
    let m = r.unwrap_err().message;
    assert!(m.contains(&"a".repeat(200)), "{m}");
    assert!(!m.contains('b'), "{m}");
    let failing = Arc::new(Fake {
        answer: Err(HttpFailure::Failed("connection refused".into())),
        asked: Mutex::new(vec![]),
    });
    let (r, _) = run_with(failing, src);
    let d = r.unwrap_err();
    assert_eq!(d.code, code::E0408);
    assert!(d.message.contains(url) && d.message.contains("connection refused"));
}

#[test]
fn the_excerpt_counts_characters_not_bytes() {
    let body = "é".repeat(300);
    let m = reply_text("http://x/api/generate", 503, &body).unwrap_err();
    assert!(
        m.contains(&"é".repeat(200)) && !m.contains(&"é".repeat(201)),
        "{m}"
    );
}

#[test]
fn a_cancelled_wait_is_e0409() {
    let http = Arc::new(Fake {
        answer: Err(HttpFailure::Cancelled),
        asked: Mutex::new(vec![]),
    });
    let (r, _) = run_with(http, "llm_call(\"http://x\", \"p\", \"m\")");
    assert_eq!(r.unwrap_err().code, code::E0409);
}

#[test]
fn without_an_http_client_every_call_is_e0408() {
    let out = run_in("llm_call(\"http://localhost:11434\", \"p\", \"m\")", None);
    let d = out.result.unwrap_err();
    assert_eq!(d.code, code::E0408);
    assert!(d.message.contains("http://localhost:11434/api/generate"));
    assert_eq!(
        out.warnings.iter().map(|d| d.code).collect::<Vec<_>>(),
        vec![code::W0404]
    );
}

#[test]
fn arguments_must_be_strings() {
    assert_eq!(error_code("llm_call(1, \"p\", \"m\")"), "E0302");
    assert_eq!(error_code("llm_call(\"http://x\", [1], \"m\")"), "E0302");
    assert_eq!(
        error_code("llm_call(\"http://x\", \"p\", tokenizer())"),
        "E0302"
    );
    assert_eq!(error_code("llm_call(\"http://x\", \"p\")"), "E0103");
    let checked = check_source("llm_call(\"http://x\", 2, \"m\")");
    assert_eq!(
        checked
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect::<Vec<_>>(),
        vec![code::E0302]
    );
}

#[test]
fn the_checker_knows_the_result_is_a_string() {
    let src = "reply = llm_call(\"http://x\", \"p\", \"m\")\nn = tokenize_bytes(reply)";
    let checked = check_source(src);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    let values = assignment_values(&checked.program);
    assert!(
        matches!(values[0].value, AbsValue::Str(None)),
        "{:?}",
        values[0].value
    );
    // A string is not an array: the checker says so before the run.
    let checked = check_source("reply = llm_call(\"http://x\", \"p\", \"m\")\nreply + 1");
    assert_eq!(
        checked
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect::<Vec<_>>(),
        vec![code::E0301]
    );
}
