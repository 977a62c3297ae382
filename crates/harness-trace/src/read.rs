//! Reading a trace back: each line checked against the format of docs/traces.md, bad lines
//! kept aside with their numbers, and the run summed up. A trace is read as far as it can be:
//! a broken line costs that line, not the trace.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::format::{EndRecord, ErrorObject, StartRecord, Step, StepStatus, Tokens};

/// Why a trace could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file (or standard input) could not be read.
    #[error("cannot read the trace {path}: {source}")]
    Io {
        /// The file, or `-`.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
}

/// A line that was read, with where it came from.
#[derive(Debug, Clone)]
pub struct Numbered<T> {
    /// Line number in the file, from 1.
    pub number: usize,
    /// The line as read, passed through by `trace show --json`.
    pub text: String,
    /// What it says.
    pub value: T,
}

/// A checked step line.
pub type Line = Numbered<Step>;

/// A trace file read back.
#[derive(Debug, Default)]
pub struct Trace {
    /// The first line, when the trace has one (format 2 on).
    pub start: Option<Numbered<StartRecord>>,
    /// The step lines, in order.
    pub lines: Vec<Line>,
    /// The last line, when the run lived to write it.
    pub end: Option<Numbered<EndRecord>>,
    /// Lines left out: (line number, why).
    pub bad: Vec<(usize, String)>,
    /// Lines read with a caveat, such as a newer format's: (line number, what).
    pub notes: Vec<(usize, String)>,
    /// The conversation's compactions between steps (`"kind": "compaction"`): (line number, line).
    pub compactions: Vec<(usize, Value)>,
}

/// Reads a trace file, or standard input for `-`.
pub fn read(path: &Path) -> Result<Trace, ReadError> {
    let mut bytes = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes).map(|_| ()))
    };
    read.map_err(|source| ReadError::Io { path: path.display().to_string(), source })?;
    Ok(parse(&bytes))
}

/// Checks every line; blank lines are skipped.
pub fn parse(bytes: &[u8]) -> Trace {
    let mut trace = Trace::default();
    let mut first = true;
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let number = i + 1;
        if let Err(why) = take_line(&mut trace, raw, number, first) {
            trace.bad.push((number, why));
        }
        first = false;
    }
    trace
}

/// Reads one line into the trace, or says why it is left out.
fn take_line(trace: &mut Trace, raw: &[u8], number: usize, first: bool) -> Result<(), String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("not UTF-8 text ({e})"))?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err("not a JSON object".to_owned());
    };
    if trace.end.is_some() {
        return Err("a line after the run's last line (\"kind\": \"end\")".to_owned());
    }
    if object.contains_key("step") {
        let step = check_step(value)?;
        trace.lines.push(Numbered { number, text: text.to_owned(), value: step });
        return Ok(());
    }
    match object.get("kind").and_then(Value::as_str) {
        Some("start") if first => {
            let start: StartRecord =
                serde_json::from_value(value).map_err(|e| format!("not a trace's first line: {e}"))?;
            if start.format > harness_core::TRACE_FORMAT {
                let note = format!(
                    "written in trace format {} by harness {}; this reader knows format {} and ignores fields it does not know",
                    start.format,
                    start.harness_version,
                    harness_core::TRACE_FORMAT
                );
                trace.notes.push((number, note));
            }
            trace.start = Some(Numbered { number, text: text.to_owned(), value: start });
            Ok(())
        }
        Some("start") => Err("a run's first line (\"kind\": \"start\") that is not the trace's first line".to_owned()),
        Some("end") => {
            let end: EndRecord = serde_json::from_value(value).map_err(|e| format!("not a trace's last line: {e}"))?;
            trace.end = Some(Numbered { number, text: text.to_owned(), value: end });
            Ok(())
        }
        Some("compaction") => {
            trace.compactions.push((number, value));
            Ok(())
        }
        Some(kind) => Err(format!(
            "a line of kind {kind:?}, which this version does not know (it knows \"start\", \"compaction\", \"end\" and steps)"
        )),
        None => Err("not a trace line: no \"step\" and no \"kind\"".to_owned()),
    }
}

fn check_step(value: Value) -> Result<Step, String> {
    let step: Step = serde_json::from_value(value).map_err(|e| format!("not a trace step: {e}"))?;
    if step.step == 0 {
        return Err("not a trace step: \"step\" counts from 1".to_owned());
    }
    let failed = matches!(step.status, StepStatus::Rejected | StepStatus::Error | StepStatus::AwaitingApproval);
    match (failed, &step.error) {
        (true, None) => Err(format!("not a trace step: status {:?} without an \"error\" object", step.status.as_str())),
        (false, Some(_)) => {
            Err(format!("not a trace step: status {:?} with an \"error\" object", step.status.as_str()))
        }
        _ => Ok(step),
    }
}

/// How the run ended, as far as its trace tells.
#[derive(Debug, Clone)]
pub enum Ending<'a> {
    /// The trace's last line says it.
    Recorded(&'a EndRecord),
    /// The trace has a first line but no last one: the run was cut short (killed?).
    Killed,
    /// An older trace (no last line) whose last step called `finish`: its answer.
    Finished(Option<&'a Value>),
    /// An older trace whose last step failed the run: the provider gave up.
    Failed(&'a ErrorObject),
    /// An older trace with no `finish`: a budget ran out, or the run was stopped.
    Unfinished,
    /// No step and no record at all.
    Empty,
}

/// What a whole trace adds up to.
#[derive(Debug, Clone)]
pub struct Summary<'a> {
    /// Steps, by status, in [`StepStatus::ALL`] order.
    pub counts: [usize; StepStatus::ALL.len()],
    /// Wall time of the run (its last line's), or over every step, in microseconds.
    pub duration_us: u64,
    /// Model time over every step, in microseconds.
    pub model_us: u64,
    /// Tokens over every step.
    pub tokens: Tokens,
    /// How it ended.
    pub ending: Ending<'a>,
}

impl Trace {
    /// Every line that was read, in file order, as it was written.
    pub fn valid_lines(&self) -> impl Iterator<Item = &str> {
        let start = self.start.iter().map(|s| s.text.as_str());
        let end = self.end.iter().map(|e| e.text.as_str());
        start.chain(self.lines.iter().map(|l| l.text.as_str())).chain(end)
    }

    /// Sums the steps up.
    pub fn summary(&self) -> Summary<'_> {
        // One count per status: a fixed 4 left `awaiting_approval` out, and `trace show` of a
        // stopped run panicked.
        let mut counts = [0; StepStatus::ALL.len()];
        let (mut duration_us, mut model_us) = (0u64, 0u64);
        let mut tokens = Tokens::default();
        for line in &self.lines {
            let s = &line.value;
            if let Some(i) = StepStatus::ALL.iter().position(|&x| x == s.status) {
                counts[i] += 1;
            }
            duration_us = duration_us.saturating_add(s.duration_us);
            model_us = model_us.saturating_add(s.model_us);
            if let Some(u) = s.usage {
                tokens.input_tokens = tokens.input_tokens.saturating_add(u.input_tokens);
                tokens.output_tokens = tokens.output_tokens.saturating_add(u.output_tokens);
                tokens.cached_input_tokens = tokens.cached_input_tokens.saturating_add(u.cached_input_tokens);
            }
        }
        if let Some(end) = &self.end {
            duration_us = end.value.duration_us;
        }
        Summary { counts, duration_us, model_us, tokens, ending: self.ending() }
    }

    fn ending(&self) -> Ending<'_> {
        if let Some(end) = &self.end {
            return Ending::Recorded(&end.value);
        }
        if self.start.is_some() {
            return Ending::Killed;
        }
        match self.lines.last().map(|l| &l.value) {
            None => Ending::Empty,
            Some(s) if s.status == StepStatus::Finished => Ending::Finished(s.result.as_ref()),
            Some(Step { error: Some(e), .. }) if e.code == "provider_error" || e.code == "trace_error" => {
                Ending::Failed(e)
            }
            Some(_) => Ending::Unfinished,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_checked_and_bad_ones_numbered() {
        let text = concat!(
            "{\"step\":1,\"tool\":\"calculate\",\"arguments\":{\"expression\":\"1/0\"},\"status\":\"error\",\"error\":{\"code\":\"tool_error\",\"message\":\"division by zero\",\"details\":{}},\"offered\":\"all\",\"duration_us\":655,\"model_us\":2,\"future_field\":1}\n",
            "\n",
            "{\"step\":2,\"status\":\"okay\",\"duration_us\":1}\n",
            "{\"step\":2,\"tool\":\"f\",\"arguments\":{},\"status\":\"rejected\",\"duration_us\":1}\n",
            "[]\n",
            "{\"step\":2,\"tool\":\"fault_echo\",\"arguments\":{\"value\":null},\"status\":\"ok\",\"result\":null,\"offered\":\"all\",\"duration_us\":5,\"model_us\":1,\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}\n",
            "{\"step\":3,\"tool\":\"fin",
        );
        let trace = parse(text.as_bytes());
        assert_eq!(trace.lines.iter().map(|l| l.number).collect::<Vec<_>>(), vec![1, 6]);
        assert_eq!(trace.lines[1].value.result, Some(Value::Null));
        let bad: Vec<usize> = trace.bad.iter().map(|b| b.0).collect();
        assert_eq!(bad, vec![3, 4, 5, 7], "{:?}", trace.bad);
        assert!(trace.bad[0].1.contains("unknown variant `okay`"), "{:?}", trace.bad);
        assert!(trace.bad[1].1.contains("without an \"error\""), "{:?}", trace.bad);
        let summary = trace.summary();
        assert_eq!(summary.counts, [1, 0, 1, 0, 0]);
        assert_eq!((summary.duration_us, summary.tokens.input_tokens), (660, 10));
        assert!(matches!(summary.ending, Ending::Unfinished));
    }

    const START: &str = r#"{"kind":"start","format":2,"harness_version":"0.1.0","request":"r","provider":"scripted","tools":[],"limits":{"max_steps":8,"max_repeats":3,"max_reply_bytes":1,"max_arguments_bytes":1,"max_conversation_bytes":1},"started_at":"t"}"#;
    const STEP: &str =
        r#"{"step":1,"tool":"finish","arguments":{"answer":1},"status":"finished","result":1,"duration_us":3}"#;

    #[test]
    fn a_first_line_without_a_last_one_was_killed() {
        let trace = parse(format!("{START}\n{STEP}\n").as_bytes());
        assert!(trace.bad.is_empty(), "{:?}", trace.bad);
        assert!(matches!(trace.summary().ending, Ending::Killed));
        let end = r#"{"kind":"end","status":"step_budget_exhausted","steps":1,"usage":{"input_tokens":0,"output_tokens":0},"retries":0,"duration_us":9,"ended_at":"t"}"#;
        let trace = parse(format!("{START}\n{STEP}\n{end}\n{STEP}\n").as_bytes());
        let Ending::Recorded(end) = trace.summary().ending else { panic!("the last line is read") };
        assert_eq!(end.status.as_str(), "step_budget_exhausted");
        assert_eq!(trace.bad.len(), 1);
        assert!(trace.bad[0].1.contains("after the run's last line"), "{:?}", trace.bad);
    }

    #[test]
    fn a_compaction_line_between_steps_is_read_and_kept() {
        let line = r#"{"kind":"compaction","before_step":2,"steps":[1,1],"messages_removed":2,"tokens_before":9,"tokens_after":5,"tokens_saved":4,"context_tokens":512}"#;
        let trace = parse(format!("{START}\n{STEP}\n{line}\n").as_bytes());
        assert!(trace.bad.is_empty(), "{:?}", trace.bad);
        assert_eq!(trace.compactions.len(), 1);
        assert_eq!((trace.compactions[0].0, &trace.compactions[0].1["tokens_saved"]), (3, &serde_json::json!(4)));
    }

    #[test]
    fn a_newer_format_is_read_with_a_note_and_unknown_kinds_named() {
        let newer = START.replace("\"format\":2", "\"format\":9,\"shiny\":true");
        let trace = parse(format!("{newer}\n{{\"kind\":\"checkpoint\"}}\n{STEP}\n").as_bytes());
        assert!(trace.start.is_some());
        assert_eq!(trace.lines.len(), 1);
        assert_eq!(trace.notes.len(), 1);
        assert!(trace.notes[0].1.contains("format 9"), "{:?}", trace.notes);
        assert_eq!(trace.bad.len(), 1);
        assert!(trace.bad[0].1.contains("\"checkpoint\""), "{:?}", trace.bad);
    }
}
