//! The report: each task's verdict with the run's steps, tokens and time, right/total per tool
//! and per number of steps, and the totals; as a table for people or as JSON.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::expect::{Verdict, score};
use crate::outcome::Outcome;
use crate::tasks::Task;

/// The widest an answer is shown in the table; the JSON report has it whole.
const ANSWER_WIDTH: usize = 32;

/// A whole eval's report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Tasks answered right.
    pub right: usize,
    /// Tasks in the file.
    pub total: usize,
    /// `right / total`, from 0 to 1.
    pub score: f64,
    /// Steps taken over every run that says.
    pub steps: u64,
    /// Tokens spent over every run that says.
    pub tokens: u64,
    /// Wall time of the runs, summed, in seconds.
    pub seconds: f64,
    /// Right/total among the tasks tagged with each tool, by tool name.
    pub by_tool: Vec<Group>,
    /// Right/total among the tasks of each `steps` tag.
    pub by_steps: Vec<Group>,
    /// Each task, in file order.
    pub tasks: Vec<TaskReport>,
}

/// Right/total in one group of tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The tool's name, or the number of steps.
    pub name: String,
    /// Tasks of the group answered right.
    pub right: usize,
    /// Tasks in the group.
    pub total: usize,
}

/// One task's verdict and what its run cost.
#[derive(Debug, Serialize)]
pub struct TaskReport {
    /// The task's id, as its line gave it.
    pub id: Value,
    /// Whether the answer is right.
    pub right: bool,
    /// Why it is wrong, or null.
    pub why: Option<String>,
    /// How the run ended (`finished`, ...), or `not_run` when nothing answered the task.
    pub status: String,
    /// The final answer, or null.
    pub answer: Option<Value>,
    /// What a right answer is, in short.
    pub expected: String,
    /// The task's tools tag.
    pub tools: Vec<String>,
    /// The task's steps tag: the tool calls a right run makes.
    pub expected_steps: Option<u32>,
    /// Steps the run took.
    pub steps: Option<u32>,
    /// Tokens it spent.
    pub tokens: Option<u64>,
    /// Its wall time in seconds.
    pub seconds: Option<f64>,
}

impl Report {
    /// Scores every task by its outcome (a task without one is wrong: `no answer`).
    pub fn new(tasks: &[Task], outcomes: &HashMap<String, Outcome>) -> Self {
        let rows: Vec<TaskReport> = tasks.iter().map(|t| judge(t, outcomes.get(&t.key))).collect();
        let right = rows.iter().filter(|r| r.right).count();
        let total = rows.len();
        let mut by_tool: BTreeMap<String, Group> = BTreeMap::new();
        let mut by_steps: BTreeMap<u32, Group> = BTreeMap::new();
        for row in &rows {
            for tool in &row.tools {
                let group = by_tool.entry(tool.clone()).or_insert_with(|| Group::named(tool));
                group.add(row.right);
            }
            if let Some(n) = row.expected_steps {
                by_steps.entry(n).or_insert_with(|| Group::named(&n.to_string())).add(row.right);
            }
        }
        Self {
            right,
            total,
            score: if total == 0 { 0.0 } else { right as f64 / total as f64 },
            steps: rows.iter().filter_map(|r| r.steps).map(u64::from).sum(),
            tokens: rows.iter().filter_map(|r| r.tokens).sum(),
            seconds: rows.iter().filter_map(|r| r.seconds).sum(),
            by_tool: by_tool.into_values().collect(),
            by_steps: by_steps.into_values().collect(),
            tasks: rows,
        }
    }

    /// The report as a table: one row per task, then the groups and the totals.
    pub fn table(&self) -> String {
        let mut rows = vec![
            ["task", "right", "expected", "answer", "status", "steps", "tokens", "time", "why"].map(str::to_owned),
        ];
        for t in &self.tasks {
            rows.push([
                plain(&key_text(&t.id)),
                (if t.right { "yes" } else { "no" }).to_owned(),
                plain(&t.expected),
                t.answer.as_ref().map_or_else(|| "-".to_owned(), |a| cut(&a.to_string(), ANSWER_WIDTH)),
                plain(&t.status),
                t.steps.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                t.tokens.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                t.seconds.map_or_else(|| "-".to_owned(), |s| format!("{s:.2}s")),
                t.why.as_deref().map_or_else(String::new, plain),
            ]);
        }
        let mut out = columns(&rows);
        for (title, groups) in [("by tool", &self.by_tool), ("by steps", &self.by_steps)] {
            if !groups.is_empty() {
                let _ = writeln!(out, "{title}:");
                let width = groups.iter().map(|g| g.name.chars().count()).max().unwrap_or(0);
                for g in groups {
                    let _ = writeln!(out, "  {:<width$}  {}/{}", plain(&g.name), g.right, g.total);
                }
            }
        }
        let _ = writeln!(
            out,
            "right: {}/{} ({:.1}%); steps {}, tokens {}, time {:.2}s",
            self.right,
            self.total,
            self.score * 100.0,
            self.steps,
            self.tokens,
            self.seconds
        );
        out
    }
}

impl Group {
    fn named(name: &str) -> Self {
        Self { name: name.to_owned(), right: 0, total: 0 }
    }

    fn add(&mut self, right: bool) {
        self.total += 1;
        self.right += usize::from(right);
    }
}

/// One task's verdict: only a finished run can be right.
fn judge(task: &Task, outcome: Option<&Outcome>) -> TaskReport {
    let fallback = Outcome { status: "not_run".to_owned(), ..Outcome::default() };
    let o = outcome.unwrap_or(&fallback);
    let verdict = match (outcome, o.status.as_str(), &o.answer) {
        (None, _, _) => Verdict::wrong("no answer"),
        (Some(_), "finished", Some(answer)) => score(&task.expect, answer),
        (Some(_), "finished", None) => Verdict::wrong("no answer"),
        (Some(_), status, _) => Verdict::wrong(match &o.error {
            Some(error) => format!("run ended {status} ({error})"),
            None => format!("run ended {status}"),
        }),
    };
    TaskReport {
        id: task.id.clone(),
        right: verdict.right,
        why: verdict.why,
        status: o.status.clone(),
        answer: o.answer.clone(),
        expected: task.expect.describe(),
        tools: task.tools.clone(),
        expected_steps: task.steps,
        steps: o.steps,
        tokens: o.tokens,
        seconds: o.seconds,
    }
}

fn key_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Text safe for a terminal: control characters shown as `?`.
fn plain(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// At most `width` characters, the cut marked with `…`.
fn cut(text: &str, width: usize) -> String {
    let text = plain(text);
    if text.chars().count() <= width {
        return text;
    }
    let mut short: String = text.chars().take(width - 1).collect();
    short.push('…');
    short
}

/// Rows laid out in columns two spaces apart, the last column unpadded.
fn columns(rows: &[[String; 9]]) -> String {
    let mut widths = [0usize; 9];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::expect::Expect;

    fn task(key: &str, expect: Expect, tools: &[&str], steps: u32) -> Task {
        Task {
            id: json!(key),
            key: key.to_owned(),
            request: String::new(),
            expect,
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            steps: Some(steps),
            line: 1,
        }
    }

    fn finished(answer: Value) -> Outcome {
        Outcome {
            status: "finished".to_owned(),
            answer: Some(answer),
            steps: Some(2),
            tokens: Some(100),
            seconds: Some(0.5),
            error: None,
        }
    }

    #[test]
    fn counts_per_task_tool_and_steps() {
        let tasks = [
            task("a", Expect::Number { value: 42.0, tolerance: None }, &["calculate"], 1),
            task("b", Expect::YesNo(true), &["validate_smiles"], 1),
            task("c", Expect::Number { value: 1.0, tolerance: None }, &["molecular_weight", "calculate"], 2),
            task("d", Expect::YesNo(false), &["validate_smiles"], 1),
        ];
        let mut outcomes = HashMap::new();
        outcomes.insert("a".to_owned(), finished(json!("42")));
        outcomes.insert("b".to_owned(), finished(json!("no")));
        outcomes.insert(
            "c".to_owned(),
            Outcome { status: "step_budget_exhausted".to_owned(), steps: Some(8), ..Outcome::default() },
        );
        let report = Report::new(&tasks, &outcomes);
        assert_eq!((report.right, report.total, report.steps, report.tokens), (1, 4, 12, 200));
        let tools: Vec<(&str, usize, usize)> =
            report.by_tool.iter().map(|g| (g.name.as_str(), g.right, g.total)).collect();
        assert_eq!(tools, vec![("calculate", 1, 2), ("molecular_weight", 0, 1), ("validate_smiles", 0, 2)]);
        let steps: Vec<(&str, usize, usize)> =
            report.by_steps.iter().map(|g| (g.name.as_str(), g.right, g.total)).collect();
        assert_eq!(steps, vec![("1", 1, 3), ("2", 0, 1)]);
        assert_eq!(report.tasks[2].why.as_deref(), Some("run ended step_budget_exhausted"));
        assert_eq!((report.tasks[3].status.as_str(), report.tasks[3].why.as_deref()), ("not_run", Some("no answer")));
        let table = report.table();
        assert!(table.contains("right: 1/4 (25.0%); steps 12, tokens 200, time 1.00s"), "{table}");
        assert!(table.lines().any(|l| l.starts_with("  calculate") && l.ends_with("1/2")), "{table}");
    }

    #[test]
    fn long_answers_are_cut_in_the_table_only() {
        let tasks = [task("a", Expect::Number { value: 1.0, tolerance: None }, &[], 1)];
        let long = "x".repeat(100);
        let outcomes = HashMap::from([("a".to_owned(), finished(json!(long)))]);
        let report = Report::new(&tasks, &outcomes);
        assert!(report.table().contains(&format!("\"{}…", "x".repeat(ANSWER_WIDTH - 2))));
        assert_eq!(report.tasks[0].answer, Some(json!(long)));
    }
}
