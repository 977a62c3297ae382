//! `harness replay TRACE`: the run again, with the trace's recorded replies as the router,
//! against today's plugins and configuration; every step compared with the record.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use harness_trace::{ReplayReport, cut, printable};

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;
use crate::setup::PluginArgs;
use crate::tools::{Tools, Wants};
use crate::wiring::{reply_format, runtime};

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
    trace: PathBuf,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plugins: PluginArgs,
}

/// Runs `harness replay` and returns the exit code.
pub(crate) fn replay(args: ReplayArgs) -> Result<u8> {
    let trace = harness_trace::read(&args.trace).map_err(|e| CliError::Usage(e.to_string()))?;
    let name = args.trace.display().to_string();
    for (line, why) in &trace.bad {
        eprintln!("harness: replay: {name}:{line}: {why}; the record is incomplete there");
    }
    for (line, what) in &trace.notes {
        eprintln!("harness: replay: {name}:{line}: {what}");
    }
    let start = trace
        .start
        .as_ref()
        .map(|s| &s.value)
        .ok_or_else(|| CliError::Usage(format!("{name}: {}", harness_trace::ReplayError::NoFirstLine)))?;
    let config = LoadedConfig::load(args.plugins.config.as_deref())?;
    let mut options = harness_trace::replay_options(start);
    if let Some(format) = reply_format(None, &config, "reply_format")? {
        options.reply_format = format;
    }
    let tools = Tools::wire(&args.plugins, &config, Wants { mcp: true, ..Wants::default() })?;
    let runtime = runtime(1)?;
    let replayed = runtime.block_on(harness_trace::replay(&trace, &tools.registry, &options));
    runtime.shutdown_background();
    drop(tools);
    let report = replayed.map_err(|e| CliError::Usage(format!("{name}: {e}")))?;

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
