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

/// Checks one call to `tool` (looked up by the caller; `None` when there is no such tool). Oversized arguments are replaced by a note of their size, so that they
/// are not kept in the trace either.
pub(super) fn check_call(
    registry: &ToolRegistry,
    tool: Option<RegisteredTool<'_>>,
    call: &mut StepCall<'_>,
    finish_only: bool,
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
    tool.validate(&call.arguments)?;
    if call.tool == FINISH {
        return Ok(Cleared::Finish(call.arguments.get("answer").cloned().unwrap_or(Value::Null)));
    }
    if repeats.tripped_by(&call.tool, &call.arguments) {
        return Err(HarnessError::new(
            ErrorCode::RepeatedCall,
            format!(
                "{:?} was called with the same arguments {} times in a row; its result will not change. Call finish with your best answer",
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
