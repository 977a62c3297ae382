//! The tools a command offers, wired once for every command: plugins discovered and
//! registered, the configured MCP servers started and their tools added, the OTLP exporter
//! started. Dropping the value closes the servers and flushes the exporter, so that every way
//! out of a command (an early `?` included) tears them down.

use harness_core::{ToolRegistry, printable};
use harness_loader::Discovery;
use harness_mcp::{McpSources, SourceOptions};
use harness_trace::Otlp;

use crate::Result;
use crate::discovery::load_plugins_with;
use crate::error::CliError;
use crate::provider::otlp_export;
use crate::settings::ToolSettings;

/// What a command asks to have wired.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wants<'a> {
    /// Say on stderr which plugin files were skipped and why, and forward MCP servers' stderr.
    pub(crate) report: bool,
    /// Open the plugins the plugin cache answers for at their first call (`harness run`).
    pub(crate) open_lazily: bool,
    /// Start the configured MCP servers and offer their tools after the plugins'.
    pub(crate) mcp: bool,
    /// With `mcp`, start only the servers of these names (`harness replay`: those a replayed
    /// call may reach); `None`: every one.
    pub(crate) mcp_only: Option<&'a [String]>,
    /// Export spans over OTLP, to `--otlp`'s URL when given (the standard variables may ask too).
    pub(crate) otlp: Option<Option<&'a str>>,
}

/// Every tool a command offers, and what serves them; torn down on drop.
pub(crate) struct Tools {
    /// What plugin discovery found: for listings, the lock, and failures found late.
    pub(crate) found: Discovery,
    /// `finish`, the plugins' tools, then the MCP servers'.
    pub(crate) registry: ToolRegistry,
    mcp: Option<McpSources>,
    otlp: Option<Otlp>,
}

impl Tools {
    /// Discovers and registers the plugins, then starts what `wants` asks for.
    pub(crate) fn wire(settings: &ToolSettings, wants: Wants<'_>) -> Result<Self> {
        let found = load_plugins_with(settings, wants.report, wants.open_lazily)?;
        let mut registry = ToolRegistry::new();
        for problem in found.register_tools(&mut registry) {
            crate::log::notice!("harness: warning: {problem}");
        }
        // Built before the servers start, so that a server or exporter that fails to start
        // still has the ones started before it closed by the drop.
        let mut tools = Self { found, registry, mcp: None, otlp: None };
        if wants.mcp {
            tools.mcp = Some(add_mcp_tools(settings, &mut tools.registry, wants)?);
        }
        if let Some(flag) = wants.otlp {
            tools.otlp = otlp_export(flag)?;
        }
        Ok(tools)
    }

    /// The MCP servers started, when the command asked for them.
    pub(crate) fn mcp(&self) -> Option<&McpSources> {
        self.mcp.as_ref()
    }

    /// The OTLP exporter, when export was asked for.
    pub(crate) fn otlp(&self) -> Option<&Otlp> {
        self.otlp.as_ref()
    }

    /// Takes the registry, for a command that hands it to what serves the tools (a batch, an
    /// MCP server); the servers behind it stay up until the drop.
    pub(crate) fn take_registry(&mut self) -> ToolRegistry {
        std::mem::take(&mut self.registry)
    }
}

impl Drop for Tools {
    fn drop(&mut self) {
        if let Some(mcp) = self.mcp.take() {
            mcp.shutdown();
        }
        if let Some(otlp) = self.otlp.take() {
            otlp.shutdown();
        }
    }
}

/// Starts the configured MCP servers and registers their tools after whatever `registry` holds
/// (the plugins'). A server that does not start is not an error: with `report`, it is a warning
/// on stderr, and servers' own stderr is forwarded. Call `shutdown` on the result when done.
fn add_mcp_tools(settings: &ToolSettings, registry: &mut ToolRegistry, wants: Wants<'_>) -> Result<McpSources> {
    let report = wants.report;
    let config_name = &settings.project.name;
    let servers: Vec<_> = settings
        .mcp_servers
        .iter()
        .filter(|server| wants.mcp_only.is_none_or(|only| only.contains(&server.name)))
        .cloned()
        .collect();
    let defaults = SourceOptions::default();
    let options = SourceOptions {
        call_timeout: settings.tool_timeout,
        max_result_bytes: settings.result_bytes.unwrap_or(defaults.max_result_bytes),
        forward_stderr: report,
        // The servers start in the file's directory: a relative argument (`server.py`) is the file's.
        working_dir: settings.project.base_dir.clone(),
        ..defaults
    };
    let mut sources = McpSources::start(&servers, options).map_err(|e| match e {
        harness_mcp::McpError::InvalidServer { .. } => CliError::Usage(format!("{config_name}: {e}")),
        other => CliError::Failure(other.to_string()),
    })?;
    for server in sources.servers().iter().filter(|_| report) {
        if let Some(why) = server.failure() {
            // The reason ends with the server's own stderr: shown, never obeyed.
            crate::log::notice!(
                "harness: warning: MCP server {:?} did not start: {}; its tools are not offered",
                server.config().name,
                printable(&why)
            );
        }
    }
    for problem in sources.register_tools(registry).into_iter().filter(|_| report) {
        crate::log::notice!("harness: warning: {problem}");
    }
    Ok(sources)
}
