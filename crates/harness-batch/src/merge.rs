//! `harness batch merge`: the results files of a batch's shards joined into one, whose lines
//! are those a single process would have written, in the order of the requests file. Within
//! one input an id's latest line is its result (a run resumed after approval supersedes its
//! `awaiting_approval` line); across inputs an id may appear once.

// A Windows `PathBuf` is 8 bytes larger than a Unix one, which takes the errors with two paths
// past clippy's size threshold there; they are built once, on the way out of a merge.
#![cfg_attr(windows, allow(clippy::result_large_err))]

use std::collections::{BTreeSet, HashMap};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::input::{self, id_key};
use crate::shard::Shard;
use crate::{Scripts, error::BatchError};

/// Why a merge was refused. Nothing is written when it is.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// An input cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The input.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a result line.
    #[error("{}:{line}: {problem}", path.display())]
    NotAResult {
        /// The input.
        path: PathBuf,
        /// Its line, from 1.
        line: usize,
        /// What is wrong, and what to do.
        problem: String,
    },
    /// Two lines come from different requests files.
    #[error(
        "{}:{line}: from batch {found}, but {}:{first_line} is from batch {expected}: these results come from different requests files (or one was edited between runs); merge each batch's files on their own",
        path.display(), first_path.display()
    )]
    OtherBatch {
        /// The input.
        path: PathBuf,
        /// Its line.
        line: usize,
        /// Its batch fingerprint (`none` when it has none).
        found: String,
        /// The first line's input.
        first_path: PathBuf,
        /// The first line's line.
        first_line: usize,
        /// The first line's fingerprint.
        expected: String,
    },
    /// Two lines carry one id.
    #[error(
        "{}:{line}: id {id:?} already has a result at {}:{first_line}: shards overlap (the same shard given twice, or shards of different splits); merge each id once",
        path.display(), first_path.display()
    )]
    Overlap {
        /// The input.
        path: PathBuf,
        /// Its line.
        line: usize,
        /// The id.
        id: String,
        /// Where it was first.
        first_path: PathBuf,
        /// Its line there.
        first_line: usize,
    },
    /// The inputs were cut into different numbers of shards.
    #[error(
        "{}:{line}: shard {shard}, but {}:{first_line} is of a split into {count}: every input must come from one split",
        path.display(), first_path.display()
    )]
    OtherSplit {
        /// The input.
        path: PathBuf,
        /// Its line.
        line: usize,
        /// Its shard, as written.
        shard: String,
        /// The first line's input.
        first_path: PathBuf,
        /// The first line's line.
        first_line: usize,
        /// The shard count the first line gave.
        count: usize,
    },
    /// Shards or requests have no results.
    #[error(
        "{0}; run what is missing (each shard resumes with its own --out), or pass --partial to merge what there is"
    )]
    Incomplete(String),
    /// The requests file given to check against could not be read.
    #[error(transparent)]
    Requests(#[from] BatchError),
    /// The merged file exists already.
    #[error("{}: exists already; merge never overwrites: remove it or name another --out", path.display())]
    OutExists {
        /// The file.
        path: PathBuf,
    },
    /// The merged file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl MergeError {
    /// Whether the inputs or flags are at fault (exit 2) rather than the writing (exit 1).
    pub fn is_usage(&self) -> bool {
        !matches!(self, Self::Write { .. })
    }
}

/// What a merge did.
#[derive(Debug)]
pub struct Merged {
    /// Result lines written.
    pub records: usize,
    /// The batch's fingerprint, when its lines carry one.
    pub batch: Option<String>,
    /// Shards seen, and how many the batch was cut into (none when unsharded).
    pub shards: Option<(BTreeSet<usize>, usize)>,
}

/// One result line, kept as its text.
struct Record {
    /// The line's text, without its `shard` field.
    text: String,
    /// Its place in the requests file, when it says.
    order: Option<u64>,
}

/// Where a fact was first seen: the input and its line.
type Seen = (PathBuf, usize);

/// What the inputs agree on so far.
#[derive(Default)]
struct Agreed {
    batch: Option<(Option<String>, Seen)>,
    split: Option<(usize, Seen)>,
    shards: BTreeSet<usize>,
    /// Where each id was first seen, the input's index, and its record.
    ids: HashMap<String, (Seen, usize, usize)>,
    records: Vec<Record>,
}

/// Joins `inputs` into `out` (which must not exist). With `requests`, every good line of the
/// requests file must have a result, unless `partial`; without it, every shard must have one.
pub fn merge(inputs: &[PathBuf], out: &Path, requests: Option<&Path>, partial: bool) -> Result<Merged, MergeError> {
    if out.exists() {
        return Err(MergeError::OutExists { path: out.to_owned() });
    }
    let mut agreed = Agreed::default();
    for (input, path) in inputs.iter().enumerate() {
        let bytes = std::fs::read(path).map_err(|source| MergeError::Read { path: path.clone(), source })?;
        read_file(path, input, &bytes, &mut agreed)?;
    }
    if !partial {
        complete(&agreed, requests)?;
    }
    agreed.records.sort_by_key(|r| r.order.unwrap_or(u64::MAX));
    write(out, &agreed.records)?;
    Ok(Merged {
        records: agreed.records.len(),
        batch: agreed.batch.and_then(|(b, _)| b),
        shards: agreed.split.map(|(count, _)| (agreed.shards, count)),
    })
}

/// Reads one input's lines (the `input`-th) into `agreed`, refusing what does not agree.
fn read_file(path: &Path, input: usize, bytes: &[u8], agreed: &mut Agreed) -> Result<(), MergeError> {
    let lines = bytes.split(|&b| b == b'\n').count();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // The last piece has no newline after it: a line cut mid-write.
        let torn = line == lines;
        let not_a_result = |problem: String| MergeError::NotAResult { path: path.to_owned(), line, problem };
        let value: Value = serde_json::from_slice(raw).map_err(|e| {
            not_a_result(if torn {
                "a torn last line: the batch writing this file was killed mid-line; rerun it with the same --out (it cuts the line and runs its request again), then merge".to_owned()
            } else {
                format!("not a result line (not JSON: {e}); remove it, then merge")
            })
        })?;
        let obj = value.as_object().filter(|o| o.contains_key("status"));
        let Some((obj, key)) = obj.and_then(|o| Some((o, id_key(o.get("id")?)?))) else {
            return Err(not_a_result(
                "not a result line (a JSON object with an \"id\" and a \"status\"); remove it, then merge".to_owned(),
            ));
        };
        let here = (path.to_owned(), line);
        agree_batch(obj, &here, agreed)?;
        agree_shard(obj, &here, agreed)?;
        let text = String::from_utf8_lossy(raw).trim_end_matches('\r').to_owned();
        let record = Record { text: without_shard(text, obj), order: obj.get("line").and_then(Value::as_u64) };
        match agreed.ids.get(&key) {
            Some((_, seen_in, at)) if *seen_in == input => agreed.records[*at] = record,
            Some(((first_path, first_line), _, _)) => {
                return Err(MergeError::Overlap {
                    path: path.to_owned(),
                    line,
                    id: key,
                    first_path: first_path.clone(),
                    first_line: *first_line,
                });
            }
            None => {
                agreed.ids.insert(key, (here, input, agreed.records.len()));
                agreed.records.push(record);
            }
        }
    }
    Ok(())
}

/// The line's batch must be the first line's.
fn agree_batch(obj: &serde_json::Map<String, Value>, here: &Seen, agreed: &mut Agreed) -> Result<(), MergeError> {
    let batch = obj.get("batch").and_then(Value::as_str).map(str::to_owned);
    match &agreed.batch {
        None => agreed.batch = Some((batch, here.clone())),
        Some((expected, first)) if *expected != batch => {
            let name = |b: &Option<String>| b.clone().unwrap_or_else(|| "none (an older harness)".to_owned());
            return Err(MergeError::OtherBatch {
                path: here.0.clone(),
                line: here.1,
                found: name(&batch),
                first_path: first.0.clone(),
                first_line: first.1,
                expected: name(expected),
            });
        }
        Some(_) => {}
    }
    Ok(())
}

/// The line's shard count must be the first line's.
fn agree_shard(obj: &serde_json::Map<String, Value>, here: &Seen, agreed: &mut Agreed) -> Result<(), MergeError> {
    let written = obj.get("shard").and_then(Value::as_str);
    let shard = written.and_then(|s| s.parse::<Shard>().ok()).unwrap_or(Shard::ALL);
    match &agreed.split {
        None => agreed.split = Some((shard.count, here.clone())),
        Some((count, first)) if *count != shard.count => {
            return Err(MergeError::OtherSplit {
                path: here.0.clone(),
                line: here.1,
                shard: written.unwrap_or("none").to_owned(),
                first_path: first.0.clone(),
                first_line: first.1,
                count: *count,
            });
        }
        Some(_) => {}
    }
    agreed.shards.insert(shard.index);
    Ok(())
}

/// The line as a single process writes it: its `shard` field dropped. The batch writes that
/// field last, so its text is cut; a line written otherwise is encoded again.
fn without_shard(text: String, obj: &serde_json::Map<String, Value>) -> String {
    let Some(shard) = obj.get("shard") else { return text };
    let tail = format!(",\"shard\":{shard}}}");
    match text.strip_suffix(&tail) {
        Some(head) => format!("{head}}}"),
        None => {
            let mut obj = obj.clone();
            obj.remove("shard");
            Value::Object(obj).to_string()
        }
    }
}

/// Every shard, and with `requests` every request, has its results.
fn complete(agreed: &Agreed, requests: Option<&Path>) -> Result<(), MergeError> {
    if let Some((count, _)) = &agreed.split {
        let missing: Vec<String> =
            (0..*count).filter(|i| !agreed.shards.contains(i)).map(|i| format!("{i}/{count}")).collect();
        if !missing.is_empty() {
            return Err(MergeError::Incomplete(format!("no results from shard {}", missing.join(", "))));
        }
    }
    let Some(path) = requests else { return Ok(()) };
    let input = input::read(path, Shard::ALL, Scripts::Ignored)?;
    if let Some((Some(batch), (first, line))) = &agreed.batch
        && *batch != input.fingerprint
    {
        return Err(MergeError::Incomplete(format!(
            "{}:{line} is from batch {batch}, but {} is batch {}: not the requests file these results came from",
            first.display(),
            path.display(),
            input.fingerprint
        )));
    }
    let missing: Vec<&crate::Request> = input.requests.iter().filter(|r| !agreed.ids.contains_key(&r.key)).collect();
    if let Some(first) = missing.first() {
        return Err(MergeError::Incomplete(format!(
            "{} requests of {} have no result, the first {:?} on line {}",
            missing.len(),
            path.display(),
            first.key,
            first.line
        )));
    }
    Ok(())
}

/// Writes the records to a new file; one that appears meanwhile is not overwritten either.
fn write(out: &Path, records: &[Record]) -> Result<(), MergeError> {
    let failed = |source| MergeError::Write { path: out.to_owned(), source };
    let mut file = OpenOptions::new().write(true).create_new(true).open(out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            MergeError::OutExists { path: out.to_owned() }
        } else {
            failed(e)
        }
    })?;
    let mut text = String::new();
    for record in records {
        text.push_str(&record.text);
        text.push('\n');
    }
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, batch: &str, at: usize, shard: &str) -> String {
        format!(
            "{{\"id\":\"{id}\",\"status\":\"finished\",\"answer\":1,\"steps\":1,\"usage\":{{\"input_tokens\":0,\"output_tokens\":0}},\"error\":null,\"duration_ms\":1.0,\"retries\":0,\"batch\":\"{batch}\",\"line\":{at},\"shard\":\"{shard}\"}}\n"
        )
    }

    struct Files(tempfile::TempDir);

    impl Files {
        fn new() -> Self {
            Self(tempfile::tempdir().unwrap())
        }
        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        }
        fn out(&self) -> PathBuf {
            self.0.path().join("merged.jsonl")
        }
    }

    #[test]
    fn shards_join_in_request_order_without_their_shard_field() {
        let f = Files::new();
        let a = f.write("0.jsonl", &(line("c", "b1", 3, "0/2") + &line("a", "b1", 1, "0/2")));
        let b = f.write("1.jsonl", &line("b", "b1", 2, "1/2"));
        let merged = merge(&[a, b], &f.out(), None, false).unwrap();
        assert_eq!((merged.records, merged.batch.as_deref()), (3, Some("b1")));
        let text = std::fs::read_to_string(f.out()).unwrap();
        let ids: Vec<Value> = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone()).collect();
        assert_eq!(ids, vec!["a", "b", "c"]);
        assert!(!text.contains("shard"), "{text}");
        assert!(text.lines().all(|l| l.ends_with("\"line\":1}") || l.ends_with(",\"line\":2}") || l.ends_with(":3}")));
    }

    #[test]
    fn another_batch_is_named_by_file_and_line_and_nothing_is_written() {
        let f = Files::new();
        let a = f.write("0.jsonl", &line("a", "b1", 1, "0/2"));
        let b = f.write("1.jsonl", &(line("b", "b1", 2, "1/2") + &line("d", "b2", 4, "1/2")));
        let e = merge(&[a, b], &f.out(), None, false).unwrap_err().to_string();
        assert!(e.contains("1.jsonl:2: from batch b2") && e.contains("0.jsonl:1 is from batch b1"), "{e}");
        assert!(!f.out().exists());
    }

    #[test]
    fn overlapping_ids_are_refused() {
        let f = Files::new();
        let a = f.write("0.jsonl", &line("a", "b1", 1, "0/2"));
        let e = merge(&[a.clone(), a], &f.out(), None, false).unwrap_err().to_string();
        assert!(e.contains("0.jsonl:1: id \"a\" already has a result at") && e.contains("0.jsonl:1"), "{e}");
        assert!(!f.out().exists());
    }

    #[test]
    fn a_torn_line_a_foreign_line_and_another_split_are_refused() {
        let f = Files::new();
        let torn = f.write("t.jsonl", &(line("a", "b1", 1, "0/2") + "{\"id\":\"c\",\"sta"));
        let e = merge(&[torn], &f.out(), None, false).unwrap_err().to_string();
        assert!(e.contains("t.jsonl:2: a torn last line") && e.contains("same --out"), "{e}");
        let foreign = f.write("f.jsonl", "{\"id\":\"a\"}\n");
        let e = merge(&[foreign], &f.out(), None, false).unwrap_err().to_string();
        assert!(e.contains("f.jsonl:1: not a result line"), "{e}");
        let a = f.write("0.jsonl", &line("a", "b1", 1, "0/2"));
        let b = f.write("1.jsonl", &line("b", "b1", 2, "1/3"));
        let e = merge(&[a, b], &f.out(), None, false).unwrap_err().to_string();
        assert!(e.contains("1.jsonl:1: shard 1/3") && e.contains("split into 2"), "{e}");
        assert!(!f.out().exists());
    }

    #[test]
    fn an_ids_latest_line_in_one_input_supersedes_its_earlier_ones() {
        let f = Files::new();
        let waiting = line("a", "b1", 1, "0/2").replace("\"finished\"", "\"awaiting_approval\"");
        let a = f.write("0.jsonl", &(waiting + &line("c", "b1", 3, "0/2") + &line("a", "b1", 1, "0/2")));
        let b = f.write("1.jsonl", &line("b", "b1", 2, "1/2"));
        assert_eq!(merge(&[a, b], &f.out(), None, false).unwrap().records, 3);
        let text = std::fs::read_to_string(f.out()).unwrap();
        assert!(!text.contains("awaiting_approval") && text.lines().count() == 3, "{text}");
    }

    #[test]
    fn the_merged_file_is_never_overwritten() {
        let f = Files::new();
        let a = f.write("0.jsonl", &line("a", "b1", 1, "0/1"));
        std::fs::write(f.out(), "precious\n").unwrap();
        let e = merge(&[a], &f.out(), None, false).unwrap_err().to_string();
        assert!(e.contains("exists already"), "{e}");
        assert_eq!(std::fs::read_to_string(f.out()).unwrap(), "precious\n");
    }

    #[test]
    fn missing_shards_and_requests_are_named_unless_partial() {
        let f = Files::new();
        let a = f.write("0.jsonl", &line("a", "b1", 1, "0/3"));
        let e = merge(std::slice::from_ref(&a), &f.out(), None, false).unwrap_err().to_string();
        assert!(e.contains("no results from shard 1/3, 2/3") && e.contains("--partial"), "{e}");
        assert_eq!(merge(std::slice::from_ref(&a), &f.out(), None, true).unwrap().records, 1);
        let requests = f.write("r.jsonl", "{\"id\":\"a\",\"request\":\"x\"}\n{\"id\":\"z\",\"request\":\"y\"}\n");
        let fp = input::read(&requests, Shard::ALL, Scripts::Ignored).unwrap().fingerprint;
        let one = f.write("one.jsonl", &line("a", &fp, 1, "0/1"));
        let out = f.0.path().join("m2.jsonl");
        let e = merge(&[one], &out, Some(&requests), false).unwrap_err().to_string();
        assert!(e.contains("1 requests of") && e.contains("\"z\" on line 2"), "{e}");
        let other = f.write("other.jsonl", &line("a", "b1", 1, "0/1"));
        let e = merge(&[other], &out, Some(&requests), false).unwrap_err().to_string();
        assert!(e.contains("not the requests file"), "{e}");
    }
}
