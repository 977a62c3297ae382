//! The Anthropic Messages wire format (`POST {base_url}/v1/messages`).

use harness_core::{Arguments, ModelReply, ProposedCall, ToolChoice, Usage};
use serde_json::{Map, Value, json};

use crate::conversation::Turn;
use crate::http_provider::{Body, Outgoing, RouterMode, Wire, cut_at_limit, forcing};

/// The API version sent in `anthropic-version`.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// Encodes requests and decodes replies of the Messages API.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Messages;

/// A text block; the API refuses empty ones.
fn text_block(text: &str) -> Value {
    let text = if text.trim().is_empty() { "(empty)" } else { text };
    json!({ "type": "text", "text": text })
}

/// Marks a block as the end of a prefix the API should cache. The API caches tools, then the
/// system prompt, then the messages, each prefix up to its breakpoint; a later request reads
/// back the longest one it shares.
fn cache_here(block: &mut Value) {
    block["cache_control"] = json!({ "type": "ephemeral" });
}

impl Wire for Messages {
    fn body(&self, out: &Outgoing<'_>) -> Body {
        let mut messages: Vec<Value> = out.turns().into_iter().map(message).collect();
        // The last block of the conversation: the next request's prefix, whatever it appends.
        if let Some(last) = messages.last_mut().and_then(|m| m["content"].as_array_mut()).and_then(|b| b.last_mut()) {
            cache_here(last);
        }
        let mut system = text_block(out.system);
        cache_here(&mut system);
        let mut body = json!({
            "model": out.model,
            "max_tokens": out.max_tokens,
            "system": [system],
            "messages": messages,
        });
        if out.mode == RouterMode::Native {
            // The API honours a named tool choice: the tool list stays whole, and so does the
            // cache of the tools and the system prompt.
            let (tools, choice) = forcing(out.tools, out.choice, true);
            let mut tools: Vec<Value> = tools
                .into_iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.parameters }))
                .collect();
            if let Some(last) = tools.last_mut() {
                cache_here(last);
            }
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match choice {
                ToolChoice::Required | ToolChoice::AnyBut(_) | ToolChoice::OneOf(_) => json!({ "type": "any" }),
                ToolChoice::Auto => json!({ "type": "auto" }),
                ToolChoice::None => json!({ "type": "none" }),
                ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
            };
        }
        Body { json: body, verbatim: Vec::new() }
    }

    fn reply(&self, body: &Value) -> Result<ModelReply, String> {
        let blocks = body.get("content").and_then(Value::as_array).ok_or("it has no content list")?;
        let mut calls = Vec::new();
        let mut text = String::new();
        let mut reasoning = String::new();
        for block in blocks {
            let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
            match block.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(field("text")),
                Some("thinking") => reasoning.push_str(field("thinking")),
                Some("tool_use") => calls.push(ProposedCall {
                    id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: field("name").to_owned(),
                    arguments: block.get("input").cloned().unwrap_or(Value::Null).into(),
                }),
                _ => {}
            }
        }
        let usage = body.get("usage").filter(|u| u.is_object()).map(|u| {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            Usage {
                input_tokens: n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"),
                output_tokens: n("output_tokens"),
                cached_input_tokens: n("cache_read_input_tokens"),
            }
        });
        let finish_reason = body.get("stop_reason").and_then(Value::as_str).map(str::to_owned);
        Ok(ModelReply {
            calls,
            text: Some(text).filter(|t| !t.is_empty()),
            reasoning: Some(reasoning).filter(|t| !t.is_empty()),
            truncated: finish_reason.as_deref().is_some_and(cut_at_limit),
            finish_reason,
            usage,
            ..Default::default()
        })
    }

    fn constrains(&self) -> bool {
        false
    }
}

/// One turn as a message of content blocks.
fn message(turn: Turn<'_>) -> Value {
    match turn {
        Turn::User(text) => json!({ "role": "user", "content": [text_block(&text)] }),
        Turn::Assistant { text, calls } => {
            let mut blocks: Vec<Value> = text.iter().filter(|t| !t.trim().is_empty()).map(|t| text_block(t)).collect();
            for c in calls {
                blocks.push(
                    json!({ "type": "tool_use", "id": c.id, "name": c.call.name, "input": input(&c.call.arguments) }),
                );
            }
            if blocks.is_empty() {
                blocks.push(text_block("(no reply)"));
            }
            json!({ "role": "assistant", "content": blocks })
        }
        // All the results of one assistant turn go in one user message, results first (the
        // API asks for tool_result blocks before any text).
        Turn::Results { results, notes } => {
            let mut blocks: Vec<Value> = results
                .into_iter()
                .map(|r| {
                    let mut block = json!({ "type": "tool_result", "tool_use_id": r.call_id, "content": r.content });
                    if r.is_error {
                        block["is_error"] = json!(true);
                    }
                    block
                })
                .collect();
            blocks.extend(notes.iter().map(|n| text_block(n)));
            json!({ "role": "user", "content": blocks })
        }
    }
}

/// A call's input as the API takes it: always an object.
fn input(arguments: &Arguments) -> Value {
    let arguments = arguments.to_value();
    match &*arguments {
        Value::Object(_) => arguments.into_owned(),
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
        assert_eq!(r.usage, Some(Usage { input_tokens: 23, output_tokens: 9, cached_input_tokens: 3 }));
        assert!(Messages.reply(&json!({"content": "x"})).is_err());
        assert_eq!(Messages.reply(&json!({"content": [{"type": 5}]})).unwrap(), ModelReply::default());
    }

    use crate::testing::{sent, steps};

    /// The body without its cache breakpoints, which mark prefixes and are no content.
    fn content(mut body: Value) -> Value {
        fn strip(v: &mut Value) {
            match v {
                Value::Object(map) => {
                    map.remove("cache_control");
                    map.values_mut().for_each(strip);
                }
                Value::Array(items) => items.iter_mut().for_each(strip),
                _ => {}
            }
        }
        strip(&mut body);
        body
    }

    #[test]
    fn reads_thinking_as_reasoning_and_max_tokens_as_truncated() {
        let body = json!({
            "content": [
                {"type": "thinking", "thinking": "I must not call calculate here.", "signature": "s"},
                {"type": "redacted_thinking", "data": "x"},
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}}
            ],
            "stop_reason": "max_tokens",
            "usage": {"input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1200, "output_tokens": 300}
        });
        let r = Messages.reply(&body).unwrap();
        assert_eq!(r.reasoning.as_deref(), Some("I must not call calculate here."));
        assert_eq!((r.truncated, r.finish_reason.as_deref(), r.text.as_deref()), (true, Some("max_tokens"), None));
        assert_eq!(r.usage, Some(Usage { input_tokens: 1205, output_tokens: 300, cached_input_tokens: 1200 }));
        let done = Messages.reply(&json!({"content": [], "stop_reason": "tool_use"})).unwrap();
        assert!(!done.truncated);
    }

    #[test]
    fn tools_system_and_conversation_end_in_cache_breakpoints_and_a_forced_tool_keeps_the_list() {
        let finish = ToolChoice::Tool("finish".into());
        let body = sent(&Messages, &steps()[1], &finish, RouterMode::Native);
        let ephemeral = json!({"type": "ephemeral"});
        assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "finish"}));
        let tools = body["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 2);
        assert_eq!((tools[0].get("cache_control"), &tools[1]["cache_control"]), (None, &ephemeral));
        assert_eq!(body["system"][0]["cache_control"], ephemeral);
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_array().unwrap().last().unwrap();
        assert_eq!((last["type"].as_str(), &last["cache_control"]), (Some("tool_result"), &ephemeral));
        assert_eq!(messages[0]["content"][0].get("cache_control"), None);
        assert_eq!(body["max_tokens"], 300);

        for mode in [RouterMode::Native, RouterMode::Prompt] {
            let steps = steps();
            let bodies: Vec<Value> =
                steps[..3].iter().map(|c| content(sent(&Messages, c, &ToolChoice::Required, mode))).collect();
            let forced = content(sent(&Messages, &steps[3], &finish, mode));
            for (before, after) in bodies.iter().zip(bodies[1..].iter().chain([&forced])) {
                let (old, new) = (before["messages"].as_array().unwrap(), after["messages"].as_array().unwrap());
                assert!(new.len() > old.len() && new[..old.len()] == old[..], "{mode}: {old:?}\n{new:?}");
                assert_eq!((&before["tools"], &before["system"]), (&after["tools"], &after["system"]), "{mode}");
            }
        }
    }
}
