//! The Messages API: headers, tool_use in, tool_result back, one user message per turn.

use harness_core::{Loop, Message, RunOptions, RunStatus, Usage};
use harness_providers::Preset;
use serde_json::{Value, json};

use crate::server::{Canned, MockApi, anthropic_tool_uses};
use crate::{KEY, Notices, Steps, config, no_key, provider, registry};

#[tokio::test]
async fn a_full_run_with_two_tool_uses_answers_both_in_one_user_message() {
    let api = MockApi::start(vec![
        anthropic_tool_uses(&[
            ("toolu_1", "add", json!({"a": 1, "b": 2})),
            ("toolu_2", "add", json!({"a": "x", "b": 4})),
        ]),
        anthropic_tool_uses(&[("toolu_3", "finish", json!({"answer": 3}))]),
    ])
    .await;
    let provider = provider(config(Preset::Anthropic, &api.origin, &Notices::default()));
    let mut steps = Steps::default();
    let outcome = Loop::new(&provider, &registry())
        .options(RunOptions { max_steps: 3, ..RunOptions::default() })
        .run("sums", &mut steps)
        .await;
    assert_eq!((outcome.status, outcome.answer.clone()), (RunStatus::Finished, Some(json!(3))), "{outcome:?}");
    assert_eq!(outcome.usage, Usage { input_tokens: 40, output_tokens: 16, cached_input_tokens: 0 });
    assert_eq!(steps.0[1].2.as_deref(), Some("invalid_arguments"));

    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.path, "/v1/messages");
        assert_eq!(s.headers["x-api-key"], KEY);
        assert_eq!(s.headers["anthropic-version"], "2023-06-01");
        assert!(!s.headers.contains_key("authorization"));
        no_key("the request body", &s.raw);
    }
    let first = &seen[0].body;
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["max_tokens"], harness_providers::DEFAULT_MAX_REPLY_TOKENS);
    assert_eq!(first["tool_choice"], json!({"type": "any"}));
    assert!(first["system"][0]["text"].as_str().unwrap().contains("exactly one call"));
    assert_eq!(first["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    let add = &first["tools"][1];
    assert_eq!((add["name"].as_str(), add["input_schema"]["type"].as_str()), (Some("add"), Some("object")));
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "sums", "cache_control": {"type": "ephemeral"}}]}])
    );

    // The last step: finish forced by name, which Anthropic honours, with the whole tool list
    // and system prompt kept, so that the cached prefix survives.
    let second = &seen[1].body;
    assert_eq!(second["tool_choice"], json!({"type": "tool", "name": "finish"}));
    assert_eq!(second["tools"], first["tools"]);
    assert_eq!(second["system"], first["system"]);
    let m = second["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(
        m[1]["content"],
        json!([
            {"type": "text", "text": "Working on it."},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}},
            {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": "x", "b": 4}}
        ])
    );
    assert_eq!(m[2]["role"], "user");
    let blocks = m[2]["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0], json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"}));
    assert_eq!(blocks[1]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!((blocks[1]["tool_use_id"].as_str(), blocks[1]["is_error"].as_bool()), (Some("toolu_2"), Some(true)));
    let error: Value = serde_json::from_str(blocks[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(error["code"], "invalid_arguments");
}

#[tokio::test]
async fn a_401_in_the_messages_shape_says_what_the_server_said_and_which_variable_to_check() {
    let api = MockApi::start(vec![Canned::json(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}}),
    )])
    .await;
    let provider = provider(config(Preset::Anthropic, &api.origin, &Notices::default()));
    let e = crate::ask_once(&provider, &[Message::User { content: "x".into() }]).await.unwrap_err();
    no_key("the error", &e.message);
    assert!(e.message.contains(&format!("POST {}/v1/messages answered 401 Unauthorized", api.origin)), "{}", e.message);
    assert!(e.message.contains("invalid x-api-key [redacted]"), "{}", e.message);
    assert!(e.message.contains("Check the API key in ANTHROPIC_API_KEY"), "{}", e.message);
    assert_eq!((e.retries, api.seen().len()), (0, 1));
}

#[tokio::test]
async fn overloaded_529_is_retried() {
    let overloaded =
        Canned::json(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
    let api = MockApi::start(vec![overloaded, anthropic_tool_uses(&[("t", "finish", json!({"answer": 1}))])]).await;
    let notices = Notices::default();
    let provider = provider(config(Preset::Anthropic, &api.origin, &notices));
    let reply = crate::ask_once(&provider, &[Message::User { content: "x".into() }]).await.unwrap();
    assert_eq!((reply.retries, reply.calls[0].name.as_str()), (1, "finish"));
    assert!(notices.text().contains("retry 1/3") && notices.text().contains("Overloaded"), "{}", notices.text());
}
