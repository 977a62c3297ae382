//! `harness run`: one request through the loop.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use harness_core::{
    ModelProvider, NoTrace, RunOptions, RunStatus, StepStatus, ToolRegistry, TraceEntry, TraceSink, TraceWriter,
};
use harness_providers::{
    HttpProvider, HttpProviderConfig, HttpSettings, OfflineRouter, Preset, RouterMode, ScriptedProvider,
    parse_tool_choice,
};
use serde_json::{Value, json};

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;
use crate::setup::{PluginArgs, load_plugins};

const EXIT_CODES: &str = "\
Exit codes:
  0  the run finished (the router called finish)
  1  the run failed: provider error (after its retries), trace error, plugin load failure
  2  usage or configuration error: a bad flag, a missing or unreadable --script or --config file, an invalid config,
     a missing API key or model name
  3  the step budget was exhausted without finish";

/// Arguments of `harness run`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct RunArgs {
    /// The request for the agent.
    request: String,
    /// Model provider: offline (default, no model: a deterministic router), scripted, or a model API:
    /// openai, openrouter, ollama, llamacpp, vllm, anthropic (see docs/providers.md).
    #[arg(long)]
    provider: Option<String>,
    /// Model id, for providers that take one.
    #[arg(long)]
    model: Option<String>,
    /// Base URL of the model API, overriding the provider's default (OpenAI-compatible ones end in /v1).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Environment variable that holds the API key; keys are read from the environment only.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// Tool choice sent when the loop asks for any tool: required (default), auto, none, or a tool's name.
    /// The last step always forces finish.
    #[arg(long, value_name = "CHOICE")]
    tool_choice: Option<String>,
    /// How the tool choice is forced: auto (default: native, then prompt if the server does not take tools),
    /// native (the API's tools and tool_choice), prompt (tools described in the prompt, reply text parsed).
    #[arg(long, value_name = "MODE", value_parser = ["auto", "native", "prompt"])]
    router_mode: Option<String>,
    /// Whole-request timeout of a model request, in seconds. [default: 120]
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Connect timeout of a model request, in seconds. [default: 10]
    #[arg(long, value_name = "SECS")]
    connect_timeout: Option<f64>,
    /// Retries of a model request after a rate limit, a server error or a connection error. [default: 3]
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
    /// JSON Lines file of router replies, for the scripted provider (implies --provider scripted).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Steps the run may take; the last one offers only finish. [default: 8]
    #[arg(long, value_name = "N")]
    max_steps: Option<u32>,
    /// The same call this many times in a row is rejected as repeated_call; 0 turns it off. [default: 3]
    #[arg(long, value_name = "N")]
    max_repeats: Option<u32>,
    /// Wall-clock limit of the run in seconds: past it, time_budget_exhausted (exit 3).
    #[arg(long, value_name = "SECS")]
    max_seconds: Option<f64>,
    /// Write the trace, one JSON object per step, to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print one JSON object with status, answer, steps and error instead of the answer alone.
    #[arg(long)]
    json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    plugins: PluginArgs,
}

/// Tees each step to the trace file and, unless quiet, a progress line on stderr.
struct Progress<'a> {
    inner: &'a mut dyn TraceSink,
    quiet: bool,
}

fn short(v: &Value, max: usize) -> String {
    let s = v.to_string();
    if s.len() <= max {
        return s;
    }
    let cut = (0..=max).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    format!("{}...", &s[..cut])
}

impl TraceSink for Progress<'_> {
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        self.inner.record(entry)?;
        if !self.quiet {
            let tool = entry.tool.unwrap_or("-");
            let args = entry.arguments.map(|a| short(a, 80)).unwrap_or_default();
            let what = match (entry.status, entry.error, entry.result) {
                (_, Some(e), _) => format!("{} {}", e.code.as_str(), e.message),
                (StepStatus::Finished, _, _) => "finished".to_owned(),
                (_, _, Some(r)) => format!("ok {}", short(r, 80)),
                _ => String::new(),
            };
            eprintln!("harness: step {} {tool} {args} -> {what}", entry.step);
        }
        Ok(())
    }
}

fn provider(args: &RunArgs, config: &LoadedConfig) -> Result<Box<dyn ModelProvider>> {
    let script = args.script.clone().or_else(|| config.config.script.clone());
    let name = args
        .provider
        .clone()
        .or_else(|| args.script.as_ref().map(|_| "scripted".to_owned()))
        .or_else(|| config.config.provider.clone())
        .unwrap_or_else(|| "offline".to_owned());
    let model = args.model.as_ref().or(config.config.model.as_ref());
    if let (Some(model), "offline" | "scripted") = (model, name.as_str()) {
        if !args.quiet {
            eprintln!("harness: note: model {model:?} is ignored: the {name} provider runs no model");
        }
    }
    if matches!(name.as_str(), "offline" | "scripted") && !args.quiet {
        let http_flags = [
            ("--base-url", args.base_url.is_some()),
            ("--api-key-env", args.api_key_env.is_some()),
            ("--tool-choice", args.tool_choice.is_some()),
            ("--router-mode", args.router_mode.is_some()),
            ("--timeout", args.timeout.is_some()),
            ("--connect-timeout", args.connect_timeout.is_some()),
            ("--retries", args.retries.is_some()),
        ];
        let given: Vec<&str> = http_flags.iter().filter(|(_, set)| *set).map(|(flag, _)| *flag).collect();
        if !given.is_empty() {
            eprintln!("harness: note: {} ignored: the {name} provider makes no HTTP requests", given.join(", "));
        }
    }
    match name.as_str() {
        "offline" => {
            if !args.quiet {
                eprintln!(
                    "harness: using the offline router: a small deterministic matcher, not a model. To use a model, set --provider (see docs/operators.md)."
                );
            }
            Ok(Box::new(OfflineRouter))
        }
        "scripted" => {
            let path = script.ok_or_else(|| CliError::Usage("--provider scripted needs --script FILE".to_owned()))?;
            let script = ScriptedProvider::from_file(&path).map_err(|e| CliError::Usage(e.to_string()))?;
            Ok(Box::new(script))
        }
        other => {
            let preset = other.parse::<Preset>().map_err(|e| CliError::Usage(e.to_string()))?;
            let provider = http_provider(preset, args, config)?;
            if !args.quiet {
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

/// Seconds from a flag or the config, as a duration.
fn seconds(flag: &str, value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero() && value <= 1e6)
        .ok_or_else(|| CliError::Usage(format!("{flag} {value}: give a positive number of seconds")))
}

/// The tool choice override from the flag or the config, if any.
fn tool_choice(args: &RunArgs, config: &LoadedConfig) -> Option<String> {
    args.tool_choice.clone().or_else(|| config.config.tool_choice.clone())
}

/// An HTTP provider from the flags, then the config, then the preset's defaults.
fn http_provider(preset: Preset, args: &RunArgs, config: &LoadedConfig) -> Result<HttpProvider> {
    let file = &config.config;
    let defaults = HttpSettings::default();
    let mut http = HttpSettings { retries: args.retries.or(file.retries).unwrap_or(defaults.retries), ..defaults };
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
        max_tokens: file.max_tokens,
        app_url: file.openrouter.http_referer.clone(),
        app_title: file.openrouter.x_title.clone(),
        http,
    };
    HttpProvider::new(provider_config).map_err(|e| CliError::Usage(e.to_string()))
}

/// Runs `harness run` and returns the exit code.
pub(crate) fn run(args: RunArgs) -> Result<u8> {
    let config = LoadedConfig::load(args.plugins.config.as_deref())?;
    let provider = provider(&args, &config)?;
    let defaults = RunOptions::default();
    let limits = &config.config.limits;
    let options = RunOptions {
        max_steps: args.max_steps.or(config.config.max_steps).unwrap_or(8),
        max_repeats: args.max_repeats.or(config.config.max_repeats).unwrap_or(3),
        max_reply_bytes: limits.reply_bytes.unwrap_or(defaults.max_reply_bytes),
        max_arguments_bytes: limits.arguments_bytes.unwrap_or(defaults.max_arguments_bytes),
        max_conversation_bytes: limits.conversation_bytes.unwrap_or(defaults.max_conversation_bytes),
        max_duration: match args.max_seconds.or(config.config.max_seconds) {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Some(std::time::Duration::from_secs_f64(s)),
            Some(s) => return Err(CliError::Usage(format!("--max-seconds {s}: give a positive number of seconds"))),
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
    let mut trace_file = match &args.trace {
        Some(path) => Some(TraceWriter::new(BufWriter::new(
            File::create(path)
                .map_err(|e| CliError::Usage(format!("cannot create trace file {}: {e}", path.display())))?,
        ))),
        None => None,
    };

    let found = load_plugins(&args.plugins, &config, !args.quiet)?;
    let mut registry = ToolRegistry::new();
    for problem in found.register_tools(&mut registry) {
        eprintln!("harness: warning: {problem}");
    }
    if let Some(name) = tool_choice(&args, &config) {
        let named = !matches!(name.as_str(), "required" | "auto" | "none");
        if named && registry.get(&name).is_none() && !matches!(provider.name(), "offline" | "scripted") {
            let tools: Vec<&str> = registry.definitions().iter().map(|t| t.name.as_str()).collect();
            return Err(CliError::Usage(format!(
                "--tool-choice {name:?} is no loaded tool; use required, auto, none or one of: {}",
                tools.join(", ")
            )));
        }
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failure(format!("cannot start the async runtime: {e}")))?;
    let mut no_trace = NoTrace;
    let sink: &mut dyn TraceSink = match trace_file.as_mut() {
        Some(t) => t,
        None => &mut no_trace,
    };
    let mut progress = Progress { inner: sink, quiet: args.quiet };
    let outcome =
        runtime.block_on(harness_core::run(provider.as_ref(), &registry, &args.request, &options, &mut progress));
    // An abandoned in-process call may still be running; the process must not wait for it.
    runtime.shutdown_background();

    let stdout = io::stdout();
    let mut out = stdout.lock();
    let status = match outcome.status {
        RunStatus::Finished => "finished",
        RunStatus::StepBudgetExhausted => "step_budget_exhausted",
        RunStatus::TimeBudgetExhausted => "time_budget_exhausted",
        RunStatus::Failed => "failed",
    };
    let printed = if args.json {
        let mut obj = json!({ "status": status, "answer": outcome.answer, "steps": outcome.steps, "usage": outcome.usage, "retries": outcome.retries });
        if let Some(e) = &outcome.error {
            obj["error"] = e.to_value();
        }
        writeln!(out, "{obj}")
    } else {
        if let Some(e) = &outcome.error {
            eprintln!("harness: {status}: {e}");
        }
        match &outcome.answer {
            Some(Value::String(s)) => writeln!(out, "{s}"),
            Some(v) => writeln!(out, "{v}"),
            None => Ok(()),
        }
    };
    printed.map_err(|e| CliError::Failure(format!("cannot write to stdout: {e}")))?;
    Ok(match outcome.status {
        RunStatus::Finished => 0,
        RunStatus::StepBudgetExhausted | RunStatus::TimeBudgetExhausted => 3,
        RunStatus::Failed => 1,
    })
}
