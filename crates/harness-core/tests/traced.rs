//! `Loop::run_traced`: a first and a last line around the steps, and a run that fails when either
//! cannot be written.

#![allow(clippy::unwrap_used)]

use std::io;

use async_trait::async_trait;
use harness_core::{
    Loop, ModelProvider, ModelReply, ProposedCall, ProviderError, RouterRequest, RunAbout, RunEnd, RunOptions,
    RunStart, RunStatus, ToolRegistry, TraceEntry, TraceSink,
};
use serde_json::{Value, json};

struct Finish;

#[async_trait]
impl ModelProvider for Finish {
    fn name(&self) -> &str {
        "finish-at-once"
    }
    async fn complete(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        let call =
            ProposedCall { id: Some("c1".into()), name: "finish".into(), arguments: json!({ "answer": 7 }).into() };
        Ok(ModelReply { calls: vec![call], finish_reason: Some("tool_calls".into()), ..ModelReply::default() })
    }
}

fn about() -> RunAbout {
    RunAbout { harness_version: "9.9.9".into(), model: Some("m".into()), ..RunAbout::default() }
}

#[tokio::test]
async fn the_trace_opens_with_the_run_and_closes_with_how_it_ended() {
    let mut lines: Vec<Value> = Vec::new();
    let options = RunOptions { max_steps: 4, ..RunOptions::default() };
    let outcome =
        Loop::new(&Finish, &ToolRegistry::new()).options(options).run_traced("seven?", &about(), &mut lines).await;
    assert_eq!(outcome.status, RunStatus::Finished);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let (first, step, last) = (&lines[0], &lines[1], &lines[2]);
    assert_eq!((first["kind"].as_str(), first["request"].as_str()), (Some("start"), Some("seven?")));
    assert_eq!((first["provider"].as_str(), first["model"].as_str()), (Some("finish-at-once"), Some("m")));
    assert_eq!(first["harness_version"], "9.9.9");
    assert_eq!(first["limits"]["max_steps"], 4);
    assert_eq!(first["reply_format"], "auto");
    assert_eq!(first["tools"][0]["name"], "finish");
    assert_eq!(first["tools"][0]["source"], "builtin");
    assert_eq!(first["tools"][0]["definition_hash"].as_str().unwrap().len(), 64);
    assert!(first.get("step").is_none() && last.get("step").is_none(), "only steps have a step field");
    assert_eq!(step["reply"]["calls"][0]["id"], "c1");
    assert_eq!(step["reply"]["finish_reason"], "tool_calls");
    assert_eq!(
        (last["kind"].as_str(), last["status"].as_str(), last["answer"].as_i64()),
        (Some("end"), Some("finished"), Some(7))
    );
}

/// Refuses the first or the last line.
struct Refuses {
    first: bool,
}

impl TraceSink for Refuses {
    fn begin(&mut self, _: &RunStart) -> io::Result<()> {
        if self.first { Err(io::Error::other("disk full")) } else { Ok(()) }
    }
    fn record(&mut self, _: &TraceEntry<'_>) -> io::Result<()> {
        Ok(())
    }
    fn end(&mut self, _: &RunEnd) -> io::Result<()> {
        Err(io::Error::other("disk full"))
    }
}

#[tokio::test]
async fn a_run_whose_first_or_last_line_cannot_be_written_fails() {
    let registry = ToolRegistry::new();
    let options = RunOptions::default();
    let outcome =
        Loop::new(&Finish, &registry).options(options).run_traced("x", &about(), &mut Refuses { first: true }).await;
    assert_eq!((outcome.status, outcome.steps), (RunStatus::Failed, 0), "no step runs unrecorded");
    let error = outcome.error.unwrap();
    assert!(error.message.contains("first line") && error.message.contains("disk full"), "{error:?}");
    let outcome =
        Loop::new(&Finish, &registry).options(options).run_traced("x", &about(), &mut Refuses { first: false }).await;
    assert_eq!((outcome.status, outcome.steps), (RunStatus::Failed, 1));
    assert!(outcome.error.unwrap().message.contains("last line"));
}
