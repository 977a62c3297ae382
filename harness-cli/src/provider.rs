//! The model provider: the provider flags and the loop's limits (which `run`, `batch`, `eval`
//! and `config show` flatten), and how the resolved [`Settings`] (crate::settings, where the
//! flags are laid over the other layers once) become a provider, and the run's first line.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use harness_core::{ModelProvider, RunAbout, ToolChoice, ToolRegistry};
use harness_providers::{
    DEFAULT_MAX_REPLY_TOKENS, HttpProvider, HttpProviderConfig, HttpSettings, OfflineRouter, Preset, RetryBudget,
    RouterMode, ScriptedProvider,
};

use crate::Result;
use crate::error::CliError;
use crate::settings::{ProjectFile, ProviderKind, Settings};

/// Which model provider answers, and how it is reached.
#[derive(Debug, Clone, Args)]
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
    /// Whether finish may end a run before a tool has answered: allow, refuse, or provider (refused for a small
    /// model: a small context, a template that knows no tools). Refused, a number or expression copied from the
    /// request is no answer either (copied_answer). [default: provider]
    #[arg(long, value_name = "WHEN", value_parser = ["provider", "allow", "refuse"])]
    pub(crate) early_finish: Option<String>,
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

/// Says on stderr which given settings the `offline` and `scripted` providers ignore.
pub(crate) fn note_ignored_settings(settings: &Settings, quiet: bool) {
    let name = settings.provider;
    if quiet || name.runs_a_model() {
        return;
    }
    if let Some(model) = settings.model.as_ref() {
        crate::log::notice!("harness: note: model {model:?} is ignored: the {name} provider runs no model");
    }
    let http_flags = [
        ("--base-url", settings.by_flag("base_url")),
        ("--api-key-env", settings.by_flag("api_key_env")),
        ("--tool-choice", settings.by_flag("tool_choice")),
        ("--router-mode", settings.by_flag("router_mode")),
        // A script with a declared context reserves the reply's tokens in it.
        (
            "--max-reply-tokens",
            settings.by_flag("max_reply_tokens")
                && !(matches!(name, ProviderKind::Scripted) && settings.by_flag("context_tokens")),
        ),
        ("--timeout", settings.by_flag("timeout")),
        ("--connect-timeout", settings.by_flag("connect_timeout")),
        ("--retries", settings.by_flag("retries")),
    ];
    let given: Vec<&str> = http_flags.iter().filter(|(_, set)| *set).map(|(flag, _)| *flag).collect();
    if !given.is_empty() {
        crate::log::notice!("harness: note: {} ignored: the {name} provider makes no HTTP requests", given.join(", "));
    }
}

/// Builds the provider the settings name, saying on stderr (unless quiet) which it is.
pub(crate) fn build_provider(settings: &Settings, quiet: bool) -> Result<Box<dyn ModelProvider>> {
    build_budgeted_provider(settings, quiet, None)
}

/// [`build_provider`], an HTTP provider's retries taken from `budget` (a batch's).
pub(crate) fn build_budgeted_provider(
    settings: &Settings,
    quiet: bool,
    budget: Option<Arc<RetryBudget>>,
) -> Result<Box<dyn ModelProvider>> {
    note_ignored_settings(settings, quiet);
    match settings.provider {
        ProviderKind::Offline => {
            if !quiet {
                crate::log::notice!(
                    "harness: using the offline router: a small deterministic matcher, not a model. To use a model, set --provider (see docs/operators.md)."
                );
            }
            Ok(Box::new(OfflineRouter))
        }
        ProviderKind::Scripted => {
            let path = settings
                .script
                .as_ref()
                .ok_or_else(|| CliError::Usage("--provider scripted needs --script FILE".to_owned()))?;
            let mut script = ScriptedProvider::from_file(path).map_err(|e| CliError::Usage(e.to_string()))?;
            if let Some(tokens) = settings.context_tokens {
                let reply = settings.max_reply_tokens.unwrap_or(DEFAULT_MAX_REPLY_TOKENS);
                script = script.with_context(tokens, u64::from(reply));
            }
            Ok(Box::new(script))
        }
        ProviderKind::Api(preset) => {
            let provider = http_provider(preset, settings, budget)?;
            if !quiet {
                crate::log::notice!(
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

/// An HTTP provider from the settings, then the preset's defaults.
fn http_provider(preset: Preset, settings: &Settings, budget: Option<Arc<RetryBudget>>) -> Result<HttpProvider> {
    let defaults = HttpSettings::default();
    let http = HttpSettings {
        timeout: settings.timeout.unwrap_or(defaults.timeout),
        connect_timeout: settings.connect_timeout.unwrap_or(defaults.connect_timeout),
        retries: settings.retries.unwrap_or(defaults.retries),
        budget,
        ..defaults
    };
    let provider_config = HttpProviderConfig {
        preset,
        base_url: settings.base_url.clone(),
        model: settings.model.clone(),
        api_key_env: settings.api_key_env.clone(),
        tool_choice: settings.tool_choice.clone(),
        router_mode: settings.router_mode.unwrap_or_default(),
        max_reply_tokens: settings.max_reply_tokens,
        context_tokens: settings.context_tokens,
        app_url: settings.app_url.clone(),
        app_title: settings.app_title.clone(),
        http,
    };
    HttpProvider::new(provider_config).map_err(|e| CliError::Usage(e.to_string()))
}

/// A tool choice naming a tool must name a loaded one, for providers that send it to a model.
pub(crate) fn check_tool_choice(settings: &Settings, registry: &ToolRegistry) -> Result<()> {
    if let Some(ToolChoice::Tool(name)) = settings.tool_choice.as_ref()
        && registry.get(name).is_none()
        && settings.provider.runs_a_model()
    {
        let tools: Vec<&str> = registry.definitions().iter().map(|t| t.name.as_str()).collect();
        return Err(CliError::Usage(format!(
            "{} {name:?} is no loaded tool; use required, auto, none or one of: {}",
            settings.named("tool_choice"),
            tools.join(", ")
        )));
    }
    Ok(())
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
pub(crate) fn run_about(project: &ProjectFile, settings: &Settings) -> RunAbout {
    let runs_a_model = settings.provider.runs_a_model();
    let (config_source, config_hash) = match &project.named {
        // The bytes are read again for the hash: the file was just read and parsed, so a
        // failure here is a race with an editor, and the hash is then left out.
        Some(path) => {
            (Some(path.display().to_string()), std::fs::read(path).ok().map(|b| harness_core::sha256_hex(&b)))
        }
        None => (None, None),
    };
    RunAbout {
        harness_version: env!("CARGO_PKG_VERSION").to_owned(),
        model: settings.model.clone().filter(|_| runs_a_model),
        router_mode: settings
            .router_mode
            .or_else(|| runs_a_model.then(RouterMode::default))
            .map(|mode| mode.to_string()),
        config_source,
        config_hash,
        // Filled by the commands that start MCP servers, and by those that load plugins.
        mcp_servers: Vec::new(),
        unenforced: Vec::new(),
    }
}

/// Starts OpenTelemetry export when `--otlp URL` or the standard variables ask for it (see
/// docs/traces.md). Call outside the async runtime; `Otlp::shutdown` at the end, outside too.
pub(crate) fn otlp_export(flag: Option<&str>) -> Result<Option<harness_trace::Otlp>> {
    let settings = harness_trace::OtlpSettings::resolve(flag, |name| std::env::var(name).ok())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    settings.map(harness_trace::Otlp::start).transpose().map_err(|e| CliError::Usage(e.to_string()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use harness_core::RunOptions;

    use super::*;
    use crate::config::LoadedConfig;
    use crate::settings::Source;

    /// The provider flags and the limits, as `harness run` takes them.
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        provider: ProviderArgs,
        #[command(flatten)]
        limits: LoopArgs,
    }

    fn settings(argv: &[&str]) -> Result<Settings> {
        let flags = Flags::try_parse_from(argv).expect("valid flags");
        let config = LoadedConfig::default();
        Settings::resolve(&flags.provider, &flags.limits, &config)
    }

    #[test]
    fn settings_nobody_gives_are_the_library_s_defaults() {
        let s = settings(&["harness"]).unwrap();
        assert_eq!((s.provider, s.router_mode), (ProviderKind::Offline, None));
        assert_eq!(s.options, RunOptions::default());
    }

    #[test]
    fn each_choice_is_resolved_once_into_its_type() {
        let s =
            settings(&["harness", "--provider", "anthropic", "--router-mode", "prompt", "--max-steps", "5"]).unwrap();
        assert_eq!((s.provider, s.router_mode), (ProviderKind::Api(Preset::Anthropic), Some(RouterMode::Prompt)));
        assert_eq!(s.options, RunOptions { max_steps: 5, ..RunOptions::default() });
        assert_eq!(settings(&["harness", "--script", "s.jsonl"]).unwrap().provider, ProviderKind::Scripted);
        assert!(matches!(settings(&["harness", "--provider", "nosuch"]), Err(CliError::Usage(_))));
    }

    #[test]
    fn a_flag_beats_the_layers_and_an_error_names_the_layer_that_gave_the_value() {
        let mut config = LoadedConfig::default();
        let table = toml::from_str("provider = \"openai\"\nmodel = \"m\"\nmax_steps = 4\ntimeout = 0\n").unwrap();
        config.layers.lay(table, &Source::Project("/p/harness.toml".into()));
        let flags = Flags::try_parse_from(["harness", "--max-steps", "6"]).expect("valid flags");
        let e = Settings::resolve(&flags.provider, &flags.limits, &config).err().map(|e| e.to_string());
        let e = e.unwrap_or_default();
        assert!(e.contains("timeout (project file /p/harness.toml) 0: give a positive number"), "{e}");
        let flags = Flags::try_parse_from(["harness", "--max-steps", "6", "--timeout", "9"]).expect("valid flags");
        let s = Settings::resolve(&flags.provider, &flags.limits, &config).unwrap();
        assert_eq!((s.provider, s.options.max_steps), (ProviderKind::Api(Preset::OpenAi), 6));
        assert_eq!((s.timeout, s.model.as_deref()), (Some(std::time::Duration::from_secs(9)), Some("m")));
    }

    #[test]
    fn a_limit_out_of_range_names_the_layer_that_gave_it() {
        let mut config = LoadedConfig::default();
        let table = toml::from_str("max_steps = 0\nmax_seconds = -1.0\n").unwrap();
        config.layers.lay(table, &Source::Project("/p/harness.toml".into()));
        let flags = Flags::try_parse_from(["harness", "--max-steps", "2"]).expect("valid flags");
        let e = Settings::resolve(&flags.provider, &flags.limits, &config).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("max_seconds (project file /p/harness.toml) -1: give a positive number of seconds")
        );
        let flags = Flags::try_parse_from(["harness", "--max-seconds", "5"]).expect("valid flags");
        let e = Settings::resolve(&flags.provider, &flags.limits, &config).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("max_steps (project file /p/harness.toml) must be at least 1"));
        let e = settings(&["harness", "--max-repeats", "1"]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("--max-repeats 1 would reject every call"), "{e}");
    }

    #[test]
    fn a_number_only_another_provider_reads_is_not_refused() {
        let mut config = LoadedConfig::default();
        config.layers.lay(
            toml::from_str(
                "timeout = 0
",
            )
            .unwrap(),
            &Source::User("/u/config.toml".into()),
        );
        let flags = Flags::try_parse_from(["harness"]).expect("valid flags");
        let s = Settings::resolve(&flags.provider, &flags.limits, &config).unwrap();
        assert_eq!((s.provider, s.timeout), (ProviderKind::Offline, None));
    }

    #[test]
    fn a_bad_word_names_its_flag_or_its_variable_and_the_nearest_word() {
        let e = settings(&["harness", "--provider", "opnai"]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("--provider \"opnai\": no such provider; did you mean openai?"), "{e}");
        let e = settings(&["harness", "--reply-format", "hermez"]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("--reply-format \"hermez\": no such reply format; did you mean hermes?"), "{e}");
        let mut config = LoadedConfig::default();
        config.layers.lay(toml::from_str("router_mode = \"promt\"\n").unwrap(), &Source::Env("HARNESS_ROUTER_MODE"));
        let flags = Flags::try_parse_from(["harness"]).expect("valid flags");
        let e = Settings::resolve(&flags.provider, &flags.limits, &config).err().map(|e| e.to_string());
        let e = e.unwrap_or_default();
        assert!(e.starts_with("HARNESS_ROUTER_MODE=\"promt\": no such router mode; did you mean prompt?"), "{e}");
    }

    #[test]
    fn the_tool_choice_is_typed_once() {
        let s = settings(&["harness", "--tool-choice", "calc.add"]).unwrap();
        assert_eq!(s.tool_choice, Some(ToolChoice::Tool("calc.add".to_owned())));
        assert_eq!(settings(&["harness", "--tool-choice", "none"]).unwrap().tool_choice, Some(ToolChoice::None));
    }
}
