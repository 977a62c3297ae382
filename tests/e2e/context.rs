//! Runs that keep to the model's context, through the binary with a scripted provider that
//! declares one (`--context-tokens`): compaction, the run ended `context_exhausted` before a
//! request that cannot fit, and cut replies ending it `reply_truncated`.

use serde_json::{Value, json};

use crate::support::{Scratch, ran};

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// The lines of a trace of one kind (`compaction`, `end`, ...).
fn of_kind(s: &Scratch, kind: &str) -> Vec<Value> {
    s.trace_lines("t.jsonl").into_iter().filter(|l| l["kind"] == kind).collect()
}

#[test]
fn a_run_in_a_small_context_compacts_its_oldest_steps_and_keeps_every_request_within_it() {
    let s = Scratch::new();
    // Each call is an unknown name: the calculator's error, fed back, is some 700 bytes.
    let mut lines: Vec<Value> = (1..=10).map(|i| call("calculate", json!({ "expression": format!("x{i}") }))).collect();
    lines.push(call("finish", json!({"answer": "done"})));
    let script = s.script(&lines);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--trace", "t.jsonl", "--enable", "calc", "--max-steps", "11"])
        .args(["--context-tokens", "1024", "--max-reply-tokens", "128", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Every line, the compactions with them, as docs/traces.md documents it.
    crate::trace::assert_matches_documented_schemas(&s.trace_lines("t.jsonl"));
    let start = &s.trace_lines("t.jsonl")[0];
    assert_eq!(start["context"]["tokens"], 1024);
    assert_eq!(start["context"]["source"], "script");
    assert!(start["context"]["tools_tokens"].as_u64().unwrap() > 0, "{start}");
    let compactions = of_kind(&s, "compaction");
    assert!(!compactions.is_empty(), "ten long results cannot fit 1024 tokens whole");
    let mut next_step = 1;
    for line in &compactions {
        // Oldest first, each step shortened once, the request's room for the reply kept.
        assert_eq!(line["steps"][0], next_step, "{line}");
        next_step = line["steps"][1].as_u64().unwrap() + 1;
        assert!(line["steps"][1].as_u64() < line["before_step"].as_u64(), "{line}");
        assert!(line["tokens_after"].as_u64().unwrap() <= 1024 - 128, "{line}");
        assert!(line["tokens_saved"].as_u64().unwrap() > 0, "{line}");
    }
    assert!(compactions.len() < 10, "compacted in chunks, not before every step: {compactions:?}");
    let saved: u64 = compactions.iter().map(|l| l["tokens_saved"].as_u64().unwrap()).sum();
    let end = &of_kind(&s, "end")[0];
    assert_eq!(
        (end["context"]["compactions"].as_u64(), end["context"]["tokens_saved"].as_u64()),
        (Some(compactions.len() as u64), Some(saved))
    );
    let out = r.json();
    assert_eq!(out["context"], end["context"]);
    assert!(out["context"]["largest_prompt_tokens"].as_u64().unwrap() <= 1024 - 128, "{out}");
}

#[test]
fn a_request_that_cannot_fit_ends_the_run_context_exhausted_before_it_is_sent() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": 1}))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--trace", "t.jsonl", "--enable", "calc"])
        .args(["--context-tokens", "200", "--max-reply-tokens", "128", "--script"])
        .arg(&script));
    assert_eq!(r.code, 5, "{}", r.stderr);
    let out = r.json();
    assert_eq!((out["status"].as_str(), out["steps"].as_u64()), (Some("context_exhausted"), Some(0)));
    assert_eq!(out["error"]["code"], "context_exhausted");
    let details = &out["error"]["details"];
    assert_eq!((details["context_tokens"].as_u64(), details["reply_tokens"].as_u64()), (Some(200), Some(128)));
    assert!(details["prompt_tokens"].as_u64().unwrap() + 128 > 200, "{details}");
    assert!(s.trace("t.jsonl").is_empty(), "no request was sent, no step taken");
}

#[test]
fn replies_cut_again_and_again_end_the_run_reply_truncated_unless_the_check_is_off() {
    let s = Scratch::new();
    let cut = json!({"content": "{\"tool\": \"finish\", \"arguments\": {\"answer\": {\"formula\": {\"formula\": {", "finish_reason": "length"});
    let script = s.script(&[cut.clone(), cut.clone(), call("finish", json!({"answer": 1}))]);
    let r = ran(s.harness().args(["run", "x", "--json", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 5, "{}", r.stderr);
    let out = r.json();
    assert_eq!((out["status"].as_str(), out["steps"].as_u64()), (Some("reply_truncated"), Some(2)));
    assert_eq!(out["error"]["details"]["times"], 2);
    assert!(out["error"]["details"]["kept_writing"].as_str().unwrap().contains("{\"formula\": {\"formula\""), "{out}");

    let r = ran(s.harness().args(["run", "x", "--json", "--max-truncated", "0", "--script"]).arg(&script));
    assert_eq!((r.code, r.json()["answer"].clone()), (0, json!(1)), "{}", r.stderr);
}
