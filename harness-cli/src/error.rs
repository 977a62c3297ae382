//! The two kinds of failure the command reports, and their exit codes.

/// A failure of the command itself (not of a run, which has its own statuses).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// A bad flag, a missing or unreadable file, an invalid config: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Anything else: exit 1.
    #[error("{0}")]
    Failure(String),
    /// The operator's policy refused what was asked (`tools call`): exit 4, a run's code for a
    /// call that waits for approval.
    #[error("{0}")]
    Refused(String),
}

impl CliError {
    /// The process exit code for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Failure(_) => 1,
            Self::Refused(_) => 4,
        }
    }
}

impl From<harness_batch::BatchError> for CliError {
    fn from(e: harness_batch::BatchError) -> Self {
        if e.is_usage() { Self::Usage(e.to_string()) } else { Self::Failure(e.to_string()) }
    }
}
