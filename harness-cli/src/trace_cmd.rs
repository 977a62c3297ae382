//! `harness trace`: read a run's trace (the JSON Lines of `run --trace` or `batch --traces`).

mod html;
mod table;

pub(crate) use table::ended_with;

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use crate::Result;
use crate::error::CliError;

const EXIT_CODES: &str = "\
Exit codes:
  0  every line of the trace was read
  1  some lines are not trace lines: each is reported on stderr with its number and left out of the output
  2  the trace cannot be read, or the output cannot be written";

/// What to do with a trace.
#[derive(Debug, Subcommand)]
pub(crate) enum TraceCommand {
    /// Print the steps as a table: step, tool, status, time, error code, arguments → result.
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The trace file (JSON Lines); - reads standard input.
        file: PathBuf,
        /// Print the lines that were read (first line, steps, last line) as they are, one JSON object a line.
        #[arg(long)]
        json: bool,
    },
    /// Write a self-contained HTML report: a timeline of the steps, each expandable, and the run's summary.
    #[command(after_help = EXIT_CODES)]
    Html {
        /// The trace file (JSON Lines); - reads standard input.
        file: PathBuf,
        /// The HTML file to write.
        #[arg(long, short, value_name = "REPORT.html")]
        output: PathBuf,
    },
}

/// Runs `harness trace ...` and returns the exit code.
pub(crate) fn trace(command: TraceCommand) -> Result<u8> {
    let file = match &command {
        TraceCommand::Show { file, .. } | TraceCommand::Html { file, .. } => file.clone(),
    };
    let trace = harness_trace::read(&file).map_err(|e| CliError::Usage(e.to_string()))?;
    let name = file.display().to_string();
    for (line, why) in &trace.bad {
        crate::log::notice!("harness: trace: {name}:{line}: {why}; left out");
    }
    for (line, what) in &trace.notes {
        crate::log::notice!("harness: trace: {name}:{line}: {what}");
    }
    match command {
        TraceCommand::Show { json, .. } => {
            let text =
                if json { trace.valid_lines().map(|l| format!("{l}\n")).collect() } else { table::table(&trace) };
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(|e| CliError::Usage(format!("cannot write to stdout: {e}")))?;
        }
        TraceCommand::Html { output, .. } => {
            let title = file.file_name().map_or_else(|| name.clone(), |f| f.to_string_lossy().into_owned());
            harness_core::no_follow::create_file(&output)
                .and_then(|mut f| std::io::Write::write_all(&mut f, html::report(&trace, &title).as_bytes()))
                .map_err(|e| CliError::Usage(format!("cannot write the report {}: {e}", output.display())))?;
        }
    }
    Ok(if trace.bad.is_empty() { 0 } else { 1 })
}

/// "0.03 ms", "12.3 ms", "1.20 s".
pub(crate) fn human_us(us: u64) -> String {
    crate::batch::progress::human_ms(us as f64 / 1000.0)
}
