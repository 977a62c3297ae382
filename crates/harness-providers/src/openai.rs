//! The OpenAI chat completions wire format (`POST {base_url}/chat/completions`), which
//! OpenAI, OpenRouter, Ollama's `/v1`, llama.cpp's server, vLLM and LM Studio all speak.

use harness_core::{ModelReply, ProposedCall, ToolChoice, Usage};
use serde_json::{Value, json};

use crate::conversation::{self, Turn};
use crate::http_provider::{Outgoing, Wire};

/// Encodes requests and decodes replies of the chat completions API.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChatCompletions {
    /// Ask OpenRouter to route only to hosts that honour every parameter sent (`tools` and
    /// `tool_choice` above all).
    pub(crate) require_parameters: bool,
}

impl Wire for ChatCompletions {
    fn body(&self, out: &Outgoing<'_>) -> Value {
        let mut messages = vec![json!({ "role": "system", "content": out.system })];
        let turns =
            if out.native { conversation::native(out.conversation) } else { conversation::text_only(out.conversation) };
        for turn in turns {
            match turn {
                Turn::User(text) => messages.push(json!({ "role": "user", "content": text })),
                Turn::Assistant { text, calls } if calls.is_empty() => {
                    messages.push(json!({ "role": "assistant", "content": text.unwrap_or_default() }))
                }
                Turn::Assistant { text, calls } => {
                    let calls: Vec<Value> = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": { "name": c.call.name, "arguments": arguments_text(&c.call.arguments) },
                            })
                        })
                        .collect();
                    messages.push(json!({ "role": "assistant", "content": text, "tool_calls": calls }));
                }
                Turn::Results { results, notes } => {
                    for r in results {
                        messages.push(json!({ "role": "tool", "tool_call_id": r.call_id, "content": r.content }));
                    }
                    if !notes.is_empty() {
                        messages.push(json!({ "role": "user", "content": notes.join("\n\n") }));
                    }
                }
            }
        }
        let mut body = json!({ "model": out.model, "messages": messages });
        if out.native {
            let tools: Vec<Value> = out
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": { "name": t.name, "description": t.description, "parameters": t.parameters },
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match out.choice {
                ToolChoice::Required => json!("required"),
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
            };
        }
        if let Some(max) = out.max_tokens {
            body["max_tokens"] = json!(max);
        }
        if self.require_parameters {
            body["provider"] = json!({ "require_parameters": true });
        }
        body
    }

    fn reply(&self, body: &Value) -> Result<ModelReply, String> {
        let message = body
            .get("choices")
            .and_then(|c| c.get(0))
            .and_then(|c| c.get("message"))
            .ok_or("it has no choices[0].message")?;
        let mut calls = Vec::new();
        if let Some(list) = message.get("tool_calls").filter(|v| !v.is_null()) {
            let list = list.as_array().ok_or("message.tool_calls is not a list")?;
            for call in list {
                let function = call.get("function").unwrap_or(&Value::Null);
                calls.push(ProposedCall {
                    id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: function.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    arguments: function.get("arguments").cloned().unwrap_or(Value::Null),
                });
            }
        }
        // The shape of the API before tools, which some servers still answer in.
        if let Some(function) = message.get("function_call").filter(|f| f.is_object())
            && calls.is_empty()
        {
            calls.push(ProposedCall {
                id: None,
                name: function.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                arguments: function.get("arguments").cloned().unwrap_or(Value::Null),
            });
        }
        let text = match message.get("content") {
            Some(Value::String(s)) => Some(s.clone()),
            // Content as a list of parts, as some servers send it.
            Some(Value::Array(parts)) => {
                Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(""))
            }
            _ => None,
        }
        .filter(|t| !t.is_empty());
        let usage = body.get("usage").filter(|u| u.is_object()).map(|u| Usage {
            input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        });
        Ok(ModelReply { calls, text, usage, ..Default::default() })
    }
}

/// Arguments as the API carries them: the model's own string, verbatim, or an object as JSON.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_text_and_usage() {
        let body = json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "calculate", "arguments": "{\"expression\":\"6*7\"}"}}]
            }}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
        });
        let r = ChatCompletions { require_parameters: false }.reply(&body).unwrap();
        assert_eq!(r.calls[0].id.as_deref(), Some("call_a"));
        assert_eq!(r.calls[0].arguments, json!("{\"expression\":\"6*7\"}"));
        assert_eq!(r.text, None);
        assert_eq!(r.usage, Some(Usage { input_tokens: 12, output_tokens: 5 }));
    }

    #[test]
    fn odd_shapes_are_read_or_refused_without_panic() {
        let wire = ChatCompletions { require_parameters: false };
        for bad in [json!({}), json!({"choices": []}), json!({"choices": [{"message": {"tool_calls": 3}}]}), json!([1])]
        {
            assert!(wire.reply(&bad).is_err(), "{bad}");
        }
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]});
        assert_eq!(wire.reply(&parts).unwrap().text.as_deref(), Some("ab"));
        let legacy = json!({"choices": [{"message": {"function_call": {"name": "f", "arguments": "{}"}}}]});
        assert_eq!(wire.reply(&legacy).unwrap().calls[0].name, "f");
        let nameless = json!({"choices": [{"message": {"tool_calls": [{"function": {}}]}}]});
        assert_eq!(wire.reply(&nameless).unwrap().calls[0].name, "");
    }
}
