//! How each task's run ended: read back from a batch's results file, or from an answers file
//! written elsewhere (`{"id", "answer", "steps"?, "tokens"?, "seconds"?, "error"?}` a line).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use harness_batch::input::id_key;
use serde_json::{Map, Value};

use crate::error::{BadLine, EvalError};
use crate::tasks::Task;

/// The fields an answers line may have.
const FIELDS: &[&str] = &["id", "answer", "steps", "tokens", "seconds", "error"];

/// One run's end, as far as scoring goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// `finished`, or how the run ended otherwise (`step_budget_exhausted`, `failed`, ...).
    pub status: String,
    /// The final answer, when the run gave one.
    pub answer: Option<Value>,
    /// Steps taken, when known.
    pub steps: Option<u32>,
    /// Tokens spent, input and output together, when known.
    pub tokens: Option<u64>,
    /// Wall time in seconds, when known.
    pub seconds: Option<f64>,
    /// Why the run did not finish, when it says.
    pub error: Option<String>,
}

/// The outcomes in a batch's results file, by id (as text); an id's latest line counts.
pub fn from_results(path: &Path) -> Result<HashMap<String, Outcome>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read { path: path.to_owned(), source })?;
    let mut outcomes = HashMap::new();
    for line in text.lines() {
        // The engine writes every line whole; a line it did not write is not ours to score.
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else { continue };
        let Some(key) = obj.get("id").and_then(id_key) else { continue };
        outcomes.insert(key, result_line(&obj));
    }
    Ok(outcomes)
}

fn result_line(obj: &Map<String, Value>) -> Outcome {
    let usage = obj.get("usage");
    let count = |name: &str| usage.and_then(|u| u.get(name)).and_then(Value::as_u64).unwrap_or(0);
    let error = obj.get("error").filter(|e| !e.is_null()).map(|e| {
        let code = e.get("code").and_then(Value::as_str).unwrap_or("error");
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        format!("{code}: {message}")
    });
    Outcome {
        status: obj.get("status").and_then(Value::as_str).unwrap_or("unknown").to_owned(),
        answer: obj.get("answer").filter(|a| !a.is_null()).cloned(),
        steps: obj.get("steps").and_then(Value::as_u64).and_then(|s| u32::try_from(s).ok()),
        tokens: usage.map(|_| count("input_tokens") + count("output_tokens")),
        seconds: obj.get("duration_ms").and_then(Value::as_f64).map(|ms| ms / 1e3),
        error,
    }
}

/// The answers file's outcomes, by id, checked against the tasks: every line must answer a
/// task, once. A line without an `error` is a finished run.
pub fn read_answers(path: &Path, tasks: &[Task]) -> Result<HashMap<String, Outcome>, EvalError> {
    let text = std::fs::read(path).map_err(|source| EvalError::Read { path: path.to_owned(), source })?;
    let known: HashSet<&str> = tasks.iter().map(|t| t.key.as_str()).collect();
    let mut outcomes = HashMap::new();
    let mut first: HashMap<String, usize> = HashMap::new();
    let mut bad = Vec::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let checked = answer_line(raw).and_then(|(key, outcome)| {
            if !known.contains(key.as_str()) {
                return Err(("id".to_owned(), format!("{key:?} is not a task of the tasks file")));
            }
            if let Some(at) = first.get(&key) {
                return Err(("id".to_owned(), format!("duplicate id {key:?}, first on line {at}")));
            }
            Ok((key, outcome))
        });
        match checked {
            Ok((key, outcome)) => {
                first.insert(key.clone(), line);
                outcomes.insert(key, outcome);
            }
            Err((field, problem)) => bad.push(BadLine { line, field, problem }),
        }
    }
    if bad.is_empty() { Ok(outcomes) } else { Err(EvalError::BadLines { path: path.to_owned(), lines: bad }) }
}

/// One answers line: its id's text and its outcome, or the field at fault and why.
fn answer_line(raw: &[u8]) -> Result<(String, Outcome), (String, String)> {
    let whole = |problem: String| (String::new(), problem);
    let text = std::str::from_utf8(raw).map_err(|e| whole(format!("not UTF-8 text ({e})")))?;
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(text) else {
        return Err(whole("not a JSON object; a line is {\"id\": ..., \"answer\": ...}".to_owned()));
    };
    if let Some(extra) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err((extra.clone(), format!("not a field of an answer (they are {FIELDS:?})")));
    }
    let field = |name: &str, problem: &str| (name.to_owned(), problem.to_owned());
    let key = obj
        .get("id")
        .and_then(id_key)
        .ok_or_else(|| field("id", "missing, or not a non-empty string or an integer"))?;
    let answer =
        obj.get("answer").ok_or_else(|| field("answer", "missing; the final answer, or null when there was none"))?;
    let steps = match obj.get("steps") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| field("steps", "must be a whole number"))?,
        ),
    };
    let tokens = match obj.get("tokens") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| field("tokens", "must be a whole number"))?),
    };
    let seconds = match obj.get("seconds") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_f64().filter(|s| *s >= 0.0).ok_or_else(|| field("seconds", "must be a number from 0"))?),
    };
    let error = match obj.get("error") {
        None | Some(Value::Null) => None,
        Some(Value::String(e)) => Some(e.clone()),
        Some(_) => return Err(field("error", "must be a string (why the run gave no answer)")),
    };
    let status = if error.is_some() { "failed" } else { "finished" }.to_owned();
    let answer = Some(answer.clone()).filter(|a| !a.is_null());
    Ok((key, Outcome { status, answer, steps, tokens, seconds, error }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::expect::Expect;

    fn task(key: &str) -> Task {
        Task {
            id: json!(key),
            key: key.to_owned(),
            request: String::new(),
            expect: Expect::YesNo(true),
            tools: Vec::new(),
            steps: None,
            line: 1,
        }
    }

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_results_line_gives_status_answer_and_costs_and_the_latest_counts() {
        let (_dir, path) = write(concat!(
            "{\"id\": \"a\", \"status\": \"failed\", \"answer\": null, \"steps\": 1, \"usage\": {\"input_tokens\": 5, \"output_tokens\": 2}, \"error\": {\"code\": \"provider_error\", \"message\": \"down\"}, \"duration_ms\": 1500.0}\n",
            "{\"id\": 7, \"status\": \"finished\", \"answer\": 42, \"steps\": 2, \"usage\": {\"input_tokens\": 10, \"output_tokens\": 3}, \"error\": null, \"duration_ms\": 20.0}\n",
            "{\"id\": \"a\", \"status\": \"finished\", \"answer\": \"yes\", \"steps\": 2, \"usage\": {\"input_tokens\": 1, \"output_tokens\": 1}, \"error\": null, \"duration_ms\": 1.0}\n",
            "torn",
        ));
        let got = from_results(&path).unwrap();
        assert_eq!(got["7"].answer, Some(json!(42)));
        assert_eq!((got["7"].tokens, got["7"].seconds, got["7"].steps), (Some(13), Some(0.02), Some(2)));
        assert_eq!(got["a"].status, "finished");
    }

    #[test]
    fn answers_lines_are_checked_against_the_tasks() {
        let tasks = [task("a"), task("b"), task("c")];
        let (_dir, path) = write(
            "{\"id\": \"a\", \"answer\": \"yes\", \"steps\": 2, \"tokens\": 300, \"seconds\": 1.5}\n{\"id\": \"b\", \"answer\": null, \"error\": \"timed out\"}\n",
        );
        let got = read_answers(&path, &tasks).unwrap();
        assert_eq!((got["a"].status.as_str(), got["a"].tokens), ("finished", Some(300)));
        assert_eq!((got["b"].status.as_str(), got["b"].answer.clone()), ("failed", None));
        assert!(!got.contains_key("c"));
        let (_dir, path) = write(
            "{\"id\": \"z\", \"answer\": 1}\n{\"id\": \"a\"}\n{\"id\": \"a\", \"answer\": 1, \"steps\": -1}\n{\"id\": \"a\", \"answer\": 1}\n{\"id\": \"a\", \"answer\": 1}\n{\"id\": \"b\", \"answer\": 1, \"status\": \"ok\"}\n",
        );
        let Err(EvalError::BadLines { lines, .. }) = read_answers(&path, &tasks) else { panic!("not bad lines") };
        let got: Vec<(usize, &str)> = lines.iter().map(|b| (b.line, b.field.as_str())).collect();
        assert_eq!(got, vec![(1, "id"), (2, "answer"), (3, "steps"), (5, "id"), (6, "status")]);
    }
}
