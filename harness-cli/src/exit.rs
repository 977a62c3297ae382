//! The exit codes of `harness run`, defined once: `run --help` lists them from here, the run's
//! status maps to them here, and the tidy check (`cargo xtask tidy`) holds README.md and
//! docs/operators.md to this list, both ways.

use harness_core::RunStatus;

/// How `harness run` exits. The tidy check reads the `Self::NAME => (CODE, "meaning")` arms of
/// [`RunExit::describe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunExit {
    /// The router called `finish`.
    Finished,
    /// The provider or the trace failed.
    Failed,
    /// A bad flag or configuration.
    Usage,
    /// The step or time budget ran out.
    BudgetExhausted,
    /// A call waits for the operator.
    AwaitingApproval,
    /// The model's context ran out, or its replies kept being cut.
    ContextExhausted,
}

impl RunExit {
    /// Every exit code, in order.
    pub(crate) const ALL: [RunExit; 6] = [
        Self::Finished,
        Self::Failed,
        Self::Usage,
        Self::BudgetExhausted,
        Self::AwaitingApproval,
        Self::ContextExhausted,
    ];

    /// The code and what it means, as `run --help` says it.
    pub(crate) fn describe(self) -> (u8, &'static str) {
        match self {
            Self::Finished => (0, "the run finished (the router called finish)"),
            Self::Failed => (1, "the run failed: provider error (after its retries), trace error, plugin load failure"),
            Self::Usage => (
                2,
                "usage or configuration error: a bad flag, a missing or unreadable --script or --config file, an invalid config, a missing API key or model name",
            ),
            Self::BudgetExhausted => (3, "the step budget or the --max-seconds time budget was spent without finish"),
            Self::AwaitingApproval => (
                4,
                "a call waits for approval: the run stopped before it; resume with --resume TRACE --approve ID (or --deny ID)",
            ),
            Self::ContextExhausted => (
                5,
                "the model's context ran out (context_exhausted), or its replies were cut at the token limit --max-truncated times in a row (reply_truncated)",
            ),
        }
    }

    /// The exit code of a run that ended with `status`.
    pub(crate) fn of(status: RunStatus) -> Self {
        match status {
            RunStatus::Finished => Self::Finished,
            RunStatus::StepBudgetExhausted | RunStatus::TimeBudgetExhausted => Self::BudgetExhausted,
            RunStatus::Failed => Self::Failed,
            RunStatus::AwaitingApproval => Self::AwaitingApproval,
            RunStatus::ContextExhausted | RunStatus::ReplyTruncated => Self::ContextExhausted,
        }
    }

    /// The process's exit code.
    pub(crate) fn code(self) -> u8 {
        self.describe().0
    }

    /// The list `run --help` ends with.
    pub(crate) fn help() -> String {
        let mut text = String::from("Exit codes:");
        for exit in Self::ALL {
            let (code, meaning) = exit.describe();
            text.push_str(&format!("\n  {code}  {meaning}"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_in_order() {
        let codes: Vec<u8> = RunExit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5]);
        assert!(RunExit::help().contains("\n  5  the model's context ran out"));
    }
}
