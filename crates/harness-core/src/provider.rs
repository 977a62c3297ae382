//! What the loop asks of a model provider, and what a provider answers.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::registry::ToolDefinition;

/// One message of the conversation the router sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The request that started the run.
    User {
        /// The request text.
        content: String,
    },
    /// What the model answered, verbatim.
    Assistant {
        /// The model's reply.
        reply: ModelReply,
    },
    /// The outcome of a step, fed back: a tool's result or an error object.
    ToolResult {
        /// The id of the call this answers; `None` when the reply had no usable call.
        call_id: Option<String>,
        /// The tool that was called, when there was one.
        tool: Option<String>,
        /// The result, or the error object when `is_error`.
        content: Value,
        /// Whether `content` is an error object.
        is_error: bool,
    },
}

/// A model's answer: structured tool calls and/or text.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelReply {
    /// Tool calls from the API's structured field, in order.
    pub calls: Vec<ProposedCall>,
    /// Free text, which may hold a call written out as JSON or in a model family's own format.
    pub text: Option<String>,
    /// Reasoning the server split out of the reply (`reasoning_content`, thinking blocks):
    /// kept for the trace, never read for calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Why the model stopped, as the API said it (`stop`, `tool_calls`, `length`, `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The reply was cut at the token limit (`finish_reason: "length"`, `stop_reason:
    /// "max_tokens"`): its last call may be incomplete and is never run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Tokens spent, when the provider reports them.
    pub usage: Option<Usage>,
    /// How the provider forced the tool choice (`native`, `constrained`, `prompt`), for the trace.
    pub router_mode: Option<String>,
    /// Requests the provider retried before this reply.
    pub retries: u32,
}

/// A tool call as the model proposed it, not yet parsed or checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProposedCall {
    /// The provider's id for the call, used to match the result.
    pub id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The arguments: an object, or a JSON string that should hold one.
    pub arguments: Value,
}

/// Token counts of one reply or of a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Tokens sent to the model.
    pub input_tokens: u64,
    /// Tokens the model produced.
    pub output_tokens: u64,
    /// Of `input_tokens`, those the server took from its prompt cache instead of computing them
    /// again (llama.cpp's `timings.cache_n`, OpenAI's `cached_tokens`, Anthropic's
    /// `cache_read_input_tokens`); 0 when the server does not say.
    pub cached_input_tokens: u64,
}

impl Usage {
    /// Adds another count to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
    }
}

/// Which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// Some tool, the model's choice; never free text.
    Required,
    /// The named tool and no other.
    Tool(String),
    /// The model may answer without a tool (for providers' sake; the loop never asks this).
    Auto,
    /// No tool.
    None,
}

/// One request to the router: the conversation, the offered tools, the forced choice.
#[derive(Debug, Clone, Copy)]
pub struct RouterRequest<'a> {
    /// Everything said so far, the user's request first.
    pub conversation: &'a [Message],
    /// The tools offered at this step.
    pub tools: &'a [ToolDefinition],
    /// The forced tool choice.
    pub tool_choice: &'a ToolChoice,
}

/// Why a provider could not produce a reply.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// What went wrong, naming the provider, the file or URL, and the fix.
    pub message: String,
    /// Requests retried before giving up.
    pub retries: u32,
}

impl ProviderError {
    /// A provider error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), retries: 0 }
    }
}

/// A model provider: asked once per step for a reply.
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// The provider's name, for traces and messages.
    fn name(&self) -> &str;
    /// Asks the model for its next reply.
    async fn complete(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError>;
}
