//! A tool registry served to any MCP client: `tools/list` from the registry, `tools/call`
//! held to the operator's approval policy, validated and dispatched by
//! `harness_core::call_tool`, each call one trace line.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use harness_core::{
    ApprovalPolicy, Decision, ErrorCode, FINISH, HarnessError, StepStatus, ToolRegistry, ToolSource, TraceEntry,
    TraceSink, call_tool,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use crate::error::McpError;
use crate::withheld::{value_without_paths, without_paths};

/// How calls are limited and recorded.
pub struct ServeOptions {
    /// Largest arguments of one call, in bytes: over it, `arguments_too_large`, and the tool does not run.
    pub max_arguments_bytes: usize,
    /// Where each call's trace line goes, when anywhere.
    pub trace: Option<Box<dyn TraceSink>>,
    /// Which calls run. No one can answer an `ask` over MCP, so a tool the policy asks about
    /// is refused like a denied one (`call_denied`): only `allow` runs.
    pub policy: ApprovalPolicy,
}

impl Default for ServeOptions {
    /// The default policy: `pure` and `reads` run; `writes` and `network` are refused.
    fn default() -> Self {
        Self { max_arguments_bytes: 256 << 10, trace: None, policy: ApprovalPolicy::default() }
    }
}

/// What the session and its driver share: the stop signal after a trace failure.
#[derive(Default)]
pub(crate) struct Stop {
    pub(crate) notify: Notify,
    pub(crate) trace_error: Mutex<Option<String>>,
}

/// An MCP server offering every tool of a registry but `finish`. Clones share everything (the
/// registry, the trace, the call count): over HTTP, each session gets one.
#[derive(Clone)]
pub struct ToolServer {
    registry: Arc<ToolRegistry>,
    tools: Arc<Vec<Tool>>,
    max_arguments_bytes: usize,
    trace: Option<Arc<Mutex<Box<dyn TraceSink>>>>,
    policy: Arc<ApprovalPolicy>,
    calls: Arc<AtomicU32>,
    pub(crate) stop: Arc<Stop>,
}

impl ToolServer {
    /// A server for `registry`'s tools.
    pub fn new(registry: ToolRegistry, options: ServeOptions) -> Self {
        let tools = registry
            .definitions()
            .iter()
            .filter(|d| d.name != FINISH)
            .map(|d| {
                // Registration compiled the schema, so it is an object.
                let schema = d.parameters.as_object().cloned().unwrap_or_default();
                Tool::new(d.name.clone(), d.description.clone(), Arc::new(schema))
            })
            .collect();
        Self {
            registry: Arc::new(registry),
            tools: Arc::new(tools),
            max_arguments_bytes: options.max_arguments_bytes,
            trace: options.trace.map(|t| Arc::new(Mutex::new(t))),
            policy: Arc::new(options.policy),
            calls: Arc::new(AtomicU32::new(0)),
            stop: Arc::new(Stop::default()),
        }
    }

    /// The tools served, each with what the policy says of it (`allow`: runs without
    /// approval; `ask` or `deny`: refused), for the start line.
    pub fn decisions(&self) -> Vec<(String, Decision)> {
        let decide = |t: &Tool| {
            let registered = self.registry.get(&t.name);
            let decision =
                registered.map_or(Decision::Deny, |r| self.policy.decide(&r.policy_key(), r.policy_effect()));
            (registered.map_or_else(|| t.name.to_string(), |r| r.policy_key()), decision)
        };
        self.tools.iter().map(decide).collect()
    }

    /// Refuses a call the policy does not allow outright: `deny` says so; `ask` cannot be
    /// answered over MCP, so it is refused with what the operator can do about it.
    fn refused(&self, tool: &str) -> Option<HarnessError> {
        let registered = self.registry.get(tool)?;
        let (key, effect) = (registered.policy_key(), registered.policy_effect());
        let why = match self.policy.decide(&key, effect) {
            Decision::Allow => return None,
            Decision::Deny => "the operator's policy denies it".to_owned(),
            Decision::Ask => format!(
                "the operator's policy asks before {key} ({}), and no one can answer over MCP; the operator can serve it with --allow {key} (or --allow {})",
                effect.as_str(),
                effect.as_str()
            ),
        };
        Some(HarnessError::new(
            ErrorCode::CallDenied,
            format!("the call to {tool:?} was not run: {why}"),
            json!({ "tool": tool, "effect": effect, "reason": null }),
        ))
    }

    /// Serves one MCP session on `read` and `write` until the client closes it.
    pub async fn serve_on<R, W>(self, read: R, write: W) -> Result<(), McpError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let stop = self.stop.clone();
        let service = ServiceExt::serve(self, (read, write))
            .await
            .map_err(|e| McpError::Session(format!("no MCP handshake with a client ({e})")))?;
        let cancel = service.cancellation_token();
        let stopping = stop.clone();
        let stopper = tokio::spawn(async move {
            stopping.notify.notified().await;
            cancel.cancel();
        });
        let quit = service.waiting().await;
        stopper.abort();
        if let Some(e) = stop.trace_error.lock().unwrap_or_else(PoisonError::into_inner).take() {
            return Err(McpError::Trace(e));
        }
        quit.map(|_| ()).map_err(|e| McpError::Session(e.to_string()))
    }

    /// Serves one MCP session on this process's stdin and stdout. On Unix, stdout is kept
    /// for the protocol alone: file descriptor 1 is pointed at stderr first, so that whatever
    /// an in-process plugin prints can never corrupt a message.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        let out = protocol_stdout()?;
        self.serve_on(tokio::io::stdin(), out).await
    }

    /// Runs one call as a step would, and records it with the session it came in on.
    async fn dispatch(&self, tool: &str, arguments: Value, caller: &Caller) -> Result<Value, HarnessError> {
        let started = Instant::now();
        let bytes = serde_json::to_vec(&arguments).map_or(0, |v| v.len());
        let (kept, outcome) = if let Some(refused) = self.refused(tool) {
            let kept = if self.trace.is_some() { arguments } else { Value::Null };
            (kept, Err(refused))
        } else if bytes > self.max_arguments_bytes {
            let error = HarnessError::new(
                ErrorCode::ArgumentsTooLarge,
                format!(
                    "the arguments of the call to {tool:?} are {bytes} bytes, over the limit of {}",
                    self.max_arguments_bytes
                ),
                json!({ "tool": tool, "bytes": bytes, "limit": self.max_arguments_bytes }),
            );
            // As in a run, oversized arguments are not kept in the trace either.
            (json!({ "omitted_bytes": bytes }), Err(error))
        } else {
            let kept = if self.trace.is_some() { arguments.clone() } else { Value::Null };
            (kept, call_tool(&self.registry, tool, arguments).await)
        };
        let step = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(trace) = &self.trace else {
            return outcome;
        };
        let source = self.registry.get(tool).map(|t| t.definition.source.clone());
        let (plugin, plugin_version) = match &source {
            Some(ToolSource::Plugin { name, version }) => (Some(name.as_str()), Some(version.as_str())),
            _ => (None, None),
        };
        let status = match &outcome {
            Ok(_) => StepStatus::Ok,
            Err(e)
                if matches!(
                    e.code,
                    ErrorCode::UnknownTool
                        | ErrorCode::InvalidArguments
                        | ErrorCode::ArgumentsTooLarge
                        | ErrorCode::CallDenied
                ) =>
            {
                StepStatus::Rejected
            }
            Err(_) => StepStatus::Error,
        };
        let duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let entry = TraceEntry {
            tool: Some(tool),
            arguments: Some(&kept),
            result: outcome.as_ref().ok(),
            error: outcome.as_ref().err(),
            plugin,
            plugin_version,
            mcp_session: caller.session.as_deref(),
            mcp_protocol: caller.protocol.as_deref(),
            ..TraceEntry::new(step, status, "all", duration_us)
        };
        let recorded = trace.lock().unwrap_or_else(PoisonError::into_inner).record(&entry);
        if let Err(e) = recorded {
            *self.stop.trace_error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
            self.stop.notify.notify_one();
            return Err(HarnessError::new(
                ErrorCode::TraceError,
                format!(
                    "the trace could not be written ({e}); the server is stopping rather than serve calls unrecorded"
                ),
                json!({ "tool": tool }),
            ));
        }
        outcome
    }
}

/// Who made a call: the HTTP session (none over stdio, or when stateless) and the protocol
/// version the client speaks.
struct Caller {
    session: Option<String>,
    protocol: Option<String>,
}

impl Caller {
    fn of(context: &RequestContext<RoleServer>) -> Self {
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Self { session, protocol: context.protocol_version().map(|v| v.to_string()) }
    }
}

/// A tool's result as MCP content: its JSON text, and the value itself as structured content
/// when it is an object (MCP's structured content must be one).
fn success(value: Value) -> CallToolResult {
    if value.is_object() {
        CallToolResult::structured(value)
    } else {
        CallToolResult::success(vec![ContentBlock::text(value.to_string())])
    }
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("harness", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools of the harness's plugins. Every call is validated against the tool's JSON Schema before it runs; a failed call's content is the error object {code, message, details}.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map_or_else(|| json!({}), Value::Object);
        // Over HTTP, the client may be on another machine: it is told no path of this one.
        let network = context.extensions.get::<axum::http::request::Parts>().is_some();
        let shown = |e: &HarnessError| match network {
            true => (without_paths(&e.message), value_without_paths(e.to_value())),
            false => (e.message.clone(), e.to_value()),
        };
        match self.dispatch(&request.name, arguments, &Caller::of(&context)).await {
            Ok(value) => Ok(success(value).into()),
            // MCP answers an unknown tool with a protocol error; the error object rides along.
            Err(e) if e.code == ErrorCode::UnknownTool => {
                let (message, error) = shown(&e);
                Err(ErrorData::invalid_params(message, Some(error)))
            }
            Err(e) => Ok(CallToolResult::structured_error(shown(&e).1).into()),
        }
    }
}

/// Takes stdout for the protocol and points file descriptor 1 at stderr.
#[cfg(unix)]
fn protocol_stdout() -> Result<tokio::fs::File, McpError> {
    use std::os::fd::FromRawFd;
    // SAFETY: dup and dup2 on the process's own standard descriptors; the duplicate is owned
    // by the returned File alone.
    let file = unsafe {
        let protocol = libc::dup(1);
        if protocol < 0 {
            return Err(McpError::Stdout(std::io::Error::last_os_error()));
        }
        if libc::dup2(2, 1) < 0 {
            let e = std::io::Error::last_os_error();
            libc::close(protocol);
            return Err(McpError::Stdout(e));
        }
        std::fs::File::from_raw_fd(protocol)
    };
    Ok(tokio::fs::File::from_std(file))
}

/// Standard output as it is, where descriptors cannot be moved.
#[cfg(not(unix))]
fn protocol_stdout() -> Result<tokio::io::Stdout, McpError> {
    Ok(tokio::io::stdout())
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::{ToolDefinition, ToolFailure, ToolHandler};
    use rmcp::service::RunningService;
    use rmcp::{RoleClient, ServiceError};

    struct Echo;
    impl ToolHandler for Echo {
        fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolFailure> {
            match tool {
                "echo" => Ok(arguments["value"].clone()),
                _ => Err(ToolFailure { code: "tool_error".into(), message: "it broke".into() }),
            }
        }
    }

    /// A trace kept where the test can read it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<Value>>>);
    impl TraceSink for Shared {
        fn record(&mut self, entry: &TraceEntry<'_>) -> std::io::Result<()> {
            self.0.lock().unwrap().push(serde_json::to_value(entry)?);
            Ok(())
        }
    }

    struct Broken;
    impl TraceSink for Broken {
        fn record(&mut self, _: &TraceEntry<'_>) -> std::io::Result<()> {
            Err(std::io::Error::other("disk full"))
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        for name in ["echo", "broken"] {
            let definition = ToolDefinition {
                name: name.into(),
                description: format!("{name} a value"),
                parameters: json!({"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}),
                examples: vec![],
                source: ToolSource::Plugin { name: "test".into(), version: "1.2.3".into() },
            };
            r.register(harness_core::ToolSpec::new(definition, Arc::new(Echo))).unwrap();
        }
        r
    }

    async fn connect(
        options: ServeOptions,
    ) -> (RunningService<RoleClient, ()>, tokio::task::JoinHandle<Result<(), McpError>>) {
        let (client_side, server_side) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_side);
        let server = tokio::spawn(ToolServer::new(registry(), options).serve_on(read, write));
        let client = ().serve(client_side).await.unwrap();
        (client, server)
    }

    /// Options whose policy runs every call.
    fn open() -> ServeOptions {
        ServeOptions { policy: ApprovalPolicy::allow_all(), ..ServeOptions::default() }
    }

    fn call(name: &str, arguments: Value) -> CallToolRequestParams {
        CallToolRequestParams::new(name.to_owned()).with_arguments(arguments.as_object().unwrap().clone())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tools_are_listed_validated_dispatched_and_traced() {
        let trace = Shared::default();
        let options = ServeOptions { trace: Some(Box::new(trace.clone())), ..open() };
        let (client, server) = connect(options).await;

        let tools = client.peer().list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["echo", "broken"]);
        assert_eq!(tools[0].input_schema["required"], json!(["value"]));

        let ok = client.call_tool(call("echo", json!({"value": 42}))).await.unwrap();
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.content[0].as_text().unwrap().text, "42");

        let invalid = client.call_tool(call("echo", json!({"value": "x", "extra": 1}))).await.unwrap();
        assert_eq!(invalid.is_error, Some(true));
        let error: Value = serde_json::from_str(&invalid.content[0].as_text().unwrap().text).unwrap();
        assert_eq!(error["code"], "invalid_arguments");
        assert_eq!(error["details"]["violations"][0]["pointer"], "/value");
        assert_eq!(invalid.structured_content, Some(error));

        let failed = client.call_tool(call("broken", json!({"value": 1}))).await.unwrap();
        assert_eq!(failed.structured_content.unwrap()["code"], "tool_error");

        let unknown = client.call_tool(call("finish", json!({"answer": 1}))).await.unwrap_err();
        let ServiceError::McpError(e) = unknown else { panic!("{unknown:?}") };
        assert_eq!(e.data.unwrap()["code"], "unknown_tool");

        client.cancel().await.unwrap();
        server.await.unwrap().unwrap();
        let lines = trace.0.lock().unwrap().clone();
        let statuses: Vec<&str> = lines.iter().map(|l| l["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["ok", "rejected", "error", "rejected"]);
        assert_eq!(lines[0]["step"], 1);
        assert_eq!(lines[0]["plugin_version"], "1.2.3");
        assert_eq!(lines[0]["result"], 42);
        assert_eq!(lines[0]["mcp_protocol"], rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE.to_string());
        assert_eq!(lines[3]["tool"], "finish");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oversized_arguments_never_run() {
        let trace = Shared::default();
        let options = ServeOptions { max_arguments_bytes: 16, trace: Some(Box::new(trace.clone())), ..open() };
        let (client, server) = connect(options).await;
        let big = client.call_tool(call("echo", json!({"value": 1, "pad": "x".repeat(64)}))).await.unwrap();
        assert_eq!(big.structured_content.unwrap()["code"], "arguments_too_large");
        client.cancel().await.unwrap();
        server.await.unwrap().unwrap();
        assert_eq!(trace.0.lock().unwrap()[0]["arguments"], json!({"omitted_bytes": 84}));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_the_policy_does_not_allow_are_refused_as_call_denied() {
        let mut policy = ApprovalPolicy::default();
        policy.set_tool("test.broken", Decision::Deny);
        let (client, server) = connect(ServeOptions { policy, ..ServeOptions::default() }).await;
        // Undeclared effects are `network`, which the default policy asks about: no one can answer.
        let asked = client.call_tool(call("echo", json!({"value": 1}))).await.unwrap();
        let error = asked.structured_content.unwrap();
        assert_eq!(error["code"], "call_denied");
        assert!(error["message"].as_str().unwrap().contains("--allow test.echo"), "{error}");
        let denied = client.call_tool(call("broken", json!({"value": 1}))).await.unwrap();
        let error = denied.structured_content.unwrap();
        assert!(error["message"].as_str().unwrap().contains("policy denies it"), "{error}");
        client.cancel().await.unwrap();
        server.await.unwrap().unwrap();
        let mut policy = ApprovalPolicy::default();
        policy.set_tool("test.echo", Decision::Allow);
        let decisions = ToolServer::new(registry(), ServeOptions { policy, ..ServeOptions::default() }).decisions();
        assert_eq!(decisions, [("test.echo".to_owned(), Decision::Allow), ("test.broken".to_owned(), Decision::Ask)]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_trace_that_cannot_be_written_stops_the_server() {
        let options = ServeOptions { trace: Some(Box::new(Broken)), ..open() };
        let (client, server) = connect(options).await;
        let answer = client.call_tool(call("echo", json!({"value": 1}))).await;
        if let Ok(result) = answer {
            assert_eq!(result.structured_content.unwrap()["code"], "trace_error");
        }
        let e = server.await.unwrap().unwrap_err();
        assert!(matches!(e, McpError::Trace(_)), "{e}");
    }
}
