//! Constrained mode's reply schema: a JSON schema that only a call of an offered tool matches,
//! sent as OpenAI's `response_format`, which llama.cpp, vLLM, Ollama and OpenAI turn into
//! grammar-constrained decoding. The model cannot write anything but such a call.

use harness_core::{ToolChoice, ToolDefinition};
use serde_json::Value;

/// The `response_format` member as JSON text, or `None` when the choice lets the model answer
/// without a tool (`auto`, `none`).
///
/// Written by hand because the order is part of the meaning: llama.cpp writes an object's
/// properties in the order of the schema, and `tool` must come before `arguments` so that the
/// model names the tool before it writes the arguments (a JSON value would sort `arguments`
/// first).
pub(crate) fn response_format(tools: &[ToolDefinition], choice: &ToolChoice) -> Option<String> {
    let allowed: Vec<&ToolDefinition> = match choice {
        ToolChoice::Required => tools.iter().collect(),
        ToolChoice::Tool(name) => tools.iter().filter(|t| &t.name == name).collect(),
        ToolChoice::Auto | ToolChoice::None => return None,
    };
    let branches: Vec<String> = allowed.iter().map(|tool| branch(tool)).collect();
    Some(format!(
        r#"{{"type":"json_schema","json_schema":{{"name":"tool_call","schema":{{"oneOf":[{}]}}}}}}"#,
        branches.join(",")
    ))
}

/// One tool's call: `{"tool": NAME, "arguments": <its parameters>}`, nothing else.
fn branch(tool: &ToolDefinition) -> String {
    format!(
        r#"{{"type":"object","properties":{{"tool":{{"const":{}}},"arguments":{}}},"required":["tool","arguments"],"additionalProperties":false}}"#,
        Value::from(tool.name.as_str()),
        tool.parameters
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::ToolSource;
    use serde_json::json;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}),
            examples: vec![],
            source: ToolSource::Builtin,
        }
    }

    #[test]
    fn the_schema_is_one_branch_per_allowed_tool_with_the_tool_named_first() {
        let tools = [tool("finish"), tool("add \"quoted\"")];
        let text = response_format(&tools, &ToolChoice::Required).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["type"], "json_schema");
        let branches = value["json_schema"]["schema"]["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[1]["properties"]["tool"], json!({"const": "add \"quoted\""}));
        assert_eq!(branches[1]["properties"]["arguments"], tools[1].parameters);
        assert_eq!(branches[1]["additionalProperties"], false);
        // The order the grammar follows: the tool's name, then its arguments.
        let first = text.find(r#""tool":{"const""#).unwrap();
        assert!(first < text.find(r#""arguments":{"#).unwrap(), "{text}");

        let forced = response_format(&tools, &ToolChoice::Tool("finish".into())).unwrap();
        let value: Value = serde_json::from_str(&forced).unwrap();
        assert_eq!(value["json_schema"]["schema"]["oneOf"].as_array().unwrap().len(), 1);
        assert_eq!(value["json_schema"]["schema"]["oneOf"][0]["properties"]["tool"]["const"], "finish");
        assert_eq!(response_format(&tools, &ToolChoice::Auto), None);
        assert_eq!(response_format(&tools, &ToolChoice::None), None);
    }
}
