//! One `[[mcp.servers]]` entry, and the tool-name rule of model APIs.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::error::McpError;

/// An MCP server to start as a child process and use as a source of tools.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Its name: shown to operators, and the prefix of its tools' names when they collide.
    pub name: String,
    /// The program to run (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it, over the few it inherits (see [`INHERITED_ENV`]).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The only variables a server inherits from the harness's environment, as the official
/// Python SDK does: API keys and the like never reach a server unless its `env` names them.
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR"];

/// Whether `name` is a tool name every model API accepts: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_model_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The name a server's tool is offered under when its own name is taken.
///
/// Not `<server>.<tool>`: model APIs refuse `.` in tool names, so the two parts are joined
/// with `__`, which they accept.
pub fn qualified_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

impl McpServerConfig {
    /// The command line, for messages.
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.as_str()).chain(self.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
    }
}

/// Checks every entry: names valid for model APIs and unique, a command given.
pub fn validate_servers(servers: &[McpServerConfig]) -> Result<(), McpError> {
    let mut seen = HashSet::new();
    for (i, server) in servers.iter().enumerate() {
        let invalid = |reason: String| McpError::InvalidServer { index: i + 1, name: server.name.clone(), reason };
        if !is_model_tool_name(&server.name) || server.name.len() > 32 {
            return Err(invalid(
                "a server name is 1 to 32 letters, digits, '_' or '-' (it prefixes tool names, which model APIs limit to ^[a-zA-Z0-9_-]{1,64}$)"
                    .to_owned(),
            ));
        }
        if !seen.insert(server.name.as_str()) {
            return Err(invalid("another server has this name; give each a name of its own".to_owned()));
        }
        if server.command.trim().is_empty() {
            return Err(invalid("command is empty; name the program that runs the server".to_owned()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, command: &str) -> McpServerConfig {
        McpServerConfig { name: name.into(), command: command.into(), args: vec![], env: BTreeMap::new() }
    }

    #[test]
    fn tool_names_follow_the_model_api_rule() {
        assert!(is_model_tool_name("calculate"));
        assert!(is_model_tool_name("py-tools__greet"));
        assert!(!is_model_tool_name(""));
        assert!(!is_model_tool_name("files.read_file"));
        assert!(!is_model_tool_name(&"x".repeat(65)));
        assert_eq!(qualified_name("py", "calculate"), "py__calculate");
        assert!(is_model_tool_name(&qualified_name("py", "calculate")));
    }

    #[test]
    fn server_entries_are_checked() {
        assert!(validate_servers(&[server("py", "python3"), server("node-tools", "node")]).is_ok());
        let e = validate_servers(&[server("py", "python3"), server("py", "python3")]).unwrap_err().to_string();
        assert!(e.contains("entry 2") && e.contains("another server"), "{e}");
        let e = validate_servers(&[server("my.server", "x")]).unwrap_err().to_string();
        assert!(e.contains("entry 1") && e.contains("\"my.server\""), "{e}");
        assert!(validate_servers(&[server("ok", " ")]).is_err());
        assert!(validate_servers(&[server(&"s".repeat(33), "x")]).is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        let parsed: Result<McpServerConfig, _> =
            serde_json::from_value(serde_json::json!({"name": "a", "command": "b", "cwd": "/"}));
        assert!(parsed.is_err());
        let parsed: McpServerConfig = serde_json::from_value(serde_json::json!({"name": "a", "command": "b"})).unwrap();
        assert_eq!(parsed.command_line(), "b");
    }
}
