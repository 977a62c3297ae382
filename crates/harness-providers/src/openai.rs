//! The OpenAI chat completions wire format (`POST {base_url}/chat/completions`), which
//! OpenAI, OpenRouter, Ollama's `/v1`, llama.cpp's server, vLLM and LM Studio all speak.

use harness_core::{Arguments, ModelReply, ProposedCall, ToolChoice, ToolDefinition, Usage};
use serde_json::{Value, json};

use crate::constrained;
use crate::conversation::Turn;
use crate::http_provider::{Body, Outgoing, RouterMode, Wire, cut_at_limit, forcing};

/// Encodes requests and decodes replies of the chat completions API.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChatCompletions {
    /// Ask OpenRouter to route only to hosts that honour every parameter sent (`tools` and
    /// `tool_choice` above all).
    pub(crate) require_parameters: bool,
    /// The server honours a named tool choice (OpenAI's own API): a forced tool is sent by name
    /// and the tool list stays whole. Elsewhere it goes as `required` with that tool alone.
    pub(crate) named_choice: bool,
    /// The member that carries the token limit: OpenAI's own API takes `max_completion_tokens`
    /// (its reasoning models refuse `max_tokens`); every other server `max_tokens`.
    pub(crate) limit_field: &'static str,
    /// Send `prompt_cache_key` (OpenAI's own API), so that runs with the same tools and system
    /// prompt reach the same cache.
    pub(crate) cache_key: bool,
    /// The member and value that ask for a repetition penalty after a cut reply: llama.cpp's
    /// `repeat_penalty`, elsewhere OpenAI's `frequency_penalty`.
    pub(crate) penalty: (&'static str, f64),
}

impl ChatCompletions {
    /// Any OpenAI-compatible server: the forms every one of them takes.
    pub(crate) const COMPATIBLE: Self = Self {
        require_parameters: false,
        named_choice: false,
        limit_field: "max_tokens",
        cache_key: false,
        penalty: ("frequency_penalty", 0.5),
    };
}

impl Wire for ChatCompletions {
    fn body(&self, out: &Outgoing<'_>) -> Body {
        let mut messages = vec![json!({ "role": "system", "content": out.system })];
        for turn in out.turns() {
            push_turn(&mut messages, turn);
        }
        let mut body = json!({ "model": out.model, "messages": messages });
        let mut verbatim = Vec::new();
        match out.mode {
            RouterMode::Native => {
                let (tools, choice) = forcing(out.tools, out.choice, self.named_choice);
                body["tools"] = Value::Array(tools.into_iter().map(tool).collect());
                body["tool_choice"] = match choice {
                    ToolChoice::Required | ToolChoice::AnyBut(_) | ToolChoice::OneOf(_) => json!("required"),
                    ToolChoice::Auto => json!("auto"),
                    ToolChoice::None => json!("none"),
                    ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
                };
            }
            RouterMode::Constrained => {
                if let Some(format) = constrained::response_format(
                    out.tools,
                    out.choice,
                    out.max_tokens,
                    out.grounded.as_deref(),
                    &out.quoting,
                ) {
                    verbatim.push(("response_format", format));
                }
            }
            RouterMode::Prompt | RouterMode::Auto => {}
        }
        body[self.limit_field] = json!(out.max_tokens);
        if out.after_cut {
            body[self.penalty.0] = json!(self.penalty.1);
        }
        if self.cache_key {
            body["prompt_cache_key"] = json!(cache_key(out.system, out.tools));
        }
        if self.require_parameters {
            body["provider"] = json!({ "require_parameters": true });
        }
        Body { json: body, verbatim }
    }

    fn reply(&self, body: &Value) -> Result<ModelReply, String> {
        let choice = body.get("choices").and_then(|c| c.get(0)).ok_or("it has no choices[0].message")?;
        let message = choice.get("message").ok_or("it has no choices[0].message")?;
        let mut calls = Vec::new();
        if let Some(list) = message.get("tool_calls").filter(|v| !v.is_null()) {
            let list = list.as_array().ok_or("message.tool_calls is not a list")?;
            for call in list {
                let function = call.get("function").unwrap_or(&Value::Null);
                calls.push(ProposedCall {
                    id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: function.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    arguments: function.get("arguments").cloned().unwrap_or(Value::Null).into(),
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
                arguments: function.get("arguments").cloned().unwrap_or(Value::Null).into(),
            });
        }
        let finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_owned);
        Ok(ModelReply {
            calls,
            text: text_of(message.get("content")),
            // llama.cpp, vLLM and DeepSeek say `reasoning_content`; OpenRouter and Ollama `reasoning`.
            reasoning: text_of(message.get("reasoning_content")).or_else(|| text_of(message.get("reasoning"))),
            truncated: finish_reason.as_deref().is_some_and(cut_at_limit),
            finish_reason,
            usage: usage(body),
            ..Default::default()
        })
    }

    fn repeat_penalty(&self) -> Option<(&'static str, f64)> {
        Some(self.penalty)
    }

    fn constrains(&self) -> bool {
        true
    }
}

/// Adds one turn's messages.
fn push_turn(messages: &mut Vec<Value>, turn: Turn<'_>) {
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

/// A tool in the API's function format.
fn tool(t: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": { "name": t.name, "description": t.description, "parameters": t.parameters },
    })
}

/// Text as the APIs carry it: a string, or a list of parts (as some servers send content).
fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(""))
        }
        _ => None,
    }
    .filter(|t| !t.is_empty())
}

/// Token counts: `usage`, with the prompt tokens read from cache in OpenAI's
/// `prompt_tokens_details.cached_tokens` or, from llama.cpp, `timings.cache_n`.
fn usage(body: &Value) -> Option<Usage> {
    let u = body.get("usage").filter(|u| u.is_object())?;
    let n = |v: Option<&Value>| v.and_then(Value::as_u64);
    let cached = n(u.get("prompt_tokens_details").and_then(|d| d.get("cached_tokens")))
        .or_else(|| n(body.get("timings").and_then(|t| t.get("cache_n"))));
    Some(Usage {
        input_tokens: n(u.get("prompt_tokens")).unwrap_or(0),
        output_tokens: n(u.get("completion_tokens")).unwrap_or(0),
        cached_input_tokens: cached.unwrap_or(0),
    })
}

/// `prompt_cache_key`: the same for every request with this system prompt and these tools, so
/// that OpenAI routes them to the machine that holds their prefix. FNV-1a, for a value that
/// stays the same across builds and platforms.
fn cache_key(system: &str, tools: &[ToolDefinition]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(system.as_bytes());
    for t in tools {
        feed(tool(t).to_string().as_bytes());
    }
    format!("harness-{hash:016x}")
}

/// Arguments as the API carries them: the model's own string, verbatim, or an object as JSON.
fn arguments_text(arguments: &Arguments) -> String {
    match arguments {
        Arguments::Value(Value::String(s)) => s.clone(),
        Arguments::Value(Value::Null) => "{}".to_owned(),
        Arguments::Value(other) => other.to_string(),
        Arguments::Json(text) => text.get().to_owned(),
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
        let r = ChatCompletions::COMPATIBLE.reply(&body).unwrap();
        assert_eq!(r.calls[0].id.as_deref(), Some("call_a"));
        assert_eq!(r.calls[0].arguments, json!("{\"expression\":\"6*7\"}"));
        assert_eq!(r.text, None);
        assert_eq!(r.usage, Some(Usage { input_tokens: 12, output_tokens: 5, cached_input_tokens: 0 }));
    }

    #[test]
    fn odd_shapes_are_read_or_refused_without_panic() {
        let wire = ChatCompletions::COMPATIBLE;
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

    use crate::testing::{sent, steps};

    const OPENAI: ChatCompletions = ChatCompletions {
        named_choice: true,
        limit_field: "max_completion_tokens",
        cache_key: true,
        ..ChatCompletions::COMPATIBLE
    };

    fn names(body: &Value) -> Vec<&str> {
        body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn reads_the_finish_reason_reasoning_and_cached_tokens() {
        let cut = json!({
            "choices": [{"finish_reason": "length", "message": {"content": "{\"tool\": \"add\", \"argu", "reasoning_content": "Adding."}}],
            "usage": {"prompt_tokens": 90, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 64}}
        });
        let r = ChatCompletions::COMPATIBLE.reply(&cut).unwrap();
        assert!(r.truncated);
        assert_eq!((r.finish_reason.as_deref(), r.reasoning.as_deref()), (Some("length"), Some("Adding.")));
        assert_eq!(r.usage, Some(Usage { input_tokens: 90, output_tokens: 300, cached_input_tokens: 64 }));

        // llama.cpp without prompt_tokens_details: its timings say what came from the cache.
        let llama = json!({
            "choices": [{"finish_reason": "stop", "message": {"content": "hi", "reasoning": "r"}}],
            "usage": {"prompt_tokens": 88, "completion_tokens": 3}, "timings": {"cache_n": 87, "prompt_n": 1}
        });
        let r = ChatCompletions::COMPATIBLE.reply(&llama).unwrap();
        assert!(!r.truncated);
        assert_eq!((r.finish_reason.as_deref(), r.reasoning.as_deref()), (Some("stop"), Some("r")));
        assert_eq!(r.usage.unwrap().cached_input_tokens, 87);
    }

    #[test]
    fn a_forced_tool_goes_as_required_alone_unless_the_api_honours_its_name() {
        let conversation = &steps()[0];
        let finish = ToolChoice::Tool("finish".into());
        let body = sent(&ChatCompletions::COMPATIBLE, conversation, &finish, RouterMode::Native);
        assert_eq!((body["tool_choice"].clone(), names(&body)), (json!("required"), vec!["finish"]));
        assert_eq!(body["max_tokens"], 300);

        let body = sent(&OPENAI, conversation, &finish, RouterMode::Native);
        assert_eq!(body["tool_choice"], json!({"type": "function", "function": {"name": "finish"}}));
        assert_eq!(names(&body), ["finish", "add"]);
        assert_eq!(body["max_completion_tokens"], 300);
        assert!(body.get("max_tokens").is_none());

        let body = sent(&ChatCompletions::COMPATIBLE, conversation, &ToolChoice::Required, RouterMode::Native);
        assert_eq!((body["tool_choice"].clone(), names(&body)), (json!("required"), vec!["finish", "add"]));
    }

    #[test]
    fn constrained_mode_sends_a_schema_and_no_tools_and_prompt_mode_says_a_forced_tool_last() {
        let conversation = &steps()[1];
        let finish = ToolChoice::Tool("finish".into());
        let any = sent(&ChatCompletions::COMPATIBLE, conversation, &ToolChoice::Required, RouterMode::Constrained);
        assert!(any.get("tools").is_none() && any.get("tool_choice").is_none());
        let schema = &any["response_format"]["json_schema"]["schema"];
        assert_eq!(schema["oneOf"].as_array().unwrap().len(), 2);
        let forced = sent(&ChatCompletions::COMPATIBLE, conversation, &finish, RouterMode::Constrained);
        assert_eq!(
            forced["response_format"]["json_schema"]["schema"]["oneOf"][0]["properties"]["tool"]["const"],
            "finish"
        );
        assert_eq!(forced["response_format"]["json_schema"]["schema"]["oneOf"].as_array().unwrap().len(), 1);
        // Only the schema changes with the choice: the messages, the system prompt first, are
        // the same, and so is the prefix a server has cached.
        assert_eq!(any["messages"], forced["messages"]);

        // Prompt mode has nothing but words to force with: the forced tool is said last.
        let prompt = sent(&ChatCompletions::COMPATIBLE, conversation, &finish, RouterMode::Prompt);
        assert!(prompt.get("response_format").is_none() && prompt.get("tools").is_none());
        assert_eq!(prompt["messages"][0], forced["messages"][0]);
        let last = prompt["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
        assert!(last.ends_with("At this turn you must call finish."), "{last}");
    }

    #[test]
    fn each_request_is_the_previous_one_with_messages_appended() {
        for wire in [ChatCompletions::COMPATIBLE, OPENAI] {
            for mode in [RouterMode::Native, RouterMode::Constrained, RouterMode::Prompt] {
                let steps = steps();
                // Three steps that may call any tool, then the last one, which forces finish.
                let bodies: Vec<Value> =
                    steps[..3].iter().map(|c| sent(&wire, c, &ToolChoice::Required, mode)).collect();
                let finish = sent(&wire, &steps[3], &ToolChoice::Tool("finish".into()), mode);
                for (before, after) in bodies.iter().zip(bodies[1..].iter().chain([&finish])) {
                    let (old, new) = (before["messages"].as_array().unwrap(), after["messages"].as_array().unwrap());
                    assert!(new.len() > old.len() && new[..old.len()] == old[..], "{mode}: {old:?}\n{new:?}");
                    if wire.named_choice || after != &finish {
                        assert_eq!(before["tools"], after["tools"], "{mode}");
                    }
                    assert_eq!(before.get("prompt_cache_key"), after.get("prompt_cache_key"));
                }
            }
        }
        let key = sent(&OPENAI, &steps()[0], &ToolChoice::Required, RouterMode::Native)["prompt_cache_key"].clone();
        assert!(key.as_str().unwrap().starts_with("harness-"), "{key}");
        assert!(
            sent(&ChatCompletions::COMPATIBLE, &steps()[0], &ToolChoice::Required, RouterMode::Native)
                .get("prompt_cache_key")
                .is_none()
        );
    }
}
