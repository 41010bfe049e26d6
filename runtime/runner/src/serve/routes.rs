//! The HTTP routes of `mlpl serve` (`docs/runner-protocol.md`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use serde_json::{json, Value as Json_};

use super::log::{EventLog, Logged};
use super::state::{AppState, Job, Refused, SessionHandle};
use crate::session::{events::SCHEMA_VERSION, CellRef, RunRequest};
use mlpl_lang::value::DeviceTarget;

/// An error answer: `{"error": {"code", "message"}}` with an HTTP status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    extra: Option<(&'static str, Json_)>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: None,
        }
    }
    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    fn conflict(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, code, message)
    }
    fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut err = json!({ "code": self.code, "message": self.message });
        if let Some((k, v)) = self.extra {
            err[k] = v;
        }
        let mut resp = (self.status, Json(json!({ "error": err }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The router: every route, the token check on all but health, the body limit
/// and JSON answers for unknown routes.
pub fn router(state: Arc<AppState>) -> Router {
    let protected = Router::new()
        .route("/v1/sessions", post(create_session).get(list_sessions))
        .route("/v1/sessions/{id}", axum::routing::delete(delete_session))
        .route("/v1/sessions/{id}/runs", post(start_run))
        .route("/v1/sessions/{id}/events", get(events))
        .route("/v1/sessions/{id}/variables", get(variables))
        .route("/v1/sessions/{id}/save", post(save))
        .route("/v1/sessions/{id}/restore", post(restore))
        .route("/v1/runs/{run}", get(run_status))
        .route("/v1/runs/{run}/cancel", post(cancel))
        .route_layer(middleware::from_fn_with_state(state.clone(), body_deadline))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/v1/health", get(health))
        .merge(protected)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(cors(state.config.allow_origin.as_deref()))
        .layer(middleware::from_fn_with_state(state.clone(), host_check))
        .with_state(state)
}

/// CORS for the configured page origin only (answering its preflights before
/// the token is checked); without one, no CORS answers, so no page can read
/// this server's answers.
fn cors(origin: Option<&str>) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, HeaderValue, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let Some(origin) = origin.and_then(|o| HeaderValue::from_str(o).ok()) else {
        return CorsLayer::new();
    };
    CorsLayer::new()
        .allow_origin(AllowOrigin::exact(origin))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("last-event-id"),
        ])
        .max_age(Duration::from_secs(600))
}

/// 403 `forbidden_origin` for a web page of another origin than the one
/// allowed ([`super::ServeConfig::allow_origin`]); 403 `forbidden_host` for a
/// loopback server reached under another name or from another web origin
/// ([`super::ServeConfig::loopback_hosts`]).
async fn host_check(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    let allowed_page = match (&st.config.allow_origin, origin) {
        (Some(allowed), Some(o)) => o.eq_ignore_ascii_case(allowed),
        _ => false,
    };
    if let (Some(allowed), Some(o)) = (&st.config.allow_origin, origin) {
        if !allowed_page && super::is_web_origin(o) {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                format!("this server answers web pages from {allowed} only (`mlpl serve --allow-origin`), not from {o}"),
            )
            .into_response();
        }
    }
    if st.config.loopback_hosts {
        let header_text = |name| {
            req.headers()
                .get(name)
                .map(|v| v.to_str().unwrap_or("\u{0}"))
        };
        let host_ok = header_text(header::HOST).is_none_or(super::is_loopback_host);
        let origin_ok =
            allowed_page || header_text(header::ORIGIN).is_none_or(super::is_allowed_origin);
        if !host_ok || !origin_ok {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                "this server listens on a loopback address and answers only requests for this machine (Host and Origin)",
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// Reads the body of an authorised request within
/// [`super::ServeConfig::body_timeout`] (408 `timeout` past it) and at most
/// [`super::ServeConfig::max_body_bytes`] of it (413 `too_large`), so a slow
/// client cannot hold a request open.
async fn body_deadline(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let limit = st.config.max_body_bytes;
    let read = tokio::time::timeout(st.config.body_timeout, axum::body::to_bytes(body, limit));
    match read.await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.into_inner().is::<http_body_util::LengthLimitError>();
            if too_large {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    "the request body is too large",
                )
            } else {
                ApiError::bad_request("the request body could not be read")
            }
            .into_response()
        }
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!(
                "the request body did not arrive within {} s",
                st.config.body_timeout.as_secs_f64()
            ),
        )
        .into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route; see docs/runner-protocol.md")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not accept that method",
    )
}

/// Constant-time comparison of two byte strings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn auth(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(t) if same(t.as_bytes(), st.config.token.as_bytes()) => next.run(req).await,
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong bearer token",
        )
        .into_response(),
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this route needs `Authorization: Bearer TOKEN` (the token `mlpl serve` printed or was given)",
        )
        .into_response(),
    }
}

/// A JSON body parsed by hand so every failure is a JSON 400 (or 413).
fn parse_body<T: for<'de> Deserialize<'de>>(
    body: Result<Bytes, BytesRejection>,
    empty: Option<T>,
) -> ApiResult<T> {
    let bytes = body.map_err(|r| {
        let status = r.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(status, "too_large", "the request body is too large")
        } else {
            ApiError::new(status, "bad_request", r.body_text())
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        if let Some(v) = empty {
            return Ok(v);
        }
        return Err(ApiError::bad_request("the request needs a JSON body"));
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))
}

fn path_id(p: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    p.map(|Path(s)| s)
        .map_err(|r| ApiError::bad_request(r.body_text()))
}

fn session(st: &AppState, id: &str) -> ApiResult<Arc<SessionHandle>> {
    st.get(id)
        .ok_or_else(|| ApiError::not_found(format!("no session `{id}`")))
}

async fn health(State(st): State<Arc<AppState>>) -> Json<Json_> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "schema": SCHEMA_VERSION,
        "sessions": st.list().len(),
        // Whether runs here can use `device("mlx")` (the build includes the
        // MLX backend and MLX starts); editors offer the target only then.
        "mlx": mlpl_devices::mlx::open().is_ok(),
    }))
}

#[derive(Deserialize, Default)]
struct CreateBody {}

async fn create_session(
    State(st): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<Json_>)> {
    let _: CreateBody = parse_body(body, Some(CreateBody::default()))?;
    if !st.has_room() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_sessions",
            format!(
                "the server holds {} sessions, its limit; delete one first",
                st.config.max_sessions
            ),
        ));
    }
    let h = st.create();
    Ok((StatusCode::CREATED, Json(json!({ "id": h.id }))))
}

fn describe(h: &SessionHandle) -> Json_ {
    json!({
        "id": h.id,
        "created": h.created,
        "busy": h.current_run().is_some(),
        "run": h.current_run(),
        "runs": h.runs(),
        "last_seq": h.log.last_seq(),
        "memory": h.memory(),
    })
}

async fn list_sessions(State(st): State<Arc<AppState>>) -> Json<Json_> {
    let list: Vec<Json_> = st.list().iter().map(|h| describe(h)).collect();
    Json(json!({ "sessions": list }))
}

async fn delete_session(
    State(st): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Json_>> {
    let id = path_id(id)?;
    if st.delete(&id) {
        Ok(Json(json!({ "id": id, "deleted": true })))
    } else {
        Err(ApiError::not_found(format!("no session `{id}`")))
    }
}

#[derive(Deserialize)]
struct RunBody {
    code: String,
    cell: Option<CellRef>,
    device: Option<String>,
    #[serde(default)]
    timeline: bool,
}

async fn start_run(
    State(st): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<Json_>)> {
    let id = path_id(id)?;
    let h = session(&st, &id)?;
    let b: RunBody = parse_body(body, None)?;
    if let Some(d) = &b.device {
        if DeviceTarget::parse(d).is_none() {
            return Err(ApiError::bad_request(format!(
                "unknown device `{d}`; use cpu, cuda, cuda:N or mlx"
            )));
        }
    }
    let req = RunRequest {
        code: b.code,
        cell: b.cell,
        device: b.device,
        timeline: b.timeline,
    };
    match st.start_run(&h, req) {
        Ok(run) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({ "run": run, "session": id })),
        )),
        Err(Refused::Busy(current)) => {
            let mut e = ApiError::conflict(
                "busy",
                format!("session `{id}` is running `{current}`; runs are not queued: wait for its run_finished event or cancel it"),
            );
            e.extra = Some(("run", json!(current)));
            Err(e)
        }
        Err(Refused::Gone) => Err(ApiError::not_found(format!("session `{id}` was deleted"))),
    }
}

async fn run_status(
    State(st): State<Arc<AppState>>,
    run: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Json_>> {
    let run = path_id(run)?;
    let info = st
        .run_info(&run)
        .ok_or_else(|| ApiError::not_found(format!("no run `{run}`")))?;
    Ok(Json(
        json!({ "run": run, "session": info.session, "status": info.state }),
    ))
}

async fn cancel(
    State(st): State<Arc<AppState>>,
    run: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Json_>> {
    let run = path_id(run)?;
    let info = st
        .run_info(&run)
        .ok_or_else(|| ApiError::not_found(format!("no run `{run}`")))?;
    let h = st
        .get(&info.session)
        .ok_or_else(|| ApiError::not_found(format!("the session of run `{run}` was deleted")))?;
    if h.cancel(&run) {
        // A `train` iteration still running after the grace period is interrupted
        // between operations.
        let grace = st.config.cancel_grace;
        let (h2, r2) = (h.clone(), run.clone());
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            h2.force_cancel(&r2);
        });
        Ok(Json(
            json!({ "run": run, "session": info.session, "cancelling": true }),
        ))
    } else {
        let now = st.run_info(&run).map(|i| i.state);
        Ok(Json(json!({
            "run": run, "session": info.session, "cancelling": false, "status": now,
        })))
    }
}

async fn variables(
    State(st): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Json_>> {
    let id = path_id(id)?;
    let h = session(&st, &id)?;
    Ok(Json(json!({
        "session": id,
        "busy": h.current_run().is_some(),
        "variables": h.variables(),
        "memory": h.memory(),
    })))
}

/// 409 `no_state_dir` when the server keeps no saved state (`verb`: what the
/// client asked for, "saved" or "restored").
fn require_state_dir(st: &AppState, verb: &str) -> ApiResult<()> {
    match st.config.state_dir {
        Some(_) => Ok(()),
        None => Err(ApiError::conflict(
            "no_state_dir",
            format!("the server was started without --state-dir; nothing can be {verb}"),
        )),
    }
}

/// Sends `job` (made with its reply channel) to the session's worker and waits
/// for the reply; 404 when the session was deleted meanwhile.
async fn ask<T>(
    h: &SessionHandle,
    id: &str,
    job: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Job,
) -> ApiResult<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let deleted = || ApiError::not_found(format!("session `{id}` was deleted"));
    if !h.send(job(tx)) {
        return Err(deleted());
    }
    rx.await.map_err(|_| deleted())
}

async fn save(
    State(st): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Json_>> {
    let id = path_id(id)?;
    let h = session(&st, &id)?;
    require_state_dir(&st, "saved")?;
    match ask(&h, &id, Job::Save).await? {
        Ok(rep) => Ok(Json(json!({ "session": id, "saved": rep }))),
        Err(e) => Err(ApiError::internal(format!("save failed: {e}"))),
    }
}

async fn restore(
    State(st): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Json_>> {
    let id = path_id(id)?;
    let h = session(&st, &id)?;
    require_state_dir(&st, "restored")?;
    if let Some(r) = h.current_run() {
        let mut e = ApiError::conflict("busy", format!("session `{id}` is running `{r}`"));
        e.extra = Some(("run", json!(r)));
        return Err(e);
    }
    match ask(&h, &id, Job::Restore).await? {
        Ok(skipped) => Ok(Json(json!({
            "session": id,
            "variables": h.variables().len(),
            "not_restored": skipped,
        }))),
        Err(e) => Err(ApiError::conflict(
            "restore_failed",
            format!("cannot restore: {e}"),
        )),
    }
}

/// Where a stream starts: after `Last-Event-ID`, or after `?after=N`, or from the
/// oldest retained event.
fn resume_point(headers: &HeaderMap, query: Option<&str>) -> ApiResult<u64> {
    if let Some(v) = headers.get("last-event-id") {
        let s = v
            .to_str()
            .map_err(|_| ApiError::bad_request("Last-Event-ID is not text"))?;
        return s.trim().parse().map_err(|_| {
            ApiError::bad_request(format!("Last-Event-ID `{s}` is not an event id (a seq)"))
        });
    }
    for pair in query.unwrap_or("").split('&') {
        if let Some(v) = pair.strip_prefix("after=") {
            return v
                .parse()
                .map_err(|_| ApiError::bad_request(format!("`after={v}` is not a seq")));
        }
    }
    Ok(0)
}

struct Cursor {
    log: Arc<EventLog>,
    after: u64,
    rx: tokio::sync::watch::Receiver<u64>,
    buf: std::collections::VecDeque<Logged>,
}

fn event_stream(
    log: Arc<EventLog>,
    after: u64,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let rx = log.subscribe();
    let cursor = Cursor {
        log,
        after,
        rx,
        buf: Default::default(),
    };
    stream::unfold(cursor, |mut c| async move {
        loop {
            if let Some(e) = c.buf.pop_front() {
                c.after = e.seq;
                let ev = SseEvent::default()
                    .event(e.kind)
                    .id(e.seq.to_string())
                    .data(&*e.json);
                return Some((Ok(ev), c));
            }
            let batch = c.log.after(c.after, 256);
            if !batch.is_empty() {
                c.buf.extend(batch);
                continue;
            }
            if c.log.is_closed() || c.rx.changed().await.is_err() {
                return None;
            }
        }
    })
}

async fn events(
    State(st): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let id = path_id(id)?;
    let h = session(&st, &id)?;
    let after = resume_point(&headers, query.as_deref())?;
    Ok(Sse::new(event_stream(h.log.clone(), after))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
