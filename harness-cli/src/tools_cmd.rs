//! `harness tools call NAME JSON`: one tool run without a model, through the same wiring as a
//! run (discovery, isolation and confinement, the schema, the operator's policy, the tool's
//! timeout), its result printed as JSON.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use harness_core::{
    Decision, ErrorCode, FINISH, HarnessError, RegisteredTool, StepStatus, ToolRegistry, ToolSource, TraceEntry,
    TraceSink, TraceWriter, call_tool, printable,
};
use serde_json::Value;

use crate::Result;
use crate::approve::PolicyArgs;
use crate::discovery::PluginArgs;
use crate::error::CliError;
use crate::settings::CallSettings;
use crate::tools::{Tools, Wants};

/// The exit codes of `tools call`, as its `--help` ends.
const CALL_EXIT_CODES: &str = "\
Exit codes:
  0  the tool ran: its result is on stdout, as JSON
  1  the tool failed (tool_error, tool_timeout, tool_panicked, a result its output schema refuses): the error is on stderr
  2  usage: a bad flag or configuration, arguments that are not JSON or do not match the tool's schema (the field is named), an unknown tool (the offered ones are named)
  4  the operator's policy refused the call: it denies the tool or its effect class, or asks, and `tools call` asks no one (--allow TOOL|CLASS runs it)";

/// `harness tools ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// Run one tool with JSON arguments, without a model, as a run's step would run it.
    ///
    /// The tool is found, confined and limited as in a run; its arguments are checked against
    /// its schema and the call against the operator's policy before it runs.
    Call(Box<CallArgs>),
}

/// Arguments of `harness tools call`.
#[derive(Debug, Args)]
#[command(
    after_help = CALL_EXIT_CODES,
    mut_arg("deny", |a| a.value_name("CLASS|TOOL").help("Never run calls of this class or tool (call_denied, exit 4); repeatable")),
)]
pub(crate) struct CallArgs {
    /// The tool, as a run offers it to the model (`harness plugins list` shows them).
    #[arg(value_name = "NAME")]
    pub(crate) tool: String,
    /// The arguments, a JSON object; `-` reads them from standard input. Default: `{}`.
    #[arg(value_name = "JSON", conflicts_with = "args_file")]
    pub(crate) arguments: Option<String>,
    /// Read the arguments from FILE, a JSON object.
    #[arg(long = "args", value_name = "FILE")]
    pub(crate) args_file: Option<PathBuf>,
    /// Which calls run: the config's `[policy]`, then these flags. No one is asked: a call the
    /// policy asks about is refused unless --allow names its tool or effect class.
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Write the call to FILE as one trace step, as a run's trace records a step.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) plugins: PluginArgs,
}

/// Runs `harness tools ...` and returns the exit code.
pub(crate) fn tools(command: ToolsCommand) -> Result<u8> {
    match command {
        ToolsCommand::Call(args) => crate::settings::CallSettings::resolve(&args).and_then(call),
    }
}

/// `harness tools call` with its resolved settings.
fn call(resolved: CallSettings) -> Result<u8> {
    let CallSettings { tool, arguments, policy, trace: trace_path, tools: settings } = resolved;
    let mut trace = match &trace_path {
        Some(path) => Some(TraceWriter::new(
            harness_core::no_follow::create_file(path)
                .map_err(|e| CliError::Usage(format!("cannot create trace file {}: {e}", path.display())))?,
        )),
        None => None,
    };
    // The MCP servers are started too: a run offers their tools with the plugins'.
    let wants = Wants { report: !crate::log::quiet(), open_lazily: true, mcp: true, ..Wants::default() };
    let tools = Tools::wire(&settings, wants)?;
    let registry = &tools.registry;
    let Some(found) = registry.get(&tool).filter(|t| t.definition.name != FINISH) else {
        return Err(CliError::Usage(unknown(&tool, registry)));
    };
    let limit = settings.max_arguments_bytes;
    let started = Instant::now();
    let outcome = match refused(&found, &policy) {
        Some(refusal) => Err(refusal),
        None => within(&tool, &arguments, limit).and_then(|()| run_one(registry, &tool, arguments.clone())),
    };
    if let (Some(trace), Some(path)) = (trace.as_mut(), &trace_path) {
        record(trace, &found, &arguments, &outcome, started)
            .map_err(|e| CliError::Failure(format!("cannot write trace file {}: {e}", path.display())))?;
    }
    drop(tools);
    finish(&tool, outcome)
}

/// The arguments: the JSON given (`given`), `-` (stdin), `--args FILE` (`file`), or `{}`; not
/// JSON is a usage error.
pub(crate) fn arguments(given: Option<&str>, file: Option<&std::path::Path>) -> Result<Value> {
    let (text, from) = match (given, file) {
        (Some("-"), None) => (crate::run::from_stdin("the arguments")?, "stdin".to_owned()),
        (Some(text), None) => (text.to_owned(), "the JSON argument".to_owned()),
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::Usage(format!("--args {}: cannot read it: {e}", path.display())))?;
            (text, format!("--args {}", path.display()))
        }
        (None, None) => return Ok(Value::Object(serde_json::Map::new())),
    };
    serde_json::from_str(&text).map_err(|e| {
        CliError::Usage(format!(
            "{from}: the arguments are not JSON ({e}); give an object, such as '{{\"expression\": \"6*7\"}}'"
        ))
    })
}

/// Why `found` may not run under `policy`, if it may not: only `allow` runs, since no one is asked.
fn refused(found: &RegisteredTool<'_>, policy: &harness_core::ApprovalPolicy) -> Option<HarnessError> {
    let (key, effect) = (found.policy_key(), found.policy_effect());
    let why = match policy.decide(&key, effect) {
        Decision::Allow => return None,
        Decision::Deny => format!("the operator's policy denies {key} ({})", effect.as_str()),
        Decision::Ask => format!(
            "the operator's policy asks before {key} ({}), and `tools call` asks no one; --allow {key} (or --allow {}) runs it",
            effect.as_str(),
            effect.as_str()
        ),
    };
    let tool = &found.definition.name;
    let details = serde_json::json!({ "tool": tool, "effect": effect, "reason": null });
    Some(HarnessError::new(ErrorCode::CallDenied, format!("the call to {tool:?} was not run: {why}"), details))
}

/// Refuses arguments over the configured limit before the tool sees them, as a run does.
fn within(tool: &str, arguments: &Value, limit: usize) -> std::result::Result<(), HarnessError> {
    let bytes = serde_json::to_vec(arguments).map_or(0, |v| v.len());
    if bytes <= limit {
        return Ok(());
    }
    Err(HarnessError::new(
        ErrorCode::ArgumentsTooLarge,
        format!(
            "the arguments of the call to {tool:?} are {bytes} bytes, over the limit of {limit} ([limits] arguments_bytes)"
        ),
        serde_json::json!({ "tool": tool, "bytes": bytes, "limit": limit }),
    ))
}

/// Validates and runs the call as a step would: schema, timeout, the result's own schema.
fn run_one(registry: &ToolRegistry, tool: &str, arguments: Value) -> std::result::Result<Value, HarnessError> {
    let runtime = crate::provider::runtime(1)
        .map_err(|e| HarnessError::new(ErrorCode::ToolError, e.to_string(), serde_json::json!({ "tool": tool })))?;
    let outcome = runtime.block_on(call_tool(registry, tool, arguments));
    // A call abandoned at its timeout may still be running in-process: the process must not wait.
    runtime.shutdown_background();
    outcome
}

/// No tool of that name: the offered ones, and where to read why one is not.
fn unknown(tool: &str, registry: &ToolRegistry) -> String {
    let offered: Vec<String> =
        registry.definitions().iter().filter(|d| d.name != FINISH).map(|d| printable(&d.name)).collect();
    let offered = if offered.is_empty() { "none".to_owned() } else { offered.join(", ") };
    format!(
        "there is no tool named \"{}\"; offered: {offered}. `harness plugins list` says why a tool is not offered",
        printable(tool)
    )
}

/// Writes the call as one trace step, as `mcp serve --trace` writes each call.
fn record(
    trace: &mut dyn TraceSink,
    found: &RegisteredTool<'_>,
    arguments: &Value,
    outcome: &std::result::Result<Value, HarnessError>,
    started: Instant,
) -> std::io::Result<()> {
    let (plugin, plugin_version) = match &found.definition.source {
        ToolSource::Plugin { name, version } => (Some(name.as_str()), Some(version.as_str())),
        _ => (None, None),
    };
    let status = match outcome {
        Ok(_) => StepStatus::Ok,
        Err(e) if is_rejection(e.code) => StepStatus::Rejected,
        Err(_) => StepStatus::Error,
    };
    let duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    trace.record(&TraceEntry {
        tool: Some(&found.definition.name),
        arguments: Some(arguments),
        result: outcome.as_ref().ok(),
        error: outcome.as_ref().err(),
        plugin,
        plugin_version,
        ..TraceEntry::new(1, status, "all", duration_us)
    })
}

/// Whether the call was refused before its tool ran (a rejected step, in a trace).
fn is_rejection(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::UnknownTool | ErrorCode::InvalidArguments | ErrorCode::ArgumentsTooLarge | ErrorCode::CallDenied
    )
}

/// Prints the result on stdout, or the error on stderr, and gives the exit code.
fn finish(tool: &str, outcome: std::result::Result<Value, HarnessError>) -> Result<u8> {
    match outcome {
        Ok(result) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{result}").map_err(|e| CliError::Failure(format!("cannot write to stdout: {e}")))?;
            Ok(0)
        }
        Err(e) => {
            // The message carries the tool's own words: shown, never obeyed by the terminal.
            let said = printable(&format!("{tool}: {}: {}", e.code.as_str(), e.message));
            match e.code {
                ErrorCode::CallDenied => Err(CliError::Refused(said)),
                code if is_rejection(code) => Err(CliError::Usage(said)),
                _ => Err(CliError::Failure(said)),
            }
        }
    }
}
