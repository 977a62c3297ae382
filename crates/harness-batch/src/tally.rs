//! Counts of the runs a batch made: statuses, durations, tokens and retries.

use harness_core::{ErrorCode, RunStatus, Usage};

/// Counts of the runs this invocation made.
#[derive(Debug, Default)]
pub struct Tally {
    /// Runs that called finish.
    pub finished: usize,
    /// Runs that spent their step budget.
    pub step_budget: usize,
    /// Runs that reached their time limit.
    pub time_budget: usize,
    /// Runs that failed (provider or trace failure).
    pub failed: usize,
    /// Of those, runs that failed for the provider's reasons (`provider_error`).
    pub provider_failed: usize,
    /// Runs stopped before a call that waits for the operator's approval.
    pub awaiting: usize,
    /// Runs cut short when the batch stopped for an outage: no line, they run on a resume.
    pub unrun: usize,
    /// Each run's wall time, in milliseconds.
    pub durations_ms: Vec<f64>,
    /// Tokens over every run.
    pub usage: Usage,
    /// Model requests retried over every run.
    pub retries: u64,
}

impl Tally {
    /// Counts one run; `error` is its error's code, if any.
    pub fn add(&mut self, status: RunStatus, error: Option<ErrorCode>, duration_ms: f64, usage: Usage, retries: u32) {
        if status == RunStatus::Failed && error == Some(ErrorCode::ProviderError) {
            self.provider_failed += 1;
        }
        match status {
            RunStatus::Finished => self.finished += 1,
            RunStatus::StepBudgetExhausted => self.step_budget += 1,
            RunStatus::TimeBudgetExhausted => self.time_budget += 1,
            // Ends the model brought about, like a failure: the run could not go on.
            RunStatus::Failed | RunStatus::ContextExhausted | RunStatus::ReplyTruncated => self.failed += 1,
            RunStatus::AwaitingApproval => self.awaiting += 1,
        }
        self.durations_ms.push(duration_ms);
        self.usage.add(usage);
        self.retries += u64::from(retries);
    }

    /// Runs counted.
    pub fn done(&self) -> usize {
        self.durations_ms.len()
    }

    /// "3 failed, 1 out of budget", or nothing when every run finished.
    pub fn trouble(&self) -> String {
        let mut parts = Vec::new();
        if self.failed > 0 {
            parts.push(format!("{} failed", self.failed));
        }
        let budget = self.step_budget + self.time_budget;
        if budget > 0 {
            parts.push(format!("{budget} out of budget"));
        }
        if self.awaiting > 0 {
            parts.push(format!("{} awaiting approval", self.awaiting));
        }
        parts.join(", ")
    }

    /// The duration at percentile `p` (nearest rank), in milliseconds.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        let mut sorted = self.durations_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted.get(rank.max(1) - 1).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut t = Tally::default();
        assert_eq!(t.percentile(50.0), None);
        for ms in (1..=100).rev() {
            t.add(RunStatus::Finished, None, f64::from(ms), Usage::default(), 0);
        }
        assert_eq!(
            (t.percentile(50.0), t.percentile(95.0), t.percentile(100.0)),
            (Some(50.0), Some(95.0), Some(100.0))
        );
        let usage = Usage { input_tokens: 3, output_tokens: 1, cached_input_tokens: 0 };
        t.add(RunStatus::Failed, Some(ErrorCode::ProviderError), 1.0, usage, 2);
        t.add(RunStatus::Failed, Some(ErrorCode::TraceError), 1.0, Usage::default(), 0);
        assert_eq!(t.trouble(), "2 failed");
        assert_eq!(t.provider_failed, 1);
        assert_eq!((t.usage.input_tokens, t.retries), (3, 2));
    }
}
