//! `harness lock` and `--locked`: the offered tools' sources and definition hashes, written to
//! `harness.lock` beside the configuration and held against each start.

use clap::Args;
use harness_core::ToolSource;
use harness_mcp::{McpTool, McpToolState};
use harness_trust::{LockEntry, ToolLock, sha256_hex};
use serde_json::json;

use crate::Result;
use crate::discovery::PluginArgs;
use crate::error::CliError;
use crate::settings::ToolSettings;
use crate::tools::{Tools, Wants};

/// Arguments of `harness lock`.
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    #[command(flatten)]
    pub(crate) plugins: PluginArgs,
}

/// The lock of what is offered now.
pub(crate) fn current(tools: &Tools, settings: &ToolSettings) -> ToolLock {
    let (found, mcp) = (&tools.found, tools.mcp());
    let mut lock = ToolLock::default();
    for definition in tools.registry.definitions() {
        let entry = match &definition.source {
            ToolSource::Builtin => continue,
            ToolSource::Plugin { name, version } => {
                let plugin = found.plugins.iter().find(|p| p.manifest.name == *name);
                let manifest = plugin.and_then(|p| p.manifest.tools.iter().find(|t| t.name == definition.name));
                let canonical = match manifest {
                    Some(t) => json!({"name": t.name, "description": t.description, "parameters": t.parameters,
                        "output": t.output, "effects": t.effects.as_str()}),
                    None => json!({"name": definition.name, "description": definition.description,
                        "parameters": definition.parameters}),
                };
                LockEntry {
                    source: format!("plugin {name} {version}"),
                    library_sha256: plugin.and_then(|p| std::fs::read(&p.path).ok()).map(|b| sha256_hex(&b)),
                    definition_sha256: sha256_hex(canonical.to_string().as_bytes()),
                }
            }
            ToolSource::Mcp { server } => {
                let command = settings.mcp_servers.iter().find(|s| s.name == *server);
                let command = command.map_or_else(String::new, harness_mcp::McpServerConfig::endpoint);
                // The same hash a change mid-run is caught by (see harness_mcp::McpTool).
                let offered = McpToolState::Offered { name: definition.name.clone() };
                let listed = mcp.iter().flat_map(|m| m.servers()).filter(|s| s.config().name == *server);
                let tool = listed.flat_map(|s| s.tools()).find(|t| t.state == offered).cloned();
                let tool = tool.unwrap_or_else(|| McpTool {
                    name: definition.name.clone(),
                    description: definition.description.clone(),
                    parameters: definition.parameters.clone(),
                    output: None,
                    state: offered,
                });
                LockEntry {
                    source: format!("mcp {server}: {}", command.trim_end()),
                    library_sha256: None,
                    definition_sha256: tool.definition_sha256(&definition.name),
                }
            }
        };
        lock.tools.insert(definition.name.clone(), entry);
    }
    lock
}

/// Holds what is offered to `harness.lock`: a difference refuses to start when locked, and is
/// a warning otherwise.
pub(crate) fn check(tools: &Tools, settings: &ToolSettings, locked: bool) -> Result<()> {
    let path = &settings.project.lock_path;
    let usage = |e: harness_trust::ConfigError| CliError::Usage(e.to_string());
    let Some(lock) = ToolLock::read(path).map_err(usage)? else {
        if locked {
            return Err(CliError::Usage(format!(
                "--locked: there is no lock file {}; write it with `harness lock` once you have reviewed the tools",
                path.display()
            )));
        }
        return Ok(());
    };
    let diff = lock.diff(&current(tools, settings));
    if diff.is_empty() {
        return Ok(());
    }
    let lines = diff.iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n");
    if locked {
        return Err(CliError::Usage(format!(
            "the offered tools do not match {}:\n{lines}\nreview the change, then run `harness lock` to accept it",
            path.display()
        )));
    }
    crate::log::notice!(
        "harness: warning: the offered tools do not match {} (pass --locked to refuse):\n{lines}",
        path.display()
    );
    Ok(())
}

/// Runs `harness lock` with the resolved plugin settings.
pub(crate) fn lock(settings: &ToolSettings) -> Result<u8> {
    let tools = Tools::wire(settings, Wants { report: true, mcp: true, ..Wants::default() })?;
    let lock = current(&tools, settings);
    drop(tools);
    let path = &settings.project.lock_path;
    lock.write(path).map_err(|e| CliError::Failure(e.to_string()))?;
    println!("wrote {}: {} tools", path.display(), lock.tools.len());
    Ok(0)
}
