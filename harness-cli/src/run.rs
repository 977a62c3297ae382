//! `harness run`: one request through the loop.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use harness_core::{
    ModelProvider, NoTrace, RunOptions, RunStatus, StepStatus, ToolRegistry, TraceEntry, TraceSink, TraceWriter,
};
use harness_providers::{OfflineRouter, ScriptedProvider};
use serde_json::{Value, json};

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;
use crate::setup::{PluginArgs, load_plugins};

const EXIT_CODES: &str = "\
Exit codes:
  0  the run finished (the router called finish)
  1  the run failed: provider error, trace error, plugin load failure
  2  usage or configuration error: a bad flag, a missing or unreadable --script or --config file, an invalid config
  3  the step budget was exhausted without finish";

/// Arguments of `harness run`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct RunArgs {
    /// The request for the agent.
    request: String,
    /// Model provider: offline (default, no model: a deterministic router) or scripted.
    #[arg(long)]
    provider: Option<String>,
    /// Model id, for providers that take one.
    #[arg(long)]
    model: Option<String>,
    /// JSON Lines file of router replies, for the scripted provider (implies --provider scripted).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Steps the run may take; the last one offers only finish. [default: 8]
    #[arg(long, value_name = "N")]
    max_steps: Option<u32>,
    /// The same call this many times in a row is rejected as repeated_call; 0 turns it off. [default: 3]
    #[arg(long, value_name = "N")]
    max_repeats: Option<u32>,
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
        other => Err(CliError::Usage(format!("unknown provider {other:?}; available: offline, scripted"))),
    }
}

/// Runs `harness run` and returns the exit code.
pub(crate) fn run(args: RunArgs) -> Result<u8> {
    let config = LoadedConfig::load(args.plugins.config.as_deref())?;
    let provider = provider(&args, &config)?;
    let options = RunOptions {
        max_steps: args.max_steps.or(config.config.max_steps).unwrap_or(8),
        max_repeats: args.max_repeats.or(config.config.max_repeats).unwrap_or(3),
        ..RunOptions::default()
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
