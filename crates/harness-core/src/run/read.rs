//! Read the reply: the call a step takes from it, parsed and ready to check, or the error
//! that says why it could not be read.

use super::Step;
use crate::error::HarnessError;
use crate::parse::{ToolCall, parse_call, parse_text};
use crate::provider::{ModelReply, ProposedCall};
use crate::registry::FINISH;

/// The call a step read from the reply.
pub(super) struct ReadCall {
    /// Which call of the reply it is, from 0.
    pub(super) index: usize,
    /// The call, or why it could not be read.
    pub(super) call: Result<ToolCall, Unreadable>,
}

/// A call that could not be read.
pub(super) struct Unreadable {
    /// The call as proposed, when the reply named one (a structured call whose arguments do
    /// not parse still has an id and a tool name: the error answers that call).
    pub(super) call: Option<ToolCall>,
    /// What was wrong.
    pub(super) error: HarnessError,
}

/// Reads call `index` of the reply: a structured call, or else one written in the text.
pub(super) fn read_call(reply: &ModelReply, index: usize, step: &Step) -> ReadCall {
    // A bare arguments object in text is taken as `finish`'s when only `finish` is offered.
    let forced = step.finish_only.then_some(FINISH);
    let proposed = reply.calls.get(index);
    let parsed = match proposed {
        Some(call) => parse_call(call, step.number),
        None => parse_text(reply.text.as_deref().unwrap_or(""), step.number, forced),
    };
    let call = parsed.map_err(|error| Unreadable { call: proposed.map(|c| unparsed_call(c, step.number)), error });
    ReadCall { index, call }
}

/// A structured call as proposed, raw arguments included, for a call that did not parse.
fn unparsed_call(call: &ProposedCall, step: u32) -> ToolCall {
    ToolCall {
        id: call.id.clone().unwrap_or_else(|| format!("call_{step}")),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
    }
}
