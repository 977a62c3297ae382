//! Reads a model's reply text into tool calls: `{reasoning, content, calls, format}`.
//!
//! Reasoning is split off first ([`reasoning`]) and is never searched for calls. The rest is
//! read by the grammar of one call format: the family pinned by the operator, or the one whose
//! marker comes first in the text. Each family is a module of its own, written from that
//! family's chat template and the serving engines' parsers. A reply with no family's marker is
//! scanned for calls written out as JSON ([`json`], today's scanner). Every call is returned,
//! in order; the first fault (a malformed call, a call cut short) ends the reading with a
//! precise error, and the calls before it stand.
//!
//! The reader never panics and its time is linear in the reply's length: every search moves
//! forward, and a search for a closing marker is bounded by the block it closes.
//!
//! The crate knows nothing of the loop: the tools offered come in through [`OfferedTool`]
//! and a fault goes out as a [`ReplyError`], which `harness-core` maps to its own error.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod arguments;
mod deepseek;
mod dsml;
mod error;
mod format;
mod gemma;
mod glm;
mod harmony;
mod hermes;
mod json;
mod kimi;
mod kimi_k3;
mod llama;
mod mistral;
mod pythonic;
mod qwen_xml;
mod reading;
mod reasoning;
mod schema;
mod text;

use serde::Serialize;
use serde_json::Value;

pub use self::arguments::{decode_arguments, invalid_json, json_type};
pub use self::error::{ReplyError, ReplyErrorCode};
pub use self::format::ReplyFormat;
use self::reading::{Reading, cut_error};
use self::text::{Closer, Fault, Seeker, find_from, skip_ws, starts};

/// A tool offered to the model, as the reader needs it: its schema types XML-style values.
pub trait OfferedTool {
    /// The tool's name.
    fn name(&self) -> &str;
    /// JSON Schema of its arguments object.
    fn parameters(&self) -> &Value;
}

/// A tool's name and arguments schema, for readers with no tool type of their own.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchema {
    /// The tool's name.
    pub name: String,
    /// JSON Schema of its arguments object.
    pub parameters: Value,
}

impl OfferedTool for ToolSchema {
    fn name(&self) -> &str {
        &self.name
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }
}

/// One call read from a reply's text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextCall {
    /// The tool name.
    pub name: String,
    /// The arguments object (XML-style values typed by the tool's schema).
    pub arguments: Value,
}

/// A reply as read: its reasoning, its content, its calls in order, and the first fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadReply {
    /// The calls, in the order they were written.
    pub calls: Vec<TextCall>,
    /// The reasoning split off the reply, never searched for calls.
    pub reasoning: Option<String>,
    /// The text around the calls.
    pub content: String,
    /// The format the reply was read as (never `auto`).
    pub format: ReplyFormat,
    /// Why reading stopped: a malformed or cut call, or no call at all.
    pub error: Option<ReplyError>,
}

/// How to read one reply.
#[derive(Debug)]
pub struct ReadOptions<'a, T = ToolSchema> {
    /// The family to read, or `Auto`.
    pub format: ReplyFormat,
    /// The reply was cut at the token limit: its last call may be incomplete and never counts.
    pub truncated: bool,
    /// The tools offered: their schemas type the values of XML-style formats.
    pub tools: &'a [T],
    /// The tool the router was forced to call: a bare JSON object is taken as its arguments.
    pub forced: Option<&'a str>,
}

// By hand: derived, both would ask `T` to be `Clone` too, where only a reference is copied.
impl<T> Clone for ReadOptions<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ReadOptions<'_, T> {}

/// Reads a reply's text. Never panics; linear in the text's length.
pub fn read_reply<T: OfferedTool>(text: &str, options: &ReadOptions<'_, T>) -> ReadReply {
    // Every family's marker opens a call, after which no reasoning block is split off; for
    // Harmony, whose markers open analysis messages too, it is a message's recipient.
    let call_markers: Vec<&'static str> =
        MARKERS.iter().filter(|(_, f)| *f != ReplyFormat::Harmony).map(|(m, _)| *m).chain([" to=functions."]).collect();
    // A reply that opens with a call (pythonic, or JSON) has no reasoning before it.
    let split = if pythonic::opens_with_calls(text) || json::leading_value_end(text).is_some() {
        reasoning::Split::none(text)
    } else {
        reasoning::split(text, &call_markers)
    };
    let mut reading = Reading::new(options, &split.offsets, text.len());
    let format = match options.format {
        ReplyFormat::Auto => detect(&split.content),
        pinned => pinned,
    };
    reading.format = format;
    if split.cut_in_reasoning && reading.error.is_none() && options.truncated {
        // The token limit fell inside the reasoning: whatever call was coming never came.
        reading.fail(cut_error(format, text.len(), None, true));
    } else {
        read_family(format, &split.content, &mut reading);
    }
    reading.finish(split.reasoning, options)
}

/// Reads `text` (reasoning removed) as `format`.
fn read_family(format: ReplyFormat, text: &str, r: &mut Reading<'_>) {
    match format {
        ReplyFormat::Auto | ReplyFormat::Json => json::read(text, r),
        ReplyFormat::Hermes => hermes::read_tagged(text, r),
        ReplyFormat::Glm45 => glm::read(text, r),
        ReplyFormat::Qwen3Coder => qwen_xml::read(text, r),
        ReplyFormat::Mistral => mistral::read(text, r),
        ReplyFormat::Llama3 => llama::read(text, r),
        ReplyFormat::Harmony => harmony::read(text, r),
        ReplyFormat::DeepseekV3 => deepseek::read_v3(text, r),
        ReplyFormat::DeepseekV32 | ReplyFormat::DeepseekV4 => dsml::read(text, r),
        ReplyFormat::KimiK2 => kimi::read(text, r),
        ReplyFormat::KimiK3 => kimi_k3::read(text, r),
        ReplyFormat::Llama4Pythonic => pythonic::read(text, r),
        ReplyFormat::Gemma4 => gemma::read(text, r),
    }
}

/// The markers that announce each family, checked in the text; the earliest wins.
const MARKERS: &[(&str, ReplyFormat)] = &[
    ("<tool_call>", ReplyFormat::Hermes),
    ("<|tool_call>", ReplyFormat::Gemma4),
    ("[TOOL_CALLS]", ReplyFormat::Mistral),
    ("<|python_tag|>", ReplyFormat::Llama3),
    ("<|channel|>", ReplyFormat::Harmony),
    ("<|start|>", ReplyFormat::Harmony),
    ("<｜tool▁calls▁begin｜>", ReplyFormat::DeepseekV3),
    ("<｜tool▁call▁begin｜>", ReplyFormat::DeepseekV3),
    ("<｜DSML｜function_calls>", ReplyFormat::DeepseekV32),
    ("<function_calls>", ReplyFormat::DeepseekV32),
    ("<｜DSML｜tool_calls>", ReplyFormat::DeepseekV4),
    ("<｜DSML｜ calls>", ReplyFormat::DeepseekV4),
    ("<｜DSML｜calls>", ReplyFormat::DeepseekV4),
    ("<|DSML|tool_calls>", ReplyFormat::DeepseekV4),
    ("<|DSML| calls>", ReplyFormat::DeepseekV4),
    ("<｜DSML｜invoke ", ReplyFormat::DeepseekV4),
    ("<｜DSML｜ invoke ", ReplyFormat::DeepseekV4),
    ("<|DSML|invoke ", ReplyFormat::DeepseekV4),
    ("<|tool_calls_section_begin|>", ReplyFormat::KimiK2),
    ("<|tool_call_section_begin|>", ReplyFormat::KimiK2),
    ("<|tool_call_begin|>", ReplyFormat::KimiK2),
    ("<function=", ReplyFormat::Qwen3Coder),
    ("<|open|>tools<|sep|>", ReplyFormat::KimiK3),
    ("<|open|>call ", ReplyFormat::KimiK3),
    ("<|open|>response<|sep|>", ReplyFormat::KimiK3),
    ("<|close|>response<|sep|>", ReplyFormat::KimiK3),
    ("<|close|>message<|sep|>", ReplyFormat::KimiK3),
    ("<|python_start|>", ReplyFormat::Llama4Pythonic),
];

/// The family whose marker comes first; `<tool_call>` blocks are told apart by what follows.
/// A reply that opens with pythonic calls (`[name(`) is Llama 4's; one that opens with a JSON
/// value is a call written as JSON: markers inside either are their text, and only those
/// after a leading JSON value count.
fn detect(text: &str) -> ReplyFormat {
    if pythonic::opens_with_calls(text) {
        return ReplyFormat::Llama4Pythonic;
    }
    let from = json::leading_value_end(text).unwrap_or(0);
    let rest = &text[from..];
    let first = MARKERS.iter().filter_map(|(m, f)| rest.find(m).map(|at| (at, *f))).min_by_key(|(at, _)| *at);
    match first {
        None => ReplyFormat::Json,
        Some((at, ReplyFormat::Hermes)) => hermes::kind_of_block(&rest[at + "<tool_call>".len()..]),
        Some((_, format)) => format,
    }
}

#[cfg(test)]
mod tests;
