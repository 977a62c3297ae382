//! The HTTP transport shared by the model APIs: one client, timeouts, retries with backoff,
//! and errors that say what the server said and what to check.
//!
//! Nothing here knows a model API's body shape; it posts JSON and hands back JSON.

use std::error::Error as _;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use harness_core::retry::{self, NextTry, RetryPolicy};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use serde_json::Value;

use crate::budget::{RetryBudget, Spent};

/// Whether a status is worth another try: a request timeout (408), a conflict with a request
/// in flight (409), a rate limit (429), and every server error (5xx, Anthropic's 529
/// "overloaded" among them). Other 4xx are the request's own fault: the same request would get
/// the same answer.
fn retryable_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 409 | 429 | 500..=599)
}

/// The largest answer read; a model's reply is a small fraction of this.
const MAX_BODY_BYTES: usize = 16 << 20;

/// How much of a server's message or body an error quotes.
const QUOTE_CHARS: usize = 400;

/// Timeouts and retries of the HTTP providers.
#[derive(Clone)]
pub struct HttpSettings {
    /// The whole request, from connecting to the last byte of the answer.
    pub timeout: Duration,
    /// Establishing the connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// Retries after the first attempt, for retryable statuses and connection errors.
    pub retries: u32,
    /// The wait before the first retry; each later one doubles it, with jitter.
    pub backoff: Duration,
    /// The longest single wait; a `Retry-After` asking for more ends the request instead.
    pub max_wait: Duration,
    /// Where retries and router-mode fallbacks are reported.
    pub notify: Notify,
    /// A budget of retries shared with other providers' requests (a batch's), if any.
    pub budget: Option<Arc<RetryBudget>>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retries: 3,
            backoff: Duration::from_millis(500),
            max_wait: Duration::from_secs(60),
            notify: Notify::stderr(),
            budget: None,
        }
    }
}

impl HttpSettings {
    /// The retries, backoff and longest wait, as the policy every server request follows.
    pub fn policy(&self) -> RetryPolicy {
        RetryPolicy { retries: self.retries, backoff: self.backoff, max_wait: self.max_wait }
    }
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSettings")
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .field("max_wait", &self.max_wait)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// Something an operator should know while a run goes on: a retry, or a change of router mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A request failed in a way worth another try, which follows after `wait`.
    Retry {
        /// Which retry this is, from 1.
        attempt: u32,
        /// The retries allowed.
        of: u32,
        /// The wait before it.
        wait: Duration,
        /// Whether the wait is the server's `Retry-After`.
        server_asked: bool,
        /// What went wrong, naming the URL.
        reason: String,
    },
    /// The retry budget is spent: from now on failed requests are not retried.
    BudgetSpent {
        /// Where the budget stood.
        spent: Spent,
    },
    /// `--router-mode auto` stepped down the ladder (native, constrained, prompt) for the rest
    /// of the run.
    Fallback {
        /// The mode in force from now on.
        to: crate::RouterMode,
        /// Why: the server's refusal, or a reply that ignored the tools.
        reason: String,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Retry { attempt, of, wait, server_asked, reason } => {
                let why = if *server_asked { " (the server's Retry-After)" } else { "" };
                write!(f, "retry {attempt}/{of} in {} ms{why}: {reason}", wait.as_millis())
            }
            Self::BudgetSpent { spent } => write!(
                f,
                "the retry budget is spent ({} retries over {} requests, --retry-budget {}): failed requests are no longer retried",
                spent.retries, spent.requests, spent.share
            ),
            Self::Fallback { to, reason } => write!(
                f,
                "switching to {to} mode for the rest of the run: {reason}. Pass --router-mode {to} to start there"
            ),
        }
    }
}

/// Receives [`Notice`]s; by default each is one `harness: ` line on stderr.
#[derive(Clone)]
pub struct Notify(Arc<dyn Fn(&Notice) + Send + Sync>);

impl Notify {
    /// Prints each notice on stderr as `harness: <notice>`.
    pub fn stderr() -> Self {
        Self::new(|n| eprintln!("harness: {n}"))
    }

    /// Calls `f` with each notice.
    pub fn new(f: impl Fn(&Notice) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub(crate) fn send(&self, notice: &Notice) {
        (self.0)(notice);
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Notify")
    }
}

/// An API key: sent in one header, shown nowhere, and cut out of anything a server echoes.
#[derive(Clone)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(key: String) -> Self {
        Self(key)
    }

    /// Replaces every occurrence of the key in `text`. Keys too short to be told apart from
    /// ordinary text are left to the server's discretion.
    pub(crate) fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 { text.to_owned() } else { text.replace(&self.0, "[redacted]") }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// What the error messages may suggest: which variable holds the key, which model was asked.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hints {
    /// The environment variable the key comes from, when there is one.
    pub(crate) key_env: Option<String>,
    /// Whether a key was sent.
    pub(crate) key_sent: bool,
    /// The model asked for.
    pub(crate) model: String,
}

/// Why one request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HttpError {
    /// No connection within the connect timeout.
    #[error(
        "could not connect to {url} within {} (connect timeout); check that the server is running and that --base-url is right",
        secs(*after)
    )]
    ConnectTimeout {
        /// The URL.
        url: String,
        /// The connect timeout.
        after: Duration,
    },
    /// The whole request took longer than the timeout.
    #[error(
        "{url} did not answer within {} (--timeout); the model may be slow or still loading: raise --timeout",
        secs(*after)
    )]
    Timeout {
        /// The URL.
        url: String,
        /// The whole-request timeout.
        after: Duration,
    },
    /// The connection failed or broke.
    #[error("cannot reach {url}: {reason}; check that the server is running and that --base-url is right")]
    Connection {
        /// The URL.
        url: String,
        /// The cause, as the OS or the TLS layer put it.
        reason: String,
    },
    /// A redirect the client would not follow; another attempt would be the same.
    #[error("{url}: {reason}")]
    Redirect {
        /// The URL.
        url: String,
        /// Where it led and what to do.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{url} answered {status}: {said}{hint}")]
    Status {
        /// The URL.
        url: String,
        /// The status line.
        status: StatusCode,
        /// The server's message, or the start of its body.
        said: String,
        /// What to check, with a leading separator, or empty.
        hint: String,
        /// Whether the server says it does not support tools or `tool_choice`.
        rejects_tools: bool,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// A retryable status whose `Retry-After` asks for a longer wait than the harness allows.
    #[error("{url} answered {status} and asked to retry after {}, longer than the {} the harness waits", secs(*wait), secs(*max))]
    WaitTooLong {
        /// The URL.
        url: String,
        /// The status line.
        status: StatusCode,
        /// The wait the server asked for.
        wait: Duration,
        /// The longest wait allowed.
        max: Duration,
    },
    /// A success status with a body that is not JSON.
    #[error(
        "{url} answered {status} with a body that is not JSON ({problem}), starting {excerpt:?}; check that --base-url points at the API itself (OpenAI-compatible servers usually end in /v1)"
    )]
    NotJson {
        /// The URL.
        url: String,
        /// The status line.
        status: StatusCode,
        /// The parser's complaint.
        problem: String,
        /// The start of the body.
        excerpt: String,
        /// Whether the body ends before its JSON does: cut short, as by a server that died
        /// mid-answer.
        cut: bool,
    },
    /// An answer larger than any model reply should be.
    #[error("{url} answered with more than {limit} bytes, which no model reply needs; check --base-url")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// A JSON answer of the wrong shape.
    #[error("{url} answered with JSON this provider cannot read: {problem}")]
    Shape {
        /// The URL.
        url: String,
        /// What is missing or wrong.
        problem: String,
    },
    /// A failure worth another try that was not retried: the retry budget is spent.
    #[error(
        "{cause}; not retried: the retry budget is spent ({} retries over {} requests, --retry-budget {}); raise --retry-budget, or rerun with --retry-failed",
        spent.retries, spent.requests, spent.share
    )]
    BudgetSpent {
        /// The failure.
        cause: Box<HttpError>,
        /// Where the budget stood.
        spent: Spent,
    },
}

impl HttpError {
    /// Whether another attempt could go differently: the server was not reached, was too slow,
    /// failed, or answered a body cut short or not the API's. A request runs nothing, so asking
    /// again is safe; what it costs is tokens.
    fn retryable(&self) -> bool {
        match self {
            Self::ConnectTimeout { .. }
            | Self::Connection { .. }
            | Self::Timeout { .. }
            | Self::NotJson { .. }
            | Self::Shape { .. } => true,
            Self::Status { status, rejects_tools, .. } => !rejects_tools && retryable_status(*status),
            Self::Redirect { .. } | Self::WaitTooLong { .. } | Self::TooLarge { .. } | Self::BudgetSpent { .. } => {
                false
            }
        }
    }

    /// Whether this is what a server that is down, unreachable or failing looks like (no
    /// connection, no answer in time, an answer cut short, a 5xx): what a circuit breaker
    /// counts. A whole body that is not JSON (a web page) is a wrong `--base-url`, not this.
    pub(crate) fn outage(&self) -> bool {
        match self {
            Self::ConnectTimeout { .. } | Self::Connection { .. } | Self::Timeout { .. } => true,
            Self::NotJson { cut, .. } => *cut,
            Self::Status { status, .. } => status.is_server_error(),
            Self::BudgetSpent { cause, .. } => cause.outage(),
            _ => false,
        }
    }

    /// Why a client error was not retried, when this is one: the request itself is at fault.
    pub(crate) fn not_retried(&self) -> Option<&'static str> {
        match self {
            Self::Status { status, .. } if status.is_client_error() && !retryable_status(*status) => Some(
                "not retried: a 4xx other than 408, 409 and 429 is the request's own fault, and the same request would be refused again",
            ),
            _ => None,
        }
    }

    /// The server's refusal of tools or `tool_choice`, when that is what this is.
    pub(crate) fn tool_refusal(&self) -> Option<&str> {
        match self {
            Self::Status { said, rejects_tools: true, .. } => Some(said),
            _ => None,
        }
    }

    /// The server's refusal of constrained mode's `response_format`, when that is what this is.
    pub(crate) fn schema_refusal(&self) -> Option<&str> {
        match self {
            Self::Status { said, status, .. } if status.is_client_error() && rejects_response_format(said) => {
                Some(said)
            }
            _ => None,
        }
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 { format!("{s:.0} s") } else { format!("{s:.3} s") }
}

/// A request that failed, after `retries` retries.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) error: HttpError,
    pub(crate) retries: u32,
}

/// An answer read from its JSON, after `retries` retries.
#[derive(Debug, Clone)]
pub(crate) struct Answer<T> {
    pub(crate) body: T,
    pub(crate) retries: u32,
}

/// Posts JSON to one endpoint with the provider's headers, timeouts and retries.
#[derive(Debug)]
pub(crate) struct Transport {
    client: reqwest::Client,
    url: Url,
    /// The URL as it is shown: never with a password in it.
    shown_url: String,
    /// The request as errors name it: `POST <shown_url>`.
    shown: String,
    headers: HeaderMap,
    settings: HttpSettings,
    secret: Option<Secret>,
    hints: Hints,
}

/// Why a transport cannot be built.
#[derive(Debug)]
pub(crate) enum HeaderProblem {
    /// The key cannot be sent in its header.
    Auth,
    /// This configured header cannot be sent.
    Header(String),
    /// The HTTP client could not start.
    Client(String),
}

/// The most redirects followed, as reqwest's default policy.
const MAX_REDIRECTS: usize = 10;

/// A client for a plain `http` endpoint: no TLS, so none of the system's root certificates
/// (reading and parsing hundreds of files took several ms of every start-up, before the first
/// request). A redirect to `https` is refused with what to do, rather than failing later as an
/// unknown certificate issuer.
fn plain_http(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder.tls_certs_only([]).redirect(reqwest::redirect::Policy::custom(|attempt| {
        if attempt.url().scheme() != "http" {
            let to = attempt.url().to_string();
            attempt.error(format!("the http endpoint redirected to {to}: give the https base URL instead (--base-url)"))
        } else if attempt.previous().len() >= MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    }))
}

impl Transport {
    /// A transport for `url`. `auth` is the header that carries the key and its value; it is
    /// marked sensitive so that no debug output shows it.
    pub(crate) fn new(
        url: Url,
        headers: &[(String, String)],
        auth: Option<(&str, String, Secret)>,
        settings: HttpSettings,
        hints: Hints,
    ) -> Result<Self, HeaderProblem> {
        let mut map = HeaderMap::new();
        map.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in headers {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| HeaderProblem::Header(name.clone()))?;
            let v = HeaderValue::from_str(value).map_err(|_| HeaderProblem::Header(name.clone()))?;
            map.insert(n, v);
        }
        let mut secret = None;
        if let Some((name, value, key)) = auth {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| HeaderProblem::Auth)?;
            let mut v = HeaderValue::from_str(&value).map_err(|_| HeaderProblem::Auth)?;
            v.set_sensitive(true);
            map.insert(n, v);
            secret = Some(key);
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.timeout)
            .user_agent(concat!("harness/", env!("CARGO_PKG_VERSION")));
        if url.scheme() == "http" {
            builder = plain_http(builder);
        }
        let client = builder.build().map_err(|e| HeaderProblem::Client(causes(&e)))?;
        let mut shown_url = url.clone();
        if shown_url.password().is_some() {
            let _ = shown_url.set_password(Some("***"));
        }
        let shown_url = shown_url.to_string();
        Ok(Self { client, shown: format!("POST {shown_url}"), shown_url, url, headers: map, settings, secret, hints })
    }

    /// The endpoint's URL, with any password in it masked.
    pub(crate) fn url(&self) -> &str {
        &self.shown_url
    }

    /// Cuts the key out of `text`.
    pub(crate) fn redact(&self, text: &str) -> String {
        match &self.secret {
            Some(s) => s.redact(text),
            None => text.to_owned(),
        }
    }

    /// GETs `url` (a server's own endpoint, such as llama.cpp's `/props`) with the provider's
    /// headers, once and within the connect timeout and a few seconds: `None` when it fails or
    /// is not JSON, since what it tells is optional.
    pub(crate) async fn get_json(&self, url: Url) -> Option<Value> {
        self.ask_json(self.client.get(url)).await
    }

    /// POSTs `body` to `url` (a server's own endpoint, such as llama.cpp's `/tokenize`), as
    /// [`Transport::get_json`] GETs.
    pub(crate) async fn post_json(&self, url: Url, body: &Value) -> Option<Value> {
        self.ask_json(self.client.post(url).body(body.to_string())).await
    }

    /// Sends a request to one of the server's own endpoints, once, with the provider's headers.
    async fn ask_json(&self, request: reqwest::RequestBuilder) -> Option<Value> {
        let limit = self.settings.connect_timeout.max(Duration::from_secs(5));
        let sent = request.headers(self.headers.clone()).timeout(limit).send().await.ok()?;
        if !sent.status().is_success() {
            return None;
        }
        serde_json::from_slice(&sent.bytes().await.ok()?).ok()
    }

    /// Sends a notice, with the key cut out of it.
    pub(crate) fn notify(&self, notice: Notice) {
        let notice = match notice {
            Notice::Retry { attempt, of, wait, server_asked, reason } => {
                Notice::Retry { attempt, of, wait, server_asked, reason: self.redact(&reason) }
            }
            Notice::Fallback { to, reason } => Notice::Fallback { to, reason: self.redact(&reason) },
            spent @ Notice::BudgetSpent { .. } => spent,
        };
        self.settings.notify.send(&notice);
    }

    /// Posts `bytes` (a JSON body), retrying what is worth retrying, and returns the answer as
    /// `read` reads it from the JSON; JSON `read` refuses is an answer of the wrong shape, which
    /// is retried like a body cut short.
    pub(crate) async fn post<T>(
        &self,
        mode: &str,
        bytes: &[u8],
        read: impl Fn(&Value) -> Result<T, String>,
    ) -> Result<Answer<T>, Failure> {
        let mut retries = 0;
        if let Some(budget) = &self.settings.budget {
            budget.request();
        }
        loop {
            let error = match self.attempt(mode, bytes).await {
                Ok(value) => match read(&value) {
                    Ok(body) => return Ok(Answer { body, retries }),
                    Err(problem) => HttpError::Shape { url: self.shown.clone(), problem },
                },
                Err(e) => e,
            };
            let next = if error.retryable() {
                self.settings.policy().next(retries, asked(&error))
            } else {
                NextTry::Exhausted
            };
            if next == NextTry::Exhausted {
                return Err(Failure { error, retries });
            }
            let error = match self.spend(error) {
                Ok(error) => error,
                Err(error) => return Err(Failure { error, retries }),
            };
            let NextTry::After { wait, server_asked } = next else {
                let error = match (next, error) {
                    (NextTry::WaitTooLong(wait), HttpError::Status { url, status, .. }) => {
                        HttpError::WaitTooLong { url, status, wait, max: self.settings.max_wait }
                    }
                    (_, error) => error,
                };
                return Err(Failure { error, retries });
            };
            retries += 1;
            tracing::info!(
                target: "harness_providers",
                "retry {retries}/{} in {} ms{}: {}",
                self.settings.retries,
                wait.as_millis(),
                if server_asked { " (the server asked)" } else { "" },
                self.redact(&error.to_string())
            );
            self.notify(Notice::Retry {
                attempt: retries,
                of: self.settings.retries,
                wait,
                server_asked,
                reason: error.to_string(),
            });
            tokio::time::sleep(wait).await;
        }
    }

    /// Takes a retry from the budget, if there is one; a refusal is the failure, said once.
    fn spend(&self, error: HttpError) -> Result<HttpError, HttpError> {
        let Some(budget) = &self.settings.budget else { return Ok(error) };
        match budget.spend() {
            Ok(()) => Ok(error),
            Err(spent) => {
                if budget.first_refusal() {
                    self.notify(Notice::BudgetSpent { spent });
                }
                Err(HttpError::BudgetSpent { cause: Box::new(error), spent })
            }
        }
    }

    async fn attempt(&self, mode: &str, bytes: &[u8]) -> Result<Value, HttpError> {
        let started = std::time::Instant::now();
        tracing::info!(target: "harness_providers", "POST {} mode={mode} bytes={}", self.shown_url, bytes.len());
        // The body only, never the headers (the key's header among them); the key cut out
        // of it as well, in case a configured header or prompt repeats it.
        tracing::debug!(target: "harness_providers", "request body: {}", self.redact(&String::from_utf8_lossy(bytes)));
        let value = self.exchange(bytes).await;
        let ms = started.elapsed().as_millis();
        match &value {
            Ok(value) => {
                // Read only when the line is written: a run without -v pays nothing for it.
                if tracing::enabled!(target: "harness_providers", tracing::Level::INFO) {
                    let (input, output) = usage(value);
                    tracing::info!(target: "harness_providers", "reply ok tokens_in={input} tokens_out={output} in {ms} ms");
                }
                tracing::debug!(target: "harness_providers", "reply body: {}", self.redact(&value.to_string()));
            }
            Err(e) => {
                tracing::info!(target: "harness_providers", "reply failed in {ms} ms: {}", self.redact(&e.to_string()))
            }
        }
        value
    }

    /// One request and its answer, read whole.
    async fn exchange(&self, bytes: &[u8]) -> Result<Value, HttpError> {
        let sent = self.client.post(self.url.clone()).headers(self.headers.clone()).body(bytes.to_vec()).send().await;
        let mut response = sent.map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        let retry_after =
            response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(retry::retry_after);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(&e))? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(HttpError::TooLarge { url: self.shown.clone(), limit: MAX_BODY_BYTES });
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(self.status_error(status, &body, retry_after));
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(value) => match error_in_body(&value) {
                // OpenRouter reports some upstream failures as a 200 whose body is an error.
                Some((code, said)) => {
                    let status = code.and_then(|c| StatusCode::from_u16(c).ok()).unwrap_or(StatusCode::BAD_GATEWAY);
                    let said = format!("{} (in the body of a 200 answer)", self.redact(&said));
                    Err(self.status_error_from(status, said, retry_after))
                }
                None => Ok(value),
            },
            Err(e) => Err(HttpError::NotJson {
                url: self.shown.clone(),
                status,
                problem: e.to_string(),
                excerpt: self.redact(&excerpt(&String::from_utf8_lossy(&body), 120)),
                cut: e.is_eof(),
            }),
        }
    }

    fn transport_error(&self, e: &reqwest::Error) -> HttpError {
        let url = self.shown.clone();
        if e.is_connect() && e.is_timeout() {
            HttpError::ConnectTimeout { url, after: self.settings.connect_timeout }
        } else if e.is_timeout() {
            HttpError::Timeout { url, after: self.settings.timeout }
        } else if e.is_redirect() {
            HttpError::Redirect { url, reason: self.redact(&causes(e)) }
        } else {
            HttpError::Connection { url, reason: self.redact(&causes(e)) }
        }
    }

    fn status_error(&self, status: StatusCode, body: &[u8], retry_after: Option<Duration>) -> HttpError {
        let text = String::from_utf8_lossy(body);
        let said = match serde_json::from_str::<Value>(&text).ok().as_ref().and_then(server_message) {
            Some(message) => message,
            None if text.trim().is_empty() => "(an empty body)".to_owned(),
            None => excerpt(text.trim(), QUOTE_CHARS),
        };
        self.status_error_from(status, self.redact(&said), retry_after)
    }

    fn status_error_from(&self, status: StatusCode, said: String, retry_after: Option<Duration>) -> HttpError {
        // The hint follows as a sentence of its own.
        let said = said.trim_end().trim_end_matches('.').to_owned();
        let rejects_tools = rejects_tools(&said);
        let hint = hint(status, &said, rejects_tools, &self.hints);
        HttpError::Status { url: self.shown.clone(), status, said, hint, rejects_tools, retry_after }
    }
}

/// A reply's token counts (input, output), as OpenAI or Anthropic name them; `?` when absent.
fn usage(value: &Value) -> (String, String) {
    let usage = value.get("usage");
    let count = |names: [&str; 2]| {
        names
            .iter()
            .find_map(|n| usage.and_then(|u| u.get(*n)).and_then(Value::as_u64))
            .map_or_else(|| "?".to_owned(), |n| n.to_string())
    };
    (count(["prompt_tokens", "input_tokens"]), count(["completion_tokens", "output_tokens"]))
}

/// The wait the server asked for (`Retry-After`), when the error carries one.
fn asked(error: &HttpError) -> Option<Duration> {
    match error {
        HttpError::Status { retry_after, .. } => *retry_after,
        _ => None,
    }
}

/// The message in an error body, in the shapes the APIs use: OpenAI's and llama.cpp's
/// `{"error": {"message"}}`, Anthropic's `{"type": "error", "error": {"message"}}`, Ollama's
/// `{"error": "..."}`, vLLM's `{"message"}`, and `{"detail"}`.
fn server_message(body: &Value) -> Option<String> {
    let error = body.get("error");
    let message = error
        .and_then(|e| e.get("message"))
        .or_else(|| error.filter(|e| e.is_string()))
        .or_else(|| body.get("message"))
        .or_else(|| body.get("detail"))?;
    let text = match message {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    // OpenRouter puts the upstream provider's own words in `metadata.raw`.
    let raw = error.and_then(|e| e.get("metadata")).and_then(|m| m.get("raw")).and_then(Value::as_str);
    let text = match raw {
        Some(raw) if !raw.is_empty() && !text.contains(raw) => format!("{text} ({})", excerpt(raw, 200)),
        _ => text,
    };
    Some(excerpt(&text, QUOTE_CHARS))
}

/// An error reported inside a JSON body that should have held an answer, with its code.
fn error_in_body(body: &Value) -> Option<(Option<u16>, String)> {
    let error = body.get("error").filter(|e| !e.is_null())?;
    if body.get("choices").is_some() || body.get("content").is_some() {
        return None;
    }
    let code = error.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    Some((code, server_message(body).unwrap_or_else(|| error.to_string())))
}

/// Whether a server's message says it does not take tools or `tool_choice`: Ollama's "does
/// not support tools", llama.cpp's "tools param requires --jinja flag" and "Unsupported
/// param: tool_choice", vLLM's "tool choice requires --enable-auto-tool-choice", OpenRouter's
/// "No endpoints found that support tool use" (or, with `require_parameters`, "... that can
/// handle the requested parameters").
pub(crate) fn rejects_tools(message: &str) -> bool {
    let m = message.to_lowercase();
    if m.contains("requested parameters") && m.contains("no endpoints") {
        return true;
    }
    let about_tools = m.contains("tool") || m.contains("function call");
    about_tools
        && [
            "support",
            "require",
            "jinja",
            "not allowed",
            "no endpoints",
            "unrecognized",
            "not enabled",
            "unknown param",
        ]
        .iter()
        .any(|w| m.contains(w))
}

/// Whether a server's message refuses constrained mode's `response_format` or its schema:
/// OpenAI's "Invalid parameter: 'response_format' of type 'json_schema' is not supported",
/// llama.cpp's "response_format type must be one of ..." and "JSON schema error at #: unsupported
/// $ref", vLLM's guided decoding and grammar errors.
pub(crate) fn rejects_response_format(message: &str) -> bool {
    let m = message.to_lowercase();
    ["response_format", "json_schema", "json schema", "grammar", "guided decoding", "structured output"]
        .iter()
        .any(|w| m.contains(w))
}

fn hint(status: StatusCode, said: &str, rejects_tools: bool, hints: &Hints) -> String {
    if rejects_tools {
        return ". The server or this model does not support tools or tool_choice: try --router-mode constrained (a JSON schema the server decodes to) or prompt (the tools go in the prompt), or --tool-choice auto".to_owned();
    }
    if status.is_client_error() && rejects_response_format(said) {
        return ". The server does not take constrained mode's response_format (a JSON schema of the tool calls): try --router-mode prompt".to_owned();
    }
    let key = hints.key_env.as_deref().unwrap_or("the API key variable");
    let model = &hints.model;
    let hint = match status.as_u16() {
        401 if !hints.key_sent => {
            format!("No API key was sent: set {key}, or name another variable with --api-key-env")
        }
        401 => format!("Check the API key in {key}: is it current, and is it a key for this server?"),
        403 => format!(
            "The key in {key} is not allowed to do this: check its permissions, its credit, and whether it may use the model {model:?}"
        ),
        404 => {
            let m = said.to_lowercase();
            if m.contains("model") {
                format!("Check the model name {model:?} (--model): the server does not know it")
            } else {
                format!(
                    "Check --base-url (OpenAI-compatible servers usually end in /v1) and the model name {model:?} (--model)"
                )
            }
        }
        400 | 422 => format!(
            "Check the model name {model:?} (--model) and what the server says it refused; if it is about tools or tool_choice, try --router-mode constrained or prompt, or --tool-choice auto"
        ),
        413 => "The conversation is too long for this server: lower --max-steps".to_owned(),
        429 => "Rate limited: wait, raise --retries, or check the account's limits and credit".to_owned(),
        500..=599 => "The server failed: try again later, or raise --retries".to_owned(),
        _ => return String::new(),
    };
    format!(". {hint}")
}

/// The first `max` characters of `text`, marked when cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The innermost cause of an error, which says what actually failed ("Connection refused",
/// "invalid peer certificate: UnknownIssuer") without the layers' wrappers around it.
fn causes(e: &reqwest::Error) -> String {
    let mut innermost = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        innermost = s.to_string();
        source = s.source();
    }
    innermost
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_messages_in_every_shape() {
        let cases = [
            (serde_json::json!({"error": {"message": "bad key", "type": "invalid_request_error"}}), "bad key"),
            (serde_json::json!({"type": "error", "error": {"type": "x", "message": "overloaded"}}), "overloaded"),
            (serde_json::json!({"error": "model not found"}), "model not found"),
            (serde_json::json!({"object": "error", "message": "vllm says"}), "vllm says"),
            (serde_json::json!({"detail": "nope"}), "nope"),
        ];
        for (body, want) in cases {
            assert_eq!(server_message(&body).as_deref(), Some(want));
        }
        let routed = serde_json::json!({"error": {"message": "Provider returned error", "code": 400, "metadata": {"raw": "tools unsupported"}}});
        assert_eq!(server_message(&routed).as_deref(), Some("Provider returned error (tools unsupported)"));
    }

    #[test]
    fn tool_refusals_are_recognised_and_other_errors_are_not() {
        for m in [
            "registry.ollama.ai/library/gemma:2b does not support tools",
            "tools param requires --jinja flag",
            "Unsupported param: tool_choice",
            "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
            "No endpoints found that support tool use",
            "No endpoints found that can handle the requested parameters.",
        ] {
            assert!(rejects_tools(m), "{m}");
        }
        for m in [
            "Incorrect API key provided",
            "model not found",
            "context length exceeded",
            "Invalid schema for function 'x'",
        ] {
            assert!(!rejects_tools(m), "{m}");
        }
    }

    #[test]
    fn secrets_are_cut_out() {
        let s = Secret::new("sk-abcdef".into());
        assert_eq!(s.redact("bad key sk-abcdef!"), "bad key [redacted]!");
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert_eq!(excerpt("héllo", 2), "hé...");
    }
}
