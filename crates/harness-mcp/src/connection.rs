//! One live MCP session with a server child, and the runtime that drives every session.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use harness_core::ToolFailure;
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, JsonObject, Tool,
};
// Sampling is deprecated (SEP-2577), but servers of older versions still ask for it.
#[allow(deprecated)]
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
use rmcp::model::{ElicitRequestParams, ElicitResult, ErrorCode, ErrorData};
use rmcp::service::{ClientInitializeError, NotificationContext, RequestContext, RunningService};
use rmcp::transport::IntoTransport;
use rmcp::{
    ClientCacheConfig, ClientHandler, ClientLifecycleMode, ClientServiceExt, MAX_CLIENT_CACHE_TTL, Peer, RoleClient,
    ServiceError,
};

use crate::child::{self, ChildWatch};
use crate::config::McpServerConfig;
use crate::discover::CheckedDiscovery;
use crate::listing::{self, ListError};
use crate::oauth::OAuth;
use crate::remote;
use crate::retry::{self, Retrying};
use crate::watch::ToolWatch;

/// How long a server that lost its connection gets to be seen exiting, for a better message.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How long a server gets to exit after its stdin closes, before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The runtime that drives every MCP session, apart from whatever runtime the caller has: the
/// loop calls tools from its blocking threads, and sessions must progress meanwhile.
pub(crate) struct Driver {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Driver {
    /// A runtime with one worker thread.
    pub(crate) fn new() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("harness-mcp")
            .enable_all()
            .build()?;
        Ok(Self { runtime: Some(runtime) })
    }

    /// Runs `future` on this runtime and waits for it from a plain thread. `None` when the
    /// runtime shut down first. Never panics, even when called from async code (it then blocks
    /// that thread, which is the caller's mistake, not a crash).
    pub(crate) fn block_on<F>(&self, future: F) -> Option<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let runtime = self.runtime.as_ref()?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().ok()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Does not wait, so it is safe wherever the last reference goes (even in async code);
        // children are killed as their tasks are dropped (kill_on_drop).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The harness as an MCP client: it says who it is, hears when a server's tools change, and
/// refuses what it does not offer (sampling, elicitation) in words, not by silence.
struct Client {
    server: String,
    watch: Arc<ToolWatch>,
    /// Say each refusal on stderr too (not with `--quiet`).
    report: bool,
}

/// The refusal of a server's request for something the harness's client does not offer, said
/// to the server and, for each request, on stderr when `report`.
fn not_offered(server: &str, report: bool, what: &str, why: &str) -> ErrorData {
    if report {
        eprintln!(
            "harness: warning: MCP server {server:?} asked for {what}, which the harness does not offer ({why}); refused"
        );
    }
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "the harness's MCP client does not offer {what}: {why}. It declared no such capability; call the tool without it"
        ),
        None,
    )
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("harness", env!("CARGO_PKG_VERSION")))
    }

    /// Refused: the harness's model is not lent to a server's tool.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(not_offered(
            &self.server,
            self.report,
            "sampling (sampling/createMessage)",
            "a tool cannot ask the harness's model for a completion",
        ))
    }

    /// Refused: nobody is asked for input while a tool runs (a batch has nobody to ask).
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Err(not_offered(
            &self.server,
            self.report,
            "elicitation (elicitation/create)",
            "no one is asked for input while a tool runs",
        ))
    }

    /// Lists the tools again at once, so that a change is reported when it happens, not only
    /// at the next call (which lists them again too: the notification may still be on its way).
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // A failure here is met again, and reported, by the next call's own listing.
        let _ = self.watch.refresh(&context.peer).await;
    }
}

/// The client's cache of `tools/list`: kept for the run unless the server sets its own
/// lifetime, and dropped when the server says its tools changed. A call then lists the tools
/// for nothing, and a change is seen in the order the server sent it, before the answers that
/// follow it. A failed listing is never answered from the cache: that would hide a change.
fn tool_list_cache() -> ClientCacheConfig {
    ClientCacheConfig::default().with_default_ttl(MAX_CLIENT_CACHE_TTL).with_serve_stale_on_error(false)
}

/// A started server: its session, what it said of itself, and its tools as listed.
pub(crate) struct Started {
    pub(crate) connection: Connection,
    pub(crate) server_info: Option<(String, String)>,
    /// The protocol version the handshake settled on (the newest both sides speak).
    pub(crate) protocol_version: Option<String>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
}

/// One live session with a server: a child process, or a remote server (no process to watch).
pub(crate) struct Connection {
    server: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<Service>>,
    child: Option<ChildWatch>,
    watch: Arc<ToolWatch>,
}

type Service = RunningService<RoleClient, Client>;

/// How a server is started.
#[derive(Debug, Clone)]
pub(crate) struct Start {
    /// How long it has to start, complete the handshake and list its tools (unless its own
    /// `timeout` says otherwise).
    pub(crate) timeout: Duration,
    /// Copy its stderr lines to ours.
    pub(crate) forward_stderr: bool,
    /// The directory it starts in; `None`: ours.
    pub(crate) working_dir: Option<std::path::PathBuf>,
}

/// What went wrong in the handshake or the first listing.
enum HandshakeError {
    Init(Box<ClientInitializeError>),
    List(ListError),
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Init(e) => write!(f, "the MCP handshake failed: {e}"),
            Self::List(ListError::Cap(why)) => f.write_str(why),
            Self::List(e) => write!(f, "listing its tools failed: {e}"),
        }
    }
}

/// The newest protocol first (`server/discover`, no handshake), then, for a server that says
/// it does not know it, the `initialize` handshake, offering the newest version that has one
/// (a version without `initialize` in an `initialize` is no version the server can take); the
/// server answers with the newest it speaks.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::LATEST],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Completes the handshake over `transport` and lists the tools.
async fn handshake<T, E, A>(
    server: &str,
    report: bool,
    watch: &Arc<ToolWatch>,
    transport: T,
) -> Result<(Service, Vec<Tool>), HandshakeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = Client { server: server.to_owned(), watch: watch.clone(), report };
    let transport = CheckedDiscovery::new(transport.into_transport());
    let service =
        client.serve_with_lifecycle(transport, lifecycle()).await.map_err(|e| HandshakeError::Init(Box::new(e)))?;
    service.peer().set_response_cache_config(tool_list_cache()).await;
    let tools = listing::list_tools(service.peer(), server).await.map_err(HandshakeError::List)?;
    Ok((service, tools))
}

/// The live connection of a completed handshake.
fn started(
    config: &McpServerConfig,
    service: Service,
    tools: Vec<Tool>,
    child: Option<ChildWatch>,
    watch: Arc<ToolWatch>,
) -> Started {
    let info = service.peer().peer_info();
    let server_info = info.as_ref().and_then(|i| i.server_info.as_ref().map(|s| (s.name.clone(), s.version.clone())));
    let protocol_version = info.as_ref().map(|i| i.protocol_version.to_string());
    let peer = service.peer().clone();
    let connection = Connection { server: config.name.clone(), peer, service: Mutex::new(Some(service)), child, watch };
    Started { connection, server_info, protocol_version, tools }
}

/// Starts (or reaches) `config`'s server, completes the handshake and lists its tools, all
/// within its timeout; on failure, why, in one line.
pub(crate) async fn connect(config: &McpServerConfig, start: &Start) -> Result<Started, String> {
    let timeout = config.own_timeout().unwrap_or(start.timeout);
    match &config.url {
        Some(url) => connect_remote(config, url, timeout, start.forward_stderr).await,
        None => connect_child(config, start, timeout).await,
    }
}

/// A remote server: the headers expanded from the environment, its OAuth client made (when
/// it has one), then the handshake. A server that asks for OAuth of a server without a client
/// is refused with the alternatives said.
async fn connect_remote(
    config: &McpServerConfig,
    url: &str,
    timeout: Duration,
    report: bool,
) -> Result<Started, String> {
    let headers = remote::expand_headers(&config.headers, |name| std::env::var(name).ok())?;
    let watch = Arc::new(ToolWatch::new(&config.name));
    let mut client = Retrying::new(&config.name, report)?;
    let oauth = match &config.oauth {
        Some(oauth) => Some(Arc::new(OAuth::new(&config.name, url, oauth, |name| std::env::var(name).ok(), report)?)),
        None => None,
    };
    if let Some(oauth) = &oauth {
        client = client.with_oauth(oauth.clone());
    }
    let transport = remote::transport(url, headers, client);
    let outcome = tokio::time::timeout(timeout, handshake(&config.name, report, &watch, transport)).await;
    match outcome {
        Ok(Ok((service, tools))) => Ok(started(config, service, tools, None, watch)),
        Ok(Err(e)) => Err(refusal(url, &e, oauth.as_deref())),
        Err(_) => Err(format!("{url} did not complete the MCP handshake within {} s", timeout.as_secs_f64())),
    }
}

/// Why a remote handshake failed: the OAuth client's own failure first, else a request for
/// authorization the harness cannot meet, said with what it can do instead.
fn refusal(url: &str, error: &HandshakeError, oauth: Option<&OAuth>) -> String {
    if let Some(why) = oauth.and_then(OAuth::failure) {
        return why;
    }
    let asks = matches!(error, HandshakeError::Init(e) if e.is_authorization_required());
    match (asks, oauth) {
        (true, None) => format!(
            "{url} answered 401 and asks for OAuth authorization; the harness does the client credentials grant of a pre-registered client ([mcp.servers.oauth] client_id, client_secret_env), not the interactive (browser) flows: configure such a client, or give a token in headers (Authorization = \"Bearer ${{TOKEN}}\"), or check the one given"
        ),
        (true, Some(_)) => {
            format!("{url} answered 401 to the OAuth token just granted to client; check the client's registration")
        }
        (false, _) => format!("{error} (at {url})"),
    }
}

/// A child: started, then the handshake over its stdio; a failure says how it exited and
/// ends with the end of its stderr.
async fn connect_child(config: &McpServerConfig, start: &Start, timeout: Duration) -> Result<Started, String> {
    let (pipes, child) = child::spawn(config, start.forward_stderr, start.working_dir.as_deref())
        .map_err(|e| format!("cannot run {:?}: {e}", config.command))?;
    let watch = Arc::new(ToolWatch::new(&config.name));
    let failure = match tokio::time::timeout(
        timeout,
        handshake(&config.name, start.forward_stderr, &watch, (pipes.stdout, pipes.stdin)),
    )
    .await
    {
        Ok(Ok((service, tools))) => return Ok(started(config, service, tools, Some(child), watch)),
        Ok(Err(reason)) => match child.wait_exit(EXIT_GRACE).await {
            Some(exit) => format!("it {exit} during the MCP handshake"),
            None => reason.to_string(),
        },
        Err(_) => {
            format!("it did not complete the MCP handshake within {} s, so it was stopped", timeout.as_secs_f64())
        }
    };
    child.kill();
    let tail = child.stderr_tail(EXIT_GRACE).await;
    Err(match tail.last() {
        Some(line) => format!("{failure}; its stderr ended with: {line:?}"),
        None => failure,
    })
}

impl Connection {
    /// The server's name in the configuration.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// Its tools as offered, and what it has changed since.
    pub(crate) fn watch(&self) -> &ToolWatch {
        &self.watch
    }

    /// How the server's process ended, if it has (a remote server has none: each call tries).
    pub(crate) fn exit(&self) -> Option<String> {
        self.child.as_ref().and_then(ChildWatch::exit)
    }

    /// How the server's process ended, waiting a little for it: `None` for a remote server.
    async fn wait_exit(&self, limit: Duration) -> Option<String> {
        match &self.child {
            Some(child) => child.wait_exit(limit).await,
            None => None,
        }
    }

    /// Calls `tool` with `arguments`; a dead server or a lost connection is `tool_crashed`, a
    /// call over `timeout` is `tool_timeout`, the server refusing the call is `tool_error`, a
    /// tool the server changed or removed since it was offered is `tool_changed` (not called).
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Option<Duration>,
    ) -> Result<CallToolResult, ToolFailure> {
        if let Some(exit) = self.exit() {
            return Err(self.gone(exit));
        }
        let request = async {
            // Listed again first (from the cache, unless the server said its tools changed).
            match self.watch.refresh(&self.peer).await {
                Ok(()) => {}
                Err(ListError::Service(e)) => return Err(self.failure(tool, e, true).await),
                Err(ListError::Cap(why)) => {
                    return Err(ToolFailure {
                        code: "tool_error".to_owned(),
                        message: format!("{why}; the call was not made"),
                    });
                }
            }
            if let Some(refused) = self.watch.refusal(tool) {
                return Err(refused);
            }
            let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
            match self.peer.call_tool(params).await {
                Ok(result) => Ok(result),
                Err(e) => Err(self.failure(tool, e, false).await),
            }
        };
        let Some(limit) = timeout else {
            return request.await;
        };
        tokio::time::timeout(limit, request).await.unwrap_or_else(|_| {
            let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
            Err(ToolFailure {
                code: "tool_timeout".to_owned(),
                message: format!(
                    "MCP server {:?} did not answer {tool:?} within {ms} ms; the call was abandoned",
                    self.server
                ),
            })
        })
    }

    /// The failure of a server that is gone.
    fn gone(&self, exit: String) -> ToolFailure {
        ToolFailure {
            code: "tool_crashed".to_owned(),
            message: format!("MCP server {:?} {exit}; its tools cannot be called any more in this run", self.server),
        }
    }

    /// What a failed request on the way to calling `tool` is: the call itself, or (`listing`)
    /// the listing of the tools that comes before it.
    async fn failure(&self, tool: &str, error: ServiceError, listing: bool) -> ToolFailure {
        let server = &self.server;
        let tool_error = |message: String| ToolFailure { code: "tool_error".to_owned(), message };
        match error {
            ServiceError::TransportSend(e) if self.child.is_none() && retry::never_reached(e.error.as_ref()) => {
                ToolFailure {
                    code: "tool_crashed".to_owned(),
                    message: format!(
                        "MCP server {server:?} could not be reached for the call to {tool:?} ({}), {} retries included; the tool did not run",
                        e.error,
                        retry::RETRIES
                    ),
                }
            }
            ServiceError::TransportSend(e) if self.child.is_none() => ToolFailure {
                code: "tool_crashed".to_owned(),
                message: format!(
                    "the request to MCP server {server:?} for the call to {tool:?} failed ({}); whether the tool ran is unknown, so it was not retried",
                    e.error
                ),
            },
            ServiceError::TransportClosed if self.child.is_none() => ToolFailure {
                code: "tool_crashed".to_owned(),
                message: format!(
                    "the connection to MCP server {server:?} failed during the call to {tool:?} ({error}); whether the tool ran is unknown"
                ),
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let exit = self.wait_exit(EXIT_GRACE).await;
                self.gone(exit.unwrap_or_else(|| "closed the connection".to_owned()))
            }
            // Fail closed: a tool not confirmed unchanged is not called.
            e if listing => tool_error(format!(
                "MCP server {server:?} could not list its tools again to confirm that {tool:?} is unchanged ({e}); the call was not made"
            )),
            ServiceError::McpError(e) => {
                tool_error(format!("MCP server {server:?} refused the call to {tool:?}: {} ({})", e.message, e.code.0))
            }
            e => tool_error(format!("the call to {tool:?} on MCP server {server:?} failed: {e}")),
        }
    }

    /// Ends the session as the MCP spec asks: close the server's stdin (or, remote, end the
    /// HTTP session), give it time to exit, then kill it.
    pub(crate) async fn close(&self) {
        let service = self.service.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(CLOSE_GRACE).await;
        }
        let Some(child) = &self.child else { return };
        if child.wait_exit(CLOSE_GRACE).await.is_none() {
            child.kill();
            child.wait_exit(CLOSE_GRACE).await;
        }
    }
}
