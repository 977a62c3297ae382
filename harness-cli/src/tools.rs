//! The tools a command offers, wired once for every command: plugins discovered and
//! registered, the configured MCP servers started and their tools added, the OTLP exporter
//! started. Dropping the value closes the servers and flushes the exporter, so that every way
//! out of a command (an early `?` included) tears them down.

use harness_core::ToolRegistry;
use harness_loader::Discovery;
use harness_mcp::McpSources;
use harness_trace::Otlp;

use crate::Result;
use crate::config::LoadedConfig;
use crate::setup::{PluginArgs, load_plugins_with};
use crate::wiring::otlp_export;

/// What a command asks to have wired.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wants<'a> {
    /// Say on stderr which plugin files were skipped and why, and forward MCP servers' stderr.
    pub(crate) report: bool,
    /// Open the plugins the plugin cache answers for at their first call (`harness run`).
    pub(crate) open_lazily: bool,
    /// Start the configured MCP servers and offer their tools after the plugins'.
    pub(crate) mcp: bool,
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
    pub(crate) fn wire(args: &PluginArgs, config: &LoadedConfig, wants: Wants<'_>) -> Result<Self> {
        let found = load_plugins_with(args, config, wants.report, wants.open_lazily)?;
        let mut registry = ToolRegistry::new();
        for problem in found.register_tools(&mut registry) {
            eprintln!("harness: warning: {problem}");
        }
        // Built before the servers start, so that a server or exporter that fails to start
        // still has the ones started before it closed by the drop.
        let mut tools = Self { found, registry, mcp: None, otlp: None };
        if wants.mcp {
            tools.mcp = Some(crate::mcp::add_mcp_tools(args, config, &mut tools.registry, wants.report)?);
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
