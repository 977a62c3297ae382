//! What the family readers fill in as they go: calls, content, reasoning, and the first fault,
//! with offsets mapped back to the reply as the model wrote it.

use serde_json::{Value, json};

use super::{OfferedTool, ReadOptions, ReadReply, ReplyFormat, TextCall, schema};
use crate::error::{ReplyError, ReplyErrorCode};

/// The offered tools, whatever type the caller keeps them in: the family readers stay
/// free of the caller's type.
pub(super) trait Schemas {
    /// The arguments schema of the tool named `tool`, when it was offered.
    fn parameters_of(&self, tool: &str) -> Option<&Value>;
}

impl<T: OfferedTool> Schemas for &[T] {
    fn parameters_of(&self, tool: &str) -> Option<&Value> {
        self.iter().find(|t| t.name() == tool).map(OfferedTool::parameters)
    }
}

/// What the family readers fill in as they go.
pub(super) struct Reading<'a> {
    pub(super) tools: &'a dyn Schemas,
    pub(super) offsets: &'a [(usize, usize)],
    pub(super) calls: Vec<TextCall>,
    pub(super) content: String,
    /// Reasoning a family found in its own structure (Harmony's analysis messages).
    pub(super) reasoning: String,
    pub(super) format: ReplyFormat,
    pub(super) error: Option<ReplyError>,
    pub(super) truncated: bool,
    pub(super) forced: Option<&'a str>,
    /// The reply's length, where a cut with no call in progress is placed.
    pub(super) reply_len: usize,
}

impl<'a> Reading<'a> {
    pub(super) fn new<T: OfferedTool>(
        options: &'a ReadOptions<'a, T>,
        offsets: &'a [(usize, usize)],
        reply_len: usize,
    ) -> Self {
        Self {
            tools: &options.tools,
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
    pub(super) fn content(&mut self, text: &str) {
        self.content.push_str(text);
    }

    /// Reads `text` as content with calls, each opened by `marker`: `content` keeps the text
    /// between calls, `call` reads the call opened at an offset and says where it ends (`None`
    /// when the reading stops there, on a cut or a malformed call).
    pub(super) fn each_call(
        &mut self,
        text: &str,
        marker: &str,
        content: fn(&mut Self, &str),
        mut call: impl FnMut(&str, usize, &mut Self) -> Option<usize>,
    ) {
        let mut pos = 0;
        while let Some(open) = super::find_from(text, pos, marker) {
            content(self, &text[pos..open]);
            let Some(end) = call(text, open, self) else { return };
            pos = end;
        }
        content(self, &text[pos..]);
    }

    /// Keeps a call.
    pub(super) fn call(&mut self, name: &str, arguments: Value) {
        self.calls.push(TextCall { name: name.trim().to_owned(), arguments });
    }

    /// Records the fault that ends the reading; the first one stands.
    pub(super) fn fail(&mut self, error: ReplyError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Where `offset` of the text without reasoning sits in the reply as the model wrote it.
    pub(super) fn at(&self, offset: usize) -> usize {
        let i = self.offsets.partition_point(|(content, _)| *content <= offset);
        match i.checked_sub(1).and_then(|i| self.offsets.get(i)) {
            Some((content, original)) => original + (offset - content),
            None => offset,
        }
    }

    /// The schema of a parameter of an offered tool, when there is one.
    pub(super) fn parameter_schema(&self, tool: &str, parameter: &str) -> Option<&'a Value> {
        self.tools.parameters_of(tool.trim())?.get("properties")?.get(parameter)
    }

    /// A string value of an XML-style format, typed by the tool's schema.
    pub(super) fn typed(&self, tool: &str, parameter: &str, raw: &str) -> Value {
        schema::typed(raw, self.parameter_schema(tool, parameter))
    }

    /// A malformed call at `offset` (of the text without reasoning).
    pub(super) fn malformed(&mut self, offset: usize, problem: &str) {
        let (format, at) = (self.format, self.at(offset));
        self.fail(ReplyError::new(
            ReplyErrorCode::MalformedCall,
            format!(
                "the reply's {format} tool call is malformed at byte {at}: {problem}; write the call exactly in the {format} format, or answer with one tool call as JSON"
            ),
            json!({ "format": format, "offset": at, "problem": problem }),
        ));
    }

    /// Arguments that are not valid JSON, in a call opened at `offset`.
    pub(super) fn bad_json(&mut self, offset: usize, tool: Option<&str>, error: &serde_json::Error) {
        let (format, at) = (self.format, self.at(offset));
        let tool_part = tool.map(|t| format!(" to {:?}", t.trim())).unwrap_or_default();
        self.fail(ReplyError::new(
            ReplyErrorCode::InvalidJson,
            format!(
                "the arguments of the {format} call{tool_part} at byte {at} are not valid JSON: {error}; send the arguments as one JSON object"
            ),
            json!({ "format": format, "offset": at, "tool": tool.map(str::trim), "error": error.to_string() }),
        ));
    }

    /// A call opened at `offset` that the reply never closed.
    pub(super) fn cut(&mut self, offset: usize, tool: Option<&str>) {
        let error = cut_error(self.format, self.at(offset), tool.map(str::trim), self.truncated);
        self.fail(error);
    }

    /// Records a hand parser's fault in a call opened at `opened`.
    pub(super) fn fault(&mut self, opened: usize, tool: Option<&str>, fault: super::Fault) {
        match fault {
            super::Fault::Cut => self.cut(opened, tool),
            super::Fault::Bad(at, problem) => self.malformed(at, &problem),
        }
    }

    /// Reads one JSON value starting at `offset` of `text`: the value and where it ends.
    /// A value cut by the end of the text is a cut call; other faults are `invalid_json`.
    pub(super) fn json_at(
        &mut self,
        text: &str,
        offset: usize,
        opened: usize,
        tool: Option<&str>,
    ) -> Option<(Value, usize)> {
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
    pub(super) fn object_arguments(&mut self, offset: usize, tool: &str, value: Value) -> Option<Value> {
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
                let kind = crate::arguments::json_type(&other);
                self.malformed(offset, &format!("the arguments of {:?} are {kind}, not a JSON object", tool.trim()));
                None
            }
        }
    }

    pub(super) fn finish<T>(mut self, split_reasoning: String, options: &ReadOptions<'_, T>) -> ReadReply {
        let mut reasoning = split_reasoning;
        if !self.reasoning.is_empty() {
            if !reasoning.is_empty() {
                reasoning.push('\n');
            }
            reasoning.push_str(&self.reasoning);
        }
        let content = without_end_of_turn(&self.content).to_owned();
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

/// The end-of-turn tokens chat templates write after a reply (DeepSeek, Llama 3 and 4, Qwen and
/// Kimi, Mistral, Gemma 3 and 4, GLM, Kimi K3): a serving engine stops on them, so they end the
/// reply and are never its content.
const END_OF_TURN: [&str; 14] = [
    "<｜end▁of▁sentence｜>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|eot|>",
    "<|eom|>",
    "<|im_end|>",
    "<|endoftext|>",
    "</s>",
    "<turn|>",
    "<end_of_turn>",
    "<|user|>",
    "<|observation|>",
    "<|end_of_msg|>",
];

/// `content` trimmed, without the end-of-turn tokens that close it, and empty when all that is
/// left is the code fence a call was written in (```` ```xml ```` … ```` ``` ````).
fn without_end_of_turn(content: &str) -> &str {
    let mut rest = content.trim();
    while let Some(token) = END_OF_TURN.iter().find(|t| rest.ends_with(**t)) {
        rest = rest[..rest.len() - token.len()].trim_end();
    }
    let inside = rest.strip_prefix("```").and_then(|r| r.strip_suffix("```"));
    if inside.is_some_and(|i| i.trim().chars().all(|c| c.is_ascii_alphanumeric())) {
        return "";
    }
    rest
}

/// The error of a reply cut short: at the token limit, or inside a call never closed.
pub(super) fn cut_error(format: ReplyFormat, offset: usize, tool: Option<&str>, token_limit: bool) -> ReplyError {
    let why = if token_limit {
        "your reply was cut at the token limit".to_owned()
    } else {
        format!("your reply ended inside a {format} tool call opened at byte {offset} and never closed")
    };
    ReplyError::new(
        ReplyErrorCode::ReplyTruncated,
        format!("{why}; answer with one shorter call"),
        json!({ "format": format, "offset": offset, "tool": tool, "token_limit": token_limit }),
    )
}

/// The error of a reply with no call in it.
fn no_call(format: ReplyFormat, content: &str) -> ReplyError {
    let hint = "answer with one tool call as JSON: {\"tool\": NAME, \"arguments\": {...}}";
    if format == ReplyFormat::Json || format == ReplyFormat::Auto {
        return ReplyError::new(
            ReplyErrorCode::NoJson,
            format!("the reply holds no JSON object; {hint}"),
            json!({ "reply_bytes": content.len() }),
        );
    }
    ReplyError::new(
        ReplyErrorCode::NoJson,
        format!("the reply holds no {format} tool call; {hint}"),
        json!({ "format": format, "reply_bytes": content.len() }),
    )
}
