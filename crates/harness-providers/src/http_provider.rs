//! The HTTP model provider: one wire format, one transport, and the router mode.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use async_trait::async_trait;
use harness_core::{
    Arguments, ContextWindow, Message, ModelProvider, ModelReply, ProviderError, RouterRequest, ToolChoice,
    ToolDefinition, Usage, estimate_tokens,
};
use reqwest::Url;
use serde_json::Value;

use crate::constrained;
use crate::conversation::{self, Turn};
use crate::preset::Preset;
use crate::prompt;
use crate::transport::{Answer, Failure, HttpError, Notice, Transport};

/// The most tokens a small model's reply may take under the grammar. Of 4,604 steps of
/// SmolLM2-135M and Gemma 3 270M that ran, 4,603 took 64 tokens or fewer; the longer replies
/// were an expression written on to the limit after a failed call (llama.cpp reads a string's
/// `pattern`, which the grammar sets after a failure, and not its `maxLength`), a minute a
/// step on one thread.
const SMALL_MODEL_REPLY: u32 = 256;

/// Contexts smaller than this, in tokens, get the compact tool listing in the text modes.
pub(crate) const COMPACT_BELOW: u64 = 8192;

/// How the router's tool choice is forced: a ladder, from the API's own tool calling down to
/// plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouterMode {
    /// Native first; one step down the ladder for the rest of the run each time the server
    /// shows that a step does not work: tools refused or ignored (a forced request answered
    /// with no call) lead to constrained mode, a refused `response_format` to prompt mode.
    #[default]
    Auto,
    /// The API's own `tools` and `tool_choice`.
    Native,
    /// No `tools`: a `response_format` JSON schema that only a call of an offered tool
    /// matches, which llama.cpp, vLLM, Ollama and OpenAI decode to (grammar-constrained
    /// decoding); the tools are described in the system prompt, as in prompt mode.
    Constrained,
    /// The tools and the reply shape in the system prompt; the reply text is parsed.
    Prompt,
}

impl RouterMode {
    /// The mode's name, as flags and traces spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Native => "native",
            Self::Constrained => "constrained",
            Self::Prompt => "prompt",
        }
    }

    /// The ladder's steps, from the top; `auto` starts at the first.
    const LADDER: [RouterMode; 3] = [Self::Native, Self::Constrained, Self::Prompt];
}

impl fmt::Display for RouterMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A router mode name that is not one of `auto`, `native`, `constrained`, `prompt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown router mode {0:?}; use auto, native, constrained or prompt")]
pub struct UnknownRouterMode(pub String);

impl FromStr for RouterMode {
    type Err = UnknownRouterMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "native" => Ok(Self::Native),
            "constrained" => Ok(Self::Constrained),
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

/// The most tokens a reply may take when nothing says otherwise: room for one call with large
/// arguments, and a bound on a model that rambles on.
pub const DEFAULT_MAX_REPLY_TOKENS: u32 = 1024;

/// What a wire format encodes for one request.
pub(crate) struct Outgoing<'a> {
    pub(crate) model: &'a str,
    pub(crate) system: &'a str,
    pub(crate) conversation: &'a [Message],
    pub(crate) tools: &'a [ToolDefinition],
    pub(crate) choice: &'a ToolChoice,
    /// How the choice is forced: `Native`, `Constrained` or `Prompt`, never `Auto`.
    pub(crate) mode: RouterMode,
    /// The most tokens the reply may take.
    pub(crate) max_tokens: u32,
    /// The reply before this request was cut at the token limit: ask for a repetition penalty.
    pub(crate) after_cut: bool,
    /// What a small model's `finish` may answer in constrained mode: the values its tools
    /// answered ([`constrained::grounded_answers`]); `None` for a capable model.
    pub(crate) grounded: Option<Vec<Value>>,
    /// The text modes open with worked exchanges from the tools' examples
    /// ([`conversation::worked_exchanges`]): a small model's context.
    pub(crate) worked: bool,
    /// The request's words, which an argument the tool's worked examples quote may only be, and
    /// the calls that failed ([`constrained::quoted_arguments`]); empty for a capable model.
    pub(crate) quoting: constrained::Quoting,
}

impl Outgoing<'_> {
    /// The conversation as the mode sends it. In prompt mode a forced tool is said in a note
    /// at the very end, not in the system prompt, so that the prompt a server has cached stays
    /// a prefix of this one; constrained mode needs no note, its schema allows that tool alone.
    pub(crate) fn turns(&self) -> Vec<Turn<'_>> {
        if self.mode == RouterMode::Native {
            return conversation::native(self.conversation);
        }
        let mut turns = match self.worked {
            true => conversation::worked_exchanges(self.tools, conversation::request_of(self.conversation)),
            false => Vec::new(),
        };
        turns.extend(conversation::text_only(self.conversation));
        // A named choice, or "required" with one tool offered (how the loop forces `finish`).
        let forced = match (self.choice, self.tools) {
            (ToolChoice::Tool(name), _) => Some(name.as_str()),
            (ToolChoice::Required, [tool]) => Some(tool.name.as_str()),
            _ => None,
        };
        if let (RouterMode::Prompt, Some(name)) = (self.mode, forced) {
            conversation::push_note(&mut turns, prompt::forced_note(name));
        } else if let (RouterMode::Prompt, ToolChoice::OneOf(names)) = (self.mode, self.choice) {
            conversation::push_note(&mut turns, prompt::shortlist_note(names));
        }
        turns
    }
}

/// The system prompt of a mode: fixed in native mode, the tools' descriptions in the text
/// modes (`compact`: one line a tool).
pub(crate) fn system_prompt(mode: RouterMode, tools: &[ToolDefinition], compact: bool) -> String {
    match mode {
        RouterMode::Native => prompt::NATIVE.to_owned(),
        _ => prompt::prompt_mode(tools, compact),
    }
}

/// Whether the conversation's last reply was cut at the token limit (the loop asks again
/// right after it).
fn last_reply_cut(conversation: &[Message]) -> bool {
    let last = conversation.iter().rev().find_map(|m| match m {
        Message::Assistant { reply } => Some(reply),
        _ => None,
    });
    last.is_some_and(|r| r.truncated)
}

/// The tools to offer natively and the choice to send. A single forced tool goes as
/// `required` with that tool alone offered, which every server honours (llama.cpp takes the
/// named form for `auto`); an API that honours the named form (`named_choice`) keeps the whole
/// list, and with it the prefix its cache holds.
pub(crate) fn forcing<'a>(
    tools: &'a [ToolDefinition],
    choice: &ToolChoice,
    named_choice: bool,
) -> (Vec<&'a ToolDefinition>, ToolChoice) {
    match choice {
        ToolChoice::Tool(name) if !named_choice => {
            (tools.iter().filter(|t| &t.name == name).collect(), ToolChoice::Required)
        }
        // No API names a tool it withholds: the others are offered, one of them required.
        ToolChoice::AnyBut(name) => (tools.iter().filter(|t| &t.name != name).collect(), ToolChoice::Required),
        ToolChoice::OneOf(names) => (tools.iter().filter(|t| names.contains(&t.name)).collect(), ToolChoice::Required),
        other => (tools.iter().collect(), other.clone()),
    }
}

/// A request body: JSON, then members written exactly as given. A server that turns a schema
/// into a grammar writes an object's properties in the schema's order, which a JSON value
/// (its keys sorted) would lose.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    /// The body, an object.
    pub(crate) json: Value,
    /// Members appended after `json`'s own, as key and JSON text.
    pub(crate) verbatim: Vec<(&'static str, String)>,
}

impl Body {
    /// The JSON text sent.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut text = self.json.to_string();
        for (key, value) in &self.verbatim {
            // `json` is an object: its text ends with the closing brace.
            text.pop();
            if text.len() > 1 {
                text.push(',');
            }
            text.push_str(&Value::from(*key).to_string());
            text.push(':');
            text.push_str(value);
            text.push('}');
        }
        text.into_bytes()
    }
}

/// A model API's body shapes.
pub(crate) trait Wire: Send + Sync + fmt::Debug {
    /// The request body.
    fn body(&self, out: &Outgoing<'_>) -> Body;
    /// The reply in a success body, or what is wrong with the body.
    fn reply(&self, body: &Value) -> Result<ModelReply, String>;
    /// Whether the API takes constrained mode's `response_format` schema.
    fn constrains(&self) -> bool;
    /// The body member and value that ask for a repetition penalty, where the API has one.
    fn repeat_penalty(&self) -> Option<(&'static str, f64)> {
        None
    }
}

/// Whether a finish reason says the reply was cut at the token limit: OpenAI-compatible
/// `length`, Anthropic `max_tokens` (and its context-window variant).
pub(crate) fn cut_at_limit(finish_reason: &str) -> bool {
    matches!(finish_reason, "length" | "max_tokens" | "model_context_window_exceeded")
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
    /// Where `auto` stands on the ladder: an index into `RouterMode::LADDER`; it only climbs down.
    pub(crate) rung: AtomicUsize,
    pub(crate) tool_choice: Option<ToolChoice>,
    pub(crate) max_tokens: u32,
    pub(crate) key_env: Option<String>,
    pub(crate) base_url: String,
    /// Numbers ids for calls that arrived without one.
    pub(crate) next_id: AtomicU64,
    /// The API and its defaults.
    pub(crate) preset: Preset,
    /// The context size the configuration gives, for servers that do not say theirs.
    pub(crate) context_tokens: Option<u64>,
    /// The context, once known: asked of the server once, before the first request.
    pub(crate) window: OnceLock<ContextWindow>,
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

    /// The most tokens a reply may take, as every request says.
    pub fn max_reply_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// The router mode in force now: `auto` reports the step of the ladder it stands on once
    /// it has stepped down.
    pub fn router_mode(&self) -> RouterMode {
        match self.mode {
            RouterMode::Auto => match self.rung.load(Ordering::Relaxed) {
                0 => RouterMode::Auto,
                i => RouterMode::LADDER[i.min(RouterMode::LADDER.len() - 1)],
            },
            mode => mode,
        }
    }

    /// The mode the next request is sent in.
    fn sending_mode(&self) -> RouterMode {
        match self.router_mode() {
            RouterMode::Auto => RouterMode::Native,
            mode => mode,
        }
    }

    /// The tool choice to send: the override replaces `Required`; a forced tool stays forced.
    fn choice(&self, request: &RouterRequest<'_>) -> Result<ToolChoice, ProviderError> {
        // `finish` offered alone is the loop forcing it: the override never loosens that.
        let finish_forced = matches!(request.tools, [only] if only.name == harness_core::FINISH);
        let choice = match (request.tool_choice, &self.tool_choice) {
            (ToolChoice::Required | ToolChoice::AnyBut(_) | ToolChoice::OneOf(_), Some(over)) if !finish_forced => {
                over.clone()
            }
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

    async fn ask(
        &self,
        request: &RouterRequest<'_>,
        choice: &ToolChoice,
        mode: RouterMode,
    ) -> Result<Answer<ModelReply>, Failure> {
        let system = system_prompt(mode, request.tools, self.compact());
        // A small model under the grammar: a short reply, `finish` grounded in the results,
        // quoted arguments narrowed to the request's words. Only then is the conversation scanned.
        let small = mode == RouterMode::Constrained && self.needs_a_tool_first();
        let body = self.wire.body(&Outgoing {
            model: &self.model,
            system: &system,
            conversation: request.conversation,
            tools: request.tools,
            choice,
            mode,
            max_tokens: if small { self.max_tokens.min(SMALL_MODEL_REPLY) } else { self.max_tokens },
            after_cut: last_reply_cut(request.conversation),
            grounded: small.then(|| constrained::grounded_answers(request.conversation)),
            worked: self.compact(),
            quoting: match small {
                true => constrained::Quoting {
                    spans: harness_core::quoting::request_spans(conversation::request_of(request.conversation)),
                    failed: conversation::failed_calls(request.conversation),
                },
                false => constrained::Quoting::default(),
            },
        });
        self.transport.post(mode.as_str(), &body.bytes(), |value| self.wire.reply(value)).await
    }

    /// Whether the tools are listed compactly: the context is known and small.
    fn compact(&self) -> bool {
        self.window.get().is_some_and(|w| w.tokens < COMPACT_BELOW)
    }

    /// The context the server says it has, where it says: llama.cpp's `/props`, Ollama's
    /// running models or the model's parameters, OpenRouter's model list.
    async fn server_context(&self) -> Option<u64> {
        match self.preset {
            Preset::LlamaCpp => self.llama_context().await,
            Preset::Ollama => self.ollama_context().await,
            Preset::OpenRouter => self.openrouter_context().await,
            Preset::OpenAi | Preset::Vllm | Preset::Anthropic => None,
        }
    }

    /// llama.cpp's `/props`, which also says whether the model's chat template knows tools:
    /// when it does not, `auto` starts in constrained mode rather than spend a request to find
    /// out.
    async fn llama_context(&self) -> Option<u64> {
        let url = self.llama_endpoint("props")?;
        let origin = url.origin().ascii_serialization();
        let props = self.transport.get_json(url).await?;
        if props.pointer("/chat_template_caps/supports_tools") == Some(&Value::Bool(false)) {
            let reason = format!("{origin}/props says the model's chat template does not know tools");
            self.step_down(RouterMode::Native, reason);
        }
        props.pointer("/default_generation_settings/n_ctx").and_then(Value::as_u64).filter(|&n| n > 0)
    }

    /// Ollama's context for the model: `/api/ps` says the context of a model it has loaded
    /// (what its requests really get); else `/api/show` says the `num_ctx` of the model's own
    /// parameters. A model with neither runs at the server's default, which Ollama does not
    /// say: the configuration's or the preset's default applies.
    async fn ollama_context(&self) -> Option<u64> {
        let running = self.transport.get_json(self.own_endpoint("api/ps")?).await;
        if let Some(n) = running.as_ref().and_then(|ps| ollama_running_context(ps, &self.model)) {
            return Some(n);
        }
        let show = self.own_endpoint("api/show")?;
        let shown = self.transport.post_json(show, &serde_json::json!({ "model": self.model })).await?;
        ollama_num_ctx(&shown)
    }

    /// OpenRouter's model list (`GET /models`): the model's `top_provider.context_length`,
    /// the host it is routed to first, else its own `context_length`.
    async fn openrouter_context(&self) -> Option<u64> {
        let url = Url::parse(&format!("{}/models", self.base_url.trim_end_matches('/'))).ok()?;
        let list = self.transport.get_json(url).await?;
        let model =
            list.get("data")?.as_array()?.iter().find(|m| m.get("id") == Some(&Value::from(self.model.as_str())))?;
        let length = model.pointer("/top_provider/context_length").or_else(|| model.get("context_length"));
        length.and_then(Value::as_u64).filter(|&n| n > 0)
    }

    /// One of llama.cpp's own endpoints (`/props`, `/tokenize`), beside its `/v1`.
    fn llama_endpoint(&self, name: &str) -> Option<Url> {
        if self.preset != Preset::LlamaCpp {
            return None;
        }
        self.own_endpoint(name)
    }

    /// One of the server's own endpoints beside its OpenAI-compatible `/v1` (llama.cpp's
    /// `/props`, Ollama's `/api/ps`).
    fn own_endpoint(&self, name: &str) -> Option<Url> {
        let origin = self.base_url.strip_suffix("/v1").unwrap_or(&self.base_url);
        Url::parse(&format!("{origin}/{name}")).ok()
    }

    /// Tokens of `text` as the server counts them (llama.cpp's `/tokenize`), else estimated.
    async fn count_tokens(&self, text: &str) -> u64 {
        let counted = match self.llama_endpoint("tokenize") {
            Some(url) => self.transport.post_json(url, &serde_json::json!({ "content": text })).await,
            None => None,
        };
        let tokens = counted.as_ref().and_then(|c| c.get("tokens")).and_then(Value::as_array).map(Vec::len);
        tokens.map_or_else(|| estimate_tokens(text.len()), |n| n as u64)
    }

    /// The context from the server, else the configuration, else the preset's default.
    async fn learn_context(&self, tools: &[ToolDefinition]) -> ContextWindow {
        let (tokens, source) = match (self.server_context().await, self.context_tokens) {
            (Some(n), _) => (n, "server"),
            (None, Some(n)) => (n, "config"),
            (None, None) => (self.preset.default_context_tokens(), "default"),
        };
        let mode = self.sending_mode();
        let compact = tokens < COMPACT_BELOW;
        let system = self.count_tokens(&system_prompt(mode, tools, compact)).await;
        let (prompt_tokens, tools_tokens) = match mode {
            RouterMode::Native => {
                let listed = self.count_tokens(&serde_json::to_string(tools).unwrap_or_default()).await;
                (system + listed, listed)
            }
            _ => {
                // The worked exchanges open every request of a small context: part of the prompt.
                let worked = match compact {
                    true => self.count_tokens(&conversation::worked_text(tools)).await,
                    false => 0,
                };
                let bare = self.count_tokens(&system_prompt(mode, &[], compact)).await;
                (system + worked, system.saturating_sub(bare) + worked)
            }
        };
        ContextWindow {
            tokens,
            source: source.to_owned(),
            reply_tokens: u64::from(self.max_tokens),
            prompt_tokens,
            tools_tokens,
        }
    }

    /// The step below `mode` on this API's ladder.
    fn below(&self, mode: RouterMode) -> Option<RouterMode> {
        let at = RouterMode::LADDER.iter().position(|&m| m == mode)?;
        RouterMode::LADDER[at + 1..].iter().copied().find(|&m| m != RouterMode::Constrained || self.wire.constrains())
    }

    /// In `auto` mode, steps down from `mode` for the rest of the run, saying so once; the mode
    /// to ask in now, or `None` when there is nothing below or the mode is fixed.
    fn step_down(&self, mode: RouterMode, reason: String) -> Option<RouterMode> {
        if self.mode != RouterMode::Auto {
            return None;
        }
        let next = self.below(mode)?;
        let index = RouterMode::LADDER.iter().position(|&m| m == next)?;
        // Runs of a batch share the provider: the first to see the evidence says so.
        if self.rung.fetch_max(index, Ordering::Relaxed) < index {
            self.transport.notify(Notice::Fallback { to: next, reason });
        }
        Some(next)
    }

    /// What a failed request shows about `mode`: the server refused its tools or its schema.
    fn refusal(&self, error: &HttpError, mode: RouterMode) -> Option<String> {
        let (what, said) = match mode {
            RouterMode::Native => ("the tools", error.tool_refusal()?),
            RouterMode::Constrained => ("the response_format schema", error.schema_refusal()?),
            _ => return None,
        };
        Some(format!("{} refused {what}: {said}", self.endpoint()))
    }

    /// Finishes a reply read from a success body: ids for calls without one, the key cut out.
    fn read(&self, mut reply: ModelReply) -> ModelReply {
        for call in &mut reply.calls {
            if call.id.is_none() {
                call.id = Some(format!("call_h{}", self.next_id.fetch_add(1, Ordering::Relaxed) + 1));
            }
            if let Arguments::Json(_) = call.arguments {
                call.arguments = Arguments::Value(call.arguments.to_value().into_owned());
            }
            if let Arguments::Value(arguments) = &mut call.arguments {
                redact_value(&self.transport, arguments);
            }
        }
        reply.text = reply.text.map(|t| self.transport.redact(&t));
        reply.reasoning = reply.reasoning.map(|t| self.transport.redact(&t));
        reply
    }

    fn failed(&self, error: &HttpError, retries: u32) -> ProviderError {
        let after = match (retries, error.not_retried()) {
            (0, Some(why)) => format!(" ({why})"),
            (0, None) => String::new(),
            (1, _) => " (after 1 retry)".to_owned(),
            (n, _) => format!(" (after {n} retries)"),
        };
        let message = self.transport.redact(&format!("{error}{after}"));
        ProviderError { message, retries, outage: error.outage() }
    }
}

/// The `context_length` of `model` among Ollama's running models (`/api/ps`); a model named
/// without a tag is Ollama's `:latest`.
fn ollama_running_context(ps: &Value, model: &str) -> Option<u64> {
    let tagged = if model.contains(':') { model.to_owned() } else { format!("{model}:latest") };
    let named =
        |m: &&Value| ["name", "model"].iter().any(|k| m.get(k).and_then(Value::as_str) == Some(tagged.as_str()));
    let running = ps.get("models")?.as_array()?.iter().find(named)?;
    running.get("context_length").and_then(Value::as_u64).filter(|&n| n > 0)
}

/// `num_ctx` among a model's parameters as Ollama's `/api/show` gives them: one `name value`
/// pair a line.
fn ollama_num_ctx(shown: &Value) -> Option<u64> {
    let parameters = shown.get("parameters")?.as_str()?;
    let line = parameters.lines().find_map(|l| l.trim().strip_prefix("num_ctx"))?;
    line.trim().parse().ok().filter(|&n: &u64| n > 0)
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

/// The sum of two optional counts.
fn add_usage(a: Option<Usage>, b: Option<Usage>) -> Option<Usage> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.add(b);
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

#[async_trait]
impl ModelProvider for HttpProvider {
    fn name(&self) -> &str {
        &self.name
    }

    /// Asks in the mode in force. In `auto` mode, a request that shows its mode does not work
    /// (refused, or a forced request answered with no call) is asked again one step down;
    /// the tokens of the answer set aside still count.
    async fn complete(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        let choice = self.choice(&request)?;
        let forced =
            matches!(choice, ToolChoice::Required | ToolChoice::Tool(_) | ToolChoice::AnyBut(_) | ToolChoice::OneOf(_));
        let mut mode = self.sending_mode();
        let mut retries = 0;
        let mut set_aside = None;
        loop {
            let answer = match self.ask(&request, &choice, mode).await {
                Ok(answer) => answer,
                Err(Failure { error, retries: before }) => {
                    retries += before;
                    match self.refusal(&error, mode).and_then(|reason| self.step_down(mode, reason)) {
                        Some(next) => {
                            mode = next;
                            continue;
                        }
                        None => return Err(self.failed(&error, retries)),
                    }
                }
            };
            retries += answer.retries;
            let mut reply = self.read(answer.body);
            if mode == RouterMode::Native && forced && reply.calls.is_empty() {
                let reason = format!(
                    "{} ignored the tools: its reply holds text and no tool call, though one was required",
                    self.endpoint()
                );
                if let Some(next) = self.step_down(mode, reason) {
                    set_aside = add_usage(set_aside, reply.usage);
                    mode = next;
                    continue;
                }
            }
            reply.usage = add_usage(set_aside, reply.usage);
            reply.router_mode = Some(mode.as_str().to_owned());
            reply.retries = retries;
            return Ok(reply);
        }
    }

    async fn context_window(&self, tools: &[ToolDefinition]) -> Option<ContextWindow> {
        if let Some(known) = self.window.get() {
            return Some(known.clone());
        }
        let learnt = self.learn_context(tools).await;
        Some(self.window.get_or_init(|| learnt).clone())
    }

    fn penalizes_repeats(&self) -> bool {
        self.wire.repeat_penalty().is_some()
    }

    /// A model served with a small context (the compact listing) or in a text mode (its
    /// template knows no tools) is a small one: `finish` waits until a tool has answered.
    fn needs_a_tool_first(&self) -> bool {
        self.compact() || matches!(self.router_mode(), RouterMode::Constrained | RouterMode::Prompt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn verbatim_members_follow_the_json_in_their_own_order() {
        let body = Body { json: json!({"b": 1, "a": 2}), verbatim: vec![("z", r#"{"tool":1,"arguments":2}"#.into())] };
        assert_eq!(String::from_utf8(body.bytes()).unwrap(), r#"{"a":2,"b":1,"z":{"tool":1,"arguments":2}}"#);
        let empty = Body { json: json!({}), verbatim: vec![("x", "1".into()), ("y", "[]".into())] };
        assert_eq!(String::from_utf8(empty.bytes()).unwrap(), r#"{"x":1,"y":[]}"#);
    }

    #[test]
    fn router_modes_read_and_print_their_names() {
        for mode in [RouterMode::Auto, RouterMode::Native, RouterMode::Constrained, RouterMode::Prompt] {
            assert_eq!(mode.as_str().parse::<RouterMode>(), Ok(mode));
        }
        let e = "grammar".parse::<RouterMode>().unwrap_err().to_string();
        assert!(e.contains("auto, native, constrained or prompt"), "{e}");
    }
}
