//! Ask the router: one model call with the offered tools and the forced choice, bounded by the
//! run's deadline. A provider failure ends the run after one trace line.

use serde_json::json;

use super::{Run, RunOutcome, Step, micros, record};
use crate::error::{ErrorCode, HarnessError};
use crate::provider::{ModelProvider, ModelReply, RouterRequest, ToolChoice};
use crate::registry::ToolRegistry;
use crate::trace::{StepStatus, TraceSink};

/// Asks the router for its next reply, counting its usage and retries into the run.
/// `Err` is the run's end: its deadline passed, or the provider failed.
pub(super) async fn ask_router(
    provider: &dyn ModelProvider,
    registry: &ToolRegistry,
    run: &mut Run<'_>,
    step: &mut Step,
    trace: &mut dyn TraceSink,
) -> Result<ModelReply, RunOutcome> {
    // With `finish` the only tool offered, "required" forces it as surely as naming it, and
    // every server honours "required" (llama.cpp treats a named choice as "auto").
    let tools = if step.finish_only { registry.finish_only() } else { registry.definitions() };
    let request = RouterRequest { conversation: &run.conversation, tools, tool_choice: &ToolChoice::Required };
    let asked = match run.deadline {
        None => provider.complete(request).await,
        Some(d) => match tokio::time::timeout_at(d.into(), provider.complete(request)).await {
            Ok(asked) => asked,
            Err(_) => return Err(run.time_budget_exhausted(step.number - 1)),
        },
    };
    step.model_us = micros(step.started);
    match asked {
        Ok(reply) => {
            if let Some(u) = reply.usage {
                run.usage.add(u);
            }
            run.retries += reply.retries;
            step.usage = reply.usage;
            Ok(reply)
        }
        Err(e) => {
            let error = HarnessError::new(
                ErrorCode::ProviderError,
                format!("provider {:?} failed: {}", provider.name(), e.message),
                json!({ "provider": provider.name() }),
            );
            run.retries += e.retries;
            let entry = record::blank_entry(step, StepStatus::Error, Some(&error), micros(step.started));
            let error = match trace.record(&entry) {
                Ok(()) => error,
                Err(e) => record::trace_error(&e),
            };
            Err(run.failed(step.number, error))
        }
    }
}
