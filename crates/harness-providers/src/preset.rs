//! The HTTP providers by name, their defaults, and building one from a configuration.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize};

use harness_core::ToolChoice;
use reqwest::Url;

use crate::anthropic::{self, Messages};
use crate::http_provider::{DEFAULT_MAX_REPLY_TOKENS, HttpProvider, RouterMode, Wire};
use crate::openai::ChatCompletions;
use crate::transport::{HeaderProblem, Hints, HttpSettings, Secret, Transport};

/// An HTTP provider by name: an API and its defaults, every one of which a setting overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// OpenAI's chat completions API, or any server that speaks it (`OPENAI_BASE_URL`).
    OpenAi,
    /// OpenRouter, routed only to hosts that honour `tools` and `tool_choice`.
    OpenRouter,
    /// Ollama's OpenAI-compatible endpoint.
    Ollama,
    /// llama.cpp's `llama-server`.
    LlamaCpp,
    /// vLLM's OpenAI-compatible server.
    Vllm,
    /// Anthropic's Messages API.
    Anthropic,
}

impl Preset {
    /// Every preset, in the order the help lists them.
    pub const ALL: [Preset; 6] =
        [Self::OpenAi, Self::OpenRouter, Self::Ollama, Self::LlamaCpp, Self::Vllm, Self::Anthropic];

    /// The name `--provider` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::OpenRouter => "openrouter",
            Self::Ollama => "ollama",
            Self::LlamaCpp => "llamacpp",
            Self::Vllm => "vllm",
            Self::Anthropic => "anthropic",
        }
    }

    /// The base URL when none is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi => "https://api.openai.com/v1",
            Self::OpenRouter => "https://openrouter.ai/api/v1",
            Self::Ollama => "http://localhost:11434/v1",
            Self::LlamaCpp => "http://localhost:8080/v1",
            Self::Vllm => "http://localhost:8000/v1",
            Self::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The environment variable that holds the API key by default, if the preset has one.
    pub fn key_env(self) -> Option<&'static str> {
        match self {
            Self::OpenAi => Some("OPENAI_API_KEY"),
            Self::OpenRouter => Some("OPENROUTER_API_KEY"),
            Self::Vllm => Some("VLLM_API_KEY"),
            Self::Anthropic => Some("ANTHROPIC_API_KEY"),
            Self::Ollama | Self::LlamaCpp => None,
        }
    }

    /// The environment variable that overrides the default base URL, if the preset has one.
    pub fn base_url_env(self) -> Option<&'static str> {
        match self {
            Self::OpenAi => Some("OPENAI_BASE_URL"),
            Self::Anthropic => Some("ANTHROPIC_BASE_URL"),
            _ => None,
        }
    }

    /// The context assumed, in tokens, when neither the server nor the configuration says:
    /// the server's own default for local ones, a long context for hosted models.
    pub fn default_context_tokens(self) -> u64 {
        match self {
            Self::LlamaCpp | Self::Ollama => 4096,
            Self::Vllm => 8192,
            Self::OpenAi | Self::OpenRouter | Self::Anthropic => 128_000,
        }
    }

    /// A hosted service, which refuses every request without a key.
    fn hosted(self) -> bool {
        matches!(self, Self::OpenAi | Self::OpenRouter | Self::Anthropic)
    }

    /// The model when none is given: only llama.cpp, which serves the model it was started with.
    fn default_model(self) -> Option<&'static str> {
        match self {
            Self::LlamaCpp => Some("default"),
            _ => None,
        }
    }

    /// A model name to suggest in the error when none is given.
    fn model_example(self) -> &'static str {
        match self {
            Self::OpenAi => "gpt-4o-mini",
            Self::OpenRouter => "openai/gpt-4o-mini",
            Self::Ollama => "qwen2.5:7b; `ollama list` shows yours",
            Self::LlamaCpp => "default",
            Self::Vllm => "the name the server was started with; GET /v1/models lists it",
            Self::Anthropic => "claude-sonnet-4-5",
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| ConfigError::UnknownProvider(s.to_owned()))
    }
}

/// Everything an HTTP provider is built from. `None` means the preset's default.
#[derive(Debug, Clone)]
pub struct HttpProviderConfig {
    /// The API and its defaults.
    pub preset: Preset,
    /// The API's base URL (`.../v1` for OpenAI-compatible servers).
    pub base_url: Option<String>,
    /// The model id.
    pub model: Option<String>,
    /// The environment variable holding the API key. Keys come from the environment only.
    pub api_key_env: Option<String>,
    /// Replaces the loop's `Required` choice (`auto`, `none`, or one tool); a forced tool,
    /// such as `finish` on the last step, stays forced.
    pub tool_choice: Option<ToolChoice>,
    /// How the tool choice is forced.
    pub router_mode: RouterMode,
    /// The model's context in tokens, for servers that do not say theirs (llama.cpp's
    /// `/props` does; [`Preset::default_context_tokens`] when unset).
    pub context_tokens: Option<u64>,
    /// The most tokens a reply may take, sent with every request
    /// ([`DEFAULT_MAX_REPLY_TOKENS`](crate::DEFAULT_MAX_REPLY_TOKENS) when unset); a reply that
    /// reaches it is marked truncated.
    pub max_reply_tokens: Option<u32>,
    /// OpenRouter's `HTTP-Referer` header: the URL of the app, for its rankings.
    pub app_url: Option<String>,
    /// OpenRouter's `X-Title` header: the name of the app.
    pub app_title: Option<String>,
    /// Timeouts, retries and where notices go.
    pub http: HttpSettings,
}

impl HttpProviderConfig {
    /// The preset's defaults.
    pub fn new(preset: Preset) -> Self {
        Self {
            preset,
            base_url: None,
            model: None,
            api_key_env: None,
            tool_choice: None,
            router_mode: RouterMode::Auto,
            max_reply_tokens: None,
            context_tokens: None,
            app_url: None,
            app_title: None,
            http: HttpSettings::default(),
        }
    }
}

/// Why an HTTP provider cannot be built: each a configuration mistake, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `--provider` names no provider.
    #[error(
        "unknown provider {0:?}; available: offline, scripted, openai, openrouter, ollama, llamacpp, vllm, anthropic"
    )]
    UnknownProvider(String),
    /// No model was given and the preset has no default.
    #[error("the {provider} provider needs a model: pass --model NAME (for example {example})")]
    MissingModel {
        /// The preset.
        provider: Preset,
        /// A model name to suggest.
        example: &'static str,
    },
    /// The key's variable is unset or empty, and the server needs a key.
    #[error(
        "the {provider} provider needs an API key and {var} is not set; export it, or name another variable with --api-key-env"
    )]
    MissingKey {
        /// The preset.
        provider: Preset,
        /// The variable that was read.
        var: String,
    },
    /// `api_key_env` is not a variable name; the value is not repeated, in case it is the key.
    #[error(
        "the API key variable must be an environment variable's name (letters, digits and _), not the key itself: pass --api-key-env NAME and export NAME"
    )]
    InvalidKeyEnv,
    /// The key cannot be sent in a header (a newline or another control character in it).
    #[error("the API key in {var} cannot be sent in an HTTP header: it holds a control character such as a newline")]
    InvalidKey {
        /// The variable that was read.
        var: String,
    },
    /// The base URL does not parse or is not HTTP.
    #[error("invalid base URL {url:?}: {reason}; it looks like http://localhost:11434/v1")]
    InvalidBaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A configured header cannot be sent.
    #[error("the {name} header cannot be sent: its value holds a control character")]
    InvalidHeader {
        /// The header's name.
        name: String,
    },
    /// The HTTP client could not start.
    #[error("the HTTP client could not start: {0}")]
    Client(String),
    /// A router mode the API does not have.
    #[error(
        "the {provider} provider has no constrained mode (its API takes no response_format schema); use --router-mode native, prompt or auto"
    )]
    NoConstrainedMode {
        /// The preset.
        provider: Preset,
    },
    /// A token limit of zero.
    #[error("--max-reply-tokens 0 leaves no room for a reply; give at least 1 (the default is {default})")]
    ZeroMaxReplyTokens {
        /// The default limit.
        default: u32,
    },
}

impl HttpProvider {
    /// Builds a provider, reading the key (and `OPENAI_BASE_URL` or `ANTHROPIC_BASE_URL`) from
    /// the process environment.
    pub fn new(config: HttpProviderConfig) -> Result<Self, ConfigError> {
        Self::with_env(config, |var| std::env::var(var).ok())
    }

    /// Builds a provider, reading the environment through `env`.
    ///
    /// The base URL is the first of: `config.base_url`, the preset's URL variable, the
    /// preset's default. The key is read from `config.api_key_env` or the preset's variable;
    /// it is required when `api_key_env` was given, or when a hosted preset keeps its default
    /// URL.
    pub fn with_env(config: HttpProviderConfig, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let preset = config.preset;
        let base_url = config
            .base_url
            .clone()
            .or_else(|| preset.base_url_env().and_then(&env).filter(|u| !u.trim().is_empty()))
            .unwrap_or_else(|| preset.default_base_url().to_owned());
        let base_url = base_url.trim().trim_end_matches('/').to_owned();
        let parsed = Url::parse(&base_url)
            .map_err(|e| ConfigError::InvalidBaseUrl { url: base_url.clone(), reason: e.to_string() })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ConfigError::InvalidBaseUrl {
                url: base_url,
                reason: format!("the scheme is {:?}, not http or https", parsed.scheme()),
            });
        }
        let endpoint = match preset {
            Preset::Anthropic if base_url.ends_with("/v1") => format!("{base_url}/messages"),
            Preset::Anthropic => format!("{base_url}/v1/messages"),
            _ => format!("{base_url}/chat/completions"),
        };
        let endpoint = Url::parse(&endpoint)
            .map_err(|e| ConfigError::InvalidBaseUrl { url: base_url.clone(), reason: e.to_string() })?;

        let model = config
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .or_else(|| preset.default_model().map(str::to_owned))
            .ok_or(ConfigError::MissingModel { provider: preset, example: preset.model_example() })?;

        if let Some(var) = &config.api_key_env {
            let mut chars = var.chars();
            let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ConfigError::InvalidKeyEnv);
            }
        }
        let key_env = config.api_key_env.clone().or_else(|| preset.key_env().map(str::to_owned));
        let key = key_env.as_deref().and_then(&env).filter(|k| !k.trim().is_empty()).map(|k| k.trim().to_owned());
        let needs_key = config.api_key_env.is_some() || (preset.hosted() && base_url == preset.default_base_url());
        if key.is_none() && needs_key {
            let var = key_env.clone().unwrap_or_default();
            return Err(ConfigError::MissingKey { provider: preset, var });
        }

        let mut headers = Vec::new();
        let auth = key.map(|key| match preset {
            Preset::Anthropic => ("x-api-key", key.clone(), Secret::new(key)),
            _ => ("authorization", format!("Bearer {key}"), Secret::new(key)),
        });
        let wire: Box<dyn Wire> = match preset {
            Preset::Anthropic => {
                headers.push(("anthropic-version".to_owned(), anthropic::API_VERSION.to_owned()));
                Box::new(Messages)
            }
            Preset::OpenRouter => {
                if let Some(url) = &config.app_url {
                    headers.push(("HTTP-Referer".to_owned(), url.clone()));
                }
                if let Some(title) = &config.app_title {
                    headers.push(("X-Title".to_owned(), title.clone()));
                }
                Box::new(ChatCompletions { require_parameters: true, ..ChatCompletions::COMPATIBLE })
            }
            Preset::LlamaCpp => {
                Box::new(ChatCompletions { penalty: ("repeat_penalty", 1.2), ..ChatCompletions::COMPATIBLE })
            }
            // OpenAI's own API, not another server behind OPENAI_BASE_URL.
            Preset::OpenAi if parsed.host_str() == Some("api.openai.com") => Box::new(ChatCompletions {
                named_choice: true,
                limit_field: "max_completion_tokens",
                cache_key: true,
                ..ChatCompletions::COMPATIBLE
            }),
            _ => Box::new(ChatCompletions::COMPATIBLE),
        };
        if config.router_mode == RouterMode::Constrained && !wire.constrains() {
            return Err(ConfigError::NoConstrainedMode { provider: preset });
        }
        let max_tokens = config.max_reply_tokens.unwrap_or(DEFAULT_MAX_REPLY_TOKENS);
        if max_tokens == 0 {
            return Err(ConfigError::ZeroMaxReplyTokens { default: DEFAULT_MAX_REPLY_TOKENS });
        }
        let hints = Hints { key_env: key_env.clone(), key_sent: auth.is_some(), model: model.clone() };
        let transport = Transport::new(endpoint, &headers, auth, config.http.clone(), hints).map_err(|p| match p {
            HeaderProblem::Auth => ConfigError::InvalidKey { var: key_env.clone().unwrap_or_default() },
            HeaderProblem::Header(name) => ConfigError::InvalidHeader { name },
            HeaderProblem::Client(reason) => ConfigError::Client(reason),
        })?;
        Ok(Self {
            name: preset.name().to_owned(),
            wire,
            transport,
            model,
            mode: config.router_mode,
            rung: AtomicUsize::new(0),
            tool_choice: config.tool_choice,
            max_tokens,
            key_env,
            base_url,
            next_id: AtomicU64::new(0),
            preset,
            context_tokens: config.context_tokens,
            window: std::sync::OnceLock::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire_of(preset: Preset, base_url: Option<&str>) -> String {
        let mut config = HttpProviderConfig::new(preset);
        config.base_url = base_url.map(str::to_owned);
        config.model = Some("m".into());
        let provider = HttpProvider::with_env(config, |var| var.ends_with("_KEY").then(|| "k".to_owned())).unwrap();
        format!("{:?}", provider.wire)
    }

    #[test]
    fn only_openai_s_own_api_gets_the_named_choice_the_new_limit_field_and_a_cache_key() {
        let own = wire_of(Preset::OpenAi, None);
        assert!(own.contains("named_choice: true") && own.contains("max_completion_tokens"), "{own}");
        assert!(own.contains("cache_key: true"), "{own}");
        for (preset, url) in [(Preset::OpenAi, Some("http://localhost:8080/v1")), (Preset::LlamaCpp, None)] {
            let other = wire_of(preset, url);
            assert!(other.contains("named_choice: false") && other.contains("\"max_tokens\""), "{other}");
            assert!(other.contains("cache_key: false"), "{other}");
        }
        assert_eq!(wire_of(Preset::Anthropic, None), "Messages");
    }
}
