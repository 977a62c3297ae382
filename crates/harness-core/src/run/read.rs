//! Read the reply: once, when it arrives, into the calls it holds; then one call per step.
//!
//! Structured calls are the API's own; a reply without any is read by the reply reader
//! ([`harness_reply`]), which splits off reasoning, finds every call in the model's own format,
//! and ends with the first fault. A reply cut at the token limit never runs its last call.

use std::borrow::Cow;

use serde_json::{Value, json};

use harness_reply::{ReadOptions, ReplyFormat, TextCall, read_reply};

use super::Step;
use crate::error::{ErrorCode, HarnessError};
use crate::parse::{call_id, decode_arguments_in_place, step_call_id};
use crate::provider::{ModelReply, ProposedCall};
use crate::registry::{FINISH, ToolDefinition};

/// The calls of one reply, read when it arrived.
pub(super) enum ReplyCalls {
    /// The API's structured calls; the reply was cut at the token limit when `truncated`.
    Structured { count: usize, truncated: bool },
    /// Calls read from the text, in order, then the fault that ended the reading, if any.
    Text { items: Vec<Result<TextCall, HarnessError>>, format: ReplyFormat, reasoning: Option<String> },
}

impl ReplyCalls {
    /// How many steps the reply takes: one per call, and one for the fault of a text reply.
    pub(super) fn len(&self) -> usize {
        match self {
            Self::Structured { count, .. } => *count,
            Self::Text { items, .. } => items.len(),
        }
    }

    /// The format a text reply was read as.
    pub(super) fn format(&self) -> Option<ReplyFormat> {
        match self {
            Self::Text { format, .. } => Some(*format),
            Self::Structured { .. } => None,
        }
    }

    /// The reasoning the reader split off the text.
    pub(super) fn reasoning(&self) -> Option<&str> {
        match self {
            Self::Text { reasoning, .. } => reasoning.as_deref(),
            Self::Structured { .. } => None,
        }
    }
}

/// Reads a reply that just arrived. `tools` type the values of XML-style formats.
pub(super) fn read_reply_calls(
    reply: &ModelReply,
    tools: &[ToolDefinition],
    format: ReplyFormat,
    step: &Step,
) -> ReplyCalls {
    if !reply.calls.is_empty() {
        return ReplyCalls::Structured { count: reply.calls.len(), truncated: reply.truncated };
    }
    // A bare arguments object in text is taken as `finish`'s when only `finish` is offered.
    let forced = step.finish_only.then_some(FINISH);
    let options = ReadOptions { format, truncated: reply.truncated, tools, forced };
    let read = read_reply(reply.text.as_deref().unwrap_or(""), &options);
    let mut items: Vec<_> = read.calls.into_iter().map(Ok).collect();
    items.extend(read.error.map(|e| Err(e.into())));
    ReplyCalls::Text { items, format: read.format, reasoning: read.reasoning }
}

/// A call as a step holds it. Its arguments are the reply's own, borrowed, when the reply
/// holds them as an object (the usual case: no copy of them a step); owned when they were
/// decoded from a string or replaced by a note of their size.
pub(super) struct StepCall<'r> {
    /// The provider's call id, or `call_<step>`.
    pub(super) id: String,
    /// The tool name.
    pub(super) tool: String,
    /// The arguments object.
    pub(super) arguments: Cow<'r, Value>,
}

/// The call a step read from the reply.
pub(super) struct ReadCall<'r> {
    /// Which call of the reply it is, from 0.
    pub(super) index: usize,
    /// The call, or why it could not be read.
    pub(super) call: Result<StepCall<'r>, Unreadable<'r>>,
}

/// A call that could not be read.
pub(super) struct Unreadable<'r> {
    /// The call as proposed, when the reply named one (a structured call whose arguments do
    /// not parse still has an id and a tool name: the error answers that call).
    pub(super) call: Option<StepCall<'r>>,
    /// What was wrong.
    pub(super) error: HarnessError,
}

/// Takes call `index` of the reply, for step `step`.
pub(super) fn read_call<'r>(reply: &'r ModelReply, calls: &'r ReplyCalls, index: usize, step: &Step) -> ReadCall<'r> {
    let call = match calls {
        ReplyCalls::Structured { count, truncated } => match reply.calls.get(index) {
            Some(proposed) if *truncated && index + 1 == *count => {
                Err(Unreadable { call: Some(unparsed_call(proposed, step.number)), error: cut_call(proposed) })
            }
            Some(proposed) => match decode_arguments_in_place(&proposed.name, &proposed.arguments) {
                Ok(arguments) => {
                    Ok(StepCall { id: call_id(proposed, step.number), tool: proposed.name.clone(), arguments })
                }
                Err(error) => Err(Unreadable { call: Some(unparsed_call(proposed, step.number)), error }),
            },
            None => Err(Unreadable { call: None, error: no_call_left(index) }),
        },
        ReplyCalls::Text { items, .. } => match items.get(index) {
            Some(Ok(c)) => Ok(StepCall {
                id: step_call_id(step.number),
                tool: c.name.clone(),
                arguments: Cow::Borrowed(&c.arguments),
            }),
            Some(Err(error)) => Err(Unreadable { call: None, error: error.clone() }),
            None => Err(Unreadable { call: None, error: no_call_left(index) }),
        },
    };
    ReadCall { index, call }
}

/// The last structured call of a reply cut at the token limit: it may be incomplete.
fn cut_call(call: &ProposedCall) -> HarnessError {
    HarnessError::new(
        ErrorCode::ReplyTruncated,
        "your reply was cut at the token limit; answer with one shorter call",
        json!({ "tool": call.name, "token_limit": true }),
    )
}

/// Never reached: the loop asks again once a reply's calls are used up.
fn no_call_left(index: usize) -> HarnessError {
    HarnessError::new(
        ErrorCode::NoJson,
        format!("the reply has no call number {index}; answer with one tool call"),
        json!({ "index": index }),
    )
}

/// A structured call as proposed, raw arguments included, for a call that did not parse.
fn unparsed_call(call: &ProposedCall, step: u32) -> StepCall<'_> {
    StepCall { id: call_id(call, step), tool: call.name.clone(), arguments: call.arguments.to_value() }
}
