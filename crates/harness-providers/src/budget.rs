//! A retry budget shared by every request of a batch: retries cost tokens, so past a share of
//! the requests made, requests stop being retried (and the provider says so once).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Retries a batch may make: at most `share` of the requests made so far, and never fewer than
/// [`RetryBudget::FLOOR`], so that a flaky start of a batch is not refused its first retries.
#[derive(Debug)]
pub struct RetryBudget {
    share: f64,
    requests: AtomicU64,
    retries: AtomicU64,
    said: AtomicBool,
}

/// Where a budget stood when it refused a retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spent {
    /// Retries made.
    pub retries: u64,
    /// Requests made (first attempts).
    pub requests: u64,
    /// The share allowed.
    pub share: f64,
}

// The share is a finite number (the CLI checks it), so equality is an equivalence.
impl Eq for Spent {}

impl RetryBudget {
    /// The retries always allowed, whatever the share: a batch's first few requests would
    /// otherwise have none.
    pub const FLOOR: u64 = 10;

    /// A budget of `share` retries per request made (0.5: one retry for every two requests).
    pub fn new(share: f64) -> Self {
        Self { share, requests: AtomicU64::new(0), retries: AtomicU64::new(0), said: AtomicBool::new(false) }
    }

    /// Counts a request's first attempt.
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one retry from the budget, or says where it stands when none is left.
    pub(crate) fn spend(&self) -> Result<(), Spent> {
        let requests = self.requests.load(Ordering::Relaxed);
        let allowed = ((requests as f64 * self.share).floor() as u64).max(Self::FLOOR);
        let taken = self.retries.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| (r < allowed).then_some(r + 1));
        taken.map(|_| ()).map_err(|retries| Spent { retries, requests, share: self.share })
    }

    /// Whether this is the first refusal (the one worth a notice).
    pub(crate) fn first_refusal(&self) -> bool {
        !self.said.swap(true, Ordering::Relaxed)
    }

    /// Retries made so far.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Whether a retry has been refused.
    pub fn spent(&self) -> bool {
        self.said.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_allows_its_share_of_the_requests_and_its_floor() {
        let budget = RetryBudget::new(0.5);
        for _ in 0..RetryBudget::FLOOR {
            assert_eq!(budget.spend(), Ok(()));
        }
        let refused = budget.spend().unwrap_err();
        assert_eq!((refused.retries, refused.requests), (RetryBudget::FLOOR, 0));
        for _ in 0..30 {
            budget.request();
        }
        // 15 allowed over 30 requests: 5 more.
        assert_eq!((0..10).filter(|_| budget.spend().is_ok()).count(), 5);
        assert!(budget.first_refusal() && !budget.first_refusal());
    }
}
