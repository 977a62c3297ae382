//! The summary of compacted steps, sent right after the request: one line a step
//! (`step 3: calculate {"expression":"6*7"} -> 42`), a row of steps that made the same call to
//! the same end on one line, and, when the summary itself grows too large, its oldest lines
//! folded into one. Lines are added at the end, so that the summary already sent stays a prefix
//! of the next one and the server's prompt cache keeps serving it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{arguments_text, clip, estimate_tokens};
use crate::provider::{Message, ModelReply};

/// Bytes of a call's arguments, and of its result, on its line.
const PART_BYTES: usize = 60;
/// The summary's first line.
const HEAD: &str = "Earlier steps, shortened to one line each:";

/// The steps compacted so far, as lines.
#[derive(Debug, Clone, Default)]
pub(super) struct Summary {
    lines: Vec<Line>,
}

/// One line: a step, a row of identical steps, or the oldest steps folded.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    first: u32,
    last: u32,
    /// `tool arguments -> outcome`, or for a folded line what it folds.
    body: String,
    folded: bool,
}

impl Summary {
    /// Whether no step has been compacted.
    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Adds the steps of `messages` (a reply and its results), numbering them after `step`.
    pub(super) fn add(&mut self, messages: &[Message], step: &mut u32) {
        let reply = messages.iter().find_map(|m| match m {
            Message::Assistant { reply } => Some(reply),
            _ => None,
        });
        for message in messages {
            let Message::ToolResult { call_id, tool, content, is_error } = message else {
                continue;
            };
            *step += 1;
            let asked = reply.map(|r| asked_of(r, call_id.as_deref())).unwrap_or_default();
            let outcome = match (is_error, content.get("code").and_then(Value::as_str)) {
                (true, Some(code)) => format!("error {code}"),
                _ => clip(&text_of(content), PART_BYTES),
            };
            let tool = tool.as_deref().unwrap_or("(no call)");
            self.push(*step, format!("{tool} {} -> {outcome}", clip(&asked, PART_BYTES)));
        }
    }

    /// Adds step `step`, on the last line when it repeats that line's step.
    fn push(&mut self, step: u32, body: String) {
        match self.lines.last_mut() {
            Some(last) if !last.folded && last.body == body && last.last + 1 == step => last.last = step,
            _ => self.lines.push(Line { first: step, last: step, body, folded: false }),
        }
    }

    /// Folds the oldest half of the lines into one, again and again, until the summary is
    /// about `max_tokens` or less (or one line is left).
    pub(super) fn fold_to(&mut self, max_tokens: u64) {
        while self.lines.len() > 1 && estimate_tokens(self.text().len()) > max_tokens {
            let half = self.lines.len().div_ceil(2).max(2);
            let folded: Vec<Line> = self.lines.drain(..half).collect();
            let tools: BTreeSet<&str> = folded
                .iter()
                .flat_map(|l| if l.folded { l.body.split(", ").collect() } else { vec![tool_of(&l.body)] })
                .collect();
            let body = tools.into_iter().collect::<Vec<_>>().join(", ");
            let (first, last) = (folded[0].first, folded[folded.len() - 1].last);
            self.lines.insert(0, Line { first, last, body, folded: true });
        }
    }

    /// The summary as it is sent.
    pub(super) fn text(&self) -> String {
        let mut text = HEAD.to_owned();
        for line in &self.lines {
            text.push('\n');
            text.push_str(&line.render());
        }
        text
    }
}

impl Line {
    fn render(&self) -> String {
        let (first, last, body) = (self.first, self.last, &self.body);
        match (self.folded, first == last) {
            (true, _) => format!("steps {first}-{last}: calls of {body}, not kept"),
            (false, true) => format!("step {first}: {body}"),
            // The steps that repeat it come last: as the row grows, only the line's end changes,
            // and the summary sent before stays a prefix up to there.
            (false, false) if last == first + 1 => format!("step {first}: {body}; the same at step {last}"),
            (false, false) => format!("step {first}: {body}; the same at steps {}-{last}", first + 1),
        }
    }
}

/// The tool a line's body names first.
fn tool_of(body: &str) -> &str {
    body.split(' ').next().unwrap_or(body)
}

/// What the call answered by `call_id` asked: its arguments, else the reply's text.
fn asked_of(reply: &ModelReply, call_id: Option<&str>) -> String {
    let call = reply.calls.iter().find(|c| c.id.is_some() && c.id.as_deref() == call_id);
    match (call, &reply.text) {
        (Some(c), _) => arguments_text(&c.arguments),
        (None, Some(text)) => text.clone(),
        (None, None) => String::new(),
    }
}

/// A value as text: a string as it is, anything else as JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProposedCall;
    use serde_json::json;

    fn step(call: (&str, Value), result: Value, is_error: bool) -> [Message; 2] {
        let reply = ModelReply {
            calls: vec![ProposedCall { id: Some("c".into()), name: call.0.into(), arguments: call.1.into() }],
            ..Default::default()
        };
        let tool = Some(call.0.to_owned());
        [
            Message::Assistant { reply },
            Message::ToolResult { call_id: Some("c".into()), tool, content: result, is_error },
        ]
    }

    #[test]
    fn a_step_is_one_line_and_a_row_of_the_same_step_is_one_line() {
        let mut summary = Summary::default();
        let mut n = 2;
        summary.add(&step(("calculate", json!({"expression": "6*7"})), json!(42), false), &mut n);
        let failed = json!({"code": "tool_error", "message": "no such file"});
        for _ in 0..3 {
            summary.add(&step(("read_file", json!({"path": "x"})), failed.clone(), true), &mut n);
        }
        assert_eq!(n, 6);
        assert_eq!(
            summary.text(),
            "Earlier steps, shortened to one line each:\nstep 3: calculate {\"expression\":\"6*7\"} -> 42\nstep 4: read_file {\"path\":\"x\"} -> error tool_error; the same at steps 5-6"
        );
    }

    #[test]
    fn a_summary_over_its_budget_folds_its_oldest_lines_and_keeps_the_latest() {
        let mut summary = Summary::default();
        let mut n = 0;
        for i in 0..20 {
            summary.add(&step(("calculate", json!({ "expression": format!("{i}*7") })), json!(i * 7), false), &mut n);
        }
        let whole = estimate_tokens(summary.text().len());
        summary.fold_to(whole / 3);
        let text = summary.text();
        assert!(estimate_tokens(text.len()) <= whole / 3, "{text}");
        assert!(text.contains("\nsteps 1-") && text.contains(": calls of calculate, not kept"), "{text}");
        assert!(text.ends_with("step 20: calculate {\"expression\":\"19*7\"} -> 133"), "{text}");
    }
}
