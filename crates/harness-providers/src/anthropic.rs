//! The Anthropic Messages wire format (`POST {base_url}/v1/messages`).

use harness_core::{ModelReply, ProposedCall, ToolChoice, Usage};
use serde_json::{Map, Value, json};

use crate::conversation::{self, Turn};
use crate::http_provider::{Outgoing, Wire};

/// The API version sent in `anthropic-version`.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// `max_tokens` is required by this API; this is sent when none is configured.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Encodes requests and decodes replies of the Messages API.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Messages;

/// A text block; the API refuses empty ones.
fn text_block(text: &str) -> Value {
    let text = if text.trim().is_empty() { "(empty)" } else { text };
    json!({ "type": "text", "text": text })
}

impl Wire for Messages {
    fn body(&self, out: &Outgoing<'_>) -> Value {
        let turns =
            if out.native { conversation::native(out.conversation) } else { conversation::text_only(out.conversation) };
        let mut messages = Vec::new();
        for turn in turns {
            match turn {
                Turn::User(text) => messages.push(json!({ "role": "user", "content": [text_block(&text)] })),
                Turn::Assistant { text, calls } => {
                    let mut blocks: Vec<Value> =
                        text.iter().filter(|t| !t.trim().is_empty()).map(|t| text_block(t)).collect();
                    for c in calls {
                        blocks.push(json!({ "type": "tool_use", "id": c.id, "name": c.call.name, "input": input(&c.call.arguments) }));
                    }
                    if blocks.is_empty() {
                        blocks.push(text_block("(no reply)"));
                    }
                    messages.push(json!({ "role": "assistant", "content": blocks }));
                }
                // All the results of one assistant turn go in one user message, results first
                // (the API asks for tool_result blocks before any text).
                Turn::Results { results, notes } => {
                    let mut blocks: Vec<Value> = results
                        .into_iter()
                        .map(|r| {
                            let mut block =
                                json!({ "type": "tool_result", "tool_use_id": r.call_id, "content": r.content });
                            if r.is_error {
                                block["is_error"] = json!(true);
                            }
                            block
                        })
                        .collect();
                    blocks.extend(notes.iter().map(|n| text_block(n)));
                    messages.push(json!({ "role": "user", "content": blocks }));
                }
            }
        }
        let mut body = json!({
            "model": out.model,
            "max_tokens": out.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "system": out.system,
            "messages": messages,
        });
        if out.native {
            let tools: Vec<Value> = out
                .tools
                .iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.parameters }))
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match out.choice {
                ToolChoice::Required => json!({ "type": "any" }),
                ToolChoice::Auto => json!({ "type": "auto" }),
                ToolChoice::None => json!({ "type": "none" }),
                ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
            };
        }
        body
    }

    fn reply(&self, body: &Value) -> Result<ModelReply, String> {
        let blocks = body.get("content").and_then(Value::as_array).ok_or("it has no content list")?;
        let mut calls = Vec::new();
        let mut text = String::new();
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
                Some("tool_use") => calls.push(ProposedCall {
                    id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: block.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    arguments: block.get("input").cloned().unwrap_or(Value::Null),
                }),
                _ => {}
            }
        }
        let usage = body.get("usage").filter(|u| u.is_object()).map(|u| {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            Usage {
                input_tokens: n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"),
                output_tokens: n("output_tokens"),
            }
        });
        Ok(ModelReply { calls, text: Some(text).filter(|t| !t.is_empty()), usage, ..Default::default() })
    }
}

/// A call's input as the API takes it: always an object.
fn input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => Value::Object(Map::new()),
        },
        _ => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_text_and_tool_use_blocks_and_usage() {
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "text", "text": "Let me calculate."},
                {"type": "tool_use", "id": "toolu_1", "name": "calculate", "input": {"expression": "6*7"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 20, "output_tokens": 9, "cache_read_input_tokens": 3}
        });
        let r = Messages.reply(&body).unwrap();
        assert_eq!(r.text.as_deref(), Some("Let me calculate."));
        assert_eq!((r.calls[0].id.as_deref(), r.calls[0].name.as_str()), (Some("toolu_1"), "calculate"));
        assert_eq!(r.calls[0].arguments, json!({"expression": "6*7"}));
        assert_eq!(r.usage, Some(Usage { input_tokens: 23, output_tokens: 9 }));
        assert!(Messages.reply(&json!({"content": "x"})).is_err());
        assert_eq!(Messages.reply(&json!({"content": [{"type": 5}]})).unwrap(), ModelReply::default());
    }
}
