//! The harness as an MCP client, against hand-written servers that do what the official
//! conformance suite's client scenarios do (tests/mcp/hostile_server.py): a `server/discover`
//! answered with `{}`, and a tool call's SSE stream closed before its result.

use serde_json::json;

use super::bounds::{Hostile, hostile_run};
use crate::support::Scratch;

#[test]
fn an_empty_answer_to_server_discover_is_no_discovery_and_initialize_follows() {
    let server = Hostile::start("discover-empty");
    let s = Scratch::new();
    let steps = [json!({"tool": "hello", "arguments": {}}), json!({"tool": "finish", "arguments": {"answer": "done"}})];
    let r = hostile_run(&s, &server.url, &steps);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!((&t[0]["status"], &t[0]["result"]), (&json!("ok"), &json!("hi")), "{}", t[0]);
    let methods = server.methods();
    assert_eq!(methods[..3], ["server/discover", "initialize", "notifications/initialized"], "{methods:?}");
}

#[test]
fn a_tool_calls_sse_stream_closed_before_its_result_is_resumed_after_the_servers_retry() {
    let server = Hostile::start("sse-close");
    let s = Scratch::new();
    let steps = [json!({"tool": "hello", "arguments": {}}), json!({"tool": "finish", "arguments": {"answer": "done"}})];
    let r = hostile_run(&s, &server.url, &steps);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!((&t[0]["status"], &t[0]["result"]), (&json!("ok"), &json!("hi, resumed")), "{}", t[0]);
    let mut log = String::new();
    let methods = server.methods_and(&mut log);
    assert!(methods.contains(&"tools/call".to_owned()), "{methods:?}");
    let waited: u64 = log
        .lines()
        .find_map(|l| l.strip_prefix("RESUMED ev-1 AFTER "))
        .unwrap_or_else(|| panic!("no GET with Last-Event-ID: ev-1: {log}"))
        .parse()
        .unwrap();
    assert!(waited >= 600, "resumed {waited} ms after the close, before the server's retry of 700 ms");
}

#[test]
fn elicitation_and_sampling_requests_are_refused_in_words() {
    let server = Hostile::start("asks");
    let s = Scratch::new();
    let steps = [json!({"tool": "hello", "arguments": {}}), json!({"tool": "finish", "arguments": {"answer": "done"}})];
    let r = hostile_run(&s, &server.url, &steps);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    let said: Vec<serde_json::Value> = serde_json::from_str(t[0]["result"].as_str().unwrap()).unwrap();
    let [elicit, sample] = said.as_slice() else { panic!("{said:?}") };
    assert_eq!(elicit["error"]["code"], -32601, "{elicit}");
    assert!(elicit["error"]["message"].as_str().unwrap().contains("does not offer elicitation"), "{elicit}");
    assert!(sample["error"]["message"].as_str().unwrap().contains("does not offer sampling"), "{sample}");
    for what in ["elicitation (elicitation/create)", "sampling (sampling/createMessage)"] {
        let line = format!("MCP server \"hostile\" asked for {what}, which the harness does not offer");
        assert!(r.stderr.contains(&line), "{line} not in: {}", r.stderr);
    }
}
