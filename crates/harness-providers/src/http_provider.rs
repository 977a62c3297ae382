//! The HTTP model provider: one wire format, one transport, and the router mode.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use harness_core::{Message, ModelProvider, ModelReply, ProviderError, RouterRequest, ToolChoice, ToolDefinition};
use serde_json::Value;

use crate::http::{Answer, Failure, HttpError, Notice, Transport};
use crate::prompt;

/// How the router's tool choice is forced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouterMode {
    /// Native first; prompt mode for the rest of the run once the server shows it does not
    /// take tools (a refusal naming them, or a reply that ignores them).
    #[default]
    Auto,
    /// The API's own `tools` and `tool_choice`.
    Native,
    /// The tools and the reply shape in the system prompt; the reply text is parsed.
    Prompt,
}

impl RouterMode {
    /// The mode's name, as flags and traces spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Native => "native",
            Self::Prompt => "prompt",
        }
    }
}

impl fmt::Display for RouterMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A router mode name that is not one of `auto`, `native`, `prompt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown router mode {0:?}; use auto, native or prompt")]
pub struct UnknownRouterMode(pub String);

impl FromStr for RouterMode {
    type Err = UnknownRouterMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "native" => Ok(Self::Native),
            "prompt" => Ok(Self::Prompt),
            other => Err(UnknownRouterMode(other.to_owned())),
        }
    }
}

/// Reads a `--tool-choice` value: `required`, `auto`, `none`, or a tool's name.
pub fn parse_tool_choice(value: &str) -> ToolChoice {
    match value {
        "required" => ToolChoice::Required,
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        name => ToolChoice::Tool(name.to_owned()),
    }
}

/// What a wire format encodes for one request.
pub(crate) struct Outgoing<'a> {
    pub(crate) model: &'a str,
    pub(crate) system: &'a str,
    pub(crate) conversation: &'a [Message],
    pub(crate) tools: &'a [ToolDefinition],
    pub(crate) choice: &'a ToolChoice,
    /// Whether the API's own tool calling is used (else prompt mode).
    pub(crate) native: bool,
    pub(crate) max_tokens: Option<u32>,
}

/// A model API's body shapes.
pub(crate) trait Wire: Send + Sync + fmt::Debug {
    /// The request body.
    fn body(&self, out: &Outgoing<'_>) -> Value;
    /// The reply in a success body, or what is wrong with the body.
    fn reply(&self, body: &Value) -> Result<ModelReply, String>;
}

/// A model behind an HTTP API: OpenAI-compatible chat completions or Anthropic Messages.
///
/// Built by [`HttpProvider::new`] from an [`HttpProviderConfig`](crate::HttpProviderConfig).
#[derive(Debug)]
pub struct HttpProvider {
    pub(crate) name: String,
    pub(crate) wire: Box<dyn Wire>,
    pub(crate) transport: Transport,
    pub(crate) model: String,
    pub(crate) mode: RouterMode,
    /// Set once `auto` has fallen back to prompt mode.
    pub(crate) fell_back: AtomicBool,
    pub(crate) tool_choice: Option<ToolChoice>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) key_env: Option<String>,
    pub(crate) base_url: String,
    /// Numbers ids for calls that arrived without one.
    pub(crate) next_id: AtomicU64,
}

impl HttpProvider {
    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        self.transport.url()
    }

    /// The base URL in force, after flags, configuration, environment and preset defaults.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The model asked for.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The environment variable the API key was read from, when one was looked up.
    pub fn key_env(&self) -> Option<&str> {
        self.key_env.as_deref()
    }

    /// The router mode in force now: `auto` reports `prompt` once it has fallen back.
    pub fn router_mode(&self) -> RouterMode {
        match self.mode {
            RouterMode::Auto if self.fell_back.load(Ordering::Relaxed) => RouterMode::Prompt,
            mode => mode,
        }
    }

    /// The tool choice to send: the override replaces `Required`; a forced tool stays forced.
    fn choice(&self, request: &RouterRequest<'_>) -> Result<ToolChoice, ProviderError> {
        // `finish` offered alone is the loop forcing it: the override never loosens that.
        let finish_forced = matches!(request.tools, [only] if only.name == harness_core::FINISH);
        let choice = match (request.tool_choice, &self.tool_choice) {
            (ToolChoice::Required, Some(over)) if !finish_forced => over.clone(),
            (asked, _) => asked.clone(),
        };
        if let ToolChoice::Tool(name) = &choice
            && !request.tools.iter().any(|t| &t.name == name)
        {
            let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(ProviderError::new(format!(
                "--tool-choice {name:?} names no tool offered at this step (offered: {}); use required, auto, none or one of those names",
                offered.join(", ")
            )));
        }
        Ok(choice)
    }

    async fn ask(&self, request: &RouterRequest<'_>, choice: &ToolChoice, native: bool) -> Result<Answer, Failure> {
        let system = if native { prompt::NATIVE.to_owned() } else { prompt::prompt_mode(request.tools, choice) };
        let body = self.wire.body(&Outgoing {
            model: &self.model,
            system: &system,
            conversation: request.conversation,
            tools: request.tools,
            choice,
            native,
            max_tokens: self.max_tokens,
        });
        self.transport.post(&body).await
    }

    fn fall_back(&self, reason: String) {
        if !self.fell_back.swap(true, Ordering::Relaxed) {
            self.transport.notify(Notice::PromptFallback { reason });
        }
    }

    fn failed(&self, error: &HttpError, retries: u32) -> ProviderError {
        let after = match retries {
            0 => String::new(),
            1 => " (after 1 retry)".to_owned(),
            n => format!(" (after {n} retries)"),
        };
        ProviderError { message: self.transport.redact(&format!("{error}{after}")), retries }
    }
}

/// Cuts the key out of every string in a value.
fn redact_value(transport: &Transport, value: &mut Value) {
    match value {
        Value::String(s) => *s = transport.redact(s),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_value(transport, v)),
        Value::Object(map) => map.values_mut().for_each(|v| redact_value(transport, v)),
        _ => {}
    }
}

#[async_trait]
impl ModelProvider for HttpProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        let choice = self.choice(&request)?;
        let mut native = self.router_mode() != RouterMode::Prompt;
        let mut retries = 0;
        let answer = match self.ask(&request, &choice, native).await {
            Ok(answer) => answer,
            Err(Failure { error, retries: before }) => match error.tool_refusal() {
                Some(said) if native && self.mode == RouterMode::Auto => {
                    retries = before;
                    self.fall_back(format!("{} refused the tools: {said}", self.endpoint()));
                    native = false;
                    self.ask(&request, &choice, false).await.map_err(|f| self.failed(&f.error, before + f.retries))?
                }
                _ => return Err(self.failed(&error, before)),
            },
        };
        retries += answer.retries;
        let mut reply = self.wire.reply(&answer.body).map_err(|problem| {
            self.failed(&HttpError::Shape { url: self.transport.endpoint().to_owned(), problem }, retries)
        })?;
        for call in &mut reply.calls {
            if call.id.is_none() {
                call.id = Some(format!("call_h{}", self.next_id.fetch_add(1, Ordering::Relaxed) + 1));
            }
            redact_value(&self.transport, &mut call.arguments);
        }
        reply.text = reply.text.map(|t| self.transport.redact(&t));
        reply.router_mode = Some(if native { RouterMode::Native } else { RouterMode::Prompt }.as_str().to_owned());
        reply.retries = retries;
        let forced = matches!(choice, ToolChoice::Required | ToolChoice::Tool(_));
        if native && self.mode == RouterMode::Auto && forced && reply.calls.is_empty() {
            self.fall_back(format!(
                "{} ignored the tools: its reply holds text and no tool call, though one was required",
                self.endpoint()
            ));
        }
        Ok(reply)
    }
}
