//! `harness trace show`: the steps as a table a person reads in a terminal.

use std::fmt::Write as _;

use serde_json::Value;

use super::read::{Ending, Status, Trace, brief, cut, human_us, printable};

/// Widest a tool name is shown before it is cut.
const TOOL_WIDTH: usize = 24;
/// Widest the one-line summary of a step is.
const BRIEF_WIDTH: usize = 100;

/// The table, then a line summing the run up.
pub(crate) fn table(trace: &Trace) -> String {
    let tools: Vec<String> =
        trace.lines.iter().map(|l| cut(&printable(l.step.tool.as_deref().unwrap_or("-")), TOOL_WIDTH)).collect();
    let tool_width = tools.iter().map(|t| t.chars().count()).max().unwrap_or(0).max(4);
    let codes: Vec<String> =
        trace.lines.iter().map(|l| l.step.error.as_ref().map_or(String::new(), |e| printable(&e.code))).collect();
    let code_width = codes.iter().map(|c| c.chars().count()).max().unwrap_or(0).max(5);

    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>4}  {:<tool_width$}  {:<8}  {:>9}  {:<code_width$}  ARGUMENTS → RESULT",
        "STEP", "TOOL", "STATUS", "TIME", "ERROR"
    );
    for ((line, tool), code) in trace.lines.iter().zip(&tools).zip(&codes) {
        let s = &line.step;
        let _ = writeln!(
            out,
            "{:>4}  {:<tool_width$}  {:<8}  {:>9}  {:<code_width$}  {}",
            s.step,
            tool,
            s.status.as_str(),
            human_us(s.duration_us),
            code,
            brief(s, BRIEF_WIDTH)
        );
    }
    if trace.lines.is_empty() {
        out.push_str("(no steps)\n");
    }
    out.push('\n');
    out.push_str(&summary_text(trace));
    out.push('\n');
    out
}

/// "5 steps: 1 ok, 2 rejected, ... · 0.91 ms (model 0.04 ms) · tokens 0 in, 0 out", then how it ended.
pub(crate) fn summary_text(trace: &Trace) -> String {
    let summary = trace.summary();
    let counts: Vec<String> = Status::ALL
        .iter()
        .zip(summary.counts)
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect();
    let steps = trace.lines.len();
    let mut text = format!(
        "{steps} step{}{}{} · {} (model {}) · tokens {} in, {} out",
        if steps == 1 { "" } else { "s" },
        if counts.is_empty() { "" } else { ": " },
        counts.join(", "),
        human_us(summary.duration_us),
        human_us(summary.model_us),
        summary.tokens.input_tokens,
        summary.tokens.output_tokens,
    );
    let _ = write!(text, "\n{}", ending_text(&summary.ending));
    text
}

/// One line saying how the run ended.
pub(crate) fn ending_text(ending: &Ending<'_>) -> String {
    match ending {
        Ending::Finished(answer) => {
            let answer = answer.map_or_else(|| "null".to_owned(), Value::to_string);
            format!("finished: {}", cut(&printable(&answer), 200))
        }
        Ending::Failed(e) => format!("failed: {} {}", printable(&e.code), cut(&printable(&e.message), 200)),
        Ending::Unfinished => {
            "not finished: no finish call (the step or time budget ran out, or the run was stopped)".to_owned()
        }
        Ending::Empty => "no steps".to_owned(),
    }
}
