//! What `harness run` and `harness batch` share: the provider flags and the loop's limits, and
//! how each becomes a provider or `RunOptions` (flags first, then the config, then defaults).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use harness_core::{ModelProvider, ReplyFormat, RunAbout, RunOptions, ToolRegistry};
use harness_providers::{
    DEFAULT_MAX_REPLY_TOKENS, HttpProvider, HttpProviderConfig, HttpSettings, OfflineRouter, Preset, RetryBudget,
    RouterMode, ScriptedProvider, parse_tool_choice,
};

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;

/// Which model provider answers, and how it is reached.
#[derive(Debug, Args)]
pub(crate) struct ProviderArgs {
    /// Model provider: offline (default, no model: a deterministic router), scripted, or a model API:
    /// openai, openrouter, ollama, llamacpp, vllm, anthropic (see docs/providers.md).
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// Model id, for providers that take one.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Base URL of the model API, overriding the provider's default (OpenAI-compatible ones end in /v1).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// Environment variable that holds the API key; keys are read from the environment only.
    #[arg(long, value_name = "VAR")]
    pub(crate) api_key_env: Option<String>,
    /// Tool choice sent when the loop asks for any tool: required (default), auto, none, or a tool's name.
    /// The last step always forces finish.
    #[arg(long, value_name = "CHOICE")]
    pub(crate) tool_choice: Option<String>,
    /// How the tool choice is forced: auto (default: native, one step down when the server shows a step does
    /// not work), native (the API's tools and tool_choice), constrained (a JSON schema of the calls the server
    /// decodes to), prompt (tools described in the prompt, reply text parsed).
    #[arg(long, value_name = "MODE", value_parser = ["auto", "native", "constrained", "prompt"])]
    pub(crate) router_mode: Option<String>,
    /// The most tokens a model reply may take, sent with every request; a reply cut there is not run. [default: 1024]
    #[arg(long, value_name = "N")]
    pub(crate) max_reply_tokens: Option<u32>,
    /// The model's context in tokens, for a server that does not say its own (llama.cpp's /props does); with
    /// --provider scripted, the context the script declares. [default: by provider, see docs/providers.md]
    #[arg(long, value_name = "N")]
    pub(crate) context_tokens: Option<u64>,
    /// Whole-request timeout of a model request, in seconds. [default: 120]
    #[arg(long, value_name = "SECS")]
    pub(crate) timeout: Option<f64>,
    /// Connect timeout of a model request, in seconds. [default: 10]
    #[arg(long, value_name = "SECS")]
    pub(crate) connect_timeout: Option<f64>,
    /// Retries of a model request that failed in a transient way: no connection, no answer within --timeout, a body
    /// cut short, 408, 409, 429, 5xx. [default: 3]
    #[arg(long, value_name = "N")]
    pub(crate) retries: Option<u32>,
    /// JSON Lines file of router replies, for the scripted provider (implies --provider scripted).
    #[arg(long, value_name = "FILE")]
    pub(crate) script: Option<PathBuf>,
}

/// The limits of one run.
#[derive(Debug, Args)]
pub(crate) struct LoopArgs {
    /// Steps the run may take; the last one offers only finish. [default: 8]
    #[arg(long, value_name = "N")]
    pub(crate) max_steps: Option<u32>,
    /// The same call this many times in a row is rejected as repeated_call; 0 turns it off. [default: 3]
    #[arg(long, value_name = "N")]
    pub(crate) max_repeats: Option<u32>,
    /// This many model replies in a row cut at the token limit end the run reply_truncated (exit 5); 0 turns it
    /// off. [default: 2]
    #[arg(long, value_name = "N")]
    pub(crate) max_truncated: Option<u32>,
    /// Wall-clock limit of the run in seconds: past it, time_budget_exhausted (exit 3).
    #[arg(long, value_name = "SECS")]
    pub(crate) max_seconds: Option<f64>,
    /// How a reply's text is read: auto (detect the model family's call format from its
    /// markers), or one family: json, hermes, qwen3_coder, mistral, llama3, llama4_pythonic,
    /// harmony, deepseek_v3, deepseek_v32, deepseek_v4, kimi_k2, kimi_k3, glm45, gemma4.
    /// [default: auto]
    #[arg(long, value_name = "FORMAT")]
    pub(crate) reply_format: Option<String>,
}

/// The provider's name from the flags, `--script`, or the config; `offline` when none says.
pub(crate) fn provider_name(args: &ProviderArgs, config: &LoadedConfig) -> String {
    args.provider
        .clone()
        .or_else(|| args.script.as_ref().map(|_| "scripted".to_owned()))
        .or_else(|| config.config.provider.clone())
        .unwrap_or_else(|| "offline".to_owned())
}

/// The script file of the scripted provider, from the flag or the config.
pub(crate) fn script_path(args: &ProviderArgs, config: &LoadedConfig) -> Option<PathBuf> {
    args.script.clone().or_else(|| config.config.script.clone())
}

/// Says on stderr which given settings the `offline` and `scripted` providers ignore.
pub(crate) fn note_ignored_settings(args: &ProviderArgs, config: &LoadedConfig, name: &str, quiet: bool) {
    if quiet || !matches!(name, "offline" | "scripted") {
        return;
    }
    if let Some(model) = args.model.as_ref().or(config.config.model.as_ref()) {
        eprintln!("harness: note: model {model:?} is ignored: the {name} provider runs no model");
    }
    let http_flags = [
        ("--base-url", args.base_url.is_some()),
        ("--api-key-env", args.api_key_env.is_some()),
        ("--tool-choice", args.tool_choice.is_some()),
        ("--router-mode", args.router_mode.is_some()),
        // A script with a declared context reserves the reply's tokens in it.
        (
            "--max-reply-tokens",
            args.max_reply_tokens.is_some() && !(name == "scripted" && args.context_tokens.is_some()),
        ),
        ("--timeout", args.timeout.is_some()),
        ("--connect-timeout", args.connect_timeout.is_some()),
        ("--retries", args.retries.is_some()),
    ];
    let given: Vec<&str> = http_flags.iter().filter(|(_, set)| *set).map(|(flag, _)| *flag).collect();
    if !given.is_empty() {
        eprintln!("harness: note: {} ignored: the {name} provider makes no HTTP requests", given.join(", "));
    }
}

/// Builds the provider named by the flags or the config, saying on stderr (unless quiet) which it is.
pub(crate) fn build_provider(
    args: &ProviderArgs,
    config: &LoadedConfig,
    quiet: bool,
) -> Result<Box<dyn ModelProvider>> {
    build_budgeted_provider(args, config, quiet, None)
}

/// [`build_provider`], an HTTP provider's retries taken from `budget` (a batch's).
pub(crate) fn build_budgeted_provider(
    args: &ProviderArgs,
    config: &LoadedConfig,
    quiet: bool,
    budget: Option<Arc<RetryBudget>>,
) -> Result<Box<dyn ModelProvider>> {
    let name = provider_name(args, config);
    note_ignored_settings(args, config, &name, quiet);
    match name.as_str() {
        "offline" => {
            if !quiet {
                eprintln!(
                    "harness: using the offline router: a small deterministic matcher, not a model. To use a model, set --provider (see docs/operators.md)."
                );
            }
            Ok(Box::new(OfflineRouter))
        }
        "scripted" => {
            let path = script_path(args, config)
                .ok_or_else(|| CliError::Usage("--provider scripted needs --script FILE".to_owned()))?;
            let mut script = ScriptedProvider::from_file(&path).map_err(|e| CliError::Usage(e.to_string()))?;
            if let Some(tokens) = context_tokens(args, config)? {
                let reply =
                    args.max_reply_tokens.or(config.config.max_reply_tokens).unwrap_or(DEFAULT_MAX_REPLY_TOKENS);
                script = script.with_context(tokens, u64::from(reply));
            }
            Ok(Box::new(script))
        }
        other => {
            let preset = other.parse::<Preset>().map_err(|e| CliError::Usage(e.to_string()))?;
            let provider = http_provider(preset, args, config, budget)?;
            if !quiet {
                eprintln!(
                    "harness: provider {}, model {:?}, router mode {}: {}",
                    preset,
                    provider.model(),
                    provider.router_mode(),
                    provider.endpoint()
                );
            }
            Ok(Box::new(provider))
        }
    }
}

/// The model's context from the flag or the config, when one is given: at least 1 token.
fn context_tokens(args: &ProviderArgs, config: &LoadedConfig) -> Result<Option<u64>> {
    match args.context_tokens.or(config.config.context_tokens) {
        Some(0) => Err(CliError::Usage(
            "--context-tokens 0 leaves no room for any request; give the model's context size in tokens".to_owned(),
        )),
        tokens => Ok(tokens),
    }
}

/// Seconds from a flag or the config, as a duration.
pub(crate) fn seconds(flag: &str, value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero() && value <= 1e6)
        .ok_or_else(|| CliError::Usage(format!("{flag} {value}: give a positive number of seconds")))
}

/// The tool choice override from the flag or the config, if any.
fn tool_choice(args: &ProviderArgs, config: &LoadedConfig) -> Option<String> {
    args.tool_choice.clone().or_else(|| config.config.tool_choice.clone())
}

/// An HTTP provider from the flags, then the config, then the preset's defaults.
fn http_provider(
    preset: Preset,
    args: &ProviderArgs,
    config: &LoadedConfig,
    budget: Option<Arc<RetryBudget>>,
) -> Result<HttpProvider> {
    let file = &config.config;
    let defaults = HttpSettings::default();
    let retries = args.retries.or(file.retries).unwrap_or(defaults.retries);
    let mut http = HttpSettings { retries, budget, ..defaults };
    if let Some(t) = args.timeout.or(file.timeout) {
        http.timeout = seconds("--timeout", t)?;
    }
    if let Some(t) = args.connect_timeout.or(file.connect_timeout) {
        http.connect_timeout = seconds("--connect-timeout", t)?;
    }
    let router_mode = match args.router_mode.as_ref().or(file.router_mode.as_ref()) {
        Some(mode) => mode.parse::<RouterMode>().map_err(|e| CliError::Usage(e.to_string()))?,
        None => RouterMode::Auto,
    };
    let provider_config = HttpProviderConfig {
        preset,
        base_url: args.base_url.clone().or_else(|| file.base_url.clone()),
        model: args.model.clone().or_else(|| file.model.clone()),
        api_key_env: args.api_key_env.clone().or_else(|| file.api_key_env.clone()),
        tool_choice: tool_choice(args, config).as_deref().map(parse_tool_choice),
        router_mode,
        max_reply_tokens: args.max_reply_tokens.or(file.max_reply_tokens),
        context_tokens: context_tokens(args, config)?,
        app_url: file.openrouter.http_referer.clone(),
        app_title: file.openrouter.x_title.clone(),
        http,
    };
    HttpProvider::new(provider_config).map_err(|e| CliError::Usage(e.to_string()))
}

/// A tool choice naming a tool must name a loaded one, for providers that send it to a model.
pub(crate) fn check_tool_choice(
    args: &ProviderArgs,
    config: &LoadedConfig,
    registry: &ToolRegistry,
    provider_name: &str,
) -> Result<()> {
    if let Some(name) = tool_choice(args, config) {
        let named = !matches!(name.as_str(), "required" | "auto" | "none");
        if named && registry.get(&name).is_none() && !matches!(provider_name, "offline" | "scripted") {
            let tools: Vec<&str> = registry.definitions().iter().map(|t| t.name.as_str()).collect();
            return Err(CliError::Usage(format!(
                "--tool-choice {name:?} is no loaded tool; use required, auto, none or one of: {}",
                tools.join(", ")
            )));
        }
    }
    Ok(())
}

/// The loop's limits from the flags, then the config, then the defaults.
pub(crate) fn run_options(args: &LoopArgs, config: &LoadedConfig) -> Result<RunOptions> {
    let defaults = RunOptions::default();
    let limits = &config.config.limits;
    let options = RunOptions {
        max_steps: args.max_steps.or(config.config.max_steps).unwrap_or(8),
        max_repeats: args.max_repeats.or(config.config.max_repeats).unwrap_or(3),
        max_truncated: args.max_truncated.or(config.config.max_truncated).unwrap_or(defaults.max_truncated),
        max_reply_bytes: limits.reply_bytes.unwrap_or(defaults.max_reply_bytes),
        max_arguments_bytes: limits.arguments_bytes.unwrap_or(defaults.max_arguments_bytes),
        max_conversation_bytes: limits.conversation_bytes.unwrap_or(defaults.max_conversation_bytes),
        max_duration: match args.max_seconds.or(config.config.max_seconds) {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(CliError::Usage(format!("--max-seconds {s}: give a positive number of seconds"))),
        },
        // Batch runs share a runtime: calls go to blocking threads. `harness run` turns it on,
        // and exits_after too (a batch runs on after each run).
        inline_calls: false,
        exits_after: false,
        reply_format: match args.reply_format.as_ref().or(config.config.reply_format.as_ref()) {
            None => ReplyFormat::Auto,
            Some(name) => name.parse().map_err(|e| CliError::Usage(format!("--reply-format: {e}")))?,
        },
    };
    if options.max_steps == 0 {
        return Err(CliError::Usage("--max-steps must be at least 1".to_owned()));
    }
    if options.max_repeats == 1 {
        return Err(CliError::Usage(
            "--max-repeats 1 would reject every call as a repeat; use 0 to turn the check off, or 2 or more".to_owned(),
        ));
    }
    Ok(options)
}

/// An async runtime for the loop: a current-thread one for `threads` of 1, else a pool of that many.
pub(crate) fn runtime(threads: usize) -> Result<tokio::runtime::Runtime> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build().map_err(|e| CliError::Failure(format!("cannot start the async runtime: {e}")))
}

/// What the trace's first line says about this harness, its model and its configuration.
pub(crate) fn run_about(args: &ProviderArgs, config: &LoadedConfig) -> RunAbout {
    let name = provider_name(args, config);
    let runs_a_model = !matches!(name.as_str(), "offline" | "scripted");
    let (config_source, config_hash) = match &config.path {
        // The bytes are read again for the hash: the file was just read and parsed, so a
        // failure here is a race with an editor, and the hash is then left out.
        Some(path) => {
            (Some(path.display().to_string()), std::fs::read(path).ok().map(|b| harness_core::sha256_hex(&b)))
        }
        None => (None, None),
    };
    RunAbout {
        harness_version: env!("CARGO_PKG_VERSION").to_owned(),
        model: args.model.clone().or_else(|| config.config.model.clone()).filter(|_| runs_a_model),
        router_mode: args
            .router_mode
            .clone()
            .or_else(|| config.config.router_mode.clone())
            .or_else(|| runs_a_model.then(|| "auto".to_owned())),
        config_source,
        config_hash,
        // Filled by the commands that start MCP servers.
        mcp_servers: Vec::new(),
    }
}

/// Starts OpenTelemetry export when `--otlp URL` or the standard variables ask for it (see
/// docs/traces.md). Call outside the async runtime; `Otlp::shutdown` at the end, outside too.
pub(crate) fn otlp_export(flag: Option<&str>) -> Result<Option<harness_trace::Otlp>> {
    let settings = harness_trace::OtlpSettings::resolve(flag, |name| std::env::var(name).ok())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    settings.map(harness_trace::Otlp::start).transpose().map_err(|e| CliError::Usage(e.to_string()))
}
