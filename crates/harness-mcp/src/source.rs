//! MCP servers as a source of tools: started at startup, listed, registered beside plugin tools.

use std::sync::Arc;
use std::time::Duration;

use harness_core::{ToolDefinition, ToolRegistry, ToolSource, ToolSpec};

use crate::config::{McpServerConfig, is_model_tool_name, qualified_name, validate_servers};
use crate::connection::{self, Connection, Driver};
use crate::error::McpError;
use crate::handler::McpToolHandler;
use crate::tool::{McpTool, McpToolState};

/// How servers are started and their tools called.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// How long a server has to start, complete the handshake and list its tools.
    pub startup_timeout: Duration,
    /// How long each call may take, when limited.
    pub call_timeout: Option<Duration>,
    /// Largest tool result, in bytes: over it, `result_too_large`.
    pub max_result_bytes: usize,
    /// Copy each server's stderr lines to ours, as `harness: mcp NAME: LINE`.
    pub forward_stderr: bool,
    /// The directory servers start in: the configuration file's, so that a relative argument
    /// (`server.py`) is that file's and not one of whatever directory the harness runs in.
    /// `None`: the harness's own working directory.
    pub working_dir: Option<std::path::PathBuf>,
}

impl Default for SourceOptions {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(30),
            call_timeout: None,
            max_result_bytes: 4 << 20,
            forward_stderr: false,
            working_dir: None,
        }
    }
}

/// One configured server, started or not.
pub struct McpServer {
    config: McpServerConfig,
    started: Result<Arc<Connection>, String>,
    server_info: Option<(String, String)>,
    protocol_version: Option<String>,
    tools: Vec<McpTool>,
}

impl McpServer {
    /// Its entry in the configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// Why it is not a source of tools: it did not start, or it has ended since.
    pub fn failure(&self) -> Option<String> {
        match &self.started {
            Err(why) => Some(why.clone()),
            Ok(connection) => connection.exit().map(|exit| format!("it {exit}")),
        }
    }

    /// The name and version the server gave for itself.
    pub fn server_info(&self) -> Option<(&str, &str)> {
        self.server_info.as_ref().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The MCP protocol version the handshake settled on (`2025-06-18`, ...): the newest that
    /// both this harness's SDK and the server speak.
    pub fn protocol_version(&self) -> Option<&str> {
        self.protocol_version.as_deref()
    }

    /// Its tools, as listed (empty when it did not start).
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }
}

/// Every configured MCP server, started, with its tools.
///
/// Dropping it (and every registry its tools went into) kills the servers still running;
/// [`McpSources::shutdown`] first asks them to exit, as the MCP spec prefers.
pub struct McpSources {
    driver: Option<Arc<Driver>>,
    servers: Vec<McpServer>,
    options: SourceOptions,
}

impl McpSources {
    /// Starts every server at once and lists its tools. A server that cannot be started, fails
    /// the handshake or times out is kept with its [`McpServer::failure`], never an error here:
    /// errors are for invalid entries and a runtime that cannot start.
    pub fn start(configs: &[McpServerConfig], options: SourceOptions) -> Result<Self, McpError> {
        validate_servers(configs)?;
        if configs.is_empty() {
            return Ok(Self { driver: None, servers: Vec::new(), options });
        }
        let driver = Arc::new(Driver::new().map_err(McpError::Runtime)?);
        let owned = configs.to_vec();
        let start = connection::Start {
            timeout: options.startup_timeout,
            forward_stderr: options.forward_stderr,
            working_dir: options.working_dir.clone(),
        };
        let started = driver.block_on(async move {
            let tasks: Vec<_> = owned
                .into_iter()
                .map(|config| {
                    let start = start.clone();
                    tokio::spawn(async move { connection::connect(&config, &start).await })
                })
                .collect();
            let mut outcomes = Vec::new();
            for task in tasks {
                // A start task that panicked is a bug here; it costs that server alone.
                outcomes.push(task.await.unwrap_or_else(|e| Err(format!("starting it failed: {e}"))));
            }
            outcomes
        });
        let Some(started) = started else {
            return Err(McpError::Runtime(std::io::Error::other("the MCP runtime stopped while servers started")));
        };
        let servers = configs
            .iter()
            .cloned()
            .zip(started)
            .map(|(config, started)| match started {
                Ok(s) => McpServer {
                    config,
                    server_info: s.server_info,
                    protocol_version: s.protocol_version,
                    tools: s.tools.into_iter().map(McpTool::listed).collect(),
                    started: Ok(Arc::new(s.connection)),
                },
                Err(why) => McpServer {
                    config,
                    started: Err(why),
                    server_info: None,
                    protocol_version: None,
                    tools: Vec::new(),
                },
            })
            .collect::<Vec<_>>();
        for server in &servers {
            match &server.started {
                Ok(_) => tracing::info!(
                    target: "harness_mcp",
                    "MCP server {}: started, {} tools listed",
                    server.config.name,
                    server.tools.len()
                ),
                Err(why) => {
                    tracing::info!(target: "harness_mcp", "MCP server {}: did not start: {why}", server.config.name)
                }
            }
        }
        Ok(Self { driver: Some(driver), servers, options })
    }

    /// Every configured server, in configuration order.
    pub fn servers(&self) -> &[McpServer] {
        &self.servers
    }

    /// Registers every listed tool, in server order, after whatever `registry` holds already
    /// (plugin tools first): a tool keeps its own name unless it is taken, and is then
    /// `<server>__<tool>`. Returns one line per tool that could not be offered.
    pub fn register_tools(&mut self, registry: &mut ToolRegistry) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(driver) = &self.driver else {
            return problems;
        };
        for server in &mut self.servers {
            let Ok(connection) = &server.started else {
                continue;
            };
            let server_name = server.config.name.clone();
            let call_timeout = server.config.own_timeout().or(self.options.call_timeout);
            let mut offered = Vec::new();
            for tool in &mut server.tools {
                let name = if registry.get(&tool.name).is_none() {
                    tool.name.clone()
                } else {
                    qualified_name(&server_name, &tool.name)
                };
                if !is_model_tool_name(&name) {
                    let why = format!("{name:?} is not a tool name that model APIs accept (^[a-zA-Z0-9_-]{{1,64}}$)");
                    problems.push(format!("MCP server {server_name:?}: tool {:?} not offered: {why}", tool.name));
                    tool.state = McpToolState::Refused { why };
                    continue;
                }
                let definition = ToolDefinition {
                    name: name.clone(),
                    description: tool.description.clone(),
                    parameters: tool.parameters.clone(),
                    examples: Vec::new(),
                    source: ToolSource::Mcp { server: server_name.clone() },
                };
                let handler = Arc::new(McpToolHandler {
                    connection: connection.clone(),
                    driver: driver.clone(),
                    tool: tool.name.clone(),
                    timeout: call_timeout,
                    max_result_bytes: self.options.max_result_bytes,
                });
                match registry.register(ToolSpec { timeout: call_timeout, ..ToolSpec::new(definition, handler) }) {
                    Ok(()) => {
                        offered.push((tool.clone(), name.clone()));
                        tool.state = McpToolState::Offered { name };
                    }
                    Err(e) => {
                        problems.push(format!("MCP server {server_name:?}: tool {:?} not offered: {e}", tool.name));
                        tool.state = McpToolState::Refused { why: e.to_string() };
                    }
                }
            }
            connection.watch().pin(&server.tools, offered);
        }
        problems
    }

    /// Asks every running server to exit (stdin closed), kills those that do not within a few
    /// seconds, and waits for them. Calls still running fail.
    pub fn shutdown(self) {
        let Some(driver) = &self.driver else {
            return;
        };
        let connections: Vec<Arc<Connection>> =
            self.servers.iter().filter_map(|s| s.started.as_ref().ok().cloned()).collect();
        for server in self.servers.iter().filter(|s| s.started.is_ok()) {
            tracing::info!(target: "harness_mcp", "MCP server {}: stopping", server.config.name);
        }
        driver.block_on(async move {
            let closing: Vec<_> =
                connections.into_iter().map(|c| tokio::spawn(async move { c.close().await })).collect();
            for task in closing {
                let _ = task.await;
            }
        });
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn server(name: &str, command: &str, args: &[&str]) -> McpServerConfig {
        McpServerConfig {
            name: name.into(),
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: [("GREETING".to_owned(), "from the config".to_owned())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn servers_that_do_not_start_are_reported_not_fatal() {
        let configs = [
            server("missing", "/no/such/mcp-server", &[]),
            server("exits", "sh", &["-c", "echo \"$GREETING: no luck\" >&2; exit 3"]),
            server("silent", "sleep", &["30"]),
            // Echoes the client's own request back: not an answer.
            server("echo", "cat", &[]),
        ];
        let options = SourceOptions { startup_timeout: Duration::from_millis(1500), ..Default::default() };
        let started = std::time::Instant::now();
        let mut sources = McpSources::start(&configs, options).unwrap();
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let failures: Vec<String> = sources.servers().iter().map(|s| s.failure().unwrap()).collect();
        assert!(failures[0].starts_with("cannot run \"/no/such/mcp-server\""), "{}", failures[0]);
        assert!(failures[1].contains("exited with status 3"), "{}", failures[1]);
        assert!(failures[1].contains("\"from the config: no luck\""), "{}", failures[1]);
        assert!(failures[2].contains("within 1.5 s"), "{}", failures[2]);
        assert!(failures[3].contains("handshake"), "{}", failures[3]);
        let mut registry = ToolRegistry::new();
        assert!(sources.register_tools(&mut registry).is_empty());
        assert_eq!(registry.definitions().len(), 1);
        sources.shutdown();
    }

    #[test]
    fn no_servers_no_runtime() {
        let sources = McpSources::start(&[], SourceOptions::default()).unwrap();
        assert!(sources.servers().is_empty() && sources.driver.is_none());
        assert!(McpSources::start(&[server("a.b", "x", &[])], SourceOptions::default()).is_err());
    }
}
