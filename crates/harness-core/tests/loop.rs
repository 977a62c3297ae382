//! Tests of the core loop (`harness_core::Loop`) through its public API only.
//!
//! A replaying provider answers each step from a script and records every request it gets
//! (the tools offered, the forced tool choice, and the conversation), so that each test can
//! check what the loop offered and what it fed back, step by step.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use harness_core::{
    EarlyFinish, ErrorCode, FINISH, Loop, Message, ModelProvider, ModelReply, NoTrace, ProcessTuning, ProposedCall,
    ProviderError, RouterRequest, RunOptions, RunOutcome, RunStatus, StepStatus, ToolChoice, ToolDefinition,
    ToolFailure, ToolHandler, ToolRegistry, ToolSource, ToolSpec, TraceEntry, TraceSink, Usage,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// The replaying, recording provider
// ---------------------------------------------------------------------------------------------

/// What the provider was asked at one step.
#[derive(Debug, Clone)]
struct Seen {
    tools: Vec<String>,
    tool_choice: ToolChoice,
    conversation: Vec<Message>,
}

/// Answers each step with the next scripted reply, and records every request.
struct Replay {
    script: Mutex<VecDeque<Result<ModelReply, ProviderError>>>,
    seen: Mutex<Vec<Seen>>,
    /// Says its model is a small one ([`ModelProvider::needs_a_tool_first`]).
    small: bool,
}

impl Replay {
    fn new(replies: Vec<ModelReply>) -> Self {
        Self::scripted(replies.into_iter().map(Ok).collect())
    }

    fn scripted(script: Vec<Result<ModelReply, ProviderError>>) -> Self {
        Self { script: Mutex::new(script.into()), seen: Mutex::new(Vec::new()), small: false }
    }

    fn small(replies: Vec<ModelReply>) -> Self {
        Self { small: true, ..Self::new(replies) }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("the provider lock").clone()
    }
}

#[async_trait]
impl ModelProvider for Replay {
    fn name(&self) -> &str {
        "replay"
    }

    fn needs_a_tool_first(&self) -> bool {
        self.small
    }

    async fn complete(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        self.seen.lock().expect("the provider lock").push(Seen {
            tools: request.tools.iter().map(|d| d.name.clone()).collect(),
            tool_choice: request.tool_choice.clone(),
            conversation: request.conversation.to_vec(),
        });
        self.script
            .lock()
            .expect("the provider lock")
            .pop_front()
            .unwrap_or_else(|| Err(ProviderError::new("the test script has no reply left")))
    }
}

// ---------------------------------------------------------------------------------------------
// Tool handlers
// ---------------------------------------------------------------------------------------------

/// Returns its arguments.
#[derive(Default)]
struct Echo {
    calls: AtomicUsize,
}

impl ToolHandler for Echo {
    fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "tool": tool, "echo": arguments }))
    }
}

/// Always fails with the given code.
struct Fail {
    code: &'static str,
    calls: AtomicUsize,
}

impl ToolHandler for Fail {
    fn call(&self, _: &str, _: &Value) -> Result<Value, ToolFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(ToolFailure { code: self.code.to_owned(), message: format!("{} happened", self.code) })
    }
}

/// Panics in the handler itself.
#[derive(Default)]
struct Panics {
    calls: AtomicUsize,
}

impl ToolHandler for Panics {
    fn call(&self, _: &str, _: &Value) -> Result<Value, ToolFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        panic!("the panic tool panics, as it should");
    }
}

/// Sleeps a little, then answers; says when it started and finished.
#[derive(Default)]
struct Sleeps {
    calls: AtomicUsize,
    started: AtomicBool,
    finished: AtomicBool,
}

const SLEEP: Duration = Duration::from_millis(40);

impl ToolHandler for Sleeps {
    fn call(&self, _: &str, _: &Value) -> Result<Value, ToolFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.started.store(true, Ordering::SeqCst);
        // A slow tool: the sleep is the behaviour under test (it must not hold the runtime).
        std::thread::sleep(SLEEP);
        self.finished.store(true, Ordering::SeqCst);
        Ok(json!("slept"))
    }
}

// ---------------------------------------------------------------------------------------------
// The registry every test uses
// ---------------------------------------------------------------------------------------------

/// Every tool offered, in the order the registry offers them (`finish` first).
const ALL: [&str; 7] = ["finish", "echo", "typed", "fail", "odd_fail", "panic", "sleep"];

struct Kit {
    registry: ToolRegistry,
    echo: Arc<Echo>,
    typed: Arc<Echo>,
    fail: Arc<Fail>,
    odd_fail: Arc<Fail>,
    panics: Arc<Panics>,
    sleeps: Arc<Sleeps>,
}

fn plugin(name: &str, version: &str) -> ToolSource {
    ToolSource::Plugin { name: name.into(), version: version.into() }
}

fn definition(name: &str, parameters: Value, source: ToolSource) -> ToolDefinition {
    ToolDefinition { name: name.into(), description: format!("the {name} tool"), parameters, examples: vec![], source }
}

impl Kit {
    fn new() -> Self {
        Self::with_sleep_limit(None)
    }

    /// The kit, its `sleep` tool limited to `limit` when given.
    fn with_sleep_limit(limit: Option<Duration>) -> Self {
        let echo = Arc::new(Echo::default());
        let typed = Arc::new(Echo::default());
        let fail = Arc::new(Fail { code: "tool_error", calls: AtomicUsize::new(0) });
        let odd_fail = Arc::new(Fail { code: "rate_limited", calls: AtomicUsize::new(0) });
        let panics = Arc::new(Panics::default());
        let sleeps = Arc::new(Sleeps::default());
        let mut registry = ToolRegistry::new();
        let text_schema = json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"],
            "additionalProperties": false
        });
        let typed_schema = json!({
            "type": "object",
            "properties": {
                "a": { "type": "string" },
                "b": { "type": "integer", "minimum": 0 },
                "c": { "type": "boolean" },
                "d": { "enum": ["x", "y"] },
                "e": { "type": "array", "items": { "type": "number" } }
            },
            "required": ["a", "b"],
            "additionalProperties": false
        });
        let open = json!({ "type": "object" });
        registry
            .register(ToolSpec::new(definition("echo", text_schema, plugin("textkit", "1.2.3")), echo.clone()))
            .expect("the test tools register");
        registry
            .register(ToolSpec::new(definition("typed", typed_schema, plugin("textkit", "1.2.3")), typed.clone()))
            .expect("the test tools register");
        registry
            .register(ToolSpec::new(definition("fail", open.clone(), plugin("faulty", "0.1.0")), fail.clone()))
            .expect("the test tools register");
        registry
            .register(ToolSpec::new(definition("odd_fail", open.clone(), plugin("faulty", "0.1.0")), odd_fail.clone()))
            .expect("the test tools register");
        registry
            .register(ToolSpec::new(definition("panic", open.clone(), plugin("faulty", "0.1.0")), panics.clone()))
            .expect("the test tools register");
        registry
            .register(ToolSpec {
                timeout: limit,
                ..ToolSpec::new(definition("sleep", open, plugin("clock", "2.0.0")), sleeps.clone())
            })
            .expect("the test tools register");
        Self { registry, echo, typed, fail, odd_fail, panics, sleeps }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const REQUEST: &str = "please do the thing";

/// A structured call without a provider id.
fn call(name: &str, arguments: Value) -> ModelReply {
    ModelReply {
        calls: vec![ProposedCall { id: None, name: name.into(), arguments: arguments.into() }],
        ..Default::default()
    }
}

/// A structured call with a provider id.
fn call_with_id(id: &str, name: &str, arguments: Value) -> ModelReply {
    ModelReply {
        calls: vec![ProposedCall { id: Some(id.into()), name: name.into(), arguments: arguments.into() }],
        ..Default::default()
    }
}

/// A text-only reply.
fn text(t: &str) -> ModelReply {
    ModelReply { text: Some(t.into()), ..Default::default() }
}

fn finish(answer: Value) -> ModelReply {
    call(FINISH, json!({ "answer": answer }))
}

fn echo(t: &str) -> ModelReply {
    call("echo", json!({ "text": t }))
}

fn opts(max_steps: u32, max_repeats: u32) -> RunOptions {
    RunOptions { max_steps, max_repeats, ..RunOptions::default() }
}

/// Runs the loop on a script; returns the outcome, the trace lines and the requests seen.
async fn drive(kit: &Kit, replies: Vec<ModelReply>, options: RunOptions) -> (RunOutcome, Vec<Value>, Vec<Seen>) {
    let provider = Replay::new(replies);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).options(options).run(REQUEST, &mut trace).await;
    (outcome, trace, provider.seen())
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().expect("a JSON object").keys().map(String::as_str).collect()
}

fn set<'a>(names: &[&'a str]) -> BTreeSet<&'a str> {
    names.iter().copied().collect()
}

fn all_tools() -> Vec<String> {
    ALL.iter().map(|s| (*s).to_owned()).collect()
}

/// Whether the loop forced `finish` at this step: the tools of every other step still in the
/// request (so that a server's cached prompt prefix survives), `finish` named as the choice.
fn forces_finish(seen: &Seen, first: &Seen) -> bool {
    seen.tools == first.tools && seen.tool_choice == ToolChoice::Tool(FINISH.to_owned())
}

/// The message that fed step `step` back: the last one of the conversation at step `step + 1`.
fn fed_back(seen: &[Seen], step: usize) -> &Message {
    let conversation = &seen[step].conversation;
    assert_eq!(conversation.len(), 1 + 2 * step, "conversation at step {}", step + 1);
    &conversation[2 * step]
}

/// The reply of step `step` as the model saw it again at step `step + 1`.
fn replayed_reply(seen: &[Seen], step: usize) -> &ModelReply {
    match &seen[step].conversation[2 * step - 1] {
        Message::Assistant { reply } => reply,
        other => panic!("expected the assistant reply of step {step}, got {other:?}"),
    }
}

/// Checks that step `step` was traced as an error with this code and status, and was fed back
/// as a `ToolResult` with `is_error` and the same error object; returns that object.
fn assert_error_step(trace: &[Value], seen: &[Seen], step: usize, code: &str, status: &str) -> Value {
    let line = &trace[step - 1];
    assert_eq!(line["step"], json!(step), "{line}");
    assert_eq!(line["status"], status, "{line}");
    assert_eq!(line["error"]["code"], code, "{line}");
    assert!(line.get("result").is_none(), "an error step has no result: {line}");
    let error = &line["error"];
    assert_eq!(keys(error), set(&["code", "message", "details"]), "{error}");
    assert!(!error["message"].as_str().expect("the message is a string").is_empty());
    match fed_back(seen, step) {
        Message::ToolResult { content, is_error, .. } => {
            assert!(*is_error, "step {step} must be fed back as an error");
            assert_eq!(keys(content), set(&["code", "message", "details"]), "{content}");
            assert_eq!(content, error, "what is fed back is what is traced");
            content.clone()
        }
        other => panic!("expected a ToolResult for step {step}, got {other:?}"),
    }
}

/// The `(call_id, tool)` of the `ToolResult` feeding step `step` back.
fn fed_back_ids(seen: &[Seen], step: usize) -> (Option<String>, Option<String>) {
    match fed_back(seen, step) {
        Message::ToolResult { call_id, tool, .. } => (call_id.clone(), tool.clone()),
        other => panic!("expected a ToolResult for step {step}, got {other:?}"),
    }
}

fn statuses(trace: &[Value]) -> Vec<&str> {
    trace.iter().map(|l| l["status"].as_str().expect("the status is a string")).collect()
}

fn codes(trace: &[Value]) -> Vec<Option<&str>> {
    trace.iter().map(|l| l.get("error").map(|e| e["code"].as_str().expect("the code is a string"))).collect()
}

fn without_timings(line: &Value) -> Value {
    let mut line = line.clone();
    let object = line.as_object_mut().expect("a trace line is an object");
    assert!(object.remove("duration_us").expect("duration_us is present").is_u64());
    assert!(object.remove("model_us").expect("model_us is present").is_u64());
    line
}

// ---------------------------------------------------------------------------------------------
// 1. Finishing
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn finish_on_step_one() {
    let kit = Kit::new();
    let answer = json!({ "value": 42, "unit": "m" });
    let (outcome, trace, seen) = drive(&kit, vec![finish(answer.clone())], RunOptions::default()).await;

    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.answer, Some(answer.clone()));
    assert_eq!(outcome.steps, 1);
    assert_eq!(outcome.error, None);

    assert_eq!(trace.len(), 1);
    let line = &trace[0];
    assert_eq!(line["step"], 1);
    assert_eq!(line["status"], "finished");
    assert_eq!(line["tool"], "finish");
    assert_eq!(line["arguments"], json!({ "answer": answer }));
    assert_eq!(line["result"], answer);
    assert_eq!(line["offered"], "all");
    assert!(line["duration_us"].is_u64() && line["model_us"].is_u64(), "{line}");
    // The model's whole reply, as it gave it: the structured call with its (absent) id.
    assert_eq!(line["reply"]["calls"], json!([{ "id": null, "name": "finish", "arguments": { "answer": answer } }]));
    // finish is built in: no plugin; a structured call keeps no reply text; no error.
    assert_eq!(
        keys(line),
        set(&["step", "tool", "arguments", "status", "result", "offered", "reply", "duration_us", "model_us"]),
        "{line}"
    );

    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].conversation, vec![Message::User { content: REQUEST.into() }]);
    assert_eq!(seen[0].tools, all_tools());
    assert_eq!(seen[0].tool_choice, ToolChoice::Required);
}

#[tokio::test]
async fn finish_answer_may_be_null_but_not_missing() {
    let kit = Kit::new();
    let (outcome, trace, seen) =
        drive(&kit, vec![call(FINISH, json!({})), finish(Value::Null)], RunOptions::default()).await;
    let error = assert_error_step(&trace, &seen, 1, "invalid_arguments", "rejected");
    assert_eq!(error["details"]["tool"], "finish");
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.answer, Some(Value::Null));
    assert_eq!(outcome.steps, 2);
    assert_eq!(trace[1]["result"], Value::Null);
}

// ---------------------------------------------------------------------------------------------
// 2. A tool call, then finish: the trace and what is fed back
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn tool_call_then_finish() {
    let kit = Kit::new();
    let first = call_with_id("toolu_01", "echo", json!({ "text": "hello" }));
    let (outcome, trace, seen) = drive(&kit, vec![first.clone(), finish(json!("done"))], RunOptions::default()).await;

    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.answer, Some(json!("done")));
    assert_eq!(outcome.steps, 2);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);

    assert_eq!(trace.len(), 2);
    let line = &trace[0];
    let result = json!({ "tool": "echo", "echo": { "text": "hello" } });
    assert_eq!(line["step"], 1);
    assert_eq!(line["status"], "ok");
    assert_eq!(line["tool"], "echo");
    assert_eq!(line["arguments"], json!({ "text": "hello" }), "the arguments come back from the tool's thread");
    assert_eq!(line["result"], result);
    assert_eq!(line["plugin"], "textkit");
    assert_eq!(line["plugin_version"], "1.2.3");
    assert_eq!(line["offered"], "all");
    let (duration, model) = (line["duration_us"].as_u64().unwrap(), line["model_us"].as_u64().unwrap());
    assert!(model <= duration, "the model's time is part of the step's: {line}");
    assert_eq!(
        keys(line),
        set(&[
            "step",
            "tool",
            "arguments",
            "status",
            "result",
            "plugin",
            "plugin_version",
            "offered",
            "reply",
            "duration_us",
            "model_us"
        ]),
        "{line}"
    );
    assert_eq!(trace[1]["step"], 2);
    assert_eq!(trace[1]["status"], "finished");

    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].conversation,
        vec![
            Message::User { content: REQUEST.into() },
            Message::Assistant { reply: first },
            Message::ToolResult {
                call_id: Some("toolu_01".into()),
                tool: Some("echo".into()),
                content: result,
                is_error: false
            },
        ]
    );
}

#[tokio::test]
async fn call_ids_come_from_the_provider_or_are_call_step() {
    let kit = Kit::new();
    let from_text = r#"Calling it: {"tool": "echo", "arguments": {"text": "t"}}"#;
    let replies = vec![
        call_with_id("abc", "echo", json!({ "text": "1" })),
        text(from_text),
        call("echo", json!({ "text": "3" })),
        finish(json!(3)),
    ];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(statuses(&trace), ["ok", "ok", "ok", "finished"]);
    assert_eq!(fed_back_ids(&seen, 1), (Some("abc".into()), Some("echo".into())));
    assert_eq!(fed_back_ids(&seen, 2), (Some("call_2".into()), Some("echo".into())), "read from text");
    assert_eq!(fed_back_ids(&seen, 3), (Some("call_3".into()), Some("echo".into())), "structured, no id");
    // The text a call was read from is kept in the trace; a structured call keeps none.
    assert!(trace[0].get("reply_text").is_none());
    assert_eq!(trace[1]["reply_text"], from_text);
    assert_eq!(trace[1]["arguments"], json!({ "text": "t" }));
    assert!(trace[2].get("reply_text").is_none());
    // The whole reply goes back verbatim, text and all.
    assert_eq!(replayed_reply(&seen, 2), &text(from_text));
}

#[tokio::test]
async fn structured_arguments_given_as_a_json_string_are_decoded() {
    let kit = Kit::new();
    let replies = vec![call("echo", json!("{\"text\": \"s\"}")), finish(json!(1))];
    let (outcome, trace, _) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(trace[0]["status"], "ok");
    assert_eq!(trace[0]["arguments"], json!({ "text": "s" }));
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn usage_is_summed_over_the_steps() {
    let kit = Kit::new();
    let mut a = echo("a");
    a.usage = Some(Usage { input_tokens: 10, output_tokens: 3, cached_input_tokens: 0 });
    let mut b = text("nothing useful");
    b.usage = Some(Usage { input_tokens: 20, output_tokens: 5, cached_input_tokens: 0 });
    let c = finish(json!(0)); // reports no usage
    let (outcome, _, _) = drive(&kit, vec![a, b, c], RunOptions::default()).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.usage, Usage { input_tokens: 30, output_tokens: 8, cached_input_tokens: 0 });
}

#[tokio::test(flavor = "current_thread")]
async fn a_slow_tool_runs_off_the_async_worker_and_is_timed() {
    let kit = Kit::new();
    let provider = Replay::new(vec![call("sleep", json!({})), finish(json!("awake"))]);
    let mut trace: Vec<Value> = Vec::new();
    let options = RunOptions::default();
    let sleeps = kit.sleeps.clone();
    // On a single-threaded runtime, this ticker only advances while the tool sleeps if the
    // tool does not hold the runtime's only worker.
    let ticker = async move {
        let mut ticks_while_running = 0u32;
        for _ in 0..5_000 {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if sleeps.finished.load(Ordering::SeqCst) {
                break;
            }
            if sleeps.started.load(Ordering::SeqCst) {
                ticks_while_running += 1;
            }
        }
        ticks_while_running
    };
    let mut agent = Loop::new(&provider, &kit.registry).options(options);
    let (outcome, ticks) = tokio::join!(agent.run(REQUEST, &mut trace), ticker);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.answer, Some(json!("awake")));
    assert_eq!(kit.sleeps.calls.load(Ordering::SeqCst), 1);
    assert!(ticks >= 1, "the async worker was blocked while the tool slept");
    let line = &trace[0];
    assert_eq!(line["status"], "ok");
    assert_eq!(line["result"], "slept");
    assert_eq!(line["plugin"], "clock");
    assert_eq!(line["plugin_version"], "2.0.0");
    let duration = line["duration_us"].as_u64().unwrap();
    let model = line["model_us"].as_u64().unwrap();
    assert!(duration >= SLEEP.as_micros() as u64, "the step's time includes the tool's: {line}");
    assert!(model < SLEEP.as_micros() as u64, "the model's time excludes the tool's: {line}");
}

// ---------------------------------------------------------------------------------------------
// 3. Every error code: traced as a step, fed back, and the run goes on
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn no_json_is_fed_back_and_the_run_goes_on() {
    let kit = Kit::new();
    let prose = "I think the answer is four.";
    let (outcome, trace, seen) = drive(&kit, vec![text(prose), finish(json!(4))], RunOptions::default()).await;

    let error = assert_error_step(&trace, &seen, 1, "no_json", "rejected");
    assert_eq!(error["details"], json!({ "reply_bytes": prose.len() }));
    assert_eq!(fed_back_ids(&seen, 1), (None, None), "there was no call to answer");
    assert_eq!(replayed_reply(&seen, 1), &text(prose));
    let line = &trace[0];
    assert_eq!(line["tool"], Value::Null);
    assert_eq!(line["arguments"], Value::Null);
    assert_eq!(line["reply_text"], prose);
    assert_eq!(line["offered"], "all");
    assert_eq!(
        keys(line),
        set(&[
            "step",
            "tool",
            "arguments",
            "status",
            "error",
            "offered",
            "reply_text",
            "reply_format",
            "reply",
            "duration_us",
            "model_us"
        ]),
        "{line}"
    );

    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.answer, Some(json!(4)));
    assert_eq!(outcome.steps, 2);
}

#[tokio::test]
async fn an_empty_reply_is_no_json() {
    let kit = Kit::new();
    let (outcome, trace, seen) =
        drive(&kit, vec![ModelReply::default(), finish(json!(0))], RunOptions::default()).await;
    let error = assert_error_step(&trace, &seen, 1, "no_json", "rejected");
    assert_eq!(error["details"], json!({ "reply_bytes": 0 }));
    assert!(trace[0].get("reply_text").is_none(), "an empty text is not kept");
    assert_eq!(outcome.status, RunStatus::Finished);
}

#[tokio::test]
async fn truncated_json_text_is_invalid_json() {
    let kit = Kit::new();
    let truncated = r#"Here: {"tool": "echo", "arguments": {"text": "hel"#;
    let (outcome, trace, seen) = drive(&kit, vec![text(truncated), finish(json!(1))], RunOptions::default()).await;

    let error = assert_error_step(&trace, &seen, 1, "invalid_json", "rejected");
    assert_eq!(error["details"]["offset"], 6, "{error}");
    assert!(error["details"]["error"].as_str().unwrap().contains("EOF"), "{error}");
    assert_eq!(fed_back_ids(&seen, 1), (None, None));
    assert_eq!(trace[0]["tool"], Value::Null);
    assert_eq!(trace[0]["reply_text"], truncated);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 2);
}

#[tokio::test]
async fn json_text_that_is_not_a_call_is_invalid_json() {
    let kit = Kit::new();
    let (outcome, trace, seen) =
        drive(&kit, vec![text(r#"{"answer": 42}"#), finish(json!(42))], RunOptions::default()).await;
    let error = assert_error_step(&trace, &seen, 1, "invalid_json", "rejected");
    assert_eq!(error["details"], json!({ "objects": 1 }));
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 2);
}

#[tokio::test]
async fn structured_arguments_that_are_broken_json_are_invalid_json() {
    let kit = Kit::new();
    let bad = call_with_id("c7", "echo", json!("{\"text\": "));
    let (outcome, trace, seen) = drive(&kit, vec![bad.clone(), finish(json!(1))], RunOptions::default()).await;

    let error = assert_error_step(&trace, &seen, 1, "invalid_json", "rejected");
    assert_eq!(error["details"]["tool"], "echo");
    assert_eq!(error["details"]["line"], 1);
    assert!(error["details"]["column"].as_u64().unwrap() > 0, "{error}");
    assert!(error["details"]["error"].is_string(), "{error}");
    assert_eq!(replayed_reply(&seen, 1), &bad);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 2);
}

/// The call id and tool name were both in the reply; the loop drops them once the arguments
/// fail to parse, so the `ToolResult` answers no call and the trace names no tool.
#[tokio::test]
async fn structured_call_with_unparsable_arguments_keeps_its_id_and_tool() {
    let kit = Kit::new();
    let replies = vec![
        call_with_id("c7", "echo", json!("{\"text\": ")),
        call_with_id("c8", "echo", json!([1, 2])),
        finish(json!(1)),
    ];
    let (_, trace, seen) = drive(&kit, replies, RunOptions::default()).await;
    assert_error_step(&trace, &seen, 1, "invalid_json", "rejected");
    assert_error_step(&trace, &seen, 2, "invalid_arguments", "rejected");
    assert_eq!(fed_back_ids(&seen, 1), (Some("c7".into()), Some("echo".into())));
    assert_eq!(fed_back_ids(&seen, 2), (Some("c8".into()), Some("echo".into())));
    assert_eq!(trace[0]["tool"], "echo");
    assert_eq!(trace[1]["tool"], "echo");
}

#[tokio::test]
async fn unknown_tool_lists_the_offered_tools() {
    let kit = Kit::new();
    let replies = vec![call_with_id("u1", "nope", json!({ "x": 1 })), finish(json!(0))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;

    let error = assert_error_step(&trace, &seen, 1, "unknown_tool", "rejected");
    assert_eq!(error["details"], json!({ "tool": "nope", "offered": ALL }));
    // The call parsed, so its id and name are fed back with the error.
    assert_eq!(fed_back_ids(&seen, 1), (Some("u1".into()), Some("nope".into())));
    assert_eq!(trace[0]["tool"], "nope");
    assert_eq!(trace[0]["arguments"], json!({ "x": 1 }));
    assert!(trace[0].get("plugin").is_none(), "an unknown tool has no plugin: {}", trace[0]);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 2);
}

#[tokio::test]
async fn unknown_tool_on_the_last_step_lists_finish_alone() {
    let kit = Kit::new();
    let replies = vec![echo("a"), call("nope", json!({})), finish(json!(0))];
    let (outcome, trace, seen) = drive(&kit, replies, opts(2, 3)).await;
    assert_eq!(trace[1]["offered"], "finish");
    assert_eq!(trace[1]["error"]["details"], json!({ "tool": "nope", "offered": ["finish"] }));
    assert_eq!(trace[1]["status"], "rejected");
    assert_eq!(seen.len(), 2);
    assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
}

#[tokio::test]
async fn invalid_arguments_report_every_violation_with_its_pointer() {
    let kit = Kit::new();
    let bad = json!({ "b": -1, "c": "no", "d": "z", "e": [1, "two"], "extra": 1 });
    let replies = vec![call("typed", bad.clone()), call("typed", json!({ "a": "ok", "b": 2 })), finish(json!(0))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;

    let error = assert_error_step(&trace, &seen, 1, "invalid_arguments", "rejected");
    assert_eq!(error["details"]["tool"], "typed");
    let violations = error["details"]["violations"].as_array().unwrap();
    for v in violations {
        assert_eq!(keys(v), set(&["pointer", "message"]), "{v}");
        assert!(!v["message"].as_str().unwrap().is_empty(), "{v}");
    }
    let mut pointers: Vec<&str> = violations.iter().map(|v| v["pointer"].as_str().unwrap()).collect();
    pointers.sort_unstable();
    // Root: "a" is missing and "extra" is not allowed; then each bad property.
    assert_eq!(pointers, ["", "", "/b", "/c", "/d", "/e/1"], "{error}");
    assert_eq!(trace[0]["arguments"], bad);
    assert_eq!(fed_back_ids(&seen, 1), (Some("call_1".into()), Some("typed".into())));

    assert_eq!(trace[1]["status"], "ok");
    assert_eq!(kit.typed.calls.load(Ordering::SeqCst), 1, "the invalid call never ran");
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 3);
}

#[tokio::test]
async fn structured_arguments_that_are_not_an_object_are_invalid_arguments() {
    let kit = Kit::new();
    let (outcome, trace, seen) =
        drive(&kit, vec![call("echo", json!([1])), finish(json!(0))], RunOptions::default()).await;
    let error = assert_error_step(&trace, &seen, 1, "invalid_arguments", "rejected");
    assert_eq!(
        error["details"],
        json!({ "tool": "echo", "violations": [{ "pointer": "", "message": "expected an object, got array" }] })
    );
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0);
    assert_eq!(outcome.status, RunStatus::Finished);
}

#[tokio::test]
async fn tool_error_is_fed_back_and_the_run_goes_on() {
    let kit = Kit::new();
    let replies = vec![call_with_id("f1", "fail", json!({ "n": 1 })), finish(json!("gave up"))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;

    let error = assert_error_step(&trace, &seen, 1, "tool_error", "error");
    assert_eq!(error["message"], "tool_error happened");
    assert_eq!(error["details"], json!({ "tool": "fail" }));
    assert_eq!(fed_back_ids(&seen, 1), (Some("f1".into()), Some("fail".into())));
    let line = &trace[0];
    assert_eq!(line["tool"], "fail");
    assert_eq!(line["arguments"], json!({ "n": 1 }), "the arguments come back from the tool's thread");
    assert_eq!(line["plugin"], "faulty");
    assert_eq!(line["plugin_version"], "0.1.0");
    assert_eq!(kit.fail.calls.load(Ordering::SeqCst), 1);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.answer, Some(json!("gave up")));
    assert_eq!(outcome.steps, 2);
}

#[tokio::test]
async fn a_plugins_own_failure_code_is_a_tool_error_that_keeps_the_code() {
    let kit = Kit::new();
    let (outcome, trace, seen) =
        drive(&kit, vec![call("odd_fail", json!({})), finish(json!(0))], RunOptions::default()).await;
    let error = assert_error_step(&trace, &seen, 1, "tool_error", "error");
    assert_eq!(error["message"], "rate_limited happened");
    assert_eq!(error["details"], json!({ "tool": "odd_fail", "tool_code": "rate_limited" }));
    assert_eq!(kit.odd_fail.calls.load(Ordering::SeqCst), 1);
    assert_eq!(outcome.status, RunStatus::Finished);
}

#[tokio::test]
async fn a_panicking_handler_is_tool_panicked_and_the_loop_survives() {
    let kit = Kit::new();
    let replies =
        vec![call("panic", json!({})), echo("after"), call("panic", json!({ "again": true })), finish(json!(1))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;

    let error = assert_error_step(&trace, &seen, 1, "tool_panicked", "error");
    assert_eq!(error["details"], json!({ "tool": "panic" }));
    assert_eq!(fed_back_ids(&seen, 1), (Some("call_1".into()), Some("panic".into())));
    assert_eq!(trace[0]["arguments"], json!({}));
    // The loop and its blocking pool still work after the panic.
    assert_eq!(trace[1]["status"], "ok");
    assert_eq!(trace[1]["result"], json!({ "tool": "echo", "echo": { "text": "after" } }));
    let again = assert_error_step(&trace, &seen, 3, "tool_panicked", "error");
    assert_eq!(again, error, "the same failure gives the same error object");
    assert_eq!(kit.panics.calls.load(Ordering::SeqCst), 2);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 4);
}

#[tokio::test]
async fn calling_another_tool_on_the_last_step_is_tool_not_offered() {
    let kit = Kit::new();
    let replies = vec![echo("a"), echo("b"), call_with_id("x", "echo", json!({ "text": "c" }))];
    let (outcome, trace, seen) = drive(&kit, replies, opts(3, 3)).await;

    assert!(forces_finish(&seen[2], &seen[0]), "{:?}", seen[2].tool_choice);
    let line = &trace[2];
    assert_eq!(line["status"], "rejected");
    assert_eq!(line["offered"], "finish");
    assert_eq!(line["tool"], "echo");
    assert_eq!(line["error"]["code"], "tool_not_offered");
    assert_eq!(line["error"]["details"], json!({ "tool": "echo", "offered": ["finish"] }));
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 2, "the not-offered call never ran");
    assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
}

#[tokio::test]
async fn a_text_call_to_another_tool_on_the_last_step_is_tool_not_offered() {
    let kit = Kit::new();
    let replies = vec![text(r#"{"tool": "echo", "arguments": {"text": "x"}}"#)];
    let (outcome, trace, seen) = drive(&kit, replies, opts(1, 3)).await;
    assert!(forces_finish(&seen[0], &seen[0]), "{:?}", seen[0].tool_choice);
    assert_eq!(trace[0]["error"]["code"], "tool_not_offered");
    assert_eq!(trace[0]["status"], "rejected");
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0);
    assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
}

#[tokio::test]
async fn a_bare_object_on_the_last_step_is_finishs_arguments() {
    let kit = Kit::new();
    let (outcome, trace, _) = drive(&kit, vec![echo("a"), text(r#"So: {"answer": 7}"#)], opts(2, 3)).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.answer, Some(json!(7)));
    assert_eq!(outcome.steps, 2);
    assert_eq!(trace[1]["tool"], "finish");
    assert_eq!(trace[1]["offered"], "finish");
    assert_eq!(trace[1]["status"], "finished");
}

#[tokio::test]
async fn a_call_made_again_is_answered_with_its_known_result_and_not_run() {
    let kit = Kit::new();
    let replies = vec![echo("x"), echo("x"), finish(json!("x"))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;

    assert_eq!(statuses(&trace), ["ok", "rejected", "finished"]);
    assert_eq!(codes(&trace), [None, Some("repeated_call"), None]);
    assert_eq!(trace[1]["error"]["details"], json!({ "tool": "echo", "known": true }));
    assert_eq!(trace[1]["result"], trace[0]["result"], "the known result is traced");
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1, "the repeated call never ran");
    // Fed back as the result it had, not as an error a model would copy.
    match fed_back(&seen, 2) {
        Message::ToolResult { content, is_error, .. } => {
            assert!(!is_error);
            assert_eq!(content, &trace[0]["result"]);
        }
        other => panic!("expected a ToolResult, got {other:?}"),
    }
    assert_eq!(fed_back_ids(&seen, 2), (Some("call_2".into()), Some("echo".into())));
    // The next step offers finish alone, though it is not the last of the budget.
    assert!(forces_finish(&seen[2], &seen[0]), "{:?}", seen[2].tool_choice);
    assert_eq!(trace[2]["offered"], "finish");
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 3);
}

#[tokio::test]
async fn after_a_known_call_finish_stays_the_only_tool() {
    let kit = Kit::new();
    let replies = vec![echo("x"), echo("x"), echo("y"), text("hmm"), finish(json!(0))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(codes(&trace), [None, Some("repeated_call"), Some("tool_not_offered"), Some("no_json"), None]);
    for (i, s) in seen.iter().enumerate().skip(2) {
        assert!(forces_finish(s, &seen[0]), "step {}", i + 1);
        assert_eq!(trace[i]["offered"], "finish");
    }
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 5);
}

#[tokio::test]
async fn the_same_call_through_text_and_structured_counts_as_a_repeat() {
    let kit = Kit::new();
    let replies = vec![
        text(r#"{"tool": "echo", "arguments": {"text": "x"}}"#),
        call("echo", json!("{\"text\": \"x\"}")),
        finish(json!(0)),
    ];
    let (_, trace, _) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(codes(&trace), [None, Some("repeated_call"), None]);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_call_made_before_is_known_even_after_another_call() {
    let kit = Kit::new();
    let replies = vec![echo("A"), echo("B"), echo("A"), finish(json!(0))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(codes(&trace), [None, None, Some("repeated_call"), None]);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 2);
    assert!(forces_finish(&seen[3], &seen[0]), "{:?}", seen[3].tool_choice);
    assert_eq!(outcome.status, RunStatus::Finished);
}

/// A call that keeps failing is still the same call made again and again: its result will not
/// change either. The loop resets the repeat count after every step that is not `ok`, so a
/// model that loops on a failing call is never stopped and spends the whole budget.
#[tokio::test]
async fn a_failing_call_made_three_times_in_a_row_is_repeated_call() {
    let kit = Kit::new();
    let replies = vec![call("fail", json!({})), call("fail", json!({})), call("fail", json!({})), finish(json!(0))];
    let (outcome, trace, seen) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(codes(&trace), [Some("tool_error"), Some("tool_error"), Some("repeated_call"), None]);
    assert_eq!(kit.fail.calls.load(Ordering::SeqCst), 2, "the third call must not run");
    assert!(forces_finish(&seen[3], &seen[0]), "{:?}", seen[3].tool_choice);
    assert_eq!(outcome.status, RunStatus::Finished);
}

#[tokio::test]
async fn step_budget_exhausted() {
    let kit = Kit::new();
    let replies = vec![echo("a"), echo("b"), echo("c"), finish(json!("too late"))];
    let (outcome, trace, seen) = drive(&kit, replies, opts(3, 3)).await;

    assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
    assert_eq!(outcome.steps, 3);
    assert_eq!(outcome.answer, None);
    let error = outcome.error.unwrap();
    assert_eq!(error.code, ErrorCode::StepBudgetExhausted);
    assert_eq!(error.code.as_str(), "step_budget_exhausted");
    assert_eq!(error.details, json!({ "max_steps": 3 }));
    assert_eq!(serde_json::to_value(&error).unwrap()["code"], "step_budget_exhausted");
    assert_eq!(seen.len(), 3, "the provider is not asked beyond the budget");
    assert_eq!(statuses(&trace), ["ok", "ok", "rejected"]);
    assert_eq!(trace[2]["error"]["code"], "tool_not_offered");
}

#[tokio::test]
async fn provider_error_fails_the_run_after_one_trace_line() {
    let kit = Kit::new();
    let refused = ProviderError { retries: 2, outage: true, ..ProviderError::new("connection refused") };
    let provider = Replay::scripted(vec![Err(refused)]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).run(REQUEST, &mut trace).await;

    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.steps, 1);
    assert_eq!(outcome.answer, None);
    let error = outcome.error.unwrap();
    assert_eq!(error.code, ErrorCode::ProviderError);
    assert_eq!(error.details, json!({ "provider": "replay", "retries": 2, "outage": true }));
    assert_eq!(outcome.retries, 2);
    assert!(error.message.contains("connection refused"), "{}", error.message);
    assert!(error.message.contains("replay"), "{}", error.message);

    assert_eq!(trace.len(), 1);
    let line = &trace[0];
    assert_eq!(line["step"], 1);
    assert_eq!(line["status"], "error");
    assert_eq!(line["error"]["code"], "provider_error");
    assert_eq!(line["error"], serde_json::to_value(&error).unwrap());
    assert_eq!(line["tool"], Value::Null);
    assert_eq!(line["offered"], "all");
    assert!(line.get("result").is_none());
    assert_eq!(provider.seen().len(), 1);
}

#[tokio::test]
async fn provider_error_midway_keeps_the_steps_and_usage_so_far() {
    let kit = Kit::new();
    let mut first = echo("a");
    first.usage = Some(Usage { input_tokens: 7, output_tokens: 2, cached_input_tokens: 0 });
    let provider = Replay::scripted(vec![Ok(first), Ok(text("?")), Err(ProviderError::new("timeout"))]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).run(REQUEST, &mut trace).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.steps, 3);
    assert_eq!(outcome.usage, Usage { input_tokens: 7, output_tokens: 2, cached_input_tokens: 0 });
    assert_eq!(statuses(&trace), ["ok", "rejected", "error"]);
    assert_eq!(trace[2]["step"], 3);
    assert_eq!(trace[2]["error"]["code"], "provider_error");
}

// ---------------------------------------------------------------------------------------------
// Trace failures stop the run
// ---------------------------------------------------------------------------------------------

/// Accepts `ok` lines, then refuses every line from the `fail_at`-th on.
struct BrokenSink {
    fail_at: usize,
    lines: Vec<u32>,
}

impl TraceSink for BrokenSink {
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        if self.lines.len() + 1 >= self.fail_at {
            return Err(io::Error::other("disk full"));
        }
        self.lines.push(entry.step);
        Ok(())
    }
}

#[tokio::test]
async fn a_trace_that_cannot_be_written_stops_the_run() {
    let kit = Kit::new();
    let provider = Replay::new(vec![echo("a"), echo("b"), finish(json!(0))]);
    let mut sink = BrokenSink { fail_at: 2, lines: Vec::new() };
    let outcome = Loop::new(&provider, &kit.registry).run(REQUEST, &mut sink).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.steps, 2);
    let error = outcome.error.unwrap();
    assert_eq!(error.code, ErrorCode::TraceError);
    assert_eq!(error.details, json!({ "error": "disk full" }));
    assert_eq!(sink.lines, [1]);
    assert_eq!(provider.seen().len(), 2, "no step runs after the trace failed");
}

#[tokio::test]
async fn a_trace_failure_on_a_provider_error_is_reported_as_trace_error() {
    let kit = Kit::new();
    let provider = Replay::scripted(vec![Err(ProviderError::new("down"))]);
    let mut sink = BrokenSink { fail_at: 1, lines: Vec::new() };
    let outcome = Loop::new(&provider, &kit.registry).run(REQUEST, &mut sink).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.steps, 1);
    assert_eq!(outcome.error.unwrap().code, ErrorCode::TraceError);
}

// ---------------------------------------------------------------------------------------------
// 4. The repeat check: off with 0, reset by a different call
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn max_repeats_zero_turns_the_repeat_check_off() {
    let kit = Kit::new();
    let mut replies: Vec<ModelReply> = (0..6).map(|_| echo("same")).collect();
    replies.push(finish(json!(0)));
    let (outcome, trace, _) = drive(&kit, replies, opts(8, 0)).await;
    assert_eq!(statuses(&trace), ["ok", "ok", "ok", "ok", "ok", "ok", "finished"]);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 6);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 7);
}

#[tokio::test]
async fn a_different_call_in_between_resets_the_count() {
    let kit = Kit::new();
    // F F E F F F: a failing call's count restarts at E, so only the third F after E trips the guard.
    let fail = || call("fail", json!({}));
    let replies = vec![fail(), fail(), echo("E"), fail(), fail(), fail(), finish(json!(0))];
    let (outcome, trace, seen) = drive(&kit, replies, opts(8, 3)).await;
    let failed = Some("tool_error");
    assert_eq!(codes(&trace), [failed, failed, None, failed, failed, Some("repeated_call"), None]);
    assert_eq!(kit.fail.calls.load(Ordering::SeqCst), 4);
    assert!(forces_finish(&seen[6], &seen[0]), "{:?}", seen[6].tool_choice);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 7);
}

#[tokio::test]
async fn same_tool_with_different_arguments_is_a_different_call() {
    let kit = Kit::new();
    let replies = vec![echo("1"), echo("2"), echo("3"), echo("4"), finish(json!(0))];
    let (_, trace, _) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(statuses(&trace), ["ok", "ok", "ok", "ok", "finished"]);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_rejected_step_in_between_resets_the_count() {
    let kit = Kit::new();
    let fail = || call("fail", json!({}));
    let replies = vec![fail(), fail(), text("thinking"), fail(), fail(), finish(json!(0))];
    let (_, trace, _) = drive(&kit, replies, opts(8, 3)).await;
    let failed = Some("tool_error");
    assert_eq!(codes(&trace), [failed, failed, Some("no_json"), failed, failed, None]);
    assert_eq!(kit.fail.calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn max_repeats_two_rejects_the_second_identical_call() {
    let kit = Kit::new();
    let fail = || call("fail", json!({}));
    let (_, trace, _) = drive(&kit, vec![fail(), fail(), finish(json!(0))], opts(8, 2)).await;
    assert_eq!(codes(&trace), [Some("tool_error"), Some("repeated_call"), None]);
    assert_eq!(trace[1]["error"]["details"], json!({ "tool": "fail", "times": 2 }));
    assert_eq!(kit.fail.calls.load(Ordering::SeqCst), 1);
    // A call that answered is answered with its result: the guard's error is not fed back.
    let (_, trace, seen) = drive(&kit, vec![echo("A"), echo("A"), finish(json!(0))], opts(8, 2)).await;
    assert_eq!(trace[1]["error"]["details"], json!({ "tool": "echo", "known": true }));
    assert!(matches!(fed_back(&seen, 2), Message::ToolResult { is_error: false, .. }));
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------------------------
// 5. What each step offers
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_last_step_offers_finish_alone_and_earlier_steps_offer_all() {
    let kit = Kit::new();
    let replies = vec![echo("a"), echo("b"), echo("c"), finish(json!("end"))];
    let (outcome, trace, seen) = drive(&kit, replies, opts(4, 3)).await;

    assert_eq!(seen.len(), 4);
    for (i, s) in seen.iter().enumerate().take(3) {
        assert_eq!(s.tools, all_tools(), "step {}", i + 1);
        assert_eq!(s.tool_choice, ToolChoice::Required, "step {}", i + 1);
    }
    assert!(forces_finish(&seen[3], &seen[0]), "{:?}", seen[3].tool_choice);
    let offered: Vec<&str> = trace.iter().map(|l| l["offered"].as_str().unwrap()).collect();
    assert_eq!(offered, ["all", "all", "all", "finish"]);
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 4);
}

#[tokio::test]
async fn a_budget_of_one_step_offers_finish_alone() {
    let kit = Kit::new();
    let (outcome, trace, seen) = drive(&kit, vec![finish(json!(1))], opts(1, 3)).await;
    assert!(forces_finish(&seen[0], &seen[0]), "{:?}", seen[0].tool_choice);
    assert_eq!(trace[0]["offered"], "finish");
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 1);
}

#[tokio::test]
async fn a_budget_of_zero_steps_never_asks_the_provider() {
    let kit = Kit::new();
    let (outcome, trace, seen) = drive(&kit, vec![finish(json!(1))], opts(0, 3)).await;
    assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
    assert_eq!(outcome.steps, 0);
    assert_eq!(outcome.error.unwrap().details, json!({ "max_steps": 0 }));
    assert!(trace.is_empty());
    assert!(seen.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 6 and 7. Determinism, and the statuses of the trace
// ---------------------------------------------------------------------------------------------

/// One reply of every kind that fails a step, the last one on the finish-only step.
fn bad_script() -> Vec<ModelReply> {
    vec![
        text("no JSON in here"),
        text(r#"{"tool": "echo", "arguments": {"text": "hi"#),
        call_with_id("s3", "echo", json!("{\"text\": ")),
        call("nope", json!({ "q": 1 })),
        call("typed", json!({ "b": -1, "c": "no", "d": "z", "e": [1, "two"], "extra": 1 })),
        call("fail", json!({})),
        call("panic", json!({})),
        call("odd_fail", json!({})),
        call("echo", json!({ "text": "late" })),
    ]
}

const BAD_CODES: [&str; 9] = [
    "no_json",
    "invalid_json",
    "invalid_json",
    "unknown_tool",
    "invalid_arguments",
    "tool_error",
    "tool_panicked",
    "tool_error",
    "tool_not_offered",
];

#[tokio::test]
async fn the_same_bad_replies_give_byte_identical_errors_and_traces() {
    let mut runs: Vec<(Vec<String>, Vec<Value>, String)> = Vec::new();
    // Fresh registries each time: nothing may depend on hash seeds or on state kept between runs.
    for _ in 0..8 {
        let kit = Kit::new();
        let (outcome, trace, _) = drive(&kit, bad_script(), opts(9, 3)).await;
        assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
        assert_eq!(trace.len(), 9);
        let errors: Vec<String> = trace.iter().map(|l| serde_json::to_string(&l["error"]).unwrap()).collect();
        let lines: Vec<Value> = trace.iter().map(without_timings).collect();
        runs.push((errors, lines, serde_json::to_string(&outcome.error).unwrap()));
    }
    let (errors, lines, outcome_error) = &runs[0];
    for (errs, ls, oe) in &runs[1..] {
        for (step, (a, b)) in errors.iter().zip(errs).enumerate() {
            assert_eq!(a, b, "the error of step {} differs between runs", step + 1);
        }
        assert_eq!(lines, ls);
        assert_eq!(outcome_error, oe);
    }
    let seen_codes: Vec<String> = lines.iter().map(|l| l["error"]["code"].as_str().unwrap().to_owned()).collect();
    assert_eq!(seen_codes, BAD_CODES);
}

#[tokio::test]
async fn trace_statuses_are_ok_rejected_error_or_finished() {
    let kit = Kit::new();
    let mut replies = bad_script();
    replies.pop();
    replies.insert(0, echo("fine"));
    replies.push(finish(json!("at last")));
    let (outcome, trace, seen) = drive(&kit, replies, opts(10, 3)).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 10);
    assert_eq!(
        statuses(&trace),
        ["ok", "rejected", "rejected", "rejected", "rejected", "rejected", "error", "error", "error", "finished"]
    );
    let want: Vec<Option<&str>> =
        std::iter::once(None).chain(BAD_CODES[..8].iter().map(|c| Some(*c))).chain(std::iter::once(None)).collect();
    assert_eq!(codes(&trace), want);
    for (i, line) in trace.iter().enumerate() {
        assert_eq!(line["step"], json!(i + 1));
        let status = line["status"].as_str().unwrap();
        assert_eq!(line.get("error").is_some(), status == "rejected" || status == "error", "{line}");
        assert_eq!(line.get("result").is_some(), status == "ok" || status == "finished", "{line}");
    }
    // Every failed step was fed back as an error; the ok one was not.
    for step in 1..10 {
        let Message::ToolResult { is_error, .. } = fed_back(&seen, step) else { panic!("step {step}") };
        assert_eq!(*is_error, step != 1, "step {step}");
    }
    // The StepStatus values serialize to exactly these names.
    let names: Vec<Value> = [StepStatus::Ok, StepStatus::Rejected, StepStatus::Error, StepStatus::Finished]
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    assert_eq!(names, [json!("ok"), json!("rejected"), json!("error"), json!("finished")]);
}

#[tokio::test]
async fn repeated_call_and_provider_error_statuses() {
    let kit = Kit::new();
    let provider = Replay::scripted(vec![Ok(echo("x")), Ok(echo("x")), Ok(echo("x")), Err(ProviderError::new("gone"))]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).run(REQUEST, &mut trace).await;
    assert_eq!(statuses(&trace), ["ok", "rejected", "rejected", "error"]);
    assert_eq!(codes(&trace), [None, Some("repeated_call"), Some("tool_not_offered"), Some("provider_error")]);
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.steps, 4);
}

// ---------------------------------------------------------------------------------------------
// 8. Every step counts against the budget
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn error_steps_count_against_the_budget() {
    let kit = Kit::new();
    let replies = vec![
        text("nope"),
        call("nope", json!({})),
        call("fail", json!({})),
        call("panic", json!({})),
        finish(json!(0)),
    ];
    let (outcome, trace, seen) = drive(&kit, replies, opts(4, 3)).await;
    assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
    assert_eq!(outcome.steps, 4);
    assert_eq!(outcome.error.unwrap().code, ErrorCode::StepBudgetExhausted);
    assert_eq!(seen.len(), 4, "the fifth reply is never asked for");
    assert_eq!(codes(&trace), [Some("no_json"), Some("unknown_tool"), Some("tool_error"), Some("tool_not_offered")]);
    assert_eq!(kit.panics.calls.load(Ordering::SeqCst), 0, "panic was not offered on the last step");
}

#[tokio::test]
async fn a_run_of_only_errors_still_finishes_on_the_last_step() {
    let kit = Kit::new();
    let replies = vec![text("a"), text("{"), call("nope", json!({})), finish(json!("late but fine"))];
    let (outcome, trace, seen) = drive(&kit, replies, opts(4, 3)).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 4);
    assert_eq!(outcome.answer, Some(json!("late but fine")));
    assert_eq!(codes(&trace), [Some("no_json"), Some("invalid_json"), Some("unknown_tool"), None]);
    // Each step, errors included, adds one reply and one result to the conversation.
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.conversation.len(), 1 + 2 * i, "step {}", i + 1);
    }
}

/// A reply carrying several structured calls.
fn calls(list: &[(&str, &str, Value)]) -> ModelReply {
    ModelReply {
        calls: list
            .iter()
            .map(|(id, name, arguments)| ProposedCall {
                id: Some((*id).into()),
                name: (*name).into(),
                arguments: arguments.clone().into(),
            })
            .collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn several_calls_in_one_reply_run_in_order_one_step_each_without_asking_again() {
    let kit = Kit::new();
    let reply = calls(&[
        ("a", "echo", json!({"text": "one"})),
        ("b", "nosuch", json!({})),
        ("c", "echo", json!({"text": "two"})),
    ]);
    let (outcome, trace, seen) = drive(&kit, vec![reply, finish(json!("done"))], RunOptions::default()).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(outcome.steps, 4, "three calls, then finish: each call is a step of the budget");
    assert_eq!(seen.len(), 2, "the provider is asked once for the three calls, once for finish");
    assert_eq!(statuses(&trace), ["ok", "rejected", "ok", "finished"]);
    let indexes: Vec<Value> = trace.iter().map(|l| l["call_index"].clone()).collect();
    assert_eq!(indexes, [json!(0), json!(1), json!(2), Value::Null]);
    assert_eq!(trace[1]["model_us"], 0, "no model call was made for the second call");
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 2);
    // The provider's second request holds the reply once, then one result per call, by id.
    let conversation = &seen[1].conversation;
    assert_eq!(conversation.len(), 5, "{conversation:?}");
    assert!(matches!(&conversation[1], Message::Assistant { reply } if reply.calls.len() == 3));
    let ids: Vec<Option<String>> = conversation[2..]
        .iter()
        .map(|m| match m {
            Message::ToolResult { call_id, .. } => call_id.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [Some("a".into()), Some("b".into()), Some("c".into())]);
}

#[tokio::test]
async fn a_finish_among_several_calls_ends_the_run_and_the_budget_still_binds() {
    let kit = Kit::new();
    let reply = calls(&[
        ("a", "echo", json!({"text": "x"})),
        ("b", "finish", json!({"answer": 1})),
        ("c", "echo", json!({"text": "y"})),
    ]);
    let (outcome, trace, _) = drive(&kit, vec![reply], RunOptions::default()).await;
    assert_eq!((outcome.status, outcome.steps, outcome.answer), (RunStatus::Finished, 2, Some(json!(1))));
    assert_eq!(trace.len(), 2);

    // With a budget of 2, the second of three calls falls on the last step: only finish is offered.
    let kit = Kit::new();
    let reply = calls(&[("a", "echo", json!({"text": "x"})), ("b", "echo", json!({"text": "y"}))]);
    let (outcome, trace, _) = drive(&kit, vec![reply], opts(2, 3)).await;
    assert_eq!(outcome.status, RunStatus::StepBudgetExhausted);
    assert_eq!(codes(&trace), [None, Some("tool_not_offered")]);
}

#[tokio::test]
async fn usage_and_router_mode_are_traced_on_the_step_that_made_the_model_call() {
    let kit = Kit::new();
    let mut reply = calls(&[("a", "echo", json!({"text": "x"})), ("b", "echo", json!({"text": "y"}))]);
    reply.usage = Some(harness_core::Usage { input_tokens: 10, output_tokens: 3, cached_input_tokens: 4 });
    reply.router_mode = Some("native".into());
    reply.retries = 2;
    let (outcome, trace, _) = drive(&kit, vec![reply, finish(json!(0))], RunOptions::default()).await;
    assert_eq!(trace[0]["usage"], json!({"input_tokens": 10, "output_tokens": 3, "cached_input_tokens": 4}));
    assert!(trace[1].get("usage").is_none());
    assert_eq!((trace[0]["router_mode"].as_str(), trace[1]["router_mode"].as_str()), (Some("native"), Some("native")));
    assert_eq!(outcome.retries, 2);
    assert_eq!(outcome.usage.input_tokens, 10);
}

// ---------------------------------------------------------------------------------------------
// Limits: sizes, timeouts, wall clock
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_reply_over_the_size_limit_is_rejected_unparsed() {
    let kit = Kit::new();
    let options = RunOptions { max_reply_bytes: 100, ..RunOptions::default() };
    let big = text(&format!("{{\"tool\": \"echo\", \"arguments\": {{\"text\": \"{}\"}}}}", "x".repeat(200)));
    let (outcome, trace, seen) = drive(&kit, vec![big, finish(json!(1))], options).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(codes(&trace), [Some("reply_too_large"), None]);
    assert_eq!(trace[0]["status"], "rejected");
    assert_eq!(trace[0]["error"]["details"]["limit"], 100);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0);
    // What the model sees next holds no copy of the oversized reply.
    let seen_text = format!("{:?}", seen[1].conversation);
    assert!(!seen_text.contains(&"x".repeat(200)), "{seen_text}");
}

#[tokio::test]
async fn arguments_over_the_size_limit_are_rejected_and_not_traced() {
    let kit = Kit::new();
    let options = RunOptions { max_arguments_bytes: 50, ..RunOptions::default() };
    let (outcome, trace, _) = drive(&kit, vec![echo(&"y".repeat(80)), finish(json!(1))], options).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(codes(&trace), [Some("arguments_too_large"), None]);
    assert!(trace[0]["arguments"].get("omitted_bytes").is_some(), "{}", trace[0]);
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_tool_past_its_timeout_is_abandoned_as_tool_timeout() {
    let kit = Kit::with_sleep_limit(Some(Duration::from_millis(5)));
    let (outcome, trace, _) =
        drive(&kit, vec![call("sleep", json!({})), finish(json!(1))], RunOptions::default()).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(codes(&trace), [Some("tool_timeout"), None]);
    assert_eq!(trace[0]["status"], "error");
    assert_eq!(trace[0]["error"]["details"]["timeout_ms"], 5);
    assert_eq!(trace[0]["arguments"], json!({}), "an abandoned call keeps its arguments in the trace");
}

#[tokio::test]
async fn the_wall_clock_limit_ends_the_run() {
    let kit = Kit::new();
    let options = RunOptions { max_duration: Some(std::time::Duration::from_millis(10)), ..RunOptions::default() };
    let replies = vec![call("sleep", json!({})), call("sleep", json!({"n": 2})), finish(json!(1))];
    let (outcome, trace, _) = drive(&kit, replies, options).await;
    assert_eq!(outcome.status, RunStatus::TimeBudgetExhausted);
    assert_eq!(outcome.error.as_ref().map(|e| e.code.as_str()), Some("time_budget_exhausted"));
    // The sleeping tool was cut at the run's deadline, and no later step ran.
    assert_eq!(codes(&trace), [Some("tool_timeout")]);
    assert_eq!(outcome.steps, 1);
}

#[tokio::test]
async fn past_the_conversation_limit_only_finish_is_offered() {
    let kit = Kit::new();
    let options = RunOptions { max_conversation_bytes: 200, ..RunOptions::default() };
    let replies = vec![echo(&"z".repeat(150)), echo("small"), finish(json!(1))];
    let (outcome, trace, seen) = drive(&kit, replies, options).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert!(forces_finish(&seen[1], &seen[0]), "{:?}", seen[1].tool_choice);
    assert_eq!(codes(&trace), [None, Some("tool_not_offered"), None]);
}

#[tokio::test]
async fn call_tool_validates_and_runs_like_a_step() {
    let kit = Kit::new();
    let ok = harness_core::call_tool(&kit.registry, "echo", json!({"text": "hi"})).await;
    assert_eq!(ok.unwrap(), json!({"tool": "echo", "echo": {"text": "hi"}}));
    let bad = harness_core::call_tool(&kit.registry, "echo", json!({"text": 1})).await.unwrap_err();
    assert_eq!(bad.code.as_str(), "invalid_arguments");
    let unknown = harness_core::call_tool(&kit.registry, "finish", json!({"answer": 1})).await.unwrap_err();
    assert_eq!(unknown.code.as_str(), "unknown_tool");
    let failed = harness_core::call_tool(&kit.registry, "panic", json!({})).await.unwrap_err();
    assert_eq!(failed.code.as_str(), "tool_panicked");
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);
}

/// Records the thread each call ran on; allows inline calls.
#[derive(Default)]
struct WhereRan {
    threads: Mutex<Vec<std::thread::ThreadId>>,
    panic: bool,
}

impl ToolHandler for WhereRan {
    fn call(&self, _: &str, _: &Value) -> Result<Value, ToolFailure> {
        self.threads.lock().expect("not poisoned").push(std::thread::current().id());
        assert!(!self.panic, "inline boom");
        Ok(json!("ran"))
    }

    fn may_run_inline(&self) -> bool {
        true
    }
}

async fn where_ran(
    tuning: ProcessTuning,
    timeout: Option<Duration>,
    panic: bool,
) -> (Vec<std::thread::ThreadId>, Vec<Value>) {
    let handler = Arc::new(WhereRan { panic, ..WhereRan::default() });
    let mut registry = ToolRegistry::new();
    registry
        .register(ToolSpec {
            timeout,
            ..ToolSpec::new(definition("here", json!({"type": "object"}), plugin("p", "1.0.0")), handler.clone())
        })
        .expect("registers");
    let provider = Replay::new(vec![call("here", json!({})), finish(json!(1))]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &registry).tuning(tuning).run(REQUEST, &mut trace).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    let threads = handler.threads.lock().expect("not poisoned").clone();
    (threads, trace)
}

#[tokio::test]
async fn inline_calls_run_on_the_loops_thread_only_when_allowed_and_untimed() {
    let me = std::thread::current().id();
    let inline = ProcessTuning { inline_calls: true, ..ProcessTuning::default() };
    let (threads, _) = where_ran(inline, None, false).await;
    assert_eq!(threads, [me], "inline: the call ran on the loop's thread");
    let (threads, _) = where_ran(ProcessTuning::default(), None, false).await;
    assert_ne!(threads, [me], "by default calls go to a blocking thread");
    let (threads, _) = where_ran(inline, Some(Duration::from_secs(5)), false).await;
    assert_ne!(threads, [me], "a call with a timeout it does not enforce is never inline: it could not be abandoned");
    let (_, trace) = where_ran(inline, None, true).await;
    assert_eq!(trace[0]["error"]["code"], "tool_panicked", "an inline panic is caught too");
}

// ---------------------------------------------------------------------------------------------
// Replies read from text: reasoning, every call, cut replies, pinned formats
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_call_written_in_the_reasoning_never_runs() {
    let kit = Kit::new();
    let thought =
        r#"<think>I must not call {"tool": "echo", "arguments": {"text": "666"}} here.</think>The answer is 42."#;
    let (outcome, trace, _) = drive(&kit, vec![text(thought), finish(json!(42))], RunOptions::default()).await;
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0, "nothing ran");
    assert_eq!(codes(&trace), [Some("no_json"), None]);
    assert_eq!(trace[0]["tool"], Value::Null);
    assert!(trace[0]["reasoning"].as_str().is_some_and(|r| r.contains("666")), "{}", trace[0]);
    assert_eq!(trace[0]["reply_format"], "json");
    assert_eq!(outcome.answer, Some(json!(42)));
}

#[tokio::test]
async fn every_call_of_a_text_reply_runs_in_order_one_step_each() {
    let kit = Kit::new();
    let reply = text(
        "Two calls.\n<tool_call>\n<function=echo>\n<parameter=text>\none\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=typed>\n<parameter=a>\nx\n</parameter>\n<parameter=b>\n7\n</parameter>\n</function>\n</tool_call>",
    );
    let (outcome, trace, seen) = drive(&kit, vec![reply, finish(json!("done"))], RunOptions::default()).await;
    assert_eq!(seen.len(), 2, "one request for both calls, one for finish");
    assert_eq!(statuses(&trace), ["ok", "ok", "finished"]);
    assert_eq!(trace[0]["arguments"], json!({"text": "one"}));
    // The XML value of `b` is an integer because the schema says so.
    assert_eq!(trace[1]["arguments"], json!({"a": "x", "b": 7}));
    let indexes: Vec<Value> = trace.iter().map(|l| l["call_index"].clone()).collect();
    assert_eq!(indexes, [json!(0), json!(1), Value::Null]);
    assert_eq!(
        (trace[0]["reply_format"].as_str(), trace[1]["reply_format"].as_str()),
        (Some("qwen3_coder"), Some("qwen3_coder"))
    );
    assert!(trace[0].get("reply_text").is_some() && trace[1].get("reply_text").is_none());
    let Message::ToolResult { call_id, .. } = &seen[1].conversation[2] else { panic!("a tool result") };
    assert_eq!(call_id.as_deref(), Some("call_1"));
    let Message::ToolResult { call_id, .. } = &seen[1].conversation[3] else { panic!("a tool result") };
    assert_eq!(call_id.as_deref(), Some("call_2"), "each text call answers with its own step's id");
    assert_eq!(outcome.steps, 3);
}

#[tokio::test]
async fn a_cut_text_reply_runs_its_complete_call_and_never_the_cut_one() {
    let kit = Kit::new();
    let mut reply = text("[TOOL_CALLS]echo[ARGS]{\"text\": \"whole\"}[TOOL_CALLS]echo[ARGS]{\"text\": \"ha");
    reply.truncated = true;
    reply.finish_reason = Some("length".into());
    let (_, trace, seen) = drive(&kit, vec![reply, finish(json!(0))], RunOptions::default()).await;
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);
    assert_eq!(codes(&trace), [None, Some("reply_truncated"), None]);
    let error = &trace[1]["error"];
    assert_eq!(error["message"], "your reply was cut at the token limit; answer with one shorter call");
    assert_eq!(
        (error["details"]["format"].as_str(), error["details"]["tool"].as_str()),
        (Some("mistral"), Some("echo"))
    );
    let Message::ToolResult { is_error, tool, .. } = &seen[1].conversation[3] else { panic!("a tool result") };
    assert!(*is_error && tool.is_none(), "the cut call is fed back as an error answering no call");
}

#[tokio::test]
async fn the_last_structured_call_of_a_cut_reply_never_runs() {
    let kit = Kit::new();
    let mut reply = calls(&[("a", "echo", json!({"text": "x"})), ("b", "echo", json!({"text": "y"}))]);
    reply.truncated = true;
    let (_, trace, seen) = drive(&kit, vec![reply, finish(json!(0))], RunOptions::default()).await;
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 1);
    assert_eq!(codes(&trace), [None, Some("reply_truncated"), None]);
    assert_eq!(trace[1]["tool"], "echo", "the cut call is named in the trace");
    let Message::ToolResult { call_id, .. } = &seen[1].conversation[3] else { panic!("a tool result") };
    assert_eq!(call_id.as_deref(), Some("b"), "the error answers the cut call");
}

#[tokio::test]
async fn a_pinned_reply_format_reads_only_that_family() {
    let kit = Kit::new();
    let hermes = "<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"x\"}}</tool_call>";
    let options = RunOptions { reply_format: harness_core::ReplyFormat::Mistral, ..RunOptions::default() };
    let (_, trace, _) = drive(&kit, vec![text(hermes), finish(json!(0))], options).await;
    assert_eq!(kit.echo.calls.load(Ordering::SeqCst), 0);
    assert_eq!(codes(&trace), [Some("no_json"), None]);
    assert_eq!(trace[0]["reply_format"], "mistral");
}

#[tokio::test]
async fn reasoning_the_server_split_out_is_traced_on_the_step_that_asked() {
    let kit = Kit::new();
    let mut reply = calls(&[("a", "echo", json!({"text": "x"})), ("b", "echo", json!({"text": "y"}))]);
    reply.reasoning = Some("two echoes".into());
    let (_, trace, _) = drive(&kit, vec![reply, finish(json!(0))], RunOptions::default()).await;
    assert_eq!(trace[0]["reasoning"], "two echoes");
    assert!(trace[1].get("reasoning").is_none() && trace[0].get("reply_format").is_none());
}

#[tokio::test]
async fn a_bare_object_in_text_is_finishs_arguments_only_on_the_last_step() {
    let kit = Kit::new();
    let (outcome, trace, _) = drive(&kit, vec![text(r#"{"answer": 7}"#)], opts(1, 3)).await;
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!(7))));
    assert_eq!(trace[0]["tool"], "finish");
}

// ---------------------------------------------------------------------------------------------
// A first step cannot end the run with a guess; a copied answer is no success
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_small_model_is_offered_finish_only_once_a_tool_has_answered() {
    let kit = Kit::new();
    let provider = Replay::small(vec![finish(json!("guess")), echo("hi"), finish(json!("hi"))]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).run(REQUEST, &mut trace).await;
    let seen = provider.seen();
    assert_eq!(seen[0].tool_choice, ToolChoice::AnyBut(FINISH.to_owned()));
    assert_eq!(seen[0].tools, seen[2].tools, "the tools sent stay the same: the prompt prefix survives");
    assert_eq!(trace[0]["offered"], "tools");
    assert_eq!(codes(&trace), [Some("tool_not_offered"), None, None]);
    assert!(trace[0]["error"]["message"].as_str().unwrap().contains("before a tool has answered"), "{}", trace[0]);
    assert_eq!(seen[2].tool_choice, ToolChoice::Required, "a tool answered: finish is offered");
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!("hi"))));
}

#[tokio::test]
async fn a_small_model_is_offered_the_tools_its_request_names_until_one_has_answered() {
    let kit = Kit::new();
    let provider = Replay::small(vec![call("sleep", json!({})), echo("hi"), finish(json!("hi"))]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).run("echo this text back", &mut trace).await;
    let seen = provider.seen();
    assert_eq!(seen[0].tool_choice, ToolChoice::OneOf(vec!["echo".to_owned()]));
    assert_eq!(seen[1].tool_choice, seen[0].tool_choice, "no tool has answered yet");
    assert_eq!(seen[0].tools, seen[2].tools, "the tools sent stay the same: the prompt prefix survives");
    assert_eq!((trace[0]["offered"].as_str(), trace[1]["offered"].as_str()), (Some("shortlist"), Some("shortlist")));
    assert_eq!(codes(&trace), [Some("tool_not_offered"), None, None]);
    let message = trace[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"sleep\"") && message.contains("echo"), "{message}");
    assert_eq!(seen[2].tool_choice, ToolChoice::Required, "a tool answered: every tool, and finish");
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!("hi"))));

    // A request in no tool's words has no shortlist; nor has a capable model's run.
    let provider = Replay::small(vec![echo("hi"), finish(json!("hi"))]);
    Loop::new(&provider, &kit.registry).run(REQUEST, &mut NoTrace).await;
    assert_eq!(provider.seen()[0].tool_choice, ToolChoice::AnyBut(FINISH.to_owned()));
    let provider = Replay::new(vec![call("sleep", json!({})), finish(json!("z"))]);
    let outcome = Loop::new(&provider, &kit.registry).run("echo this text back", &mut NoTrace).await;
    assert_eq!((provider.seen()[0].tool_choice.clone(), outcome.status), (ToolChoice::Required, RunStatus::Finished));
}

#[tokio::test]
async fn a_small_models_forced_finish_before_any_tool_answered_is_no_success() {
    let kit = Kit::new();
    // The last step forces finish; no tool has answered, so its answer can only be a guess.
    let small = RunOptions { max_steps: 2, ..RunOptions::default() };
    let provider = Replay::small(vec![call("nope", json!({})), finish(json!("f"))]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).options(small).run(REQUEST, &mut trace).await;
    assert_eq!(codes(&trace), [Some("unknown_tool"), Some("tool_not_offered")]);
    assert_eq!(trace[1]["offered"], "finish");
    assert_eq!((outcome.status, outcome.answer), (RunStatus::StepBudgetExhausted, None));
    // Once a tool has answered, the forced finish ends the run as ever.
    let provider = Replay::small(vec![echo("hello"), finish(json!("hello"))]);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).options(small).run(REQUEST, &mut trace).await;
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!("hello"))), "{trace:?}");
    // A capable model's forced finish is its answer, tool or not.
    let provider = Replay::new(vec![call("nope", json!({})), finish(json!("f"))]);
    let outcome = Loop::new(&provider, &kit.registry).options(small).run(REQUEST, &mut NoTrace).await;
    assert_eq!(outcome.status, RunStatus::Finished);
}

#[tokio::test]
async fn the_operator_decides_over_the_provider_whether_finish_may_come_first() {
    let kit = Kit::new();
    let allowed = RunOptions { early_finish: EarlyFinish::Allowed, ..RunOptions::default() };
    let provider = Replay::small(vec![finish(json!(1))]);
    let outcome = Loop::new(&provider, &kit.registry).options(allowed).run(REQUEST, &mut NoTrace).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(provider.seen()[0].tool_choice, ToolChoice::Required);

    let refused = RunOptions { early_finish: EarlyFinish::Refused, ..RunOptions::default() };
    let (_, trace, seen) = drive(&kit, vec![finish(json!(1)), echo("b"), finish(json!(2))], refused).await;
    assert_eq!(codes(&trace), [Some("tool_not_offered"), None, None]);
    assert_eq!(seen[0].tool_choice, ToolChoice::AnyBut(FINISH.to_owned()));
    // With finish the one tool there is, it is offered at once.
    let alone = ToolRegistry::new();
    let provider = Replay::new(vec![finish(json!(3))]);
    let outcome = Loop::new(&provider, &alone).options(refused).run(REQUEST, &mut NoTrace).await;
    assert_eq!(outcome.status, RunStatus::Finished);
}

#[tokio::test]
async fn an_answer_copied_from_a_harness_error_is_refused_and_the_run_goes_on() {
    let kit = Kit::new();
    let replies = vec![call("nope", json!({})), finish(json!({"code": "unknown_tool"})), echo("1"), finish(json!("1"))];
    let (outcome, trace, _) = drive(&kit, replies, RunOptions::default()).await;
    assert_eq!(codes(&trace), [Some("unknown_tool"), Some("copied_answer"), None, None]);
    assert_eq!(trace[1]["status"], "rejected");
    assert_eq!(trace[1]["error"]["details"]["source"], "error");
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!("1"))));
}

#[tokio::test]
async fn an_answer_copied_from_the_request_is_refused_unless_a_result_holds_it() {
    let kit = Kit::new();
    // A small model's guards (finish withheld until a tool answered, as for a small model).
    let small = RunOptions { early_finish: EarlyFinish::Refused, ..RunOptions::default() };
    let replies = vec![echo("1"), finish(json!("6*7")), finish(json!(6)), echo("6"), finish(json!(6))];
    let provider = Replay::new(replies);
    let mut trace: Vec<Value> = Vec::new();
    let outcome = Loop::new(&provider, &kit.registry).options(small).run("what is 6*7?", &mut trace).await;
    assert_eq!(codes(&trace), [None, Some("copied_answer"), Some("copied_answer"), None, None]);
    assert_eq!(trace[1]["error"]["details"], json!({"answer": "6*7", "source": "request"}));
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!(6))), "a result holds 6");
    // A capable model may answer from the request: no small model's guard by default.
    let provider = Replay::new(vec![finish(json!("23"))]);
    let outcome = Loop::new(&provider, &kit.registry).run("which is larger, 17 or 23?", &mut NoTrace).await;
    assert_eq!((outcome.status, outcome.answer), (RunStatus::Finished, Some(json!("23"))));
    // Words from the request may be the answer.
    let provider = Replay::new(vec![finish(json!("yes"))]);
    let outcome = Loop::new(&provider, &kit.registry).run("say yes", &mut NoTrace).await;
    assert_eq!(outcome.status, RunStatus::Finished);
}
