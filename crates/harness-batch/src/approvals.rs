//! The approvals file (`--approvals`): the operator's answers to the calls that runs of a
//! batch stopped before, one JSON object a line:
//!
//! ```json
//! {"id": "case-1", "call": "call_2", "digest": "5d0f9a61c2b7e4a8", "approve": true}
//! {"id": "case-7", "call": "call_1", "approve": false, "reason": "not in this repository"}
//! ```
//!
//! Every line is checked against the requests file and the results file before anything runs:
//! a line that names no request, answers a call other than the one its run waits on, approves
//! without the digest of the call its result line shows (or with another), or is not such an
//! object stops the batch, naming the file, the line and the fix.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use harness_core::{Answer, printable};
use serde::Deserialize;

use crate::error::{BatchError, Result};
use crate::input::{Input, id_key};
use crate::results::Earlier;

/// The operator's answer to one pending call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The approvals file's line, from 1.
    pub line: usize,
    /// The call answered.
    pub call: String,
    /// `Yes`, or `No` with the reason the model is told.
    pub answer: Answer,
    /// The whole digest of the call approved, from its result line (`pending.digest`), whose
    /// first digits the line named: the resumed run runs that call and no other.
    pub digest: Option<String>,
}

/// What an approvals file answers, by request id (as text).
#[derive(Debug, Default)]
pub struct Answers {
    /// The answers for requests of this shard whose latest result awaits approval.
    pub by_id: HashMap<String, Answered>,
    /// Lines for requests of this shard that no longer wait (resumed already, or never
    /// stopped): their line number and id; left unused, so that rerunning a command is harmless.
    pub stale: Vec<(usize, String)>,
}

/// One line as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    id: serde_json::Value,
    call: String,
    approve: bool,
    #[serde(default)]
    digest: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

const FORMAT: &str = "each line is {\"id\": REQUEST_ID, \"call\": CALL_ID, \"digest\": DIGEST, \"approve\": true} or {\"id\": ..., \"call\": ..., \"approve\": false, \"reason\": TEXT}";

/// Hex digits of a call's digest an approval must give at least: as `run --approve ID@DIGEST`
/// (64 bits, so that forging an edited call with the same prefix is out of reach).
const DIGEST_GIVEN: usize = 16;

/// What one good line comes to.
enum Verdict {
    /// An answer to use: the request's id (as text) and the answer.
    Use(String, Answered),
    /// The request is this shard's but no longer waits.
    Stale(String),
    /// The request is another shard's.
    NotOurs,
}

/// Reads the approvals file at `path` and checks each line against the requests file (`input`,
/// this shard's, which knows every id of the file) and the results file (`earlier`).
pub fn read_answers(path: &Path, input: &Input, earlier: &Earlier) -> Result<Answers> {
    let text =
        std::fs::read_to_string(path).map_err(|source| BatchError::ReadApprovals { path: path.to_owned(), source })?;
    let ours: HashSet<&str> = input.requests.iter().map(|r| r.key.as_str()).collect();
    let mut answers = Answers::default();
    let mut problems = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        match check(raw, line, input, &ours, earlier, &answers) {
            Ok(Verdict::Use(key, answered)) => {
                answers.by_id.insert(key, answered);
            }
            Ok(Verdict::Stale(key)) => answers.stale.push((line, key)),
            Ok(Verdict::NotOurs) => {}
            Err(problem) => problems.push(format!("{}:{line}: {problem}", path.display())),
        }
    }
    if problems.is_empty() { Ok(answers) } else { Err(BatchError::BadApprovals(problems.join("\n"))) }
}

/// Checks one line; the error says what is wrong with it and what to do.
fn check(
    raw: &str,
    line: usize,
    input: &Input,
    ours: &HashSet<&str>,
    earlier: &Earlier,
    answers: &Answers,
) -> std::result::Result<Verdict, String> {
    let parsed: Line = serde_json::from_str(raw).map_err(|e| format!("{e}; {FORMAT}"))?;
    let key = id_key(&parsed.id)
        .ok_or_else(|| format!("the \"id\" {} is not a non-empty string or an integer", parsed.id))?;
    if !input.ids.contains(&key) {
        return Err(format!(
            "no request has the id {key:?} in the requests file; give the id of a request whose result is awaiting_approval, or remove the line"
        ));
    }
    if !ours.contains(key.as_str()) {
        return Ok(Verdict::NotOurs);
    }
    if let Some(first) = answers.by_id.get(&key) {
        return Err(format!("request {key:?} is answered already on line {}; keep one answer", first.line));
    }
    let Some(waiting) = earlier.awaiting.get(&key) else { return Ok(Verdict::Stale(key)) };
    match &waiting.call {
        Some(call) if *call == parsed.call => {}
        Some(call) => {
            // Call ids come from the provider, tool names from the results file: shown escaped.
            let (call, tool, given) = (printable(call), printable(&waiting.tool), printable(&parsed.call));
            return Err(format!(
                "request {key:?} waits on call {call} ({tool}), not {given}: answer {call} (see its result line {} of the results file)",
                waiting.line
            ));
        }
        None => {
            return Err(format!(
                "request {key:?}: its result line {} does not name its pending call, so it cannot be resumed; remove that line of the results file to run the request again",
                waiting.line
            ));
        }
    }
    let answer = match (parsed.approve, parsed.reason) {
        (true, None) => Answer::Yes,
        (true, Some(_)) => {
            return Err(
                "a \"reason\" goes with \"approve\": false (it is told to the model when a call is denied); remove it"
                    .to_owned(),
            );
        }
        (false, reason) => Answer::No(reason),
    };
    let digest = approved_digest(&key, waiting, parsed.approve, parsed.digest.as_deref())?;
    Ok(Verdict::Use(key, Answered { line, call: parsed.call, answer, digest }))
}

/// The whole digest of the call an approval names: its result line's `pending.digest`, which
/// the line's `digest` must begin (an approval must give one; a denial may). Without it an
/// edited trace or results file could run a call other than the one the operator read.
fn approved_digest(
    key: &str,
    waiting: &crate::results::Awaiting,
    approve: bool,
    given: Option<&str>,
) -> std::result::Result<Option<String>, String> {
    let Some(given) = given else {
        if !approve {
            return Ok(None);
        }
        let shown = waiting.digest.as_deref().map_or_else(String::new, |d| short(d).to_owned());
        return Err(format!(
            "request {key:?}: an approval names the digest of the call it approves: add \"digest\": \"{shown}\" (its result line {}'s pending.digest, after you read the call there)",
            waiting.line
        ));
    };
    if given.len() < DIGEST_GIVEN || !given.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "request {key:?}: \"digest\" {:?} is not a call digest: give at least {DIGEST_GIVEN} hex digits of its result line's pending.digest",
            printable(given)
        ));
    }
    let Some(shown) = waiting.digest.as_deref() else {
        return Err(format!(
            "request {key:?}: its result line {} carries no pending.digest to check the approval against; remove that line of the results file to run the request again",
            waiting.line
        ));
    };
    if !shown.starts_with(&given.to_ascii_lowercase()) {
        return Err(format!(
            "request {key:?}: the call {} changed since it was shown to you (its result line {} says digest {}, not {}); nothing ran. Read the call again and approve it again if you mean to",
            printable(waiting.call.as_deref().unwrap_or("?")),
            waiting.line,
            printable(short(shown)),
            printable(given)
        ));
    }
    Ok(Some(shown.to_owned()))
}

/// The first digits of a digest, as an approval gives them.
fn short(digest: &str) -> &str {
    digest.get(..DIGEST_GIVEN).unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Shard;
    use crate::input::{Scripts, read};
    use crate::results::Awaiting;

    /// Requests a, b, c; a and b await approval (calls c1 and c2), c is done.
    fn setting(dir: &Path) -> (Input, Earlier) {
        let requests = dir.join("r.jsonl");
        std::fs::write(
            &requests,
            "{\"id\":\"a\",\"request\":\"x\"}\n{\"id\":\"b\",\"request\":\"x\"}\n{\"id\":\"c\",\"request\":\"x\"}\n",
        )
        .unwrap();
        let input = read(&requests, Shard::ALL, Scripts::Ignored).unwrap();
        let mut earlier = Earlier::default();
        for (id, call) in [("a", "c1"), ("b", "c2")] {
            let digest = Some(format!("{call}{}", "ab".repeat(31)));
            let awaiting =
                Awaiting { line: 1, call: Some(call.into()), tool: "files.write_file".into(), trace: None, digest };
            earlier.awaiting.insert(id.into(), awaiting);
        }
        earlier.done.extend(["a", "b", "c"].map(str::to_owned));
        (input, earlier)
    }

    #[test]
    fn answers_are_read_and_a_line_for_a_run_that_no_longer_waits_is_noted() {
        let dir = tempfile::tempdir().unwrap();
        let (input, earlier) = setting(dir.path());
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "{\"id\":\"a\",\"call\":\"c1\",\"digest\":\"C1ABABABABABABAB\",\"approve\":true}\n\n{\"id\":\"b\",\"call\":\"c2\",\"approve\":false,\"reason\":\"no\"}\n{\"id\":\"c\",\"call\":\"c9\",\"approve\":true}\n").unwrap();
        let answers = read_answers(&path, &input, &earlier).unwrap();
        let whole = Some(format!("c1{}", "ab".repeat(31)));
        assert_eq!(answers.by_id["a"], Answered { line: 1, call: "c1".into(), answer: Answer::Yes, digest: whole });
        assert_eq!(answers.by_id["b"].answer, Answer::No(Some("no".into())));
        assert_eq!(answers.stale, vec![(4, "c".to_owned())]);
    }

    #[test]
    fn bad_lines_are_each_named_by_file_and_line_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let (input, earlier) = setting(dir.path());
        let path = dir.path().join("a.jsonl");
        std::fs::write(
            &path,
            "{\"id\":\"zz\",\"call\":\"c1\",\"approve\":true}\n{\"id\":\"a\",\"call\":\"c9\",\"approve\":true}\nnot json\n{\"id\":\"b\",\"call\":\"c2\",\"approved\":true}\n{\"id\":\"b\",\"call\":\"c2\",\"approve\":true,\"reason\":\"r\"}\n",
        )
        .unwrap();
        let e = read_answers(&path, &input, &earlier).unwrap_err().to_string();
        let name = path.display();
        for expected in [
            format!("{name}:1: no request has the id \"zz\""),
            format!("{name}:2: request \"a\" waits on call c1 (files.write_file), not c9: answer c1"),
            format!("{name}:3: expected ident"),
            format!("{name}:4: unknown field `approved`"),
            format!("{name}:5: a \"reason\" goes with \"approve\": false"),
            "nothing ran".to_owned(),
        ] {
            assert!(e.contains(&expected), "{expected} not in {e}");
        }
    }

    #[test]
    fn an_approval_without_the_digest_shown_or_with_another_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (input, earlier) = setting(dir.path());
        let path = dir.path().join("a.jsonl");
        std::fs::write(
            &path,
            "{\"id\":\"a\",\"call\":\"c1\",\"approve\":true}\n{\"id\":\"b\",\"call\":\"c2\",\"digest\":\"c1abababababababab\",\"approve\":true}\n",
        )
        .unwrap();
        let e = read_answers(&path, &input, &earlier).unwrap_err().to_string();
        let name = path.display();
        for expected in [
            format!(
                "{name}:1: request \"a\": an approval names the digest of the call it approves: add \"digest\": \"c1ababababababab\""
            ),
            format!("{name}:2: request \"b\": the call c2 changed since it was shown to you"),
        ] {
            assert!(e.contains(&expected), "{expected} not in {e}");
        }
        std::fs::write(&path, "{\"id\":\"b\",\"call\":\"c2\",\"digest\":\"c2ab\",\"approve\":true}\n").unwrap();
        let e = read_answers(&path, &input, &earlier).unwrap_err().to_string();
        assert!(e.contains("is not a call digest: give at least 16 hex digits"), "{e}");
    }
}
