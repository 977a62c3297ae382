//! `harness trace show`: the run and its steps as a table a person reads in a terminal.

use std::fmt::Write as _;

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, Width};
use harness_trace::{Ending, StepStatus as Status, Trace, brief, cut, printable};
use serde_json::Value;

use super::human_us;

/// Widest a tool name is shown before it is cut.
const TOOL_WIDTH: usize = 24;
/// Widest the one-line summary of a step is.
const BRIEF_WIDTH: usize = 100;

/// What the run was asked and with what, the table, then a line summing the run up.
pub(crate) fn table(trace: &Trace) -> String {
    let mut steps = Table::new();
    // No borders, two spaces between columns, no wrapping: the output is often piped or read
    // in a log, where the terminal's width means nothing. Columns are as wide as their
    // widest cell on screen (a CJK character or an emoji takes two columns, not one).
    steps.load_style(NOTHING).set_content_arrangement(ContentArrangement::Disabled);
    steps.set_header(["STEP", "TOOL", "STATUS", "TIME", "ROUTER", "ERROR", "ARGUMENTS → RESULT"]);
    for s in trace.lines.iter().map(|l| &l.value) {
        steps.add_row([
            s.step.to_string(),
            cut(&printable(s.tool.as_deref().unwrap_or("-")), TOOL_WIDTH),
            s.status.as_str().to_owned(),
            human_us(s.duration_us),
            cut(&printable(s.router_mode.as_deref().unwrap_or("-")), 6),
            s.error.as_ref().map_or(String::new(), |e| printable(&e.code)),
            brief(s, BRIEF_WIDTH),
        ]);
    }
    let last = steps.column_count() - 1;
    for (i, column) in steps.column_iter_mut().enumerate() {
        column.set_padding((0, if i == last { 0 } else { 2 }));
    }
    // The least widths the table had before comfy-table drew it, so that its look stays; a
    // lower boundary counts the column's padding.
    for (i, right, least) in [(0, true, 4), (2, false, 8), (3, true, 9)] {
        if let Some(column) = steps.column_mut(i) {
            column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(least + 2)));
            if right {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
    }

    let mut out = header(trace);
    let mut lines = steps.lines();
    for line in lines.by_ref().take(1) {
        let _ = writeln!(out, "{}", line.trim_end());
    }
    // One drawn line a step: every cell is one line, `printable` having escaped newlines.
    for (line, step) in lines.zip(&trace.lines) {
        let _ = writeln!(out, "{}", line.trim_end());
        if let Some(reasoning) = step.value.reasoning() {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The screen column `word` starts at in `line`, every non-ASCII character before it being
    /// one that takes two columns (the CJK of the test below).
    fn column_of(line: &str, word: &str) -> usize {
        let at = line.find(word).unwrap_or_else(|| panic!("{word:?} not in {line:?}"));
        line[..at].chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum()
    }

    #[test]
    fn columns_stay_aligned_when_a_cell_holds_wide_characters() {
        let trace = harness_trace::parse(
            concat!(
                "{\"step\":1,\"tool\":\"計算機\",\"arguments\":{},\"status\":\"ok\",\"result\":1,\"duration_us\":1}\n",
                "{\"step\":2,\"tool\":\"finish\",\"arguments\":{\"answer\":1},\"status\":\"finished\",\"result\":1,\"duration_us\":1}\n",
            )
            .as_bytes(),
        );
        let shown = table(&trace);
        let lines: Vec<&str> = shown.lines().take(3).collect();
        let [head, wide, narrow] = lines[..] else { panic!("{shown}") };
        // Before comfy-table the tool column was padded by characters: 計算機 took three
        // columns too many, and every column after it moved right.
        assert_eq!(column_of(wide, "ok"), column_of(head, "STATUS"), "{shown}");
        assert_eq!(column_of(narrow, "finished"), column_of(head, "STATUS"), "{shown}");
        assert_eq!(column_of(wide, " ms"), column_of(narrow, " ms"), "{shown}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{shown}");
    }
}
