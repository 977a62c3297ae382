//! The trace's lines as a reader sees them: every field a past or present harness wrote, each
//! optional where an older trace may lack it; fields a newer harness adds are ignored.

use serde::Deserialize;
use serde_json::Value;

/// How a step ended: the loop's own type, read back as it was written.
pub use harness_core::StepStatus;

/// A step's or a run's error object.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ErrorObject {
    /// The stable code, such as `invalid_arguments`.
    pub code: String,
    /// What went wrong.
    pub message: String,
    /// What it went wrong with.
    #[serde(default)]
    pub details: Value,
}

/// Tokens of one model call or of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Tokens {
    /// Sent to the model.
    pub input_tokens: u64,
    /// Produced by the model.
    pub output_tokens: u64,
    /// Of `input_tokens`, those the server took from its prompt cache (0 in traces from before
    /// it was recorded).
    #[serde(default)]
    pub cached_input_tokens: u64,
}

/// One structured call of a recorded reply.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CallRecord {
    /// The provider's id for the call.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool named.
    pub name: String,
    /// The arguments as the model gave them: an object, or a string of JSON.
    #[serde(default)]
    pub arguments: Value,
}

/// The model's whole reply, as recorded on the step that asked for it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ReplyRecord {
    /// Structured calls, in order.
    #[serde(default)]
    pub calls: Vec<CallRecord>,
    /// Free text.
    #[serde(default)]
    pub text: Option<String>,
    /// Reasoning the server split out.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Why the model stopped.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// The reply was cut at the token limit.
    #[serde(default)]
    pub truncated: bool,
    /// Tokens of the call.
    #[serde(default)]
    pub usage: Option<Tokens>,
    /// How the tool choice was forced.
    #[serde(default)]
    pub router_mode: Option<String>,
    /// Requests retried before this reply.
    #[serde(default)]
    pub retries: u32,
}

/// One step line.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    /// Step number, from 1.
    pub step: u32,
    /// The tool called, when a call could be parsed.
    pub tool: Option<String>,
    /// Its arguments, when a call could be parsed.
    pub arguments: Option<Value>,
    /// How the step ended.
    pub status: StepStatus,
    /// The tool's result, or `finish`'s answer.
    #[serde(default, deserialize_with = "present")]
    pub result: Option<Value>,
    /// Why the step did not succeed.
    pub error: Option<ErrorObject>,
    /// The plugin that offered the tool.
    pub plugin: Option<String>,
    /// That plugin's version.
    pub plugin_version: Option<String>,
    /// The MCP server that offered the tool.
    #[serde(default)]
    pub mcp_server: Option<String>,
    /// `all`, or `finish` when only it was offered.
    pub offered: Option<String>,
    /// Which call of a reply with several.
    pub call_index: Option<u64>,
    /// The model's raw text.
    pub reply_text: Option<String>,
    /// The call format the reply's text was read as (`json`, `hermes`, ...).
    #[serde(default)]
    pub reply_format: Option<String>,
    /// The model's reasoning, split off its text or out of the API's reply.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// `native` or `prompt`.
    pub router_mode: Option<String>,
    /// Tokens of the model call made at this step.
    pub usage: Option<Tokens>,
    /// The model's whole reply, on the step that asked for it (format 2 on).
    #[serde(default)]
    pub reply: Option<ReplyRecord>,
    /// Wall time of the step, in microseconds.
    pub duration_us: u64,
    /// Wall time of the model call alone, in microseconds.
    #[serde(default)]
    pub model_us: u64,
}

impl Step {
    /// The reasoning of the reply this step asked for, when the model gave any.
    pub fn reasoning(&self) -> Option<&str> {
        let from_reply = || self.reply.as_ref().and_then(|r| r.reasoning.as_deref());
        self.reasoning.as_deref().or_else(from_reply).filter(|r| !r.is_empty())
    }
}

/// A present `result` is kept even when it is `null` (a tool may return null).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// One tool offered, as the first line lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ToolRecord {
    /// The tool's name.
    pub name: String,
    /// `builtin`, `plugin` or `mcp`.
    #[serde(default)]
    pub source: String,
    /// The plugin that offered it.
    #[serde(default)]
    pub plugin: Option<String>,
    /// That plugin's version.
    #[serde(default)]
    pub plugin_version: Option<String>,
    /// The MCP server that offered it.
    #[serde(default)]
    pub mcp_server: Option<String>,
    /// SHA-256 of the definition the router saw.
    #[serde(default)]
    pub definition_hash: String,
}

/// The run's limits, as the first line records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct LimitsRecord {
    /// Steps the run could take.
    pub max_steps: u32,
    /// Identical calls in a row before `repeated_call`.
    pub max_repeats: u32,
    /// Largest router reply, in bytes.
    pub max_reply_bytes: usize,
    /// Largest arguments of one call, in bytes.
    pub max_arguments_bytes: usize,
    /// Largest conversation, in bytes.
    pub max_conversation_bytes: usize,
    /// Wall-clock limit, in milliseconds.
    #[serde(default)]
    pub max_duration_ms: Option<u64>,
}

/// The first line: what was asked, with what.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StartRecord {
    /// The trace format the writer used.
    pub format: u32,
    /// The writer's version.
    pub harness_version: String,
    /// The request.
    pub request: String,
    /// The provider's name.
    pub provider: String,
    /// The model id.
    #[serde(default)]
    pub model: Option<String>,
    /// The configured router mode.
    #[serde(default)]
    pub router_mode: Option<String>,
    /// Where the configuration came from.
    #[serde(default)]
    pub config_source: Option<String>,
    /// SHA-256 of the configuration.
    #[serde(default)]
    pub config_hash: Option<String>,
    /// How the reply's text was read (format 2 traces of later harnesses).
    #[serde(default)]
    pub reply_format: Option<String>,
    /// The tools offered.
    #[serde(default)]
    pub tools: Vec<ToolRecord>,
    /// The limits.
    pub limits: LimitsRecord,
    /// When it started.
    #[serde(default)]
    pub started_at: String,
}

/// How a run ended, as its last line says it: the loop's own status, read back.
pub use harness_core::RunStatus;

/// The last line: how the run ended.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EndRecord {
    /// How it ended.
    pub status: RunStatus,
    /// `finish`'s answer.
    #[serde(default, deserialize_with = "present")]
    pub answer: Option<Value>,
    /// Steps taken.
    pub steps: u32,
    /// Tokens over the run.
    #[serde(default)]
    pub usage: Tokens,
    /// Requests retried.
    #[serde(default)]
    pub retries: u32,
    /// Why it did not finish.
    #[serde(default)]
    pub error: Option<ErrorObject>,
    /// Wall time of the run, in microseconds.
    pub duration_us: u64,
    /// When it ended.
    #[serde(default)]
    pub ended_at: String,
}
