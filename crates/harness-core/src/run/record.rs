//! Record the step: one trace line, built from what the step asked, read, checked and ran.

use super::read::{ReplyCalls, StepCall};
use super::{Step, StepOutcome, micros};
use crate::error::{ErrorCode, HarnessError};
use crate::provider::ModelReply;
use crate::registry::{FINISH, ToolSource};
use crate::trace::{StepStatus, TraceEntry};

use serde_json::json;

/// The trace line of a step that ran (or refused) call `index` of `reply`; `source` is where
/// the called tool came from, when it is registered.
pub(super) fn step_entry<'a>(
    step: &Step,
    reply: &'a ModelReply,
    calls: &'a ReplyCalls,
    index: usize,
    source: Option<&'a ToolSource>,
    call: Option<&'a StepCall<'a>>,
    outcome: &'a StepOutcome,
) -> TraceEntry<'a> {
    let (plugin, plugin_version, mcp_server) = match source {
        Some(ToolSource::Plugin { name, version }) => (Some(name.as_str()), Some(version.as_str()), None),
        Some(ToolSource::Mcp { server }) => (None, None, Some(server.as_str())),
        _ => (None, None, None),
    };
    let (status, result, error) = match outcome {
        StepOutcome::Ran(v) => (StepStatus::Ok, Some(v), None),
        StepOutcome::Finished(v) => (StepStatus::Finished, Some(v), None),
        // It never ran: rejected, with the result it was answered with.
        StepOutcome::Known(v, e) => (StepStatus::Rejected, Some(v), Some(e)),
        StepOutcome::Failed(e, status) => (*status, None, Some(e)),
    };
    TraceEntry {
        tool: call.map(|c| c.tool.as_str()),
        arguments: call.map(|c| &*c.arguments),
        result,
        plugin,
        plugin_version,
        mcp_server,
        mcp_session: None,
        mcp_protocol: None,
        call_index: (calls.len() > 1).then_some(index),
        reply_text: if step.fresh { reply_text(reply) } else { None },
        reply_format: calls.format().map(|f| f.as_str()),
        // Reasoning the reader split off the text, or that the server split out itself.
        reasoning: if step.fresh { calls.reasoning().or(reply.reasoning.as_deref()) } else { None },
        router_mode: reply.router_mode.as_deref(),
        usage: step.usage,
        reply: step.fresh.then_some(reply),
        ..blank_entry(step, status, error, micros(step.started))
    }
}

/// The trace line of a reply refused whole for its size: neither read nor kept.
pub(super) fn refused_reply<'a>(step: &Step, error: &'a HarnessError) -> TraceEntry<'a> {
    TraceEntry { usage: step.usage, ..blank_entry(step, StepStatus::Rejected, Some(error), micros(step.started)) }
}

/// A trace line with no call in it.
pub(super) fn blank_entry<'a>(
    step: &Step,
    status: StepStatus,
    error: Option<&'a HarnessError>,
    duration_us: u64,
) -> TraceEntry<'a> {
    let offered = match (step.finish_only, step.finish_withheld, step.shortlisted) {
        (true, _, _) => FINISH,
        (false, _, true) => "shortlist",
        (false, true, false) => "tools",
        (false, false, false) => "all",
    };
    TraceEntry {
        error,
        model_us: step.model_us,
        repeat_penalty: step.repeat_penalty,
        ..TraceEntry::new(step.number, status, offered, duration_us)
    }
}

/// The reply's text, kept when the call was read from it (or could not be read at all).
fn reply_text(reply: &ModelReply) -> Option<&str> {
    if !reply.calls.is_empty() {
        return None;
    }
    reply.text.as_deref().filter(|t| !t.is_empty())
}

/// The error that stops a run whose trace could not be written.
pub(super) fn trace_error(e: &std::io::Error) -> HarnessError {
    HarnessError::new(
        ErrorCode::TraceError,
        format!("the trace could not be written ({e}); the run stopped so that no step goes unrecorded"),
        json!({ "error": e.to_string() }),
    )
}
