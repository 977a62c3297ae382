//! The results file (`--out`): read back on start to skip what is done, locked against a
//! second batch, and appended one complete line per finished run.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use harness_core::{HarnessError, Usage};
use serde::Serialize;
use serde_json::Value;

use super::input::id_key;
use crate::Result;
use crate::error::CliError;

/// One line of the results file.
#[derive(Debug, Serialize)]
pub(crate) struct ResultLine<'a> {
    /// The request's id, as its line gave it.
    pub(crate) id: &'a Value,
    /// `finished`, `step_budget_exhausted`, `time_budget_exhausted` or `failed`.
    pub(crate) status: &'a str,
    /// `finish`'s answer, or null.
    pub(crate) answer: Option<&'a Value>,
    /// Steps taken.
    pub(crate) steps: u32,
    /// Tokens spent over the run.
    pub(crate) usage: Usage,
    /// Why the run did not finish, or null.
    pub(crate) error: Option<&'a HarnessError>,
    /// Wall time of the run, in milliseconds (microsecond precision).
    pub(crate) duration_ms: f64,
    /// Model requests the provider retried.
    pub(crate) retries: u32,
    /// The run's trace file, with `--traces`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) trace: Option<&'a Path>,
}

/// What the file held when the batch started.
#[derive(Debug, Default)]
pub(crate) struct Earlier {
    /// Ids (as text) that already have a result line.
    pub(crate) done: HashSet<String>,
    /// Lines that are not results (reported, left in place).
    pub(crate) foreign: Vec<(usize, String)>,
    /// Whether a torn last line, left by a killed batch, was cut off.
    pub(crate) torn: bool,
}

/// The open results file, locked for this batch.
pub(crate) struct ResultsFile {
    file: File,
    path: PathBuf,
}

impl ResultsFile {
    /// Opens (or creates) the file, takes its lock, reads what is done, and cuts a torn last line.
    pub(crate) fn open(path: &Path) -> Result<(Self, Earlier)> {
        let named = |e: io::Error| CliError::Usage(format!("cannot open the results file {}: {e}", path.display()));
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path).map_err(named)?;
        lock(&file, path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(named)?;
        let mut earlier = Earlier::default();
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for (i, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match result_id(line) {
                Some(key) => {
                    earlier.done.insert(key);
                }
                None => earlier.foreign.push((i + 1, String::from_utf8_lossy(line).chars().take(80).collect())),
            }
        }
        let tail = &bytes[complete..];
        if !tail.iter().all(u8::is_ascii_whitespace) {
            let failed =
                |e: io::Error| CliError::Failure(format!("cannot repair the results file {}: {e}", path.display()));
            if let Some(key) = result_id(tail) {
                // A whole line that only lacks its newline (written by hand, or by another tool).
                file.write_all(b"\n").map_err(failed)?;
                earlier.done.insert(key);
            } else {
                file.set_len(complete as u64).map_err(failed)?;
                earlier.torn = true;
            }
        }
        Ok((Self { file, path: path.to_owned() }, earlier))
    }

    /// Appends one line and hands it to the OS, so a kill right after loses nothing.
    pub(crate) fn append(&mut self, line: &ResultLine<'_>) -> Result<()> {
        let mut text = serde_json::to_vec(line)
            .map_err(|e| CliError::Failure(format!("cannot encode the result of {}: {e}", line.id)))?;
        text.push(b'\n');
        self.file
            .write_all(&text)
            .and_then(|()| self.file.flush())
            .map_err(|e| CliError::Failure(format!("cannot write to the results file {}: {e}", self.path.display())))
    }
}

/// The id of a result line, when the line is one.
fn result_id(line: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let obj = value.as_object()?;
    obj.get("status")?;
    id_key(obj.get("id")?)
}

/// Takes an exclusive lock on the file, so that two batches never append to one results file.
#[cfg(unix)]
fn lock(file: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock is called on a descriptor that `file` owns and keeps open while the lock is
    // wanted; the lock goes with the descriptor when the file is closed or the process ends.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.kind() == io::ErrorKind::WouldBlock {
        return Err(CliError::Usage(format!(
            "another harness batch is writing {} (it holds the file's lock); wait for it to end, or give each worker its own --out",
            path.display()
        )));
    }
    // A file system without locks (some network mounts) still works, unguarded.
    eprintln!("harness: warning: cannot lock {}: {error}; make sure no other batch writes to it", path.display());
    Ok(())
}

#[cfg(not(unix))]
fn lock(_: &File, _: &Path) -> Result<()> {
    Ok(())
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
            status: "finished",
            answer: None,
            steps: 1,
            usage: Usage::default(),
            error: None,
            duration_ms: 1.5,
            retries: 0,
            trace: None,
        };
        file.append(&line).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.ends_with("\"duration_ms\":1.5,\"retries\":0}\n"), "{text}");
    }

    #[cfg(unix)]
    #[test]
    fn a_second_batch_on_the_same_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let (_held, _) = ResultsFile::open(&path).unwrap();
        let e = ResultsFile::open(&path).err().unwrap().to_string();
        assert!(e.contains("another harness batch"), "{e}");
    }
}
