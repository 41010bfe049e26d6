//! The HTTP client behind `llm_call` (LANGUAGE §16.5): [`UreqPost`] implements
//! the language's [`HttpPost`] hook with `ureq`, plain HTTP only. Every session
//! and `mlpl run` installs it on its interpreter ([`install`]).
//!
//! A request runs on a thread of its own while the run's thread waits for its
//! reply on a channel, asking the run's cancel flag between short waits: a
//! cancelled run stops waiting at once (the request thread ends when the server
//! answers or the timeout passes, and its reply is dropped).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlpl_lang::eval::{HttpFailure, HttpPost, HttpReply, Interp};

/// How often a waiting call looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// `ureq` as the language's HTTP client. Reads no environment variables (no
/// proxy settings): the address given is the address used.
#[derive(Clone, Copy, Debug, Default)]
pub struct UreqPost;

/// Installs the HTTP client on an interpreter, so `llm_call` can reach servers.
pub fn install(it: &mut Interp) {
    it.http = Some(Arc::new(UreqPost));
}

fn post(url: &str, body: &str, timeout: Duration) -> Result<HttpReply, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut reply = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(body)
        .map_err(describe)?;
    let status = reply.status().as_u16();
    let text = reply.body_mut().read_to_string().map_err(describe)?;
    Ok(HttpReply { status, body: text })
}

/// A sentence for a transport error.
fn describe(e: ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "no reply within the timeout".to_string(),
        ureq::Error::Io(io) => format!("connection failed ({io})"),
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::ConnectionFailed => "connection failed".to_string(),
        other => other.to_string(),
    }
}

impl HttpPost for UreqPost {
    fn post_json(
        &self,
        url: &str,
        body: &str,
        timeout: Duration,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<HttpReply, HttpFailure> {
        if cancelled() {
            return Err(HttpFailure::Cancelled);
        }
        let (tx, rx) = mpsc::channel();
        let (url_owned, body_owned) = (url.to_string(), body.to_string());
        std::thread::Builder::new()
            .name("mlpl-llm-call".into())
            .spawn(move || {
                let _ = tx.send(post(&url_owned, &body_owned, timeout));
            })
            .map_err(|e| HttpFailure::Failed(format!("cannot start the request ({e})")))?;
        // The request thread has its own timeout; this one only guards against
        // a thread that never answers.
        let deadline = Instant::now() + timeout + Duration::from_secs(5);
        loop {
            match rx.recv_timeout(CANCEL_POLL) {
                Ok(result) => return result.map_err(HttpFailure::Failed),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if cancelled() {
                        return Err(HttpFailure::Cancelled);
                    }
                    if Instant::now() > deadline {
                        return Err(HttpFailure::Failed(
                            "no reply within the timeout".to_string(),
                        ));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(HttpFailure::Failed("the request stopped".to_string()))
                }
            }
        }
    }
}
