//! One live MCP session with a server child, and the runtime that drives every session.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use harness_core::ToolFailure;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, JsonObject,
};
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};

use crate::child::{self, ChildWatch};
use crate::config::McpServerConfig;

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

/// The harness as an MCP client.
fn client_config() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("harness", env!("CARGO_PKG_VERSION")))
}

/// A started server: its session, what it said of itself, and its tools as listed.
pub(crate) struct Started {
    pub(crate) connection: Connection,
    pub(crate) server_info: Option<(String, String)>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
}

/// One live session with a server child.
pub(crate) struct Connection {
    server: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    child: ChildWatch,
}

/// Starts `config`'s server, completes the handshake and lists its tools, all within
/// `timeout`; on failure, why, in one line, with how it exited and the end of its stderr.
pub(crate) async fn connect(
    config: &McpServerConfig,
    timeout: Duration,
    forward_stderr: bool,
) -> Result<Started, String> {
    let (pipes, child) =
        child::spawn(config, forward_stderr).map_err(|e| format!("cannot run {:?}: {e}", config.command))?;
    let handshake = async {
        let service = client_config()
            .serve((pipes.stdout, pipes.stdin))
            .await
            .map_err(|e| format!("the MCP handshake failed: {e}"))?;
        let tools = service.peer().list_all_tools().await.map_err(|e| format!("listing its tools failed: {e}"))?;
        Ok::<_, String>((service, tools))
    };
    let failure = match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok((service, tools))) => {
            let server_info = service
                .peer()
                .peer_info()
                .and_then(|i| i.server_info.as_ref().map(|s| (s.name.clone(), s.version.clone())));
            let peer = service.peer().clone();
            let connection =
                Connection { server: config.name.clone(), peer, service: Mutex::new(Some(service)), child };
            return Ok(Started { connection, server_info, tools });
        }
        Ok(Err(reason)) => match child.wait_exit(EXIT_GRACE).await {
            Some(exit) => format!("it {exit} during the MCP handshake"),
            None => reason,
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

    /// How the server's process ended, if it has.
    pub(crate) fn exit(&self) -> Option<String> {
        self.child.exit()
    }

    /// Calls `tool` with `arguments`; a dead server or a lost connection is `tool_crashed`, a
    /// call over `timeout` is `tool_timeout`, the server refusing the call is `tool_error`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Option<Duration>,
    ) -> Result<CallToolResult, ToolFailure> {
        let server = &self.server;
        let gone = |exit: String| ToolFailure {
            code: "tool_crashed".to_owned(),
            message: format!("MCP server {server:?} {exit}; its tools cannot be called any more in this run"),
        };
        if let Some(exit) = self.exit() {
            return Err(gone(exit));
        }
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let request = self.peer.call_tool(params);
        let answer = match timeout {
            None => request.await,
            Some(limit) => match tokio::time::timeout(limit, request).await {
                Ok(answer) => answer,
                Err(_) => {
                    let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
                    return Err(ToolFailure {
                        code: "tool_timeout".to_owned(),
                        message: format!(
                            "MCP server {server:?} did not answer {tool:?} within {ms} ms; the call was abandoned"
                        ),
                    });
                }
            },
        };
        match answer {
            Ok(result) => Ok(result),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                let exit = self.child.wait_exit(EXIT_GRACE).await;
                Err(gone(exit.unwrap_or_else(|| "closed the connection".to_owned())))
            }
            Err(ServiceError::McpError(e)) => Err(ToolFailure {
                code: "tool_error".to_owned(),
                message: format!("MCP server {server:?} refused the call to {tool:?}: {} ({})", e.message, e.code.0),
            }),
            Err(e) => Err(ToolFailure {
                code: "tool_error".to_owned(),
                message: format!("the call to {tool:?} on MCP server {server:?} failed: {e}"),
            }),
        }
    }

    /// Ends the session as the MCP spec asks: close the server's stdin, give it time to exit,
    /// then kill it.
    pub(crate) async fn close(&self) {
        let service = self.service.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(CLOSE_GRACE).await;
        }
        if self.child.wait_exit(CLOSE_GRACE).await.is_none() {
            self.child.kill();
            self.child.wait_exit(CLOSE_GRACE).await;
        }
    }
}
