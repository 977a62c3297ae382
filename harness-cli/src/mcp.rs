//! `harness mcp serve`, and how `harness plugins list` shows the `[[mcp.servers]]` of the
//! configuration (started as sources of tools with the rest of the wiring, in `tools.rs`).
//! The protocol lives in `harness-mcp`.

use std::fmt::Write as _;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use harness_core::{Decision, TraceSink, TraceWriter, printable};
use harness_mcp::{HttpOptions, McpSources, McpToolState, ServeOptions, ToolServer};
use serde_json::{Value, json};

use crate::Result;
use crate::discovery::PluginArgs;
use crate::error::CliError;
use crate::settings::ServeSettings;
use crate::tools::{Tools, Wants};

/// `harness mcp ...`
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Serve the loaded plugins' tools to an MCP client over stdio (see docs/mcp.md).
    ///
    /// Every call is validated against the tool's schema and run as a step would be; stdout
    /// carries the protocol alone, diagnostics go to stderr. Ends when the client closes stdin.
    Serve(ServeArgs),
}

/// Arguments of `harness mcp serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Write one JSON object per call to FILE, as a run's trace does per step.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// Export an execute_tool span per call over OTLP/HTTP to the collector at URL (see docs/traces.md);
    /// OTEL_EXPORTER_OTLP_ENDPOINT does the same.
    #[arg(long, value_name = "URL")]
    pub(crate) otlp: Option<String>,
    /// Serve over Streamable HTTP on ADDR (default 127.0.0.1:8765) instead of stdio; every
    /// request needs the bearer token.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765")]
    pub(crate) http: Option<String>,
    /// With --http: the bearer token is this environment variable's value (else a random one,
    /// printed once on stderr).
    #[arg(long, value_name = "NAME", requires = "http")]
    pub(crate) token_env: Option<String>,
    /// With --http: keep no session between requests, so that replicas can sit behind any
    /// load balancer.
    #[arg(long, requires = "http")]
    pub(crate) stateless: bool,
    /// With --http: a browser origin allowed besides this machine's (repeatable).
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub(crate) allow_origin: Vec<String>,
    /// Which calls run: the config's `[policy]`, then these flags. No one can answer an `ask`
    /// over MCP, so only what is allowed runs; the rest is refused with call_denied.
    #[command(flatten)]
    pub(crate) policy: crate::approve::PolicyArgs,
    /// With --http: connections open at once (lowered to leave room in the descriptor limit);
    /// over it, one that never showed the token is closed to make room, or else 503.
    #[arg(long, value_name = "N", requires = "http", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: u32,
    /// With --http: MCP sessions open at once; over it, `initialize` is answered 503.
    #[arg(long, value_name = "N", requires = "http", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_sessions: u32,
    /// With --http: seconds a client has to send a request's head (an idle connection is
    /// closed after as long), and then its body.
    #[arg(long, value_name = "SECS", requires = "http", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) request_timeout: u64,
    #[command(flatten)]
    pub(crate) plugins: PluginArgs,
}

/// Runs `harness mcp ...` and returns the exit code.
pub(crate) fn mcp(command: McpCommand) -> Result<u8> {
    match command {
        McpCommand::Serve(args) => crate::settings::ServeSettings::resolve(args).and_then(serve),
    }
}

/// `harness mcp serve` with its resolved settings.
fn serve(resolved: ServeSettings) -> Result<u8> {
    let ServeSettings { trace: trace_path, otlp, http, policy, tools: settings } = resolved;
    // Only the plugins' tools are served: the configured MCP servers are a run's sources.
    let mut tools = Tools::wire(&settings, Wants { report: true, otlp: Some(otlp.as_deref()), ..Wants::default() })?;
    let otlp = tools.otlp();
    let mut sinks = harness_trace::Tee::new();
    if let Some(path) = &trace_path {
        let file = harness_core::no_follow::create_file(path)
            .map_err(|e| CliError::Usage(format!("cannot create trace file {}: {e}", path.display())))?;
        sinks.push(TraceWriter::new(BufWriter::new(file)));
    }
    if let Some(otlp) = otlp {
        sinks.push(otlp.sink());
    }
    let trace: Option<Box<dyn TraceSink>> = (trace_path.is_some() || otlp.is_some()).then(|| Box::new(sinks) as _);
    let options = ServeOptions { max_arguments_bytes: settings.max_arguments_bytes, trace, policy };
    let registry = tools.take_registry();
    let count = registry.definitions().len().saturating_sub(1);
    let server = ToolServer::new(registry, options);
    crate::log::notice!("harness: {}", served_text(&server.decisions()));
    // Many HTTP clients are served at once; one stdio client needs no more than one thread.
    let mut builder = if http.is_some() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime =
        builder.enable_all().build().map_err(|e| CliError::Failure(format!("cannot start the async runtime: {e}")))?;
    let served = match http {
        Some(http) => {
            let addr = &http.addr;
            let (listener, token) = http_setup(addr, http.token_env.as_deref())?;
            let mut options = HttpOptions::new(token);
            options.stateless = http.stateless;
            options.allowed_origins = http.allow_origin;
            options.max_connections = http.max_connections;
            options.max_sessions = http.max_sessions;
            options.request_timeout = http.request_timeout;
            let local = listener.local_addr().map_or_else(|_| addr.clone(), |a| a.to_string());
            crate::log::notice!(
                "harness: serving {count} tools over MCP (Streamable HTTP) at http://{local}/mcp; SIGTERM drains and stops"
            );
            runtime.block_on(server.serve_http(listener, options))
        }
        None => {
            crate::log::notice!(
                "harness: serving {count} tools over MCP on stdio (diagnostics on stderr; close stdin to stop)"
            );
            runtime.block_on(server.serve_stdio())
        }
    };
    // A blocked read of stdin, or an abandoned in-process call, must not keep the process alive.
    runtime.shutdown_background();
    drop(tools);
    served.map(|()| 0).map_err(|e| CliError::Failure(e.to_string()))
}

/// What runs without approval and what is refused, by the policy, for the start line.
fn served_text(decisions: &[(String, Decision)]) -> String {
    let names = |wanted: fn(&Decision) -> bool| {
        let names: Vec<String> = decisions.iter().filter(|(_, d)| wanted(d)).map(|(k, _)| printable(k)).collect();
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    };
    let refused = decisions.iter().any(|(_, d)| *d != Decision::Allow);
    let fix = if refused { " (no one can answer over MCP: --allow TOOL|CLASS serves one)" } else { "" };
    format!(
        "served without approval: {}; refused, call_denied by the policy: {}{fix}",
        names(|d| *d == Decision::Allow),
        names(|d| *d != Decision::Allow)
    )
}

/// The listener on `addr` and the token: from `--token-env`, else random and printed once.
fn http_setup(addr: &str, token_env: Option<&str>) -> Result<(std::net::TcpListener, String)> {
    let token = match token_env {
        Some(name) => std::env::var(name).ok().filter(|t| !t.is_empty()).ok_or_else(|| {
            CliError::Usage(format!("--token-env {name}: the variable is not set or empty; export the token in it"))
        })?,
        None => {
            let token = random_token()?;
            eprintln!("harness: bearer token for this server (shown once): {token}");
            token
        }
    };
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| CliError::Usage(format!("--http {addr}: cannot listen there: {e}")))?;
    Ok((listener, token))
}

/// 32 random bytes from the kernel, as hex.
fn random_token() -> Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).map_err(|e| {
        CliError::Failure(format!("cannot read /dev/urandom for a token: {e}; give one with --token-env"))
    })?;
    Ok(bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    }))
}

fn state_text(state: &McpToolState) -> String {
    match state {
        McpToolState::Listed => "listed".to_owned(),
        McpToolState::Offered { name } => format!("offered as {name}"),
        McpToolState::Refused { why } => format!("not offered: {why}"),
    }
}

/// The servers for `harness plugins list`, after the plugins.
pub(crate) fn servers_text(out: &mut String, sources: &McpSources) {
    for server in sources.servers() {
        let config = server.config();
        let mut info = server.server_info().map(|(n, v)| format!(" ({n} {v})")).unwrap_or_default();
        if let Some(version) = server.protocol_version() {
            info.push_str(&format!(" protocol {version}"));
        }
        // Writing to a String cannot fail.
        let _ = writeln!(out, "mcp server {}{}  {}", config.name, printable(&info), printable(&config.endpoint()));
        if let Some(why) = server.failure() {
            let _ = writeln!(out, "    not started: {}", printable(&why));
        }
        for tool in server.tools() {
            let state = match &tool.state {
                McpToolState::Offered { name } if *name == tool.name => "offered".to_owned(),
                other => state_text(other),
            };
            // Effects are the server's business: MCP does not declare them.
            // A remote server names its tools: shown, never obeyed.
            let _ = writeln!(out, "    {:<20} {:<8} {}", printable(&tool.name), "-", printable(&state));
        }
    }
}

/// The servers that started, for the trace's first line: each one's protocol version.
pub(crate) fn peers(sources: &McpSources) -> Vec<harness_core::McpPeer> {
    sources
        .servers()
        .iter()
        .filter(|server| server.failure().is_none())
        .map(|server| harness_core::McpPeer {
            name: server.config().name.clone(),
            protocol_version: server.protocol_version().map(str::to_owned),
        })
        .collect()
}

/// The servers for `harness plugins list --json`.
pub(crate) fn servers_json(sources: &McpSources) -> Value {
    let servers: Vec<Value> = sources
        .servers()
        .iter()
        .map(|server| {
            let config = server.config();
            let tools: Vec<Value> = server
                .tools()
                .iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "state": t.state }))
                .collect();
            json!({
                "name": config.name,
                "command": config.command,
                "args": config.args,
                "url": config.url,
                // Names only: the values are where the secrets are.
                "headers": config.headers.keys().collect::<Vec<_>>(),
                "oauth_client": config.oauth.as_ref().map(|o| &o.client_id),
                "server_info": server.server_info().map(|(name, version)| json!({ "name": name, "version": version })),
                "protocol_version": server.protocol_version(),
                "failure": server.failure(),
                "tools": tools,
            })
        })
        .collect();
    Value::Array(servers)
}
