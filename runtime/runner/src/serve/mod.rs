//! `mlpl serve`: the runner behind the editor (DESIGN §6, `docs/runner-protocol.md`).
//!
//! An HTTP server (axum on tokio) with a bearer token on every route but health.
//! Each session has a worker thread that owns its [`crate::session::Session`] and
//! runs one job at a time (a second run is refused with 409 `busy`, not queued);
//! the HTTP side never blocks on evaluation. Events stream as SSE from a
//! per-session log, resumable with `Last-Event-ID`. With a state directory every
//! session is saved after each run and restored when the server starts.

pub mod log;
pub mod routes;
pub mod state;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use state::{AppState, SessionHandle};

/// Default request body limit (a cell's code and its metadata).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Events kept per session for resuming streams.
pub const LOG_CAPACITY: usize = 100_000;

/// How `mlpl serve` is configured.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The bearer token every route but health requires.
    pub token: String,
    /// Where sessions are saved (and restored from on start).
    pub state_dir: Option<PathBuf>,
    /// The directory file builtins may access (`None`: file builtins are disabled).
    pub data_dir: Option<PathBuf>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Events kept per session.
    pub log_capacity: usize,
    /// How long a cancel waits for the running `train` iteration to end before
    /// interrupting it between operations.
    pub cancel_grace: Duration,
}

impl ServeConfig {
    /// A configuration with defaults for everything but the token.
    pub fn new(token: impl Into<String>) -> ServeConfig {
        ServeConfig {
            token: token.into(),
            state_dir: None,
            data_dir: None,
            max_body_bytes: MAX_BODY_BYTES,
            log_capacity: LOG_CAPACITY,
            cancel_grace: Duration::from_secs(1),
        }
    }
}

/// Whether binding `addr` without a token would expose the server.
pub fn needs_token(addr: &SocketAddr) -> bool {
    !addr.ip().is_loopback()
}

/// A random token: 32 hexadecimal digits from the OS's random source.
pub fn random_token() -> Result<String, String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| format!("no random source for a token: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Serves on `listener` until `shutdown` completes; returns the lines of the
/// restore report through `on_restore` before accepting connections.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServeConfig,
    on_restore: impl FnOnce(Vec<String>),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let state = AppState::new(config);
    on_restore(state.restore_saved());
    let app = routes::router(state.clone());
    let closer = state.clone();
    // Small SSE writes must not wait for delayed ACKs (Nagle).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Ends the event streams so that graceful shutdown can finish.
            closer.close_all();
        })
        .await
}
