//! What the loop asks of a model provider, and what a provider answers.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

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

/// The request that started a conversation: its first message, when that is the user's.
pub fn request_of(conversation: &[Message]) -> Option<&str> {
    match conversation.first() {
        Some(Message::User { content }) => Some(content),
        _ => None,
    }
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
    pub arguments: Arguments,
}

/// A call's arguments as the reply gave them.
///
/// A long run keeps every reply in its conversation. An object kept as a parsed map costs
/// about 700 bytes a call for the life of the run (a 640-byte map node, its keys); kept as
/// the JSON text the reply held, it costs that text. A provider that reads a reply's text
/// itself can keep the arguments that way ([`Arguments::Json`]); a step parses them when it
/// reads the call.
#[derive(Debug, Clone)]
pub enum Arguments {
    /// A parsed JSON value: an object, or a string that should hold one (OpenAI's form).
    Value(Value),
    /// The JSON text of the value, as the reply wrote it, on one line.
    Json(Box<RawValue>),
}

impl Arguments {
    /// Keeps `text`, one JSON value, as it is; a value written over several lines is parsed
    /// instead, so that a trace line that copies it stays one line.
    pub fn from_json(text: &RawValue) -> Result<Self, serde_json::Error> {
        if text.get().contains(['\n', '\r']) {
            return serde_json::from_str(text.get()).map(Arguments::Value);
        }
        Ok(Arguments::Json(text.to_owned()))
    }

    /// The arguments as a JSON value: borrowed when parsed already, parsed from the kept text
    /// otherwise (text that was valid JSON when it was kept).
    pub fn to_value(&self) -> std::borrow::Cow<'_, Value> {
        match self {
            Arguments::Value(v) => std::borrow::Cow::Borrowed(v),
            Arguments::Json(raw) => std::borrow::Cow::Owned(serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
        }
    }

    /// The parsed value, when the arguments are held parsed.
    pub fn as_value(&self) -> Option<&Value> {
        match self {
            Arguments::Value(v) => Some(v),
            Arguments::Json(_) => None,
        }
    }
}

#[cfg(test)]
impl Arguments {
    /// `text` kept as [`Arguments::from_json`] keeps it, for tests.
    pub(crate) fn kept(text: &str) -> Self {
        let raw = RawValue::from_string(text.to_owned()).expect("a test gives valid JSON");
        Arguments::from_json(&raw).expect("a test gives valid JSON")
    }
}

impl Default for Arguments {
    fn default() -> Self {
        Arguments::Value(Value::Null)
    }
}

impl From<Value> for Arguments {
    fn from(value: Value) -> Self {
        Arguments::Value(value)
    }
}

/// Equal when they are the same JSON value, however each is held.
impl PartialEq for Arguments {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Arguments::Json(a), Arguments::Json(b)) if a.get() == b.get() => true,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl PartialEq<Value> for Arguments {
    fn eq(&self, other: &Value) -> bool {
        *self.to_value() == *other
    }
}

impl Serialize for Arguments {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Arguments::Value(v) => v.serialize(serializer),
            Arguments::Json(raw) => raw.serialize(serializer),
        }
    }
}

impl std::fmt::Display for Arguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arguments::Value(v) => write!(f, "{v}"),
            Arguments::Json(raw) => f.write_str(raw.get()),
        }
    }
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
    /// Some tool other than the named one; never free text. How the loop withholds `finish`
    /// until a tool has answered ([`ModelProvider::needs_a_tool_first`]).
    AnyBut(String),
    /// One of the named tools, never `finish` among them; never free text. How the loop
    /// offers a small model the tools its request names (its shortlist) until one answered.
    OneOf(Vec<String>),
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
    /// The server could not be reached, did not answer in time, cut its answer short, or
    /// failed (a 5xx): what a server that is down looks like, as opposed to a request it refused.
    pub outage: bool,
}

impl ProviderError {
    /// A provider error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), retries: 0, outage: false }
    }
}

/// What a provider knows of its model's context before the first request: the loop keeps
/// every request within it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextWindow {
    /// Tokens the model's context holds, prompt and reply together.
    pub tokens: u64,
    /// Where that number came from: `server` (the server said), `config` (`context_tokens`),
    /// `default` (neither), `script` (a scripted provider's declaration).
    pub source: String,
    /// Tokens every request keeps free for the reply (its `max_tokens`).
    pub reply_tokens: u64,
    /// Tokens of the system prompt, the tool listing included, as estimated before any request.
    pub prompt_tokens: u64,
    /// Of `prompt_tokens`, those the tool listing takes.
    pub tools_tokens: u64,
}

/// A model provider: asked once per step for a reply.
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// The provider's name, for traces and messages.
    fn name(&self) -> &str;
    /// Asks the model for its next reply.
    async fn complete(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError>;
    /// The model's context, asked once before the first request (a server may be asked for
    /// it); `None` when the provider has no limit worth keeping to.
    async fn context_window(&self, _tools: &[ToolDefinition]) -> Option<ContextWindow> {
        None
    }
    /// Whether the request after a cut reply asks the server for a repetition penalty (a
    /// provider sees the cut reply last in the conversation and decides alone).
    fn penalizes_repeats(&self) -> bool {
        false
    }
    /// Whether the model behind this provider is offered `finish` only once a tool has
    /// answered (a small model ends runs with a guess copied from the request when offered
    /// `finish` at once); the operator can say otherwise ([`EarlyFinish`]). Asked before each
    /// step.
    ///
    /// [`EarlyFinish`]: crate::EarlyFinish
    fn needs_a_tool_first(&self) -> bool {
        false
    }
}

/// A provider that wraps another and changes only how a reply is asked for (pacing, a circuit
/// breaker): everything else is answered by [`inner`](Self::inner).
///
/// Every such type is a [`ModelProvider`] through one impl that forwards each other method of
/// the trait to the inner provider, so a method added to the trait is forwarded once here,
/// never forgotten in one decorator where it would silently answer the trait's default.
#[async_trait]
pub trait ProviderDecorator: Send + Sync {
    /// The provider wrapped, which answers every method but `complete`.
    fn inner(&self) -> &dyn ModelProvider;
    /// [`ModelProvider::complete`] in the decorator's own way, usually through the inner
    /// provider (named apart so that `complete` on a decorator is never ambiguous).
    async fn complete_decorated(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError>;
}

// The one place a decorator forwards; the test `a_decorator_forwards_every_method_of_the_trait`
// reads this impl and the trait above and fails when a method of the trait is missing here.
#[async_trait]
impl<D: ProviderDecorator> ModelProvider for D {
    fn name(&self) -> &str {
        self.inner().name()
    }

    async fn complete(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        self.complete_decorated(request).await
    }

    async fn context_window(&self, tools: &[ToolDefinition]) -> Option<ContextWindow> {
        self.inner().context_window(tools).await
    }

    fn penalizes_repeats(&self) -> bool {
        self.inner().penalizes_repeats()
    }

    fn needs_a_tool_first(&self) -> bool {
        self.inner().needs_a_tool_first()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_kept_as_text_are_the_value_they_hold() {
        let kept = Arguments::kept("{\"b\": [1, 2], \"a\": \"x\"}");
        assert!(matches!(kept, Arguments::Json(_)), "one line of JSON is kept as text");
        assert_eq!(kept, json!({"a": "x", "b": [1, 2]}));
        assert_eq!(kept, Arguments::from(json!({"a": "x", "b": [1, 2]})));
        assert_eq!(kept.to_string(), "{\"b\": [1, 2], \"a\": \"x\"}");
        assert_eq!(serde_json::to_string(&kept).unwrap(), "{\"b\": [1, 2], \"a\": \"x\"}");
        assert_eq!(kept.as_value(), None);
        assert_ne!(kept, json!({"a": "y", "b": [1, 2]}));
    }

    #[test]
    fn text_over_several_lines_is_parsed_so_that_a_trace_line_stays_one_line() {
        let spread = Arguments::kept("{\n  \"a\": 1\r\n}");
        assert_eq!(spread.as_value(), Some(&json!({"a": 1})));
        assert!(!serde_json::to_string(&spread).unwrap().contains('\n'));
    }

    /// The methods declared in the block that opens with `opening`, sorted.
    fn methods(source: &str, opening: &str) -> Vec<String> {
        let body = source.split_once(opening).map_or("", |(_, rest)| rest);
        let body = body.split_once("\n}\n").map_or("", |(inside, _)| inside);
        let mut names: Vec<String> = body
            .lines()
            .filter_map(|line| {
                line.trim_start().strip_prefix("async ").unwrap_or(line.trim_start()).strip_prefix("fn ")
            })
            .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_decorator_forwards_every_method_of_the_trait() {
        let source = include_str!("provider.rs");
        let declared = methods(source, "pub trait ModelProvider: Send + Sync {");
        let forwarded = methods(source, "impl<D: ProviderDecorator> ModelProvider for D {");
        assert!(declared.len() >= 5, "the trait's methods are found: {declared:?}");
        assert_eq!(
            declared, forwarded,
            "every method of ModelProvider is forwarded by the ProviderDecorator impl in provider.rs; add the missing one there"
        );
    }

    /// Answers every method with something no default gives.
    struct Distinct;

    #[async_trait]
    impl ModelProvider for Distinct {
        fn name(&self) -> &str {
            "distinct"
        }

        async fn complete(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
            Err(ProviderError::new("inner"))
        }

        async fn context_window(&self, tools: &[ToolDefinition]) -> Option<ContextWindow> {
            let tools = tools.len() as u64;
            Some(ContextWindow {
                tokens: 7,
                source: "script".into(),
                reply_tokens: 3,
                prompt_tokens: tools,
                tools_tokens: 1,
            })
        }

        fn penalizes_repeats(&self) -> bool {
            true
        }

        fn needs_a_tool_first(&self) -> bool {
            true
        }
    }

    /// A decorator that overrides nothing but `complete`.
    struct Wrapped<'a>(&'a dyn ModelProvider);

    #[async_trait]
    impl ProviderDecorator for Wrapped<'_> {
        fn inner(&self) -> &dyn ModelProvider {
            self.0
        }

        async fn complete_decorated(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
            Err(ProviderError::new("decorated"))
        }
    }

    #[tokio::test]
    async fn a_decorator_answers_every_method_as_its_inner_provider_does() {
        let inner = Distinct;
        let wrapped = Wrapped(&inner);
        let provider: &dyn ModelProvider = &wrapped;
        assert_eq!(provider.name(), inner.name());
        assert_eq!(provider.context_window(&[]).await, inner.context_window(&[]).await);
        assert_eq!(provider.penalizes_repeats(), inner.penalizes_repeats());
        assert_eq!(provider.needs_a_tool_first(), inner.needs_a_tool_first());
        // The one method the decorator overrides is its own.
        let request = RouterRequest { conversation: &[], tools: &[], tool_choice: &ToolChoice::Required };
        let asked = provider.complete(request).await.map(|_| ()).map_err(|e| e.message);
        assert_eq!(asked, Err("decorated".to_owned()));
    }
}
