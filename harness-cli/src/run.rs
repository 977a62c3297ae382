//! `harness run`: one request through the loop.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use harness_core::{
    RunEnd, RunStart, RunStatus, StepStatus, ToolRegistry, TraceEntry, TraceSink, TraceWriter, run_traced,
};
use serde_json::{Value, json};

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;
use crate::setup::{PluginArgs, load_plugins};
use crate::wiring::{
    LoopArgs, ProviderArgs, build_provider, check_tool_choice, otlp_export, provider_name, run_about, run_options,
    runtime, status_name,
};
use harness_trace::{Tee, cut, printable};

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
    #[command(flatten)]
    provider: ProviderArgs,
    #[command(flatten)]
    limits: LoopArgs,
    /// Write the trace to FILE: a first line saying what was asked and with what, one line per step, a last
    /// line saying how the run ended (see docs/traces.md).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Export the run's spans (OpenTelemetry GenAI conventions) over OTLP/HTTP to the collector at URL, such as
    /// http://localhost:4318; OTEL_EXPORTER_OTLP_ENDPOINT does the same (see docs/traces.md).
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
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

impl TraceSink for Progress<'_> {
    fn begin(&mut self, start: &RunStart) -> io::Result<()> {
        self.inner.begin(start)
    }
    fn end(&mut self, end: &RunEnd) -> io::Result<()> {
        self.inner.end(end)
    }
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        self.inner.record(entry)?;
        if !self.quiet {
            let tool = entry.tool.unwrap_or("-");
            let args = entry.arguments.map(|a| cut(&a.to_string(), 80)).unwrap_or_default();
            let what = match (entry.status, entry.error, entry.result) {
                (_, Some(e), _) => format!("{} {}", e.code.as_str(), e.message),
                (StepStatus::Finished, _, _) => "finished".to_owned(),
                (_, _, Some(r)) => format!("ok {}", cut(&r.to_string(), 80)),
                _ => String::new(),
            };
            // The line carries model and tool output: printed as `trace show` prints it, with
            // control characters escaped, so that it cannot drive the terminal.
            let line = format!("step {} {tool} {args} -> {what}", entry.step);
            eprintln!("harness: {}", printable(&line));
        }
        Ok(())
    }
}

/// Runs `harness run` and returns the exit code.
pub(crate) fn run(args: RunArgs) -> Result<u8> {
    let config = LoadedConfig::load(args.plugins.config.as_deref())?;
    let provider = build_provider(&args.provider, &config, args.quiet)?;
    let mut options = run_options(&args.limits, &config)?;
    // One loop on a current-thread runtime: nothing else waits while an in-process plugin
    // call runs, so the thread handoff (most of a step's cost) is skipped.
    options.inline_calls = true;
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
    let mcp_servers = crate::mcp::add_mcp_tools(&args.plugins, &config, &mut registry, !args.quiet)?;
    check_tool_choice(&args.provider, &config, &registry, &provider_name(&args.provider, &config))?;

    let otlp = otlp_export(args.otlp.as_deref())?;
    let runtime = runtime(1)?;
    let mut sinks = Tee::new();
    if let Some(file) = trace_file.as_mut() {
        sinks.push(file);
    }
    if let Some(otlp) = &otlp {
        sinks.push(otlp.sink());
    }
    let mut progress = Progress { inner: &mut sinks, quiet: args.quiet };
    let about = run_about(&args.provider, &config);
    let outcome =
        runtime.block_on(run_traced(provider.as_ref(), &registry, &args.request, &options, &about, &mut progress));
    drop(sinks);
    // An abandoned in-process call may still be running; the process must not wait for it.
    runtime.shutdown_background();
    mcp_servers.shutdown();
    if let Some(otlp) = otlp {
        otlp.shutdown();
    }

    let stdout = io::stdout();
    let mut out = stdout.lock();
    let status = status_name(outcome.status);
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
