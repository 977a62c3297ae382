//! Reading a trace back: each line checked against the trace line format of
//! docs/architecture.md, bad lines kept aside with their numbers, and the run summed up.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::Result;
use crate::error::CliError;

/// How a step ended, as the trace says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// The tool ran and returned a result.
    Ok,
    /// The call never ran.
    Rejected,
    /// The tool ran and failed, or the provider failed.
    Error,
    /// The router called `finish`.
    Finished,
}

impl Status {
    /// Every status, in the order summaries list them.
    pub(crate) const ALL: [Status; 4] = [Status::Ok, Status::Rejected, Status::Error, Status::Finished];

    /// The name written in the trace.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Rejected => "rejected",
            Status::Error => "error",
            Status::Finished => "finished",
        }
    }
}

/// A step's error object.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ErrorObject {
    /// The stable code, such as `invalid_arguments`.
    pub(crate) code: String,
    /// What went wrong.
    pub(crate) message: String,
    /// What it went wrong with.
    #[serde(default)]
    pub(crate) details: Value,
}

/// Tokens of one model call.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(crate) struct Tokens {
    /// Sent to the model.
    pub(crate) input_tokens: u64,
    /// Produced by the model.
    pub(crate) output_tokens: u64,
}

/// One trace line. Fields this version does not know are allowed (later harnesses may add some).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Step {
    /// Step number, from 1.
    pub(crate) step: u32,
    /// The tool called, when a call could be parsed.
    pub(crate) tool: Option<String>,
    /// Its arguments, when a call could be parsed.
    pub(crate) arguments: Option<Value>,
    /// How the step ended.
    pub(crate) status: Status,
    /// The tool's result, or `finish`'s answer.
    #[serde(default, deserialize_with = "present")]
    pub(crate) result: Option<Value>,
    /// Why the step did not succeed.
    pub(crate) error: Option<ErrorObject>,
    /// The plugin that offered the tool.
    pub(crate) plugin: Option<String>,
    /// That plugin's version.
    pub(crate) plugin_version: Option<String>,
    /// `all`, or `finish` when only it was offered.
    pub(crate) offered: Option<String>,
    /// Which call of a reply with several.
    pub(crate) call_index: Option<u64>,
    /// The model's raw text.
    pub(crate) reply_text: Option<String>,
    /// `native` or `prompt`.
    pub(crate) router_mode: Option<String>,
    /// Tokens of the model call made at this step.
    pub(crate) usage: Option<Tokens>,
    /// Wall time of the step, in microseconds.
    pub(crate) duration_us: u64,
    /// Wall time of the model call alone, in microseconds.
    #[serde(default)]
    pub(crate) model_us: u64,
}

/// A present `result` is kept even when it is `null` (a tool may return null).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A checked step, with where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// Line number in the file, from 1.
    pub(crate) number: usize,
    /// The line as read, passed through by `--json`.
    pub(crate) text: String,
    /// What it says.
    pub(crate) step: Step,
}

/// A trace file read back.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    /// The good lines, in order.
    pub(crate) lines: Vec<Line>,
    /// Lines that are not steps: (line number, why).
    pub(crate) bad: Vec<(usize, String)>,
}

/// Reads a trace file, or standard input for `-`.
pub(crate) fn read(path: &Path) -> Result<Trace> {
    let mut bytes = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes).map(|_| ()))
    };
    read.map_err(|e| CliError::Usage(format!("cannot read the trace {}: {e}", path.display())))?;
    Ok(parse(&bytes))
}

/// Checks every line; blank lines are skipped.
pub(crate) fn parse(bytes: &[u8]) -> Trace {
    let mut trace = Trace::default();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match check(raw) {
            Ok((text, step)) => trace.lines.push(Line { number: i + 1, text, step }),
            Err(why) => trace.bad.push((i + 1, why)),
        }
    }
    trace
}

fn check(raw: &[u8]) -> std::result::Result<(String, Step), String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("not UTF-8 text ({e})"))?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if !value.is_object() {
        return Err("not a JSON object".to_owned());
    }
    let step: Step = serde_json::from_value(value).map_err(|e| format!("not a trace step: {e}"))?;
    if step.step == 0 {
        return Err("not a trace step: \"step\" counts from 1".to_owned());
    }
    let failed = matches!(step.status, Status::Rejected | Status::Error);
    match (failed, &step.error) {
        (true, None) => {
            return Err(format!("not a trace step: status {:?} without an \"error\" object", step.status.as_str()));
        }
        (false, Some(_)) => {
            return Err(format!("not a trace step: status {:?} with an \"error\" object", step.status.as_str()));
        }
        _ => {}
    }
    Ok((text.to_owned(), step))
}

/// How the run ended, as far as its trace tells.
#[derive(Debug, Clone)]
pub(crate) enum Ending<'a> {
    /// The last step called `finish`: its answer.
    Finished(Option<&'a Value>),
    /// The last step failed the run: the provider gave up.
    Failed(&'a ErrorObject),
    /// No `finish`: the step or time budget ran out, or the run was stopped.
    Unfinished,
    /// No step at all.
    Empty,
}

/// What a whole trace adds up to.
#[derive(Debug, Clone)]
pub(crate) struct Summary<'a> {
    /// Steps, by status, in [`Status::ALL`] order.
    pub(crate) counts: [usize; 4],
    /// Wall time over every step, in microseconds.
    pub(crate) duration_us: u64,
    /// Model time over every step, in microseconds.
    pub(crate) model_us: u64,
    /// Tokens over every step.
    pub(crate) tokens: Tokens,
    /// How it ended.
    pub(crate) ending: Ending<'a>,
}

impl Trace {
    /// Sums the steps up.
    pub(crate) fn summary(&self) -> Summary<'_> {
        let mut counts = [0; 4];
        let (mut duration_us, mut model_us) = (0u64, 0u64);
        let mut tokens = Tokens::default();
        for line in &self.lines {
            let s = &line.step;
            if let Some(i) = Status::ALL.iter().position(|&x| x == s.status) {
                counts[i] += 1;
            }
            duration_us = duration_us.saturating_add(s.duration_us);
            model_us = model_us.saturating_add(s.model_us);
            if let Some(u) = s.usage {
                tokens.input_tokens = tokens.input_tokens.saturating_add(u.input_tokens);
                tokens.output_tokens = tokens.output_tokens.saturating_add(u.output_tokens);
            }
        }
        let ending = match self.lines.last().map(|l| &l.step) {
            None => Ending::Empty,
            Some(s) if s.status == Status::Finished => Ending::Finished(s.result.as_ref()),
            Some(Step { error: Some(e), .. }) if e.code == "provider_error" || e.code == "trace_error" => {
                Ending::Failed(e)
            }
            Some(_) => Ending::Unfinished,
        };
        Summary { counts, duration_us, model_us, tokens, ending }
    }
}

/// "0.03 ms", "12.3 ms", "1.20 s".
pub(crate) fn human_us(us: u64) -> String {
    crate::batch::progress::human_ms(us as f64 / 1000.0)
}

/// Text from a trace made safe to print on a terminal: control and bidirectional-override
/// characters (which could move the cursor or reorder what is shown) are written as escapes.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let sneaky = c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if sneaky {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `text`, with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((i, _)) => format!("{}…", &text[..i]),
    }
}

/// One line saying what a step did: its arguments, then its result or its error.
pub(crate) fn brief(step: &Step, max: usize) -> String {
    let called = match (&step.arguments, &step.reply_text) {
        (Some(args), _) => args.to_string(),
        (None, Some(text)) => format!("text {}", Value::from(text.as_str())),
        (None, None) => String::new(),
    };
    let outcome = match (&step.error, &step.result) {
        (Some(e), _) => e.message.clone(),
        (None, Some(r)) => r.to_string(),
        (None, None) => String::new(),
    };
    let line = match (called.is_empty(), outcome.is_empty()) {
        (false, false) => format!("{called} → {outcome}"),
        (false, true) => called,
        (true, _) => outcome,
    };
    cut(&printable(&line), max)
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
        assert_eq!(trace.lines[1].step.result, Some(Value::Null));
        let bad: Vec<usize> = trace.bad.iter().map(|b| b.0).collect();
        assert_eq!(bad, vec![3, 4, 5, 7], "{:?}", trace.bad);
        assert!(trace.bad[0].1.contains("unknown variant `okay`"), "{:?}", trace.bad);
        assert!(trace.bad[1].1.contains("without an \"error\""), "{:?}", trace.bad);
        let summary = trace.summary();
        assert_eq!(summary.counts, [1, 0, 1, 0]);
        assert_eq!((summary.duration_us, summary.tokens.input_tokens), (660, 10));
        assert!(matches!(summary.ending, Ending::Unfinished));
    }

    #[test]
    fn terminal_escapes_are_defused() {
        assert_eq!(printable("a\u{1b}[2Jb\u{202e}c"), "a\\u{1b}[2Jb\\u{202e}c");
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hé", 2), "hé");
    }
}
