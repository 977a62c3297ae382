//! Rebuilds a run that stopped for approval from its trace: the request, the conversation up
//! to the reply that holds the pending call, and which call of it waits.

use harness_core::{Message, ModelReply, Resumption, Usage};

use serde_json::json;

use crate::format::{ReplyRecord, StepStatus};
use crate::read::Trace;
use crate::replay::model_reply;

/// Why a trace cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// No first line: the request is unknown.
    #[error("the trace has no first line, so its request is unknown; only traces written by this version resume")]
    NoFirstLine,
    /// The last step is not one that waits for approval.
    #[error("the trace's last step is not awaiting approval (its run ended {0}); there is nothing to resume")]
    NotAwaiting(String),
    /// A step whose reply is not in the trace.
    #[error("step {0} ran a call whose reply is not in the trace; the conversation cannot be rebuilt")]
    NoReply(u32),
    /// The pending call's digest is missing: an answer could not be bound to the call shown.
    #[error(
        "step {0} waits for approval but records no digest of its call (details.pending.digest), so an answer cannot be bound to the call that was shown; run the request again"
    )]
    NoDigest(u32),
}

/// What [`resumption`] rebuilt.
#[derive(Debug, Clone)]
pub struct Resumable {
    /// The request.
    pub request: String,
    /// The conversation and where the run stopped.
    pub resumption: Resumption,
    /// The pending call's id, as `--json` and the trace show it.
    pub pending_id: String,
    /// The pending call's tool.
    pub pending_tool: String,
    /// The digest of the pending call as it was shown to the operator
    /// ([`harness_core::call_digest`]): an answer holds for that call alone.
    pub pending_digest: String,
    /// The text of every line to keep when the resumed run writes the trace again: the first
    /// line and every step before the pending one.
    pub kept_lines: Vec<String>,
    /// The provider the run asked, as its first line names it: a resumed run asks the same one
    /// unless the operator names another.
    pub provider: String,
    /// The model the run asked, when the provider takes one.
    pub model: Option<String>,
}

/// Rebuilds the conversation of a run that stopped for approval, as the loop had it.
pub fn resumption(trace: &Trace) -> Result<Resumable, ResumeError> {
    let start = trace.start.as_ref().ok_or(ResumeError::NoFirstLine)?;
    let Some((last, before)) = trace.lines.split_last() else {
        return Err(ResumeError::NotAwaiting("without a step".into()));
    };
    if last.value.status != StepStatus::AwaitingApproval {
        return Err(ResumeError::NotAwaiting(format!("with a step that is {}", last.value.status.as_str())));
    }
    let mut conversation = vec![Message::User { content: start.value.request.clone() }];
    let mut usage = Usage::default();
    let mut reply: Option<ReplyRecord> = None;
    for line in trace.lines.iter() {
        let step = &line.value;
        if let Some(r) = &step.reply {
            let model = model_reply(r);
            if let Some(u) = model.usage {
                usage.add(u);
            }
            conversation.push(Message::Assistant { reply: model });
            reply = Some(r.clone());
        } else if step.error.as_ref().is_some_and(|e| e.code == "reply_too_large") {
            let bytes = step.error.as_ref().and_then(|e| e.details.get("bytes")).cloned().unwrap_or(json!(0));
            let omitted = format!("(a reply of {bytes} bytes, omitted: over the size limit)");
            conversation.push(Message::Assistant { reply: ModelReply { text: Some(omitted), ..Default::default() } });
            reply = None;
        } else if reply.is_none() {
            return Err(ResumeError::NoReply(step.step));
        }
        if std::ptr::eq(line, last) {
            break;
        }
        let (call_id, tool) = match &step.tool {
            Some(tool) => (Some(call_id(reply.as_ref(), step.call_index, step.step)), Some(tool.clone())),
            None => (None, None),
        };
        let (content, is_error) = match (&step.error, &step.result) {
            (Some(e), _) => (json!({ "code": e.code, "message": e.message, "details": e.details }), true),
            (None, Some(r)) => (r.clone(), false),
            (None, None) => (serde_json::Value::Null, false),
        };
        conversation.push(Message::ToolResult { call_id, tool, content, is_error });
    }
    let pending = &last.value;
    let digest = pending.error.as_ref().and_then(|e| e.details["pending"]["digest"].as_str());
    let pending_digest = digest.ok_or(ResumeError::NoDigest(pending.step))?.to_owned();
    let kept_lines = std::iter::once(start.text.clone()).chain(before.iter().map(|l| l.text.clone())).collect();
    Ok(Resumable {
        request: start.value.request.clone(),
        pending_id: call_id(reply.as_ref(), pending.call_index, pending.step),
        pending_tool: pending.tool.clone().unwrap_or_default(),
        pending_digest,
        resumption: Resumption {
            conversation,
            steps_taken: pending.step - 1,
            call_index: usize::try_from(pending.call_index.unwrap_or(0)).unwrap_or(0),
            fresh: pending.reply.is_some(),
            usage,
        },
        kept_lines,
        provider: start.value.provider.clone(),
        model: start.value.model.clone(),
    })
}

/// A call's id as the loop gave it: the provider's, or `call_<step>` for calls read from text.
fn call_id(reply: Option<&ReplyRecord>, index: Option<u64>, step: u32) -> String {
    let index = usize::try_from(index.unwrap_or(0)).unwrap_or(0);
    reply.and_then(|r| r.calls.get(index)).and_then(|c| c.id.clone()).unwrap_or_else(|| format!("call_{step}"))
}
