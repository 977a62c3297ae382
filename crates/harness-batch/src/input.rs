//! The requests file: one `{"id", "request", "max_steps"?, "script"?}` object a line, read
//! whole, checked line by line, and cut into this worker's shard.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use harness_providers::ScriptedProvider;
use serde_json::Value;

use crate::error::{BatchError, Result};
use crate::names::fnv1a;
use crate::shard::Shard;

/// What to make of each line's `script` array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scripts {
    /// The provider is not `scripted`: scripts are ignored.
    Ignored,
    /// `scripted` with a `--script` for every request: a line's own script replaces it.
    Optional,
    /// `scripted` with no `--script`: every line needs its own.
    Required,
}

/// One request to run.
#[derive(Debug)]
pub struct Request {
    /// The id as the line gave it (a string or an integer), echoed in the result.
    pub id: Value,
    /// The id as text: what resuming and duplicate checks compare.
    pub key: String,
    /// The request for the agent.
    pub request: String,
    /// This request's step budget, when it sets one.
    pub max_steps: Option<u32>,
    /// This request's script as JSON Lines text, for the scripted provider.
    pub script: Option<String>,
    /// Where it is in the file, from 1 (names a per-request script in messages).
    pub line: usize,
}

/// A line that is not a request, with why.
#[derive(Debug)]
pub struct BadLine {
    /// Line number, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub problem: String,
}

/// The file, as this shard sees it.
#[derive(Debug)]
pub struct Input {
    /// This shard's requests, in file order.
    pub requests: Vec<Request>,
    /// This shard's bad lines, in file order.
    pub bad: Vec<BadLine>,
    /// Non-blank lines in the whole file, every shard's.
    pub lines: usize,
    /// The id (as text) of every request in the whole file, every shard's.
    pub ids: HashSet<String>,
    /// This shard's requests whose `script` is ignored because the provider is not scripted.
    pub ignored_scripts: usize,
    /// The line of the first of them, from 1.
    pub first_ignored_script: Option<usize>,
    /// The whole file's fingerprint (a 64-bit FNV-1a hash, in hex): every shard of one file,
    /// and every rerun of it, writes the same one, which is how a merge knows one batch.
    pub fingerprint: String,
    /// The shard read.
    pub shard: Shard,
}

impl Default for Input {
    fn default() -> Self {
        Self {
            requests: Vec::new(),
            bad: Vec::new(),
            lines: 0,
            ids: HashSet::new(),
            ignored_scripts: 0,
            first_ignored_script: None,
            fingerprint: String::new(),
            shard: Shard::ALL,
        }
    }
}

/// An id's text, when it is a usable id: a non-empty string or an integer.
pub fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// The first line (from 1) of the requests file whose object has a `script`, if any: such a file
/// is meant for the scripted provider. Lines that are not JSON objects are left to [`read`].
pub fn first_script_line(path: &Path) -> Result<Option<usize>> {
    let bytes = std::fs::read(path).map_err(|source| BatchError::ReadRequests { path: path.to_owned(), source })?;
    let has_script = |raw: &[u8]| {
        serde_json::from_slice::<Value>(raw).is_ok_and(|v| v.as_object().is_some_and(|o| o.contains_key("script")))
    };
    Ok(bytes.split(|&b| b == b'\n').position(has_script).map(|i| i + 1))
}

/// Reads the requests file and keeps this shard's lines. Duplicates are found over the whole
/// file (the first line with an id claims it), so that shards agree on which line runs.
pub fn read(path: &Path, shard: Shard, scripts: Scripts) -> Result<Input> {
    let bytes = std::fs::read(path).map_err(|source| BatchError::ReadRequests { path: path.to_owned(), source })?;
    let mut input = Input { fingerprint: format!("{:016x}", fnv1a(&bytes)), shard, ..Input::default() };
    let mut claimed: HashMap<String, usize> = HashMap::new();
    let name = path.display().to_string();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        input.lines += 1;
        let ours = shard.takes(line);
        let parsed = std::str::from_utf8(raw)
            .map_err(|e| format!("not UTF-8 text ({e})"))
            .and_then(|text| serde_json::from_str::<Value>(text).map_err(|e| format!("not JSON: {e}")));
        let mut bad = |problem: String| {
            if ours {
                input.bad.push(BadLine { line, problem });
            }
        };
        let obj = match parsed {
            Ok(Value::Object(obj)) => obj,
            Ok(_) => {
                bad("not a JSON object; a line is {\"id\": ..., \"request\": \"...\"}".to_owned());
                continue;
            }
            Err(problem) => {
                bad(problem);
                continue;
            }
        };
        let Some(id) = obj.get("id") else {
            bad("no \"id\"; every request needs one (a string or an integer), unique in the file".to_owned());
            continue;
        };
        let Some(key) = id_key(id) else {
            bad(format!("the \"id\" {id} is not a non-empty string or an integer"));
            continue;
        };
        if let Some(first) = claimed.get(&key) {
            bad(format!("duplicate id {key:?}, first on line {first}"));
            continue;
        }
        claimed.insert(key.clone(), line);
        if !ours {
            continue;
        }
        match request(&obj, id, key, line, &name, scripts) {
            Ok(r) => {
                if scripts == Scripts::Ignored && obj.contains_key("script") {
                    input.ignored_scripts += 1;
                    input.first_ignored_script.get_or_insert(line);
                }
                input.requests.push(r);
            }
            Err(problem) => input.bad.push(BadLine { line, problem }),
        }
    }
    input.ids = claimed.into_keys().collect();
    Ok(input)
}

/// The rest of a line whose id is good.
fn request(
    obj: &serde_json::Map<String, Value>,
    id: &Value,
    key: String,
    line: usize,
    file: &str,
    scripts: Scripts,
) -> std::result::Result<Request, String> {
    let request = match obj.get("request") {
        Some(Value::String(r)) => r.clone(),
        Some(other) => return Err(format!("the \"request\" must be a string, not {}", kind(other))),
        None => return Err("no \"request\" string".to_owned()),
    };
    let max_steps = match obj.get("max_steps") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|&n| n >= 1) {
            Some(n) => Some(n),
            None => return Err(format!("\"max_steps\" {v} is not a whole number of steps from 1")),
        },
    };
    let script = match (scripts, obj.get("script")) {
        (Scripts::Ignored, _) | (Scripts::Optional, None | Some(Value::Null)) => None,
        (Scripts::Required, None | Some(Value::Null)) => {
            return Err(
                "no \"script\": with the scripted provider and no --script, each line carries its replies, as \"script\": [{\"tool\": ..., \"arguments\": {...}}, ...]"
                    .to_owned(),
            );
        }
        (_, Some(Value::Array(replies))) => {
            let text: String = replies.iter().map(|r| format!("{r}\n")).collect();
            ScriptedProvider::from_jsonl(&format!("{file}:{line}"), &text)
                .map_err(|e| format!("its \"script\" is not a list of replies: {e}"))?;
            Some(text)
        }
        (_, Some(other)) => return Err(format!("the \"script\" must be an array of replies, not {}", kind(other))),
    };
    Ok(Request { id: id.clone(), key, request, max_steps, script, line })
}

/// A JSON value's kind, for messages: "a string", "an array", ...
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str, shard: Shard, scripts: Scripts) -> Input {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, text).unwrap();
        read(&path, shard, scripts).unwrap()
    }

    #[test]
    fn bad_lines_are_named_and_the_rest_kept() {
        let text = "{\"id\": \"a\", \"request\": \"x\"}\nnope\n\n[1]\n{\"request\": \"x\"}\n{\"id\": \"a\", \"request\": \"y\"}\n{\"id\": 7, \"request\": \"z\", \"max_steps\": 2}\n{\"id\": \"b\", \"request\": 1}\n{\"id\": \"c\", \"request\": \"x\", \"max_steps\": 0}\n{\"id\": 1.5, \"request\": \"x\"}\n\u{ff}";
        let input = read_text(text, Shard::ALL, Scripts::Ignored);
        let ids: Vec<&str> = input.requests.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(ids, vec!["a", "7"]);
        assert_eq!(input.requests[1].max_steps, Some(2));
        let bad: Vec<(usize, &str)> = input.bad.iter().map(|b| (b.line, b.problem.as_str())).collect();
        let lines: Vec<usize> = bad.iter().map(|b| b.0).collect();
        assert_eq!(lines, vec![2, 4, 5, 6, 8, 9, 10, 11], "{bad:?}");
        assert!(bad[3].1.contains("duplicate id \"a\", first on line 1"), "{bad:?}");
        assert_eq!(input.lines, 10);
    }

    #[test]
    fn a_duplicate_in_another_shard_is_still_a_duplicate() {
        let text = "{\"id\": \"a\", \"request\": \"x\"}\n{\"id\": \"a\", \"request\": \"x\"}\n";
        let zero = read_text(text, Shard { index: 0, count: 2 }, Scripts::Ignored);
        let one = read_text(text, Shard { index: 1, count: 2 }, Scripts::Ignored);
        assert_eq!((zero.requests.len(), zero.bad.len()), (1, 0));
        assert_eq!((one.requests.len(), one.bad.len()), (0, 1));
    }

    #[test]
    fn scripts_are_checked_only_for_the_scripted_provider() {
        let text = "{\"id\": 1, \"request\": \"x\", \"script\": [{\"tool\": \"finish\", \"arguments\": {\"answer\": 1}}]}\n{\"id\": 2, \"request\": \"x\"}\n{\"id\": 3, \"request\": \"x\", \"script\": [{\"tol\": 1}]}\n";
        let input = read_text(text, Shard::ALL, Scripts::Required);
        assert_eq!(input.requests.len(), 1);
        assert!(input.requests[0].script.as_deref().is_some_and(|s| s.contains("finish")));
        assert!(input.bad[0].problem.contains("no \"script\""), "{:?}", input.bad);
        assert!(input.bad[1].problem.contains(":3, line 1"), "{:?}", input.bad);
        let input = read_text(text, Shard::ALL, Scripts::Optional);
        assert_eq!(input.requests.len(), 2);
        let input = read_text(text, Shard::ALL, Scripts::Ignored);
        assert_eq!((input.requests.len(), input.ignored_scripts), (3, 2));
    }
}
