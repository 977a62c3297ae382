//! What the router is told: the system prompt of each router mode, and results written as text.

use std::fmt::Write as _;

use harness_core::ToolDefinition;
use serde_json::{Value, json};

/// The system prompt when the API forces the tool choice itself.
pub(crate) const NATIVE: &str = "You are the router of a tool-using agent: you never run anything yourself. \
Answer every turn with exactly one call of one of the offered tools (if you make several calls, they run in the order given). \
Never answer with plain text. When the request is done, call finish with the answer.";

/// The system prompt of the text modes (constrained and prompt): the tools and the reply shape,
/// for servers with no tool calling. It depends on the tools alone, so that it stays the same
/// from step to step and a server's prompt cache keeps it.
pub(crate) fn prompt_mode(tools: &[ToolDefinition]) -> String {
    let mut s = String::from(
        "You are the router of a tool-using agent: you never run anything yourself. At every turn you choose one \
tool call; the harness runs it and tells you the result.\n\nTools:\n",
    );
    for tool in tools {
        let _ = writeln!(s, "- {}: {}", tool.name, tool.description.trim());
        let _ = writeln!(s, "  arguments (JSON Schema): {}", tool.parameters);
        if let Some(example) = tool.examples.first() {
            let _ = writeln!(s, "  example: {}", json!({ "tool": tool.name, "arguments": example.arguments }));
        }
    }
    s.push_str(
        "\nAnswer every turn with exactly one JSON object and nothing else:\n{\"tool\": \"<tool name>\", \"arguments\": {...}}\n\
When the request is done, call finish: {\"tool\": \"finish\", \"arguments\": {\"answer\": <the answer>}}",
    );
    s
}

/// The note that ends the conversation when one tool is forced, in the text modes.
pub(crate) fn forced_note(name: &str) -> String {
    format!("At this turn you must call {name}.")
}

/// A step's outcome written for a user turn, when it answers no structured call.
pub(crate) fn result_note(tool: Option<&str>, content: &Value, is_error: bool) -> String {
    match (tool, is_error) {
        (Some(tool), false) => format!("Result of {tool}: {content}"),
        (Some(tool), true) => format!("Error from the call to {tool}: {content}"),
        (None, _) => format!("Your reply could not be used: {content}"),
    }
}
