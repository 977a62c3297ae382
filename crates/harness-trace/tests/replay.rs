//! Replay through the public API, in process: a run recorded with `Loop::run_traced` (a reply with
//! two calls, a reply refused for its size, a provider failure) replays clean against the same
//! tools, and a tool whose result changed drifts at exactly its steps.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use harness_core::{
    Loop, ModelProvider, ModelReply, ProposedCall, ProviderError, RouterRequest, RunAbout, RunOptions, RunStatus,
    ToolDefinition, ToolFailure, ToolHandler, ToolRegistry, ToolSource,
};
use serde_json::{Value, json};

/// Adds its `offset` to `n`.
struct Add {
    offset: AtomicI64,
}

impl ToolHandler for Add {
    fn call(&self, _: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        Ok(json!(arguments["n"].as_i64().unwrap_or(0) + self.offset.load(Ordering::Relaxed)))
    }
}

fn registry(add: Arc<Add>) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let definition = ToolDefinition {
        name: "add".into(),
        description: "adds".into(),
        parameters: json!({ "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"] }),
        examples: vec![],
        source: ToolSource::Plugin { name: "adder".into(), version: "1.0.0".into() },
    };
    registry.register(harness_core::ToolSpec::new(definition, add)).unwrap();
    registry
}

/// Answers from a list, then fails: the provider the recorded run had.
struct Script(std::sync::Mutex<Vec<Result<ModelReply, String>>>);

#[async_trait]
impl ModelProvider for Script {
    fn name(&self) -> &str {
        "script"
    }
    async fn complete(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        let mut replies = self.0.lock().unwrap();
        if replies.is_empty() {
            return Err(ProviderError::new("the model is gone"));
        }
        replies.remove(0).map_err(ProviderError::new)
    }
}

fn call(id: &str, n: i64) -> ProposedCall {
    ProposedCall { id: Some(id.into()), name: "add".into(), arguments: json!({ "n": n }).into() }
}

async fn recorded(add: Arc<Add>, options: &RunOptions) -> Vec<u8> {
    let two_calls = ModelReply {
        calls: vec![call("a", 1), call("b", 2)],
        reasoning: Some("two at once".into()),
        finish_reason: Some("tool_calls".into()),
        ..ModelReply::default()
    };
    let huge = ModelReply { text: Some("x".repeat(4096)), ..ModelReply::default() };
    let third = ModelReply { calls: vec![call("c", 3)], ..ModelReply::default() };
    let provider = Script(std::sync::Mutex::new(vec![Ok(two_calls), Ok(huge), Ok(third)]));
    let about = RunAbout { harness_version: "test".into(), ..RunAbout::default() };
    let mut lines: Vec<Value> = Vec::new();
    let outcome =
        Loop::new(&provider, &registry(add)).options(*options).run_traced("add things", &about, &mut lines).await;
    assert_eq!(outcome.status, RunStatus::Failed, "the provider failed at the fifth step: {outcome:?}");
    lines.iter().map(|l| format!("{l}\n")).collect::<String>().into_bytes()
}

#[tokio::test]
async fn a_recorded_run_replays_clean_and_a_changed_tool_drifts_at_its_steps() {
    let options = RunOptions { max_reply_bytes: 1024, ..RunOptions::default() };
    let add = Arc::new(Add { offset: AtomicI64::new(0) });
    let text = recorded(add.clone(), &options).await;
    let trace = harness_trace::parse(&text);
    assert!(trace.bad.is_empty(), "{:?}", trace.bad);
    assert_eq!(trace.lines.len(), 5, "two calls, the refused reply, one call, the provider failure");
    assert_eq!(trace.lines[1].value.call_index, Some(1));
    assert!(trace.lines[1].value.reply.is_none(), "the second call of a reply does not repeat it");
    assert_eq!(trace.lines[0].value.reasoning(), Some("two at once"));

    let start = &trace.start.as_ref().unwrap().value;
    let replay_options = harness_trace::replay_options(start);
    assert_eq!(replay_options.max_reply_bytes, 1024, "the recorded limits");
    let report =
        harness_trace::replay(&trace, &registry(add.clone()), &replay_options, harness_core::Approvals::allow_all())
            .await
            .unwrap();
    assert!(report.clean, "{report:#?}");
    assert_eq!((report.recorded_end.as_str(), report.replayed_end.as_str()), ("failed", "failed"));

    add.offset.store(10, Ordering::Relaxed);
    let report = harness_trace::replay(&trace, &registry(add), &replay_options, harness_core::Approvals::allow_all())
        .await
        .unwrap();
    assert!(!report.clean);
    let drifted: Vec<(u32, &str)> = report.drift.iter().map(|d| (d.step, d.what)).collect();
    assert_eq!(drifted, [(1, "result"), (2, "result"), (4, "result")], "{report:#?}");
    assert_eq!((report.drift[0].recorded.clone(), report.drift[0].replayed.clone()), (json!(1), json!(11)));
    assert!(report.tools_changed.is_empty(), "the definition did not change");
}
