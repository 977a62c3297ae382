//! Everything a server can do wrong, each ending in a clear, deterministic outcome.

use std::time::{Duration, Instant};

use harness_core::Message;
use harness_providers::{HttpProvider, Notice, Preset, RouterMode};
use serde_json::json;

use crate::server::{Canned, MockApi, openai_calls, openai_error, openai_text};
use crate::{KEY, Notices, ask_once, config, no_key, provider};

fn user() -> Vec<Message> {
    vec![Message::User { content: "add 1 and 2".into() }]
}

fn finish() -> Canned {
    openai_calls(&[("c1", "finish", r#"{"answer": 3}"#)])
}

async fn openai_at(api: &MockApi, notices: &Notices) -> HttpProvider {
    provider(config(Preset::OpenAi, &format!("{}/v1", api.origin), notices))
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_servers_wait() {
    let api =
        MockApi::start(vec![openai_error(429, "Rate limit reached for requests").header("retry-after", "1"), finish()])
            .await;
    let notices = Notices::default();
    let provider = openai_at(&api, &notices).await;
    let started = Instant::now();
    let reply = ask_once(&provider, &user()).await.unwrap();
    // A lower bound only: the wait is the server's second, not the 1 ms backoff of these tests.
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!((reply.retries, reply.calls[0].name.as_str(), api.seen().len()), (1, "finish", 2));
    match notices.all().as_slice() {
        [Notice::Retry { attempt: 1, of: 3, wait, server_asked: true, reason }] => {
            assert_eq!(*wait, Duration::from_secs(1));
            assert!(reason.contains("429") && reason.contains("Rate limit reached"), "{reason}");
        }
        other => panic!("expected one retry notice, got {other:?}"),
    }
    assert!(notices.text().contains("retry 1/3 in 1000 ms (the server's Retry-After)"), "{}", notices.text());
}

#[tokio::test]
async fn a_500_three_times_is_a_failure_after_the_allowed_retries_and_the_key_is_never_shown() {
    let echo = format!("internal error handling key {KEY}");
    let api = MockApi::start(vec![openai_error(500, &echo), openai_error(500, &echo), openai_error(500, &echo)]).await;
    let notices = Notices::default();
    let mut config = config(Preset::OpenAi, &format!("{}/v1", api.origin), &notices);
    config.http.retries = 2;
    let provider = provider(config);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert_eq!((e.retries, api.seen().len()), (2, 3));
    let url = format!("POST {}/v1/chat/completions", api.origin);
    assert!(e.message.starts_with(&format!("{url} answered 500 Internal Server Error: ")), "{}", e.message);
    assert!(e.message.ends_with("(after 2 retries)"), "{}", e.message);
    assert!(e.message.contains("[redacted]"), "{}", e.message);
    no_key("the error", &e.message);
    let notices_text = notices.text();
    assert_eq!(notices.all().len(), 2, "{notices_text}");
    assert!(notices_text.contains("retry 1/2") && notices_text.contains("retry 2/2"), "{notices_text}");
    no_key("the retry notices", &notices_text);
}

/// A provider at `api` that makes at most `retries` retries.
fn retrying(api: &MockApi, notices: &Notices, retries: u32) -> HttpProvider {
    let mut config = config(Preset::OpenAi, &format!("{}/v1", api.origin), notices);
    config.http.retries = retries;
    provider(config)
}

#[tokio::test]
async fn a_response_slower_than_the_timeout_is_a_timeout_naming_the_url_and_is_retried() {
    // The server would answer after a minute; the client gives up after 200 ms, then asks again.
    let slow = finish().delayed(Duration::from_secs(60));
    let api = MockApi::start(vec![slow.clone(), slow, finish()]).await;
    let notices = Notices::default();
    let mut config = config(Preset::OpenAi, &format!("{}/v1", api.origin), &notices);
    config.http.timeout = Duration::from_millis(200);
    config.http.retries = 1;
    let provider = provider(config);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    let want = format!("POST {}/v1/chat/completions did not answer within 0.200 s (--timeout)", api.origin);
    assert!(e.message.starts_with(&want), "{}", e.message);
    assert!(e.message.contains("raise --timeout"), "{}", e.message);
    assert_eq!((e.retries, api.seen().len()), (1, 2));
    assert!(e.outage, "a server that does not answer in time looks like one that is down");
    let reply = ask_once(&provider, &user()).await.unwrap();
    assert_eq!((reply.retries, reply.calls[0].name.as_str(), api.seen().len()), (0, "finish", 3));
}

#[tokio::test]
async fn a_body_that_is_not_json_says_so_and_suggests_the_base_url() {
    let api = MockApi::start(vec![Canned::raw(200, "<!doctype html><title>Open WebUI</title>")]).await;
    let provider = retrying(&api, &Notices::default(), 0);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert!(e.message.contains("answered 200 OK with a body that is not JSON"), "{}", e.message);
    assert!(e.message.contains("<!doctype html>"), "{}", e.message);
    assert!(e.message.contains("--base-url"), "{}", e.message);
    assert_eq!((e.retries, e.outage), (0, false));
}

#[tokio::test]
async fn a_body_cut_short_or_of_the_wrong_shape_is_retried() {
    let cut = Canned::raw(200, r#"{"id": "chatcmpl-1", "object": "chat.completion", "choi"#);
    let wrong = Canned::json(200, json!({"object": "list", "data": []}));
    let api = MockApi::start(vec![cut, wrong, finish()]).await;
    let notices = Notices::default();
    let reply = ask_once(&retrying(&api, &notices, 3), &user()).await.unwrap();
    assert_eq!((reply.retries, reply.calls[0].name.as_str(), api.seen().len()), (2, "finish", 3));
    let text = notices.text();
    assert!(text.contains("retry 1/3") && text.contains("not JSON"), "{text}");
    assert!(text.contains("retry 2/3") && text.contains("cannot read: it has no choices[0].message"), "{text}");
    let api = MockApi::start(vec![Canned::raw(200, r#"{"id": "chatcmpl-1", "choi"#)]).await;
    let e = ask_once(&retrying(&api, &notices, 0), &user()).await.unwrap_err();
    assert!(e.outage, "a body cut short is a server failing mid-answer: {}", e.message);
}

#[tokio::test]
async fn json_of_the_wrong_shape_is_an_error_not_a_panic() {
    let api = MockApi::start(vec![Canned::json(200, json!({"object": "list", "data": []}))]).await;
    let provider = retrying(&api, &Notices::default(), 0);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert!(e.message.contains("JSON this provider cannot read: it has no choices[0].message"), "{}", e.message);
}

#[tokio::test]
async fn request_timeouts_conflicts_rate_limits_and_every_5xx_are_retried() {
    for status in [408, 409, 429, 500, 502, 503, 504, 529] {
        let api = MockApi::start(vec![openai_error(status, "try again"), finish()]).await;
        let reply = ask_once(&retrying(&api, &Notices::default(), 1), &user()).await.unwrap();
        assert_eq!((reply.retries, api.seen().len()), (1, 2), "{status}");
    }
}

#[tokio::test]
async fn past_the_retry_budget_a_failure_is_not_retried_and_says_so_once() {
    let budget = std::sync::Arc::new(harness_providers::RetryBudget::new(0.0));
    let api = MockApi::start(vec![openai_error(503, "busy"); 14]).await;
    let notices = Notices::default();
    let mut config = config(Preset::OpenAi, &format!("{}/v1", api.origin), &notices);
    config.http.retries = 20;
    config.http.budget = Some(budget.clone());
    let provider = provider(config);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    let floor = harness_providers::RetryBudget::FLOOR;
    assert_eq!((u64::from(e.retries), api.seen().len() as u64), (floor, floor + 1));
    assert!(e.message.contains("not retried: the retry budget is spent"), "{}", e.message);
    assert!(e.outage, "a 503 is still a server failing");
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert_eq!(e.retries, 0);
    let spent: Vec<_> = notices.all().into_iter().filter(|n| matches!(n, Notice::BudgetSpent { .. })).collect();
    assert_eq!(spent.len(), 1, "{}", notices.text());
    assert!(budget.spent());
}

#[tokio::test]
async fn a_401_is_not_retried_and_says_what_the_server_said_and_what_to_check() {
    let said = format!("Incorrect API key provided: {KEY}. You can find your API key at the dashboard.");
    let api = MockApi::start(vec![openai_error(401, &said)]).await;
    let notices = Notices::default();
    let provider = openai_at(&api, &notices).await;
    let e = ask_once(&provider, &user()).await.unwrap_err();
    no_key("the error", &e.message);
    assert!(e.message.contains("answered 401 Unauthorized: Incorrect API key provided: [redacted]"), "{}", e.message);
    assert!(e.message.contains("Check the API key in OPENAI_API_KEY"), "{}", e.message);
    assert_eq!((e.retries, api.seen().len()), (0, 1));
    assert!(notices.all().is_empty());
}

#[tokio::test]
async fn client_errors_are_not_retried_and_each_says_what_to_check() {
    let cases = [
        (403, "You are not allowed to sample from this model", "not allowed to do this"),
        (404, "The model `nope` does not exist", "Check the model name \"test-model\" (--model)"),
        (404, "Not Found", "Check --base-url"),
        (400, "max_tokens is too large", "Check the model name"),
        (422, "messages: field required", "Check the model name"),
    ];
    for (status, said, hint) in cases {
        let api = MockApi::start(vec![openai_error(status, said)]).await;
        let provider = openai_at(&api, &Notices::default()).await;
        let e = ask_once(&provider, &user()).await.unwrap_err();
        assert!(e.message.contains(said) && e.message.contains(hint), "{status}: {}", e.message);
        assert!(e.message.contains("(not retried: a 4xx other than 408, 409 and 429"), "{status}: {}", e.message);
        assert_eq!((e.retries, api.seen().len(), e.outage), (0, 1, false), "{status}");
    }
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let notices = Notices::default();
    let mut config = config(Preset::LlamaCpp, &format!("http://127.0.0.1:{port}/v1"), &notices);
    config.http.retries = 1;
    let provider = provider(config);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    let want = format!("cannot reach POST http://127.0.0.1:{port}/v1/chat/completions: ");
    assert!(e.message.starts_with(&want), "{}", e.message);
    assert!(e.message.contains("check that the server is running"), "{}", e.message);
    assert_eq!(e.retries, 1);
    assert_eq!(notices.all().len(), 1);
}

#[tokio::test]
async fn an_error_inside_a_200_body_is_read_and_retried_by_its_code() {
    // OpenRouter reports some upstream failures this way.
    let upstream = Canned::json(200, json!({"error": {"message": "Upstream overloaded", "code": 502}}));
    let api = MockApi::start(vec![upstream, finish()]).await;
    let notices = Notices::default();
    let provider = provider(config(Preset::OpenRouter, &format!("{}/api/v1", api.origin), &notices));
    let reply = ask_once(&provider, &user()).await.unwrap();
    assert_eq!(reply.retries, 1);
    assert!(notices.text().contains("Upstream overloaded (in the body of a 200 answer)"), "{}", notices.text());
}

#[tokio::test]
async fn auto_mode_steps_down_to_constrained_mode_when_the_server_refuses_tools() {
    let api = MockApi::start(vec![
        Canned::json(400, json!({"error": "registry.ollama.ai/library/gemma:2b does not support tools"})),
        openai_text("```json\n{\"tool\": \"finish\", \"arguments\": {\"answer\": 3}}\n```"),
        openai_text("{\"tool\": \"finish\", \"arguments\": {\"answer\": 3}}"),
    ])
    .await;
    let notices = Notices::default();
    let provider = provider(config(Preset::Ollama, &format!("{}/v1", api.origin), &notices));
    let reply = ask_once(&provider, &user()).await.unwrap();
    assert_eq!(reply.router_mode.as_deref(), Some("constrained"));
    assert_eq!(provider.router_mode(), RouterMode::Constrained);
    assert!(notices.text().contains("does not support tools"), "{}", notices.text());
    assert!(notices.text().contains("switching to constrained mode"), "{}", notices.text());
    // Later requests start in constrained mode: no refusal first.
    let again = ask_once(&provider, &user()).await.unwrap();
    assert_eq!(again.router_mode.as_deref(), Some("constrained"));
    let seen = api.seen();
    assert_eq!(seen.len(), 3);
    assert!(seen[0].body.get("tools").is_some());
    for later in &seen[1..] {
        assert!(later.body.get("tools").is_none() && later.body.get("tool_choice").is_none());
        assert_eq!(later.body["response_format"]["type"], "json_schema");
    }
    assert_eq!(notices.all().len(), 1);
}

#[tokio::test]
async fn native_mode_reports_a_tool_refusal_with_the_way_out() {
    // llama.cpp without --jinja answers 500 to tools; retrying it would change nothing.
    let refusal = Canned::json(
        500,
        json!({"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}),
    );
    let api = MockApi::start(vec![refusal]).await;
    let mut config = config(Preset::LlamaCpp, &format!("{}/v1", api.origin), &Notices::default());
    config.router_mode = RouterMode::Native;
    let provider = provider(config);
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert!(e.message.contains("tools param requires --jinja flag"), "{}", e.message);
    assert!(
        e.message.contains("--router-mode constrained") && e.message.contains("--tool-choice auto"),
        "{}",
        e.message
    );
    assert_eq!((e.retries, api.seen().len()), (0, 1));
}

#[tokio::test]
async fn a_retry_after_longer_than_the_harness_waits_ends_the_request_at_once() {
    let api = MockApi::start(vec![openai_error(429, "slow down").header("retry-after", "3600")]).await;
    let provider = openai_at(&api, &Notices::default()).await;
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert!(e.message.contains("asked to retry after 3600 s, longer than the 5 s the harness waits"), "{}", e.message);
    assert_eq!(api.seen().len(), 1);
}

#[tokio::test]
async fn an_answer_larger_than_any_reply_is_refused_not_read_to_the_end() {
    let api = MockApi::start(vec![Canned::raw(200, &"x".repeat(17 << 20))]).await;
    let provider = openai_at(&api, &Notices::default()).await;
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert!(e.message.contains("answered with more than 16777216 bytes"), "{}", e.message);
    assert_eq!(e.retries, 0);
}

#[tokio::test]
async fn an_http_endpoint_that_redirects_to_https_is_refused_with_what_to_do() {
    // A plain http client loads no root certificates; a redirect to https would otherwise fail
    // as an unknown certificate issuer.
    let api =
        MockApi::start(vec![Canned::raw(307, "").header("location", "https://api.example.com/v1/chat/completions")])
            .await;
    let provider = openai_at(&api, &Notices::default()).await;
    let e = ask_once(&provider, &user()).await.unwrap_err();
    assert!(
        e.message.contains("redirected to https://api.example.com/v1/chat/completions: give the https base URL"),
        "{}",
        e.message
    );
    assert_eq!(api.seen().len(), 1);
}

#[tokio::test]
async fn an_http_endpoint_that_redirects_to_http_is_followed() {
    let api = MockApi::start(vec![Canned::raw(307, "").header("location", "/v2/chat/completions"), finish()]).await;
    let provider = openai_at(&api, &Notices::default()).await;
    let reply = ask_once(&provider, &user()).await.unwrap();
    assert_eq!(reply.calls[0].name, "finish");
    let seen = api.seen();
    assert_eq!((seen.len(), seen[1].path.as_str()), (2, "/v2/chat/completions"));
}
