//! Retries of a remote server's HTTP requests, by the rules the model providers follow, narrowed
//! where a retry could run a tool twice.
//!
//! A model request runs nothing, so every transient failure of one is retried. A `tools/call`
//! may have run by the time its answer is lost, so it is asked again only when the server
//! surely did not take it: no connection was made, or the server answered 429 or 503 (it
//! refused the request before handling it). Everything else (the handshake, `tools/list`,
//! notifications) runs nothing and is retried on any transient failure: no connection, a
//! timeout, a connection cut, 429 or a 5xx.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use harness_core::retry::{NextTry, RetryPolicy, retry_after};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};

use crate::oauth::OAuth;
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};

/// Retries after the first attempt.
pub(crate) const RETRIES: u32 = 3;
/// The providers' policy with this module's numbers: 3 retries from 500 ms; the longest wait,
/// the server's `Retry-After` included, 30 s (a longer `Retry-After` is not waited).
const POLICY: RetryPolicy =
    RetryPolicy { retries: RETRIES, backoff: Duration::from_millis(500), max_wait: Duration::from_secs(30) };

/// The largest SSE event of a stream opened without a limit: `rmcp`'s own default.
const MAX_SSE_EVENT: usize = 16 << 20;

type Error = StreamableHttpError<reqwest::Error>;

/// `reqwest` with the retries of this module; `server` names it in what is reported.
#[derive(Clone)]
pub(crate) struct Retrying {
    inner: reqwest::Client,
    server: Arc<str>,
    report: bool,
    /// The server's OAuth client, whose token every request carries.
    oauth: Option<Arc<OAuth>>,
}

impl Retrying {
    /// A client for the server named `server`; `report`: say each retry on stderr. It follows
    /// no redirect: one to another host would hand it the headers (the token) and the session
    /// id, and one that turns a POST into a GET loses the message. No idle connection is kept
    /// either, as `rmcp`'s own client does: reusing one whose last answer was not read to its
    /// end stalls on the server's delayed ACK.
    pub(crate) fn new(server: &str, report: bool) -> Result<Self, String> {
        let inner = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| format!("cannot make an HTTP client ({e})"))?;
        Ok(Self { inner, server: server.into(), report, oauth: None })
    }

    /// The same, sending `oauth`'s token, and getting a new one when the server refuses it.
    pub(crate) fn with_oauth(self, oauth: Arc<OAuth>) -> Self {
        Self { oauth: Some(oauth), ..self }
    }

    /// The header given, else the OAuth client's token, if any.
    async fn bearer(&self, given: Option<String>) -> Option<String> {
        match (&self.oauth, given) {
            (Some(oauth), None) => oauth.bearer().await,
            (_, given) => given,
        }
    }

    /// A new token when the server refused the one `sent` (401) or its scope (403, once a
    /// request each: `tried`); `None` when the error is of another kind, or there is no client.
    async fn reauthorize(
        &self,
        error: &Error,
        sent: Option<&str>,
        tried: &mut [bool; 2],
    ) -> Result<Option<String>, Error> {
        let Some(oauth) = &self.oauth else { return Ok(None) };
        let outcome = match error {
            StreamableHttpError::AuthRequired(e) if !tried[0] => {
                tried[0] = true;
                oauth.authorize(Some(&e.www_authenticate_header), sent).await
            }
            StreamableHttpError::HttpStatus(s) if s.status == 401 && !tried[0] => {
                tried[0] = true;
                oauth.authorize(None, sent).await
            }
            StreamableHttpError::InsufficientScope(e) if !tried[1] => {
                tried[1] = true;
                oauth.step_up(&e.www_authenticate_header).await
            }
            StreamableHttpError::InsufficientScope(e) => Err(format!(
                "the server refused the token for insufficient scope again (it asks for {:?}) after one larger scope was granted; not asked again",
                e.required_scope.as_deref().unwrap_or_default()
            )),
            _ => return Ok(None),
        };
        outcome.map(Some).map_err(|why| StreamableHttpError::UnexpectedServerResponse(why.into()))
    }
}

/// Whether `error` is worth another try of a message that runs a tool (`runs_tool`) or not;
/// `Some(wait)` when the server asked for one (`Retry-After`, in seconds or as a date).
fn transient(error: &Error, runs_tool: bool) -> Option<Option<Duration>> {
    match error {
        StreamableHttpError::Client(e) if e.is_connect() => Some(None),
        StreamableHttpError::HttpStatus(s) if matches!(s.status, 429 | 503) => {
            Some(s.retry_after.as_deref().and_then(retry_after))
        }
        _ if runs_tool => None,
        StreamableHttpError::Client(e) if e.is_timeout() || e.is_request() || e.is_body() => Some(None),
        StreamableHttpError::HttpStatus(s) if s.status >= 500 => Some(None),
        StreamableHttpError::Io(_) | StreamableHttpError::UnexpectedEndOfStream => Some(None),
        _ => None,
    }
}

/// Whether a failed request surely never reached the server: no connection was made.
pub(crate) fn never_reached(error: &(dyn std::error::Error + 'static)) -> bool {
    matches!(error.downcast_ref::<Error>(), Some(StreamableHttpError::Client(e)) if e.is_connect())
}

fn runs_tool(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::CallToolRequest(_)))
}

impl StreamableHttpClient for Retrying {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits).await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let runs_tool = runs_tool(&message);
        let mut retries = 0;
        let mut auth_header = self.bearer(auth_header).await;
        let mut tried = [false; 2];
        loop {
            let sent = self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                limits,
            );
            let error = match sent.await {
                Ok(response) => return Ok(response),
                Err(e) => e,
            };
            // A refused token was never taken: the message is sent again with a new one.
            if let Some(token) = self.reauthorize(&error, auth_header.as_deref(), &mut tried).await? {
                auth_header = Some(token);
                continue;
            }
            let Some(asked) = transient(&error, runs_tool) else { return Err(error) };
            let NextTry::After { wait, .. } = POLICY.next(retries, asked) else { return Err(error) };
            retries += 1;
            if self.report {
                eprintln!(
                    "harness: MCP server {:?}: retry {retries}/{RETRIES} in {} ms: {error}",
                    self.server,
                    wait.as_millis()
                );
            }
            tokio::time::sleep(wait).await;
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let auth_header = self.bearer(auth_header).await;
        self.inner.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, Error> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            MAX_SSE_EVENT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, Error> {
        let mut auth_header = self.bearer(auth_header).await;
        let mut tried = [false; 2];
        loop {
            let stream = self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                max_sse_event_size,
            );
            let error = match stream.await {
                Ok(stream) => return Ok(stream),
                Err(e) => e,
            };
            match self.reauthorize(&error, auth_header.as_deref(), &mut tried).await? {
                Some(token) => auth_header = Some(token),
                None => return Err(error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::transport::streamable_http_client::HttpStatusError;

    use super::*;

    fn status(code: u16, retry_after: Option<&str>) -> Error {
        StreamableHttpError::HttpStatus(HttpStatusError::new(code, retry_after.map(str::to_owned)))
    }

    #[test]
    fn a_call_is_asked_again_only_when_the_server_surely_did_not_take_it() {
        for runs_tool in [false, true] {
            assert_eq!(transient(&status(503, None), runs_tool), Some(None));
            assert_eq!(transient(&status(429, Some("2")), runs_tool), Some(Some(Duration::from_secs(2))));
            // A date, as the providers read it: the one policy of every server request.
            let past = Some("Sun, 06 Nov 1994 08:49:37 GMT");
            assert_eq!(transient(&status(503, past), runs_tool), Some(Some(Duration::ZERO)));
        }
        for error in [status(500, None), status(502, None), status(504, None)] {
            assert_eq!(transient(&error, false), Some(None), "{error}");
            assert_eq!(transient(&error, true), None, "{error}");
        }
        assert_eq!(transient(&StreamableHttpError::UnexpectedEndOfStream, true), None);
        assert_eq!(transient(&StreamableHttpError::SessionExpired, false), None);
    }

    /// A server on loopback that answers every POST with `answer`, counting them.
    async fn counting(
        answer: fn(&str) -> axum::response::Response,
        to: String,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use axum::response::IntoResponse;
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let counted = hits.clone();
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let response = answer(&to);
                async move { response.into_response() }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/mcp"), hits)
    }

    #[tokio::test]
    async fn no_redirect_is_followed_so_headers_never_reach_another_host() {
        use axum::http::{StatusCode, header};
        use axum::response::IntoResponse;
        let (elsewhere, reached) = counting(|_| StatusCode::OK.into_response(), String::new()).await;
        let redirect = |to: &str| (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to.to_owned())]).into_response();
        let (url, _) = counting(redirect, elsewhere).await;
        let ping = ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(rmcp::model::PingRequest::default()),
            rmcp::model::RequestId::Number(1),
        );
        let headers = HashMap::from([(HeaderName::from_static("x-token"), HeaderValue::from_static("secret"))]);
        let client = Retrying::new("test", false).unwrap();
        assert!(client.post_message(url.into(), ping, None, None, headers).await.is_err());
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
