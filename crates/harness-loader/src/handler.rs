//! The bridge from the core's `ToolHandler` to a plugin library's `call`.

use std::sync::Arc;

use harness_core::{ToolFailure, ToolHandler};
use serde_json::Value;

use crate::library::PluginLibrary;

/// Dispatches the core's calls for every tool of one plugin into its library.
pub struct PluginHandler {
    library: Arc<PluginLibrary>,
}

impl PluginHandler {
    /// A handler for the tools of `library`.
    pub fn new(library: Arc<PluginLibrary>) -> Self {
        Self { library }
    }
}

impl ToolHandler for PluginHandler {
    fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        let json = self
            .library
            .call(tool, &arguments.to_string())
            .map_err(|e| ToolFailure { code: e.code, message: e.message })?;
        serde_json::from_str(&json).map_err(|e| ToolFailure {
            code: "tool_error".to_owned(),
            message: format!("plugin {} returned a result that is not JSON: {e}", self.library.manifest().name),
        })
    }
}
