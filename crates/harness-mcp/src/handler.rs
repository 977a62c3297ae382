//! The bridge from the core's synchronous `ToolHandler` to one tool of a running MCP server.

use std::sync::Arc;
use std::time::Duration;

use harness_core::{ToolFailure, ToolHandler};
use rmcp::model::CallToolResult;
use serde_json::Value;

use crate::connection::{Connection, Driver};

/// Calls one tool of an MCP server, from the loop's blocking thread.
pub(crate) struct McpToolHandler {
    pub(crate) connection: Arc<Connection>,
    pub(crate) driver: Arc<Driver>,
    /// The tool's name on the server (it may be offered under a qualified name).
    pub(crate) tool: String,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_result_bytes: usize,
}

fn failure(code: &str, message: String) -> ToolFailure {
    ToolFailure { code: code.to_owned(), message }
}

impl ToolHandler for McpToolHandler {
    fn call(&self, _offered_as: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        // The schema said object; MCP only carries objects. Anything else never reaches the server.
        let Value::Object(arguments) = arguments.clone() else {
            return Err(failure("invalid_arguments", "MCP tools take an object of arguments".to_owned()));
        };
        let connection = self.connection.clone();
        let tool = self.tool.clone();
        let timeout = self.timeout;
        let result = self
            .driver
            .block_on(async move { connection.call(&tool, arguments, timeout).await })
            .unwrap_or_else(|| {
                Err(failure(
                    "tool_crashed",
                    format!("the connection to MCP server {:?} was shut down", self.connection.server()),
                ))
            })
            // A JSON-RPC error's message is the server's text too.
            .map_err(|e| ToolFailure { message: held_to(e.message, self.max_result_bytes), ..e })?;
        result_value(self.connection.server(), result, self.max_result_bytes)
    }

    fn enforces_timeout(&self) -> bool {
        self.timeout.is_some()
    }
}

/// What an MCP tool result is to the harness.
///
/// `isError` becomes `tool_error` with the content's text as the message. Otherwise the
/// structured content when there is some; else one text block as a string; else the content
/// blocks themselves (`[]` is `null`).
pub(crate) fn result_value(server: &str, result: CallToolResult, limit: usize) -> Result<Value, ToolFailure> {
    let texts: Vec<&str> = result.content.iter().filter_map(|block| block.as_text().map(|t| t.text.as_str())).collect();
    if result.is_error == Some(true) {
        let message = if !texts.is_empty() {
            texts.join("\n")
        } else if let Some(structured) = &result.structured_content {
            structured.to_string()
        } else {
            format!("MCP server {server:?} reported an error with no message")
        };
        return Err(failure("tool_error", held_to(message, limit)));
    }
    let value = match (result.structured_content, texts.as_slice()) {
        (Some(structured), _) => structured,
        (None, [one]) if result.content.len() == 1 => Value::String((*one).to_owned()),
        (None, _) if result.content.is_empty() => Value::Null,
        (None, _) => serde_json::to_value(&result.content).unwrap_or(Value::Null),
    };
    let bytes = serde_json::to_vec(&value).map_or(0, |v| v.len());
    if bytes > limit {
        return Err(failure(
            "result_too_large",
            format!(
                "the result is {bytes} bytes, over the limit of {limit}; it was dropped, not shown to the model. Ask for less (a smaller range, a limit argument)"
            ),
        ));
    }
    Ok(value)
}

/// An error text cut to `limit` bytes, as a result is held to it: a server's error reaches
/// the model, the trace and the terminal as a result does, so it is bounded alike.
pub(crate) fn held_to(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let dropped = text.len();
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    let dropped = dropped - cut;
    text.push_str(&format!(" [... {dropped} more bytes of error text dropped: over the result limit of {limit}]"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;

    #[test]
    fn results_become_values() {
        let text = CallToolResult::success(vec![ContentBlock::text("Hello, Ada")]);
        assert_eq!(result_value("s", text, 1000).unwrap(), json!("Hello, Ada"));
        let structured = CallToolResult::structured(json!({"result": 42}));
        assert_eq!(result_value("s", structured, 1000).unwrap(), json!({"result": 42}));
        let empty = CallToolResult::success(vec![]);
        assert_eq!(result_value("s", empty, 1000).unwrap(), Value::Null);
        let two = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        let value = result_value("s", two, 1000).unwrap();
        assert_eq!(value[1]["text"], "b", "{value}");
    }

    #[test]
    fn errors_and_oversized_results_are_failures() {
        let error = CallToolResult::error(vec![ContentBlock::text("no such city")]);
        let e = result_value("s", error, 1000).unwrap_err();
        assert_eq!((e.code.as_str(), e.message.as_str()), ("tool_error", "no such city"));
        let silent = CallToolResult::error(vec![]);
        assert!(result_value("weather", silent, 1000).unwrap_err().message.contains("\"weather\""));
        let big = CallToolResult::success(vec![ContentBlock::text("x".repeat(100))]);
        assert_eq!(result_value("s", big, 50).unwrap_err().code, "result_too_large");
        let loud = CallToolResult::error(vec![ContentBlock::text("é".repeat(100))]);
        let e = result_value("s", loud, 51).unwrap_err();
        assert!(e.message.starts_with(&"é".repeat(25)), "{}", e.message);
        assert!(
            e.message.ends_with("[... 150 more bytes of error text dropped: over the result limit of 51]"),
            "{}",
            e.message
        );
    }
}
