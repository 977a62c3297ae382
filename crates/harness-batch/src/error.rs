//! What can stop a batch (a run's own failure is a result line, never one of these).

use std::io;
use std::path::PathBuf;

/// A failure of the batch itself: its files, not its runs.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The requests file cannot be read.
    #[error("cannot read the requests file {}: {source}", path.display())]
    ReadRequests {
        /// The requests file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The results file cannot be opened or read.
    #[error("cannot open the results file {}: {source}", path.display())]
    OpenResults {
        /// The results file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Another batch holds the results file's lock.
    #[error(
        "another harness batch is writing {} (it holds the file's lock); wait for it to end, or give each worker its own --out",
        path.display()
    )]
    ResultsLocked {
        /// The results file.
        path: PathBuf,
    },
    /// A torn last line could not be cut off.
    #[error("cannot repair the results file {}: {source}", path.display())]
    RepairResults {
        /// The results file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A result line could not be written.
    #[error("cannot write to the results file {}: {source}", path.display())]
    WriteResults {
        /// The results file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A result could not be encoded as JSON.
    #[error("cannot encode the result of {id}: {source}")]
    EncodeResult {
        /// The request's id.
        id: String,
        /// Why.
        source: serde_json::Error,
    },
    /// The `--script` file cannot be read.
    #[error("cannot read script {}: {source}", path.display())]
    ReadScript {
        /// The script file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The `--script` file is not a list of replies (the message names the file and line).
    #[error("{0}")]
    BadScript(String),
    /// The traces directory cannot be created.
    #[error("cannot create the traces directory {}: {source}", path.display())]
    TracesDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The approvals file cannot be read.
    #[error("cannot read the approvals file {}: {source}", path.display())]
    ReadApprovals {
        /// The approvals file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Lines of the approvals file that cannot be used, one a line, each naming the file and line.
    #[error("{0}\nnothing ran: fix those lines of the approvals file and run the batch again")]
    BadApprovals(String),
    /// A run awaiting approval was answered, but its trace cannot be resumed.
    #[error(
        "{}:{line}: request {id:?} awaits approval, but its trace {} cannot be resumed: {problem}; restore the trace, or remove the request's line from the approvals file (or its result line, to run it again from the start)",
        results.display(), trace.display()
    )]
    Unresumable {
        /// The results file.
        results: PathBuf,
        /// The awaiting result line.
        line: usize,
        /// The request's id.
        id: String,
        /// The trace.
        trace: PathBuf,
        /// Why.
        problem: String,
    },
}

impl BatchError {
    /// Whether the operator's input is at fault (a file to fix or a flag to change), rather
    /// than the batch failing part-way (a write that did not happen).
    pub fn is_usage(&self) -> bool {
        !matches!(self, Self::RepairResults { .. } | Self::WriteResults { .. } | Self::EncodeResult { .. })
    }
}

/// This crate's results.
pub type Result<T, E = BatchError> = std::result::Result<T, E>;
