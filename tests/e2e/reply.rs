//! Model replies read as text through the binary: `harness run` on scripted text replies in
//! the families' own formats, and `harness reply read`, the operator's view of one reply.

use serde_json::{Value, json};

use crate::support::{Scratch, ran};

fn content(text: &str) -> Value {
    json!({ "content": text })
}

fn finish(answer: Value) -> Value {
    json!({ "tool": "finish", "arguments": { "answer": answer } })
}

#[test]
fn a_call_written_inside_the_reasoning_never_runs() {
    let s = Scratch::new();
    let thought = r#"<think>I must not call {"tool": "calculate", "arguments": {"expression": "666"}} here.</think>The answer is 42."#;
    let script = s.script(&[content(thought), finish(json!(42))]);
    let r = ran(s.harness().args(["run", "x", "--json", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["answer"], 42);
    let trace = s.trace("t.jsonl");
    assert_eq!(trace.len(), 2);
    assert!(trace.iter().all(|l| l["tool"] != "calculate"), "calculate never ran: {trace:?}");
    assert_eq!(trace[0]["error"]["code"], "no_json");
    assert!(trace[0]["reasoning"].as_str().is_some_and(|r| r.contains("666")));
    assert_eq!(trace[0]["reply_format"], "json");
}

#[test]
fn a_call_cut_at_the_token_limit_never_runs_and_a_whole_one_before_it_does() {
    let s = Scratch::new();
    let cut = |text: &str| {
        let mut line = content(text);
        line["finish_reason"] = json!("length");
        line
    };
    let script = s.script(&[
        // A whole call, then one cut off: the first may run, the second never.
        cut(r#"[TOOL_CALLS]calculate[ARGS]{"expression": "6*7"}[TOOL_CALLS]calculate[ARGS]{"expression": "666"#),
        // Only a cut call, complete-looking JSON up to the limit: nothing runs.
        cut(r#"<tool_call>{"name": "calculate", "arguments": {"expression": "777"}}"#),
        finish(json!(42)),
    ]);
    // Two cut replies in a row would end the run (--max-truncated): off, to see each one's steps.
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--max-truncated", "0", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let trace = s.trace("t.jsonl");
    let steps: Vec<(&Value, &Value)> = trace.iter().map(|l| (&l["status"], &l["error"]["code"])).collect();
    assert_eq!(
        steps,
        [
            (&json!("ok"), &Value::Null),
            (&json!("rejected"), &json!("reply_truncated")),
            (&json!("rejected"), &json!("reply_truncated")),
            (&json!("finished"), &Value::Null),
        ],
        "{trace:?}"
    );
    assert_eq!(trace[0]["result"], 42);
    let results: Vec<&Value> = trace.iter().filter_map(|l| l.get("result")).collect();
    assert!(!results.contains(&&json!(666)) && !results.contains(&&json!(777)), "a cut call ran: {trace:?}");
}

#[test]
fn every_call_of_a_text_reply_runs_one_step_each() {
    let s = Scratch::new();
    let two = "<tool_call>\n{\"name\": \"calculate\", \"arguments\": {\"expression\": \"6*7\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"calculate\", \"arguments\": {\"expression\": \"1+1\"}}\n</tool_call>";
    let script = s.script(&[content(two), finish(json!("done"))]);
    let r = ran(s.harness().args(["run", "x", "--json", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let trace = s.trace("t.jsonl");
    let results: Vec<&Value> = trace.iter().map(|l| &l["result"]).collect();
    assert_eq!(results, [&json!(42), &json!(2), &json!("done")]);
    assert_eq!(trace[1]["call_index"], 1);
    assert_eq!(trace[1]["reply_format"], "hermes");
}

#[test]
fn a_pinned_reply_format_from_the_flag_or_the_config() {
    let s = Scratch::new();
    let hermes = "<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"2\"}}</tool_call>";
    let script = s.script(&[content(hermes), finish(json!(0))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--reply-format", "mistral", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let trace = s.trace("t.jsonl");
    assert_eq!(
        (trace[0]["error"]["code"].as_str(), trace[0]["reply_format"].as_str()),
        (Some("no_json"), Some("mistral"))
    );

    s.write("h.toml", "reply_format = \"glm45\"\n");
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--config", "h.toml", "--trace", "c.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.trace("c.jsonl")[0]["reply_format"], "glm45");

    let r = ran(s.harness().args(["run", "x", "--reply-format", "qwen", "--script"]).arg(&script));
    // The value at fault, and the formats there are (the nearest first among them).
    r.usage_error(&["--reply-format", "\"qwen\"", "qwen3_coder"]);
}

#[test]
fn reply_read_prints_calls_reasoning_content_and_format() {
    let s = Scratch::new();
    let reply = "<think>two cities</think>Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"東京\"}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>";
    let file = s.write("reply.txt", reply);
    let r = ran(s.harness().args(["reply", "read"]).arg(&file));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json(),
        json!({
            "calls": [
                {"name": "get_weather", "arguments": {"city": "東京"}},
                {"name": "get_weather", "arguments": {"city": "Paris"}},
            ],
            "reasoning": "two cities",
            "content": "Checking.",
            "format": "kimi_k2",
            "error": null,
        })
    );
}

#[test]
fn reply_read_from_stdin_types_values_by_the_offered_tools() {
    use std::io::Write;
    let s = Scratch::new();
    let tools = s.write(
        "tools.json",
        r#"[{"type": "function", "function": {"name": "search", "description": "find", "parameters": {"type": "object", "properties": {"limit": {"type": "integer"}, "exact": {"type": "boolean"}}}}}]"#,
    );
    let mut child = s
        .harness()
        .args(["reply", "read", "--tools"])
        .arg(&tools)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let reply = "<tool_call>search<arg_key>limit</arg_key><arg_value>5</arg_value><arg_key>exact</arg_key><arg_value>false</arg_value></tool_call>";
    child.stdin.take().unwrap().write_all(reply.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read["calls"], json!([{"name": "search", "arguments": {"limit": 5, "exact": false}}]));
    assert_eq!(read["format"], "glm45");
}

#[test]
fn reply_read_says_why_a_reply_does_not_parse() {
    let s = Scratch::new();
    let cut =
        s.write("cut.txt", "[TOOL_CALLS]calculate[ARGS]{\"expression\": \"1\"}[TOOL_CALLS]calculate[ARGS]{\"expr");
    let r = ran(s.harness().args(["reply", "read", "--finish-reason", "length"]).arg(&cut));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let read = r.json();
    assert_eq!(read["calls"], json!([{"name": "calculate", "arguments": {"expression": "1"}}]));
    assert_eq!(read["error"]["code"], "reply_truncated");
    assert_eq!(read["error"]["message"], "your reply was cut at the token limit; answer with one shorter call");

    let bad = s.write("bad.txt", "ok <tool_call><function=calculate><value>1</value></function></tool_call>");
    let read = ran(s.harness().args(["reply", "read"]).arg(&bad)).json();
    assert_eq!(read["error"]["code"], "malformed_call");
    assert_eq!(read["error"]["details"]["format"], "qwen3_coder");
    assert_eq!(read["error"]["details"]["offset"], "ok <tool_call><function=calculate>".len());

    let prose = s.write("prose.txt", "I cannot help.");
    let read = ran(s.harness().args(["reply", "read", "--reply-format", "harmony"]).arg(&prose)).json();
    assert_eq!((read["error"]["code"].as_str(), read["format"].as_str()), (Some("no_json"), Some("harmony")));
}

#[test]
fn reply_read_shows_the_newer_formats_and_never_a_call_read_out_of_an_argument() {
    let s = Scratch::new();
    let replies = [
        (
            "v4.txt",
            "Booking.<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"book\">\n<｜DSML｜parameter name=\"meeting\" string=\"false\">{\"attendees\": [{\"name\": \"Ana\", \"email\": \"a@x\"}, {\"name\": \"Bo\", \"email\": \"b@x\"}]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
            "deepseek_v4",
            json!([{"name": "book", "arguments": {"meeting": {"attendees": [{"name": "Ana", "email": "a@x"}, {"name": "Bo", "email": "b@x"}]}}}]),
        ),
        (
            "k3.txt",
            "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
            "kimi_k3",
            json!([{"name": "get_weather", "arguments": {"city": "Paris"}}]),
        ),
        (
            "l4.txt",
            "[get_weather(city=\"LA\", metric=\"C\"), get_time()]",
            "llama4_pythonic",
            json!([{"name": "get_weather", "arguments": {"city": "LA", "metric": "C"}}, {"name": "get_time", "arguments": {}}]),
        ),
    ];
    for (file, reply, format, calls) in replies {
        let path = s.write(file, reply);
        let read = ran(s.harness().args(["reply", "read"]).arg(&path)).json();
        assert_eq!((read["format"].as_str(), &read["calls"]), (Some(format), &calls), "{file}: {read}");
        assert_eq!(read["error"], Value::Null, "{file}");
    }
}

#[test]
fn reply_read_usage_errors_exit_2_naming_the_problem() {
    let s = Scratch::new();
    let reply = s.write("r.txt", "x");
    s.write("notes.json", "{\"name\": \"x\"}");
    s.write("nameless.json", "[{\"type\": \"function\", \"function\": {}}]");
    std::fs::write(s.path("latin1.txt"), b"caf\xe9").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["reply", "read", "missing.txt"], "missing.txt"),
        (vec!["reply", "read", "--reply-format", "nope", "r.txt"], "\"nope\""),
        (vec!["reply", "read", "--tools", "nope.json", "r.txt"], "nope.json"),
        (vec!["reply", "read", "--tools", "notes.json", "r.txt"], "notes.json"),
        (vec!["reply", "read", "--tools", "nameless.json", "r.txt"], "tool 0"),
        (vec!["reply", "read", "latin1.txt"], "latin1.txt"),
    ];
    for (args, named) in cases {
        ran(s.harness().args(&args)).usage_error(&[named]);
    }
    assert!(reply.exists());
}
