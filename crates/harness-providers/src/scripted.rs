//! The scripted provider: one router reply per line of a JSON Lines file, in order.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use std::fmt;

use async_trait::async_trait;
use harness_core::{
    Arguments, ContextWindow, ModelProvider, ModelReply, ProposedCall, ProviderError, RouterRequest, ToolDefinition,
    estimate_tokens,
};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::http_provider::cut_at_limit;

/// Why a script cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file cannot be read.
    #[error("cannot read script {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// A line is not a reply.
    #[error(
        "script {source_name}, line {line}: {problem}; a line is {{\"tool\": NAME, \"arguments\": {{...}}}} or {{\"content\": TEXT}}, either with an optional \"finish_reason\" (\"length\" marks a reply cut at the token limit)"
    )]
    Line {
        /// The file (or name) of the script.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
}

/// Replays router replies in order; running out is a `provider_error`.
#[derive(Debug)]
pub struct ScriptedProvider {
    source_name: String,
    /// Each reply is handed out once, moved rather than copied (a copy per step was a quarter
    /// of a long scripted run's heap).
    replies: Mutex<Vec<Option<ModelReply>>>,
    len: usize,
    next: AtomicUsize,
    /// The context it declares, in tokens, and the tokens each reply reserves: a run keeps to it
    /// as to a server's, so that compaction can be tried without one.
    context: Option<(u64, u64)>,
}

/// The fields of one script line, read straight from its text: the line's own object is
/// never built (a map and a key string each, a fifth of a long scripted run's parsing), only
/// the values of the keys a reply uses. The arguments are borrowed as the line's text: an
/// object stays text until its step (see [`Arguments`]).
#[derive(Default)]
struct LineFields<'a> {
    /// The line is a JSON object.
    object: bool,
    tool: Option<Value>,
    content: Option<Value>,
    arguments: Option<&'a RawValue>,
    id: Option<Value>,
    finish_reason: Option<Value>,
    /// The first other key in sorted order, as a map's first remaining key would be.
    unexpected: Option<String>,
}

/// A key of a script line.
enum Key {
    Tool,
    Content,
    Arguments,
    Id,
    FinishReason,
    Other(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "tool" => Key::Tool,
                    "content" => Key::Content,
                    "arguments" => Key::Arguments,
                    "id" => Key::Id,
                    "finish_reason" => Key::FinishReason,
                    other => Key::Other(other.to_owned()),
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for LineFields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LineVisitor)
    }
}

/// Reads an object's keys into [`LineFields`]; any other JSON value is read and marked as not
/// an object, so that it is refused with the line's own message rather than serde's.
struct LineVisitor;

impl<'de> Visitor<'de> for LineVisitor {
    type Value = LineFields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LineFields<'de>, A::Error> {
        let mut fields = LineFields { object: true, ..LineFields::default() };
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key {
                Key::Tool => &mut fields.tool,
                Key::Content => &mut fields.content,
                Key::Arguments => {
                    fields.arguments = Some(map.next_value()?);
                    continue;
                }
                Key::Id => &mut fields.id,
                Key::FinishReason => &mut fields.finish_reason,
                Key::Other(name) => {
                    map.next_value::<IgnoredAny>()?;
                    if fields.unexpected.as_ref().is_none_or(|first| name < *first) {
                        fields.unexpected = Some(name);
                    }
                    continue;
                }
            };
            // A key given twice keeps its last value, as a parsed object does.
            *slot = Some(map.next_value()?);
        }
        Ok(fields)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LineFields<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LineFields::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<LineFields<'de>, E> {
        Ok(LineFields::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<LineFields<'de>, E> {
        Ok(LineFields::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<LineFields<'de>, E> {
        Ok(LineFields::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<LineFields<'de>, E> {
        Ok(LineFields::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<LineFields<'de>, E> {
        Ok(LineFields::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<LineFields<'de>, E> {
        Ok(LineFields::default())
    }
}

fn reply_from_line(line: LineFields<'_>) -> Result<ModelReply, String> {
    if !line.object {
        return Err("not a JSON object".to_owned());
    }
    // Why the model stopped, as an API would say it: "length" is a reply cut at the token limit.
    let finish_reason = match line.finish_reason {
        None => None,
        Some(Value::String(reason)) => Some(reason),
        Some(_) => return Err("\"finish_reason\" must be a string, such as \"stop\" or \"length\"".to_owned()),
    };
    let mut reply = if let Some(content) = line.content {
        let Value::String(text) = content else {
            return Err("\"content\" must be a string".to_owned());
        };
        // Beside "content", a reply's call keys are as unexpected as any other.
        let given = [("arguments", line.arguments.is_some()), ("id", line.id.is_some()), ("tool", line.tool.is_some())];
        let calls = given.into_iter().filter(|(_, given)| *given).map(|(k, _)| k);
        if let Some(extra) = line.unexpected.as_deref().into_iter().chain(calls).min() {
            return Err(format!("unexpected key {extra:?} beside \"content\""));
        }
        ModelReply { text: Some(text), ..Default::default() }
    } else {
        let Some(Value::String(name)) = line.tool else {
            return Err("needs a \"tool\" string or a \"content\" string".to_owned());
        };
        let arguments = match line.arguments {
            None => Ok(Arguments::Value(Value::Null)),
            // An object is kept as the line wrote it; any other value is parsed, as it was given.
            Some(text) if text.get().starts_with('{') => Arguments::from_json(text),
            Some(text) => serde_json::from_str(text.get()).map(Arguments::Value),
        }
        .map_err(|e| format!("\"arguments\" cannot be read: {e}"))?;
        let id = match line.id {
            None => None,
            Some(Value::String(id)) => Some(id),
            Some(_) => return Err("\"id\" must be a string".to_owned()),
        };
        if let Some(extra) = line.unexpected {
            return Err(format!("unexpected key {extra:?}"));
        }
        ModelReply { calls: vec![ProposedCall { id, name, arguments }], ..Default::default() }
    };
    reply.truncated = finish_reason.as_deref().is_some_and(cut_at_limit);
    reply.finish_reason = finish_reason;
    Ok(reply)
}

impl ScriptedProvider {
    /// Reads a script file. Blank lines are skipped; any other bad line is an error naming it.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ScriptError::Read { path: path.display().to_string(), error })?;
        Self::from_jsonl(&path.display().to_string(), &text)
    }

    /// Parses a script from text; `source_name` names it in messages.
    pub fn from_jsonl(source_name: &str, text: &str) -> Result<Self, ScriptError> {
        let mut replies = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let problem =
                |problem: String| ScriptError::Line { source_name: source_name.to_owned(), line: i + 1, problem };
            let fields: LineFields = serde_json::from_str(line).map_err(|e| problem(format!("not JSON: {e}")))?;
            replies.push(reply_from_line(fields).map_err(problem)?);
        }
        let len = replies.len();
        Ok(Self {
            source_name: source_name.to_owned(),
            replies: Mutex::new(replies.into_iter().map(Some).collect()),
            len,
            next: AtomicUsize::new(0),
            context: None,
        })
    }

    /// Declares a context of `tokens`, `reply_tokens` of which each request keeps for the reply.
    pub fn with_context(mut self, tokens: u64, reply_tokens: u64) -> Self {
        self.context = Some((tokens, reply_tokens));
        self
    }

    /// Starts at reply `n + 1`: a run resumed from its trace, which holds the first `n`, asks
    /// for the rest of the script only.
    pub fn skip(&self, n: usize) {
        self.next.store(n, Ordering::Relaxed);
    }

    /// How many replies the script holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the script holds no reply.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[async_trait]
impl ModelProvider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, _request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let taken = self.replies.lock().unwrap_or_else(PoisonError::into_inner).get_mut(i).and_then(Option::take);
        taken.ok_or_else(|| {
            ProviderError::new(format!(
                "script {} has {} {} and all were used; the run asked for reply {}. Add lines to the script or lower --max-steps",
                self.source_name,
                self.len,
                if self.len == 1 { "reply" } else { "replies" },
                i + 1
            ))
        })
    }

    /// The declared context; the system prompt counted as prompt mode's listing of the tools.
    async fn context_window(&self, tools: &[ToolDefinition]) -> Option<ContextWindow> {
        let (tokens, reply_tokens) = self.context?;
        let compact = tokens < crate::http_provider::COMPACT_BELOW;
        let prompt_tokens = estimate_tokens(crate::prompt::prompt_mode(tools, compact).len());
        let bare = estimate_tokens(crate::prompt::prompt_mode(&[], compact).len());
        let tools_tokens = prompt_tokens.saturating_sub(bare);
        Some(ContextWindow { tokens, source: "script".to_owned(), reply_tokens, prompt_tokens, tools_tokens })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::ToolChoice;

    #[test]
    fn lines_are_calls_or_text() {
        let s = ScriptedProvider::from_jsonl(
            "t",
            "{\"tool\": \"calculate\", \"arguments\": {\"expression\": \"1\"}}\n\n{\"content\": \"hello\"}\n{\"tool\": \"f\", \"arguments\": \"{}\", \"id\": \"x\"}",
        )
        .unwrap();
        assert_eq!(s.len(), 3);
        let replies = s.replies.lock().unwrap();
        assert_eq!(replies[0].as_ref().unwrap().calls[0].name, "calculate");
        assert_eq!(replies[1].as_ref().unwrap().text.as_deref(), Some("hello"));
        assert_eq!(replies[2].as_ref().unwrap().calls[0].id.as_deref(), Some("x"));
        assert_eq!(replies[2].as_ref().unwrap().calls[0].arguments, Value::String("{}".into()));
        // An object stays the line's text until its step; a string is what the line gave.
        let kept = &replies[0].as_ref().unwrap().calls[0].arguments;
        assert!(matches!(kept, Arguments::Json(text) if text.get() == "{\"expression\": \"1\"}"), "{kept:?}");
        assert_eq!(replies[2].as_ref().unwrap().calls[0].arguments.as_value(), Some(&Value::String("{}".into())));
        assert!(!replies[0].as_ref().unwrap().truncated);
    }

    #[test]
    fn a_finish_reason_of_length_marks_the_reply_truncated() {
        let s = ScriptedProvider::from_jsonl(
            "t",
            "{\"content\": \"<tool_call>{\\\"name\\\": \\\"f\", \"finish_reason\": \"length\"}\n{\"tool\": \"f\", \"arguments\": {}, \"finish_reason\": \"length\"}\n{\"tool\": \"f\", \"finish_reason\": \"stop\"}",
        )
        .unwrap();
        let replies = s.replies.lock().unwrap();
        let (cut_text, cut_call, whole) =
            (replies[0].as_ref().unwrap(), replies[1].as_ref().unwrap(), replies[2].as_ref().unwrap());
        assert!(cut_text.truncated && cut_text.text.as_deref() == Some("<tool_call>{\"name\": \"f"));
        assert!(cut_call.truncated && cut_call.calls[0].name == "f");
        assert_eq!(cut_call.finish_reason.as_deref(), Some("length"));
        assert!(!whole.truncated && whole.finish_reason.as_deref() == Some("stop"));
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, want) in [
            ("{\"tool\": 1}", "line 1"),
            ("\n[1]", "line 2: not a JSON object"),
            ("{\"content\": 5}", "must be a string"),
            ("{\"tool\": \"a\", \"argumentz\": {}}", "unexpected key \"argumentz\""),
            ("{\"content\": \"x\", \"finish_reason\": 1}", "\"finish_reason\" must be a string"),
            ("nope", "not JSON"),
            // Read key by key, the line still says what a parsed object would have said.
            ("{\"content\": \"x\", \"tool\": \"a\"}", "unexpected key \"tool\" beside \"content\""),
            (
                "{\"zz\": 1, \"content\": \"x\", \"id\": \"i\", \"arguments\": {}}",
                "unexpected key \"arguments\" beside",
            ),
            ("{\"content\": \"x\", \"b\": [1, {\"c\": 2}], \"tool\": \"t\"}", "unexpected key \"b\" beside"),
            ("{\"tool\": \"a\", \"zeta\": 1, \"beta\": {}}", "unexpected key \"beta\""),
            ("{\"tool\": \"a\", \"id\": 3}", "\"id\" must be a string"),
            ("{\"tool\": \"a\", \"tool\": 1}", "needs a \"tool\" string"),
            ("1", "not a JSON object"),
            ("\"text\"", "not a JSON object"),
            ("null", "not a JSON object"),
            ("[[1], {\"a\": []}]", "not a JSON object"),
            ("{\"tool\": \"a\"} x", "not JSON"),
        ] {
            let e = ScriptedProvider::from_jsonl("s.jsonl", text).unwrap_err().to_string();
            assert!(e.contains("s.jsonl") && e.contains(want), "{e}");
        }
    }

    #[tokio::test]
    async fn running_out_is_a_provider_error_naming_the_script() {
        let s = ScriptedProvider::from_jsonl("s.jsonl", "{\"content\": \"x\"}").unwrap();
        let choice = ToolChoice::Required;
        let req = RouterRequest { conversation: &[], tools: &[], tool_choice: &choice };
        assert!(s.complete(req).await.is_ok());
        let e = s.complete(req).await.unwrap_err();
        assert!(e.message.contains("s.jsonl has 1 reply and all were used"), "{}", e.message);
    }
}
