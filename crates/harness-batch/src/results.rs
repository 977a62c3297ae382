//! The results file (`--out`): read back on start to skip what is done, locked against a
//! second batch, and appended one complete line per finished run. An id's latest line is the
//! one that counts: a run resumed after approval appends a line that supersedes its
//! `awaiting_approval` line.

use std::collections::{HashMap, HashSet};
use std::fs::{File, TryLockError};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use harness_core::{HarnessError, RunStatus, Usage};
use serde::Serialize;
use serde_json::Value;

use crate::error::{BatchError, Result};
use crate::input::id_key;

/// One line of the results file.
#[derive(Debug, Serialize)]
pub struct ResultLine<'a> {
    /// The request's id, as its line gave it.
    pub id: &'a Value,
    /// `finished`, `step_budget_exhausted`, `time_budget_exhausted`, `failed` or `awaiting_approval`.
    pub status: RunStatus,
    /// `finish`'s answer, or null.
    pub answer: Option<&'a Value>,
    /// Steps taken.
    pub steps: u32,
    /// Tokens spent over the run.
    pub usage: Usage,
    /// Why the run did not finish, or null.
    pub error: Option<&'a HarnessError>,
    /// Wall time of the run, in milliseconds (microsecond precision).
    pub duration_ms: f64,
    /// Model requests the provider retried.
    pub retries: u32,
    /// The call an `awaiting_approval` run stopped before: id, tool, key, arguments, effect, step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<&'a Value>,
    /// The run's trace file: with `--traces`, and always for a run awaiting approval (which
    /// resumes from it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<&'a Path>,
    /// The requests file's fingerprint: lines from one file, and so one batch, share it.
    pub batch: &'a str,
    /// The request's line in the requests file, from 1 (merged shards are put back in this order).
    pub line: usize,
    /// `I/N` when the batch was one shard of N; `harness batch merge` drops it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<&'a str>,
}

/// A request whose latest result line says it stopped before a call that waits for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaiting {
    /// That result line's number in the results file, from 1.
    pub line: usize,
    /// The pending call's id (what an approvals file answers), when the line says.
    pub call: Option<String>,
    /// The pending call's tool, as the policy names it (`plugin.tool`), for messages.
    pub tool: String,
    /// The trace the run resumes from, when the line says.
    pub trace: Option<PathBuf>,
    /// The pending call's digest (`pending.digest`), which an approval must name.
    pub digest: Option<String>,
}

/// What the file held when the batch started.
#[derive(Debug, Default)]
pub struct Earlier {
    /// Ids (as text) that already have a result line, awaiting ones included.
    pub done: HashSet<String>,
    /// Ids whose latest line is `awaiting_approval`, with what that line says.
    pub awaiting: HashMap<String, Awaiting>,
    /// Ids whose latest line is `failed` for the provider's reasons (`provider_error`: the
    /// server failed, refused or could not be reached), which `--retry-failed` runs again.
    pub provider_failed: HashSet<String>,
    /// Lines that are not results (reported, left in place).
    pub foreign: Vec<(usize, String)>,
    /// Whether a torn last line, left by a killed batch, was cut off.
    pub torn: bool,
    /// Why the file could not be locked, on a file system without locks (it is used unguarded).
    pub unlocked: Option<io::Error>,
}

/// The open results file, locked for this batch.
pub struct ResultsFile {
    file: File,
    path: PathBuf,
}

impl ResultsFile {
    /// Opens (or creates) the file, takes its lock, reads what is done, and cuts a torn last line.
    pub fn open(path: &Path) -> Result<(Self, Earlier)> {
        let named = |source| BatchError::OpenResults { path: path.to_owned(), source };
        let mut file = harness_core::no_follow::append_file(path).map_err(named)?;
        let unlocked = lock(&file, path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(named)?;
        let mut earlier = Earlier { unlocked, ..Earlier::default() };
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for (i, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match read_result(line, i + 1) {
                Some((key, latest)) => earlier.count(key, latest),
                None => earlier.foreign.push((i + 1, String::from_utf8_lossy(line).chars().take(80).collect())),
            }
        }
        let tail = &bytes[complete..];
        if !tail.iter().all(u8::is_ascii_whitespace) {
            let failed = |source| BatchError::RepairResults { path: path.to_owned(), source };
            let at = bytes[..complete].split(|&b| b == b'\n').count();
            if let Some((key, latest)) = read_result(tail, at) {
                // A whole line that only lacks its newline (written by hand, or by another tool).
                file.write_all(b"\n").map_err(failed)?;
                earlier.count(key, latest);
            } else {
                file.set_len(complete as u64).map_err(failed)?;
                earlier.torn = true;
            }
        }
        Ok((Self { file, path: path.to_owned() }, earlier))
    }

    /// The directory where traces of runs awaiting approval are kept when there is no
    /// `--traces`: `<out>.pending`, beside the results file.
    pub fn pending_dir(&self) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(".pending");
        PathBuf::from(name)
    }

    /// Appends one line and hands it to the OS, so a kill right after loses nothing.
    pub fn append(&mut self, line: &ResultLine<'_>) -> Result<()> {
        let mut text =
            serde_json::to_vec(line).map_err(|source| BatchError::EncodeResult { id: line.id.to_string(), source })?;
        text.push(b'\n');
        self.file
            .write_all(&text)
            .and_then(|()| self.file.flush())
            .map_err(|source| BatchError::WriteResults { path: self.path.clone(), source })
    }
}

/// What a result line says of its request, as far as a rerun cares.
enum Latest {
    /// The run awaits approval.
    Awaiting(Awaiting),
    /// The run failed for the provider's reasons.
    ProviderFailed,
    /// Anything else: done.
    Done,
}

impl Earlier {
    /// Counts a result line; a later line of an id replaces what an earlier one said.
    fn count(&mut self, key: String, latest: Latest) {
        self.provider_failed.remove(&key);
        match latest {
            Latest::Awaiting(a) => {
                self.awaiting.insert(key.clone(), a);
            }
            Latest::ProviderFailed => {
                self.awaiting.remove(&key);
                self.provider_failed.insert(key.clone());
            }
            Latest::Done => {
                self.awaiting.remove(&key);
            }
        }
        self.done.insert(key);
    }

    /// Lets the requests whose latest line failed for the provider's reasons run again
    /// (`--retry-failed`): they are no longer done. Returns how many.
    pub fn retry_provider_failures(&mut self) -> usize {
        for key in &self.provider_failed {
            self.done.remove(key);
        }
        std::mem::take(&mut self.provider_failed).len()
    }
}

/// The id of a result line (numbered `at`), and what it says of its request.
fn read_result(line: &[u8], at: usize) -> Option<(String, Latest)> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let obj = value.as_object()?;
    let status = obj.get("status")?;
    let key = id_key(obj.get("id")?)?;
    if status == "failed" {
        let code = obj.get("error").and_then(|e| e.get("code"));
        let failed = if code.is_some_and(|c| c == "provider_error") { Latest::ProviderFailed } else { Latest::Done };
        return Some((key, failed));
    }
    if status != "awaiting_approval" {
        return Some((key, Latest::Done));
    }
    // `pending` is the batch's own field; an error's details carry the same call.
    let pending = obj.get("pending").or_else(|| obj.get("error")?.get("details")?.get("pending"));
    let field = |name: &str| pending.and_then(|p| p.get(name)).and_then(Value::as_str).map(str::to_owned);
    let awaiting = Awaiting {
        line: at,
        call: field("id"),
        tool: field("key").or_else(|| field("tool")).unwrap_or_default(),
        trace: obj.get("trace").and_then(Value::as_str).map(PathBuf::from),
        digest: field("digest"),
    };
    Some((key, Latest::Awaiting(awaiting)))
}

/// Takes an exclusive lock on the file, so that two batches never append to one results file.
/// Returns why it could not, on a file system without locks.
fn lock(file: &File, path: &Path) -> Result<Option<io::Error>> {
    // The lock goes with the handle: when the file is closed or the process ends. On Windows
    // it is LockFileEx's, which keeps other handles from reading the file too until then: the
    // harness reads a results file again only after it has closed it (eval's scoring).
    match file.try_lock() {
        Ok(()) => Ok(None),
        Err(TryLockError::WouldBlock) => Err(BatchError::ResultsLocked { path: path.to_owned() }),
        // A file system without locks (some network mounts) still works, unguarded.
        Err(TryLockError::Error(error)) => Ok(Some(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_ids_are_read_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, "{\"id\":\"a\",\"status\":\"finished\"}\nnot a result\n{\"id\":7,\"status\":\"failed\"}\n{\"id\":\"b\",\"sta").unwrap();
        let (file, earlier) = ResultsFile::open(&path).unwrap();
        drop(file);
        assert_eq!(earlier.done, HashSet::from(["a".to_owned(), "7".to_owned()]));
        assert_eq!(earlier.foreign, vec![(2, "not a result".to_owned())]);
        assert!(earlier.torn);
        assert!(std::fs::read_to_string(&path).unwrap().ends_with("\"failed\"}\n"));
    }

    #[test]
    fn a_whole_last_line_without_its_newline_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, "{\"id\":\"a\",\"status\":\"finished\"}").unwrap();
        let (mut file, earlier) = ResultsFile::open(&path).unwrap();
        assert!(!earlier.torn && earlier.done.contains("a"));
        let id = Value::from("b");
        let line = ResultLine {
            id: &id,
            status: RunStatus::Finished,
            answer: None,
            steps: 1,
            usage: Usage::default(),
            error: None,
            duration_ms: 1.5,
            retries: 0,
            pending: None,
            trace: None,
            batch: "0123456789abcdef",
            line: 2,
            shard: None,
        };
        file.append(&line).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.ends_with("\"duration_ms\":1.5,\"retries\":0,\"batch\":\"0123456789abcdef\",\"line\":2}\n"),
            "{text}"
        );
    }

    #[test]
    fn the_latest_line_of_an_id_says_whether_it_awaits_approval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let waits = |id: &str, call: &str| {
            format!(
                "{{\"id\":\"{id}\",\"status\":\"awaiting_approval\",\"pending\":{{\"id\":\"{call}\",\"key\":\"files.write_file\"}},\"trace\":\"p/{id}.jsonl\"}}\n"
            )
        };
        let text =
            waits("a", "c1") + &waits("b", "c2") + "{\"id\":\"a\",\"status\":\"finished\"}\n" + &waits("b", "c5");
        std::fs::write(&path, text).unwrap();
        let (file, earlier) = ResultsFile::open(&path).unwrap();
        assert_eq!(earlier.done, HashSet::from(["a".to_owned(), "b".to_owned()]));
        let b = Awaiting {
            line: 4,
            call: Some("c5".into()),
            tool: "files.write_file".into(),
            trace: Some(PathBuf::from("p/b.jsonl")),
            digest: None,
        };
        assert_eq!(earlier.awaiting, HashMap::from([("b".to_owned(), b)]));
        assert_eq!(file.pending_dir(), dir.path().join("out.jsonl.pending"));
    }

    #[test]
    fn the_latest_line_of_an_id_says_whether_it_failed_for_the_provider() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let failed = |id: &str, code: &str| {
            format!("{{\"id\":\"{id}\",\"status\":\"failed\",\"error\":{{\"code\":\"{code}\"}}}}\n")
        };
        let text = failed("a", "provider_error")
            + &failed("b", "provider_error")
            + "{\"id\":\"a\",\"status\":\"finished\"}\n"
            + &failed("c", "trace_error")
            + "{\"id\":\"d\",\"status\":\"step_budget_exhausted\"}\n";
        std::fs::write(&path, text).unwrap();
        let (_file, mut earlier) = ResultsFile::open(&path).unwrap();
        assert_eq!(earlier.provider_failed, HashSet::from(["b".to_owned()]));
        assert_eq!(earlier.retry_provider_failures(), 1);
        assert_eq!(earlier.done, HashSet::from(["a".to_owned(), "c".to_owned(), "d".to_owned()]));
    }

    #[cfg(unix)]
    #[test]
    fn a_second_batch_on_the_same_file_is_refused_until_the_first_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let (held, earlier) = ResultsFile::open(&path).unwrap();
        assert!(earlier.unlocked.is_none(), "{:?}", earlier.unlocked);
        let e = ResultsFile::open(&path).err().unwrap().to_string();
        assert!(e.contains("another harness batch"), "{e}");
        drop(held);
        assert!(ResultsFile::open(&path).is_ok(), "the lock goes with the file");
    }
}
