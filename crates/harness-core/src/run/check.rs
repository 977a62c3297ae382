//! Check the call: its size, that the tool exists and is offered, its arguments against the
//! tool's schema, and that it is not the same call made again and again; and, once it ran, its
//! result against the tool's output schema.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::read::StepCall;
use super::{StepOutcome, json_size};
use crate::error::{ErrorCode, HarnessError};
use crate::provider::Message;
use crate::registry::{FINISH, RegisteredTool, ToolHandler, ToolRegistry};
use crate::trace::StepStatus;

/// A call that passed every check: what to do with it.
pub(super) enum Cleared {
    /// `finish` was called with this answer.
    Finish(Value),
    /// Run this handler, within the tool's own timeout if it has one.
    Execute {
        /// The tool's implementation.
        handler: Arc<dyn ToolHandler>,
        /// The tool's timeout.
        timeout: Option<Duration>,
    },
}

/// What a step offers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Offered<'s> {
    /// `finish` alone.
    pub(super) finish_only: bool,
    /// Every tool but `finish`.
    pub(super) finish_withheld: bool,
    /// These tools alone (a small model's shortlist), when `Some`.
    pub(super) shortlist: Option<&'s [String]>,
}

/// Checks one call to `tool` (looked up by the caller; `None` when there is no such tool). Oversized arguments are replaced by a note of their size, so that they
/// are not kept in the trace either.
pub(super) fn check_call(
    registry: &ToolRegistry,
    tool: Option<RegisteredTool<'_>>,
    call: &mut StepCall<'_>,
    offered: Offered<'_>,
    repeats: &mut RepeatGuard,
    max_arguments_bytes: usize,
) -> Result<Cleared, HarnessError> {
    let bytes = json_size(&call.arguments);
    if bytes > max_arguments_bytes {
        call.arguments = Cow::Owned(json!({ "omitted_bytes": bytes }));
        return Err(HarnessError::new(
            ErrorCode::ArgumentsTooLarge,
            format!(
                "the arguments of the call to {:?} are {bytes} bytes, over the limit of {max_arguments_bytes}",
                call.tool
            ),
            json!({ "tool": call.tool, "bytes": bytes, "limit": max_arguments_bytes }),
        ));
    }
    let finish_only = offered.finish_only;
    let Some(tool) = tool else {
        let offered: Vec<&str> =
            if finish_only { vec![FINISH] } else { registry.definitions().iter().map(|d| d.name.as_str()).collect() };
        return Err(HarnessError::new(
            ErrorCode::UnknownTool,
            format!("there is no tool named {:?}; call one of: {}", call.tool, offered.join(", ")),
            json!({ "tool": call.tool, "offered": offered }),
        ));
    };
    if finish_only && call.tool != FINISH {
        return Err(HarnessError::new(
            ErrorCode::ToolNotOffered,
            format!("{:?} is not offered at this step; only finish is: call finish with your best answer", call.tool),
            json!({ "tool": call.tool, "offered": [FINISH] }),
        ));
    }
    if offered.finish_withheld && call.tool == FINISH {
        let others: Vec<&str> =
            registry.definitions().iter().map(|d| d.name.as_str()).filter(|n| *n != FINISH).collect();
        return Err(HarnessError::new(
            ErrorCode::ToolNotOffered,
            format!(
                "finish is not offered before a tool has answered: call one of {} first, then finish with its result",
                others.join(", ")
            ),
            json!({ "tool": FINISH, "offered": others }),
        ));
    }
    if let Some(names) = offered.shortlist
        && !names.contains(&call.tool)
    {
        return Err(HarnessError::new(
            ErrorCode::ToolNotOffered,
            format!(
                "{:?} is not offered at this step: the request is about {}; call one of those first",
                call.tool,
                names.join(", ")
            ),
            json!({ "tool": call.tool, "offered": names }),
        ));
    }
    tool.validate(&call.arguments)?;
    if call.tool == FINISH {
        return Ok(Cleared::Finish(call.arguments.get("answer").cloned().unwrap_or(Value::Null)));
    }
    if repeats.tripped_by(&call.tool, &call.arguments) {
        // Where `finish` is withheld (nothing has answered yet), pointing to it would send the
        // model to a call that is refused: the way on is other arguments.
        let next = if offered.finish_withheld {
            "call it with other arguments, or call another tool"
        } else {
            "call finish with your best answer"
        };
        return Err(HarnessError::new(
            ErrorCode::RepeatedCall,
            format!(
                "{:?} was called with the same arguments {} times in a row; its result will not change: {next}",
                call.tool, repeats.max
            ),
            json!({ "tool": call.tool, "times": repeats.max }),
        ));
    }
    let Some(handler) = tool.handler().cloned() else {
        return Err(HarnessError::new(
            ErrorCode::UnknownTool,
            format!("the tool {:?} has no implementation", call.tool),
            json!({ "tool": call.tool }),
        ));
    };
    Ok(Cleared::Execute { handler, timeout: tool.timeout })
}

/// The note of a call answered with its known result: it did not run again.
pub(super) fn known_again(tool: &str) -> HarnessError {
    HarnessError::new(
        ErrorCode::RepeatedCall,
        format!(
            "{tool:?} was called before with the same arguments: answered with its known result, not run again; call finish with the answer"
        ),
        json!({ "tool": tool, "known": true }),
    )
}

/// Refuses a `finish` whose answer is copied from a harness error fed back in this run, or is
/// a name from the tool listing (`finish`, `answer`), and, for a small model (`small`: the
/// run withholds `finish` until a tool answers), a number or expression from the request's own
/// text that no tool result holds: none is a result, and a run that ends with one is not a
/// success. A capable model may well answer from the request ("which is larger, 17 or 23?"),
/// so that check is the small model's alone. The refusal (`copied_answer`) is fed back like
/// any other, so the model can still call a tool and finish with its result.
pub(super) fn copied_answer(
    conversation: &[Message],
    registry: &ToolRegistry,
    small: bool,
    outcome: StepOutcome,
) -> StepOutcome {
    let StepOutcome::Finished(answer) = &outcome else {
        return outcome;
    };
    let text = match answer {
        Value::String(s) => without_markers(s),
        Value::Null => return outcome,
        other => other.to_string(),
    };
    let Some(source) = copied_from(conversation, &text, small).or_else(|| listed_name(registry, &text)) else {
        return outcome;
    };
    let error = HarnessError::new(
        ErrorCode::CopiedAnswer,
        format!(
            "the answer {text:?} is copied from {source}, not a result: call a tool that computes the answer, then finish with its result"
        ),
        json!({ "answer": answer, "source": source_name(source) }),
    );
    StepOutcome::Failed(error, StepStatus::Rejected)
}

/// Text without chat-template markers (`<|im_end|>`), trimmed: a small model writes them into
/// what it copies, and they are no content of their own.
fn without_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<|") {
        let Some(len) = rest[start..].find("|>") else { break };
        out.push_str(&rest[..start]);
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out.trim().to_owned()
}

/// How [`copied_answer`] names the request.
const REQUEST: &str = "the request";
/// How [`copied_answer`] names a harness error.
const ERROR: &str = "a harness error";
/// How [`copied_answer`] names the tool listing.
const LISTING: &str = "the tool listing";

/// The short name of a source, for the error's details.
fn source_name(source: &str) -> &'static str {
    match source {
        REQUEST => "request",
        LISTING => "listing",
        _ => "error",
    }
}

/// Whether an answer is a tool's name or an argument's, as the listing shows them: a
/// placeholder a small model copied, never an answer.
fn listed_name(registry: &ToolRegistry, text: &str) -> Option<&'static str> {
    let named = registry.definitions().iter().any(|d| {
        d.name.eq_ignore_ascii_case(text)
            || d.parameters
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.keys().any(|k| k.eq_ignore_ascii_case(text)))
    });
    named.then_some(LISTING)
}

/// Where an answer's text was copied from, if it was: a harness error, or (`from_request`)
/// the request.
fn copied_from(conversation: &[Message], text: &str, from_request: bool) -> Option<&'static str> {
    if text.is_empty() {
        return None;
    }
    let mut request = None;
    for message in conversation {
        match message {
            Message::User { content } if request.is_none() => request = Some(content.as_str()),
            Message::ToolResult { content, is_error: true, .. }
                // A tool's own failure is its answer, which may well be the right one ("division by zero").
                if content.get("code").and_then(Value::as_str) != Some("tool_error") =>
            {
                let code = content.get("code").and_then(Value::as_str).unwrap_or_default();
                let said = content.get("message").and_then(Value::as_str).unwrap_or_default();
                let copied = (!code.is_empty() && text.contains(code))
                    || (!said.is_empty() && text.contains(said))
                    || (text.len() >= 16 && said.contains(text));
                if copied {
                    return Some(ERROR);
                }
            }
            _ => {}
        }
    }
    // Words alone ("yes", "hello") may well be the answer to a request that holds them; a
    // number or an expression from the request is a guess unless a result holds it too.
    let guess = text.chars().any(|c| c.is_ascii_digit()) || text.len() >= 32;
    let in_request = request.is_some_and(|r| r.contains(text));
    // The results are written out as text only when the answer is a guess from the request:
    // writing out every result of a 2,000-step run at its `finish` cost 1.1 million instructions.
    (from_request && guess && in_request && !in_a_result(conversation, text)).then_some(REQUEST)
}

/// Whether a tool result of the conversation (not an error) holds `text` in its JSON text.
fn in_a_result(conversation: &[Message], text: &str) -> bool {
    conversation.iter().any(|m| match m {
        Message::ToolResult { content, is_error: false, .. } => content.to_string().contains(text),
        _ => false,
    })
}

/// Holds a result to the tool's declared output schema: one that breaks it becomes an error
/// step (`invalid_result`, with the violations) and is never fed back as a result.
pub(super) fn check_result(tool: Option<RegisteredTool<'_>>, outcome: StepOutcome) -> StepOutcome {
    let StepOutcome::Ran(result) = &outcome else {
        return outcome;
    };
    match tool.map(|t| t.check_result(result)) {
        Some(Err(error)) => StepOutcome::Failed(error, StepStatus::Error),
        _ => outcome,
    }
}

/// Spots the same call made again and again.
pub(super) struct RepeatGuard {
    max: u32,
    last: Option<(String, Value)>,
    count: u32,
}

impl RepeatGuard {
    /// A guard that trips at `max` identical calls in a row; 0 never trips.
    pub(super) fn new(max: u32) -> Self {
        Self { max, last: None, count: 0 }
    }

    /// Counts this call; true when it makes `max` identical calls in a row.
    fn tripped_by(&mut self, tool: &str, arguments: &Value) -> bool {
        if self.max == 0 {
            return false;
        }
        match &self.last {
            Some((t, a)) if t == tool && a == arguments => self.count += 1,
            _ => {
                self.last = Some((tool.to_owned(), arguments.clone()));
                self.count = 1;
            }
        }
        self.count >= self.max
    }

    /// Forgets the row: the next call starts a new one.
    pub(super) fn reset(&mut self) {
        self.last = None;
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_template_markers_are_no_part_of_a_copied_answer() {
        assert_eq!(without_markers(" calculate 6*7<|im_end|> "), "calculate 6*7");
        assert_eq!(without_markers("<|a|>x<|b|>y"), "xy");
        assert_eq!(without_markers("a <| b"), "a <| b");
        let request = [Message::User { content: "calculate 6*7".into() }];
        let registry = ToolRegistry::new();
        let copied = copied_answer(&request, &registry, true, StepOutcome::Finished(json!("calculate 6*7<|im_end|>")));
        assert!(matches!(copied, StepOutcome::Failed(e, _) if e.code == ErrorCode::CopiedAnswer));
    }

    #[test]
    fn a_name_from_the_tool_listing_is_no_answer() {
        let registry = ToolRegistry::new();
        let request = [Message::User { content: "what is 6*7".into() }];
        for name in ["answer", "Finish"] {
            let copied = copied_answer(&request, &registry, true, StepOutcome::Finished(json!(name)));
            assert!(matches!(&copied, StepOutcome::Failed(e, _) if e.details["source"] == "listing"), "{name}");
        }
        let kept = copied_answer(&request, &registry, true, StepOutcome::Finished(json!("forty-two")));
        assert!(matches!(kept, StepOutcome::Finished(_)));
    }
}
