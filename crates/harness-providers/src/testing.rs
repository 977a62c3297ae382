//! What the unit tests of the wire formats share: tools, and a conversation as the loop grows it.

use harness_core::{Message, ModelReply, ProposedCall, ToolChoice, ToolDefinition, ToolSource};
use serde_json::{Value, json};

use crate::http_provider::{Outgoing, RouterMode, Wire, system_prompt};

/// `finish` and `add`, as a registry lists them.
pub(crate) fn tools() -> Vec<ToolDefinition> {
    let tool = |name: &str, parameters: Value| ToolDefinition {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters,
        examples: vec![],
        source: ToolSource::Builtin,
    };
    vec![
        tool("finish", json!({"type": "object", "properties": {"answer": {}}, "required": ["answer"]})),
        tool(
            "add",
            json!({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}, "required": ["a", "b"]}),
        ),
    ]
}

fn reply(calls: Vec<ProposedCall>, text: Option<&str>) -> Message {
    Message::Assistant { reply: ModelReply { calls, text: text.map(str::to_owned), ..Default::default() } }
}

/// The conversation before each request of a run, as the loop appends to it: a call and its
/// result, a reply with no call and its error, two calls and their results.
pub(crate) fn steps() -> Vec<Vec<Message>> {
    let call = |id: &str, a: i64| ProposedCall {
        id: Some(id.into()),
        name: "add".into(),
        arguments: json!(format!("{{\"a\": {a}, \"b\": 1}}")).into(),
    };
    let result = |id: Option<&str>, content: Value, is_error: bool| Message::ToolResult {
        call_id: id.map(str::to_owned),
        tool: id.map(|_| "add".to_owned()),
        content,
        is_error,
    };
    let grown: Vec<Vec<Message>> = vec![
        vec![Message::User { content: "add 1 and 1, then 2 and 1".into() }],
        vec![reply(vec![call("c1", 1)], None), result(Some("c1"), json!(2), false)],
        vec![reply(vec![], Some("Let me think.")), result(None, json!({"code": "no_json"}), true)],
        vec![
            reply(vec![call("c2", 2), call("c3", 3)], Some("Two more.")),
            result(Some("c2"), json!(3), false),
            result(Some("c3"), json!({"code": "tool_error"}), true),
        ],
    ];
    let mut so_far = Vec::new();
    grown
        .into_iter()
        .map(|more| {
            so_far.extend(more);
            so_far.clone()
        })
        .collect()
}

/// The body a wire sends for this conversation, as the server parses it.
pub(crate) fn sent(wire: &dyn Wire, conversation: &[Message], choice: &ToolChoice, mode: RouterMode) -> Value {
    let tools = tools();
    let system = system_prompt(mode, &tools, false);
    let body = wire.body(&Outgoing {
        model: "m",
        system: &system,
        conversation,
        tools: &tools,
        choice,
        mode,
        max_tokens: 300,
        after_cut: false,
        grounded: None,
        worked: false,
        quoting: Default::default(),
    });
    match serde_json::from_slice(&body.bytes()) {
        Ok(value) => value,
        Err(e) => panic!("the body is not JSON: {e}"),
    }
}
