//! The model's context: where its size comes from, what a server's properties change, and the
//! repetition penalty asked for after a cut reply.

use harness_core::{EarlyFinish, Loop, RunAbout, RunOptions, RunStatus};
use harness_providers::{Preset, RouterMode};
use serde_json::{Value, json};

use crate::server::{Canned, MockApi, openai_calls, openai_text};
use crate::{Notices, config, provider, registry};

/// Options for a run whose model finishes at once: a small context marks a small model, which
/// is offered `finish` only once a tool has answered, unless the operator allows it.
fn finish_at_once() -> RunOptions {
    RunOptions { early_finish: EarlyFinish::Allowed, ..RunOptions::default() }
}

/// Runs `request` traced, every line kept.
async fn traced(provider: &harness_providers::HttpProvider, options: &RunOptions) -> (RunStatus, Vec<Value>) {
    let mut lines: Vec<Value> = Vec::new();
    let registry = registry();
    let mut agent = Loop::new(provider, &registry).options(*options);
    let outcome = agent.run_traced("add 4 and 5", &RunAbout::default(), &mut lines).await;
    (outcome.status, lines)
}

#[tokio::test]
async fn llama_cpp_props_give_the_context_and_a_template_without_tools_starts_constrained() {
    let props = json!({
        "default_generation_settings": {"n_ctx": 2048},
        "chat_template_caps": {"supports_tools": false}
    });
    let add = openai_text(r#"{"tool": "add", "arguments": {"a": 4, "b": 5}}"#);
    let finish = openai_text(r#"{"tool": "finish", "arguments": {"answer": 9}}"#);
    let api = MockApi::with_props(vec![add, finish], Some(props)).await;
    let provider = provider(config(Preset::LlamaCpp, &format!("{}/v1", api.origin), &Notices::default()));
    let (status, lines) = traced(&provider, &RunOptions::default()).await;
    assert_eq!(status, RunStatus::Finished);

    let context = &lines[0]["context"];
    assert_eq!((context["tokens"].as_u64(), context["source"].as_str()), (Some(2048), Some("server")), "{context}");
    assert!(context["tools_tokens"].as_u64() > Some(0), "{context}");
    assert_eq!(lines.last().unwrap()["context"]["window"], *context);
    // Constrained from the start: no tools sent, the schema instead, and the tools listed one
    // line each in a context that small.
    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].body.get("tools").is_none() && seen[0].body.get("response_format").is_some());
    let system = seen[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("- add(a: integer, b: integer): Add two integers.") && !system.contains("JSON Schema"));
    assert_eq!(provider.router_mode(), RouterMode::Constrained);
    // A small model: the first schema has no finish branch, the one after a result has; the
    // system prompt is the same (the prefix cache keeps it).
    let branches = |i: usize| seen[i].body["response_format"]["json_schema"]["schema"]["oneOf"].to_string();
    assert!(!branches(0).contains(r#""const":"finish""#) && branches(1).contains(r#""const":"finish""#));
    assert_eq!(seen[1].body["messages"][0], seen[0].body["messages"][0]);
    // The result goes back as the call, its value, and what to do next.
    let note = seen[1].body["messages"][3]["content"].as_str().unwrap();
    assert_eq!(note, r#"add({"a":4,"b":5}) = 9. If this answers the request, call finish with answer 9."#);
    // A small model's reply is short: 256 tokens at most, below the configured 1024.
    assert_eq!(seen[0].body["max_tokens"], json!(256), "{}", seen[0].body);
}

#[tokio::test]
async fn without_props_the_context_is_the_configured_one_else_the_preset_default() {
    for (configured, expected) in [(Some(3000), (Some(3000), Some("config"))), (None, (Some(4096), Some("default")))] {
        let api = MockApi::start(vec![openai_calls(&[("c1", "finish", r#"{"answer": 9}"#)])]).await;
        let mut config = config(Preset::LlamaCpp, &format!("{}/v1", api.origin), &Notices::default());
        config.context_tokens = configured;
        let provider = provider(config);
        let (status, lines) = traced(&provider, &finish_at_once()).await;
        assert_eq!(status, RunStatus::Finished);
        let context = &lines[0]["context"];
        assert_eq!((context["tokens"].as_u64(), context["source"].as_str()), expected, "{context}");
        assert_eq!(provider.router_mode(), RouterMode::Auto, "no props: the ladder starts at the top");
    }
}

/// The context a run with `preset` at `api` records, and where it came from.
async fn context_from(preset: Preset, api: &MockApi, model: &str) -> (Option<u64>, Option<String>) {
    let mut config = config(preset, &format!("{}/v1", api.origin), &Notices::default());
    config.model = Some(model.to_owned());
    let (status, lines) = traced(&provider(config), &finish_at_once()).await;
    assert_eq!(status, RunStatus::Finished);
    let context = &lines[0]["context"];
    (context["tokens"].as_u64(), context["source"].as_str().map(str::to_owned))
}

/// Ollama's `/api/show` for a model whose parameters set `num_ctx`, in its documented shape.
fn ollama_show(num_ctx: Option<u64>) -> Value {
    let mut parameters =
        String::from("stop                           \"<|im_end|>\"\ntemperature                    0.7");
    if let Some(n) = num_ctx {
        parameters.push_str(&format!("\nnum_ctx                        {n}"));
    }
    json!({"parameters": parameters, "model_info": {"qwen2.context_length": 32768}, "details": {"family": "qwen2"}})
}

/// Ollama's `/api/ps` with one model loaded at `context_length`, in its documented shape.
fn ollama_ps(name: &str, context_length: u64) -> Value {
    json!({"models": [{"name": name, "model": name, "size": 492523008, "size_vram": 0, "context_length": context_length}]})
}

#[tokio::test]
async fn ollama_says_the_context_of_a_loaded_model_else_the_num_ctx_of_its_parameters() {
    let finish = || openai_calls(&[("c1", "finish", r#"{"answer": 9}"#)]);
    // Loaded: what its requests really get wins over the parameters; an untagged name is :latest.
    let endpoints = vec![("/api/ps", ollama_ps("qwen2.5:latest", 2048)), ("/api/show", ollama_show(Some(8192)))];
    let api = MockApi::with_endpoints(vec![finish()], endpoints).await;
    assert_eq!(context_from(Preset::Ollama, &api, "qwen2.5").await, (Some(2048), Some("server".into())));
    // Another model loaded: this one's parameters say.
    let endpoints = vec![("/api/ps", ollama_ps("llama3.2:1b", 2048)), ("/api/show", ollama_show(Some(8192)))];
    let api = MockApi::with_endpoints(vec![finish()], endpoints).await;
    assert_eq!(context_from(Preset::Ollama, &api, "qwen2.5:7b").await, (Some(8192), Some("server".into())));
    // Neither: the model's trained length is not what it runs at; the preset's default is.
    let endpoints = vec![("/api/ps", json!({"models": []})), ("/api/show", ollama_show(None))];
    let api = MockApi::with_endpoints(vec![finish()], endpoints).await;
    assert_eq!(context_from(Preset::Ollama, &api, "qwen2.5:7b").await, (Some(4096), Some("default".into())));
}

#[tokio::test]
async fn openrouter_model_list_gives_the_context_of_the_host_it_routes_to_first() {
    let list = json!({"data": [
        {"id": "other/model", "context_length": 1000000, "top_provider": {"context_length": 1000000}},
        {"id": "test/model", "context_length": 131072, "top_provider": {"context_length": 65536, "max_completion_tokens": 8192}},
        {"id": "bare/model", "context_length": 32768, "top_provider": {}},
    ]});
    for (model, expected) in [("test/model", 65536), ("bare/model", 32768)] {
        let finish = openai_calls(&[("c1", "finish", r#"{"answer": 9}"#)]);
        let api = MockApi::with_endpoints(vec![finish], vec![("/v1/models", list.clone())]).await;
        assert_eq!(context_from(Preset::OpenRouter, &api, model).await, (Some(expected), Some("server".into())));
    }
    let finish = openai_calls(&[("c1", "finish", r#"{"answer": 9}"#)]);
    let api = MockApi::with_endpoints(vec![finish], vec![("/v1/models", list)]).await;
    let unlisted = context_from(Preset::OpenRouter, &api, "unlisted/model").await;
    assert_eq!(
        unlisted,
        (Some(128_000), Some("default".into())),
        "a model the list does not name: the preset's default"
    );
}

/// A reply whose call was cut at the token limit.
fn cut_call() -> Canned {
    let call = json!({"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 4, \"b\""}});
    Canned::json(
        200,
        json!({
            "choices": [{"index": 0, "finish_reason": "length",
                "message": {"role": "assistant", "content": null, "tool_calls": [call]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 300, "total_tokens": 310}
        }),
    )
}

#[tokio::test]
async fn after_a_cut_reply_the_next_request_asks_for_a_repeat_penalty_and_the_trace_says_so() {
    let api = MockApi::start(vec![cut_call(), openai_calls(&[("c2", "finish", r#"{"answer": 9}"#)])]).await;
    let provider = provider(config(Preset::LlamaCpp, &format!("{}/v1", api.origin), &Notices::default()));
    let (status, lines) = traced(&provider, &finish_at_once()).await;
    assert_eq!(status, RunStatus::Finished);
    let seen = api.seen();
    assert_eq!(seen[0].body.get("repeat_penalty"), None);
    assert_eq!(seen[1].body["repeat_penalty"], 1.2);
    assert_eq!(lines[1]["error"]["code"], "reply_truncated");
    assert_eq!((lines[1].get("repeat_penalty"), &lines[2]["repeat_penalty"]), (None, &json!(true)));
}

#[tokio::test]
async fn replies_cut_max_truncated_times_in_a_row_end_the_run_reply_truncated() {
    let api = MockApi::start(vec![cut_call(), cut_call(), cut_call()]).await;
    let provider = provider(config(Preset::OpenAi, &format!("{}/v1", api.origin), &Notices::default()));
    let (status, lines) = traced(&provider, &finish_at_once()).await;
    assert_eq!(status, RunStatus::ReplyTruncated);
    assert_eq!(api.seen().len(), 2, "the default limit is 2 in a row");
    assert_eq!(api.seen()[1].body["frequency_penalty"], 0.5);
    let end = lines.last().unwrap();
    assert_eq!((end["status"].as_str(), end["steps"].as_u64()), (Some("reply_truncated"), Some(2)));
    assert_eq!(end["error"]["details"]["times"], 2);
    assert!(end["error"]["details"]["kept_writing"].as_str().unwrap().starts_with("add {"), "{end}");
}
