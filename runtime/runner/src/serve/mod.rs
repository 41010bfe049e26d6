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
use std::sync::Arc;
use std::time::Duration;

pub use state::{AppState, SessionHandle};

/// Default request body limit (a cell's code and its metadata).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Events kept per session for resuming streams.
pub const LOG_CAPACITY: usize = 100_000;

/// Default cap on the number of sessions.
pub const MAX_SESSIONS: usize = 256;

/// Default time a client has to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default time a client has to send a request's body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Default cap on open connections (each session's editor holds one event
/// stream; the session cap is 256).
pub const MAX_CONNECTIONS: usize = 1024;

/// How the session budget's refusal says to raise it.
pub const RAISE_SESSION_BUDGET: &str = "`mlpl serve --session-memory-budget BYTES`";

/// The default budget of one result, and of one session's values: half the machine's memory, where the system
/// says (`MemTotal` in /proc/meminfo), else none.
pub fn default_memory_budget() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024) / 2)
}

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
    /// Most sessions at once; creating one more answers 503 `too_many_sessions`.
    pub max_sessions: usize,
    /// The largest single result, in bytes, a cell may allocate (E0410 past it),
    /// set on each session's worker thread (docs/limits.md).
    pub memory_budget: Option<usize>,
    /// The most bytes one session's values may hold together, a new result
    /// included (E0410 past it, naming what the session holds), set on each
    /// session's worker thread (docs/limits.md).
    pub session_memory_budget: Option<usize>,
    /// How long a client may take to send a request's headers; a connection
    /// still sending them then is closed (a slow client cannot hold one
    /// forever).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers
    /// arrived (408 `timeout` past it).
    pub body_timeout: Duration,
    /// Most connections open at once; further clients wait in the listen queue.
    pub max_connections: usize,
    /// Refuse requests whose `Host` or `Origin` names a machine other than this
    /// one (403 `forbidden_host`): set by [`serve`] for a loopback bind, so that
    /// a web page reached through DNS rebinding is refused before the token check.
    pub loopback_hosts: bool,
    /// The one web origin whose pages may call this server
    /// (`--allow-origin http://127.0.0.1:8000`, as [`parse_origin`] normalises
    /// it): its requests get CORS answers (preflights too), and a request from
    /// any other web origin (`http`, `https`, `null`) gets 403
    /// `forbidden_origin`. `None`: no CORS answers at all.
    pub allow_origin: Option<String>,
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
            max_sessions: MAX_SESSIONS,
            memory_budget: default_memory_budget(),
            session_memory_budget: default_memory_budget(),
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            loopback_hosts: false,
            allow_origin: None,
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
///
/// Each connection is served by hyper's HTTP/1 connection with a header read
/// timeout ([`ServeConfig::header_timeout`]): a client that opens a connection
/// and sends its headers slowly, or not at all, is disconnected. At most
/// [`ServeConfig::max_connections`] are open at once.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServeConfig,
    on_restore: impl FnOnce(Vec<String>),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut config = config;
    if listener.local_addr().is_ok_and(|a| a.ip().is_loopback()) {
        config.loopback_hosts = true;
    }
    let header_timeout = config.header_timeout;
    let slots = Arc::new(tokio::sync::Semaphore::new(config.max_connections.max(1)));
    let state = AppState::new(config);
    on_restore(state.restore_saved());
    let app = routes::router(state.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
        let tcp = tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(_) => {
                    // Out of file descriptors or a connection reset before it
                    // was accepted: try again shortly.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Small SSE writes must not wait for delayed ACKs (Nagle).
        let _ = tcp.set_nodelay(true);
        connections.spawn(connection(
            tcp,
            app.clone(),
            header_timeout,
            stop_rx.clone(),
            slot,
        ));
        while connections.try_join_next().is_some() {}
    }
    // Ends the event streams so that the connections can finish.
    state.close_all();
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection until it ends, or ends it gracefully (after the
/// request in progress) when `stop` turns true.
async fn connection(
    tcp: tokio::net::TcpStream,
    app: axum::Router,
    header_timeout: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    _slot: tokio::sync::OwnedSemaphorePermit,
) {
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.wait_for(|s| *s) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// Whether `host` (a `Host` header or an origin's host, with or without a port)
/// names this machine: `localhost`, a loopback address.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    let name = name.trim_end_matches('.');
    name.eq_ignore_ascii_case("localhost")
        || name.to_ascii_lowercase().ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether an `Origin` header may reach a loopback server: a web origin
/// (`http`, `https`) must be on this machine; `null` and editor origins
/// (`vscode-webview://…`, `vscode-file://…`) are not web pages of other hosts.
pub fn is_allowed_origin(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return true;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return true;
    }
    let host = rest.split('/').next().unwrap_or("");
    is_loopback_host(host)
}

/// An origin as browsers send it, `scheme://host[:port]` with `http` or
/// `https`, lower-cased; anything else (a path, a query, another scheme, no
/// host) is an error naming the expected form.
pub fn parse_origin(text: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "`{text}` is not a web origin: give the page's scheme, host and port, e.g. http://127.0.0.1:8000 (no path)"
        )
    };
    let (scheme, rest) = text.split_once("://").ok_or_else(bad)?;
    let scheme = scheme.to_ascii_lowercase();
    let host = rest.strip_suffix('/').unwrap_or(rest);
    if !matches!(scheme.as_str(), "http" | "https")
        || host.is_empty()
        || host.contains(['/', '?', '#', '@', ' '])
    {
        return Err(bad());
    }
    Ok(format!("{scheme}://{}", host.to_ascii_lowercase()))
}

/// Whether an `Origin` header names a web page (`http`, `https`, or the
/// opaque `null` of sandboxed and `file:` pages), as opposed to an editor's
/// own origin (`vscode-webview://…`).
pub fn is_web_origin(origin: &str) -> bool {
    origin == "null"
        || origin
            .split_once("://")
            .is_some_and(|(s, _)| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"))
}

#[cfg(test)]
mod host_tests {
    use super::*;

    #[test]
    fn loopback_hosts_and_origins() {
        for h in [
            "localhost",
            "localhost:8080",
            "127.0.0.1",
            "127.0.0.1:9",
            "[::1]:80",
            "[::1]",
            "app.localhost:3",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "evil.com",
            "evil.com:80",
            "10.0.0.1:80",
            "localhost.evil.com",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
        assert!(is_allowed_origin("http://localhost:3000"));
        assert!(is_allowed_origin("vscode-webview://abc"));
        assert!(is_allowed_origin("null"));
        assert!(!is_allowed_origin("https://evil.com"));
        assert!(!is_allowed_origin("http://127.0.0.1.nip.io:8080"));
    }

    #[test]
    fn origins_are_parsed_and_normalised() {
        assert_eq!(
            parse_origin("http://127.0.0.1:8000").unwrap(),
            "http://127.0.0.1:8000"
        );
        assert_eq!(
            parse_origin("HTTPS://Play.Example/").unwrap(),
            "https://play.example"
        );
        for bad in [
            "127.0.0.1:8000",
            "http://",
            "http://a/b",
            "ftp://a",
            "http://a?x",
            "*",
        ] {
            let e = parse_origin(bad).unwrap_err();
            assert!(e.contains("http://127.0.0.1:8000"), "{bad}: {e}");
        }
        assert!(is_web_origin("null") && is_web_origin("https://a"));
        assert!(!is_web_origin("vscode-webview://abc"));
    }
}
