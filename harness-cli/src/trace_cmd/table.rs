//! `harness trace show`: the run and its steps as a table a person reads in a terminal.

use std::fmt::Write as _;

use harness_trace::{Ending, StepStatus as Status, Trace, brief, cut, printable};
use serde_json::Value;

use super::human_us;

/// Widest a tool name is shown before it is cut.
const TOOL_WIDTH: usize = 24;
/// Widest the one-line summary of a step is.
const BRIEF_WIDTH: usize = 100;

/// What the run was asked and with what, the table, then a line summing the run up.
pub(crate) fn table(trace: &Trace) -> String {
    let tools: Vec<String> =
        trace.lines.iter().map(|l| cut(&printable(l.value.tool.as_deref().unwrap_or("-")), TOOL_WIDTH)).collect();
    let tool_width = tools.iter().map(|t| t.chars().count()).max().unwrap_or(0).max(4);
    let codes: Vec<String> =
        trace.lines.iter().map(|l| l.value.error.as_ref().map_or(String::new(), |e| printable(&e.code))).collect();
    let code_width = codes.iter().map(|c| c.chars().count()).max().unwrap_or(0).max(5);

    let mut out = header(trace);
    let _ = writeln!(
        out,
        "{:>4}  {:<tool_width$}  {:<8}  {:>9}  {:<6}  {:<code_width$}  ARGUMENTS → RESULT",
        "STEP", "TOOL", "STATUS", "TIME", "ROUTER", "ERROR"
    );
    for ((line, tool), code) in trace.lines.iter().zip(&tools).zip(&codes) {
        let s = &line.value;
        let _ = writeln!(
            out,
            "{:>4}  {:<tool_width$}  {:<8}  {:>9}  {:<6}  {:<code_width$}  {}",
            s.step,
            tool,
            s.status.as_str(),
            human_us(s.duration_us),
            cut(&printable(s.router_mode.as_deref().unwrap_or("-")), 6),
            code,
            brief(s, BRIEF_WIDTH)
        );
        if let Some(reasoning) = s.reasoning() {
            let _ = writeln!(out, "{:>4}  reasoning: {}", "", cut(&printable(reasoning), BRIEF_WIDTH));
        }
    }
    if trace.lines.is_empty() {
        out.push_str("(no steps)\n");
    }
    out.push('\n');
    out.push_str(&summary_text(trace));
    out.push('\n');
    out
}

/// The request and what answered it, from the trace's first line; nothing for older traces.
fn header(trace: &Trace) -> String {
    let Some(start) = &trace.start else { return String::new() };
    let s = &start.value;
    let mut with = vec![format!("provider {}", s.provider)];
    with.extend(s.model.as_ref().map(|m| format!("model {m}")));
    with.extend(s.router_mode.as_ref().map(|m| format!("router mode {m}")));
    with.push(format!("{} tools", s.tools.len()));
    with.push(format!("max {} steps", s.limits.max_steps));
    with.push(format!("harness {}", s.harness_version));
    if !s.started_at.is_empty() {
        with.push(format!("started {}", s.started_at));
    }
    format!(
        "request: {}\n{}\n\n",
        cut(&printable(&Value::from(s.request.as_str()).to_string()), 200),
        printable(&with.join(" · "))
    )
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

/// `status: code: message`, the code said once when it is the status's own word
/// (`step_budget_exhausted: the run took all 2 steps ...`).
pub(crate) fn ended_with(status: &str, code: &str, message: &str) -> String {
    if code == status { format!("{status}: {message}") } else { format!("{status}: {code}: {message}") }
}

/// One line saying how the run ended.
pub(crate) fn ending_text(ending: &Ending<'_>) -> String {
    let answer = |a: Option<&Value>| cut(&printable(&a.map_or_else(|| "null".to_owned(), Value::to_string)), 200);
    match ending {
        Ending::Recorded(end) => match &end.error {
            None => format!("{}: {}", end.status.as_str(), answer(end.answer.as_ref())),
            Some(e) => ended_with(end.status.as_str(), &printable(&e.code), &cut(&printable(&e.message), 200)),
        },
        Ending::Killed => "ended without a record (killed?): the trace has no last line".to_owned(),
        Ending::Finished(a) => format!("finished: {}", answer(*a)),
        Ending::Failed(e) => ended_with("failed", &printable(&e.code), &cut(&printable(&e.message), 200)),
        Ending::Unfinished => {
            "not finished: no finish call (the step or time budget ran out, or the run was stopped)".to_owned()
        }
        Ending::Empty => "no steps".to_owned(),
    }
}
