//! Language model calls (LANGUAGE §10.19, §16.5): `llm_call` posts a prompt to an
//! Ollama-compatible server through the interpreter's [`HttpPost`] hook (the
//! runner installs one; without it every call is E0408).
//!
//! [`HttpPost`]: crate::eval::HttpPost

use mlpl_diag::code;
use std::time::Duration;

use super::ParamKind::*;
use super::{req, Builtin, Diff, Facts};
use crate::eval::{Call, HttpFailure};
use crate::value::Value;
use mlpl_diag::Diagnostic;

/// How long `llm_call` waits for a reply (LANGUAGE §16.5).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// At most this many characters of a non-2xx reply's body go into E0408.
pub const BODY_EXCERPT_CHARS: usize = 200;

/// The builtins of this group.
pub const BUILTINS: &[Builtin] = &[Builtin {
    name: "llm_call",
    params: &[
        req("endpoint", Str),
        req("prompt", Str),
        req("model", Str),
    ],
    summary: "the reply of an Ollama-compatible server to a prompt",
    doc: "`llm_call(endpoint, prompt, model)` POSTs `{\"model\": model, \"prompt\": prompt, \"stream\": false}` as JSON to the server's `/api/generate` (appended to the endpoint after removing trailing `/`, unless it already ends with it) and returns the reply's `response` string. Waits at most 120 s; a cancelled run stops waiting. Reads no environment variables. Each call is reported as W0404. E0302 for a non-string argument; E0408, naming the resolved address, when the server cannot be reached, answers with a status other than 2xx (with up to 200 characters of its body), or its reply is not JSON with a `response` string.",
    example: "reply = llm_call(\"http://localhost:11434\", \"Summarize MLPL in one sentence.\", \"llama3.2\")",
    diff: Diff::Effect,
    facts: Facts::NONE.effectful(),
    section: "16.5",
    run: llm_call,
    shape: Some(super::llm_shapes::llm_call),
}];

/// The address `llm_call` posts to: trailing `/` removed, then `/api/generate`
/// appended unless the address already ends with it.
pub fn generate_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/api/generate") {
        base.to_string()
    } else {
        format!("{base}/api/generate")
    }
}

/// The request body: `{"model": …, "prompt": …, "stream": false}`.
pub fn request_body(prompt: &str, model: &str) -> String {
    serde_json::json!({ "model": model, "prompt": prompt, "stream": false }).to_string()
}

/// The first [`BODY_EXCERPT_CHARS`] characters of `body`, with `…` when cut.
fn excerpt(body: &str) -> String {
    let mut chars = body.chars();
    let head: String = chars.by_ref().take(BODY_EXCERPT_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// The `response` string of a reply body, or why there is none.
pub fn reply_text(url: &str, status: u16, body: &str) -> Result<String, String> {
    if !(200..300).contains(&status) {
        return Err(format!(
            "`{url}` answered with status {status}: {}",
            excerpt(body)
        ));
    }
    let json: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| format!("the reply from `{url}` is not JSON ({e})"))?;
    match json.get("response") {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!(
            "the reply from `{url}` has a `response` that is not a string"
        )),
        None => Err(format!("the reply from `{url}` has no `response` field")),
    }
}

fn failed(c: &Call, message: String) -> Diagnostic {
    Diagnostic::error(code::E0408, message).at(c.span, "this call got no reply")
}

fn llm_call(c: &mut Call) -> Result<Value, Diagnostic> {
    let url = generate_url(c.string(0)?);
    let body = request_body(c.string(1)?, c.string(2)?);
    c.it.warn(
        Diagnostic::warning(
            code::W0404,
            format!("request sent to `{url}`"),
        )
        .at(c.span, "this call sends the prompt over the network")
        .note("the prompt and the model name leave this process; the reply is whatever the server returns"),
    );
    let Some(http) = c.it.http.clone() else {
        return Err(failed(
            c,
            format!("cannot send a request to `{url}`: this build of MLPL has no HTTP client"),
        )
        .note("`llm_call` works in `mlpl run` and `mlpl serve`"));
    };
    let flag = c.it.cancel.clone();
    let cancelled = move || flag.load(std::sync::atomic::Ordering::Relaxed);
    match http.post_json(&url, &body, TIMEOUT, &cancelled) {
        Ok(reply) => match reply_text(&url, reply.status, &reply.body) {
            Ok(text) => Ok(Value::string(text)),
            Err(why) => Err(failed(c, why)),
        },
        Err(HttpFailure::Cancelled) => Err(super::cancelled(c)),
        Err(HttpFailure::Failed(why)) => {
            Err(failed(c, format!("request to `{url}` failed: {why}"))
                .help("start the Ollama-compatible server, or correct the address"))
        }
    }
}
