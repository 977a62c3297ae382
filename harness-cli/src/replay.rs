//! `harness replay TRACE`: the run again, with the trace's recorded replies as the router,
//! against today's plugins and configuration; every step compared with the record.
//!
//! A trace is data from elsewhere (a pull request, another machine): its calls are held to the
//! approval policy as a run's are, with no one to ask, and an MCP server starts only when a
//! recorded call of one of its tools is one the policy lets run.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use harness_core::{ApprovalPolicy, Approvals, Decision, Effect};
use harness_trace::{ReplayReport, Trace, cut, printable};

use crate::Result;
use crate::discovery::PluginArgs;
use crate::error::CliError;
use crate::provider::runtime;
use crate::settings::ReplaySettings;
use crate::tools::{Tools, Wants};

const EXIT_CODES: &str = "\
Exit codes:
  0  every step replayed as recorded: same tool, status, error code and result, and the same ending
  1  something drifted (each difference is named: step, tool, what, recorded and replayed), or some
     lines of the trace could not be read
  2  the trace cannot be read or replayed (no first line: written before trace format 2), or a usage error";

/// Arguments of `harness replay`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct ReplayArgs {
    /// The trace of a run (`harness run --trace FILE`); - reads standard input.
    pub(crate) trace: PathBuf,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    /// Which recorded calls run: the config's `[policy]`, then these flags, as for `harness
    /// run`; replay never asks, so a call the policy would ask about stops it awaiting_approval.
    #[command(flatten)]
    pub(crate) policy: crate::approve::PolicyArgs,
    #[command(flatten)]
    pub(crate) plugins: PluginArgs,
}

/// Runs `harness replay` with its resolved settings and returns the exit code.
pub(crate) fn replay(args: ReplaySettings) -> Result<u8> {
    let trace = harness_trace::read(&args.trace).map_err(|e| CliError::Usage(e.to_string()))?;
    let name = args.trace.display().to_string();
    for (line, why) in &trace.bad {
        crate::log::notice!("harness: replay: {name}:{line}: {why}; the record is incomplete there");
    }
    for (line, what) in &trace.notes {
        crate::log::notice!("harness: replay: {name}:{line}: {what}");
    }
    let start = trace
        .start
        .as_ref()
        .map(|s| &s.value)
        .ok_or_else(|| CliError::Usage(format!("{name}: {}", harness_trace::ReplayError::NoFirstLine)))?;
    let mut options = harness_trace::replay_options(start);
    if let Some(format) = args.reply_format {
        options.reply_format = format;
    }
    let policy = args.policy;
    let servers = mcp_servers_needed(&trace, &policy);
    let wants = Wants { mcp: !servers.is_empty(), mcp_only: Some(&servers), ..Wants::default() };
    let tools = Tools::wire(&args.tools, wants)?;
    let runtime = runtime(1)?;
    let approvals = Approvals::new(policy, None);
    let replayed = runtime.block_on(harness_trace::replay(&trace, &tools.registry, &options, approvals));
    runtime.shutdown_background();
    drop(tools);
    let mut report = replayed.map_err(|e| CliError::Usage(format!("{name}: {e}")))?;
    not_started(&trace, &servers, &mut report);

    let text = if args.json {
        format!("{}\n", serde_json::to_string(&report).unwrap_or_default())
    } else {
        describe(&name, &report)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError::Failure(format!("cannot write to stdout: {e}")))?;
    Ok(if report.clean { 0 } else { 1 })
}

/// The MCP servers a replayed call may reach: those the trace recorded a call to, whose call
/// the policy allows outright (MCP tools are `network`). Any other server is not started: a
/// call to it would stop the replay before it ran.
fn mcp_servers_needed(trace: &Trace, policy: &ApprovalPolicy) -> Vec<String> {
    let offered_by = |tool: &str| {
        let start = trace.start.as_ref()?;
        start.value.tools.iter().find(|t| t.name == tool).and_then(|t| t.mcp_server.clone())
    };
    let mut servers: Vec<String> = Vec::new();
    for step in trace.lines.iter().map(|l| &l.value) {
        let Some(tool) = &step.tool else { continue };
        let Some(server) = step.mcp_server.clone().or_else(|| offered_by(tool)) else { continue };
        if policy.decide(&format!("{server}.{tool}"), Effect::Network) == Decision::Allow && !servers.contains(&server)
        {
            servers.push(server);
        }
    }
    servers
}

/// Tools of MCP servers that were not started are not compared: said on stderr, and left out
/// of the tools that changed.
fn not_started(trace: &Trace, started: &[String], report: &mut ReplayReport) {
    let Some(start) = &trace.start else { return };
    let unstarted = |tool: &str| {
        start.value.tools.iter().any(|t| t.name == tool && t.mcp_server.as_ref().is_some_and(|s| !started.contains(s)))
    };
    let before = report.tools_changed.len();
    report.tools_changed.retain(|c| !unstarted(&c.tool));
    if report.tools_changed.len() < before {
        crate::log::notice!(
            "harness: replay: the MCP servers no replayed call may reach (the policy would not run it) were not started; their tools are not compared"
        );
    }
}

/// The report for a person: one line when clean, else each difference on a line.
fn describe(name: &str, report: &ReplayReport) -> String {
    let mut text = if report.clean {
        format!(
            "replay of {name}: {} steps replayed as recorded, ended {}; no drift\n",
            report.replayed_steps, report.replayed_end
        )
    } else {
        format!(
            "replay of {name}: DRIFT ({} of {} recorded steps differ; recorded run ended {}, the replay {})\n",
            report.drift.len(),
            report.recorded_steps,
            report.recorded_end,
            report.replayed_end
        )
    };
    for d in &report.drift {
        let tool = d.tool.as_deref().unwrap_or("-");
        let line = format!("  step {} {tool}: {}: recorded {}, replayed {}", d.step, d.what, d.recorded, d.replayed);
        text.push_str(&cut(&printable(&line), 400));
        text.push('\n');
        for change in &d.tool_changed {
            text.push_str(&format!("    {tool} {}\n", printable(change)));
        }
    }
    if let Some(end) = &report.end_drift {
        text.push_str(&format!("  ending: {end}\n"));
    }
    if report.replayed_end == "awaiting_approval" && report.recorded_end != "awaiting_approval" {
        text.push_str("  the replay ran no call the policy would ask about (no one answers in a replay): allow what you trust the trace to run with --allow TOOL or --allow CLASS\n");
    }
    for u in &report.unread_lines {
        text.push_str(&format!("  line {} of the trace could not be read: {}\n", u.line, printable(&u.problem)));
    }
    let unnoticed: Vec<_> = report
        .tools_changed
        .iter()
        .filter(|c| !report.drift.iter().any(|d| d.tool.as_ref() == Some(&c.tool)))
        .collect();
    if !unnoticed.is_empty() {
        text.push_str("tools changed since the recording (no step noticed):\n");
        for c in unnoticed {
            text.push_str(&format!("  {} {}\n", printable(&c.tool), printable(&c.change)));
        }
    }
    text
}
