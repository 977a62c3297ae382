//! What stops an eval before it scores: a file that cannot be read, or lines that are not what
//! they should be.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A line of a tasks or answers file that is not usable, with the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// Line number, from 1.
    pub line: usize,
    /// The field at fault (`expect.tolerance`), or empty when the line as a whole is.
    pub field: String,
    /// What is wrong, and how to write it.
    pub problem: String,
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "line {}: {}", self.line, self.problem)
        } else {
            write!(f, "line {}: field \"{}\": {}", self.line, self.field, self.problem)
        }
    }
}

/// Why an eval cannot go on: every one is the operator's to fix (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Lines of the file are not tasks (or answers); nothing was run or scored.
    #[error("{}: {} bad line{}:\n{}", path.display(), lines.len(), if lines.len() == 1 { "" } else { "s" }, list(path, lines))]
    BadLines {
        /// The file.
        path: PathBuf,
        /// Each bad line, in file order.
        lines: Vec<BadLine>,
    },
    /// The file holds no task at all.
    #[error("{}: no tasks; a line is {{\"id\": ..., \"request\": \"...\", \"expect\": {{\"number\": 42}}}} (docs/eval.md)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

fn list(path: &std::path::Path, lines: &[BadLine]) -> String {
    let name = path.display();
    lines.iter().map(|b| format!("  {name}:{b}")).collect::<Vec<_>>().join("\n")
}
