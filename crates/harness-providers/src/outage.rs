//! Waiting out an outage: a circuit breaker shared by every request to one server. A request
//! that still finds the server down after its own retries (no connection, no answer in time, an
//! answer cut short, a 5xx) opens it; while it is open no new run starts and the waiting requests keep their
//! place; one of them probes the server, with backoff, and the first answer closes it. Past
//! the longest outage allowed the breaker stops for good, and the waiting requests end without
//! an answer, marked [`Guarded::stopped`] so that a batch leaves their runs unrun.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use harness_core::{ModelProvider, ModelReply, ProviderDecorator, ProviderError, RouterRequest};
use tokio::time::Instant;

/// How often one request may itself find the server down (not as a probe) before its failure
/// is its own: a request the server fails on every time, while it answers the others.
const OWN_FAILURES: u32 = 3;

/// The first wait between probes; each later one doubles, up to [`PROBE_CAP`].
const PROBE_FIRST: Duration = Duration::from_millis(500);

/// The longest wait between probes.
const PROBE_CAP: Duration = Duration::from_secs(30);

/// What the breaker tells an operator: opened, closed, stopped.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// Where the breaker stands.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Requests go.
    Closed,
    /// The server is down: requests wait; one at a time probes it.
    Open { since: Instant, probes: u32, next_probe: Instant, probing: bool },
    /// The outage outlasted the limit: nothing more is asked.
    Stopped,
}

/// What a request may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    Go,
    Probe,
    Stop,
}

/// A circuit breaker shared by every request to one server.
pub struct Breaker {
    max_outage: Duration,
    phase: Mutex<Phase>,
    changed: tokio::sync::Notify,
    stats: Mutex<OutageStats>,
    say: Say,
    /// Requests asked through the breaker that have not ended: waiting, probing or asking.
    in_flight: AtomicUsize,
}

/// What a breaker saw: outages, the time waited, and whether it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutageStats {
    /// Times the breaker opened.
    pub outages: u32,
    /// Time spent open, over every outage.
    pub waited: Duration,
    /// Whether the last outage outlasted the limit, so that the breaker stopped.
    pub stopped: bool,
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker").field("max_outage", &self.max_outage).finish_non_exhaustive()
    }
}

impl Breaker {
    /// A breaker that waits out outages of up to `max_outage`, saying what it does through `say`.
    pub fn new(max_outage: Duration, say: Say) -> Self {
        Self {
            max_outage,
            phase: Mutex::new(Phase::Closed),
            changed: tokio::sync::Notify::new(),
            stats: Mutex::new(OutageStats::default()),
            say,
            in_flight: AtomicUsize::new(0),
        }
    }

    /// The longest outage waited out.
    pub fn max_outage(&self) -> Duration {
        self.max_outage
    }

    /// What the breaker saw so far.
    pub fn stats(&self) -> OutageStats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while the breaker is open: `true` once it is closed, or when it is time to probe
    /// and no request is left to do it (the run started then probes); `false` when it stopped.
    /// A batch asks this before it starts a run.
    pub async fn ready(&self) -> bool {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let until = match self.expire() {
                Phase::Closed => return true,
                Phase::Stopped => return false,
                Phase::Open { next_probe, probing: false, .. }
                    if Instant::now() >= next_probe && self.in_flight.load(Ordering::SeqCst) == 0 =>
                {
                    return true;
                }
                // Until the next probe is due; past that, until a change (a request that ends
                // wakes this) or the limit.
                Phase::Open { since, next_probe, probing, .. } if !probing && Instant::now() < next_probe => {
                    next_probe.min(since + self.max_outage)
                }
                Phase::Open { since, .. } => since + self.max_outage,
            };
            let _ = tokio::time::timeout_at(until, changed).await;
        }
    }

    /// The phase, stopped first if the outage has outlasted the limit and no probe is out.
    fn expire(&self) -> Phase {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        if let Phase::Open { since, probing: false, .. } = *phase
            && Instant::now() >= since + self.max_outage
        {
            *phase = Phase::Stopped;
            drop(phase);
            self.stop(since);
            return Phase::Stopped;
        }
        *phase
    }

    /// Waits for this request's turn: go, probe, or stop; sets `waited` before any wait.
    async fn admit(&self, waited: &AtomicBool) -> Admit {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let until = match self.expire() {
                Phase::Closed => return Admit::Go,
                Phase::Stopped => return Admit::Stop,
                Phase::Open { since, probes, next_probe, probing: false } if Instant::now() >= next_probe => {
                    let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
                    // Another request may have taken the probe since `expire` looked.
                    if let Phase::Open { probing: false, .. } = *phase {
                        *phase = Phase::Open { since, probes, next_probe, probing: true };
                        return Admit::Probe;
                    }
                    continue;
                }
                Phase::Open { since, next_probe, probing: false, .. } => next_probe.min(since + self.max_outage),
                Phase::Open { since, .. } => since + self.max_outage,
            };
            waited.store(true, Ordering::Relaxed);
            let _ = tokio::time::timeout_at(until, changed).await;
        }
    }

    /// A probe that ended without a verdict (its run's deadline cancelled it): another may go.
    fn probe_abandoned(&self) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        if let Phase::Open { since, probes, next_probe, probing: true } = *phase {
            *phase = Phase::Open { since, probes, next_probe, probing: false };
            drop(phase);
            self.changed.notify_waiters();
        }
    }

    /// The server answered: closes the breaker if it was open.
    fn answered(&self) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        if let Phase::Open { since, .. } = *phase {
            *phase = Phase::Closed;
            drop(phase);
            let waited = since.elapsed();
            self.stats.lock().unwrap_or_else(PoisonError::into_inner).waited += waited;
            (self.say)(&format!("the model server answers again after {:.1} s; going on", waited.as_secs_f64()));
            self.changed.notify_waiters();
        }
    }

    /// A request found the server down after its retries: opens the breaker, or, for a probe,
    /// sets the next probe further off.
    fn down(&self, probe: bool, why: &str) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match *phase {
            Phase::Closed => {
                *phase = Phase::Open { since: now, probes: 0, next_probe: now + PROBE_FIRST, probing: false };
                drop(phase);
                self.stats.lock().unwrap_or_else(PoisonError::into_inner).outages += 1;
                (self.say)(&format!(
                    "the model server looks down ({why}); no new run starts, and the waiting requests keep their place while it is probed, for up to {:.0} s",
                    self.max_outage.as_secs_f64()
                ));
            }
            Phase::Open { since, probes, .. } if probe => {
                let wait = PROBE_FIRST.saturating_mul(2u32.saturating_pow(probes.min(16))).min(PROBE_CAP);
                *phase = Phase::Open { since, probes: probes + 1, next_probe: now + wait, probing: false };
                drop(phase);
                self.changed.notify_waiters();
            }
            Phase::Open { .. } | Phase::Stopped => {}
        }
    }

    fn stop(&self, since: Instant) {
        {
            let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
            stats.waited += since.elapsed();
            stats.stopped = true;
        }
        (self.say)(&format!(
            "the model server has not answered for {:.0} s: giving up on it",
            self.max_outage.as_secs_f64()
        ));
        self.changed.notify_waiters();
    }
}

/// A probe out: when dropped before [`Breaker::answered`] or [`Breaker::down`] had their say
/// (a run's deadline cancelled the request), the breaker lets another request probe.
struct ProbeOut<'a>(Option<&'a Breaker>);

impl Drop for ProbeOut<'_> {
    fn drop(&mut self) {
        if let Some(breaker) = self.0 {
            breaker.probe_abandoned();
        }
    }
}

/// Counts a request in flight for as long as it lives (a deadline may drop it anywhere); its
/// end wakes whoever waits to start a run, who may have to probe now.
struct InFlight<'a>(&'a Breaker);

impl<'a> InFlight<'a> {
    fn new(breaker: &'a Breaker) -> Self {
        breaker.in_flight.fetch_add(1, Ordering::SeqCst);
        Self(breaker)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// A provider whose requests go through a [`Breaker`]: a request that finds the server down
/// waits for it and is asked again, rather than failing its run.
pub struct Guarded<'a> {
    inner: &'a dyn ModelProvider,
    breaker: &'a Breaker,
    stopped: AtomicBool,
    waited: AtomicBool,
}

impl<'a> Guarded<'a> {
    /// `inner`'s requests, through `breaker`.
    pub fn new(inner: &'a dyn ModelProvider, breaker: &'a Breaker) -> Self {
        Self { inner, breaker, stopped: AtomicBool::new(false), waited: AtomicBool::new(false) }
    }

    /// Whether a request of this provider ended because the breaker stopped: its run did not
    /// fail, it was cut short by the outage.
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Whether a request of this provider found the server down or waited for it: time its
    /// run spent on the outage rather than on its work.
    pub fn waited(&self) -> bool {
        self.waited.load(Ordering::Relaxed)
    }

    fn stop_error(&self, retries: u32, last: Option<&ProviderError>) -> ProviderError {
        self.stopped.store(true, Ordering::Relaxed);
        let last = last.map_or_else(String::new, |e| format!("; the last failure: {}", e.message));
        ProviderError {
            message: format!(
                "the model server did not come back within {:.0} s{last}",
                self.breaker.max_outage.as_secs_f64()
            ),
            retries,
            outage: true,
        }
    }
}

#[async_trait]
impl ProviderDecorator for Guarded<'_> {
    fn inner(&self) -> &dyn ModelProvider {
        self.inner
    }

    /// Asks through the breaker. A failure that looks like the server down opens it (or, for a
    /// probe, keeps it open) and the request waits to be asked again; every extra request
    /// counts in the reply's `retries`.
    async fn complete_decorated(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        let _asking = InFlight::new(self.breaker);
        let (mut retries, mut own) = (0, 0);
        let mut last = None;
        loop {
            let probe = match self.breaker.admit(&self.waited).await {
                Admit::Go => false,
                Admit::Probe => true,
                Admit::Stop => return Err(self.stop_error(retries, last.as_ref())),
            };
            let mut out = ProbeOut(probe.then_some(self.breaker));
            let asked = self.inner.complete(request).await;
            out.0 = None;
            match asked {
                Ok(mut reply) => {
                    self.breaker.answered();
                    reply.retries += retries;
                    return Ok(reply);
                }
                Err(e) if e.outage && (probe || own < OWN_FAILURES) => {
                    self.waited.store(true, Ordering::Relaxed);
                    own += u32::from(!probe);
                    retries += e.retries + 1;
                    self.breaker.down(probe, &e.message);
                    last = Some(e);
                }
                Err(mut e) => {
                    if !e.outage {
                        // The server answered, if only to refuse this request.
                        self.breaker.answered();
                    }
                    e.retries += retries;
                    return Err(e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use harness_core::{Message, ToolChoice};

    use super::*;

    /// A server that is down for its first `down` requests, then answers; or that refuses.
    struct Server {
        down: u32,
        asked: AtomicU32,
        refuses: bool,
    }

    #[async_trait]
    impl ModelProvider for Server {
        fn name(&self) -> &str {
            "server"
        }

        async fn complete(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
            let n = self.asked.fetch_add(1, Ordering::SeqCst);
            if self.refuses {
                return Err(ProviderError::new("400"));
            }
            if n < self.down {
                return Err(ProviderError { retries: 1, outage: true, ..ProviderError::new("connection refused") });
            }
            Ok(ModelReply::default())
        }
    }

    fn server(down: u32, refuses: bool) -> Server {
        Server { down, asked: AtomicU32::new(0), refuses }
    }

    fn quiet(max_outage: Duration) -> Breaker {
        Breaker::new(max_outage, Arc::new(|_: &str| {}))
    }

    async fn ask(guarded: &Guarded<'_>) -> Result<ModelReply, ProviderError> {
        let conversation = [Message::User { content: "x".into() }];
        guarded
            .complete(RouterRequest { conversation: &conversation, tools: &[], tool_choice: &ToolChoice::Required })
            .await
    }

    #[tokio::test]
    async fn requests_that_find_the_server_down_wait_and_are_asked_again() {
        let (server, breaker) = (server(4, false), quiet(Duration::from_secs(60)));
        let (a, b) = (Guarded::new(&server, &breaker), Guarded::new(&server, &breaker));
        let (ra, rb) = tokio::join!(ask(&a), ask(&b));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        // Each failed request made one retry of its own and is then asked again: two a failure.
        assert_eq!(ra.retries + rb.retries, 4 * 2);
        assert_eq!(server.asked.load(Ordering::SeqCst), 6);
        let stats = breaker.stats();
        assert_eq!((stats.outages, stats.stopped), (1, false));
        assert!(breaker.ready().await && !a.stopped() && !b.stopped());
    }

    #[tokio::test]
    async fn past_the_longest_outage_the_breaker_stops_and_says_the_request_was_cut_short() {
        let (server, breaker) = (server(u32::MAX, false), quiet(Duration::from_millis(300)));
        let guarded = Guarded::new(&server, &breaker);
        let e = ask(&guarded).await.unwrap_err();
        assert!(e.outage && guarded.stopped(), "{e:?}");
        assert!(e.message.contains("did not come back") && e.message.contains("connection refused"), "{}", e.message);
        assert!(breaker.stats().stopped);
        assert!(!breaker.ready().await, "no run starts once it stopped");
        assert!(ask(&Guarded::new(&server, &breaker)).await.is_err());
    }

    #[tokio::test]
    async fn a_refusal_is_the_request_s_own_and_opens_nothing() {
        let (server, breaker) = (server(0, true), quiet(Duration::from_secs(60)));
        let guarded = Guarded::new(&server, &breaker);
        let e = ask(&guarded).await.unwrap_err();
        assert_eq!((e.message.as_str(), guarded.stopped(), breaker.stats().outages), ("400", false, 0));
        assert_eq!(server.asked.load(Ordering::SeqCst), 1);
    }
}
