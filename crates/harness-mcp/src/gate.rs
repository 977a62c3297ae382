//! The connections of `harness mcp serve --http`, bounded so that clients without the token
//! cannot hold the server: each connection has a bound to send a request head (and, between
//! requests, to send the next one: the idle bound), their number is capped below the
//! process's descriptor limit, and a connection that has never shown the token gives its
//! place to a new one when the cap is reached. Over the cap with every place held by the
//! token's holders, a new connection is answered 503 (a JSON-RPC error, `Retry-After`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

/// Descriptors kept for everything but connections: plugin children's pipes, the trace, the
/// listener, the runtime.
const RESERVED_DESCRIPTORS: usize = 64;
/// Connections answered 503 at once; beyond them, a connection over the cap is closed unanswered.
const MAX_REFUSING: usize = 16;
/// How long a refused connection gets to send its request head before it is closed.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);
/// The wait before accepting again after `accept` failed (descriptors exhausted, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// What a refused client is told to wait, in seconds.
pub(crate) const RETRY_AFTER_SECS: u64 = 5;

/// How connections are bounded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Connections open at once (lowered to what the descriptor limit leaves room for).
    pub(crate) max_connections: usize,
    /// How long a connection has to send a whole request head, from its opening or from the
    /// end of its previous answer (so an idle connection is closed after it too).
    pub(crate) header_timeout: Duration,
}

/// The places of open connections.
struct Gate {
    cap: usize,
    state: Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    open: usize,
    refusing: usize,
    next: u64,
    /// Connections that have not yet shown the token, oldest first, with their eviction signal.
    unproven: BTreeMap<u64, Arc<Notify>>,
}

/// What the gate makes of a new connection.
enum Admission {
    /// Served; evicted when `Notify` fires.
    In(Ticket, Arc<Notify>),
    /// Answered 503.
    Refused(Refusal),
    /// Closed at once: even the refusals are at their cap.
    Dropped,
}

impl Gate {
    fn state(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new connection: a free one, or the oldest unproven connection's.
    fn admit(self: &Arc<Self>) -> Admission {
        let mut state = self.state();
        if state.open >= self.cap {
            match state.unproven.pop_first() {
                Some((_, evict)) => evict.notify_one(),
                None if state.refusing < MAX_REFUSING => {
                    state.refusing += 1;
                    return Admission::Refused(Refusal(self.clone()));
                }
                None => return Admission::Dropped,
            }
        }
        state.open += 1;
        state.next += 1;
        let id = state.next;
        let evict = Arc::new(Notify::new());
        state.unproven.insert(id, evict.clone());
        Admission::In(Ticket { gate: self.clone(), id }, evict)
    }
}

/// One connection's place, given back when the connection ends.
struct Ticket {
    gate: Arc<Gate>,
    id: u64,
}

impl Ticket {
    fn proof(&self) -> Proof {
        Proof { gate: self.gate.clone(), id: self.id }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.gate.state();
        state.open = state.open.saturating_sub(1);
        state.unproven.remove(&self.id);
    }
}

/// A refused connection's place among the refusals.
struct Refusal(Arc<Gate>);

impl Drop for Refusal {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.refusing = state.refusing.saturating_sub(1);
    }
}

/// Carried by each request of a connection: the token check marks the connection with it as
/// one that has shown the token, which is never evicted.
#[derive(Clone)]
pub(crate) struct Proof {
    gate: Arc<Gate>,
    id: u64,
}

impl Proof {
    /// The connection showed the token.
    pub(crate) fn proven(&self) {
        self.gate.state().unproven.remove(&self.id);
    }
}

/// The cap on connections: `wanted`, lowered so that connections leave room in the
/// descriptor limit for everything else.
pub(crate) fn connection_cap(wanted: usize) -> usize {
    let room = descriptor_limit().map_or(usize::MAX, |n| n.saturating_sub(RESERVED_DESCRIPTORS).max(n / 2));
    wanted.min(room).max(1)
}

/// The soft limit on open descriptors.
#[cfg(unix)]
fn descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given, which lives for the call.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    if !ok || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    usize::try_from(limit.rlim_cur).ok()
}

#[cfg(not(unix))]
fn descriptor_limit() -> Option<usize> {
    None
}

/// The service of one connection: the app, with the connection's [`Proof`] on each request.
#[derive(Clone)]
struct Tagged {
    app: Router,
    proof: Proof,
}

impl tower_service::Service<Request<Incoming>> for Tagged {
    type Response = Response;
    type Error = Infallible;
    type Future = axum::routing::future::RouteFuture<Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(self.proof.clone());
        tower_service::Service::call(&mut self.app, request.map(Body::new))
    }
}

/// A JSON-RPC error answered with 503 and `Retry-After`: the server is at one of its caps.
pub(crate) fn busy(message: &str) -> Response {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": message}});
    let mut response =
        (StatusCode::SERVICE_UNAVAILABLE, [(header::CONTENT_TYPE, "application/json")], body.to_string())
            .into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}

/// Accepts connections on `listener` and serves `app` on each, within `bounds`, until
/// `stopping` ends; then lets each connection finish its request in flight and waits for them.
pub(crate) async fn serve(listener: TcpListener, app: Router, bounds: Bounds, stopping: impl Future<Output = ()>) {
    let gate = Arc::new(Gate { cap: bounds.max_connections, state: Mutex::default() });
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(stopping);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stopping => break,
        };
        while connections.try_join_next().is_some() {}
        let Ok((tcp, _)) = tcp else {
            // Out of descriptors, most likely: the connections that end will free some.
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        // Without TCP_NODELAY, an answer on a session's SSE stream (written in small pieces)
        // waits out the client's delayed ACK: 40 ms a call instead of under 5.
        let _ = tcp.set_nodelay(true);
        match gate.admit() {
            Admission::In(ticket, evict) => {
                connections.spawn(connection(tcp, app.clone(), bounds.header_timeout, ticket, evict, stopped.clone()));
            }
            Admission::Refused(place) => {
                let message = format!(
                    "this server holds its limit of {} connections; retry in {RETRY_AFTER_SECS} s",
                    bounds.max_connections
                );
                connections.spawn(refuse(tcp, message, place));
            }
            Admission::Dropped => drop(tcp),
        }
    }
    drop(listener);
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
}

/// Serves one connection until it ends, is evicted (closed at once), or the server stops
/// (its request in flight finishes first).
async fn connection(
    tcp: TcpStream,
    app: Router,
    header_timeout: Duration,
    ticket: Ticket,
    evict: Arc<Notify>,
    mut stopped: watch::Receiver<bool>,
) {
    let service = TowerToHyperService::new(Tagged { app, proof: ticket.proof() });
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
    let conn = builder.serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            () = evict.notified() => break,
            changed = stopped.wait_for(|s| *s), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
    drop(ticket);
}

/// Answers a connection over the cap with 503, within a short bound, and closes it.
async fn refuse(tcp: TcpStream, message: String, place: Refusal) {
    let answer = hyper::service::service_fn(move |_request: Request<Incoming>| {
        let mut response = busy(&message);
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        async move { Ok::<_, Infallible>(response) }
    });
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(REFUSAL_TIMEOUT).keep_alive(false);
    let served = builder.serve_connection(TokioIo::new(tcp), answer);
    let _ = tokio::time::timeout(REFUSAL_TIMEOUT * 2, served).await;
    drop(place);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(cap: usize) -> Arc<Gate> {
        Arc::new(Gate { cap, state: Mutex::default() })
    }

    #[test]
    fn an_unproven_connection_gives_its_place_and_a_proven_one_keeps_it() {
        let gate = gate(2);
        let Admission::In(first, first_evict) = gate.admit() else { panic!("a place is free") };
        let Admission::In(second, _) = gate.admit() else { panic!("a place is free") };
        second.proof().proven();
        // Full: the oldest unproven connection (the first) is told to go.
        let Admission::In(third, _) = gate.admit() else { panic!("the first gives its place") };
        assert!(first_evict.notified().now_or_never_is_ready());
        drop(first);
        third.proof().proven();
        // Every place is held by a proven connection: refused.
        assert!(matches!(gate.admit(), Admission::Refused(_)));
        drop(third);
        assert!(matches!(gate.admit(), Admission::In(..)));
    }

    #[test]
    fn refusals_are_bounded_too() {
        let gate = gate(1);
        let Admission::In(held, _) = gate.admit() else { panic!("a place is free") };
        held.proof().proven();
        let refusals: Vec<Admission> = (0..MAX_REFUSING).map(|_| gate.admit()).collect();
        assert!(refusals.iter().all(|a| matches!(a, Admission::Refused(_))));
        assert!(matches!(gate.admit(), Admission::Dropped));
        drop(refusals);
        assert!(matches!(gate.admit(), Admission::Refused(_)));
    }

    #[test]
    fn the_cap_leaves_room_in_the_descriptor_limit() {
        assert_eq!(connection_cap(0), 1);
        let cap = connection_cap(usize::MAX);
        if let Some(limit) = descriptor_limit() {
            assert!(cap < limit, "{cap} connections under a limit of {limit} descriptors");
        }
    }

    /// Whether a notification is already stored.
    trait NowOrNever {
        fn now_or_never_is_ready(self) -> bool;
    }

    impl<F: Future> NowOrNever for F {
        fn now_or_never_is_ready(self) -> bool {
            let waker = std::task::Waker::noop();
            let mut context = Context::from_waker(waker);
            let mut future = std::pin::pin!(self);
            future.as_mut().poll(&mut context).is_ready()
        }
    }
}
