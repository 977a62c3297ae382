//! The bridge from the core's `ToolHandler` to a plugin library's `call`.

use std::sync::Arc;

use harness_core::{ToolFailure, ToolHandler};
use serde_json::Value;

use crate::late::LateLibrary;
use crate::library::PluginLibrary;

/// Dispatches the core's calls for every tool of one plugin into its library, in-process.
pub struct PluginHandler {
    library: Library,
    max_result_bytes: usize,
}

/// The library a handler calls into: open, or to be opened at the first call.
enum Library {
    Open(Arc<PluginLibrary>),
    Late(Arc<LateLibrary>),
}

impl PluginHandler {
    /// A handler for the tools of `library`; results over `max_result_bytes` are refused.
    pub fn new(library: Arc<PluginLibrary>, max_result_bytes: usize) -> Self {
        Self { library: Library::Open(library), max_result_bytes }
    }

    /// A handler for the tools of a library opened at its first call: each call fails with
    /// `plugin_unavailable` when it could not be opened.
    pub fn late(library: Arc<LateLibrary>, max_result_bytes: usize) -> Self {
        Self { library: Library::Late(library), max_result_bytes }
    }

    fn library(&self) -> Result<&PluginLibrary, ToolFailure> {
        match &self.library {
            Library::Open(library) => Ok(library),
            Library::Late(late) => late.get().map(|l| &**l).map_err(|why| ToolFailure {
                code: "plugin_unavailable".to_owned(),
                message: format!(
                    "the plugin in {} could not be opened: {why}; none of its tools can run in this run. Use another tool, or finish and say so",
                    late.path().display()
                ),
            }),
        }
    }
}

/// The failure of a result of `len` bytes over `limit`.
pub(crate) fn too_large(len: usize, limit: usize) -> ToolFailure {
    ToolFailure {
        code: "result_too_large".to_owned(),
        message: format!(
            "the result is {len} bytes, over the limit of {limit}; it was dropped, not shown to the model. Ask for less (a smaller range, a limit argument)"
        ),
    }
}

/// Checks a result's size before parsing it, so an oversized result is never held as a value.
pub(crate) fn parse_result(plugin: &str, json: &[u8], limit: usize) -> Result<Value, ToolFailure> {
    if json.len() > limit {
        return Err(too_large(json.len(), limit));
    }
    serde_json::from_slice(json).map_err(|e| ToolFailure {
        code: "tool_error".to_owned(),
        message: format!("plugin {plugin} returned a result that is not JSON: {e}"),
    })
}

impl ToolHandler for PluginHandler {
    fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        // serde_json's own writer, not `Display`: formatting through `fmt` cost a quarter of a
        // calc call.
        let arguments = serde_json::to_string(arguments).map_err(|e| ToolFailure {
            code: "tool_error".to_owned(),
            message: format!("arguments not written: {e}"),
        })?;
        let library = self.library()?;
        let json = library.call(tool, &arguments).map_err(|e| ToolFailure { code: e.code, message: e.message })?;
        parse_result(&library.manifest().name, json.as_bytes(), self.max_result_bytes)
    }

    // A call into the library never touches the async runtime.
    fn may_run_inline(&self) -> bool {
        true
    }
}
