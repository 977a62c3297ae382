//! Replay: the loop run again with a trace's recorded model replies as the router (no model,
//! no key) against today's tools, every step compared with the record. A recorded run with a
//! real, paid model becomes a regression test that runs anywhere for free.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use harness_core::{
    Approvals, Loop, ModelProvider, ModelReply, OfferedTool, ProposedCall, ProviderError, RouterRequest, RunAbout,
    RunOptions, RunStart, ToolRegistry, Usage,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::format::{EndRecord, ReplyRecord, RunStatus, StartRecord, Step, ToolRecord};
use crate::read::Trace;

/// Why a trace cannot be replayed at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The trace has no first line: it was written before trace format 2.
    #[error(
        "the trace has no first line (\"kind\": \"start\"): it was written before trace format 2, or its first line is broken; replay needs the request and limits it records. Record the run again with this harness"
    )]
    NoFirstLine,
    /// A step that asked the model has no recorded reply.
    #[error(
        "line {line} (step {step}) asked the model but holds no \"reply\": the trace was written before trace format 2 and cannot be replayed"
    )]
    NoReply {
        /// The line in the file.
        line: usize,
        /// The step.
        step: u32,
    },
}

/// The message of the router when the loop asks for more replies than the trace holds.
const EXHAUSTED: &str =
    "the trace holds no further model reply: the replayed run asked the model more often than the recorded one";

/// A model provider that answers with a trace's recorded replies, in order.
pub struct ReplayRouter {
    name: String,
    replies: Vec<Result<ModelReply, String>>,
    next: AtomicUsize,
}

impl ReplayRouter {
    /// The replies recorded in `trace`, in the order the model gave them.
    pub fn from_trace(trace: &Trace) -> Result<Self, ReplayError> {
        let start = trace.start.as_ref().ok_or(ReplayError::NoFirstLine)?;
        let mut replies = Vec::new();
        for line in &trace.lines {
            let step = &line.value;
            let code = step.error.as_ref().map(|e| e.code.as_str());
            match (&step.reply, code) {
                (Some(reply), _) => replies.push(Ok(model_reply(reply))),
                // The provider failed: its message, without the loop's prefix, fails again.
                (None, Some("provider_error")) => replies.push(Err(provider_message(step))),
                // A reply refused whole for its size is not kept; one of the same size is.
                (None, Some("reply_too_large")) => replies.push(Ok(oversized(step))),
                // A later call of a reply already recorded.
                (None, _) if step.call_index.is_some_and(|i| i > 0) => {}
                (None, _) => return Err(ReplayError::NoReply { line: line.number, step: step.step }),
            }
        }
        Ok(Self { name: start.value.provider.clone(), replies, next: AtomicUsize::new(0) })
    }

    /// How many replies the trace holds.
    pub fn len(&self) -> usize {
        self.replies.len()
    }

    /// Whether the trace holds no reply.
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }
}

#[async_trait]
impl ModelProvider for ReplayRouter {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        match self.replies.get(i) {
            Some(Ok(reply)) => Ok(reply.clone()),
            Some(Err(message)) => Err(ProviderError::new(message.clone())),
            None => Err(ProviderError::new(EXHAUSTED)),
        }
    }
}

/// The reply as the model gave it, from its record.
pub(crate) fn model_reply(r: &ReplyRecord) -> ModelReply {
    ModelReply {
        calls: r
            .calls
            .iter()
            .map(|c| ProposedCall { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone().into() })
            .collect(),
        text: r.text.clone(),
        reasoning: r.reasoning.clone(),
        finish_reason: r.finish_reason.clone(),
        truncated: r.truncated,
        usage: r.usage.map(|u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_input_tokens: u.cached_input_tokens,
        }),
        router_mode: r.router_mode.clone(),
        retries: r.retries,
    }
}

fn provider_message(step: &Step) -> String {
    let message = step.error.as_ref().map_or("", |e| e.message.as_str());
    // "provider \"x\" failed: MESSAGE": the loop adds the prefix again.
    message.split_once(" failed: ").map_or(message, |(_, m)| m).to_owned()
}

fn oversized(step: &Step) -> ModelReply {
    let bytes = step.error.as_ref().and_then(|e| e.details.get("bytes")).and_then(Value::as_u64).unwrap_or(0);
    let usage = step.usage.map(|u| Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cached_input_tokens: u.cached_input_tokens,
    });
    ModelReply { text: Some("x".repeat(usize::try_from(bytes).unwrap_or(0))), usage, ..ModelReply::default() }
}

/// One difference between a recorded step and its replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// The step number.
    pub step: u32,
    /// The tool called at that step (as recorded, else as replayed).
    pub tool: Option<String>,
    /// What differs: `tool`, `status`, `error`, `result`, `missing` (the replay stopped
    /// before this step) or `unrecorded` (the replay took a step the trace has no readable
    /// record of: past its end, or a line that could not be read).
    pub what: &'static str,
    /// The recorded value.
    pub recorded: Value,
    /// The replayed value.
    pub replayed: Value,
    /// What changed about the tool since the recording (plugin version, definition).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_changed: Vec<String>,
}

/// How a tool offered today differs from the one recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolChange {
    /// The tool's name.
    pub tool: String,
    /// What changed, in words: "plugin calc 0.1.0 → 0.2.0", "definition changed", "no longer offered".
    pub change: String,
}

/// The outcome of a replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Nothing drifted and every line of the trace was read.
    pub clean: bool,
    /// Steps in the record.
    pub recorded_steps: usize,
    /// Steps the replay took.
    pub replayed_steps: usize,
    /// How the recorded run ended (`killed?` when the trace has no last line).
    pub recorded_end: String,
    /// How the replay ended.
    pub replayed_end: String,
    /// Every step that differs, in order.
    pub drift: Vec<Drift>,
    /// The run's ending differs (when no step explains it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_drift: Option<String>,
    /// Tools that changed since the recording, whether or not a step noticed.
    pub tools_changed: Vec<ToolChange>,
    /// Lines of the trace that could not be read: the record is incomplete there.
    pub unread_lines: Vec<UnreadLine>,
}

/// A line of the trace that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreadLine {
    /// Its number in the file.
    pub line: usize,
    /// Why.
    pub problem: String,
}

/// The limits a replay runs with: the recorded ones, and the recorded reply format (which the
/// caller may override from today's configuration). The recorded replies come at once, so a
/// replay is faster than its record; a recorded run that ran out of time while it waited for
/// the model is matched where its recorded replies end.
pub fn replay_options(start: &StartRecord) -> RunOptions {
    let l = &start.limits;
    RunOptions {
        max_steps: l.max_steps,
        max_repeats: l.max_repeats,
        max_reply_bytes: l.max_reply_bytes,
        max_arguments_bytes: l.max_arguments_bytes,
        max_conversation_bytes: l.max_conversation_bytes,
        max_duration: l.max_duration_ms.map(std::time::Duration::from_millis),
        reply_format: start.reply_format.as_deref().and_then(|f| f.parse().ok()).unwrap_or_default(),
        ..RunOptions::default()
    }
}

/// Replays `trace` against today's `registry` and compares every step with the record.
///
/// Every call is held to `approvals`, as a run's are: a trace is data from elsewhere, and
/// what it proposes runs only where the operator's policy lets it (with no one to answer,
/// a call the policy would ask about stops the replay `awaiting_approval`).
pub async fn replay(
    trace: &Trace,
    registry: &ToolRegistry,
    options: &RunOptions,
    approvals: Approvals,
) -> Result<ReplayReport, ReplayError> {
    let router = ReplayRouter::from_trace(trace)?;
    let start = &trace.start.as_ref().ok_or(ReplayError::NoFirstLine)?.value;
    let about = RunAbout { harness_version: start.harness_version.clone(), ..RunAbout::default() };
    let mut lines: Vec<Value> = Vec::new();
    let mut replayed = Loop::new(&router, registry).options(*options).approvals(approvals);
    replayed.run_traced(&start.request, &about, &mut lines).await;
    let now = RunStart::new(&about, &start.provider, &start.request, registry, options);
    Ok(compare(trace, &lines, &now.tools))
}

/// Compares the replayed lines with the record.
fn compare(trace: &Trace, replayed: &[Value], offered_now: &[OfferedTool]) -> ReplayReport {
    let start = trace.start.as_ref().map(|s| &s.value);
    let tools_changed = start.map_or_else(Vec::new, |s| tool_changes(&s.tools, offered_now));
    let steps: Vec<Step> = replayed
        .iter()
        .filter(|v| v.get("step").is_some())
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let end: Option<EndRecord> =
        replayed.iter().rev().find(|v| v["kind"] == "end").and_then(|v| serde_json::from_value(v.clone()).ok());
    let recorded: Vec<&Step> = trace.lines.iter().map(|l| &l.value).collect();
    let recorded_end = trace.end.as_ref().map(|e| &e.value);
    let mut steps: Vec<&Step> = steps.iter().collect();
    let timed_out = out_of_time_where_record_ends(recorded_end, &recorded, &mut steps);

    // Steps are matched by number: a step whose line could not be read has no record to match.
    let last = recorded.iter().chain(&steps).map(|s| s.step).max().unwrap_or(0);
    let mut drift = Vec::new();
    for n in 1..=last {
        let d = match (recorded.iter().find(|s| s.step == n), steps.iter().find(|s| s.step == n)) {
            (Some(r), Some(p)) => step_drift(r, p),
            (Some(r), None) => Some(whole_step(r, "missing", step_value(r), Value::Null)),
            (None, Some(p)) => Some(whole_step(p, "unrecorded", Value::Null, step_value(p))),
            (None, None) => None,
        };
        if let Some(mut d) = d {
            d.tool_changed =
                tools_changed.iter().filter(|c| Some(&c.tool) == d.tool.as_ref()).map(|c| c.change.clone()).collect();
            drift.push(d);
        }
    }
    let recorded_end_name =
        recorded_end.map_or_else(|| "ended without a record (killed?)".to_owned(), |e| e.status.as_str().to_owned());
    let replayed_end_name = if timed_out {
        RunStatus::TimeBudgetExhausted.as_str().to_owned()
    } else {
        end.as_ref().map_or_else(|| "no last line".to_owned(), |e| e.status.as_str().to_owned())
    };
    let end_drift = (drift.is_empty() && recorded_end_name != replayed_end_name)
        .then(|| format!("the recorded run ended {recorded_end_name}, the replay {replayed_end_name}"));
    let unread_lines: Vec<UnreadLine> =
        trace.bad.iter().map(|(line, problem)| UnreadLine { line: *line, problem: problem.clone() }).collect();
    ReplayReport {
        clean: drift.is_empty() && end_drift.is_none() && unread_lines.is_empty(),
        recorded_steps: recorded.len(),
        replayed_steps: steps.len(),
        recorded_end: recorded_end_name,
        replayed_end: replayed_end_name,
        drift,
        end_drift,
        tools_changed,
        unread_lines,
    }
}

/// A recorded run that ran out of time asked no further reply; its replay asks one, finds the
/// record ended, and fails there. That last step is the time budget, not drift: drop it.
fn out_of_time_where_record_ends(end: Option<&EndRecord>, recorded: &[&Step], replayed: &mut Vec<&Step>) -> bool {
    let ran_out = end.is_some_and(|e| e.status == RunStatus::TimeBudgetExhausted);
    let asked_past = replayed.len() == recorded.len() + 1
        && replayed.last().and_then(|s| s.error.as_ref()).is_some_and(|e| e.message.ends_with(EXHAUSTED));
    if ran_out && asked_past {
        replayed.pop();
    }
    ran_out && asked_past
}

fn step_drift(r: &Step, p: &Step) -> Option<Drift> {
    let code = |s: &Step| s.error.as_ref().map(|e| e.code.clone());
    if r.tool != p.tool {
        return Some(whole_step(r, "tool", json!(r.tool), json!(p.tool)));
    }
    if r.status != p.status {
        return Some(whole_step(r, "status", step_value(r), step_value(p)));
    }
    if code(r) != code(p) {
        return Some(whole_step(r, "error", json!(code(r)), json!(code(p))));
    }
    if r.result != p.result {
        return Some(whole_step(r, "result", json!(r.result), json!(p.result)));
    }
    None
}

fn whole_step(s: &Step, what: &'static str, recorded: Value, replayed: Value) -> Drift {
    Drift { step: s.step, tool: s.tool.clone(), what, recorded, replayed, tool_changed: Vec::new() }
}

/// A step in brief: its status, then its result or its error.
fn step_value(s: &Step) -> Value {
    match &s.error {
        Some(e) => json!({ "status": s.status.as_str(), "error": e.code, "message": e.message }),
        None => json!({ "status": s.status.as_str(), "result": s.result }),
    }
}

fn tool_changes(recorded: &[ToolRecord], now: &[OfferedTool]) -> Vec<ToolChange> {
    let mut changes = Vec::new();
    let change = |tool: &str, change: String| ToolChange { tool: tool.to_owned(), change };
    for r in recorded {
        let Some(n) = now.iter().find(|n| n.name == r.name) else {
            changes.push(change(&r.name, "no longer offered".to_owned()));
            continue;
        };
        let was = source_text(r.plugin.as_deref(), r.plugin_version.as_deref(), r.mcp_server.as_deref(), &r.source);
        let is = source_text(n.plugin.as_deref(), n.plugin_version.as_deref(), n.mcp_server.as_deref(), n.source);
        if was != is {
            changes.push(change(&r.name, format!("offered by {was} when recorded, by {is} now")));
        }
        if r.definition_hash != n.definition_hash {
            changes.push(change(
                &r.name,
                format!(
                    "its definition (description or schema) changed: hash {} → {}",
                    short(&r.definition_hash),
                    short(&n.definition_hash)
                ),
            ));
        }
    }
    for n in now.iter().filter(|n| !recorded.iter().any(|r| r.name == n.name)) {
        changes.push(change(&n.name, "offered now, not when recorded".to_owned()));
    }
    changes
}

fn source_text(plugin: Option<&str>, version: Option<&str>, server: Option<&str>, source: &str) -> String {
    match (plugin, server) {
        (Some(p), _) => format!("plugin {p} {}", version.unwrap_or("?")),
        (None, Some(s)) => format!("MCP server {s}"),
        (None, None) => source.to_owned(),
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
