//! `--rpm`: model requests spread evenly over each minute, across every run of the batch.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use harness_core::{ModelProvider, ModelReply, ProviderDecorator, ProviderError, RouterRequest};
use tokio::time::Instant;

/// Hands out request slots `60 / rpm` seconds apart; the first is now.
#[derive(Debug)]
pub(crate) struct Pace {
    interval: Duration,
    next: Mutex<Option<Instant>>,
}

impl Pace {
    /// At most `rpm` requests in any minute, none closer than `60 / rpm` seconds.
    pub(crate) fn per_minute(rpm: u32) -> Self {
        Self { interval: Duration::from_secs(60) / rpm.max(1), next: Mutex::new(None) }
    }

    /// Waits for this request's slot.
    async fn wait(&self) {
        let slot = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            let slot = next.map_or(now, |n| n.max(now));
            *next = Some(slot + self.interval);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

/// A provider whose requests wait for their slot first.
pub(crate) struct Paced<'a> {
    /// The provider asked.
    pub(crate) inner: &'a dyn ModelProvider,
    /// The slots, shared by every run.
    pub(crate) pace: &'a Pace,
}

#[async_trait]
impl ProviderDecorator for Paced<'_> {
    fn inner(&self) -> &dyn ModelProvider {
        self.inner
    }

    async fn complete_decorated(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        self.pace.wait().await;
        self.inner.complete(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On tokio's paused clock, which moves only when every task waits: the spacing is exact,
    /// and the test neither sleeps nor depends on how busy the machine is.
    #[tokio::test(start_paused = true)]
    async fn slots_are_spaced_evenly() {
        // 6000 a minute: 10 ms apart, the first at once.
        let pace = Pace::per_minute(6000);
        let start = Instant::now();
        pace.wait().await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        for n in 1..=3 {
            pace.wait().await;
            assert_eq!(start.elapsed(), Duration::from_millis(10 * n));
        }
    }
}
