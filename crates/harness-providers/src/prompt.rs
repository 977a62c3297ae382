//! What the router is told: the system prompt of each router mode, and results written as text.

use std::fmt::Write as _;

use harness_core::{ToolChoice, ToolDefinition};
use serde_json::{Value, json};

/// The system prompt when the API forces the tool choice itself.
pub(crate) const NATIVE: &str = "You are the router of a tool-using agent: you never run anything yourself. \
Answer every turn with exactly one call of one of the offered tools (if you make several calls, they run in the order given). \
Never answer with plain text. When the request is done, call finish with the answer.";

/// The system prompt of prompt mode: the tools and the reply shape, for servers with no tool
/// calling. `choice` names the tool this turn must call, when there is one.
pub(crate) fn prompt_mode(tools: &[ToolDefinition], choice: &ToolChoice) -> String {
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
    // A named choice, or "required" with one tool offered (how the loop forces `finish`).
    let only = match (choice, tools) {
        (ToolChoice::Tool(name), _) => Some(name.as_str()),
        (ToolChoice::Required, [tool]) => Some(tool.name.as_str()),
        _ => None,
    };
    if let Some(name) = only {
        let _ = write!(s, "\nAt this turn you must call {name}.");
    }
    s
}

/// A step's outcome written for a user turn, when it answers no structured call.
pub(crate) fn result_note(tool: Option<&str>, content: &Value, is_error: bool) -> String {
    match (tool, is_error) {
        (Some(tool), false) => format!("Result of {tool}: {content}"),
        (Some(tool), true) => format!("Error from the call to {tool}: {content}"),
        (None, _) => format!("Your reply could not be used: {content}"),
    }
}
