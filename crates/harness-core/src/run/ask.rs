//! Ask the router: one model call with the offered tools and the forced choice, bounded by the
//! run's deadline. A provider failure ends the run after one trace line.

use serde_json::json;

use super::{Run, RunOutcome, Step, micros, record};
use crate::error::{ErrorCode, HarnessError};
use crate::provider::{ModelProvider, ModelReply, RouterRequest, ToolChoice};
use crate::registry::{FINISH, ToolRegistry};
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
    // A forced `finish` keeps every tool in the request and names `finish`: the provider knows
    // its server, and either sends the named form with the whole list (OpenAI, Anthropic: the
    // prompt prefix a server has cached survives) or "required" with `finish` alone (servers
    // that take the named form for "auto", as llama.cpp does). The loop itself still refuses
    // any other tool at that step (`tool_not_offered`).
    let choice = if step.finish_only {
        ToolChoice::Tool(FINISH.to_owned())
    } else if let Some(names) = run.gate.shortlist.as_ref().filter(|_| step.shortlisted) {
        ToolChoice::OneOf(names.clone())
    } else if step.finish_withheld {
        ToolChoice::AnyBut(FINISH.to_owned())
    } else {
        ToolChoice::Required
    };
    let request =
        RouterRequest { conversation: &run.conversation, tools: registry.definitions(), tool_choice: &choice };
    let asked = match run.gate.deadline {
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
                json!({ "provider": provider.name(), "retries": e.retries, "outage": e.outage }),
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
