//! The deterministic error objects fed back to the router and written to the trace.

use harness_reply::{ReplyError, ReplyErrorCode};
use serde::Serialize;
use serde_json::Value;

/// The stable codes of everything that can go wrong in a step or a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The reply held no JSON at all.
    NoJson,
    /// The reply held JSON that is broken or is not a tool call.
    InvalidJson,
    /// The call names a tool that no loaded plugin offers.
    UnknownTool,
    /// The arguments break the tool's schema.
    InvalidArguments,
    /// The tool ran and reported a failure.
    ToolError,
    /// The tool panicked; the panic was caught.
    ToolPanicked,
    /// The tool exists but was not offered at this step (only `finish` was).
    ToolNotOffered,
    /// The same call was made `max_repeats` times in a row.
    RepeatedCall,
    /// The run spent its step budget without calling `finish`.
    StepBudgetExhausted,
    /// The model provider failed to answer.
    ProviderError,
    /// The trace could not be written, so the run stopped.
    TraceError,
    /// The tool's process died (crash, abort, exit) before answering.
    ToolCrashed,
    /// The tool did not answer within its timeout.
    ToolTimeout,
    /// The tool's result is over the size limit; it is not fed to the model.
    ResultTooLarge,
    /// The router's reply is over the size limit; it is not parsed.
    ReplyTooLarge,
    /// The call's arguments are over the size limit; the tool does not run.
    ArgumentsTooLarge,
    /// The run's wall-clock limit was reached.
    TimeBudgetExhausted,
    /// The reply was cut (at the token limit, or inside a call never closed): the cut call never runs.
    ReplyTruncated,
    /// A call in a model family's own format breaks that format's grammar.
    MalformedCall,
    /// The tool's result breaks its declared output schema; it is not fed to the model as a result.
    InvalidResult,
    /// The operator's policy or the operator denied the call; it did not run.
    CallDenied,
    /// The call waits for the operator's approval; the run stopped before it.
    AwaitingApproval,
    /// The tool's source changed or removed it after the run offered it; it is not called.
    ToolChanged,
    /// The tool's plugin, offered from the plugin cache, could not be opened or initialised
    /// at its first call; none of its tools runs.
    PluginUnavailable,
    /// The next request cannot fit the model's context, even with every earlier step compacted.
    ContextExhausted,
    /// `finish` was called with an answer copied from a harness error or from the request's
    /// own text, not from a result; the run goes on.
    CopiedAnswer,
}

impl ErrorCode {
    /// The code a tool failure reported by a handler maps to; unknown codes are `tool_error`.
    pub fn of_tool_failure(code: &str) -> Self {
        match code {
            "tool_panicked" => Self::ToolPanicked,
            "tool_crashed" => Self::ToolCrashed,
            "tool_timeout" => Self::ToolTimeout,
            "result_too_large" => Self::ResultTooLarge,
            "tool_changed" => Self::ToolChanged,
            "plugin_unavailable" => Self::PluginUnavailable,
            // The SDK's own check, when arguments pass the schema but not the author's type.
            "invalid_arguments" => Self::InvalidArguments,
            _ => Self::ToolError,
        }
    }

    /// The code as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoJson => "no_json",
            Self::InvalidJson => "invalid_json",
            Self::UnknownTool => "unknown_tool",
            Self::InvalidArguments => "invalid_arguments",
            Self::ToolError => "tool_error",
            Self::ToolPanicked => "tool_panicked",
            Self::ToolNotOffered => "tool_not_offered",
            Self::RepeatedCall => "repeated_call",
            Self::StepBudgetExhausted => "step_budget_exhausted",
            Self::ProviderError => "provider_error",
            Self::TraceError => "trace_error",
            Self::ToolCrashed => "tool_crashed",
            Self::ToolTimeout => "tool_timeout",
            Self::ResultTooLarge => "result_too_large",
            Self::ReplyTooLarge => "reply_too_large",
            Self::ArgumentsTooLarge => "arguments_too_large",
            Self::TimeBudgetExhausted => "time_budget_exhausted",
            Self::ReplyTruncated => "reply_truncated",
            Self::MalformedCall => "malformed_call",
            Self::InvalidResult => "invalid_result",
            Self::CallDenied => "call_denied",
            Self::AwaitingApproval => "awaiting_approval",
            Self::ToolChanged => "tool_changed",
            Self::PluginUnavailable => "plugin_unavailable",
            Self::ContextExhausted => "context_exhausted",
            Self::CopiedAnswer => "copied_answer",
        }
    }
}

/// An error object: a stable `code`, a `message` for people and models, and `details`.
///
/// Built only from the input that caused it (never times, addresses or counters from
/// elsewhere), so the same bad input gives the same object, byte for byte.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HarnessError {
    /// The stable code.
    pub code: ErrorCode,
    /// What went wrong and, where there is one, what to do.
    pub message: String,
    /// Structured facts: the tool, the violations, the position.
    pub details: Value,
}

impl HarnessError {
    /// An error with structured details.
    pub fn new(code: ErrorCode, message: impl Into<String>, details: Value) -> Self {
        Self { code, message: message.into(), details }
    }

    /// The error as the JSON value fed back to the router.
    pub fn to_value(&self) -> Value {
        serde_json::json!({ "code": self.code, "message": self.message, "details": self.details })
    }
}

impl std::fmt::Display for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for HarnessError {}

impl From<ReplyErrorCode> for ErrorCode {
    fn from(code: ReplyErrorCode) -> Self {
        match code {
            ReplyErrorCode::NoJson => Self::NoJson,
            ReplyErrorCode::InvalidJson => Self::InvalidJson,
            ReplyErrorCode::InvalidArguments => Self::InvalidArguments,
            ReplyErrorCode::ReplyTruncated => Self::ReplyTruncated,
            ReplyErrorCode::MalformedCall => Self::MalformedCall,
        }
    }
}

impl From<ReplyError> for HarnessError {
    fn from(e: ReplyError) -> Self {
        Self { code: e.code.into(), message: e.message, details: e.details }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_error_keeps_its_code_name_message_and_details_in_the_loop() {
        let codes = [
            ReplyErrorCode::NoJson,
            ReplyErrorCode::InvalidJson,
            ReplyErrorCode::InvalidArguments,
            ReplyErrorCode::ReplyTruncated,
            ReplyErrorCode::MalformedCall,
        ];
        for code in codes {
            let reply = ReplyError::new(code, "m", serde_json::json!({"offset": 3}));
            let error = HarnessError::from(reply.clone());
            assert_eq!(serde_json::to_value(code).ok(), Some(Value::from(error.code.as_str())));
            assert_eq!(serde_json::to_value(&error).ok(), serde_json::to_value(&reply).ok());
        }
    }
}
