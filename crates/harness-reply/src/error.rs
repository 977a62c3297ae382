//! The error a reading ends with: the same `{code, message, details}` shape as the loop's
//! errors, with only the codes a reply's text can earn; the core maps each to its own code.

use serde::Serialize;
use serde_json::Value;

/// The codes a reading can end with, spelled as the loop's error codes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyErrorCode {
    /// The reply held no call at all.
    NoJson,
    /// The reply held JSON that is broken or is not a tool call.
    InvalidJson,
    /// A call's arguments are not a JSON object.
    InvalidArguments,
    /// The reply was cut (at the token limit, or inside a call never closed).
    ReplyTruncated,
    /// A call in a model family's own format breaks that format's grammar.
    MalformedCall,
}

/// Why a reading stopped: a stable `code`, a `message` for people and models, and `details`.
///
/// Built only from the reply's text, so the same reply gives the same error, byte for byte.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplyError {
    /// The stable code.
    pub code: ReplyErrorCode,
    /// What went wrong and what to write instead.
    pub message: String,
    /// Structured facts: the format, the offset, the tool.
    pub details: Value,
}

impl ReplyError {
    /// An error with structured details.
    pub fn new(code: ReplyErrorCode, message: impl Into<String>, details: Value) -> Self {
        Self { code, message: message.into(), details }
    }
}
