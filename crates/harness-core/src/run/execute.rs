//! Execute the call: its handler runs off the async workers (or inline, where that is safe),
//! bounded by its timeout, with panics caught and failures mapped to stable error codes.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::StepOutcome;
use super::read::StepCall;
use crate::error::{ErrorCode, HarnessError};
use crate::registry::{FINISH, ToolFailure, ToolHandler, ToolRegistry};
use crate::trace::StepStatus;

/// How long past its timeout a handler that enforces timeouts itself may take to report it.
const ENFORCEMENT_GRACE: Duration = Duration::from_secs(1);

/// The timeout of one call: the tool's own, cut to what is left of the run's time.
pub(super) fn within(tool_timeout: Option<Duration>, remaining: Option<Duration>) -> Option<Duration> {
    match (tool_timeout, remaining) {
        (Some(t), Some(r)) => Some(t.min(r)),
        (t, r) => t.or(r),
    }
}

/// Runs the handler on a blocking thread so that a slow tool never stalls the async workers.
/// The arguments travel to the thread and back, so they are never copied.
pub(super) async fn execute(
    handler: Arc<dyn ToolHandler>,
    call: &mut StepCall<'_>,
    timeout: Option<Duration>,
    inline: bool,
) -> StepOutcome {
    // The deadline is fixed now, so that time spent queued counts against it.
    let deadline = timeout.map(|t| Instant::now() + t);
    // A call with a timeout stays inline only when its handler ends it at the deadline itself.
    let ran = if inline && (timeout.is_none() || handler.enforces_timeout()) && handler.may_run_inline() {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handler.call_by(&call.tool, &call.arguments, deadline)
        }));
        Ok(result)
    } else {
        off_thread(handler, call, timeout, deadline).await
    };
    let failure = match ran {
        Ok(Ok(Ok(value))) => return StepOutcome::Ran(value),
        Ok(Ok(Err(failure))) => failure,
        Ok(Err(_)) => {
            ToolFailure { code: "tool_panicked".to_owned(), message: "the tool's host adapter panicked".to_owned() }
        }
        Err(outcome) => return outcome,
    };
    let code = ErrorCode::of_tool_failure(&failure.code);
    let tool = &call.tool;
    let details = if code.as_str() == failure.code {
        json!({ "tool": tool })
    } else {
        json!({ "tool": tool, "tool_code": failure.code })
    };
    StepOutcome::Failed(HarnessError::new(code, failure.message, details), StepStatus::Error)
}

type Caught = std::thread::Result<Result<Value, ToolFailure>>;

/// Runs the handler on a blocking thread; the arguments travel there and back, never copied.
/// `Err` is the step's outcome already decided: a timeout, or a thread that failed.
async fn off_thread(
    handler: Arc<dyn ToolHandler>,
    call: &mut StepCall<'_>,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
) -> Result<Caught, StepOutcome> {
    // The thread needs its own copy of the name; an inline call borrows the call's.
    let tool = &Arc::<str>::from(call.tool.as_str());
    let enforces = handler.enforces_timeout();
    // An abandoned call keeps its arguments for the trace; only a call with a timeout can be.
    let kept = timeout.is_some().then(|| call.arguments.clone());
    let arguments = std::mem::take(&mut call.arguments).into_owned();
    let t = tool.clone();
    let task = tokio::task::spawn_blocking(move || {
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.call_by(&t, &arguments, deadline)));
        (arguments, result)
    });
    let joined = match timeout {
        None => task.await,
        Some(limit) => {
            let wait = if enforces { limit + ENFORCEMENT_GRACE } else { limit };
            match tokio::time::timeout(wait, task).await {
                Ok(joined) => joined,
                Err(_) => {
                    if let Some(arguments) = kept {
                        call.arguments = arguments;
                    }
                    return Err(timed_out(tool, limit));
                }
            }
        }
    };
    match joined {
        Ok((arguments, result)) => {
            call.arguments = Cow::Owned(arguments);
            Ok(result)
        }
        Err(e) => Err(StepOutcome::Failed(
            HarnessError::new(
                ErrorCode::ToolPanicked,
                format!("the tool's thread failed: {e}"),
                json!({ "tool": &**tool }),
            ),
            StepStatus::Error,
        )),
    }
}

fn timed_out(tool: &str, limit: Duration) -> StepOutcome {
    let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    StepOutcome::Failed(
        HarnessError::new(
            ErrorCode::ToolTimeout,
            format!("{tool:?} did not answer within {ms} ms; the call was abandoned and its result will be ignored"),
            json!({ "tool": tool, "timeout_ms": ms }),
        ),
        StepStatus::Error,
    )
}

/// Validates and runs one call outside a run, exactly as a step would (unknown tool, schema,
/// timeout, error mapping, the result against the output schema), for callers that are not a router: an MCP server, plugin checks.
///
/// `finish` is not a tool to call here and is `unknown_tool`.
pub async fn call_tool(registry: &ToolRegistry, tool: &str, arguments: Value) -> Result<Value, HarnessError> {
    let known = registry.get(tool).filter(|t| t.handler().is_some());
    let Some(found) = known else {
        let offered: Vec<&str> =
            registry.definitions().iter().map(|d| d.name.as_str()).filter(|n| *n != FINISH).collect();
        return Err(HarnessError::new(
            ErrorCode::UnknownTool,
            format!("there is no tool named {tool:?}; call one of: {}", offered.join(", ")),
            json!({ "tool": tool, "offered": offered }),
        ));
    };
    found.validate(&arguments)?;
    let Some(handler) = found.handler().cloned() else {
        unreachable!("filtered on having a handler above");
    };
    let mut call = StepCall { id: String::new(), tool: tool.to_owned(), arguments: Cow::Owned(arguments) };
    let outcome = execute(handler, &mut call, found.timeout, false).await;
    match super::check::check_result(Some(found), outcome) {
        StepOutcome::Ran(result) | StepOutcome::Finished(result) | StepOutcome::Known(result, _) => Ok(result),
        StepOutcome::Failed(error, _) => Err(error),
    }
}
