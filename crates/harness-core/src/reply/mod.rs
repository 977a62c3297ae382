//! The reply reader: turns a model's raw text into `{reasoning, content, calls, format}`.
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

mod deepseek;
mod gemma;
mod glm;
mod harmony;
mod hermes;
mod json;
mod kimi;
mod llama;
mod mistral;
mod qwen_xml;
mod reasoning;
mod schema;

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{ErrorCode, HarnessError};
use crate::registry::ToolDefinition;

/// A model family's way of writing tool calls in text, or `Auto` to detect it from markers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyFormat {
    /// Detect the family from the first marker in the reply; JSON when there is none.
    #[default]
    Auto,
    /// A call written out as JSON (`{"tool": ..., "arguments": ...}` and the usual variants).
    Json,
    /// Hermes / Qwen 2.5 / Qwen3: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`.
    Hermes,
    /// Qwen3-Coder / Qwen3.5: `<tool_call><function=NAME><parameter=K>V</parameter>...`.
    Qwen3Coder,
    /// Mistral: `[TOOL_CALLS]NAME[ARGS]{...}`, `[CALL_ID]`, or the older `[TOOL_CALLS][{...}]`.
    Mistral,
    /// Llama 3.x / 4: `<|python_tag|>{"name": ..., "parameters": ...}`.
    Llama3,
    /// gpt-oss Harmony: `<|channel|>commentary to=functions.NAME ...<|message|>{...}`.
    Harmony,
    /// DeepSeek V3 / R1 / V3.1: `<｜tool▁call▁begin｜>...<｜tool▁sep｜>...<｜tool▁call▁end｜>`.
    DeepseekV3,
    /// DeepSeek V3.2 DSML: `<｜DSML｜function_calls><｜DSML｜invoke name="...">...`.
    DeepseekV32,
    /// Kimi K2: `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}`.
    KimiK2,
    /// GLM 4.5+: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.
    Glm45,
    /// Gemma 4: `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`.
    Gemma4,
}

impl ReplyFormat {
    /// Every format, `auto` first, for help texts and error messages.
    pub const ALL: [ReplyFormat; 12] = [
        Self::Auto,
        Self::Json,
        Self::Hermes,
        Self::Qwen3Coder,
        Self::Mistral,
        Self::Llama3,
        Self::Harmony,
        Self::DeepseekV3,
        Self::DeepseekV32,
        Self::KimiK2,
        Self::Glm45,
        Self::Gemma4,
    ];

    /// The format's name, as in configuration, on the command line and in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Json => "json",
            Self::Hermes => "hermes",
            Self::Qwen3Coder => "qwen3_coder",
            Self::Mistral => "mistral",
            Self::Llama3 => "llama3",
            Self::Harmony => "harmony",
            Self::DeepseekV3 => "deepseek_v3",
            Self::DeepseekV32 => "deepseek_v32",
            Self::KimiK2 => "kimi_k2",
            Self::Glm45 => "glm45",
            Self::Gemma4 => "gemma4",
        }
    }
}

impl std::str::FromStr for ReplyFormat {
    type Err = String;

    /// Parses a format name; the error lists the names there are.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|f| f.as_str()).collect();
            format!("unknown reply format {s:?}; use one of: {}", names.join(", "))
        })
    }
}

impl std::fmt::Display for ReplyFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    pub error: Option<HarnessError>,
}

/// How to read one reply.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions<'a> {
    /// The family to read, or `Auto`.
    pub format: ReplyFormat,
    /// The reply was cut at the token limit: its last call may be incomplete and never counts.
    pub truncated: bool,
    /// The tools offered: their schemas type the values of XML-style formats.
    pub tools: &'a [ToolDefinition],
    /// The tool the router was forced to call: a bare JSON object is taken as its arguments.
    pub forced: Option<&'a str>,
}

/// Reads a reply's text. Never panics; linear in the text's length.
pub fn read_reply(text: &str, options: &ReadOptions<'_>) -> ReadReply {
    let split = reasoning::split(text);
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
        ReplyFormat::Hermes | ReplyFormat::Qwen3Coder | ReplyFormat::Glm45 => hermes::read_tagged(text, r),
        ReplyFormat::Mistral => mistral::read(text, r),
        ReplyFormat::Llama3 => llama::read(text, r),
        ReplyFormat::Harmony => harmony::read(text, r),
        ReplyFormat::DeepseekV3 => deepseek::read_v3(text, r),
        ReplyFormat::DeepseekV32 => deepseek::read_dsml(text, r),
        ReplyFormat::KimiK2 => kimi::read(text, r),
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
    ("<|tool_calls_section_begin|>", ReplyFormat::KimiK2),
    ("<|tool_call_section_begin|>", ReplyFormat::KimiK2),
    ("<|tool_call_begin|>", ReplyFormat::KimiK2),
];

/// The family whose marker comes first; `<tool_call>` blocks are told apart by what follows.
fn detect(text: &str) -> ReplyFormat {
    let first = MARKERS.iter().filter_map(|(m, f)| text.find(m).map(|at| (at, *f))).min_by_key(|(at, _)| *at);
    match first {
        None => ReplyFormat::Json,
        Some((at, ReplyFormat::Hermes)) => hermes::kind_of_block(&text[at + "<tool_call>".len()..]),
        Some((_, format)) => format,
    }
}

/// What the family readers fill in as they go.
pub(crate) struct Reading<'a> {
    tools: &'a [ToolDefinition],
    offsets: &'a [(usize, usize)],
    calls: Vec<TextCall>,
    content: String,
    /// Reasoning a family found in its own structure (Harmony's analysis messages).
    reasoning: String,
    format: ReplyFormat,
    error: Option<HarnessError>,
    truncated: bool,
    forced: Option<&'a str>,
    /// The reply's length, where a cut with no call in progress is placed.
    reply_len: usize,
}

impl<'a> Reading<'a> {
    fn new(options: &ReadOptions<'a>, offsets: &'a [(usize, usize)], reply_len: usize) -> Self {
        Self {
            tools: options.tools,
            offsets,
            calls: Vec::new(),
            content: String::new(),
            reasoning: String::new(),
            format: options.format,
            error: None,
            truncated: options.truncated,
            forced: options.forced,
            reply_len,
        }
    }

    /// Keeps text that is not a call.
    fn content(&mut self, text: &str) {
        self.content.push_str(text);
    }

    /// Keeps a call.
    fn call(&mut self, name: &str, arguments: Value) {
        self.calls.push(TextCall { name: name.trim().to_owned(), arguments });
    }

    /// Records the fault that ends the reading; the first one stands.
    fn fail(&mut self, error: HarnessError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Where `offset` of the text without reasoning sits in the reply as the model wrote it.
    fn at(&self, offset: usize) -> usize {
        let i = self.offsets.partition_point(|(content, _)| *content <= offset);
        match i.checked_sub(1).and_then(|i| self.offsets.get(i)) {
            Some((content, original)) => original + (offset - content),
            None => offset,
        }
    }

    /// The schema of a parameter of an offered tool, when there is one.
    fn parameter_schema(&self, tool: &str, parameter: &str) -> Option<&'a Value> {
        let tool = self.tools.iter().find(|t| t.name == tool.trim())?;
        tool.parameters.get("properties")?.get(parameter)
    }

    /// A string value of an XML-style format, typed by the tool's schema.
    fn typed(&self, tool: &str, parameter: &str, raw: &str) -> Value {
        schema::typed(raw, self.parameter_schema(tool, parameter))
    }

    /// A malformed call at `offset` (of the text without reasoning).
    fn malformed(&mut self, offset: usize, problem: &str) {
        let (format, at) = (self.format, self.at(offset));
        self.fail(HarnessError::new(
            ErrorCode::MalformedCall,
            format!(
                "the reply's {format} tool call is malformed at byte {at}: {problem}; write the call exactly in the {format} format, or answer with one tool call as JSON"
            ),
            json!({ "format": format, "offset": at, "problem": problem }),
        ));
    }

    /// Arguments that are not valid JSON, in a call opened at `offset`.
    fn bad_json(&mut self, offset: usize, tool: Option<&str>, error: &serde_json::Error) {
        let (format, at) = (self.format, self.at(offset));
        let tool_part = tool.map(|t| format!(" to {:?}", t.trim())).unwrap_or_default();
        self.fail(HarnessError::new(
            ErrorCode::InvalidJson,
            format!(
                "the arguments of the {format} call{tool_part} at byte {at} are not valid JSON: {error}; send the arguments as one JSON object"
            ),
            json!({ "format": format, "offset": at, "tool": tool.map(str::trim), "error": error.to_string() }),
        ));
    }

    /// A call opened at `offset` that the reply never closed.
    fn cut(&mut self, offset: usize, tool: Option<&str>) {
        let error = cut_error(self.format, self.at(offset), tool.map(str::trim), self.truncated);
        self.fail(error);
    }

    /// Reads one JSON value starting at `offset` of `text`: the value and where it ends.
    /// A value cut by the end of the text is a cut call; other faults are `invalid_json`.
    fn json_at(&mut self, text: &str, offset: usize, opened: usize, tool: Option<&str>) -> Option<(Value, usize)> {
        let Some(rest) = text.get(offset..) else {
            self.cut(opened, tool);
            return None;
        };
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => Some((value, offset + values.byte_offset())),
            Some(Err(e)) if e.is_eof() => {
                self.cut(opened, tool);
                None
            }
            None => {
                self.cut(opened, tool);
                None
            }
            Some(Err(e)) => {
                self.bad_json(opened, tool, &e);
                None
            }
        }
    }

    /// Arguments must be an object: anything else is refused here, naming the call.
    fn object_arguments(&mut self, offset: usize, tool: &str, value: Value) -> Option<Value> {
        match value {
            Value::Object(_) => Some(value),
            Value::Null => Some(json!({})),
            Value::String(s) => match serde_json::from_str::<Value>(&s) {
                Ok(v @ Value::Object(_)) => Some(v),
                _ => {
                    self.malformed(
                        offset,
                        &format!("the arguments of {:?} are a string, not a JSON object", tool.trim()),
                    );
                    None
                }
            },
            other => {
                let kind = crate::parse::json_type(&other);
                self.malformed(offset, &format!("the arguments of {:?} are {kind}, not a JSON object", tool.trim()));
                None
            }
        }
    }

    fn finish(mut self, split_reasoning: String, options: &ReadOptions<'_>) -> ReadReply {
        let mut reasoning = split_reasoning;
        if !self.reasoning.is_empty() {
            if !reasoning.is_empty() {
                reasoning.push('\n');
            }
            reasoning.push_str(&self.reasoning);
        }
        let content = self.content.trim().to_owned();
        if self.calls.is_empty() && self.error.is_none() {
            self.error = Some(if options.truncated {
                cut_error(self.format, self.reply_len, None, true)
            } else {
                no_call(self.format, &content)
            });
        }
        let reasoning = reasoning.trim();
        ReadReply {
            calls: self.calls,
            reasoning: (!reasoning.is_empty()).then(|| reasoning.to_owned()),
            content,
            format: self.format,
            error: self.error,
        }
    }
}

/// The error of a reply cut short: at the token limit, or inside a call never closed.
fn cut_error(format: ReplyFormat, offset: usize, tool: Option<&str>, token_limit: bool) -> HarnessError {
    let why = if token_limit {
        "your reply was cut at the token limit".to_owned()
    } else {
        format!("your reply ended inside a {format} tool call opened at byte {offset} and never closed")
    };
    HarnessError::new(
        ErrorCode::ReplyTruncated,
        format!("{why}; answer with one shorter call"),
        json!({ "format": format, "offset": offset, "tool": tool, "token_limit": token_limit }),
    )
}

/// The error of a reply with no call in it.
fn no_call(format: ReplyFormat, content: &str) -> HarnessError {
    let hint = "answer with one tool call as JSON: {\"tool\": NAME, \"arguments\": {...}}";
    if format == ReplyFormat::Json || format == ReplyFormat::Auto {
        return HarnessError::new(
            ErrorCode::NoJson,
            format!("the reply holds no JSON object; {hint}"),
            json!({ "reply_bytes": content.len() }),
        );
    }
    HarnessError::new(
        ErrorCode::NoJson,
        format!("the reply holds no {format} tool call; {hint}"),
        json!({ "format": format, "reply_bytes": content.len() }),
    )
}

/// Skips ASCII whitespace from `at`.
fn skip_ws(text: &str, at: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = at;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Whether `text` at `at` starts with `marker`.
fn starts(text: &str, at: usize, marker: &str) -> bool {
    text.get(at..).is_some_and(|t| t.starts_with(marker))
}

/// Finds `marker` at or after `from`, as an absolute offset.
fn find_from(text: &str, from: usize, marker: &str) -> Option<usize> {
    text.get(from..)?.find(marker).map(|i| from + i)
}

/// Finds `marker` in `text[from..to]`, as an absolute offset.
fn find_within(text: &str, from: usize, to: usize, marker: &str) -> Option<usize> {
    text.get(from..to)?.find(marker).map(|i| from + i)
}

#[cfg(test)]
mod tests;

/// Finds one marker again and again as a reading moves forward, never searching a stretch of
/// text twice: what keeps readers with many markers linear.
pub(crate) struct Seeker {
    marker: &'static str,
    /// The last answer: `Some(None)` once the marker is known absent from here on.
    next: Option<Option<usize>>,
}

impl Seeker {
    /// A seeker of `marker`.
    pub(crate) fn new(marker: &'static str) -> Self {
        Self { marker, next: None }
    }

    /// The marker's first occurrence at or after `pos`; `pos` must never move back.
    pub(crate) fn next_at(&mut self, text: &str, pos: usize) -> Option<usize> {
        match self.next {
            Some(Some(at)) if at >= pos => return Some(at),
            Some(None) => return None,
            _ => {}
        }
        let found = find_from(text, pos, self.marker);
        self.next = Some(found);
        found
    }
}
