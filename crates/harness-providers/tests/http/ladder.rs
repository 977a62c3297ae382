//! The router-mode ladder (native, constrained, prompt), the token limit, and what a cut
//! reply looks like, against the stand-in server.

use harness_core::{ModelProvider, RouterRequest, ToolChoice};
use harness_providers::{ConfigError, HttpProvider, Notice, Preset, RouterMode};
use serde_json::json;

use crate::server::{Canned, MockApi, openai_error, openai_text};
use crate::{Notices, ask_once, config, env, provider, registry};

fn user() -> Vec<harness_core::Message> {
    vec![harness_core::Message::User { content: "add 1 and 2".into() }]
}

#[tokio::test]
async fn a_refused_schema_moves_auto_mode_from_constrained_to_prompt_mode() {
    let api = MockApi::start(vec![
        openai_text("I would add them."),
        // llama.cpp, when a tool's schema has what its grammar converter does not take.
        Canned::json(
            400,
            json!({"error": {"code": 400, "type": "invalid_request_error",
                "message": "JSON schema error at #: unsupported $ref https://example.com/x.json, only references into the same document are supported"}}),
        ),
        openai_text("{\"tool\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"),
        openai_text("{\"tool\": \"finish\", \"arguments\": {\"answer\": 3}}"),
    ])
    .await;
    let notices = Notices::default();
    let provider = provider(config(Preset::LlamaCpp, &format!("{}/v1", api.origin), &notices));
    let reply = ask_once(&provider, &user()).await.unwrap();
    assert_eq!((reply.router_mode.as_deref(), reply.calls.len()), (Some("prompt"), 0));
    assert_eq!(reply.text.as_deref(), Some("{\"tool\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"));
    let tos: Vec<RouterMode> = notices
        .all()
        .iter()
        .map(|n| match n {
            Notice::Fallback { to, .. } => *to,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(tos, [RouterMode::Constrained, RouterMode::Prompt]);
    assert!(notices.text().contains("refused the response_format schema: JSON schema error"), "{}", notices.text());
    assert!(notices.text().contains("Pass --router-mode prompt to start there"), "{}", notices.text());

    let again = ask_once(&provider, &user()).await.unwrap();
    assert_eq!(again.router_mode.as_deref(), Some("prompt"));
    let seen = api.seen();
    assert_eq!(seen.len(), 4);
    assert!(seen[1].body.get("response_format").is_some());
    for prompt in &seen[2..] {
        assert!(prompt.body.get("response_format").is_none() && prompt.body.get("tools").is_none());
    }
    assert_eq!(notices.all().len(), 2);
}

#[tokio::test]
async fn a_fixed_constrained_mode_reports_a_refused_schema_with_the_way_out() {
    let api = MockApi::start(vec![openai_error(
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
    )])
    .await;
    let mut config = config(Preset::OpenAi, &format!("{}/v1", api.origin), &Notices::default());
    config.router_mode = RouterMode::Constrained;
    let provider = provider(config);
    assert_eq!(provider.router_mode(), RouterMode::Constrained);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert!(e.message.contains("'response_format' of type 'json_schema' is not supported"), "{}", e.message);
    assert!(e.message.contains("try --router-mode prompt"), "{}", e.message);
    assert_eq!(api.seen().len(), 1);
    assert!(api.seen()[0].body.get("tools").is_none());
}

#[tokio::test]
async fn anthropic_has_no_constrained_step_so_auto_goes_from_native_to_prompt() {
    let text = |t: &str| {
        Canned::json(
            200,
            json!({"content": [{"type": "text", "text": t}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 5, "output_tokens": 2}}),
        )
    };
    let api =
        MockApi::start(vec![text("Sure, 3."), text("{\"tool\": \"finish\", \"arguments\": {\"answer\": 3}}")]).await;
    let notices = Notices::default();
    let provider = provider(config(Preset::Anthropic, &api.origin, &notices));
    let reply = ask_once(&provider, &user()).await.unwrap();
    assert_eq!(reply.router_mode.as_deref(), Some("prompt"));
    assert!(matches!(notices.all().as_slice(), [Notice::Fallback { to: RouterMode::Prompt, .. }]));
    assert!(api.seen()[1].body.get("tools").is_none());

    let mut fixed = config(Preset::Anthropic, &api.origin, &notices);
    fixed.router_mode = RouterMode::Constrained;
    let e = HttpProvider::with_env(fixed, env(&[("ANTHROPIC_API_KEY", "k")])).unwrap_err();
    assert!(matches!(e, ConfigError::NoConstrainedMode { .. }));
    assert!(e.to_string().contains("has no constrained mode"), "{e}");
}

#[tokio::test]
async fn every_request_carries_the_token_limit_and_a_reply_cut_at_it_is_marked() {
    let cut = Canned::json(
        200,
        json!({"choices": [{"index": 0, "finish_reason": "length",
            "message": {"role": "assistant", "content": "{\"tool\": \"add\", \"arguments\": {\"a\": 1"}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 16, "prompt_tokens_details": {"cached_tokens": 32}}}),
    );
    let api = MockApi::start(vec![cut]).await;
    let mut config = config(Preset::Vllm, &format!("{}/v1", api.origin), &Notices::default());
    config.router_mode = RouterMode::Constrained;
    config.max_reply_tokens = Some(16);
    let provider = provider(config);
    assert_eq!(provider.max_reply_tokens(), 16);
    let reply = ask_once(&provider, &user()).await.unwrap();
    assert!(reply.truncated);
    assert_eq!(reply.finish_reason.as_deref(), Some("length"));
    assert_eq!(reply.usage.unwrap().cached_input_tokens, 32);
    assert_eq!(api.seen()[0].body["max_tokens"], 16);

    let mut zero = crate::config(Preset::Vllm, &format!("{}/v1", api.origin), &Notices::default());
    zero.max_reply_tokens = Some(0);
    let e = HttpProvider::with_env(zero, env(&[])).unwrap_err();
    assert!(e.to_string().contains("--max-reply-tokens 0"), "{e}");
}

#[tokio::test]
async fn a_forced_tool_in_prompt_mode_is_said_last_and_the_system_prompt_stays() {
    let api = MockApi::start(vec![
        openai_text("{\"tool\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"),
        openai_text("{\"tool\": \"finish\", \"arguments\": {\"answer\": 3}}"),
    ])
    .await;
    let mut config = config(Preset::Ollama, &format!("{}/v1", api.origin), &Notices::default());
    config.router_mode = RouterMode::Prompt;
    let provider = provider(config);
    let registry = registry();
    let conversation = user();
    for choice in [ToolChoice::Required, ToolChoice::Tool("finish".into())] {
        let request =
            RouterRequest { conversation: &conversation, tools: registry.definitions(), tool_choice: &choice };
        provider.complete(request).await.unwrap();
    }
    let seen = api.seen();
    let system = |i: usize| seen[i].body["messages"][0].clone();
    assert_eq!(system(0), system(1));
    let last = seen[1].body["messages"][1]["content"].as_str().unwrap().to_owned();
    assert_eq!(last, "add 1 and 2\n\nAt this turn you must call finish.");
}
