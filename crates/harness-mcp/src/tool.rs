//! One tool of an MCP server as its server listed it, and whether it is offered: what the
//! sources register and the watch compares a later listing with.

use serde::Serialize;
use serde_json::Value;

/// Whether a server's tool is offered, and under which name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum McpToolState {
    /// Not yet registered (before [`McpSources::register_tools`](crate::McpSources::register_tools)).
    Listed,
    /// Offered to the router under `name` (the tool's own, or `<server>__<tool>`).
    Offered {
        /// The name the router sees.
        name: String,
    },
    /// Not offered.
    Refused {
        /// Why.
        why: String,
    },
}

/// One tool as its server listed it.
#[derive(Debug, Clone, Serialize)]
pub struct McpTool {
    /// Its name on the server.
    pub name: String,
    /// What it does (its title when it has no description).
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
    /// JSON Schema of its structured result, when it declares one.
    pub output: Option<Value>,
    /// Whether and how it is offered.
    pub state: McpToolState,
}

impl McpTool {
    /// The tool as its server listed it, not yet registered.
    pub(crate) fn listed(tool: rmcp::model::Tool) -> Self {
        let description = tool.description.map(|d| d.into_owned()).or(tool.title).unwrap_or_default();
        Self {
            name: tool.name.into_owned(),
            description,
            parameters: Value::Object((*tool.input_schema).clone()),
            output: tool.output_schema.map(|s| Value::Object((*s).clone())),
            state: McpToolState::Listed,
        }
    }

    /// The SHA-256 of its canonical definition when offered as `offered_as`: name, description,
    /// parameter and output schemas, and effects (always `network`: MCP declares none). This
    /// is the hash `harness.lock` holds, and the one a tool changed mid-run is caught by.
    pub fn definition_sha256(&self, offered_as: &str) -> String {
        let canonical = serde_json::json!({"name": offered_as, "description": self.description,
            "parameters": self.parameters, "output": self.output, "effects": "network"});
        harness_trust::sha256_hex(canonical.to_string().as_bytes())
    }
}
