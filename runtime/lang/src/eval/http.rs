//! The one hook through which the language reaches the network: `llm_call`
//! (LANGUAGE §16.5) posts a JSON body through an [`HttpPost`] that the host
//! installs on the interpreter ([`super::Interp::http`]). `mlpl-lang` itself
//! has no HTTP client (it builds for the browser); the runner installs one.

use std::time::Duration;

/// The reply to a POST: its status and its body as text (invalid UTF-8 replaced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpReply {
    /// The HTTP status code.
    pub status: u16,
    /// The body.
    pub body: String,
}

/// Why a POST got no reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpFailure {
    /// The run was cancelled while waiting; the call stopped waiting.
    Cancelled,
    /// The server could not be reached, the connection failed, or the timeout
    /// passed: a sentence saying which.
    Failed(String),
}

/// Sends one HTTP POST of a JSON body and waits for the reply.
pub trait HttpPost: Send + Sync {
    /// POSTs `body` to `url` with `Content-Type: application/json`, waiting at
    /// most `timeout` for the whole exchange. Any status is a reply (the caller
    /// judges it). Implementations ask `cancelled` while they wait and return
    /// [`HttpFailure::Cancelled`] soon after it becomes true.
    fn post_json(
        &self,
        url: &str,
        body: &str,
        timeout: Duration,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<HttpReply, HttpFailure>;
}
