//! Model providers for the `harness` loop.
//!
//! - [`ScriptedProvider`] replays router replies from a JSON Lines file: exact, repeatable runs
//!   for tests and demos.
//! - [`OfflineRouter`] is a small deterministic router, not a model: it lets the harness run
//!   with no key and no server by matching the request to a tool's name and description.
//! - [`HttpProvider`] asks a real model over HTTP: the OpenAI-compatible chat completions API
//!   (OpenAI, OpenRouter, Ollama, llama.cpp, vLLM, LM Studio) or Anthropic's Messages API,
//!   picked by a [`Preset`]. It forces the tool choice natively or, for servers with no tool
//!   calling, through a JSON schema the server decodes to or through the prompt
//!   ([`RouterMode`]); it caps every reply's tokens and marks a reply cut at the cap; it keeps
//!   each request a prefix of the next, so that a server's prompt cache serves it; it retries what is transient (rate limits, server errors, timeouts,
//!   lost connections, bodies cut short) with backoff, within a shared [`RetryBudget`] when given one
//!   ([`HttpSettings`]); and its errors name the URL, what the server said and
//!   what to check, never the API key.
//!
//! ```
//! use harness_providers::ScriptedProvider;
//! let script = ScriptedProvider::from_jsonl("demo", r#"{"tool": "finish", "arguments": {"answer": 1}}"#).unwrap();
//! assert_eq!(script.len(), 1);
//! ```
//!
//! ```
//! use harness_providers::{HttpProvider, HttpProviderConfig, Preset};
//! let mut config = HttpProviderConfig::new(Preset::Ollama);
//! config.model = Some("qwen2.5:7b".into());
//! let provider = HttpProvider::new(config).unwrap(); // no request is made until the loop asks
//! assert_eq!(provider.endpoint(), "http://localhost:11434/v1/chat/completions");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod anthropic;
mod budget;
mod constrained;
mod conversation;
mod http_provider;
mod offline;
mod openai;
mod outage;
mod preset;
mod prompt;
mod scripted;
#[cfg(test)]
mod testing;
mod transport;

pub use budget::{RetryBudget, Spent};
pub use http_provider::{DEFAULT_MAX_REPLY_TOKENS, HttpProvider, RouterMode, UnknownRouterMode, parse_tool_choice};
pub use offline::OfflineRouter;
pub use outage::{Breaker, Guarded, OutageStats, Say};
pub use preset::{ConfigError, HttpProviderConfig, Preset};
pub use scripted::{ScriptError, ScriptedProvider};
pub use transport::{HttpSettings, Notice, Notify};
