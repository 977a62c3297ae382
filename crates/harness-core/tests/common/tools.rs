// The tools the reply corpus and the reader's unit tests read replies with, written once:
// `tests/corpus.rs` and `crates/harness-reply/src/tests.rs` take this file in with `include!`, each with
// `ToolDefinition`, `ToolSource`, `Value` and `json!` in scope.

fn tool(name: &str, properties: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: String::new(),
        parameters: json!({ "type": "object", "properties": properties }),
        examples: Vec::new(),
        source: ToolSource::Builtin,
    }
}

/// The tools every case is read with: their schemas type the values of XML-style formats.
fn tools() -> Vec<ToolDefinition> {
    vec![
        tool("get_weather", json!({ "city": { "type": "string" }, "days": { "type": "integer" } })),
        tool(
            "search",
            json!({
                "query": { "type": "string" },
                "limit": { "type": ["integer", "null"] },
                "exact": { "type": "boolean" },
                "score": { "type": "number" },
                "filters": { "type": "object" },
                "tags": { "type": "array" },
            }),
        ),
        tool("calculate", json!({ "expression": { "type": "string" } })),
    ]
}
