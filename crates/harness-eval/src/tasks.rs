//! The tasks file: one `{"id", "request", "expect", "tools"?, "steps"?, "max_steps"?,
//! "script"?}` object a line (docs/eval.md). It is a batch's requests file with more fields:
//! the batch engine reads the same file for what it runs, and this module for what is scored.

use std::collections::HashMap;
use std::path::Path;

use harness_batch::input::id_key;
use serde_json::{Map, Value};

use crate::error::{BadLine, EvalError};
use crate::expect::{Expect, kind};

/// The fields a task line may have.
const FIELDS: &[&str] = &["id", "request", "expect", "tools", "steps", "max_steps", "script"];

/// One task: a request and what a right answer to it is.
#[derive(Debug, Clone)]
pub struct Task {
    /// The id as the line gave it (a string or an integer).
    pub id: Value,
    /// The id as text, as a batch's results file keys it.
    pub key: String,
    /// The request.
    pub request: String,
    /// What a right answer is.
    pub expect: Expect,
    /// The tools a right run calls (report groups), in the line's order.
    pub tools: Vec<String>,
    /// The tool calls a right run makes, `finish` not counted.
    pub steps: Option<u32>,
    /// Its line in the file, from 1.
    pub line: usize,
}

/// Reads and checks the whole tasks file: every bad line is reported, and none is skipped.
pub fn read(path: &Path) -> Result<Vec<Task>, EvalError> {
    let text = std::fs::read(path).map_err(|source| EvalError::Read { path: path.to_owned(), source })?;
    let mut tasks = Vec::new();
    let mut bad = Vec::new();
    let mut claimed: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match task(raw, line) {
            Ok(task) => match claimed.get(&task.key) {
                Some(first) => bad.push(BadLine {
                    line,
                    field: "id".to_owned(),
                    problem: format!("duplicate id {:?}, first on line {first}", task.key),
                }),
                None => {
                    claimed.insert(task.key.clone(), line);
                    tasks.push(task);
                }
            },
            Err((field, problem)) => bad.push(BadLine { line, field, problem }),
        }
    }
    if !bad.is_empty() {
        return Err(EvalError::BadLines { path: path.to_owned(), lines: bad });
    }
    if tasks.is_empty() {
        return Err(EvalError::Empty { path: path.to_owned() });
    }
    Ok(tasks)
}

/// One line, or the field at fault and why.
fn task(raw: &[u8], line: usize) -> Result<Task, (String, String)> {
    let whole = |problem: String| (String::new(), problem);
    let text = std::str::from_utf8(raw).map_err(|e| whole(format!("not UTF-8 text ({e})")))?;
    let obj = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(obj)) => obj,
        Ok(other) => return Err(whole(format!("{} is not a task; a line is an object (docs/eval.md)", kind(&other)))),
        Err(e) => return Err(whole(format!("not JSON: {e}"))),
    };
    if let Some(extra) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err((extra.clone(), format!("not a field of a task (they are {FIELDS:?})")));
    }
    let field = |name: &str, problem: &str| (name.to_owned(), problem.to_owned());
    let id = obj.get("id").ok_or_else(|| field("id", "missing; every task needs one, unique in the file"))?;
    let key = id_key(id).ok_or_else(|| field("id", "must be a non-empty string or an integer"))?;
    let request = match obj.get("request") {
        Some(Value::String(r)) => r.clone(),
        Some(_) => return Err(field("request", "must be a string")),
        None => return Err(field("request", "missing; the request for the agent, a string")),
    };
    let expect =
        obj.get("expect").ok_or_else(|| field("expect", "missing; what a right answer is, as {\"number\": 42}"))?;
    let expect = Expect::parse(expect, "expect")?;
    let tools = tools(&obj)?;
    let steps = whole_number(&obj, "steps")?;
    whole_number(&obj, "max_steps")?;
    if obj.get("script").is_some_and(|s| !s.is_array() && !s.is_null()) {
        return Err(field("script", "must be an array of replies, as [{\"tool\": ..., \"arguments\": {...}}]"));
    }
    Ok(Task { id: id.clone(), key, request, expect, tools, steps, line })
}

fn tools(obj: &Map<String, Value>) -> Result<Vec<String>, (String, String)> {
    let problem = || ("tools".to_owned(), "must be an array of tool names (strings)".to_owned());
    match obj.get("tools") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => {
            list.iter().map(|t| t.as_str().filter(|t| !t.is_empty()).map(str::to_owned).ok_or_else(problem)).collect()
        }
        Some(_) => Err(problem()),
    }
}

fn whole_number(obj: &Map<String, Value>, name: &str) -> Result<Option<u32>, (String, String)> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n >= 1)
            .map(Some)
            .ok_or_else(|| (name.to_owned(), format!("{v} is not a whole number from 1"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Vec<Task>, EvalError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.jsonl");
        std::fs::write(&path, text).unwrap();
        read(&path)
    }

    #[test]
    fn a_task_line_is_read_whole() {
        let text = "{\"id\": \"a\", \"request\": \"6*7?\", \"expect\": {\"number\": 42}, \"tools\": [\"calculate\"], \"steps\": 1, \"max_steps\": 4, \"script\": []}\n\n{\"id\": 7, \"request\": \"x\", \"expect\": {\"yes_no\": \"no\"}}\n";
        let tasks = read_text(text).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!((tasks[0].key.as_str(), tasks[0].steps, tasks[0].tools.len()), ("a", Some(1), 1));
        assert_eq!((tasks[1].key.as_str(), tasks[1].line), ("7", 3));
        assert_eq!(tasks[1].expect, Expect::YesNo(false));
    }

    #[test]
    fn every_bad_line_is_named_with_its_field() {
        let text = [
            "{\"id\": \"a\", \"request\": \"x\", \"expect\": {\"number\": 1}}",
            "nope",
            "{\"id\": \"a\", \"request\": \"x\", \"expect\": {\"number\": 1}}",
            "{\"id\": \"b\", \"request\": \"x\"}",
            "{\"id\": \"c\", \"request\": \"x\", \"expect\": {\"number\": 1, \"tolerance\": \"1%\"}}",
            "{\"id\": \"d\", \"request\": \"x\", \"expect\": {\"number\": 1}, \"tool\": [\"calculate\"]}",
            "{\"id\": \"e\", \"request\": \"x\", \"expect\": {\"number\": 1}, \"steps\": 0}",
            "{\"id\": 1.5, \"request\": \"x\", \"expect\": {\"number\": 1}}",
            "{\"id\": \"f\", \"request\": \"x\", \"expect\": {\"number\": 1}, \"tools\": \"calculate\"}",
        ]
        .join("\n");
        let Err(EvalError::BadLines { lines, .. }) = read_text(&text) else { panic!("not bad lines") };
        let got: Vec<(usize, &str)> = lines.iter().map(|b| (b.line, b.field.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (2, ""),
                (3, "id"),
                (4, "expect"),
                (5, "expect.tolerance"),
                (6, "tool"),
                (7, "steps"),
                (8, "id"),
                (9, "tools")
            ]
        );
        assert!(lines[1].problem.contains("first on line 1"), "{lines:?}");
    }

    #[test]
    fn an_empty_file_is_an_error() {
        assert!(matches!(read_text("\n\n"), Err(EvalError::Empty { .. })));
    }
}
