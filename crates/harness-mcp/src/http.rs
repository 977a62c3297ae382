//! The tool server over Streamable HTTP (`harness mcp serve --http`): `rmcp`'s HTTP service
//! at `/mcp` behind a bearer token, `/healthz` for probes, and a shutdown that drains calls.
//!
//! What `rmcp` checks before a message reaches a tool: the `Origin` (403 unless it is this
//! machine's or one allowed; DNS rebinding), the `Host` when listening on loopback, the body's
//! size (413) and its JSON-RPC shape (400; `rmcp` says 415, turned into 400 here). What is
//! checked here first: the token (401).
//!
//! A shutdown drains POSTs, not tool calls: a call that has returned is not answered until
//! its response is written, and ending the sessions before that loses the answer (500).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::watch;

use crate::error::McpError;
use crate::gate::{self, Proof};
use crate::serve::ToolServer;

/// Origins always allowed: pages served from this machine.
const LOCAL_ORIGINS: &[&str] = &["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// How the HTTP endpoint is guarded and run.
#[derive(Clone)]
pub struct HttpOptions {
    /// The bearer token every request to `/mcp` must carry.
    pub token: String,
    /// No session kept between requests, so that replicas behind a load balancer are
    /// interchangeable (each POST is answered alone, with JSON).
    pub stateless: bool,
    /// Browser origins allowed besides this machine's (`https://app.example.com:443`).
    pub allowed_origins: Vec<String>,
    /// Largest request body, in bytes: over it, 413.
    pub max_body_bytes: usize,
    /// How long calls in flight get to finish after SIGTERM before the server stops anyway.
    pub drain_timeout: Duration,
    /// Connections open at once (lowered to leave room in the descriptor limit); over it, a
    /// connection that has never shown the token gives its place, or else 503.
    pub max_connections: usize,
    /// MCP sessions open at once; over it, `initialize` is answered 503.
    pub max_sessions: usize,
    /// How long a client has to send a request's head (from the connection's opening or its
    /// previous answer: an idle connection is closed after it too), and then its body.
    pub request_timeout: Duration,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("token", &"(hidden)")
            .field("stateless", &self.stateless)
            .field("allowed_origins", &self.allowed_origins)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("drain_timeout", &self.drain_timeout)
            .field("max_connections", &self.max_connections)
            .field("max_sessions", &self.max_sessions)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl HttpOptions {
    /// The defaults, with `token`: sessions kept, 4 MiB bodies, 30 s to drain, 128
    /// connections, 64 sessions, 10 s to send a request.
    pub fn new(token: String) -> Self {
        Self {
            token,
            stateless: false,
            allowed_origins: Vec::new(),
            max_body_bytes: 4 << 20,
            drain_timeout: Duration::from_secs(30),
            max_connections: 128,
            max_sessions: 64,
            request_timeout: Duration::from_secs(10),
        }
    }
}

impl ToolServer {
    /// Serves every client that comes to `listener` until SIGTERM or SIGINT (or a trace line
    /// that cannot be written); then stops accepting, lets calls in flight finish (up to
    /// `drain_timeout`), and closes the sessions.
    pub async fn serve_http(self, listener: std::net::TcpListener, options: HttpOptions) -> Result<(), McpError> {
        listener.set_nonblocking(true).map_err(McpError::Listen)?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(McpError::Listen)?;
        let loopback = listener.local_addr().map(|a| a.ip().is_loopback()).map_err(McpError::Listen)?;
        let config = service_config(&options, loopback);
        let cancel = config.cancellation_token.clone();
        let factory = {
            let server = self.clone();
            move || Ok(server.clone())
        };
        let sessions = Arc::new(LocalSessionManager::default());
        let mcp = StreamableHttpService::new(factory, sessions.clone(), config);
        let draining = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(watch::channel(0).0);
        let bounds = Arc::new(RequestBounds {
            sessions,
            max_sessions: options.max_sessions,
            max_body_bytes: options.max_body_bytes,
            timeout: options.request_timeout,
        });
        let app = Router::new()
            .route_service("/mcp", mcp)
            .route_layer(from_fn_with_state(in_flight.clone(), count_posts))
            .route_layer(from_fn(malformed_is_bad_request))
            .route_layer(from_fn_with_state(bounds, bounded_request))
            .route_layer(from_fn_with_state(Arc::<str>::from(options.token.as_str()), require_bearer))
            .route("/healthz", get(health).with_state(draining.clone()));

        let stop = self.stop.clone();
        let stopping = async move {
            tokio::select! {
                () = termination() => {}
                () = stop.notify.notified() => {}
            }
            draining.store(true, Ordering::SeqCst);
            // Not awaited here: accepting stops now, while the calls in flight finish.
            tokio::spawn(async move {
                let mut count = in_flight.subscribe();
                let _ = tokio::time::timeout(options.drain_timeout, count.wait_for(|n| *n == 0)).await;
                // Ends the sessions and their SSE streams, which would keep connections open.
                cancel.cancel();
            });
        };
        let bounds = gate::Bounds {
            max_connections: gate::connection_cap(options.max_connections),
            header_timeout: options.request_timeout,
        };
        gate::serve(listener, app, bounds, stopping).await;
        if let Some(e) = self.stop.trace_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            return Err(McpError::Trace(e));
        }
        Ok(())
    }
}

/// `rmcp`'s settings: origins checked always, hosts when on loopback (elsewhere the name
/// clients use is not known here, and the token guards the door), the body limit, and
/// stateless JSON answers when asked.
fn service_config(options: &HttpOptions, loopback: bool) -> StreamableHttpServerConfig {
    let origins = LOCAL_ORIGINS.iter().map(|o| (*o).to_owned()).chain(options.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_legacy_session_mode(!options.stateless)
        .with_json_response(options.stateless);
    if loopback { config } else { config.disable_allowed_hosts() }
}

/// `200 ok`, or `503 draining` once the server is shutting down, so that a load balancer
/// stops sending it clients.
async fn health(State(draining): State<Arc<AtomicBool>>) -> Response {
    if draining.load(Ordering::SeqCst) {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response()
    } else {
        (StatusCode::OK, "ok\n").into_response()
    }
}

/// Lets a request through only with `Authorization: Bearer TOKEN`; 401 otherwise.
async fn require_bearer(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let presented = given.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
    if same(presented.as_bytes(), token.as_bytes()) {
        // The connection is the token holder's: it is never evicted to make room.
        if let Some(proof) = request.extensions().get::<Proof>() {
            proof.proven();
        }
        return next.run(request).await;
    }
    let body = r#"{"error":"unauthorized","message":"this MCP endpoint needs Authorization: Bearer <token>; harness mcp serve --http printed the token at start, or read it from --token-env"}"#;
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer"), (header::CONTENT_TYPE, "application/json")], body)
        .into_response()
}

/// What a request to `/mcp` is held to beyond the token: its body within the request
/// timeout and the size limit, and a new session only under the cap.
struct RequestBounds {
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    max_body_bytes: usize,
    timeout: Duration,
}

/// Reads the body within the bounds (408 for one that does not arrive in time, 413 for one
/// over the limit), and answers an `initialize` over the session cap with 503.
async fn bounded_request(State(bounds): State<Arc<RequestBounds>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(bounds.timeout, axum::body::to_bytes(body, bounds.max_body_bytes)).await;
    let bytes = match read {
        Err(_) => {
            let why = format!("the request body did not arrive within {} s", bounds.timeout.as_secs_f64());
            let mut response = rpc_error(StatusCode::REQUEST_TIMEOUT, -32600, &why);
            response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            return response;
        }
        Ok(Err(_)) => {
            let why = format!("the request body is over the limit of {} bytes", bounds.max_body_bytes);
            return rpc_error(StatusCode::PAYLOAD_TOO_LARGE, -32600, &why);
        }
        Ok(Ok(bytes)) => bytes,
    };
    let new_session = parts.method == Method::POST && !parts.headers.contains_key("mcp-session-id");
    if new_session && is_initialize(&bytes) && bounds.sessions.sessions.read().await.len() >= bounds.max_sessions {
        return gate::busy(&format!(
            "this server holds its limit of {} MCP sessions; retry in {} s, or end a session (DELETE /mcp with its Mcp-Session-Id)",
            bounds.max_sessions,
            gate::RETRY_AFTER_SECS
        ));
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// Whether a body is an `initialize` request (the one message that opens a session).
fn is_initialize(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| v["method"] == "initialize")
}

/// A JSON-RPC error with no id, answered with `status`.
fn rpc_error(status: StatusCode, code: i32, message: &str) -> Response {
    let error = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (status, [(header::CONTENT_TYPE, "application/json")], error.to_string()).into_response()
}

/// Counts one POST in flight for as long as it lives: until its response is written.
struct InFlight(Arc<watch::Sender<usize>>);

impl InFlight {
    fn enter(count: &Arc<watch::Sender<usize>>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A response body that keeps its request counted in flight until the body is sent (or the
/// client goes away): an SSE answer is written after the handler has returned.
struct Counted {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Counts every POST (a message that may run a tool) until its answer is sent; the GET that
/// holds a session's stream open is not counted, since it never ends by itself.
async fn count_posts(State(count): State<Arc<watch::Sender<usize>>>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let in_flight = InFlight::enter(&count);
    let response = next.run(request).await;
    response.map(|inner| Body::new(Counted { inner, _in_flight: in_flight }))
}

/// A JSON body that is not a JSON-RPC message is 400 with a JSON-RPC parse error, as the
/// spec asks: `rmcp` answers 415 (its media-type answer) for a body it cannot read, whatever
/// the reason. A body sent as another type stays 415.
async fn malformed_is_bad_request(request: Request, next: Next) -> Response {
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let response = next.run(request).await;
    if !json || response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    // The reason is a short line of rmcp's ("EOF while parsing a value at line 1 column 33").
    let said = axum::body::to_bytes(response.into_body(), 4096).await.unwrap_or_default();
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("the body is not a JSON-RPC message: {}", String::from_utf8_lossy(&said))},
    });
    (StatusCode::BAD_REQUEST, [(header::CONTENT_TYPE, "application/json")], error.to_string()).into_response()
}

/// Compares in time that depends on the lengths alone, not on where the bytes first differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// SIGTERM (what a container runtime sends) or SIGINT.
async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn the_token_is_never_in_debug_output() {
        let options = HttpOptions::new("s3cret-token".to_owned());
        assert!(!format!("{options:?}").contains("s3cret"));
    }
}
