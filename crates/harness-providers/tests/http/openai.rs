//! The chat completions API: what the harness sends, and whole runs through the loop.

use harness_core::{Loop, Message, NoTrace, RunOptions, RunStatus, Usage};
use harness_providers::{Notice, Preset, RouterMode};
use serde_json::{Value, json};

use crate::server::{MockApi, openai_calls, openai_text};
use crate::{KEY, Notices, Steps, config, no_key, provider, registry};

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

#[tokio::test]
async fn a_full_run_sends_tools_tool_choice_and_results_and_ends_in_finish() {
    let api = MockApi::start(vec![
        openai_calls(&[("call_a", "add", r#"{"a": 2, "b": 3}"#)]),
        openai_calls(&[("call_b", "finish", r#"{"answer": 5}"#)]),
    ])
    .await;
    let notices = Notices::default();
    let provider = provider(config(Preset::OpenAi, &format!("{}/v1", api.origin), &notices));
    let mut steps = Steps::default();
    let options = RunOptions { max_steps: 2, ..RunOptions::default() };
    let outcome = Loop::new(&provider, &registry()).options(options).run("add 2 and 3", &mut steps).await;

    assert_eq!(outcome.status, RunStatus::Finished, "{:?}", outcome.error);
    assert_eq!(outcome.answer, Some(json!(5)));
    assert_eq!(outcome.usage, Usage { input_tokens: 20, output_tokens: 6, cached_input_tokens: 0 });
    assert_eq!(outcome.retries, 0);
    let usage = Some(Usage { input_tokens: 10, output_tokens: 3, cached_input_tokens: 0 });
    assert_eq!(steps.0, vec![(Some("native".into()), usage, None), (Some("native".into()), usage, None)]);

    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.path, "/v1/chat/completions");
        assert_eq!(s.headers["authorization"], format!("Bearer {KEY}"));
        assert_eq!(s.headers["content-type"], "application/json");
        no_key("the request body", &s.raw);
    }

    let first = &seen[0].body;
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["tool_choice"], "required");
    let names: Vec<&str> =
        first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["finish", "add"]);
    let add = &first["tools"][1];
    assert_eq!(add["type"], "function");
    assert_eq!(add["function"]["description"], "Add two integers.");
    assert_eq!(add["function"]["parameters"]["required"], json!(["a", "b"]));
    let m = messages(first);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0]["role"], "system");
    let system = m[0]["content"].as_str().unwrap();
    assert!(system.contains("exactly one call") && system.contains("finish"), "{system}");
    assert_eq!(m[1], json!({"role": "user", "content": "add 2 and 3"}));

    // The last step of the budget forces finish: `required` with finish alone offered, the
    // form every server honours (this is not OpenAI's own host).
    let second = &seen[1].body;
    assert_eq!(second["tool_choice"], "required");
    assert_eq!(second["tools"].as_array().unwrap().len(), 1);
    assert_eq!(second["tools"][0]["function"]["name"], "finish");
    for s in &seen {
        assert_eq!(s.body["max_tokens"], harness_providers::DEFAULT_MAX_REPLY_TOKENS);
    }
    let m = messages(second);
    assert_eq!(m.len(), 4);
    assert_eq!(
        m[2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": r#"{"a": 2, "b": 3}"#}}
        ]})
    );
    assert_eq!(m[3], json!({"role": "tool", "tool_call_id": "call_a", "content": "5"}));
    assert!(notices.all().is_empty(), "{}", notices.text());
}

#[tokio::test]
async fn arguments_that_are_not_json_are_fed_back_as_invalid_json_to_that_call() {
    let api = MockApi::start(vec![
        openai_calls(&[("call_x", "add", r#"{"a": 1, "b": "#)]),
        openai_calls(&[("call_y", "finish", r#"{"answer": "gave up"}"#)]),
    ])
    .await;
    let provider = provider(config(Preset::OpenAi, &format!("{}/v1", api.origin), &Notices::default()));
    let outcome = Loop::new(&provider, &registry()).run("add", &mut NoTrace).await;
    assert_eq!((outcome.status, outcome.steps), (RunStatus::Finished, 2));

    let second = &api.seen()[1].body;
    let m = messages(second);
    // The model's broken string goes back verbatim, and the error answers that call.
    assert_eq!(m[2]["tool_calls"][0]["function"]["arguments"], r#"{"a": 1, "b": "#);
    assert_eq!((m[3]["role"].as_str(), m[3]["tool_call_id"].as_str()), (Some("tool"), Some("call_x")));
    let fed_back: Value = serde_json::from_str(m[3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(fed_back["code"], "invalid_json");
}

#[tokio::test]
async fn a_call_in_fenced_text_with_empty_tool_calls_runs_and_its_result_goes_back_as_text() {
    let fenced = "Sure:\n```json\n{\"tool\": \"add\", \"arguments\": {\"a\": 4, \"b\": 5}}\n```";
    let api =
        MockApi::start(vec![openai_text(fenced), openai_calls(&[("call_f", "finish", r#"{"answer": 9}"#)])]).await;
    let mut config = config(Preset::Ollama, &format!("{}/v1", api.origin), &Notices::default());
    config.router_mode = RouterMode::Native;
    let provider = provider(config);
    let outcome = Loop::new(&provider, &registry()).run("add 4 and 5", &mut NoTrace).await;
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!(9))));

    let m = messages(&api.seen()[1].body).clone();
    assert_eq!(m[2], json!({"role": "assistant", "content": fenced}));
    // No structured call to answer: the result is a user message.
    assert_eq!(m[3], json!({"role": "user", "content": "Result of add: 9"}));
    assert_eq!(m.len(), 4);
}

#[tokio::test]
async fn a_server_that_ignores_tool_choice_moves_auto_mode_to_constrained_mode_within_the_step() {
    // As llama.cpp does with a model whose template has no tools: tools accepted, then prose.
    let api = MockApi::start(vec![
        openai_text("The sum is 9."),
        openai_text("{\"tool\": \"add\", \"arguments\": {\"a\": 4, \"b\": 5}}"),
        openai_text("{\"tool\": \"finish\", \"arguments\": {\"answer\": 9}}"),
    ])
    .await;
    let notices = Notices::default();
    let provider = provider(config(Preset::LlamaCpp, &format!("{}/v1", api.origin), &notices));
    let mut steps = Steps::default();
    let outcome = Loop::new(&provider, &registry()).run("add 4 and 5", &mut steps).await;
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!(9))));

    // The prose is set aside and the step asked again, constrained: every reply is a call, and
    // the tokens of the answer set aside still count.
    let modes: Vec<(Option<&str>, Option<&str>)> =
        steps.0.iter().map(|(mode, _, error)| (mode.as_deref(), error.as_deref())).collect();
    assert_eq!(modes, [(Some("constrained"), None), (Some("constrained"), None)]);
    assert_eq!(steps.0[0].1, Some(Usage { input_tokens: 14, output_tokens: 4, cached_input_tokens: 0 }));
    assert!(
        matches!(notices.all().as_slice(), [Notice::Fallback { to: RouterMode::Constrained, .. }]),
        "{}",
        notices.text()
    );
    assert!(notices.text().contains("ignored the tools"), "{}", notices.text());

    let seen = api.seen();
    assert!(seen[0].body.get("tools").is_some());
    for later in &seen[1..] {
        assert!(later.body.get("tools").is_none() && later.body.get("tool_choice").is_none());
        let system = messages(&later.body)[0]["content"].as_str().unwrap().to_owned();
        // llama.cpp's default context (no /props here) is small: one line a tool.
        assert!(
            system.contains("- add(a: integer, b: integer): Add two integers.")
                && system.contains("{\"tool\": NAME, \"arguments\": {...}}"),
            "{system}"
        );
        // The schema names the tool before its arguments: the grammar makes the model choose first.
        let format = later.raw.find("\"response_format\"").unwrap();
        let schema = &later.raw[format..];
        assert!(schema.find("\"tool\":{\"const\"").unwrap() < schema.find("\"arguments\":").unwrap(), "{schema}");
    }
    // A small context marks a small model: no finish before a tool has answered, then every tool.
    let tools = |i: usize| -> Vec<String> {
        let branches = seen[i].body["response_format"]["json_schema"]["schema"]["oneOf"].as_array().unwrap().clone();
        branches.iter().map(|b| b["properties"]["tool"]["const"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(tools(1), ["add"]);
    assert_eq!(tools(2), ["finish", "add"]);
    let add = &seen[2].body["response_format"]["json_schema"]["schema"]["oneOf"][1];
    assert_eq!(add["properties"]["arguments"]["required"], json!(["a", "b"]));
    // The step asked again holds the same conversation; the next appends the call and its result.
    let m = messages(&seen[2].body);
    assert_eq!(
        m[2],
        json!({"role": "assistant", "content": "{\"tool\": \"add\", \"arguments\": {\"a\": 4, \"b\": 5}}"})
    );
    assert_eq!(
        m[3],
        json!({"role": "user", "content": "add({\"a\":4,\"b\":5}) = 9. If this answers the request, call finish with answer 9."})
    );
    assert_eq!(m.len(), 4);
}

#[tokio::test]
async fn two_calls_in_one_reply_run_in_order_and_each_result_answers_its_call() {
    let api = MockApi::start(vec![
        openai_calls(&[("c1", "add", r#"{"a": 1, "b": 2}"#), ("c2", "add", r#"{"a": 3, "b": 4}"#)]),
        openai_calls(&[("c3", "finish", r#"{"answer": [3, 7]}"#)]),
    ])
    .await;
    let provider = provider(config(Preset::OpenAi, &format!("{}/v1", api.origin), &Notices::default()));
    let mut steps = Steps::default();
    let outcome = Loop::new(&provider, &registry()).run("two sums", &mut steps).await;
    assert_eq!((outcome.status, outcome.steps), (RunStatus::Finished, 3));
    // Usage is counted once per reply, on the step that asked.
    assert_eq!(outcome.usage, Usage { input_tokens: 20, output_tokens: 6, cached_input_tokens: 0 });
    assert!(steps.0[0].1.is_some() && steps.0[1].1.is_none());

    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    let m = messages(&seen[1].body);
    assert_eq!(m[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(m[3], json!({"role": "tool", "tool_call_id": "c1", "content": "3"}));
    assert_eq!(m[4], json!({"role": "tool", "tool_call_id": "c2", "content": "7"}));
}

#[tokio::test]
async fn a_reply_with_no_call_and_no_json_is_no_json_fed_back_with_the_shape() {
    let api = MockApi::start(vec![
        openai_text("I cannot help with that."),
        openai_calls(&[("c1", "finish", r#"{"answer": "none"}"#)]),
    ])
    .await;
    let mut config = config(Preset::OpenAi, &format!("{}/v1", api.origin), &Notices::default());
    config.router_mode = RouterMode::Native;
    let provider = provider(config);
    let mut steps = Steps::default();
    let outcome = Loop::new(&provider, &registry())
        .options(RunOptions { max_steps: 2, ..RunOptions::default() })
        .run("x", &mut steps)
        .await;
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!("none"))));
    assert_eq!(steps.0[0].2.as_deref(), Some("no_json"));
    let m = messages(&api.seen()[1].body).clone();
    assert_eq!(m[2], json!({"role": "assistant", "content": "I cannot help with that."}));
    let fed_back = m[3]["content"].as_str().unwrap();
    assert!(fed_back.starts_with("Your reply could not be used: "), "{fed_back}");
    assert!(fed_back.contains("\"code\":\"no_json\"") && fed_back.contains("arguments"), "{fed_back}");
}

#[tokio::test]
async fn a_server_out_of_answers_fails_the_request_without_retrying_it() {
    let api = MockApi::start(vec![]).await;
    let provider = provider(config(Preset::OpenAi, &format!("{}/v1", api.origin), &Notices::default()));
    let e = crate::ask_once(&provider, &[Message::User { content: "x".into() }]).await.unwrap_err();
    assert!(e.message.contains("418") && e.message.contains("mock: no canned reply left"), "{}", e.message);
    assert_eq!((e.retries, api.seen().len()), (0, 1));
}

#[tokio::test]
async fn the_tool_choice_override_applies_to_required_but_never_to_a_forced_finish() {
    let api = MockApi::start(vec![
        openai_calls(&[("c1", "add", r#"{"a": 1, "b": 1}"#)]),
        openai_calls(&[("c2", "finish", r#"{"answer": 2}"#)]),
    ])
    .await;
    let mut config = config(Preset::OpenAi, &format!("{}/v1", api.origin), &Notices::default());
    config.tool_choice = Some(harness_core::ToolChoice::Tool("add".into()));
    let provider = provider(config);
    let outcome = Loop::new(&provider, &registry())
        .options(RunOptions { max_steps: 2, ..RunOptions::default() })
        .run("x", &mut NoTrace)
        .await;
    assert_eq!(outcome.status, RunStatus::Finished);
    let seen = api.seen();
    let offered = |i: usize| -> Vec<String> {
        seen[i].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!((&seen[0].body["tool_choice"], offered(0)), (&json!("required"), vec!["add".to_owned()]));
    assert_eq!((&seen[1].body["tool_choice"], offered(1)), (&json!("required"), vec!["finish".to_owned()]));
}
