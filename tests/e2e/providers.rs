//! `harness run --provider openai` against a model API stand-in on 127.0.0.1: a whole run
//! through the binary, failures and their exit codes, and the API key kept out of every output.

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Scratch, error_details, ran, read_http_message, snapshot};

pub(crate) const KEY: &str = "sk-e2e-k3y-that-must-never-print";

/// A one-thread HTTP/1.1 server that answers each connection with the next canned
/// `(status, body)` and records each request, head and body.
pub(crate) struct Api {
    pub(crate) base_url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Api {
    pub(crate) fn serve(replies: Vec<(u16, Value)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for (status, body) in replies {
                let Ok((stream, _)) = listener.accept() else { return };
                stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut reader = BufReader::new(stream);
                let (head, request_body, read) = read_http_message(&mut reader);
                read.unwrap();
                log.lock().unwrap().push(format!("{head}\r\n{}", String::from_utf8_lossy(&request_body)));
                let body = body.to_string();
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let mut stream = reader.into_inner();
                stream.write_all(response.as_bytes()).unwrap();
            }
        });
        Self { base_url, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

pub(crate) fn call(id: &str, name: &str, arguments: Value) -> (u16, Value) {
    (
        200,
        json!({
            "id": "chatcmpl-e2e", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        }),
    )
}

/// `harness run REQUEST --provider openai` at `api`, with the key in OPENAI_API_KEY.
pub(crate) fn harness(s: &Scratch, api: &Api, request: &str) -> Command {
    let mut cmd = s.harness();
    cmd.args(["run", request, "--provider", "openai", "--model", "test-model", "--base-url", &api.base_url])
        .env("OPENAI_API_KEY", KEY)
        .env_remove("OPENAI_BASE_URL");
    cmd
}

fn no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "the API key leaked into {what}:\n{text}");
}

#[test]
fn a_full_run_against_an_openai_compatible_server_ends_in_finish() {
    let s = Scratch::new();
    let api = Api::serve(vec![
        call("call_1", "calculate", json!({"expression": "6*7"})),
        call("call_2", "finish", json!({"answer": 42})),
    ]);
    let r = ran(harness(&s, &api, "what is 6*7").args(["--json", "--trace", "t.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.json();
    assert_eq!(
        (out["status"].clone(), out["answer"].clone(), out["steps"].clone()),
        (json!("finished"), json!(42), json!(2))
    );
    assert_eq!(out["usage"], json!({"input_tokens": 20, "output_tokens": 6, "cached_input_tokens": 0}));
    assert_eq!(out["retries"], 0);
    // Which provider, model, router mode and URL the run used, then its steps.
    snapshot("provider-a-full-run", &s, &r.stderr, &[(r"127\.0\.0\.1:\d+", "127.0.0.1:[port]")]);

    let trace = s.trace("t.jsonl");
    assert_eq!(trace.len(), 2);
    assert_eq!((trace[0]["tool"].clone(), trace[0]["result"].clone()), (json!("calculate"), json!(42)));
    for entry in &trace {
        assert_eq!(entry["router_mode"], "native");
        assert_eq!(entry["usage"], json!({"input_tokens": 10, "output_tokens": 3, "cached_input_tokens": 0}));
    }

    let seen = api.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].starts_with("POST /v1/chat/completions HTTP/1.1\r\n"), "{}", seen[0]);
    assert!(seen[0].to_ascii_lowercase().contains(&format!("authorization: bearer {}", KEY.to_ascii_lowercase())));
    let body: Value = serde_json::from_str(seen[1].split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last, json!({"role": "tool", "tool_call_id": "call_1", "content": "42"}));
    for request in &seen {
        no_key("a request body", request.split("\r\n\r\n").nth(1).unwrap());
    }
    no_key("stdout", &r.stdout);
    no_key("stderr", &r.stderr);
    no_key("the trace", &std::fs::read_to_string(s.path("t.jsonl")).unwrap());
}

#[test]
fn a_401_fails_the_run_with_exit_1_and_a_clear_message_that_never_shows_the_key() {
    let s = Scratch::new();
    let echo =
        json!({"error": {"message": format!("Incorrect API key provided: {KEY}."), "type": "invalid_request_error"}});
    let api = Api::serve(vec![(401, echo)]);
    let r = ran(harness(&s, &api, "what is 6*7").args(["--trace", "t.jsonl"]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    // What the operator reads: the server's answer with the key redacted, and where to look.
    snapshot("provider-401", &s, &r.stderr, &[(r"127\.0\.0\.1:\d+", "127.0.0.1:[port]")]);
    let last = s.trace_lines("t.jsonl").pop().unwrap();
    error_details(&last, "provider_error");
    let trace = std::fs::read_to_string(s.path("t.jsonl")).unwrap();
    no_key("stdout", &r.stdout);
    no_key("stderr", &r.stderr);
    no_key("the trace", &trace);
}

#[test]
fn configuration_mistakes_are_usage_errors_before_any_request() {
    let s = Scratch::new();
    let r = ran(s
        .harness()
        .args(["run", "x", "--provider", "openrouter", "--model", "m"])
        .env_remove("OPENROUTER_API_KEY"));
    r.usage_error(&["OPENROUTER_API_KEY"]);
    snapshot("provider-key-unset", &s, &r.stderr, &[]);

    let r = ran(s.harness().args(["run", "x", "--provider", "ollama"]));
    r.usage_error(&["--model"]);
    snapshot("provider-needs-a-model", &s, &r.stderr, &[]);

    let r = ran(s.harness().args(["run", "x", "--provider", "gemini"]));
    r.usage_error(&["gemini", "llamacpp"]);
    snapshot("provider-unknown", &s, &r.stderr, &[]);

    let config = s.write("k.toml", &format!("provider = \"openai\"\napi_key = \"{KEY}\"\n"));
    let r = ran(s.harness().args(["run", "x", "--config"]).arg(&config));
    r.usage_error(&["k.toml", "api_key"]);
    snapshot("provider-key-in-config", &s, &r.stderr, &[]);
    no_key("stderr", &r.stderr);

    let api = Api::serve(vec![]);
    let r = ran(harness(&s, &api, "x").args(["--tool-choice", "no_such_tool"]));
    r.usage_error(&["--tool-choice", "no_such_tool"]);
    assert!(api.seen().is_empty());
}
