//! The one retry policy of every request the harness sends to a server, a model provider's or
//! an MCP server's: so many retries, each after a doubling wait with jitter, or after the wait
//! the server asked for (`Retry-After`) when it is no longer than the policy allows.
//!
//! Only the decision lives here. What is worth another try, what is reported, and a budget
//! shared between requests stay with the caller, which knows its protocol.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

/// How many retries, and how long to wait before each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub retries: u32,
    /// The wait before the first retry; each later one doubles it, with jitter.
    pub backoff: Duration,
    /// The longest single wait; a server asking for more ends the request instead.
    pub max_wait: Duration,
}

/// What follows a failed attempt that is worth another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextTry {
    /// Try again after `wait`.
    After {
        /// How long to wait first.
        wait: Duration,
        /// Whether the wait is the server's own (`Retry-After`).
        server_asked: bool,
    },
    /// Every retry has been taken.
    Exhausted,
    /// The server asked for this wait, longer than [`RetryPolicy::max_wait`].
    WaitTooLong(Duration),
}

impl RetryPolicy {
    /// What follows when `taken` retries are behind and the server asked for `asked`, if any.
    pub fn next(&self, taken: u32, asked: Option<Duration>) -> NextTry {
        if taken >= self.retries {
            return NextTry::Exhausted;
        }
        match asked {
            Some(wait) if wait > self.max_wait => NextTry::WaitTooLong(wait),
            Some(wait) => NextTry::After { wait, server_asked: true },
            None => NextTry::After { wait: self.backoff(taken), server_asked: false },
        }
    }

    /// The wait before retry `n` (from 0): doubling from `backoff`, capped at `max_wait`, with
    /// up to half of it taken off at random so that many clients do not retry in step.
    pub fn backoff(&self, n: u32) -> Duration {
        let full = self.backoff.saturating_mul(2u32.saturating_pow(n.min(20))).min(self.max_wait);
        let jitter = std::collections::hash_map::RandomState::new().build_hasher().finish() % 1000;
        full.mul_f64(0.5 + jitter as f64 / 2000.0)
    }
}

/// Reads a `Retry-After` value: delta-seconds (a fraction too, as some servers send), or an
/// HTTP date in any of the three forms RFC 9110 has recipients accept; a date past is no wait.
pub fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy =
        RetryPolicy { retries: 3, backoff: Duration::from_millis(100), max_wait: Duration::from_secs(1) };

    #[test]
    fn retries_wait_as_asked_up_to_the_cap_then_stop() {
        let asked = Some(Duration::from_millis(700));
        assert_eq!(POLICY.next(0, asked), NextTry::After { wait: Duration::from_millis(700), server_asked: true });
        assert_eq!(POLICY.next(1, Some(Duration::from_secs(2))), NextTry::WaitTooLong(Duration::from_secs(2)));
        assert!(matches!(POLICY.next(2, None), NextTry::After { server_asked: false, .. }));
        assert_eq!(POLICY.next(3, None), NextTry::Exhausted);
        assert_eq!(RetryPolicy { retries: 0, ..POLICY }.next(0, asked), NextTry::Exhausted);
    }

    #[test]
    fn backoff_doubles_within_its_jitter_and_cap() {
        for n in 0..6 {
            let full = (POLICY.backoff * 2u32.pow(n)).min(POLICY.max_wait);
            let wait = POLICY.backoff(n);
            assert!(wait >= full / 2 && wait <= full, "retry {n}: {wait:?} not within half of {full:?}");
        }
        assert!(POLICY.backoff(u32::MAX) <= POLICY.max_wait);
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        assert_eq!(retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:37 GMT"), Some(Duration::ZERO));
        // RFC 850 and asctime dates, which RFC 9110 also has recipients read.
        assert_eq!(retry_after("Sunday, 06-Nov-94 08:49:37 GMT"), Some(Duration::ZERO));
        assert_eq!(retry_after("Sun Nov  6 08:49:37 1994"), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(100));
        let wait = retry_after(&later).unwrap();
        assert!(wait > Duration::from_secs(90) && wait <= Duration::from_secs(100), "{later}: {wait:?}");
        assert_eq!(retry_after("soon"), None);
        assert_eq!(retry_after("-1"), None);
    }
}
